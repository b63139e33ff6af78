"""The pytest plugin as a user meets it: a test file of their own, run by pytest in a subprocess
with only the plugin loaded (`-p kafkasim.pytest_plugin`, as the pytest11 entry point loads it
when installed), whose test drives a real client (confluent-kafka) through a leader power loss
in the live world and asserts on what the client saw."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.real

REPO = Path(__file__).resolve().parents[2]

USER_TESTS = '''
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition, OFFSET_BEGINNING

from kafkasim.runtime.control_api import FaultError

N = 300


@pytest.mark.kafkasim(brokers=3, config={"zookeeper.session.timeout.ms": "6000"})
def test_idempotent_producer_under_leader_power_loss(kafkasim_cluster):
    c = kafkasim_cluster
    c.create_topic("orders", partitions=1, replication_factor=3, config={"min.insync.replicas": "2"})
    producer = Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5})
    acked, failed = [], []

    def report(err, msg):
        if err is not None:
            failed.append(str(err))
        else:
            acked.append((msg.value().decode(), msg.offset()))

    old_leader = None
    for i in range(N):
        producer.produce("orders", str(i).encode(), callback=report)
        producer.poll(0)
        if i == N // 2:
            assert producer.flush(60) == 0
            old_leader = c.leader("orders", 0)
            hit = c.power_loss("leader:orders-0")       # the leader's machine loses power, mid-stream
            assert hit["targets"] == [old_leader]
        time.sleep(0.005)
    assert producer.flush(120) == 0, "messages still in flight after 120 s"
    assert failed == []
    assert len(acked) == N
    new_leader = c.leader("orders", 0)
    assert new_leader not in (None, old_leader)
    # What the client was told, checked against what a reader gets back: every acked value once,
    # at the offset its ack named, none lost to the power cut.
    assert sorted(o for _, o in acked) == list(range(N))
    consumer = Consumer({"bootstrap.servers": c.bootstrap_servers, "group.id": "check",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition("orders", 0, OFFSET_BEGINNING)])
    read = {}
    deadline = time.monotonic() + 60
    while len(read) < N and time.monotonic() < deadline:
        m = consumer.poll(1.0)
        if m is not None and m.error() is None:
            read[m.offset()] = m.value().decode()
    consumer.close()
    assert read == {o: v for v, o in acked}
    assert [h["event"] for h in c.history()] == ["applied"]


def test_refused_faults_change_nothing(kafkasim_session_cluster):
    c = kafkasim_session_cluster
    with pytest.raises(FaultError) as no_holder:
        c.power_loss("leader:no-such-topic-0")
    assert no_holder.value.status == 409
    with pytest.raises(FaultError) as unknown:
        c.fault({"kind": "explode", "targets": ["broker-0"]})
    assert unknown.value.status == 404
    assert c.active() == [] and c.history() == []
'''

REAL_WORLD_TEST = '''
import pytest
from confluent_kafka import Producer

from kafkasim.runtime.control_api import FaultError


@pytest.mark.kafkasim(world="real", brokers=2)
def test_real_processes(kafkasim_cluster):
    c = kafkasim_cluster
    assert c.world == "real"
    producer = Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "all"})
    errors = []
    producer.produce("r", b"x", callback=lambda err, msg: errors.append(err))
    assert producer.flush(30) == 0 and errors == [None]
    with pytest.raises(FaultError) as power:
        c.power_loss("broker-0")          # a real process cannot lose power
    assert power.value.status == 409
    c.kill("broker-1")
    c.pause("broker-0", 1000)
    assert {h["node"] for h in c.heal()} == {"broker-0", "broker-1"}
    producer.produce("r", b"y", callback=lambda err, msg: errors.append(err))
    assert producer.flush(60) == 0 and errors == [None, None]
'''


def run_user_tests(tmp_path: Path, source: str) -> str:
    (tmp_path / "test_users.py").write_text(source)
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "kafkasim.pytest_plugin", "-p", "no:cacheprovider",
         "--basetemp", str(tmp_path / "base"), str(tmp_path / "test_users.py")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    return out


def test_the_plugin_is_a_pytest11_entry_point() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"kafkasim": "kafkasim.pytest_plugin"}


def test_a_users_test_sees_its_producer_survive_a_leader_power_loss(tmp_path: Path) -> None:
    pytest.importorskip("confluent_kafka")
    out = run_user_tests(tmp_path, USER_TESTS)
    assert "2 passed" in out, out[-3000:]
    runs = list((tmp_path / "base").rglob("run.json"))
    assert len(runs) == 2, runs  # each cluster wrote its run.json


def test_world_real_starts_real_processes_with_real_zookeeper(tmp_path: Path, zookeeper: object) -> None:
    """`zookeeper` only checks that Debian's ZooKeeper is installed (the cluster starts its own)."""
    pytest.importorskip("confluent_kafka")
    out = run_user_tests(tmp_path, REAL_WORLD_TEST)
    assert "1 passed" in out, out[-3000:]
