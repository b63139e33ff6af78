"""Human column headers (with units) for the page's tables; the CSVs keep the field names."""

from __future__ import annotations

LABELS: dict[str, str] = {
    "scenario": "Scenario",
    "seed": "Seed",
    "code_version": "Code version",
    "verdict": "Verdict",
    "trace_hash": "Trace hash",
    "sim_time_ms": "Simulated time (ms)",
    "wall_time_s": "Wall time (s)",
    "ratio": "Sim / wall (×)",
    "produced": "Produced (msgs)",
    "acked": "Acked (msgs)",
    "consumed": "Consumed (msgs)",
    "latency_p50_ms": "Produce latency p50 (ms)",
    "latency_p99_ms": "Produce latency p99 (ms)",
    "anomalies": "Anomalies",
    "unexpected_anomalies": "Unexpected anomalies",
    "failed_checks": "Failed checks",
    "flaky": "Flaky",
    "scenario_path": "Scenario file",
    "run_path": "run.json",
    "seeded_bugs": "Seeded bugs",
    "runs": "Runs",
    "passes": "Passed",
    "failures": "Failed",
    "pass_rate": "Pass rate",
    "flaky_seeds": "Flaky seeds",
    "flaky_seed_list": "Flaky seed list",
    "ratio_mean": "Sim / wall mean (×)",
    "ratio_p50": "Sim / wall p50 (×)",
    "ratio_p99": "Sim / wall p99 (×)",
    "latency_p50_ms_median": "Latency p50, median run (ms)",
    "latency_p50_ms_p99": "Latency p50, p99 run (ms)",
    "latency_p99_ms_median": "Latency p99, median run (ms)",
    "latency_p99_ms_p99": "Latency p99, p99 run (ms)",
    "kind": "Kind",
    "expected": "Expected here",
    "count": "Count",
    "scenarios": "Scenarios",
    "name": "Check",
    "ok": "Held (runs)",
    "violations": "Violations",
}


def label(column: str) -> str:
    return LABELS.get(column, column.replace("_", " ").capitalize())
