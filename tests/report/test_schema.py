"""Report pieces that need no Spark session: the run.json validator, file
discovery, strict mode, the empty report, HTML escaping and degenerate plots."""

from __future__ import annotations

import base64
import copy
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kafkasim.report import job, schema
from kafkasim.report.html import render_html, reproduce_command
from kafkasim.report.model import SUMMARY_COLUMNS, ReportData

pytestmark = pytest.mark.unit


def valid_run() -> dict[str, Any]:
    return {
        "schema_version": 1,
        "scenario": "basic",
        "scenario_path": "scenarios/basic.toml",
        "seed": 42,
        "world": "sim",
        "code_version": "0.1.0+abc1234",
        "verdict": "fail",
        "trace_hash": "ab" * 32,
        "checks": [
            {"name": "durability", "ok": False, "violations": 1, "expected": False},
            {"name": "idempotence", "ok": False, "violations": 3, "expected": True},
        ],
        "anomalies": [{"kind": "lost_write", "expected": False, "detail": {"offset": 3}}],
        "stats": {
            "sim_time_ms": 1000.0,
            "wall_time_s": 0.5,
            "sim_to_wall_ratio": 2000,  # an int is a valid float in JSON
            "events": 10,
            "produced": 5,
            "acked": 4,
            "consumed": 4,
            "produce_latency_ms": {"p50": 1.0, "p90": 2.0, "p99": 3.0, "max": 4.0},
        },
        "faults": [{"at_ms": 10.0, "kind": "partition", "target": ["b1", "b2"]}],
    }


