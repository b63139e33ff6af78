"""A real cluster — Debian's ZooKeeper and three `kafkasim serve` processes (real/cluster's
launcher) — whose inter-broker listener is SASL_SSL with real TLS (real/certs.sh's CA, hostname
verification on) and PLAIN: the controller's requests and the replica fetchers log in with the
broker's own credentials. confluent-kafka produces with acks=all to a topic with replication factor
3 and min.insync.replicas=3 over the PLAINTEXT listener, which only succeeds if both followers
replicate; each broker's trace shows the other brokers logging in as User:broker on SECURE."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from runtime_worlds import load_script

from tests.serve.conftest import free_port

pytestmark = pytest.mark.real
ROOT = Path(__file__).resolve().parents[3]
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
        'password="broker-secret" user_broker="broker-secret";')


def _launcher() -> ModuleType:
    return load_script("kafkasim_real_cluster", ROOT / "real" / "cluster" / "cluster.py")


def _configs(port: int, secure_port: int, certs: Path) -> dict[str, str]:
    return {"listeners": f"PLAINTEXT://127.0.0.1:{port},SECURE://127.0.0.1:{secure_port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:SASL_SSL",
            "inter.broker.listener.name": "SECURE", "sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN", "listener.name.secure.plain.sasl.jaas.config": JAAS,
            "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs / "broker-keystore.pem"),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs / "ca.pem"),
            "zookeeper.session.timeout.ms": "6000", "offsets.topic.replication.factor": "3",
            "group.initial.rebalance.delay.ms": "0", "auto.create.topics.enable": "false"}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[list[Any]]:
    launcher = _launcher()
    zk_mod = launcher.load_zk()
    if not os.path.exists(zk_mod.ZK_JAR):
        if os.environ.get("KAFKASIM_REQUIRE_ZOOKEEPER") == "1":
            pytest.fail("zookeeper.jar missing: apt-get install -y zookeeper")
        pytest.skip("zookeeper.jar missing")
    certs = tmp_path / "certs"
    subprocess.run(["bash", str(ROOT / "real" / "certs.sh"), str(certs)], check=True, capture_output=True)
    zk = zk_mod.start_zookeeper(tmp_path / "zookeeper")
    brokers: list[Any] = []
    try:
        for i in range(3):
            port = free_port()
            b = launcher.Broker(i, port, tmp_path / f"broker-{i}", _configs(port, free_port(), certs),
                                zk.connect_string)
            b.start()
            brokers.append(b)
        for b in brokers:
            b.wait_started()
        yield brokers
    finally:
        for b in brokers:
            b.stop()
        zk.stop()
    for b in brokers:
        log = b.log_path.read_text(errors="replace")
        assert "Traceback" not in log, log[-3000:]


def _logins(broker: Any) -> set[str]:
    """Who logged in to this broker's SECURE listener, by principal."""
    out = set()
    for line in (broker.dir / "trace.jsonl").read_text().splitlines():
        e = json.loads(line)
        if e.get("ev") == "sasl_authenticated" and e.get("listener") == "SECURE":
            out.add(e["principal"])
    return out


def test_three_brokers_replicate_over_a_sasl_ssl_inter_broker_listener(cluster: list[Any]) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = ",".join(b.bootstrap for b in cluster)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("secure", 1, 3, config={"min.insync.replicas": "3"})])["secure"].result(60)
    deadline = time.monotonic() + 60
    isr: list[int] = []
    while time.monotonic() < deadline and len(isr) < 3:
        md = admin.list_topics("secure", timeout=5).topics["secure"].partitions.get(0)
        isr = sorted(md.isrs) if md is not None else []
        time.sleep(0.2)
    assert isr == [0, 1, 2]
    errors: list[str] = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 60000})
    for i in range(200):
        p.produce("secure", value=f"m-{i}".encode(),
                  on_delivery=lambda err, _m: errors.append(str(err)) if err is not None else None)
    assert p.flush(90) == 0 and errors == [], errors[:5]   # min.insync.replicas=3: every follower has them
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False})
    c.assign([TopicPartition("secure", 0, 0)])
    got: list[str] = []
    deadline = time.monotonic() + 60
    while len(got) < 200 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value().decode())
    c.close()
    assert got == [f"m-{i}" for i in range(200)]
    # Every broker was logged in to by the others (the controller's channel, the fetchers).
    assert all(_logins(b) == {"User:broker"} for b in cluster), [_logins(b) for b in cluster]
