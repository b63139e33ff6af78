"""Facts about the host process that the harness needs and nothing simulated may see: the wall
clock (to measure how much faster than real time a simulation ran) and the code version."""

from __future__ import annotations

import os
import subprocess
import time
from importlib import metadata


def wall_seconds() -> float:
    return time.perf_counter()


def code_version() -> str:
    """`<package version>+<git short sha>[.dirty]`, or the package version outside a checkout."""
    try:
        version = metadata.version("kafkasim")
    except metadata.PackageNotFoundError:
        version = "0.0.0"
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        sha = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return version
    return f"{version}+{sha}{'.dirty' if dirty else ''}"
