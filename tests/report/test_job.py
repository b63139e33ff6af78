"""End-to-end tests of `run_report` over a synthetic reports tree (one Spark run).

The tree (written by ``build_tree``), with every number the tests assert:

  scenario  tree  seed verdict ratio lat p50/p99 anomalies                  faults
  basic     new   1    pass    10    1/10      stale_read (expected)      -
  basic     new   2-4  pass    20-40 2-4/20-40 -                          -
  basic     old   4    pass    50    5/50      -  (different trace hash -> flaky)
  partition new   1    pass    5     2/20      -                          partition
  partition new   2    FAIL    6     4/40      lost_write (unexpected)    partition, crash x2
  partition new   3    pass    7     6/60      duplicate x2 (expected)    partition
  partition old   1    FAIL    8     8/80      lost_write (unexpected)    partition  (verdict differs -> flaky)
  idle<&>   new   7    pass    100   null      -  (same hash in both trees -> NOT flaky)
  idle<&>   old   7    pass    100   null      -
  broken    new   9    (missing "verdict")  -> reported invalid, not counted
  summary/run.json     (valid, but inside the output dir) -> ignored
"""

from __future__ import annotations

import base64
import csv
import hashlib
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from kafkasim.report.console import format_console
from kafkasim.report.job import run_report
from kafkasim.report.model import ReportResult

pytestmark = pytest.mark.spark

# Check name -> the anomaly kind it reports; `expected` per scenario below.
CHECK_OF_KIND = {"lost_write": "durability", "duplicate": "idempotence", "stale_read": "linearizability"}
EXPECTED_CHECKS = {"basic": {"linearizability"}, "partition": {"idempotence"}, "idle<&>": set()}
SCENARIO_PATHS = {
    "basic": "scenarios/basic.toml",
    "partition": "scenarios/partition.toml",
    "idle<&>": "scenarios/idle.toml",
}


def make_run(
    scenario: str,
    seed: int,
    *,
    code: str = "0.1.0+new",
    ratio: float = 1.0,
    lat: tuple[float, float] | None = (1.0, 10.0),
    anomalies: tuple[str, ...] = (),
    faults: tuple[str, ...] = (),
    trace_salt: str = "",
) -> dict[str, Any]:
    """A schema-valid run.json whose checks and verdict follow from `anomalies`."""
    expected = EXPECTED_CHECKS[scenario]
    checks = []
    for kind, name in CHECK_OF_KIND.items():
        n = anomalies.count(kind)
        checks.append({"name": name, "ok": n == 0, "violations": n, "expected": name in expected})
    verdict = "pass" if all(c["ok"] for c in checks if not c["expected"]) else "fail"
    latency = None if lat is None else {"p50": lat[0], "p90": lat[1] / 2, "p99": lat[1], "max": lat[1] * 2}
    return {
        "schema_version": 1,
        "scenario": scenario,
        "scenario_path": SCENARIO_PATHS[scenario],
        "seed": seed,
        "world": "sim",
        "code_version": code,
        "verdict": verdict,
        "trace_hash": hashlib.sha256(f"{scenario}/{seed}/{trace_salt}".encode()).hexdigest(),
        "checks": checks,
        "anomalies": [
            {"kind": k, "expected": CHECK_OF_KIND[k] in expected, "detail": {"offset": i}}
            for i, k in enumerate(anomalies)
        ],
        "stats": {
            "sim_time_ms": 1000.0 * ratio,
            "wall_time_s": 1.0,
            "sim_to_wall_ratio": ratio,
            "events": 100,
            "produced": 10,
            "acked": 0 if lat is None else 10,
            "consumed": 0 if lat is None else 10,
            "produce_latency_ms": latency,
        },
        "faults": [{"at_ms": 100.0 * i, "kind": k, "target": "b1"} for i, k in enumerate(faults)],
    }


def write_run(root: Path, rel: str, run: dict[str, Any]) -> Path:
    path = root / rel / "run.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(run, indent=2))  # multi-line, like the harness writes
    return path


