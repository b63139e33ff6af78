"""Idempotent producers of real clients (their defaults: Java-like acks=all + idempotence) against
`kafkasim serve` over real sockets: InitProducerId, sequenced batches, and every record back
exactly once, in order, at consecutive offsets."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from kafkasim.records.batch import iter_batches
from tests.serve.conftest import ServedBroker

pytestmark = pytest.mark.real
N = 400


def _values(tag: str) -> list[bytes]:
    return [f"{tag}-{i:05d}".encode() for i in range(N)]


def _consume_all(bootstrap: str, topic: str, expected: int) -> list[tuple[int, bytes]]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 30
    while len(got) < expected and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append((m.offset(), m.value()))
    # A little longer: anything beyond the expected set would be a duplicate.
    end = time.monotonic() + 1
    while time.monotonic() < end:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            got.append((m.offset(), m.value()))
    c.close()
    return got


def _assert_exactly_once(broker: ServedBroker, topic: str, sent: list[bytes]) -> None:
    got = _consume_all(broker.bootstrap, topic, len(sent))
    assert [v for _, v in got] == sent
    assert [o for o, _ in got] == list(range(len(sent)))
    # On disk: every batch carries the producer id, and sequences run with the offsets
    # (one producer from sequence 0 on a fresh partition).
    batches = [h for seg in sorted((broker.log_dir / f"{topic}-0").glob("*.log"))
               for _, h in iter_batches(seg.read_bytes())]
    assert batches and len({h.producer_id for h in batches}) == 1 and batches[0].producer_id >= 0
    assert [h.base_sequence for h in batches] == [h.base_offset for h in batches]


def test_kafka_python_idempotent_by_default(broker: ServedBroker) -> None:
    from kafka import KafkaProducer

    topic = "kp-idem"
    sent = _values(topic)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=2, max_in_flight_requests_per_connection=5)
    assert producer.config["enable_idempotence"] is True  # the client's default, not forced here
    futures = [producer.send(topic, value=v, partition=0) for v in sent]
    offsets = [f.get(timeout=30).offset for f in futures]
    pid = producer._transaction_manager.producer_id_and_epoch.producer_id
    producer.close()
    assert pid >= 0
    assert offsets == list(range(N))
    _assert_exactly_once(broker, topic, sent)


def test_confluent_kafka_enable_idempotence(broker: ServedBroker) -> None:
    from confluent_kafka import Producer

    topic = "ck-idem"
    sent = _values(topic)
    acked: list[int] = []
    errors: list[Any] = []
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 2,
                  "batch.num.messages": 37})
    for v in sent:
        p.produce(topic, value=v, partition=0,
                  on_delivery=lambda err, msg: errors.append(err) if err else acked.append(msg.offset()))
        p.poll(0)
    assert p.flush(30) == 0
    assert errors == []
    assert sorted(acked) == list(range(N))
    _assert_exactly_once(broker, topic, sent)


def test_aiokafka_enable_idempotence(broker: ServedBroker) -> None:
    from aiokafka import AIOKafkaProducer

    topic = "aio-idem"
    sent = _values(topic)

    async def produce() -> tuple[list[int], int]:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True, linger_ms=2)
        await producer.start()
        try:
            futures = [await producer.send(topic, value=v, partition=0) for v in sent]
            offsets = [(await f).offset for f in futures]
            pid = producer._txn_manager.producer_id
        finally:
            await producer.stop()
        return offsets, pid

    offsets, pid = asyncio.run(produce())
    assert pid >= 0
    assert offsets == list(range(N))
    _assert_exactly_once(broker, topic, sent)


def test_producers_get_distinct_ids_across_clients(broker: ServedBroker) -> None:
    """Two producers of the same broker: ids from the same ZooKeeper block, never shared."""
    from kafka import KafkaProducer

    ids = []
    for i in range(2):
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
        producer.send(f"ids-{i}", value=b"x", partition=0).get(timeout=30)
        ids.append(producer._transaction_manager.producer_id_and_epoch.producer_id)
        producer.close()
    assert len(set(ids)) == 2 and all(0 <= i < 1000 for i in ids)
