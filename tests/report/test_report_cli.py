"""The main job end to end: `kafkasim run` twice, then `kafkasim report` (PySpark local[*])
summarises those runs."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark


def test_run_then_report(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    for seed in (1, 2):
        out = reports / "runs" / "smoke" / f"seed-{seed}"
        p = subprocess.run([sys.executable, "-m", "kafkasim.cli", "run", "scenarios/smoke.toml", "--seed", str(seed),
                            "--out", str(out)], capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stdout + p.stderr
    p = subprocess.run([sys.executable, "-m", "kafkasim.cli", "report", str(reports)], capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    summary = reports / "summary"
    rows = list(csv.DictReader((summary / "summary.csv").open()))
    assert sorted(int(r["seed"]) for r in rows) == [1, 2] and {r["verdict"] for r in rows} == {"pass"}
    scen = list(csv.DictReader((summary / "scenarios.csv").open()))
    assert len(scen) == 1 and scen[0]["scenario"] == "smoke" and scen[0]["runs"] == "2"
    html = (summary / "index.html").read_text()
    assert "smoke" in html and html.count("data:image/png;base64,") >= 3
