"""validate_topic_create: the checks a ZooKeeper-mode Kafka 3.9.1 makes before writing a topic's
znodes (AdminZkClient.validateTopicCreate + LogConfig.validate), with the codes and texts real
Kafka answered to the same CreateTopics (`realkafka`, 1 broker)."""

from __future__ import annotations

import pytest

from kafkasim.broker.topic_admin import validate_topic_create
from kafkasim.broker.zk.kafka_zk_client import TopicError
from kafkasim.protocol import errors as E

pytestmark = pytest.mark.unit

# (configs, assignment) -> (error code, message) as Kafka 3.9.1 answered them.
KAFKA_ANSWERS = [
    ({"retention.ms": "abc"}, {0: [0]},
     (E.INVALID_CONFIG, "Invalid value abc for configuration retention.ms: Not a number of type LONG")),
    ({"no.such.config": "1"}, {0: [0]}, (E.INVALID_CONFIG, "Unknown topic config name: no.such.config")),
    ({"min.insync.replicas": "0"}, {0: [0]},
     (E.INVALID_CONFIG, "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1")),
    ({"cleanup.policy": "nope"}, {0: [0]},
     (E.INVALID_CONFIG, "Invalid value nope for configuration cleanup.policy: String must be one of: compact, delete")),
    ({}, {0: [0, 0]},
     (E.INVALID_REPLICA_ASSIGNMENT, "Duplicate replica assignment found: HashMap(0 -> ArrayBuffer(0, 0))")),
    ({}, {0: [0], 1: [0, 0]}, (E.INVALID_REPLICA_ASSIGNMENT, "All partitions should have the same number of replicas")),
    ({}, {0: [0], 2: [0]},
     (E.INVALID_REPLICA_ASSIGNMENT, "partitions should be a consecutive 0-based integer sequence")),
]


@pytest.mark.parametrize(("configs", "assignment", "answer"), KAFKA_ANSWERS)
def test_refusals_match_kafka(configs: dict[str, str], assignment: dict[int, list[int]],
                              answer: tuple[int, str]) -> None:
    with pytest.raises(TopicError) as err:
        validate_topic_create("t", assignment, configs)
    assert (err.value.error_code, str(err.value)) == answer


def test_valid_topic_passes() -> None:
    validate_topic_create("t", {0: [0, 1], 1: [1, 0]}, {"cleanup.policy": "compact", "retention.ms": "1000"})


def test_invalid_name_is_checked_before_configs() -> None:
    with pytest.raises(TopicError) as err:
        validate_topic_create("bad name!", {0: [0]}, {"no.such.config": "1"})
    assert err.value.error_code == E.INVALID_TOPIC_EXCEPTION
