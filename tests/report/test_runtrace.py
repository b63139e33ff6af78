"""A run's page data from the files the run wrote: a handcrafted trace (every rule of the
matcher and the excerpt) and a real simulated run (its totals agree with run.json)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kafkasim.harness.runner import run_scenario
from kafkasim.harness.scenario import load_scenario
from kafkasim.report.runtrace import CONTEXT_LINES, bucket_width, read_run_view
from kafkasim.report.svg import timeline_svg

pytestmark = pytest.mark.sim

REPO = Path(__file__).resolve().parents[2]


def ev(t: float, name: str, **fields: Any) -> dict[str, Any]:
    return {"ev": name, "t": t, "node": fields.pop("node", "broker-0"), **fields}


TRACE = [
    ev(10, "controller_elected", controller=0, controller_epoch=1),                       # 1
    ev(20, "become_leader", topic="t", partition=0, leader_epoch=0),                      # 2
    *[ev(100 + i, "send_complete", node="producer-0", value=f"p-{i}", error=0) for i in range(10)],  # 3-12
    ev(150, "poll", node="consumer-0", records=7),                                        # 13
    ev(1000, "fault", node="harness", kind="partition", duration_ms=500.0, resolved="a | b"),  # 14
    ev(1200, "node_crash", node="broker-1", mode="power"),                                # 15
    ev(1300, "send_complete", node="producer-0", value="p-10", error=7),                  # 16
    ev(1800, "node_restart", node="broker-1"),                                            # 17
    ev(1900, "group_load_completed", node="broker-2", partition=0, groups=1),             # 18
    ev(1950, "partition_leader_elected", topic="t", partition=0, leader=2, unclean=True),  # 19
    ev(2000, "run_end", node="harness"),                                                  # 20
]


def write_run(tmp_path: Path, trace: list[dict[str, Any]], anomalies: list[dict[str, Any]],
              timeline: dict[str, Any] | None) -> dict[str, Any]:
    (tmp_path / "trace.jsonl").write_text("".join(json.dumps(e) + "\n" for e in trace))
    if timeline is not None:
        (tmp_path / "timeline.json").write_text(json.dumps(timeline))
    return {"stats": {"sim_time_ms": 2000.0}, "anomalies": anomalies}


def test_handcrafted_trace(tmp_path: Path) -> None:
    anomalies = [
        {"kind": "lost-write", "expected": True, "detail": {"value": "p-4", "acked_at_ms": 104.0}},
        {"kind": "invariant:hw", "expected": False, "detail": {"node": "broker-1", "t_ms": 1250.0}},
        {"kind": "two-owners", "expected": False, "detail": {"members": [{"first_at_ms": 1899.5}]}},
        {"kind": "mystery", "expected": False, "detail": {"note": "no time"}},
        {"kind": "inconsistent-offsets", "expected": True, "detail": {"offset": 3, "values": ["p-2", "p-9"]}},
    ]
    timeline = {"sends": {"invoke_ms": [90, 95, 1000], "latency_ms": [10.0, 3000.0, None], "error": [0, 7, None]}}
    view = read_run_view(tmp_path, write_run(tmp_path, TRACE, anomalies, timeline))
    assert view.bucket_ms == 50 and bucket_width(60_000) == 500 and bucket_width(10**9) == 60_000
    assert sum(view.produced_ok) == 10 and view.produced_ok[2] == 10  # t 100..109 -> bucket 2
    assert sum(view.produced_err) == 1 and view.produced_err[26] == 1 and sum(view.consumed) == 7
    assert [(a.kind, a.line) for a in view.anomalies] == [
        ("lost-write", 7),      # the send_complete carrying its value
        ("invariant:hw", 16),   # the first event at or after t_ms 1250
        ("two-owners", 18),     # a nested *_ms counts
        ("mystery", None),      # nothing to match: said, not guessed
        ("inconsistent-offsets", 5),  # the first of the values read at one offset
    ]
    cats = [(m.category, m.line) for m in view.markers]
    assert cats == [("controller", 1), ("leader", 2), ("crash", 15), ("restart", 17), ("coordinator", 18),
                    ("unclean", 19)]
    assert [(s.label, s.start_ms, s.end_ms, s.line) for s in view.spans] == [
        ("partition a | b", 1000.0, 1500.0, 14), ("broker-1 down", 1200.0, 1800.0, 15)]
    assert view.latency == [(90.0, 10.0, True), (95.0, 3000.0, False)] and view.unanswered == 1
    kept = [n for n, _ in view.excerpt]
    for line in (1, 2, 7, 14, 15, 16, 17, 18, 19):  # every linked line, with its context
        assert all(n in kept for n in range(max(1, line - CONTEXT_LINES), min(20, line + CONTEXT_LINES) + 1))
    assert kept == sorted(set(kept)) and view.trace_lines == 20 and not view.notes
    svg = timeline_svg(view)
    assert svg.count('href="trace.html#L') == len(view.markers) + len(view.spans) + 4  # + 4 timed anomalies
    assert ">1k<" in svg and ">10<" in svg  # log-scale decades from 10 ms to 3 s


def test_excerpt_keeps_only_context_around_marked_lines(tmp_path: Path) -> None:
    trace = [ev(i, "poll", records=1) for i in range(30)]
    trace[14] = ev(14, "node_crash", node="broker-1")  # line 15
    view = read_run_view(tmp_path, write_run(tmp_path, trace, [], None))
    assert [n for n, _ in view.excerpt] == list(range(15 - CONTEXT_LINES, 15 + CONTEXT_LINES + 1))
    assert json.loads(dict(view.excerpt)[15])["ev"] == "node_crash"


def test_missing_files_are_said_not_fatal(tmp_path: Path) -> None:
    view = read_run_view(tmp_path, {"stats": {"sim_time_ms": 500.0}, "anomalies": []})
    assert not view.has_trace and view.latency is None
    assert any("no trace.jsonl" in n for n in view.notes) and any("no timeline.json" in n for n in view.notes)
    assert "no per-request latency recorded" in timeline_svg(view)
    (tmp_path / "trace.jsonl").write_text('{"ev":"poll","t":1,"records":2}\nnot json\n')
    (tmp_path / "timeline.json").write_text('{"sends": {"invoke_ms": [1]}}')
    view = read_run_view(tmp_path, {"stats": {"sim_time_ms": 500.0}, "anomalies": []})
    assert sum(view.consumed) == 2 and view.latency is None
    assert any("line 2 is not JSON" in n for n in view.notes) and any("timeline.json unreadable" in n
                                                                         for n in view.notes)


def test_real_run_totals_agree_with_run_json(tmp_path: Path) -> None:
    scenario = load_scenario(str(REPO / "scenarios" / "power-loss-default-flush.toml"))
    run = run_scenario(scenario, 1, str(tmp_path)).run
    view = read_run_view(tmp_path, run)
    assert sum(view.produced_ok) + sum(view.produced_err) == run["stats"]["acked"]
    assert sum(view.consumed) == run["stats"]["consumed"]
    assert view.latency is not None and len(view.latency) == run["stats"]["acked"]
    latencies = sorted(lat for _, lat, _ in view.latency)
    assert round(latencies[-1], 3) == run["stats"]["produce_latency_ms"]["max"]
    assert [s.label for s in view.spans] == ["broker-0 down"]
    assert view.spans[0].start_ms == 3000.0 and view.spans[0].end_ms == 5000.0
    assert all(a.line is not None and a.expected for a in view.anomalies) and view.anomalies
