"""The host machine as the harness needs it and nothing simulated may see it: the wall clock (to
measure how much faster than real time a simulation ran), the code version, worker processes for
sweeps and a scratch directory for `kafkasim load`'s real node. The only harness module that may
touch time, processes and temporary files (tests/test_seam_guard.py allows it by name)."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import metadata
from typing import Any, TypeVar

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


def unique_token() -> str:
    """A short name part no earlier run used: the wall-clock second plus random hex."""
    import uuid

    return f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"


@contextmanager
def scratch_dir() -> Iterator[str]:
    """A temporary directory, removed afterwards."""
    with tempfile.TemporaryDirectory() as path:
        yield path


_PROCESS_DIR: list[tempfile.TemporaryDirectory[str]] = []


def process_scratch_dir() -> str:
    """A temporary directory for as long as this process lives (removed at exit): for files a
    long-lived service reads back later, e.g. the code a Spark session ships to its executors."""
    if not _PROCESS_DIR:
        _PROCESS_DIR.append(tempfile.TemporaryDirectory(prefix="kafkasim-"))  # its finalizer removes it
    return _PROCESS_DIR[0].name


RUNS_PER_WORKER = 100
OnCrash = Callable[[T, str], None]


def run_in_processes(fn: Callable[[T], R], items: list[T], jobs: int, on_result: Callable[[T, R], None],
                     on_crash: OnCrash[T] | None = None) -> None:
    """Run fn over items in `jobs` local worker processes (fn and items must pickle); calls
    on_result(item, result) in this process as each finishes. jobs <= 1 runs in-process.

    Workers are new for every jobs * RUNS_PER_WORKER items, so that nothing a run leaves behind
    piles up over a sweep of thousands (the native build once kept every earlier run's world
    alive: 5 MB a run, a worker 2.5x slower after 800 crash-swarm runs). New workers cost about a
    second; a chunk takes a minute or more. (ProcessPoolExecutor's own max_tasks_per_child hangs
    the pool in CPython 3.11, gh-115634.)

    A worker that dies (a segfault in compiled code, the OOM killer) breaks its pool and every
    item in it. With `on_crash`, the items that may have been running then run again one at a
    time, each in a pool of its own: the one that kills its worker again is reported with
    on_crash(item, why), the others with on_result; the rest go on in a new pool. Without it, the
    BrokenProcessPool propagates."""
    if jobs <= 1:
        for item in items:
            on_result(item, fn(item))
        return
    _start_quiet_resource_tracker()
    chunk = jobs * RUNS_PER_WORKER
    pending = list(items)
    while pending:
        unfinished = _run_chunk(fn, pending[:chunk], jobs, on_result, on_crash is not None)
        pending = pending[chunk:]
        if unfinished:
            assert on_crash is not None
            suspects, rest = unfinished[:jobs + 1], unfinished[jobs + 1:]  # in flight: at most jobs + 1
            for item in suspects:
                if _run_chunk(fn, [item], 1, on_result, True):
                    on_crash(item, "its worker process died (killed by a signal: a crash in compiled code, "
                                   "or out of memory); it died again when the run was retried alone")
            pending = rest + pending


def _run_chunk(fn: Callable[[T], R], items: list[T], jobs: int, on_result: Callable[[T, R], None],
               survive_crash: bool) -> list[T]:
    """The items a dead worker left unfinished, in order (only with survive_crash)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    # "spawn" keeps workers free of whatever threads this process started (Spark, kazoo).
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_worker_ignores_sigint)
    finished: set[int] = set()
    try:
        futures = {pool.submit(fn, item): i for i, item in enumerate(items)}
        for fut in as_completed(futures):
            result = fut.result()
            finished.add(futures[fut])
            on_result(items[futures[fut]], result)
    except BrokenProcessPool:
        _stop_now(pool)
        if not survive_crash:
            raise
        for fut, i in futures.items():  # answered before the break, not yet handed over
            if i not in finished and fut.done() and not fut.cancelled() and fut.exception() is None:
                finished.add(i)
                on_result(items[i], fut.result())
        return [item for i, item in enumerate(items) if i not in finished]
    except BaseException:
        _stop_now(pool)  # Ctrl-C, SIGTERM or a worker's error: no worker outlives the sweep
        raise
    pool.shutdown()
    return []


def _start_quiet_resource_tracker() -> None:
    """Start multiprocessing's resource tracker with its stderr on /dev/null. When Ctrl-C stops a
    sweep and its workers are killed mid-run, the tracker can be told twice to forget one of the
    pool's semaphores and prints a KeyError traceback (CPython's resource_tracker.main) — noise on
    the user's terminal after a clean interrupt. It inherits fd 2 when it starts, so point fd 2
    elsewhere just for that moment."""
    from multiprocessing import resource_tracker

    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        resource_tracker.ensure_running()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def run_in_threads(fn: Callable[[T], R], items: list[T], threads: int, on_result: Callable[[T, R], None]) -> None:
    """Run fn over items in `threads` threads of this process, for work that only waits on another
    process (a Spark job each: `kafkasim sweep --spark`); calls on_result(item, result) in the
    calling thread as each finishes. On an interrupt the queued items are dropped and the running
    ones abandoned (the caller stops what they wait on)."""
    from concurrent.futures import ThreadPoolExecutor, as_completed

    pool = ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="kafkasim-sweep")
    try:
        futures = {pool.submit(fn, item): item for item in items}
        for fut in as_completed(futures):
            on_result(futures[fut], fut.result())
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()


def _worker_ignores_sigint() -> None:
    """A terminal's Ctrl-C reaches the whole process group; the parent alone acts on it (it
    stops the sweep and terminates its workers), so no worker dies half-way through writing."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _stop_now(pool: Any) -> None:
    """Terminate every worker (SIGTERM: a run in progress dies without writing its run.json),
    then drop the queued work."""
    procs = list((pool._processes or {}).values())
    for p in procs:
        p.terminate()
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        p.join(2)
        if p.is_alive():
            p.kill()
