"""Seeds per minute of `kafkasim sweep --spark` on a Spark standalone cluster (real/spark/
standalone.py, 127.0.0.1) with one and with two executors of one core each, on the same seed set,
and the ratio two/one (the scaling of a sweep across executors; 2.0 would be perfect).

    python bench/spark_sweep_bench.py [--scenarios scenarios/smoke.toml] [--seeds 1-12]

For each executor count: start a standalone master and that many one-core workers, start the
session and wait until every executor has registered, run one warm-up seed per executor (Python
workers started, kafkasim's zip imported), then time run_on_spark over the seed set: from the
first task submitted to the last run.json written by the driver. The JVM's start is not counted
(a long sweep pays it once). Every run must pass and both counts must give the same trace
hashes, or the benchmark fails (a fast wrong answer is worth nothing). The load average is
printed before and after: on a shared machine other work takes cores from the executors.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "real", "spark"))

import standalone  # noqa: E402  (real/spark/standalone.py)

from kafkasim.harness.spark_sweep import run_on_spark, start_session  # noqa: E402
from kafkasim.harness.sweep import Job, parse_seeds, scenario_files  # noqa: E402

REGISTER_TIMEOUT_S = 120.0


def wait_for_executors(spark: Any, count: int) -> None:
    """Until `count` executors (besides the driver) have registered with the session."""
    deadline = time.monotonic() + REGISTER_TIMEOUT_S
    while spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1 < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{count} executors did not register within {REGISTER_TIMEOUT_S:.0f} s")
        time.sleep(0.5)


def measure(executors: int, files: list[str], seeds: list[int], work: str) -> tuple[float, dict[Any, str]]:
    """(seconds for the seed set, {(scenario, seed): trace hash}) on `executors` one-core workers."""
    cluster = os.path.join(work, f"cluster-{executors}")
    url = standalone.start(cluster, executors)
    try:
        spark = start_session(url)
        try:
            wait_for_executors(spark, executors)
            warm = [Job(files[0], 10_000 + i, os.path.join(work, "warm")) for i in range(executors)]
            run_on_spark(warm, url, lambda job, res: None)
            hashes: dict[Any, str] = {}

            def done(job: Job, res: dict[str, Any]) -> None:
                if res["verdict"] != "pass":
                    raise SystemExit(f"{res['scenario']} seed {res['seed']}: {res['verdict']} ({res['violations']})")
                hashes[(res["scenario"], res["seed"])] = res["trace_hash"]

            jobs = [Job(f, s, os.path.join(work, f"out-{executors}")) for f in files for s in seeds]
            start = time.perf_counter()
            run_on_spark(jobs, url, done)
            return time.perf_counter() - start, hashes
        finally:
            spark.stop()
    finally:
        standalone.stop(cluster)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scenarios", default=os.path.join(ROOT, "scenarios", "smoke.toml"),
                   help="a scenario file or a directory of them")
    p.add_argument("--seeds", default="1-12", help="N, A-B or a comma list of those")
    args = p.parse_args()
    files, seeds = scenario_files(args.scenarios), parse_seeds(args.seeds)
    runs = len(files) * len(seeds)
    print(f"load average before: {os.getloadavg()[0]:.1f} (1 min), {os.cpu_count()} cores", flush=True)
    with tempfile.TemporaryDirectory(prefix="kafkasim-spark-bench-") as work:
        results = {n: measure(n, files, seeds, work) for n in (1, 2)}
    if results[1][1] != results[2][1]:
        raise SystemExit("one and two executors gave different trace hashes")
    rate = {n: runs / (secs / 60.0) for n, (secs, _) in results.items()}
    for n, (secs, _) in results.items():
        print(f"{n} executor(s) x 1 core: {runs} runs in {secs:.1f} s = {rate[n]:.1f} seeds/minute")
    print(f"ratio two/one: {rate[2] / rate[1]:.2f} (same {runs} trace hashes)")
    print(f"load average after: {os.getloadavg()[0]:.1f} (1 min)")


if __name__ == "__main__":
    main()
