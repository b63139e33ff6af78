"""Real third-party clients against `kafkasim serve` over real sockets: each produces and
consumes and must get back exactly what it sent, in order."""

from __future__ import annotations

import subprocess
import time

import pytest

from tests.serve.conftest import ServedBroker, poll_until

pytestmark = pytest.mark.real
N = 300


def _values(tag: str) -> list[bytes]:
    return [f"{tag}-{i:05d}".encode() for i in range(N)]


def test_kcat_produce_consume(broker: ServedBroker) -> None:
    sent = _values("kcat")
    p = subprocess.run(["kcat", "-b", broker.bootstrap, "-P", "-t", "kcat-topic", "-p", "0"],
                       input=b"\n".join(sent) + b"\n", capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    c = subprocess.run(["kcat", "-b", broker.bootstrap, "-C", "-t", "kcat-topic", "-o", "beginning", "-e",
                        "-f", "%p %o %s\\n"], capture_output=True, timeout=60)
    assert c.returncode == 0, c.stderr
    rows = [line.split(b" ", 2) for line in c.stdout.splitlines()]
    assert [r[2] for r in rows] == sent
    assert [int(r[1]) for r in rows] == list(range(N))


def test_kcat_metadata_lists_broker_and_topic(broker: ServedBroker) -> None:
    subprocess.run(["kcat", "-b", broker.bootstrap, "-P", "-t", "meta-topic"], input=b"x\n", timeout=60, check=True)
    out = subprocess.run(["kcat", "-b", broker.bootstrap, "-L", "-t", "meta-topic"], capture_output=True,
                         timeout=60, check=True).stdout.decode()
    assert f"broker 0 at {broker.bootstrap} (controller)" in out
    assert 'topic "meta-topic" with 1 partitions' in out


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_confluent_kafka_produce_consume(broker: ServedBroker, compression: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic = f"ck-{compression}"
    sent = _values(topic)
    acked: list[tuple[int, int]] = []
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "compression.type": compression,
                  "linger.ms": 5})
    for v in sent:
        p.produce(topic, value=v, partition=0,
                  on_delivery=lambda err, msg: acked.append((msg.partition(), msg.offset())) if err is None else None)
    assert p.flush(30) == 0
    assert sorted(o for _, o in acked) == list(range(N))
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < N and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    assert got == sent


def test_kafka_python_produce_consume(broker: ServedBroker) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = "kafka-python"
    sent = _values(topic)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", enable_idempotence=False)
    futures = [producer.send(topic, value=v, partition=0) for v in sent]
    offsets = [f.get(timeout=30).offset for f in futures]
    producer.close()
    assert offsets == list(range(N))
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    got = [m.value for m in poll_until(consumer, N)]
    consumer.close()
    assert got == sent


def test_kafkasim_load_generator_against_served_broker(broker: ServedBroker) -> None:
    """The simulated workload's own producer and consumer, on real sockets."""
    out = subprocess.run(["kafkasim", "load", "--bootstrap", broker.bootstrap, "--messages", "400",
                          "--rate", "4000"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert '"consumed": 400' in out.stdout and '"lost": 0' in out.stdout


def test_confluent_list_all_topics(broker: ServedBroker) -> None:
    """librdkafka sends Metadata v12 with 3 trailing bytes; Kafka ignores them, so must we."""
    from confluent_kafka import Producer

    subprocess.run(["kcat", "-b", broker.bootstrap, "-P", "-t", "listed"], input=b"x\n", timeout=60, check=True)
    topics = Producer({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10).topics
    assert "listed" in topics and len(topics["listed"].partitions) == 1
