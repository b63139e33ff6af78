"""The run.json contract (reports/README.md, schema_version 1) as code.

Two views of the same schema live here:

* ``load_run`` — a strict pure-Python validator.  The report job runs it over
  every file before Spark sees them, because Spark's JSON reader turns a type
  mismatch into a silent ``null`` and we would rather name the broken file and
  key than report a wrong pass rate.
* ``run_struct_type`` — the Spark ``StructType`` used to read the files, so
  Spark never has to infer a schema (inference is slow and unstable when a
  list is empty in every file, e.g. ``anomalies: []``).

Keep both in step with reports/README.md; the tests check they agree.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Final, cast

SCHEMA_VERSION: Final = 1
RUN_FILE: Final = "run.json"
SUMMARY_DIR: Final = "summary"
VERDICTS: Final = ("pass", "fail")

# Output file names written into the summary directory.
SUMMARY_CSV: Final = "summary.csv"
SCENARIOS_CSV: Final = "scenarios.csv"
ANOMALIES_CSV: Final = "anomalies.csv"
CHECKS_CSV: Final = "checks.csv"
FAULTS_CSV: Final = "faults.csv"
INDEX_HTML: Final = "index.html"

# Python type(s) accepted for each key.  ``float`` keys accept ints too: JSON
# writers print ``12.0`` as ``12`` freely, and Spark's DoubleType reads both.
_NUM = (int, float)

TOP_LEVEL: Final[dict[str, tuple[type, ...]]] = {
    "schema_version": (int,),
    "scenario": (str,),
    "scenario_path": (str,),
    "seed": (int,),
    "world": (str,),
    "code_version": (str,),
    "verdict": (str,),
    "trace_hash": (str,),
    "checks": (list,),
    "anomalies": (list,),
    "stats": (dict,),
    "faults": (list,),
}
# Optional keys (runs written before they existed lack them); type-checked when present.
OPTIONAL: Final[dict[str, tuple[type, ...]]] = {
    "seeded_bugs": (list,),
}
CHECK_KEYS: Final[dict[str, tuple[type, ...]]] = {
    "name": (str,),
    "ok": (bool,),
    "violations": (int,),
    "expected": (bool,),
}
ANOMALY_KEYS: Final[dict[str, tuple[type, ...]]] = {
    "kind": (str,),
    "expected": (bool,),
    "detail": (dict,),
}
STATS_KEYS: Final[dict[str, tuple[type, ...]]] = {
    "sim_time_ms": _NUM,
    "wall_time_s": _NUM,
    "sim_to_wall_ratio": _NUM,
    "events": (int,),
    "produced": (int,),
    "acked": (int,),
    "consumed": (int,),
}
LATENCY_KEYS: Final = ("p50", "p90", "p99", "max")
FAULT_KEYS: Final[dict[str, tuple[type, ...]]] = {
    "at_ms": _NUM,
    "kind": (str,),
}


def _fail(path: Path | str, key: str, why: str) -> ValueError:
    return ValueError(f"{path}: invalid run.json: key '{key}': {why}")


def _type_ok(value: Any, types: tuple[type, ...]) -> bool:
    # bool is a subclass of int in Python; JSON true must not pass as a count.
    if isinstance(value, bool) and bool not in types:
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return False
    return isinstance(value, types)


def _check_keys(path: Path | str, obj: Any, spec: dict[str, tuple[type, ...]], where: str) -> None:
    if not isinstance(obj, dict):
        raise _fail(path, where, f"expected an object, got {type(obj).__name__}")
    for key, types in spec.items():
        full = f"{where}.{key}" if where else key
        if key not in obj:
            raise _fail(path, full, "missing")
        if not _type_ok(obj[key], types):
            want = "/".join(t.__name__ for t in types)
            raise _fail(path, full, f"expected {want}, got {type(obj[key]).__name__} {obj[key]!r:.60}")


def _check_latency(path: Path | str, value: Any) -> None:
    where = "stats.produce_latency_ms"
    if value is None:  # null is allowed: nothing was acked.
        return
    _check_keys(path, value, {k: _NUM for k in LATENCY_KEYS}, where)


def _check_list(path: Path | str, items: list[Any], spec: dict[str, tuple[type, ...]], name: str) -> None:
    for i, item in enumerate(items):
        _check_keys(path, item, spec, f"{name}[{i}]")


def _check_verdict(path: Path | str, run: dict[str, Any]) -> None:
    # The README defines the verdict from the checks; a mismatch means the
    # writer is buggy and every pass rate built on it would be wrong.
    derived = "pass" if all(c["ok"] for c in run["checks"] if not c["expected"]) else "fail"
    if run["verdict"] != derived:
        raise _fail(path, "verdict", f"is {run['verdict']!r} but the checks say {derived!r}")


def validate_run(run: Any, path: Path | str = "<run.json>") -> dict[str, Any]:
    """Check a parsed run.json against schema_version 1; return it unchanged."""
    _check_keys(path, run, TOP_LEVEL, "")
    for key, types in OPTIONAL.items():
        if key in run and not _type_ok(run[key], types):
            raise _fail(path, key, f"expected {'/'.join(t.__name__ for t in types)}, got {type(run[key]).__name__}")
    if not all(isinstance(b, str) for b in run.get("seeded_bugs", [])):
        raise _fail(path, "seeded_bugs", "expected a list of names")
    if run["schema_version"] != SCHEMA_VERSION:
        raise _fail(path, "schema_version", f"unsupported version {run['schema_version']} (want {SCHEMA_VERSION})")
    if run["verdict"] not in VERDICTS:
        raise _fail(path, "verdict", f"expected one of {VERDICTS}, got {run['verdict']!r}")
    _check_list(path, run["checks"], CHECK_KEYS, "checks")
    _check_list(path, run["anomalies"], ANOMALY_KEYS, "anomalies")
    _check_list(path, run["faults"], FAULT_KEYS, "faults")
    _check_keys(path, run["stats"], STATS_KEYS, "stats")
    if "produce_latency_ms" not in run["stats"]:
        raise _fail(path, "stats.produce_latency_ms", "missing (use null when nothing was acked)")
    _check_latency(path, run["stats"]["produce_latency_ms"])
    # Spark reads seeds as LongType; a larger int would silently become null.
    if not -(2**63) <= run["seed"] < 2**63:
        raise _fail(path, "seed", "does not fit in a signed 64-bit integer")
    _check_verdict(path, run)
    return cast(dict[str, Any], run)  # shape checked above


def load_run(path: str | Path) -> dict[str, Any]:
    """Read and validate one run.json; raise ValueError naming the file and key."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read run.json: {exc}") from exc
    try:
        run = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: invalid run.json: not JSON: {exc}") from exc
    return validate_run(run, path)


