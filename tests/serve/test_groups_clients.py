"""Consumer groups with real clients over real sockets against `kafkasim serve`: confluent-kafka
(librdkafka), kafka-python and aiokafka each run the scenario of tests/serve/groups_support.py —
three members, a fourth joins, one leaves, everything committed; then the group comes back and
resumes exactly at the committed offsets. kcat's balanced consumer (-G) too."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.serve.conftest import ServedBroker
from tests.serve.groups_support import (
    GROUP_BROKER_CONFIG,
    PER_PARTITION,
    TOPIC_PARTITIONS,
    assert_partitioned,
    produce,
    run_group_scenario,
)

pytestmark = pytest.mark.real
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 300


@pytest.fixture
def group_broker(tmp_path: Path) -> Iterator[ServedBroker]:
    b = ServedBroker(tmp_path / "logs", configs=GROUP_BROKER_CONFIG)
    yield b
    b.stop()
    errors = b.task_errors()
    assert errors == [], f"the broker hit unhandled errors: {errors}"


def committed_offsets(bootstrap: str, topic: str, group: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(TOPIC_PARTITIONS)], timeout=20)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        c.close()


def _check(result: dict[str, Any]) -> None:
    for key in ("three_way_first", "four_way", "three_way"):
        assert_partitioned(result[key])
    assert len(result["four_way"]) == 4 and len(result["three_way"]) == 3
    assert result["committed"] == {p: PER_PARTITION for p in range(TOPIC_PARTITIONS)}
    assert result["committed_after"] == {p: PER_PARTITION + PER_PARTITION // 3 for p in range(TOPIC_PARTITIONS)}
    counted = result["counted_by"]
    assert counted.get("m3", 0) > 0, f"the fourth member consumed nothing: {counted}"
    assert counted.get("m1", 0) > 0, f"the member that left consumed nothing: {counted}"


# ---------------------------------------------------------------- confluent-kafka (librdkafka)
class ConfluentMember:
    def __init__(self, bootstrap: str, topic: str, group: str, name: str) -> None:
        from confluent_kafka import Consumer

        self.topic = topic
        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                           "enable.auto.commit": False, "auto.offset.reset": "earliest",
                           "session.timeout.ms": SESSION_TIMEOUT_MS, "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS})
        self.c.subscribe([topic])

    def poll(self) -> list[tuple[int, int, bytes]]:
        msgs = self.c.consume(num_messages=20, timeout=0.1)
        return [(m.partition(), m.offset(), m.value()) for m in msgs if m.error() is None]

    def commit(self, offsets: dict[int, int]) -> bool:
        from confluent_kafka import KafkaException, TopicPartition

        try:
            result = self.c.commit(offsets=[TopicPartition(self.topic, p, o) for p, o in offsets.items()],
                                   asynchronous=False)
        except KafkaException:
            return False
        return all(tp.error is None for tp in result or [])

    def assignment(self) -> list[int]:
        return [tp.partition for tp in self.c.assignment()]

    def close(self) -> None:
        self.c.close()


def test_confluent_kafka_group_rebalance_commit_resume(group_broker: ServedBroker) -> None:
    topic, group = "ck-group-topic", "ck-group"
    result = run_group_scenario(group_broker.bootstrap, topic, group,
                                lambda name: lambda: ConfluentMember(group_broker.bootstrap, topic, group, name),
                                lambda: committed_offsets(group_broker.bootstrap, topic, group))
    _check(result)


# ---------------------------------------------------------------- kafka-python
class KafkaPythonMember:
    def __init__(self, bootstrap: str, topic: str, group: str, name: str) -> None:
        from kafka import KafkaConsumer

        self.topic = topic
        self.c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, client_id=name,
                               enable_auto_commit=False, auto_offset_reset="earliest", max_poll_records=20,
                               session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS)

    def poll(self) -> list[tuple[int, int, bytes]]:
        # kafka-python 3.0.12 can get stuck (a finished JoinGroup/SyncGroup never applied, then a
        # session timeout) when poll() times out in the middle of a rejoin the leader started
        # because topic metadata changed; a poll longer than a join avoids that window.
        batches = self.c.poll(timeout_ms=500)
        return [(tp.partition, r.offset, r.value) for tp, records in batches.items() for r in records]

    def commit(self, offsets: dict[int, int]) -> bool:
        from kafka import TopicPartition
        from kafka.errors import KafkaError
        from kafka.structs import OffsetAndMetadata

        try:
            self.c.commit({TopicPartition(self.topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})
        except KafkaError:
            return False
        return True

    def assignment(self) -> list[int]:
        return [tp.partition for tp in self.c.assignment()]

    def close(self) -> None:
        self.c.close()


def test_kafka_python_group_rebalance_commit_resume(group_broker: ServedBroker) -> None:
    topic, group = "kp-group-topic", "kp-group"
    result = run_group_scenario(group_broker.bootstrap, topic, group,
                                lambda name: lambda: KafkaPythonMember(group_broker.bootstrap, topic, group, name),
                                lambda: committed_offsets(group_broker.bootstrap, topic, group))
    _check(result)


# ---------------------------------------------------------------- aiokafka (its own loop per member thread)
class AiokafkaMember:
    def __init__(self, bootstrap: str, topic: str, group: str, name: str) -> None:
        from aiokafka import AIOKafkaConsumer

        self.topic = topic
        self.loop = asyncio.new_event_loop()

        async def start() -> Any:
            c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, client_id=name,
                                 enable_auto_commit=False, auto_offset_reset="earliest",
                                 session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS)
            await c.start()
            return c

        self.c = self.loop.run_until_complete(start())

    def _run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def poll(self) -> list[tuple[int, int, bytes]]:
        batches = self._run(self.c.getmany(timeout_ms=100, max_records=20))
        return [(tp.partition, r.offset, r.value) for tp, records in batches.items() for r in records]

    def commit(self, offsets: dict[int, int]) -> bool:
        from aiokafka import TopicPartition
        from aiokafka.errors import KafkaError

        try:
            self._run(self.c.commit({TopicPartition(self.topic, p): o for p, o in offsets.items()}))
        except KafkaError:
            return False
        return True

    def assignment(self) -> list[int]:
        return [tp.partition for tp in self.c.assignment()]

    def close(self) -> None:
        try:
            self._run(self.c.stop())
        finally:
            self.loop.close()


def test_aiokafka_group_rebalance_commit_resume(group_broker: ServedBroker) -> None:
    topic, group = "aio-group-topic", "aio-group"
    result = run_group_scenario(group_broker.bootstrap, topic, group,
                                lambda name: lambda: AiokafkaMember(group_broker.bootstrap, topic, group, name),
                                lambda: committed_offsets(group_broker.bootstrap, topic, group))
    _check(result)


# ---------------------------------------------------------------- kcat -G
def _kcat_group(bootstrap: str, group: str, topic: str) -> list[tuple[int, int, bytes]]:
    out = subprocess.run(["kcat", "-b", bootstrap, "-G", group, topic, "-e", "-q", "-f", "%p %o %s\\n",
                          "-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=6000"],
                         capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr
    rows = [line.split(b" ", 2) for line in out.stdout.splitlines() if line]
    return [(int(p), int(o), v) for p, o, v in rows]


def test_kcat_balanced_consumer_commits_and_resumes(group_broker: ServedBroker) -> None:
    topic, group = "kcat-group-topic", "kcat-group"
    produce(group_broker.bootstrap, topic, 0, 5)
    first = _kcat_group(group_broker.bootstrap, group, topic)
    assert sorted((p, o) for p, o, _ in first) == [(p, o) for p in range(TOPIC_PARTITIONS) for o in range(5)]
    assert committed_offsets(group_broker.bootstrap, topic, group) == {p: 5 for p in range(TOPIC_PARTITIONS)}
    produce(group_broker.bootstrap, topic, 5, 3)
    second = _kcat_group(group_broker.bootstrap, group, topic)
    assert sorted((p, o) for p, o, _ in second) == [(p, o) for p in range(TOPIC_PARTITIONS) for o in range(5, 8)]