def build_tree(root: Path) -> None:
    new, old = "runs", "old/runs"
    write_run(root, f"{new}/basic/seed-1", make_run("basic", 1, ratio=10, lat=(1, 10), anomalies=("stale_read",)))
    for seed in (2, 3, 4):
        write_run(root, f"{new}/basic/seed-{seed}", make_run("basic", seed, ratio=10 * seed, lat=(seed, 10 * seed)))
    write_run(
        root, f"{old}/basic/seed-4", make_run("basic", 4, code="0.1.0+old", ratio=50, lat=(5, 50), trace_salt="x")
    )
    p = ("partition",)
    write_run(root, f"{new}/partition/seed-1", make_run("partition", 1, ratio=5, lat=(2, 20), faults=p))
    write_run(
        root,
        f"{new}/partition/seed-2",
        make_run("partition", 2, ratio=6, lat=(4, 40), anomalies=("lost_write",), faults=p + ("crash", "crash")),
    )
    write_run(
        root,
        f"{new}/partition/seed-3",
        make_run("partition", 3, ratio=7, lat=(6, 60), anomalies=("duplicate",) * 2, faults=p),
    )
    write_run(
        root,
        f"{old}/partition/seed-1",
        make_run(
            "partition", 1, code="0.1.0+old", ratio=8, lat=(8, 80), anomalies=("lost_write",), faults=p, trace_salt="y"
        ),
    )
    write_run(root, f"{new}/idle/seed-7", make_run("idle<&>", 7, ratio=100, lat=None))
    write_run(root, f"{old}/idle/seed-7", make_run("idle<&>", 7, code="0.1.0+old", ratio=100, lat=None))
    broken = make_run("basic", 9)
    del broken["verdict"]
    write_run(root, f"{new}/broken/seed-9", broken)
    write_run(root, "summary", make_run("basic", 99))  # inside the output dir: must be skipped


PROGRESS: list[str] = []  # what the module's one report told its progress callback


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[ReportResult, float]:
    root = tmp_path_factory.mktemp("reports")
    build_tree(root)
    start = time.monotonic()
    result = run_report(str(root), master="local[2]", progress=PROGRESS.append)
    return result, time.monotonic() - start


@pytest.fixture(scope="module")
def result(report: tuple[ReportResult, float]) -> ReportResult:
    return report[0]


def read_csv(result: ReportResult, name: str) -> list[dict[str, str]]:
    with open(result.paths[name], newline="") as f:
        return list(csv.DictReader(f))


def by(rows: list[dict[str, str]], *keys: str) -> dict[Any, dict[str, str]]:
    return {tuple(r[k] for k in keys) if len(keys) > 1 else r[keys[0]]: r for r in rows}


def approx(value: str) -> Any:
    return pytest.approx(float(value))


def test_result_counts(result: ReportResult) -> None:
    assert result.runs == 11
    assert result.scenarios == 3
    assert result.failures == 2
    assert [Path(i.path).parts[-3:] for i in result.invalid] == [("broken", "seed-9", "run.json")]
    assert "'verdict'" in result.invalid[0].error and "missing" in result.invalid[0].error
    out = Path(result.out_dir)
    assert out.name == "summary"
    for name in ("summary.csv", "scenarios.csv", "anomalies.csv", "checks.csv", "faults.csv", "index.html"):
        assert Path(result.paths[name]) == out / name and (out / name).is_file()


def test_scenarios_csv(result: ReportResult) -> None:
    rows = by(read_csv(result, "scenarios.csv"), "scenario")
    assert list(rows) == ["basic", "idle<&>", "partition"]  # sorted; the ghost in summary/ is absent
    basic, idle, part = rows["basic"], rows["idle<&>"], rows["partition"]
    assert (basic["runs"], basic["passes"], basic["failures"]) == ("5", "5", "0")
    assert float(basic["pass_rate"]) == 1.0
    assert (basic["flaky_seeds"], basic["flaky_seed_list"]) == ("1", "4")  # trace hash differs
    assert float(basic["ratio_mean"]) == 30.0 and float(basic["ratio_p50"]) == 30.0
    assert float(basic["ratio_p99"]) == pytest.approx(49.6)  # linear interpolation over 10..50
    assert float(basic["latency_p50_ms_median"]) == 3.0
    assert float(basic["latency_p50_ms_p99"]) == pytest.approx(4.96)
    assert float(basic["latency_p99_ms_median"]) == 30.0
    assert float(basic["latency_p99_ms_p99"]) == pytest.approx(49.6)
    assert (basic["anomalies"], basic["unexpected_anomalies"]) == ("1", "0")

    assert (part["runs"], part["passes"], part["failures"]) == ("4", "2", "2")
    assert float(part["pass_rate"]) == 0.5
    assert (part["flaky_seeds"], part["flaky_seed_list"]) == ("1", "1")  # verdict differs
    assert float(part["ratio_mean"]) == 6.5 and float(part["ratio_p50"]) == 6.5
    assert float(part["ratio_p99"]) == pytest.approx(7.97)
    assert float(part["latency_p50_ms_median"]) == 5.0
    assert float(part["latency_p99_ms_median"]) == 50.0
    assert float(part["latency_p99_ms_p99"]) == pytest.approx(79.4)
    assert (part["anomalies"], part["unexpected_anomalies"]) == ("4", "2")

    assert (idle["runs"], idle["passes"], idle["failures"], idle["flaky_seeds"]) == ("2", "2", "0", "0")
    assert idle["flaky_seed_list"] == ""  # same hash + verdict in both trees: deterministic
    assert float(idle["ratio_p99"]) == 100.0
    assert idle["latency_p50_ms_median"] == "" and idle["latency_p99_ms_p99"] == ""  # nothing acked