def run_struct_type() -> Any:
    """The Spark schema for reading run.json files.

    Imported lazily so ``load_run`` works without pyspark installed.  Only the
    fields the report uses are listed: anomaly ``detail`` and kind-specific
    fault fields are free-form and would defeat an explicit schema.
    """
    from pyspark.sql import types as T

    latency = T.StructType([T.StructField(k, T.DoubleType()) for k in LATENCY_KEYS])
    stats = T.StructType(
        [
            T.StructField("sim_time_ms", T.DoubleType()),
            T.StructField("wall_time_s", T.DoubleType()),
            T.StructField("sim_to_wall_ratio", T.DoubleType()),
            T.StructField("events", T.LongType()),
            T.StructField("produced", T.LongType()),
            T.StructField("acked", T.LongType()),
            T.StructField("consumed", T.LongType()),
            T.StructField("produce_latency_ms", latency),
        ]
    )
    check = T.StructType(
        [
            T.StructField("name", T.StringType()),
            T.StructField("ok", T.BooleanType()),
            T.StructField("violations", T.LongType()),
            T.StructField("expected", T.BooleanType()),
        ]
    )
    anomaly = T.StructType([T.StructField("kind", T.StringType()), T.StructField("expected", T.BooleanType())])
    fault = T.StructType([T.StructField("at_ms", T.DoubleType()), T.StructField("kind", T.StringType())])
    return T.StructType(
        [
            T.StructField("schema_version", T.LongType()),
            T.StructField("scenario", T.StringType()),
            T.StructField("scenario_path", T.StringType()),
            T.StructField("seed", T.LongType()),
            T.StructField("world", T.StringType()),
            T.StructField("code_version", T.StringType()),
            T.StructField("verdict", T.StringType()),
            T.StructField("trace_hash", T.StringType()),
            T.StructField("checks", T.ArrayType(check)),
            T.StructField("anomalies", T.ArrayType(anomaly)),
            T.StructField("stats", stats),
            T.StructField("faults", T.ArrayType(fault)),
            # Optional (runs before seeded bugs existed lack it): null reads as no bugs.
            T.StructField("seeded_bugs", T.ArrayType(T.StringType())),
        ]
    )
