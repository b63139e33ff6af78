"""Plain data passed from the Spark job to the HTML page and the console.

Everything here is small (aggregates, plus one row per run) and already
collected to the driver, so renderers never touch Spark.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Row = dict[str, Any]

# CSV column order; the HTML tables use the same names.
SUMMARY_COLUMNS = [
    "scenario", "seed", "code_version", "verdict", "trace_hash", "sim_time_ms", "wall_time_s",
    "ratio", "produced", "acked", "consumed", "latency_p50_ms", "latency_p99_ms", "anomalies",
    "unexpected_anomalies", "failed_checks", "flaky", "scenario_path", "run_path", "seeded_bugs",
]  # fmt: skip
SCENARIO_COLUMNS = [
    "scenario", "runs", "passes", "failures", "pass_rate", "flaky_seeds", "flaky_seed_list",
    "ratio_mean", "ratio_p50", "ratio_p99", "latency_p50_ms_median", "latency_p50_ms_p99",
    "latency_p99_ms_median", "latency_p99_ms_p99", "anomalies", "unexpected_anomalies",
]  # fmt: skip
ANOMALY_COLUMNS = ["kind", "expected", "count", "runs", "scenarios"]
CHECK_COLUMNS = ["name", "expected", "runs", "ok", "pass_rate", "violations"]
FAULT_COLUMNS = ["kind", "runs", "passes", "pass_rate"]


@dataclass(frozen=True)
class InvalidRun:
    """A run.json that failed validation and was left out of every table."""

    path: str
    error: str


@dataclass(frozen=True)
class RunLinks:
    """Hrefs (relative to the overview page) of one run's page and files; "" when absent."""

    page: str
    run_json: str
    trace: str = ""
    timeline: str = ""


@dataclass
class ReportData:
    """The computed tables, each a list of plain dicts in CSV column order."""

    runs: list[Row] = field(default_factory=list)
    scenarios: list[Row] = field(default_factory=list)
    anomalies: list[Row] = field(default_factory=list)
    checks: list[Row] = field(default_factory=list)
    faults: list[Row] = field(default_factory=list)
    invalid: list[InvalidRun] = field(default_factory=list)
    links: dict[str, RunLinks] = field(default_factory=dict)  # run_path -> its page and files
    files: dict[str, str] = field(default_factory=dict)  # label -> href: the CSVs, JUnit XML found
    client_matrix_html: str = ""  # the client × fault section (client_matrix.py), when a matrix.json was found

    @property
    def failing_runs(self) -> list[Row]:
        return [r for r in self.runs if r["verdict"] == "fail"]

    @property
    def flaky_seeds(self) -> list[tuple[str, int]]:
        return sorted({(r["scenario"], r["seed"]) for r in self.runs if r["flaky"]})


@dataclass
class ReportResult:
    """What ``run_report`` returns: where it wrote, and how much it read."""

    out_dir: str
    paths: dict[str, str]  # output name ("summary.csv", "index.html", ...) -> absolute path
    runs: int
    scenarios: int
    data: ReportData

    @property
    def failures(self) -> int:
        return len(self.data.failing_runs)

    @property
    def invalid(self) -> list[InvalidRun]:
        return self.data.invalid