def test_summary_csv(result: ReportResult) -> None:
    rows = read_csv(result, "summary.csv")
    assert len(rows) == 11
    keyed = by(rows, "scenario", "seed", "code_version")
    assert ("basic", "99", "0.1.0+new") not in keyed and ("basic", "9", "0.1.0+new") not in keyed
    fail = keyed[("partition", "2", "0.1.0+new")]
    assert fail["verdict"] == "fail" and fail["failed_checks"] == "durability"
    assert (fail["anomalies"], fail["unexpected_anomalies"]) == ("1", "1")
    assert float(fail["ratio"]) == 6.0 and float(fail["sim_time_ms"]) == 6000.0
    assert (fail["acked"], fail["consumed"], fail["flaky"]) == ("10", "10", "false")
    assert float(fail["latency_p99_ms"]) == 40.0
    assert fail["trace_hash"] == hashlib.sha256(b"partition/2/").hexdigest()
    flaky = sorted((r["scenario"], r["seed"], r["code_version"]) for r in rows if r["flaky"] == "true")
    assert flaky == [
        ("basic", "4", "0.1.0+new"),
        ("basic", "4", "0.1.0+old"),
        ("partition", "1", "0.1.0+new"),
        ("partition", "1", "0.1.0+old"),
    ]
    assert sum(r["verdict"] == "fail" for r in rows) == 2
    idle = keyed[("idle<&>", "7", "0.1.0+old")]
    assert (
        idle["acked"] == "0"
        and idle["latency_p50_ms"] == ""
        and idle["run_path"].endswith("old/runs/idle/seed-7/run.json")
    )


def test_anomalies_csv(result: ReportResult) -> None:
    rows = [
        (r["kind"], r["expected"], r["count"], r["runs"], r["scenarios"]) for r in read_csv(result, "anomalies.csv")
    ]
    assert rows == [
        ("duplicate", "true", "2", "1", "partition"),
        ("lost_write", "false", "2", "2", "partition"),
        ("stale_read", "true", "1", "1", "basic"),
    ]


def test_checks_csv(result: ReportResult) -> None:
    rows = by(read_csv(result, "checks.csv"), "name", "expected")
    got = {k: (r["runs"], r["ok"], r["violations"], float(r["pass_rate"])) for k, r in rows.items()}
    assert got == {
        ("durability", "false"): ("11", "9", "2", pytest.approx(9 / 11)),
        ("idempotence", "false"): ("7", "7", "0", 1.0),
        ("idempotence", "true"): ("4", "3", "2", 0.75),
        ("linearizability", "false"): ("6", "6", "0", 1.0),
        ("linearizability", "true"): ("5", "4", "1", 0.8),
    }


def test_faults_csv(result: ReportResult) -> None:
    rows = [(r["kind"], r["runs"], r["passes"], float(r["pass_rate"])) for r in read_csv(result, "faults.csv")]
    assert rows == [("crash", "1", "0", 0.0), ("partition", "4", "2", 0.5)]  # crash x2 counts one run


def page(result: ReportResult) -> str:
    return Path(result.paths["index.html"]).read_text()


def test_html_tables_and_reproduce_commands(result: ReportResult) -> None:
    html = page(result)
    for table_id in ("scenarios", "anomalies", "checks", "failing", "flaky", "faults"):
        assert f'<table id="{table_id}">' in html
    scenarios = html.split('<table id="scenarios">')[1].split("</table>")[0]
    assert scenarios.count("<tr>") == 4  # header + 3 scenarios
    assert "<td>partition</td>" in scenarios and '<td class="bad">50 %</td>' in scenarios
    failing = html.split('<table id="failing">')[1].split("</table>")[0]
    assert "<code>kafkasim run scenarios/partition.toml --seed 2</code>" in failing
    assert "<code>kafkasim run scenarios/partition.toml --seed 1</code>" in failing
    assert failing.count("kafkasim run ") == 2
    assert "runs: <b>11</b>" in html and "failures: <b>2</b>" in html and "flaky seeds: <b>2</b>" in html


