"""The report as a person sees it: two real runs (a clean smoke run and a power loss whose
acknowledged loss the scenario expects), `kafkasim report` from the command line, then the
overview and a run page opened in a real headless Chromium — screenshots taken, console
messages captured (the pages carry no script, so any console message is a failure), and every
link checked to resolve. A negative test injects a deliberate script error to show the console
detector catches one.

Chromium is Debian's `chromium` package; without it the module is skipped, unless CI is set or
KAFKASIM_REQUIRE_CHROMIUM=1, where its absence fails.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.real

REPO = Path(__file__).resolve().parents[2]
RUNS = (("smoke", 1), ("power-loss-default-flush", 1))
CONSOLE = re.compile(r":CONSOLE(?::\d+|\(\d+\))\] (.*)$")


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("CI") or os.environ.get("KAFKASIM_REQUIRE_CHROMIUM") == "1":
        pytest.fail("headless Chromium is required here: apt-get install chromium")
    pytest.skip("no Chromium (apt-get install chromium)")


def open_in_chromium(page: Path, png: Path, size: tuple[int, int]) -> list[str]:
    """Load page in headless Chromium, screenshot it to png; return the console messages."""
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--no-first-run", f"--user-data-dir={png.parent / 'chromium-profile'}",
           "--enable-logging=stderr", "--v=0", f"--window-size={size[0]},{size[1]}",
           f"--screenshot={png}", page.resolve().as_uri()]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return [m.group(1) for line in p.stderr.splitlines() if (m := CONSOLE.search(line))]


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def kafkasim(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = dict(os.environ, PYTHONPATH=str(REPO), **(env or {}))
    return subprocess.run([sys.executable, "-m", "kafkasim.cli", *args], capture_output=True, text=True,
                          timeout=600, cwd=REPO, env=full_env)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The summary directory of a report over RUNS."""
    chromium()  # skip (or fail in CI) before spending a minute on runs
    root = tmp_path_factory.mktemp("reports")
    for scenario, seed in RUNS:
        p = kafkasim("run", f"scenarios/{scenario}.toml", "--seed", str(seed),
                     "--out", str(root / "runs" / scenario / f"seed-{seed}"))
        assert p.returncode == 0, p.stdout + p.stderr
    write_client_matrix(root)
    p = kafkasim("report", str(root))
    assert p.returncode == 0, p.stdout + p.stderr
    progress = [line for line in p.stderr.splitlines() if line.startswith("report [")]
    assert "2 run.json found" in progress[0] and any("run pages 2/2" in line for line in progress), p.stderr
    assert any("1 client matrix (matrix.json) found" in line for line in progress), p.stderr
    return root / "summary"


def write_client_matrix(root: Path) -> None:
    """A matrix.json as `kafkasim matrix` writes it (schema kafkasim-matrix/1), its cells pointing at
    the two runs above (a live matrix takes minutes; tests/harness/test_matrix.py makes real ones):
    the report must render its client × fault table and link each cell to its run's page."""
    import json

    cell = {"anomalies": [], "client_settings": {"acks": "all", "idempotent": False, "idempotence_source": "x",
                                                 "client": "c", "version": "1"}, "faults_not_applied": []}
    doc = {"schema": "kafkasim-matrix/1", "seed": 1, "command": "kafkasim matrix scenarios/matrix",
           "clients": ["kafka-python", "java"],
           "scenarios": [{"name": "smoke", "description": "d"}, {"name": "power-loss", "description": "<b>d</b>"}],
           "cells": [{**cell, "scenario": "smoke", "client": "kafka-python", "verdict": "pass",
                      "run": "runs/smoke/seed-1/run.json"},
                     {**cell, "scenario": "power-loss", "client": "java", "verdict": "finding",
                      "run": "runs/power-loss-default-flush/seed-1/run.json",
                      "anomalies": [{"kind": "duplicate", "verdict": "finding", "why": "no idempotence", "count": 2}]},
                     {"scenario": "power-loss", "client": "kafka-python", "verdict": "skipped", "run": None,
                      "reason": "driver not built"}],
           "totals": {"pass": 1, "finding": 1, "skipped": 1},
           "measurements": {"control_latency_ms": {"n": 2, "p50": 1.5, "p90": 2.0, "p99": 2.0, "max": 2.0},
                            "pacing_lag_ms": {"instants": 10, "p50_ms": 0.5, "p99_ms": 9.0, "max_ms": 9.5}}}
    (root / "matrix.json").write_text(json.dumps(doc))


