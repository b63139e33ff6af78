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
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from kafkasim.report import schema
from kafkasim.report.client_matrix import client_matrix_section, find_matrices
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

Progress = Callable[[str], None]


def _silent(_: str) -> None:
    pass


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


def validate_files(files: Iterable[Path], strict: bool) -> tuple[dict[Path, dict[str, Any]], list[InvalidRun]]:
    """The valid runs (path -> parsed run.json, kept for the run pages) and the invalid ones."""
    valid: dict[Path, dict[str, Any]] = {}
    invalid: list[InvalidRun] = []
    for path in files:
        try:
            valid[path] = schema.load_run(path)
        except ValueError as exc:
            if strict:
                raise
            invalid.append(InvalidRun(str(path), str(exc)))
    return valid, invalid


def find_junit(reports_dir: Path) -> list[Path]:
    """JUnit XML files a sweep wrote in the tree (`kafkasim sweep` writes OUT/junit.xml)."""
    return sorted(p.resolve() for p in reports_dir.rglob("*.xml") if "junit" in p.name and p.is_file())


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


# Spark's defaults suit big data; a report reads a few hundred small files, so what costs is the
# JVM's start and the first query's class loading and code generation. Measured on the 2-core
# machine (bench/report_bench.py): no whole-stage codegen, no adaptive re-planning and one
# shuffle partition save seconds; the JVM's own options (C1 only, a CDS archive) are in jvm.py.
_SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",  # no [Stage 0:> ...] bars on stderr
    "spark.sql.shuffle.partitions": "1",
    "spark.default.parallelism": "2",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.codegen.wholeStage": "false",
}
_LOOPBACK_CONF = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}


def start_spark(master: str, progress: Progress = _silent, app: str = "kafkasim-report",
                loopback: bool = True) -> Any:
    """loopback=False: executors on other hosts must reach the driver (a remote master), so
    Spark picks the driver's address (SPARK_LOCAL_IP / spark.driver.host if set)."""
    from pyspark.sql import SparkSession

    log4j = _quiet_jvm_env(loopback)
    builder = SparkSession.builder.master(master).appName(app)
    for key, value in {**_SPARK_CONF, **(_LOOPBACK_CONF if loopback else {})}.items():
        builder = builder.config(key, value)
    # The log4j file silences the JVM's startup banner/warnings before setLogLevel can run.
    import pyspark

    from kafkasim.report.jvm import driver_java_options

    jvm_opts = driver_java_options(os.environ, pyspark.__version__)
    if "ArchiveClassesAtExit" in jvm_opts:
        progress("first report here: the JVM writes its class archive as it exits (once, ~15 s; makes later "
                 "reports' Spark start faster; KAFKASIM_REPORT_CDS=0 skips it)")
    java_opts = f"-Dlog4j.configurationFile=file:{log4j} {jvm_opts}"
    spark = builder.config("spark.driver.extraJavaOptions", java_opts).getOrCreate()
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
        F.array_join(F.coalesce("seeded_bugs", F.array()), ",").alias("seeded_bugs"),
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


def _as_json(df: Any, table: str) -> Any:
    from pyspark.sql import functions as F

    return df.select(F.lit(table).alias("table"), F.to_json(F.struct(*df.columns)).alias("row"))


def _plain_path(uri: str) -> str:
    # Spark's _metadata.file_path is a URI ("file:/tmp/a%20b/run.json"); the tables show the path.
    return unquote(urlparse(uri).path) if uri.startswith("file:") else uri


