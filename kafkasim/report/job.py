"""`kafkasim report`: aggregate every run.json under a reports tree with PySpark.

Flow: find files -> validate each in Python (schema.load_run) -> read the
valid ones with Spark using the explicit schema -> compute the tables with
DataFrame aggregations -> collect the (small) results -> write CSVs and
index.html from the driver.

Malformed run.json files: by default they are *reported, not fatal* — left
out of every table, listed in ``ReportResult.invalid``, on the console and in
a red section of index.html — because one crashed run should not hide the
results of a thousand good ones.  ``strict=True`` raises the ValueError from
``load_run`` (naming the file and key) instead, before Spark starts.

With a non-local ``--master`` the run.json paths must be readable by the
executors (a shared filesystem), as with any Spark file source.
"""

from __future__ import annotations

import csv
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from kafkasim.report import schema
from kafkasim.report.model import (
    ANOMALY_COLUMNS,
    CHECK_COLUMNS,
    FAULT_COLUMNS,
    SCENARIO_COLUMNS,
    SUMMARY_COLUMNS,
    InvalidRun,
    ReportData,
    ReportResult,
    Row,
)

# --------------------------------------------------------------------------- files


def find_run_files(reports_dir: Path, out_dir: Path) -> list[Path]:
    """Every run.json under reports_dir except those in our own output dirs and the re-runs
    `kafkasim replay` and `kafkasim shrink` keep in <run dir>/replay/ and <run dir>/shrink/ (they
    would count a run twice)."""
    skip = {(reports_dir / schema.SUMMARY_DIR).resolve(), out_dir.resolve()}
    found = []
    for path in reports_dir.rglob(schema.RUN_FILE):
        resolved = path.resolve()
        if path.parent.name == "replay" or "shrink" in {p.name for p in path.parents}:
            continue
        if path.is_file() and not any(s == p for s in skip for p in resolved.parents):
            found.append(resolved)
    return sorted(found)


def validate_files(files: Iterable[Path], strict: bool) -> tuple[list[Path], list[InvalidRun]]:
    valid: list[Path] = []
    invalid: list[InvalidRun] = []
    for path in files:
        try:
            schema.load_run(path)
        except ValueError as exc:
            if strict:
                raise
            invalid.append(InvalidRun(str(path), str(exc)))
        else:
            valid.append(path)
    return valid, invalid


# --------------------------------------------------------------------------- spark


# Spark's default log4j config prints INFO/WARN lines at JVM start, before
# setLogLevel can run; point the driver JVM at this ERROR-only config instead.
_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def _quiet_jvm_env(loopback: bool = True) -> Path:
    # Without this Spark warns that the hostname resolves to loopback and picks
    # another interface; we only ever want loopback for the local driver.
    if loopback:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Written at runtime (not shipped as package data) so it works however
    # kafkasim is installed; same content every time, so overwriting is safe.
    path = Path(tempfile.gettempdir()) / "kafkasim-report-log4j2.properties"
    path.write_text(_LOG4J2, encoding="utf-8")
    return path


def start_spark(master: str, app: str = "kafkasim-report", loopback: bool = True) -> Any:
    """loopback=False: executors on other hosts must reach the driver (a remote master), so
    Spark picks the driver's address (SPARK_LOCAL_IP / spark.driver.host if set)."""
    from pyspark.sql import SparkSession

    log4j = _quiet_jvm_env(loopback)
    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")  # no [Stage 0:> ...] bars on stderr
        .config("spark.sql.shuffle.partitions", "4")
        # Silences the JVM's startup banner/warnings before setLogLevel can run.
        .config("spark.driver.extraJavaOptions", f"-Dlog4j.configurationFile=file:{log4j}")
    )
    if loopback:
        builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def read_runs(spark: Any, paths: Sequence[Path]) -> Any:
    """One row per run, with the nested stats flattened into columns."""
    from pyspark.sql import functions as F

    raw = (
        spark.read.schema(schema.run_struct_type())
        .option("multiLine", True)
        .option("mode", "FAILFAST")  # files were validated; anything odd now is a bug
        .json([str(p) for p in paths])
        .withColumn("run_path", F.col("_metadata.file_path"))
    )
    anomaly_unexpected = F.filter("anomalies", lambda a: ~a["expected"])
    # The checks that decided a "fail" verdict (README: unexpected and not ok).
    failed = F.filter("checks", lambda c: ~c["ok"] & ~c["expected"])
    return raw.select(
        "scenario", "seed", "code_version", "verdict", "trace_hash", "scenario_path", "run_path",
        "checks", "anomalies", "faults",
        F.col("stats.sim_time_ms").alias("sim_time_ms"),
        F.col("stats.wall_time_s").alias("wall_time_s"),
        F.col("stats.sim_to_wall_ratio").alias("ratio"),
        F.col("stats.produced").alias("produced"),
        F.col("stats.acked").alias("acked"),
        F.col("stats.consumed").alias("consumed"),
        F.col("stats.produce_latency_ms.p50").alias("latency_p50_ms"),
        F.col("stats.produce_latency_ms.p99").alias("latency_p99_ms"),
        F.size("anomalies").alias("anomalies_n"),
        F.size(anomaly_unexpected).alias("unexpected_anomalies"),
        F.array_join(F.transform(failed, lambda c: c["name"]), ";").alias("failed_checks"),
    )  # fmt: skip