def test_client_matrix_table_renders_and_links_every_run(report: Path) -> None:
    html = (report / "index.html").read_text()
    section = html[html.index('<div id="client-matrix">'):]
    section = section[:section.index("</table>")]
    assert re.search(r'<td class="ok" data-verdict="pass"[^>]*><a href="runs/runs/smoke/seed-1/index.html">',
                     section)
    assert re.search(r'<td class="finding" data-verdict="finding"[^>]*><a href="runs/runs/power-loss-default-flush/'
                     r'seed-1/index.html">finding: duplicate</a>', section)
    assert '<td class="none" data-verdict="skipped"' in section and "&lt;b&gt;d&lt;/b&gt;" in section
    assert section.count('<td class="none"></td>') == 1  # smoke x java was not run
    assert "p50 1.5 ms, p99 2.0 ms over 2 faults" in html and 'href="../matrix.json"' in html
    for ref in local_refs(section):
        assert (report / ref).is_file(), ref
    png = report.parent / "client-matrix.png"
    assert open_in_chromium(report / "index.html", png, (1280, 2600)) == []


def local_refs(html: str) -> list[str]:
    refs = re.findall(r'(?:href|src)="([^"]+)"', html)
    return [r for r in refs if not r.startswith(("data:", "#", "http://", "https://"))]


def test_overview_renders_without_console_errors(report: Path) -> None:
    png = report.parent / "overview.png"
    assert open_in_chromium(report / "index.html", png, (1280, 2200)) == []
    assert png_size(png) == (1280, 2200) and png.stat().st_size > 50_000  # a page, not a blank
    html = (report / "index.html").read_text()
    assert "<script" not in html and "https://" not in html  # nothing fetched at view time
    for ref in local_refs(html):
        assert (report / ref.split("#")[0]).is_file(), ref
    # The expected loss is labelled expected, not a failure; the matrix links both run pages.
    assert re.search(r'<td class="exp"[^>]*><a href="runs/runs/power-loss-default-flush/seed-1/index.html">E</a>',
                     html)
    assert re.search(r'<td class="ok"[^>]*><a href="runs/runs/smoke/seed-1/index.html">✓</a>', html)


def test_run_page_renders_with_timeline_and_trace_links(report: Path) -> None:
    run_page = report / "runs" / "runs" / "power-loss-default-flush" / "seed-1" / "index.html"
    png = report.parent / "run-page.png"
    assert open_in_chromium(run_page, png, (1280, 1600)) == []
    assert png_size(png) == (1280, 1600) and png.stat().st_size > 50_000
    html = run_page.read_text()
    assert '<svg xmlns="http://www.w3.org/2000/svg" id="timeline"' in html
    assert "log scale" in html and "broker-0 down" in html and "controller → broker 0" in html
    for ref in local_refs(html):
        assert (run_page.parent / ref.split("#")[0]).is_file(), ref
    trace_ids = set(re.findall(r'<span id="(L\d+)">', (run_page.parent / "trace.html").read_text()))
    anchors = re.findall(r'href="trace.html#(L\d+)"', html)
    assert anchors and set(anchors) <= trace_ids  # every marker and anomaly link lands on its line
    # Each expected lost write links to the send_complete line of its own value in trace.jsonl.
    trace = (run_page.parent / "../../../../../runs/power-loss-default-flush/seed-1/trace.jsonl").resolve()
    lines = trace.read_text().splitlines()
    rows = re.findall(r"<td class='exp'>lost-write</td>.*?&quot;value&quot;: &quot;([^&]+)&quot;.*?"
                      r'href="trace.html#L(\d+)"', html)
    assert rows
    for value, line in rows:
        assert '"ev":"send_complete"' in lines[int(line) - 1] and f'"value":"{value}"' in lines[int(line) - 1]


def test_console_detector_catches_a_deliberate_error(report: Path) -> None:
    bad = report / "deliberately-broken.html"
    html = (report / "index.html").read_text()
    bad.write_text(html.replace("</body>", '<script>throw new Error("kafkasim-deliberate-error")</script></body>'))
    messages = open_in_chromium(bad, report.parent / "broken.png", (800, 600))
    assert any("kafkasim-deliberate-error" in m for m in messages), messages
