"""`kafkasim serve --sim` as a user runs it: a scenario's cluster on real ports, its [[faults]]
firing on the wall-clock timeline, a real client (confluent-kafka) producing through them, the
control plane injecting one more, and SIGTERM writing run.json."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafkasim.runtime.real.control_client import ControlClient

pytestmark = pytest.mark.real

REPO = Path(__file__).resolve().parents[2]

SCENARIO = """
[scenario]
name = "live-isolate"
description = "the leader of orders-0 is cut off at 3 s for 4 s"
duration_ms = 60000

[cluster]
brokers = 3
[cluster.config]
"zookeeper.session.timeout.ms" = 6000

[[topics]]
name = "orders"
partitions = 1
replication_factor = 3
[topics.config]
"min.insync.replicas" = 2

[workload.producer]
messages = 10

[[faults]]
at_ms = 3000
kind = "isolate"
targets = ["leader:orders-0"]
duration_ms = 4000
"""


def test_serve_sim_runs_a_scenarios_faults_under_a_real_client(tmp_path: Path) -> None:
    ck = pytest.importorskip("confluent_kafka")
    (tmp_path / "live.toml").write_text(SCENARIO)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkasim.cli", "serve", "--sim", "--scenario", str(tmp_path / "live.toml"),
         "--seed", "4", "--out", str(out)],
        cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)
    try:
        assert proc.stdout is not None
        first, second = proc.stdout.readline(), proc.stdout.readline()
        bootstrap = re.search(r"bootstrap servers (\S+)", first)
        control = re.search(r"http://(\S+)/v1/", second)
        assert bootstrap and control, first + second
        servers = bootstrap.group(1).split(",")
        assert len(servers) == 3 and all(s.startswith("127.0.0.1:") for s in servers)

        producer = ck.Producer({"bootstrap.servers": bootstrap.group(1), "acks": "all",
                                "enable.idempotence": True, "linger.ms": 5})
        acked: list[int] = []
        failed: list[str] = []

        def report(err: object, msg: object) -> None:
            (failed.append(str(err)) if err else acked.append(msg.offset()))  # type: ignore[attr-defined]

        t0 = time.monotonic()
        while time.monotonic() - t0 < 10:  # across the isolate (3 s .. 7 s of the world's clock)
            producer.produce("orders", b"v", callback=report)
            producer.poll(0.02)
        assert producer.flush(90) == 0
        assert failed == [] and sorted(acked) == list(range(len(acked))) and len(acked) > 100

        client = ControlClient(control.group(1))
        nodes = client.nodes()
        assert nodes["broker-0"]["bootstrap"] == servers[0] and nodes["clients"]["role"] == "client"
        conns = {k: v for k, v in nodes.items() if k.startswith("client-")}
        assert conns and all(v["peer"].startswith("127.0.0.1:") and v["broker"].startswith("broker-")
                             for v in conns.values())
        assert sum(v["bytes_in"] for v in conns.values()) > 100 * 10  # the producer's requests went through
        paused = client.add({"kind": "pause", "targets": ["controller"], "duration_ms": 500})
        assert paused["targets"][0].startswith("broker-")
        # The 500 ms is simulated time, paced to the wall clock only as fast as the loop keeps up.
        deadline = time.monotonic() + 30
        while client.active() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert client.active() == []
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, rest
    assert "pacing lag" in rest and "trace hash" in rest

    run = json.loads((out / "run.json").read_text())
    assert run["world"] == "live" and run["status"] == "stopped" and "replayable" in run["live"]
    [fired] = run["faults_fired"]
    assert fired["kind"] == "isolate" and fired["t_ms"] >= 3000 and fired["nodes"][0].startswith("broker-")
    assert [h["event"] for h in run["control_faults"]] == ["applied", "expired"]
    assert run["stats"]["client_connections"] >= 1 and run["stats"]["pacing_lag_ms"]["instants"] > 100
    assert run["task_errors"] == [] and run["invariant_violations"] == []
    trace = [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]
    fault = next(r for r in trace if r["ev"] == "fault")
    # On the wall-clock timeline: never ahead of it; behind it by the loop's lag (bounded loosely,
    # as a machine shared with another test worker's JVMs can lag by more than a second).
    assert 0 <= fault["wall"] - fault["t"] < 10_000
    assert any(r["ev"] == "client_connect" for r in trace)
