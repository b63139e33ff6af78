"""`kafkasim matrix`, CI's subset: 2 drivers x 3 fault scenarios of scenarios/matrix/ (the whole
matrix is `kafkasim matrix scenarios/matrix --clients all`, README). Every cell must be a pass or
a finding about the client (an anomaly Kafka permits for its settings), never a failure; every
fault must have acted; matrix.json carries the measurements the note quotes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kafkasim.runtime.real.client_driver import driver_missing

pytestmark = pytest.mark.real

REPO = Path(__file__).resolve().parents[2]
CLIENTS = ["confluent-kafka", "kafka-python"]
FAULTS = ["leader-power-loss", "request-error-bursts", "rolling-restart"]


@pytest.mark.timeout(1800)  # six live runs of ~20-80 s each, past pytest's default 600 s
def test_the_ci_subset_of_the_client_matrix(tmp_path: Path) -> None:
    for c in CLIENTS:
        if driver_missing(c):
            pytest.fail(str(driver_missing(c)))
    folder = tmp_path / "scenarios"
    folder.mkdir()
    for name in FAULTS:
        shutil.copy(REPO / "scenarios" / "matrix" / f"{name}.toml", folder)
    out = tmp_path / "matrix"
    p = subprocess.run([sys.executable, "-m", "kafkasim.cli", "matrix", str(folder), "--clients", ",".join(CLIENTS),
                        "--out", str(out)], capture_output=True, text=True, timeout=1500, cwd=REPO,
                       env=dict(os.environ, PYTHONPATH=str(REPO)))
    doc = json.loads((out / "matrix.json").read_text())
    print(p.stdout[-3000:])
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert doc["clients"] == CLIENTS and [s["name"] for s in doc["scenarios"]] == [f"matrix-{n}" for n in FAULTS]
    assert len(doc["cells"]) == 6
    faults = 0
    for cell in doc["cells"]:
        assert cell["verdict"] in ("pass", "finding"), cell
        assert all(a["verdict"] == "finding" and a["why"] for a in cell["anomalies"]), cell
        assert cell["faults_not_applied"] == [], cell
        run = json.loads((out / cell["run"]).read_text())
        assert run["world"] == "live" and run["client"]["client"] == cell["client"]
        assert all("latency_ms" in f for f in run["faults_fired"]) and run["faults_fired"]
        faults += len(run["faults_fired"])
    m = doc["measurements"]
    assert m["control_latency_ms"]["n"] == faults and 0 <= m["control_latency_ms"]["p50"] <= m["control_latency_ms"]["p99"]
    assert m["pacing_lag_ms"]["instants"] > 10000 and m["pacing_lag_ms"]["p50_ms"] <= m["pacing_lag_ms"]["p99_ms"]
    assert "| matrix-leader-power-loss |" in p.stdout and "control plane, call -> fault acting: p50" in p.stdout
