"""`kafkasim run scenarios/smoke.toml`: the simulated world end to end, its report, and
determinism across processes with different PYTHONHASHSEED values."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

SMOKE = "scenarios/smoke.toml"


def _run(seed: int, out: Path, hashseed: str) -> tuple[int, str, dict]:
    env = dict(os.environ, PYTHONHASHSEED=hashseed)
    p = subprocess.run([sys.executable, "-m", "kafkasim.cli", "run", SMOKE, "--seed", str(seed), "--out", str(out)],
                       capture_output=True, text=True, env=env, timeout=300)
    run = json.loads((out / "run.json").read_text())
    return p.returncode, p.stdout, run


def test_smoke_passes_and_reports(tmp_path: Path) -> None:
    code, stdout, run = _run(3, tmp_path / "a", "0")
    assert code == 0, stdout
    assert run["verdict"] == "pass" and run["scenario"] == "smoke" and run["seed"] == 3
    stats = run["stats"]
    assert stats["produced"] == 2000 and stats["acked"] == 2000 and stats["consumed"] == 2000
    assert stats["sim_time_ms"] > 0 and stats["produce_latency_ms"]["p50"] > 0
    assert {c["name"] for c in run["checks"]} >= {"lost-write", "duplicate", "reorder", "unseen", "task-error"}
    assert all(c["ok"] for c in run["checks"])
    trace = (tmp_path / "a" / "trace.jsonl").read_bytes()
    import hashlib
    assert hashlib.sha256(trace).hexdigest() == run["trace_hash"]
    assert f"trace hash {run['trace_hash']}" in stdout
    events = [json.loads(line)["ev"] for line in trace.splitlines()]
    assert events.count("produce") > 0 and "broker_started" in events and "topic_created" in events


def test_same_seed_same_trace_hash_across_processes_and_hash_seeds(tmp_path: Path) -> None:
    _, _, a = _run(11, tmp_path / "a", "1")
    _, _, b = _run(11, tmp_path / "b", "4242")
    assert a["trace_hash"] == b["trace_hash"]
    assert (tmp_path / "a" / "trace.jsonl").read_bytes() == (tmp_path / "b" / "trace.jsonl").read_bytes()
    _, _, c = _run(12, tmp_path / "c", "1")
    assert c["trace_hash"] != a["trace_hash"], "the seed must change the run"


def test_bad_scenario_names_file_and_key(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[scenario]\nname = "x"\n[[topics]]\nname = "t"\npartitions = "three"\n')
    p = subprocess.run([sys.executable, "-m", "kafkasim.cli", "run", str(bad), "--seed", "1"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert str(bad) in p.stderr and "topics[0].partitions" in p.stderr and "positive integer" in p.stderr
