"""Client quotas in the real world, on by default in `kafkasim serve` as Kafka always enforces
them: request_percentage measured on the real clock (a client flooding Metadata goes over 0.01 %
and is answered with a throttle time of at most one window, then its channel is muted), and
producer_byte_rate; `--config client.quotas=false` turns them off. Raw requests over a socket, at
versions whose responses carry throttle_time_ms."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkasim.protocol.messages.alter_client_quotas import AlterClientQuotasRequest as Q
from kafkasim.protocol.messages.create_topics import CreateTopicsRequest
from kafkasim.protocol.messages.metadata import MetadataRequest
from kafkasim.protocol.messages.produce import ProduceRequest
from kafkasim.records.batch import Record, build_batch
from tests.conformance.wire import Connection
from tests.serve.conftest import ServedBroker, served_broker, wait_until

pytestmark = pytest.mark.real


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[ServedBroker]:
    with served_broker(tmp_path / "logs", {"num.partitions": 1}) as b:
        yield b


@pytest.fixture
def broker_without_quotas(tmp_path: Path) -> Iterator[ServedBroker]:
    with served_broker(tmp_path / "logs", {"num.partitions": 1, "client.quotas": "false"}) as b:
        yield b


def _set_quota(b: ServedBroker, client_id: str, key: str, value: float) -> None:
    w = Connection("127.0.0.1", b.port, "admin")
    try:
        EN = Q.EntryData
        r = w.send(Q(entries=[EN(entity=[EN.EntityData(entity_type="client-id", entity_name=client_id)],
                                 ops=[EN.OpData(key=key, value=value, remove=False)])], validate_only=False), 0)
        assert r.entries[0].error_code == 0, r
    finally:
        w.close()
    _until_read(b, client_id)


def _until_read(b: ServedBroker, client_id: str, timeout_s: float = 30.0) -> None:
    """Wait until the broker has read the change from /config/changes (its trace says so). A
    broker with client.quotas=false reads none: there, one second, as a client would wait."""
    if "client.quotas=false" in b.proc.args:
        time.sleep(1.0)
        return
    entity = json.dumps(f"clients/{client_id}")
    wait_until(lambda: any('"quota_config_changed"' in line and entity in line
                           for line in b.trace.read_text().splitlines()),
               timeout_s, f"the broker reading the quota of {client_id}")


def _metadata_flood(port: int, requests: int) -> list[tuple[int, float]]:
    """(throttle_time_ms, seconds the request took) per Metadata v8 request."""
    w = Connection("127.0.0.1", port, "greedy")
    out = []
    try:
        for _ in range(requests):
            started = time.monotonic()
            r = w.send(MetadataRequest(topics=None, allow_auto_topic_creation=False), 8)
            out.append((r.throttle_time_ms, time.monotonic() - started))
    finally:
        w.close()
    return out


def test_a_client_over_its_request_percentage_is_throttled(broker: ServedBroker) -> None:
    _set_quota(broker, "greedy", "request_percentage", 0.01)
    answers = _metadata_flood(broker.port, 300)
    throttled = [i for i, (t, _) in enumerate(answers) if t > 0]
    assert throttled, answers[:10]
    assert max(t for t, _ in answers) <= 1000          # bounded by one window (quota.window.size.seconds=1)
    # After a throttled answer the channel stays muted: the next request waits it out.
    waits = [(answers[i][0], answers[i + 1][1]) for i in throttled if i + 1 < len(answers)]
    assert all(waited * 1000 >= t * 0.9 for t, waited in waits), waits[:5]


def test_a_producer_over_its_byte_rate_is_throttled(broker: ServedBroker) -> None:
    w = Connection("127.0.0.1", broker.port, "writer")
    try:
        T = CreateTopicsRequest.CreatableTopic
        w.send(CreateTopicsRequest(topics=[T(name="q", num_partitions=1, replication_factor=1, assignments=[],
                                             configs=[])], timeout_ms=10000, validate_only=False), 4)
        _set_quota(broker, "writer", "producer_byte_rate", 5000)
        PD = ProduceRequest.TopicProduceData.PartitionProduceData
        throttles = []
        for _ in range(20):
            req = ProduceRequest(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
                ProduceRequest.TopicProduceData(name="q", partition_data=[PD(
                    index=0, records=build_batch([Record(0, None, b"x" * 10_000)]))])])
            throttles.append(w.send(req, 7).throttle_time_ms)
    finally:
        w.close()
    assert any(t > 0 for t in throttles), throttles


def test_client_quotas_false_turns_them_off(broker_without_quotas: ServedBroker) -> None:
    _set_quota(broker_without_quotas, "greedy", "request_percentage", 0.01)
    assert all(t == 0 for t, _ in _metadata_flood(broker_without_quotas.port, 300))
