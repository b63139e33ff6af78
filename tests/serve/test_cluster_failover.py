"""A real cluster — Debian's ZooKeeper and three `kafkasim serve` processes (real/cluster) — under
third-party clients: confluent-kafka (librdkafka) and the Java client (real/clients/java)
produce with acks=all to a topic with replication factor 3 and min.insync.replicas=2 while the
partition's leader is killed with SIGKILL; once the controller has moved leadership (the dead
broker's ZooKeeper session expires) every acknowledged message is consumed afterwards. The
killed broker restarts, truncates and rejoins the ISR."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from runtime_worlds import load_script

from tests.serve.clients.driver import Driver, driver_missing

pytestmark = pytest.mark.real
ROOT = Path(__file__).resolve().parents[2]
CONFIGS = {"zookeeper.session.timeout.ms": "6000", "replica.lag.time.max.ms": "10000",
           "min.insync.replicas": "2", "auto.create.topics.enable": "false"}


def _launcher() -> ModuleType:
    return load_script("kafkasim_real_cluster", ROOT / "real" / "cluster" / "cluster.py")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Any]:
    launcher = _launcher()
    if not os.path.exists(launcher.load_zk().ZK_JAR):
        if os.environ.get("KAFKASIM_REQUIRE_ZOOKEEPER") == "1":
            pytest.fail("zookeeper.jar missing: apt-get install -y zookeeper")
        pytest.skip("zookeeper.jar missing")
    c = launcher.up(tmp_path / "cluster", 3, CONFIGS)
    try:
        yield c
    finally:
        c.down()
    errors = [line for b in c.brokers if (b.dir / "trace.jsonl").exists()
              for line in (b.dir / "trace.jsonl").read_text().splitlines() if '"task_error"' in line]
    assert errors == [], errors[:5]


def _create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})])[topic].result(30)


def _leader(bootstrap: str, topic: str, not_in: tuple[int, ...] = (), timeout_s: float = 60.0) -> int:
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=5).topics.get(topic)
        if md is not None and 0 in md.partitions and md.partitions[0].leader >= 0 \
                and md.partitions[0].leader not in not_in:
            return int(md.partitions[0].leader)
        time.sleep(0.2)
    raise AssertionError(f"no leader for {topic}-0 outside {not_in}")


def _consume_all(bootstrap: str, topic: str, expected: int, timeout_s: float = 60.0) -> list[str]:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[str] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(out) < expected and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                out.append(m.value().decode())
    finally:
        c.close()
    return out


def _isr_rejoined(cluster: Any, broker_id: int, topic: str, timeout_s: float = 60.0) -> bool:
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=5).topics[topic].partitions[0]
        if broker_id in md.isrs:
            return True
        time.sleep(0.5)
    return False


def test_confluent_kafka_acks_all_survives_a_sigkilled_leader(cluster: Any) -> None:
    from confluent_kafka import Producer

    topic = "failover-cf"
    _create_topic(cluster.bootstrap, topic)
    old = _leader(cluster.bootstrap, topic)
    acked: list[str] = []
    errors: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            acked.append(msg.value().decode())
        else:
            errors.append(str(err))

    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5,
                  "message.timeout.ms": 120000})
    for i in range(3000):
        p.produce(topic, value=f"cf-{i}".encode(), on_delivery=on_delivery)
        p.poll(0)
        if i == 999:
            p.flush(30)            # a thousand acknowledged before the kill...
        if i == 1199:
            cluster.broker(old).kill()   # ...and two hundred in flight at it
        if i % 100 == 99:
            time.sleep(0.01)
    assert p.flush(120) == 0, errors[:5]
    new = _leader(cluster.bootstrap, topic, not_in=(old,))
    assert new != old and len(acked) >= 1000
    got = _consume_all(cluster.bootstrap, topic, len(acked))
    assert set(acked) <= set(got), sorted(set(acked) - set(got))[:10]
    cluster.restart(old)
    assert _isr_rejoined(cluster, old, topic)


def test_java_client_acks_all_survives_a_sigkilled_leader(cluster: Any) -> None:
    why = driver_missing("java")
    if why:  # real/install.sh builds it; a skip here would count an untested client as passing
        pytest.fail(why)
    topic = "failover-java"
    _create_topic(cluster.bootstrap, topic)
    old = _leader(cluster.bootstrap, topic)
    acked: list[str] = []
    with Driver("java", cluster.bootstrap) as d:
        for r in range(12):
            if r == 4:  # kill the leader while this round's batches are in flight
                threading.Timer(0.05, cluster.broker(old).kill).start()
            reply = d.produce(topic, 100, f"java{r}", timeout_s=180, acks="all", partition=0)
            acked += [v for _, _, v in reply["acked"]]
            assert not reply["errors"], reply["errors"][:5]
    assert len(acked) == 1200
    assert _leader(cluster.bootstrap, topic, not_in=(old,)) != old
    got = _consume_all(cluster.bootstrap, topic, len(acked))
    assert set(acked) <= set(got), sorted(set(acked) - set(got))[:10]
