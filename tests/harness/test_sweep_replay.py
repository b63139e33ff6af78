"""`kafkasim sweep` (worker processes, JUnit XML, exit status) and `kafkasim replay` (bit-for-bit
re-run; the first diverging event on a mismatch)."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kafkasim.harness.sweep import parse_seeds

pytestmark = pytest.mark.sim


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkasim.cli", *args], capture_output=True, text=True, timeout=600)


def test_parse_seeds() -> None:
    assert parse_seeds("3") == [3] and parse_seeds("1-4") == [1, 2, 3, 4] and parse_seeds("1,5,9-10") == [1, 5, 9, 10]


def test_sweep_writes_junit_and_exit_status_reflects_violations(tmp_path: Path) -> None:
    p = _cli("sweep", "scenarios/smoke.toml", "--seeds", "1-2", "--jobs", "2", "--out", str(tmp_path))
    assert p.returncode == 0, p.stdout + p.stderr
    suite = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "2" and suite.get("failures") == "0"
    assert (tmp_path / "runs" / "smoke" / "seed-2" / "run.json").exists()
    # flush.messages=1 finds the first log's missing directory fsync in seed 1: a violation, exit 1.
    p = _cli("sweep", "scenarios/power-loss-flush-every-message.toml", "--seeds", "1", "--jobs", "1",
             "--out", str(tmp_path / "b"))
    report = json.loads((tmp_path / "b" / "runs" / "power-loss-flush-every-message" / "seed-1" / "run.json").read_text())
    assert p.returncode == (0 if report["verdict"] == "pass" else 1)
    failures = ET.parse(tmp_path / "b" / "junit.xml").getroot().iter("failure")
    assert len(list(failures)) == (0 if report["verdict"] == "pass" else 1)


def test_replay_identical_then_diverging(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert _cli("run", "scenarios/smoke.toml", "--seed", "4", "--out", str(out)).returncode == 0
    p = _cli("replay", str(out / "run.json"))
    assert p.returncode == 0 and "replay identical" in p.stdout
    lines = (out / "trace.jsonl").read_text().splitlines(keepends=True)
    lines[10] = lines[10].replace('"t":', '"t":1')  # tamper with one recorded event
    (out / "trace.jsonl").write_text("".join(lines))
    run = json.loads((out / "run.json").read_text())
    run["trace_hash"] = "0" * 64
    (out / "run.json").write_text(json.dumps(run))
    p = _cli("replay", str(out / "run.json"))
    assert p.returncode == 1 and "DIVERGED" in p.stdout and "trace line 11" in p.stdout