def write(path: Path, run: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(run if isinstance(run, str) else json.dumps(run, indent=2))
    return path


def test_load_run_accepts_valid_and_null_latency(tmp_path: Path) -> None:
    run = valid_run()
    assert schema.load_run(write(tmp_path / "a/run.json", run)) == run
    run["stats"]["produce_latency_ms"] = None  # allowed: nothing acked
    assert schema.load_run(write(tmp_path / "b/run.json", run))["stats"]["produce_latency_ms"] is None


def _parent(run: dict[str, Any], keys: tuple[str, ...]) -> tuple[Any, Any]:
    """The container holding keys[-1], and that key (int for list indices)."""
    obj: Any = run
    for k in keys[:-1]:
        obj = obj[int(k)] if isinstance(obj, list) else obj[k]
    last = keys[-1]
    return obj, int(last) if isinstance(obj, list) else last


def _del(*keys: str) -> Callable[[dict[str, Any]], None]:
    def mutate(run: dict[str, Any]) -> None:
        obj, key = _parent(run, keys)
        del obj[key]

    return mutate


def _set(value: Any, *keys: str) -> Callable[[dict[str, Any]], None]:
    def mutate(run: dict[str, Any]) -> None:
        obj, key = _parent(run, keys)
        obj[key] = value

    return mutate


@pytest.mark.parametrize(
    ("mutate", "key", "why"),
    [
        (_del("verdict"), "'verdict'", "missing"),
        (_del("stats", "acked"), "'stats.acked'", "missing"),
        (_del("stats", "produce_latency_ms"), "'stats.produce_latency_ms'", "missing"),
        (_del("stats", "produce_latency_ms", "p99"), "'stats.produce_latency_ms.p99'", "missing"),
        (_del("checks", "0", "ok"), "'checks[0].ok'", "missing"),
        (_set("42", "seed"), "'seed'", "expected int, got str"),
        (_set(True, "checks", "1", "violations"), "'checks[1].violations'", "expected int, got bool"),
        (_set("yes", "anomalies", "0", "expected"), "'anomalies[0].expected'", "expected bool"),
        (_set(None, "stats", "wall_time_s"), "'stats.wall_time_s'", "expected int/float"),
        (_set({}, "checks"), "'checks'", "expected list"),
        (_set("maybe", "verdict"), "'verdict'", "expected one of"),
        (_set("pass", "verdict"), "'verdict'", "checks say 'fail'"),
        (_set(2, "schema_version"), "'schema_version'", "unsupported version 2"),
        (_set(2**64, "seed"), "'seed'", "64-bit"),
        (_set(7, "faults", "0"), "'faults[0]'", "expected an object"),
    ],
)
def test_load_run_names_file_and_key(
    tmp_path: Path, mutate: Callable[[dict[str, Any]], None], key: str, why: str
) -> None:
    run = copy.deepcopy(valid_run())
    mutate(run)
    path = write(tmp_path / "runs/x/seed-1/run.json", run)
    with pytest.raises(ValueError) as err:
        schema.load_run(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}: ") and key in msg and why in msg, msg


def test_load_run_not_json(tmp_path: Path) -> None:
    path = write(tmp_path / "run.json", '{"schema_version": 1,')
    with pytest.raises(ValueError, match=re.escape(f"{path}: invalid run.json: not JSON")):
        schema.load_run(path)


def test_spark_schema_matches_validator() -> None:
    pytest.importorskip("pyspark")
    struct = schema.run_struct_type()
    assert struct.fieldNames() == [*schema.TOP_LEVEL, *schema.OPTIONAL]
    stats = struct["stats"].dataType
    assert stats.fieldNames() == [*schema.STATS_KEYS, "produce_latency_ms"]
    assert stats["produce_latency_ms"].dataType.fieldNames() == list(schema.LATENCY_KEYS)
    assert struct["checks"].dataType.elementType.fieldNames() == list(schema.CHECK_KEYS)


def test_find_run_files_skips_output_dirs(tmp_path: Path) -> None:
    keep = [
        write(tmp_path / "runs/a/seed-1/run.json", "{}"),
        write(tmp_path / "runs/summary/seed-2/run.json", "{}"),  # a *scenario* named summary
        write(tmp_path / "old/runs/a/seed-1/run.json", "{}"),
    ]
    write(tmp_path / "summary/run.json", "{}")
    write(tmp_path / "custom-out/x/run.json", "{}")
    write(tmp_path / "runs/a/seed-1/trace.jsonl", "")
    found = job.find_run_files(tmp_path, tmp_path / "custom-out")
    assert found == sorted(p.resolve() for p in keep)


def _no_spark(*_: Any) -> ReportData:
    raise AssertionError("Spark must not start here")


def test_strict_mode_raises_before_spark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(job, "_compute_with_spark", _no_spark)
    write(tmp_path / "runs/a/seed-1/run.json", valid_run())
    bad = valid_run()
    bad["stats"]["events"] = 1.5
    bad_path = write(tmp_path / "runs/a/seed-2/run.json", bad)
    with pytest.raises(ValueError, match=re.escape(f"{bad_path.resolve()}: invalid run.json: key 'stats.events'")):
        job.run_report(str(tmp_path), strict=True)
    assert not (tmp_path / "summary").exists()


def test_missing_reports_dir(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nope"):
        job.run_report(str(tmp_path / "nope"))


def test_empty_reports_dir_writes_empty_report_without_spark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(job, "_compute_with_spark", _no_spark)
    write(tmp_path / "runs/a/seed-1/run.json", "not json")  # only an invalid run
    out = tmp_path / "elsewhere"
    result = job.run_report(str(tmp_path), out_dir=str(out))
    assert (result.runs, result.scenarios, result.failures, len(result.invalid)) == (0, 0, 0, 1)
    assert result.out_dir == str(out.resolve())
    assert (out / "summary.csv").read_text().strip() == ",".join(SUMMARY_COLUMNS)
    html = (out / "index.html").read_text()
    assert "runs: <b>0</b>" in html and "no failing runs" in html and "not JSON" in html
    assert html.count("data:image/png;base64,") == 4  # placeholders, not crashes


def one_run_row(**over: Any) -> dict[str, Any]:
    row: dict[str, Any] = {c: None for c in SUMMARY_COLUMNS}
    row.update(scenario="s", seed=1, verdict="pass", flaky=False, ratio=3.0, code_version="v", scenario_path="s.toml")
    row.update(over)
    return row


def test_single_passing_run_page_degrades_gracefully() -> None:
    scenario = {
        "scenario": "<script>alert(1)</script>", "runs": 1, "passes": 1, "failures": 0, "pass_rate": 1.0,
        "flaky_seeds": 0, "flaky_seed_list": [], "ratio_mean": 3.0, "ratio_p50": 3.0, "ratio_p99": 3.0,
        "latency_p50_ms_median": None, "latency_p50_ms_p99": None, "latency_p99_ms_median": None,
        "latency_p99_ms_p99": None, "anomalies": 0, "unexpected_anomalies": 0,
    }  # fmt: skip
    data = ReportData(runs=[one_run_row(scenario=scenario["scenario"])], scenarios=[scenario])
    html = render_html(data)
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "no failing runs" in html
    pngs = re.findall(r'src="data:image/png;base64,([^"]+)"', html)
    assert len(pngs) == 4
    assert all(base64.b64decode(p).startswith(b"\x89PNG") for p in pngs)


def test_reproduce_command_quotes_paths() -> None:
    assert reproduce_command({"scenario_path": "sc/a.toml", "seed": 7}) == "kafkasim run sc/a.toml --seed 7"
    assert (
        reproduce_command({"scenario_path": "my dir/a b.toml", "seed": 0}) == "kafkasim run 'my dir/a b.toml' --seed 0"
    )
