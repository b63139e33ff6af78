"""Committed offsets survive a kill -9 of `kafkasim serve` on a real ZooKeeper: the restarted
broker replays `__consumer_offsets` from its log directory and a group resumes exactly where it
committed (confluent-kafka commits before the crash, kafka-python resumes after it)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from tests.serve.conftest import ServedBroker, poll_until
from tests.serve.groups_support import GROUP_BROKER_CONFIG, TOPIC_PARTITIONS, produce, value_of

pytestmark = pytest.mark.real
CONFIGS = dict(GROUP_BROKER_CONFIG, **{"zookeeper.session.timeout.ms": 6000})


def test_offsets_survive_broker_kill_and_group_resumes(tmp_path: Path, zookeeper: object) -> None:
    from confluent_kafka import Consumer
    from kafka import KafkaConsumer

    # A chroot of our own: the session's ZooKeeper is shared with other tests.
    connect = f"{zookeeper.connect_string}/kafkasim-groups-{uuid.uuid4().hex[:8]}"  # type: ignore[attr-defined]
    broker = ServedBroker(tmp_path / "logs", zookeeper=connect, broker_id=5, configs=CONFIGS)
    try:
        produce(broker.bootstrap, "restart-topic", 0, 4)
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "survivors",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
        c.subscribe(["restart-topic"])
        consumed = 0
        deadline = time.monotonic() + 30
        while consumed < 4 * TOPIC_PARTITIONS and time.monotonic() < deadline:
            m = c.poll(0.3)
            if m is not None and m.error() is None:
                consumed += 1
                c.commit(message=m, asynchronous=False)  # acknowledged = appended to the log
        c.close()
        assert consumed == 4 * TOPIC_PARTITIONS
        # LeaveGroup is answered before the group's (now Empty) metadata record is appended; a
        # kill in that window restarts the group as Stable with the departed member, and a new
        # member then waits out its session. Give the broker a moment to write it.
        time.sleep(1.0)
    finally:
        broker.proc.kill()   # kill -9: no shutdown code runs
        broker.proc.wait(timeout=10)
    assert any(p.name.startswith("__consumer_offsets-") for p in (tmp_path / "logs").iterdir())

    again = ServedBroker(tmp_path / "logs", zookeeper=connect, broker_id=5, configs=CONFIGS)
    try:
        produce(again.bootstrap, "restart-topic", 4, 2)
        consumer = KafkaConsumer("restart-topic", bootstrap_servers=again.bootstrap, group_id="survivors",
                                 enable_auto_commit=False, auto_offset_reset="earliest")
        got = sorted((m.partition, m.offset, m.value) for m in poll_until(consumer, 2 * TOPIC_PARTITIONS))
        consumer.close()
        assert got == [(p, o, value_of(p, o)) for p in range(TOPIC_PARTITIONS) for o in (4, 5)]
    finally:
        again.stop()
    assert again.task_errors() == []
