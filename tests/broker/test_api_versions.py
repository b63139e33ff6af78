"""kafkasim's ApiVersions answer against Kafka 3.9.1's, captured from a ZooKeeper-mode broker
(tests/conformance/kafka-3.9.1-zk-apiversions.json, 62 keys): every key kafkasim advertises has
exactly Kafka's [min, max], and the keys it does not advertise yet are exactly NOT_YET below —
so the table cannot drift, and a key implemented later must leave NOT_YET in the same change.

The KafkaApis is built with stub components: registration (what ApiVersions lists) needs none
of them, and the answer is the handler's own (handle_api_versions), as sent on the wire.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from kafkasim.broker.config import BrokerConfig
from kafkasim.broker.kafka_apis import KafkaApis
from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.api_versions import ApiVersionsRequest
from kafkasim.protocol.messages.headers import RequestHeader

pytestmark = pytest.mark.unit

KAFKA_TABLE = Path(__file__).resolve().parents[1] / "conformance" / "kafka-3.9.1-zk-apiversions.json"

# Kafka 3.9.1 advertises these in ZooKeeper mode; kafkasim does not (yet). Each line says why.
# Empty since SASL (17, 36) and ACLs (29, 30, 31) came: all 62 of Kafka's keys are advertised.
NOT_YET: set[int] = set()


class _Stub:
    """Any attribute, any call: a component KafkaApis only stores at construction."""

    def __getattr__(self, name: str) -> Any:
        return _Stub()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _Stub()


def kafka_table() -> dict[int, tuple[int, int]]:
    data = json.loads(KAFKA_TABLE.read_text())
    return {int(k): (lo, hi) for k, (lo, hi) in data["api_keys"].items()}


def advertised(version: int = 3) -> dict[int, tuple[int, int]]:
    s: Any = _Stub()
    apis = KafkaApis(s, BrokerConfig(host="h", port=9092, log_dir="logs"), s, s, s, s, s, s, s, s, lambda: 0)
    header = RequestHeader(request_api_key=A.API_VERSIONS, request_api_version=version, correlation_id=1,
                           client_id="t")
    resp = asyncio.run(apis.handle_api_versions(header, ApiVersionsRequest(client_software_name="t",
                                                                           client_software_version="1")))
    assert resp.error_code == E.NONE
    return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}


def test_the_captured_table_is_kafkas_62_keys() -> None:
    table = kafka_table()
    assert len(table) == 62
    assert table[A.PRODUCE] == (0, 11) and table[A.FETCH] == (0, 17) and table[A.API_VERSIONS] == (0, 4)


def test_every_advertised_key_has_kafkas_range() -> None:
    ours, theirs = advertised(), kafka_table()
    assert not set(ours) - set(theirs), "advertised keys a ZooKeeper-mode Kafka 3.9.1 broker does not have"
    wrong = {k: (ours[k], theirs[k]) for k in ours if ours[k] != theirs[k]}
    assert wrong == {}, "kafkasim's range vs Kafka's: " + ", ".join(
        f"{A.api_info(k).name} {o} != {t}" for k, (o, t) in sorted(wrong.items()))


def test_the_keys_not_advertised_are_exactly_the_listed_ones() -> None:
    missing = set(kafka_table()) - set(advertised())
    assert missing == NOT_YET, (f"not advertised but not listed: {sorted(missing - NOT_YET)}; "
                                f"listed but advertised now (drop them from NOT_YET): {sorted(NOT_YET - missing)}")