def mark_flaky(runs: Any) -> Any:
    """Add `flaky`: the same scenario+seed was seen with >1 verdict or trace hash.

    A deterministic simulator gives one trace per (scenario, seed, code); a
    second hash means nondeterminism or a behaviour change between code
    versions, and a second verdict means the seed flips — both worth a look.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.partitionBy("scenario", "seed")
    # countDistinct is not allowed over a window; size(collect_set) is.
    verdicts = F.size(F.collect_set("verdict").over(w))
    hashes = F.size(F.collect_set("trace_hash").over(w))
    return runs.withColumn("flaky", (verdicts > 1) | (hashes > 1))


def scenario_table(runs: Any) -> Any:
    from pyspark.sql import functions as F

    passes = F.sum(F.when(F.col("verdict") == "pass", 1).otherwise(0))
    flaky_seeds = F.array_sort(F.collect_set(F.when(F.col("flaky"), F.col("seed"))))
    return (
        runs.groupBy("scenario")
        .agg(
            F.count(F.lit(1)).alias("runs"),
            passes.alias("passes"),
            flaky_seeds.alias("flaky_seed_list"),
            F.mean("ratio").alias("ratio_mean"),
            F.percentile("ratio", F.lit(0.5)).alias("ratio_p50"),
            F.percentile("ratio", F.lit(0.99)).alias("ratio_p99"),
            F.percentile("latency_p50_ms", F.lit(0.5)).alias("latency_p50_ms_median"),
            F.percentile("latency_p50_ms", F.lit(0.99)).alias("latency_p50_ms_p99"),
            F.percentile("latency_p99_ms", F.lit(0.5)).alias("latency_p99_ms_median"),
            F.percentile("latency_p99_ms", F.lit(0.99)).alias("latency_p99_ms_p99"),
            F.sum("anomalies_n").alias("anomalies"),
            F.sum("unexpected_anomalies").alias("unexpected_anomalies"),
        )
        .withColumn("failures", F.col("runs") - F.col("passes"))
        .withColumn("pass_rate", F.col("passes") / F.col("runs"))
        .withColumn("flaky_seeds", F.size("flaky_seed_list"))
        .orderBy("scenario")
    )


def anomaly_table(runs: Any) -> Any:
    """Anomaly counts by kind x expected (expected = allowed by the scenario's config)."""
    from pyspark.sql import functions as F

    exploded = runs.select("scenario", "run_path", F.explode("anomalies").alias("a"))
    return (
        exploded.groupBy(F.col("a.kind").alias("kind"), F.col("a.expected").alias("expected"))
        .agg(
            F.count(F.lit(1)).alias("count"),
            F.countDistinct("run_path").alias("runs"),
            F.array_sort(F.collect_set("scenario")).alias("scenarios"),
        )
        .orderBy("kind", "expected")
    )


def check_table(runs: Any) -> Any:
    """Per checker (and whether its anomaly is expected): how often it passed."""
    from pyspark.sql import functions as F

    exploded = runs.select(F.explode("checks").alias("c")).select("c.*")
    return (
        exploded.groupBy("name", "expected")
        .agg(
            F.count(F.lit(1)).alias("runs"),
            F.sum(F.col("ok").cast("long")).alias("ok"),
            F.sum("violations").alias("violations"),
        )
        .withColumn("pass_rate", F.col("ok") / F.col("runs"))
        .orderBy("name", "expected")
    )


def fault_table(runs: Any) -> Any:
    """Pass rate of the runs that had at least one fault of each kind."""
    from pyspark.sql import functions as F

    kinds = runs.select("run_path", "verdict", F.explode(F.array_distinct("faults.kind")).alias("kind"))
    return (
        kinds.groupBy("kind")
        .agg(
            F.count(F.lit(1)).alias("runs"),
            F.sum(F.when(F.col("verdict") == "pass", 1).otherwise(0)).alias("passes"),
        )
        .withColumn("pass_rate", F.col("passes") / F.col("runs"))
        .orderBy("kind")
    )


def _collect(df: Any, columns: Sequence[str], renames: dict[str, str] | None = None) -> list[Row]:
    renames = renames or {}
    out = []
    for row in df.collect():
        d = row.asDict()
        out.append({c: d[renames.get(c, c)] for c in columns})
    return out


def compute(spark: Any, paths: Sequence[Path]) -> ReportData:
    runs = mark_flaky(read_runs(spark, paths)).cache()
    run_rows = _collect(
        runs.orderBy("scenario", "seed", "code_version", "run_path"),
        SUMMARY_COLUMNS,
        {"anomalies": "anomalies_n"},
    )
    data = ReportData(
        runs=run_rows,
        scenarios=_collect(scenario_table(runs), SCENARIO_COLUMNS),
        anomalies=_collect(anomaly_table(runs), ANOMALY_COLUMNS),
        checks=_collect(check_table(runs), CHECK_COLUMNS),
        faults=_collect(fault_table(runs), FAULT_COLUMNS),
    )
    runs.unpersist()
    return data


# --------------------------------------------------------------------------- output


def _cell(value: Any) -> Any:
    # CSV cells: JSON-style booleans, ';'-joined lists, empty for null.
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ";".join(str(v) for v in value)
    if isinstance(value, float):
        # 12 significant digits: exact for real inputs, hides 7.9399999999999995.
        return f"{value:.12g}"
    return value


def write_csv(path: Path, columns: Sequence[str], rows: Iterable[Row]) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        for row in rows:
            writer.writerow([_cell(row[c]) for c in columns])


def write_outputs(out_dir: Path, data: ReportData) -> dict[str, str]:
    from kafkasim.report.html import render_html

    out_dir.mkdir(parents=True, exist_ok=True)
    tables = {
        schema.SUMMARY_CSV: (SUMMARY_COLUMNS, data.runs),
        schema.SCENARIOS_CSV: (SCENARIO_COLUMNS, data.scenarios),
        schema.ANOMALIES_CSV: (ANOMALY_COLUMNS, data.anomalies),
        schema.CHECKS_CSV: (CHECK_COLUMNS, data.checks),
        schema.FAULTS_CSV: (FAULT_COLUMNS, data.faults),
    }
    paths: dict[str, str] = {}
    for name, (columns, rows) in tables.items():
        write_csv(out_dir / name, columns, rows)
        paths[name] = str(out_dir / name)
    index = out_dir / schema.INDEX_HTML
    index.write_text(render_html(data), encoding="utf-8")
    paths[schema.INDEX_HTML] = str(index)
    return paths


# --------------------------------------------------------------------------- entry


def _compute_with_spark(master: str, paths: Sequence[Path]) -> ReportData:
    from pyspark.sql import SparkSession

    # Don't stop a session the caller already had running (e.g. a notebook).
    owned = SparkSession.getActiveSession() is None
    spark = start_spark(master)
    try:
        return compute(spark, paths)
    finally:
        if owned:
            spark.stop()


def run_report(
    reports_dir: str,
    out_dir: str | None = None,
    master: str = "local[*]",
    *,
    strict: bool = False,
) -> ReportResult:
    """Aggregate reports_dir/**/run.json into out_dir (default reports_dir/summary).

    Raises FileNotFoundError when reports_dir does not exist, and ValueError
    for a malformed run.json only when ``strict`` (see the module docstring).
    """
    root = Path(reports_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"reports directory not found: {reports_dir}")
    out = Path(out_dir) if out_dir is not None else root / schema.SUMMARY_DIR
    valid, invalid = validate_files(find_run_files(root, out), strict)
    # Zero runs is a legitimate (empty) report; skip the ~10 s Spark start.
    data = _compute_with_spark(master, valid) if valid else ReportData()
    data.invalid = invalid
    paths = write_outputs(out, data)
    return ReportResult(
        out_dir=str(out.resolve()),
        paths={k: str(Path(v).resolve()) for k, v in paths.items()},
        runs=len(data.runs),
        scenarios=len(data.scenarios),
        data=data,
    )
