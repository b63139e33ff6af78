"""The Java behaviours kafkasim reproduces for byte-exact znodes and answers (values checked
against Kafka 3.9.1 / Java 17)."""

from __future__ import annotations

import pytest

from kafkasim.broker.zk.entity_config import entity_config_json
from kafkasim.broker.zk.java_compat import (
    desanitize,
    java_double_str,
    java_hash_order,
    java_string_hash,
    sanitize,
)

pytestmark = pytest.mark.unit


def test_string_hash_is_javas() -> None:
    assert java_string_hash("user") == 3599307 and java_string_hash("zz") == 3904
    assert java_string_hash("") == 0


def test_hash_order_of_kafkas_maps() -> None:
    quota = ["consumer_byte_rate", "controller_mutation_rate", "producer_byte_rate", "request_percentage"]
    assert java_hash_order(quota) == ["request_percentage", "producer_byte_rate", "consumer_byte_rate",
                                      "controller_mutation_rate"]
    assert java_hash_order(["user", "client-id"], 2) == ["client-id", "user"]   # HashMap(2)
    assert java_hash_order(["user", "ip"], 2) == ["user", "ip"]
    assert java_hash_order(["zz", "aa"], scala=True) == ["aa", "zz"]            # same bucket: by hash
    assert java_hash_order(["zz", "aa"]) == ["zz", "aa"]                         # same bucket: insertion


def test_entity_config_json_is_what_kafka_writes() -> None:
    assert entity_config_json({"producer_byte_rate": "1", "SCRAM-SHA-256": "s"}) == \
        b'{"version":1,"config":{"SCRAM-SHA-256":"s","producer_byte_rate":"1"}}'


@pytest.mark.parametrize(("value", "text"), [(1024.0, "1024.0"), (12.5, "12.5"), (1e7, "1.0E7"), (0.0001, "1.0E-4"),
                                             (0.001, "0.001"), (9999999.0, "9999999.0"), (1.5e10, "1.5E10"),
                                             (123456789.0, "1.23456789E8"), (-2.5e-5, "-2.5E-5")])
def test_double_to_string(value: float, text: str) -> None:
    assert java_double_str(value) == text


def test_sanitizer() -> None:
    assert sanitize("we ird*/x") == "we%20ird%2A%2Fx"
    assert sanitize("a~b.c-d_e") == "a%7Eb.c-d_e"
    assert sanitize("é") == "%C3%A9"
    assert desanitize("we%20ird%2A%2Fx") == "we ird*/x"
