"""JVM options for the report's Spark driver, including a class-data-sharing (CDS) archive.

A small report's time is the JVM's: loading and verifying some ten thousand Spark classes before
the first answer. Java 17's dynamic CDS archives those classes once and maps them on later starts:
measured on the 2-core machine, Spark's start fell from about 5 s to 3 s and the first
aggregation from about 6.5 s to 4.6 s (bench/report_bench.py). The first report on a machine
writes the archive as its JVM exits (about 170 MB, under ~/.cache/kafkasim/); every later one
uses it. KAFKASIM_REPORT_CDS=0 turns it off.

Each writer dumps to its own `.pid.tmp` file (two first reports at once must not write one file);
the next start adopts a dump by renaming it into place. The archive's name carries the PySpark
version and the java binary, so an upgrade of either starts a new one; a stale or truncated
archive is refused by the JVM itself (-Xshare:auto), which then runs without it.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path

from kafkasim.report.prereq import find_java

# C1 only: the report's JVM lives seconds, C2's optimisations never pay back. Serial GC: a small
# heap, no GC threads competing for two cores. CDS warnings (signed jars, old class files) off.
BASE_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xss4m -Xlog:cds=off -Xlog:cds+dynamic=off"
CDS_ENV = "KAFKASIM_REPORT_CDS"


def cache_dir(env: Mapping[str, str]) -> Path:
    base = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME", "~")).expanduser() / ".cache")
    return Path(base) / "kafkasim"


def archive_key(env: Mapping[str, str], pyspark_version: str) -> str:
    java = find_java(env)
    where = str(java.resolve()) if java else "java"
    return f"spark-{pyspark_version}-{hashlib.sha256(where.encode()).hexdigest()[:12]}"


def cds_options(directory: Path, key: str, pid: int) -> str:
    """Use the archive if there is one (adopting a finished dump), else dump one at exit."""
    final = directory / f"{key}.jsa"
    if not final.is_file():
        for dump in sorted(directory.glob(f"{key}.*.tmp")):
            try:
                dump.replace(final)
                break
            except OSError:
                continue
    if final.is_file():
        return f"-XX:SharedArchiveFile={final} -Xshare:auto"
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return ""  # no writable cache: run without an archive
    return f"-XX:ArchiveClassesAtExit={directory / f'{key}.{pid}.tmp'}"


def driver_java_options(env: Mapping[str, str], pyspark_version: str) -> str:
    if env.get(CDS_ENV, "1") == "0":
        return BASE_OPTIONS
    cds = cds_options(cache_dir(env), archive_key(env, pyspark_version), os.getpid())
    return f"{BASE_OPTIONS} {cds}".strip()
