"""Ctrl-C stops `kafkasim report` within 2 s with exit 130 once PySpark's JVM is up: no
traceback (py4j's logged one included), no summary written, and no JVM left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafkasim.harness.runner import run_scenario
from kafkasim.harness.scenario import scenario_from_text

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
TINY = '[scenario]\nname = "tiny"\n[[topics]]\nname = "t"\n[workload.producer]\nmessages = 50\n'


def children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def is_java(pid: int) -> bool:
    try:
        return b"java" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def test_report_interrupted_after_the_jvm_started(tmp_path: Path) -> None:
    run_scenario(scenario_from_text("tiny.toml", TINY), 1, str(tmp_path / "reports" / "runs" / "tiny" / "seed-1"))
    err = (tmp_path / "stderr").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "kafkasim.cli", "report", "reports", "--out", "summary"],
                            cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)},
                            stdout=subprocess.DEVNULL, stderr=err)
    deadline = time.monotonic() + 120
    jvms: list[int] = []
    while not jvms and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
        jvms = [c for c in children(proc.pid) if is_java(c)]
    assert jvms, "PySpark's JVM never started"
    time.sleep(2)  # into the Spark session start
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    code = proc.wait(timeout=30)
    took = time.monotonic() - sent
    text = (tmp_path / "stderr").read_text()
    assert code == 130, text
    assert took < 2.0
    assert "Traceback" not in text and "interrupted" in text
    assert not (tmp_path / "summary" / "index.html").exists()
    time.sleep(0.5)
    assert not [p for p in jvms if Path(f"/proc/{p}").exists()
                and Path(f"/proc/{p}/stat").read_text().split()[2] != "Z"], "the JVM outlived the report"