def test_html_invalid_and_escaping(result: ReportResult) -> None:
    html = page(result)
    invalid = html.split('<ul id="invalid"')[1].split("</ul>")[0]
    assert "broken/seed-9/run.json" in invalid and "&#x27;verdict&#x27;: missing" in invalid
    assert "idle&lt;&amp;&gt;" in html and "idle<&>" not in html


def test_html_self_contained_with_png_plots(result: ReportResult) -> None:
    html = page(result)
    images = re.findall(r'<img alt="[^"]*" src="data:image/png;base64,([A-Za-z0-9+/=]+)">', html)
    assert len(images) >= 3
    for b64 in images:
        png = base64.b64decode(b64, validate=True)
        assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 1000
    # Nothing fetched: no external scripts, stylesheets or remote URLs.
    assert "<script" not in html and "<link" not in html and "http://" not in html and "https://" not in html


def test_console_summary(result: ReportResult) -> None:
    text = format_console(result)
    assert "11 runs, 3 scenarios, 2 failing" in text
    assert "FAIL partition seed 2: kafkasim run scenarios/partition.toml --seed 2" in text
    assert "FLAKY basic seed 4" in text and "FLAKY partition seed 1" in text
    assert "INVALID" in text and "broken" in text
    assert "idle<&>" in text and "50.0%" in text



def matrix_cells(html: str) -> dict[tuple[str, str], tuple[str, str, str]]:
    """(scenario, seed) -> (cell classes, href, text) from the scenario x seed matrix."""
    matrix = html.split('<table id="matrix"')[1].split("</table>")[0]
    seeds = re.findall(r"<th>([^<]*)</th>", matrix.split("</tr>")[0])[1:]
    cells = {}
    for row in matrix.split("</tr>")[1:-1]:
        scenario = re.search(r"<tr><th>([^<]*)</th>", row)
        assert scenario is not None
        tds = re.findall(r'<td class="([^"]*)"(?: title="[^"]*")?>(?:<a href="([^"]*)">([^<]*)</a>)?', row)
        for seed, (klass, href, text) in zip(seeds, tds, strict=True):
            cells[(scenario.group(1), seed)] = (klass, href, text)
    return cells


def test_matrix_labels_expected_anomalies_and_links_run_pages(result: ReportResult) -> None:
    cells = matrix_cells(page(result))
    assert cells[("basic", "1")][:1] == ("exp",) and cells[("basic", "1")][2] == "E"  # expected, not a failure
    assert cells[("basic", "2")][0] == "ok" and cells[("partition", "2")][0] == "bad"
    assert cells[("partition", "1")][0] == "bad flaky" and cells[("partition", "1")][2] == "✗×2"  # old run failed
    assert cells[("basic", "4")][0] == "ok flaky"
    assert cells[("idle&lt;&amp;&gt;", "2")][0] == "none"
    out = Path(result.out_dir)
    for klass, href, _ in cells.values():
        if klass != "none":
            assert (out / href).is_file(), href
    basic1 = (out / cells[("basic", "1")][1]).read_text()
    assert "PASS (expected anomalies)" in basic1 and "stale_read" in basic1 and "expected here" in basic1
    assert "no trace.jsonl beside run.json" in basic1  # the synthetic runs have no trace: said, not crashed
    assert '<a href="../../../../../runs/basic/seed-1/run.json">run.json</a>' in basic1


def test_checks_show_expected_anomalies_as_expected(result: ReportResult) -> None:
    checks = page(result).split('<table id="checks">')[1].split("</table>")[0]
    rows = re.findall(r"<tr><td>linearizability</td><td class='(\w+)'>([^<]*)</td>", checks)
    # Held where unexpected (partition, idle); where expected (basic) its anomaly is not a failure.
    assert rows == [("ok", "held in every run"), ("exp", "expected anomaly, seen in 1 of 5 runs")]
    durability = re.search(r"<tr><td>durability</td><td class='(\w+)'>([^<]*)</td>", checks)
    assert durability is not None and durability.groups() == ("bad", "violated in 2 runs")


def test_progress_is_reported(result: ReportResult) -> None:
    lines = PROGRESS
    assert lines[0].startswith("11 run.json found") and lines[0].endswith(", 1 invalid")
    assert any(line.startswith("starting Spark (local[2])") for line in lines)
    assert "aggregated: 11 runs, 3 scenarios" in lines
    assert "run pages 10/11" in lines and "run pages 11/11" in lines and lines[-1].startswith("wrote ")
