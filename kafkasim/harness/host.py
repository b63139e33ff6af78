"""The host machine as the harness needs it and nothing simulated may see it: the wall clock (to
measure how much faster than real time a simulation ran), the code version, worker processes for
sweeps and a scratch directory for `kafkasim load`'s real node. The only harness module that may
touch time, processes and temporary files (tests/test_seam_guard.py allows it by name)."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import metadata
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


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


@contextmanager
def scratch_dir() -> Iterator[str]:
    """A temporary directory, removed afterwards."""
    with tempfile.TemporaryDirectory() as path:
        yield path


def run_in_processes(fn: Callable[[T], R], items: list[T], jobs: int, on_result: Callable[[T, R], None]) -> None:
    """Run fn over items in `jobs` local worker processes (fn and items must pickle); calls
    on_result(item, result) in this process as each finishes. jobs <= 1 runs in-process."""
    if jobs <= 1:
        for item in items:
            on_result(item, fn(item))
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # "spawn" keeps workers free of whatever threads this process started (Spark, kazoo).
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(fn, item): item for item in items}
        for fut in as_completed(futures):
            on_result(futures[fut], fut.result())
