"""The fault control plane of a real cluster (real/cluster: Debian's ZooKeeper + three
`kafkasim serve` processes): `kafkasim cluster kill|restart|pause|partition|heal` and
`kafkasim fault` against DIR, roles resolved over the wire, request faults forwarded to the
leader's own control plane under confluent-kafka, ZooKeeper killed and restarted, refusals
that leave nothing applied, and the time from a kill call to the process being gone."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkasim.runtime.real.control_client import ControlClient, ControlError
from tests.serve.conftest import wait_until
from tests.serve.test_cluster_failover import _launcher

pytestmark = pytest.mark.real
ROOT = Path(__file__).resolve().parents[2]
CONFIGS = {"zookeeper.session.timeout.ms": "6000", "replica.lag.time.max.ms": "10000"}


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return ""


def _cli(*args: str) -> Any:
    out = subprocess.run([sys.executable, "-m", "kafkasim.cli", *args], capture_output=True, text=True, timeout=120,
                         cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    launcher = _launcher()
    if not os.path.exists(launcher.load_zk().ZK_JAR):
        if os.environ.get("KAFKASIM_REQUIRE_ZOOKEEPER") == "1":
            pytest.fail("zookeeper.jar missing: apt-get install -y zookeeper")
        pytest.skip("zookeeper.jar missing")
    c = launcher.up(tmp_path_factory.mktemp("cc") / "cluster", 3, CONFIGS)
    try:
        yield c
    finally:
        c.down()
    assert not (c.dir / "control").exists()


def _pid(c: Any, name: str) -> int:
    return int(ControlClient(c.control).nodes()[name]["pid"])


def test_kill_and_restart_through_the_cli(cluster: Any) -> None:
    d = str(cluster.dir)
    pid = _pid(cluster, "broker-1")
    fault = _cli("cluster", "kill", "--broker", "1", "--dir", d)
    assert fault["targets"] == ["broker-1"] and fault["spec"]["kind"] == "crash"
    assert _state(pid) in ("", "Z")
    assert ControlClient(cluster.control).nodes()["broker-1"]["up"] is False
    _cli("cluster", "restart", "--broker", "1", "--dir", d)
    nodes = ControlClient(cluster.control).nodes()
    assert nodes["broker-1"]["up"] is True and nodes["broker-1"]["pid"] != pid
    healed = _cli("cluster", "heal", "--broker", "1", "--dir", d)["healed"]   # the kill's undo: nothing down
    assert [h["spec"]["kind"] for h in healed] == ["crash"]


def test_pause_for_a_duration_resumes_by_itself(cluster: Any) -> None:
    pid = _pid(cluster, "broker-2")
    _cli("cluster", "pause", "--broker", "2", "--duration-ms", "1500", "--dir", str(cluster.dir))
    assert _state(pid) == "T"
    time.sleep(1.5)
    # the control plane's timer resumes it; a loaded machine is late
    wait_until(lambda: _state(pid) != "T", 30, f"broker-2 (pid {pid}) resumed")
    assert _state(pid) not in ("", "Z")
    events = [(h["event"], h["kind"]) for h in ControlClient(cluster.control).history()][-2:]
    assert events == [("applied", "pause"), ("expired", "pause")]


def test_request_errors_forwarded_to_the_leader_under_confluent_kafka(cluster: Any) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "retry.backoff.ms": 20})
    p.produce("fw", b"warm-up", partition=0)
    assert p.flush(60) == 0
    fault = _cli("fault", "add", json.dumps({"kind": "request_error", "targets": ["leader:fw-0"], "api_key": "Produce",
                                             "error_code": "NOT_LEADER_OR_FOLLOWER", "count": 5}),
                 "--dir", str(cluster.dir))
    leader = fault["targets"][0]
    remote_id = fault["forwarded"][leader]
    errors: list[Any] = []
    for i in range(10):
        p.produce("fw", f"v{i}".encode(), partition=0, on_delivery=lambda e, m: errors.append(e) if e else None)
        p.flush(30)
    assert errors == []
    port = int(cluster.broker(int(leader.split("-")[1])).control_port)
    remote = [h for h in ControlClient(f"127.0.0.1:{port}").history() if h["id"] == remote_id]
    assert remote[-1]["event"] == "expired" and remote[-1]["fired"] == 5
    _cli("fault", "heal", fault["id"], "--dir", str(cluster.dir))


def test_partition_forwards_peer_refusals_and_heal_lifts_them(cluster: Any) -> None:
    fault = _cli("cluster", "partition", "--broker", "0", "--dir", str(cluster.dir))
    assert sorted(fault["forwarded"]) == ["broker-0", "broker-1", "broker-2"]
    b0 = ControlClient(f"127.0.0.1:{cluster.broker(0).control_port}")
    [armed] = b0.active()
    assert armed["spec"]["kind"] == "net_refuse"
    assert sorted(armed["spec"]["peers"]) == sorted(f"127.0.0.1:{cluster.broker(i).port}" for i in (1, 2))
    _cli("cluster", "heal", "--dir", str(cluster.dir))
    assert b0.active() == []


def test_zookeeper_killed_and_restarted_after_its_duration(cluster: Any) -> None:
    c = ControlClient(cluster.control)
    pid = _pid(cluster, "zookeeper")
    c.add({"kind": "crash", "targets": ["zookeeper"], "duration_ms": 1000})
    assert _state(pid) in ("", "Z")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not c.nodes()["zookeeper"]["up"]:
        time.sleep(0.5)
    assert c.nodes()["zookeeper"]["up"] and c.nodes()["zookeeper"]["pid"] != pid


@pytest.mark.parametrize("spec, status, words", [
    ({"kind": "pause", "targets": ["broker-9"]}, 404, "unknown node or role 'broker-9'"),
    ({"kind": "pause", "targets": ["leader:no-such-topic-0"]}, 404, "has no holder"),
    ({"kind": "isolate", "targets": ["zookeeper"]}, 409, "brokers only"),
    ({"kind": "crash", "targets": ["broker-0"], "mode": "power"}, 409, "simulated disk"),
    ({"kind": "request_error", "targets": ["broker-0", "broker-1"], "api_key": "CreateTopics", "error_code": 7},
     400, "has no error response"),
    ({"kind": "tsunami", "targets": ["broker-0"]}, 404, "unknown fault kind"),
])
def test_refusals_leave_nothing_applied(cluster: Any, spec: dict[str, Any], status: int, words: str) -> None:
    c = ControlClient(cluster.control)
    before = len(c.history())
    with pytest.raises(ControlError) as e:
        c.add(spec)
    assert e.value.status == status and words in e.value.message
    assert c.active() == [] and len(c.history()) == before
    for i in range(3):
        assert ControlClient(f"127.0.0.1:{cluster.broker(i).control_port}").active() == []


def test_time_from_kill_call_to_process_gone(cluster: Any) -> None:
    c = ControlClient(cluster.control)
    samples = []
    for _ in range(5):
        pid = _pid(cluster, "broker-2")
        t0 = time.perf_counter()
        f = c.add({"kind": "crash", "targets": ["broker-2"]})
        while _state(pid) not in ("", "Z"):
            time.sleep(0.0005)
        samples.append((time.perf_counter() - t0) * 1000)
        c.add({"kind": "restart", "targets": ["broker-2"]})
        c.heal(f["id"])
    samples.sort()
    print(f"\ncontrol call -> broker process gone (SIGKILL): p50 {statistics.median(samples):.1f} ms, "
          f"max {samples[-1]:.1f} ms over {len(samples)}")
    assert samples[-1] < 5000
