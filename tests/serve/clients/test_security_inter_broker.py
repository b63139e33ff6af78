"""A real cluster — Debian's ZooKeeper and three `kafkasim serve` processes (real/cluster's
launcher) — whose inter-broker listener is SASL_SSL with real TLS (real/certs.sh's CA, hostname
verification on), once with PLAIN and once with SCRAM-SHA-512: the controller's requests and the
replica fetchers log in with the broker's own credentials. For SCRAM the brokers' credential is
written to ZooKeeper before they start, as Kafka's users do with `kafka-configs --zookeeper`
(`kafkasim scram-credential`). confluent-kafka produces with acks=all to a topic with replication
factor 3 and min.insync.replicas=3 over the PLAINTEXT listener, which only succeeds if both
followers replicate; each broker's trace shows the other brokers logging in as User:broker on
SECURE. A broker with a wrong SCRAM password never gets back into the ISR."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from runtime_worlds import load_script

from tests.serve.admin_diagnosis import create_topic
from tests.serve.conftest import controller_id, free_port

pytestmark = pytest.mark.real
ROOT = Path(__file__).resolve().parents[3]
PASSWORD = "broker-secret"


def _launcher() -> ModuleType:
    return load_script("kafkasim_real_cluster", ROOT / "real" / "cluster" / "cluster.py")


def _jaas(mechanism: str, password: str) -> str:
    """The SECURE listener's login: the broker's own username and password (for PLAIN also the
    users it accepts; SCRAM checks logins against ZooKeeper's credentials)."""
    if mechanism == "PLAIN":
        return (f'org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
                f'password="{password}" user_broker="{PASSWORD}";')
    return f'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="{password}";'


def _configs(port: int, secure_port: int, certs: Path, mechanism: str, password: str) -> dict[str, str]:
    return {"listeners": f"PLAINTEXT://127.0.0.1:{port},SECURE://127.0.0.1:{secure_port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:SASL_SSL",
            "inter.broker.listener.name": "SECURE", "sasl.enabled.mechanisms": mechanism,
            "sasl.mechanism.inter.broker.protocol": mechanism,
            f"listener.name.secure.{mechanism.lower()}.sasl.jaas.config": _jaas(mechanism, password),
            "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs / "broker-keystore.pem"),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs / "ca.pem"),
            "zookeeper.session.timeout.ms": "6000", "offsets.topic.replication.factor": "3",
            "group.initial.rebalance.delay.ms": "0", "auto.create.topics.enable": "false",
            # A follower that cannot fetch leaves the ISR after 5 s rather than Kafka's 30.
            "replica.lag.time.max.ms": "5000"}


def _add_scram_credential(zookeeper: str, mechanism: str) -> None:
    """What a Kafka user runs before starting SCRAM brokers: the `kafkasim` command line."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-m", "kafkasim.cli", "scram-credential", "--zookeeper", zookeeper,
                           "--user", "broker", "--password", PASSWORD, "--mechanism", mechanism],
                          capture_output=True, text=True, env=env, cwd=str(ROOT), timeout=60)
    assert done.returncode == 0, done.stderr
    assert "Completed updating config for entity: user-principal 'broker'" in done.stdout


def _secured_cluster(tmp_path: Path, mechanism: str, wrong_password_on: int | None = None) -> Iterator[list[Any]]:
    """Three brokers on one real ZooKeeper; `wrong_password_on`: that broker logs in with a
    wrong password. Broker 0 starts first, so it is the controller (a controller that cannot
    log in would reach no broker)."""
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
        if mechanism != "PLAIN":
            _add_scram_credential(zk.connect_string, mechanism)
        for i in range(3):
            port = free_port()
            wrong = i == wrong_password_on
            configs = _configs(port, free_port(), certs, mechanism, "not-the-password" if wrong else PASSWORD)
            if wrong:   # its ControlledShutdown could not log in either: it would retry for 15 s at stop
                configs["controlled.shutdown.enable"] = "false"
            b = launcher.Broker(i, port, tmp_path / f"broker-{i}", configs, zk.connect_string)
            b.start()
            brokers.append(b)
            if i == 0:
                b.wait_started()
        for b in brokers:
            b.wait_started()
        # The broker with the wrong password never hears from the controller, which cannot log in.
        _wait_for_controller([b for i, b in enumerate(brokers) if i != wrong_password_on])
        yield brokers
    finally:
        for b in brokers:
            b.stop()
        zk.stop()
    for b in brokers:
        log = b.log_path.read_text(errors="replace")
        assert "Traceback" not in log, log[-3000:]


def _wait_for_controller(brokers: list[Any], seconds: float = 60) -> None:
    """Until every broker's Metadata names the controller (its first UpdateMetadata arrived):
    before that it answers controller -1, and librdkafka's admin client can wait out its whole
    timeout for one (a CreateTopics that never left the client: CI at stop 15). Kafka's own
    integration tests wait for metadata to propagate the same way."""
    deadline = time.monotonic() + seconds
    for b in brokers:
        while controller_id(b.port) < 0:
            assert time.monotonic() < deadline, f"broker {b.broker_id} knows no controller after {seconds:.0f} s"
            time.sleep(0.1)


@pytest.fixture(params=["PLAIN", "SCRAM-SHA-512"])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[Any]]:
    yield from _secured_cluster(tmp_path, request.param)


@pytest.fixture
def cluster_with_a_wrong_scram_password(tmp_path: Path) -> Iterator[list[Any]]:
    yield from _secured_cluster(tmp_path, "SCRAM-SHA-512", wrong_password_on=2)


def _events(broker: Any) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (broker.dir / "trace.jsonl").read_text().splitlines()]


def _logins(broker: Any) -> set[str]:
    """Who logged in to this broker's SECURE listener, by principal."""
    return {e["principal"] for e in _events(broker)
            if e.get("ev") == "sasl_authenticated" and e.get("listener") == "SECURE"}


def _isr(admin: Any, topic: str) -> list[int]:
    md = admin.list_topics(topic, timeout=5).topics[topic].partitions.get(0)
    return sorted(md.isrs) if md is not None else []


def test_three_brokers_replicate_over_a_sasl_ssl_inter_broker_listener(cluster: list[Any], tmp_path: Path) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = ",".join(b.bootstrap for b in cluster)
    create_topic(bootstrap, NewTopic("secure", 1, 3, config={"min.insync.replicas": "3"}), tmp_path,
                 [b.dir / "trace.jsonl" for b in cluster])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 60
    isr: list[int] = []
    while time.monotonic() < deadline and len(isr) < 3:
        isr = _isr(admin, "secure")
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


def test_a_broker_with_a_wrong_scram_password_stays_out_of_the_isr(cluster_with_a_wrong_scram_password: Any,
                                                                   tmp_path: Path) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster: list[Any] = cluster_with_a_wrong_scram_password
    bootstrap = ",".join(b.bootstrap for b in cluster[:2])
    # Broker 0 leads, broker 2 follows.
    topic = NewTopic("secure", num_partitions=1, replica_assignment=[[0, 1, 2]], config={"min.insync.replicas": "2"})
    create_topic(bootstrap, topic, tmp_path, [b.dir / "trace.jsonl" for b in cluster])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    errors: list[str] = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 60000})
    for i in range(50):
        p.produce("secure", value=f"m-{i}".encode(),
                  on_delivery=lambda err, _m: errors.append(str(err)) if err is not None else None)
    assert p.flush(90) == 0 and errors == [], errors[:5]   # brokers 0 and 1 replicate
    # Broker 2 never fetches: the leader drops it after replica.lag.time.max.ms (5 s), and it
    # does not come back.
    deadline, isrs = time.monotonic() + 45, []
    while time.monotonic() < deadline and (not isrs or isrs[-1] != [0, 1]):
        isrs.append(_isr(admin, "secure"))
        time.sleep(0.5)
    assert isrs and isrs[-1] == [0, 1], isrs[-5:]
    time.sleep(5)
    assert _isr(admin, "secure") == [0, 1]
    # The leader refused its login: SCRAM's invalid-credentials failure, never User:broker from it.
    refused = [e for e in _events(cluster[0]) if e.get("ev") == "connection_closed"
               and "Authentication failed" in str(e.get("reason"))]
    assert refused, "the leader saw no failed login"
    assert all(_logins(b) == {"User:broker"} for b in cluster[:2])   # the others log in fine
