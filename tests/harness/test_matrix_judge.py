"""matrix_judge.py: each anomaly judged against what Kafka guarantees for the client's settings,
and a cell's verdict from a run.json (pass / finding / fail)."""

from __future__ import annotations

from typing import Any

import pytest

from kafkasim.harness.matrix import cell_text, parse_clients
from kafkasim.harness.matrix_cli import matrix_table
from kafkasim.harness.matrix_judge import judge_anomaly, judge_run

pytestmark = pytest.mark.unit

ALL_IDEMPOTENT = {"client": "java", "acks": "all", "idempotent": True}
ALL_PLAIN = {"client": "confluent-kafka", "acks": "all", "idempotent": False}
ACKS_ONE = {"client": "aiokafka", "acks": "1", "idempotent": False}


@pytest.mark.parametrize("kind, client, verdict", [
    ("lost-write", ALL_IDEMPOTENT, "fail"), ("lost-write", ALL_PLAIN, "fail"), ("lost-write", ACKS_ONE, "finding"),
    ("unseen", ALL_PLAIN, "fail"), ("inconsistent-offsets", ACKS_ONE, "finding"),
    ("duplicate", ALL_PLAIN, "finding"), ("duplicate", ALL_IDEMPOTENT, "fail"),
    ("reorder", ACKS_ONE, "finding"), ("reorder", ALL_IDEMPOTENT, "fail"),
    ("committed-offset-regression", ALL_PLAIN, "fail"), ("eos-duplicate", ALL_IDEMPOTENT, "fail"),
    ("client-liveness", ALL_PLAIN, "finding"),
    ("replica-divergence", ACKS_ONE, "fail"), ("invariant:hw-regression", ACKS_ONE, "fail"),
    ("task-error", ALL_PLAIN, "fail"),
])
def test_each_anomaly_against_the_settings(kind: str, client: dict[str, Any], verdict: str) -> None:
    got, why = judge_anomaly(kind, {}, client)
    assert got == verdict, why
    assert why


def test_a_group_member_rereading_is_a_finding_but_the_read_back_is_not() -> None:
    assert judge_anomaly("nonmonotonic-poll", {"group": "g"}, ALL_PLAIN)[0] == "finding"
    assert judge_anomaly("poll-skip", {"process": "reader"}, ALL_PLAIN)[0] == "fail"


def _run(anomalies: list[dict[str, Any]], client: dict[str, Any]) -> dict[str, Any]:
    kinds = sorted({a["kind"] for a in anomalies})
    return {"client": client, "anomalies": anomalies, "faults_fired": [],
            "checks": [{"name": k, "ok": False, "violations": sum(a["kind"] == k for a in anomalies) + 50,
                        "expected": False} for k in kinds]}


def test_cell_verdicts() -> None:
    assert judge_run(_run([], ALL_PLAIN))["verdict"] == "pass"
    dup = [{"kind": "duplicate", "detail": {"value": "v-1"}}]
    finding = judge_run(_run(dup, ALL_PLAIN))
    assert finding["verdict"] == "finding"
    assert finding["anomalies"][0]["count"] == 51  # from the check's count, not the capped list
    assert judge_run(_run(dup, ALL_IDEMPOTENT))["verdict"] == "fail"
    both = judge_run(_run(dup + [{"kind": "lost-write", "detail": {}}], ALL_PLAIN))
    assert both["verdict"] == "fail"
    assert [a["kind"] for a in both["anomalies"]] == ["lost-write", "duplicate"]  # failures first
    assert cell_text({"verdict": "fail", **both}) == "FAIL: lost-write x51"


def test_a_fault_the_control_plane_refused_is_reported() -> None:
    run = _run([], ALL_PLAIN)
    run["faults_fired"] = [{"at_ms": 4000.0, "spec": {"kind": "crash"}, "error": "409: role has no holder"}]
    assert judge_run(run)["faults_not_applied"] == [{"at_ms": 4000.0, "kind": "crash",
                                                      "error": "409: role has no holder"}]


def test_parse_clients() -> None:
    assert parse_clients("all")[0] == "kafka-python" and len(parse_clients("all")) == 7
    assert parse_clients("java, kcat") == ["java", "kcat"]
    with pytest.raises(ValueError, match="unknown client 'jav'"):
        parse_clients("jav")


def test_the_table_has_a_row_per_scenario_and_a_column_per_client() -> None:
    doc = {"clients": ["java", "kcat"], "scenarios": [{"name": "a"}, {"name": "b"}],
           "cells": [{"scenario": "a", "client": "java", "verdict": "pass", "anomalies": []},
                     {"scenario": "b", "client": "kcat", "verdict": "skipped", "reason": "kcat missing"}]}
    assert matrix_table(doc) == ["| scenario | java | kcat |", "|---|---|---|", "| a | pass | — |",
                                 "| b | — | skipped: kcat missing |"]


def test_show_prints_an_existing_matrix_and_refuses_a_missing_one(tmp_path: Any, capsys: Any) -> None:
    import json

    from kafkasim.cli import main

    doc = {"schema": "kafkasim-matrix/1", "seed": 1, "command": "kafkasim matrix x", "clients": ["java"],
           "scenarios": [{"name": "a"}], "totals": {"finding": 1},
           "cells": [{"scenario": "a", "client": "java", "verdict": "finding",
                      "anomalies": [{"kind": "duplicate", "verdict": "finding", "count": 3}]}],
           "measurements": {"control_latency_ms": {"n": 4, "p50": 1.2, "p99": 7.5, "max": 7.5},
                            "pacing_lag_ms": {"instants": 99, "p50_ms": 0.8, "p99_ms": 40.1, "max_ms": 90.0}}}
    (tmp_path / "matrix.json").write_text(json.dumps(doc))
    assert main(["matrix", "--show", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| a | finding: duplicate x3 |" in out
    assert "call -> fault acting: p50 1.2 ms, p99 7.5 ms" in out and "p50 0.8 ms, p99 40.1 ms" in out
    assert main(["matrix", "--show", "--out", str(tmp_path / "none")]) == 2
    assert "no readable matrix.json" in capsys.readouterr().err


def test_resume_keeps_a_finished_cell(tmp_path: Any) -> None:
    import json

    from kafkasim.harness.matrix import Matrix, run_cell
    from kafkasim.harness.scenario import load_scenario

    s = load_scenario("scenarios/matrix/slow-fsync.toml")
    cell_dir = tmp_path / "runs" / s.name / "java"
    cell_dir.mkdir(parents=True)
    run = {**_run([{"kind": "duplicate", "detail": {}}], ALL_PLAIN), "verdict": "pass",
           "stats": {"wall_time_s": 30.0, "acked": 9, "produced": 10, "pacing_lag_ms": {"max_ms": 3.0},
                     "pacing_histogram": {"5": 7, "100": 3}},
           "faults_fired": [{"at_ms": 3000.0, "spec": {"kind": "disk"}, "latency_ms": 2.5}]}
    (cell_dir / "run.json").write_text(json.dumps(run))
    m = Matrix(str(tmp_path), 1, ["java"], [s], "cmd", resume=True)
    cell = run_cell(m, s, "java")
    assert cell["verdict"] == "finding" and cell["acked"] == 9 and cell["run"].endswith("java/run.json")
    assert m.latencies == [2.5] and m.pacing.n == 10 and m.pacing.quantile(0.5) == 0.06