def compute(spark: Any, paths: Sequence[Path]) -> ReportData:
    """All five tables in ONE Spark job: each table becomes (table name, row as JSON) and the
    union is collected once. On small inputs every extra job costs scheduling and code
    generation, not data (five collects took about twice as long as this one)."""
    runs = mark_flaky(read_runs(spark, paths)).cache()  # five branches read it; parse the files once
    tables = {
        "runs": runs.drop("checks", "anomalies", "faults"),
        "scenarios": scenario_table(runs),
        "anomalies": anomaly_table(runs),
        "checks": check_table(runs),
        "faults": fault_table(runs),
    }
    union = None
    for name, df in tables.items():
        union = _as_json(df, name) if union is None else union.unionByName(_as_json(df, name))
    assert union is not None
    rows: dict[str, list[Row]] = {name: [] for name in tables}
    for row in union.collect():
        rows[row["table"]].append(json.loads(row["row"]))
    for run in rows["runs"]:
        run["anomalies"] = run.pop("anomalies_n", 0)
        run["run_path"] = _plain_path(str(run.get("run_path", "")))
    order = {
        "runs": lambda r: (r["scenario"], r["seed"], r.get("code_version") or "", r["run_path"]),
        "scenarios": lambda r: r["scenario"],
        "anomalies": lambda r: (r["kind"], r["expected"]),
        "checks": lambda r: (r["name"], r["expected"]),
        "faults": lambda r: r["kind"],
    }
    columns = {"runs": SUMMARY_COLUMNS, "scenarios": SCENARIO_COLUMNS, "anomalies": ANOMALY_COLUMNS,
               "checks": CHECK_COLUMNS, "faults": FAULT_COLUMNS}
    done = {name: [{c: r.get(c) for c in columns[name]} for r in sorted(rows[name], key=order[name])]
            for name in tables}
    return ReportData(runs=done["runs"], scenarios=done["scenarios"], anomalies=done["anomalies"],
                      checks=done["checks"], faults=done["faults"])


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


def write_run_pages(out_dir: Path, root: Path, data: ReportData, docs: Mapping[Path, dict[str, Any]],
                    progress: Progress) -> None:
    from kafkasim.report.runpage import write_run_pages as write_one

    by_path = {str(p): (p, doc) for p, doc in docs.items()}
    for i, row in enumerate(data.runs, start=1):
        path, doc = by_path[row["run_path"]]
        data.links[row["run_path"]] = write_one(out_dir, root, path, doc, row)
        if i % 10 == 0 or i == len(data.runs):
            progress(f"run pages {i}/{len(data.runs)}")


def write_outputs(out_dir: Path, data: ReportData, junit: Sequence[Path] = ()) -> dict[str, str]:
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
        data.files[name] = name
    for xml in junit:
        data.files[f"JUnit {xml.parent.name}/{xml.name}"] = Path(os.path.relpath(xml, out_dir)).as_posix()
    index = out_dir / schema.INDEX_HTML
    index.write_text(render_html(data), encoding="utf-8")
    paths[schema.INDEX_HTML] = str(index)
    return paths


# --------------------------------------------------------------------------- entry


def _compute_with_spark(master: str, paths: Sequence[Path], progress: Progress = _silent) -> ReportData:
    from pyspark.sql import SparkSession

    # Don't stop a session the caller already had running (e.g. a notebook).
    owned = SparkSession.getActiveSession() is None
    progress(f"starting Spark ({master}); the JVM's start is most of a small report's time")
    spark = start_spark(master, progress)
    try:
        progress(f"Spark started; aggregating {len(paths)} runs")
        data = compute(spark, paths)
        progress(f"aggregated: {len(data.runs)} runs, {len(data.scenarios)} scenarios")
        return data
    finally:
        if owned:
            spark.stop()


def run_report(
    reports_dir: str,
    out_dir: str | None = None,
    master: str = "local[*]",
    *,
    strict: bool = False,
    progress: Progress = _silent,
) -> ReportResult:
    """Aggregate reports_dir/**/run.json into out_dir (default reports_dir/summary).

    Raises FileNotFoundError when reports_dir does not exist, and ValueError
    for a malformed run.json only when ``strict`` (see the module docstring).
    ``progress`` is told each step (the CLI prints them on stderr).
    """
    root = Path(reports_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"reports directory not found: {reports_dir}")
    out = Path(out_dir) if out_dir is not None else root / schema.SUMMARY_DIR
    docs, invalid = validate_files(find_run_files(root, out), strict)
    progress(f"{len(docs)} run.json found under {root}" + (f", {len(invalid)} invalid" if invalid else ""))
    # Zero runs is a legitimate (empty) report; skip the Spark start.
    data = _compute_with_spark(master, list(docs), progress) if docs else ReportData()
    data.invalid = invalid
    write_run_pages(out, root, data, docs, progress)
    matrices = find_matrices(root, out)
    if matrices:
        progress(f"{len(matrices)} client matrix (matrix.json) found")
    data.client_matrix_html = client_matrix_section(matrices, data.links, out)
    paths = write_outputs(out, data, find_junit(root))
    progress(f"wrote {paths[schema.INDEX_HTML]}")
    return ReportResult(
        out_dir=str(out.resolve()),
        paths={k: str(Path(v).resolve()) for k, v in paths.items()},
        runs=len(data.runs),
        scenarios=len(data.scenarios),
        data=data,
    )
