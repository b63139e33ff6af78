"""A scenario whose workload is a third-party client, end to end: the simulated cluster on real
sockets, the client's driver processes (real/clients/), the scenario's fault fired through the
control plane on the wall-clock timeline, the drivers' replies checked by the same history
checkers and god's-eye checks as a simulated run. Two drivers on one fault scenario (the leader
of events-0 isolated from everyone for 8 s), through `kafkasim run --client`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kafkasim.runtime.real.client_driver import driver_missing

pytestmark = pytest.mark.real

REPO = Path(__file__).resolve().parents[2]
SCENARIO = "scenarios/matrix/partition-isolating-leader.toml"
SIM_CHECKS = {"lost-write", "unseen", "duplicate", "inconsistent-offsets", "reorder", "replica-divergence",
              "recovered-not-prefix", "hw-regression", "two-leaders-one-epoch", "task-error"}


def kafkasim(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkasim.cli", *args], capture_output=True, text=True,
                          timeout=600, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)))


@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python"])
def test_a_client_under_a_leader_isolation(tmp_path: Path, client: str) -> None:
    if driver_missing(client):
        pytest.fail(str(driver_missing(client)))
    p = kafkasim("run", SCENARIO, "--client", client, "--seed", "3", "--out", str(tmp_path))
    run = json.loads((tmp_path / "run.json").read_text())
    assert p.returncode == (0 if run["verdict"] == "pass" else 1), p.stdout + p.stderr
    assert f"client {client}" in p.stdout and "control-plane call->acting p50" in p.stdout, p.stdout
    assert run["world"] == "live" and "clients" in run["live"] and "replayable" in run["live"]
    assert run["client"]["client"] == client and run["client"]["version"]
    # the fault acted, through the control plane, on the broker leading events-0 at that moment
    [fired] = run["faults_fired"]
    assert fired["spec"]["kind"] == "isolate" and "error" not in fired
    assert fired["targets"][0].startswith("broker-") and 0 <= fired["latency_ms"] < 30_000
    trace = [json.loads(line) for line in (tmp_path / "trace.jsonl").read_text().splitlines()]
    at = next(i for i, e in enumerate(trace) if e["ev"] == "control_fault")
    after = {e["ev"] for e in trace[at:]}
    assert {"zk_session_expired", "partition_leader_elected", "control_fault_end"} <= after
    assert all("wall" in e for e in trace)
    # the history is the driver's: most of it acknowledged, every acked value read back
    st = run["stats"]
    assert st["produced"] == 1200 and st["acked"] > 1000 and st["consumed"] >= st["acked"]
    names = {c["name"] for c in run["checks"]}
    assert SIM_CHECKS <= names, SIM_CHECKS - names
    # acks=all: whatever the client's idempotence, nothing acknowledged is lost or overwritten
    bad = {c["name"] for c in run["checks"] if not c["ok"]}
    assert not bad & {"lost-write", "unseen", "inconsistent-offsets"}, run["anomalies"][:5]
    assert not bad - {"duplicate", "reorder"}, run["anomalies"][:5]  # permitted without idempotence only
    if run["client"]["idempotent"]:
        assert not bad, run["anomalies"][:5]
    assert st["pacing_lag_ms"]["instants"] > 1000 and st["control_latency_ms"]["n"] == 1
    # not replayable bit for bit: replay says so and names the command that runs it again
    r = kafkasim("replay", str(tmp_path / "run.json"))
    assert r.returncode == 2 and f"--client {client}" in r.stderr and "Traceback" not in r.stderr


def test_an_unknown_or_unbuilt_client_is_a_usage_error(tmp_path: Path) -> None:
    p = kafkasim("run", SCENARIO, "--client", "nosuch", "--out", str(tmp_path))
    assert p.returncode == 2 and "unknown client 'nosuch'" in p.stderr and "Traceback" not in p.stderr
    env_dir = tmp_path / "clients"
    (env_dir / "java").mkdir(parents=True)
    q = subprocess.run([sys.executable, "-m", "kafkasim.cli", "run", SCENARIO, "--client", "java", "--out",
                        str(tmp_path / "o")], capture_output=True, text=True, timeout=120, cwd=REPO,
                       env=dict(os.environ, PYTHONPATH=str(REPO), KAFKASIM_CLIENTS_DIR=str(env_dir)))
    assert q.returncode == 2 and "Driver.class missing" in q.stderr, q.stderr
