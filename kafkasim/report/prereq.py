"""What `kafkasim report` needs before it starts: PySpark, and Java 17+ for PySpark's JVM.

Checked up front so a machine without Java gets one line and exit 2, not PySpark's 30-line
traceback from the gateway launcher. PySpark starts `$JAVA_HOME/bin/java` when JAVA_HOME is set,
else `java` on PATH; the same lookup here. The version is read from the JDK's `release` file
(JAVA_VERSION="17.0.15") — no process is started — and not judged when that file is absent.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path

JAVA_MESSAGE = "kafkasim report needs Java 17 for PySpark: apt install openjdk-17-jre-headless, or set JAVA_HOME"
PYSPARK_MESSAGE = "kafkasim report needs PySpark and matplotlib: pip install -e '.[report]'"
MIN_JAVA = 17


def find_java(env: Mapping[str, str]) -> Path | None:
    home = env.get("JAVA_HOME")
    if home:
        java = Path(home) / "bin" / "java"
        return java if java.is_file() and os.access(java, os.X_OK) else None
    found = shutil.which("java", path=env.get("PATH", ""))
    return Path(found) if found else None


def java_major(java: Path) -> int | None:
    """The major version from <jdk>/release, following /usr/bin/java's alternatives links."""
    release = java.resolve().parent.parent / "release"
    try:
        text = release.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    m = re.search(r'^JAVA_VERSION="(\d+)(?:\.(\d+))?', text, re.M)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major  # "1.8.0_402" is Java 8


def java_problem(env: Mapping[str, str]) -> str | None:
    java = find_java(env)
    if java is None:
        return JAVA_MESSAGE
    major = java_major(java)
    if major is not None and major < MIN_JAVA:
        return f"{JAVA_MESSAGE} (found Java {major} at {java})"
    return None


def pyspark_problem() -> str | None:
    missing = [m for m in ("pyspark", "matplotlib") if importlib.util.find_spec(m) is None]
    return PYSPARK_MESSAGE if missing else None


def report_problem(env: Mapping[str, str]) -> str | None:
    """The one line to print (exit 2) when the report cannot run here, else None."""
    return pyspark_problem() or java_problem(env)
