"""How fast the simulation runs on this machine, measured in one run:

  failover  scenarios/cluster-leader-failover.toml (3 brokers, RF 3, the leader killed and
            restarted) over --failover-seeds seeds, one process: simulated seconds per wall
            second for each seed. The peer is the wall clock itself: 1.0 would be real time,
            what the same failover costs on real brokers (a ZooKeeper session timeout and all).
  suite     every scenario in scenarios/ over --suite-seeds seeds: seeds per minute with
            --jobs local worker processes (the machine's cores), and with one process. The
            ratio jobs/one is the parallel efficiency of `kafkasim sweep` on this machine.

    python bench/scenario_bench.py [--failover-seeds 5] [--suite-seeds 2] [--jobs 2]

Runs write their reports under a temporary directory that is removed afterwards; a failing
run fails the benchmark (a fast wrong answer is worth nothing).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from typing import Any

from kafkasim.harness.host import run_in_processes
from kafkasim.harness.runner import run_scenario
from kafkasim.harness.scenario import load_scenario
from kafkasim.harness.sweep import Job, run_job, scenario_files

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAILOVER = os.path.join(ROOT, "scenarios", "cluster-leader-failover.toml")


def bench_failover(seeds: int, out: str) -> list[dict[str, Any]]:
    scenario = load_scenario(FAILOVER)
    rows = []
    for seed in range(1, seeds + 1):
        result = run_scenario(scenario, seed, os.path.join(out, f"failover-{seed}"))
        stats = result.run["stats"]
        if not result.passed:
            raise SystemExit(f"{FAILOVER} seed {seed} failed: {result.out_dir}/run.json")
        rows.append({"seed": seed, "sim_s": stats["sim_time_ms"] / 1000.0, "wall_s": stats["wall_time_s"],
                     "ratio": stats["sim_to_wall_ratio"]})
    return rows


def bench_suite(seeds: int, jobs: int, out: str) -> tuple[int, float, int]:
    """(runs, wall seconds, failures) of the whole suite over seeds 1..seeds."""
    work = [Job(f, s, out) for f in scenario_files(os.path.join(ROOT, "scenarios")) for s in range(1, seeds + 1)]
    failed: list[str] = []

    def done(job: Job, res: dict[str, Any]) -> None:
        if res["verdict"] != "pass":
            failed.append(f"{job.scenario_path} seed {job.seed}")

    start = time.perf_counter()
    run_in_processes(run_job, work, jobs, done)
    wall = time.perf_counter() - start
    if failed:
        raise SystemExit(f"suite runs failed: {failed}")
    return len(work), wall, len(failed)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--failover-seeds", type=int, default=5)
    ap.add_argument("--suite-seeds", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    out = tempfile.mkdtemp(prefix="kafkasim-scenario-bench-")
    try:
        rows = bench_failover(args.failover_seeds, out)
        print("leader failover (scenarios/cluster-leader-failover.toml), simulated s / wall s:")
        for r in rows:
            print(f"  seed {r['seed']:>3}: {r['sim_s']:7.1f} s simulated in {r['wall_s']:6.2f} s wall  "
                  f"ratio {r['ratio']:6.2f}")
        ratios = [r["ratio"] for r in rows]
        print(f"  median ratio vs real time: {statistics.median(ratios):.2f}  (min {min(ratios):.2f}, "
              f"max {max(ratios):.2f})")
        n, wall_jobs, _ = bench_suite(args.suite_seeds, args.jobs, os.path.join(out, "jobs"))
        _, wall_one, _ = bench_suite(args.suite_seeds, 1, os.path.join(out, "one"))
        per_min_jobs, per_min_one = n / wall_jobs * 60, n / wall_one * 60
        print(f"suite (scenarios/, {n} runs = scenarios x seeds 1-{args.suite_seeds}):")
        print(f"  {args.jobs} processes: {wall_jobs:7.1f} s wall, {per_min_jobs:6.1f} seeds/minute")
        print(f"  1 process:  {wall_one:7.1f} s wall, {per_min_one:6.1f} seeds/minute")
        print(f"  ratio {args.jobs} processes / 1 process: {per_min_jobs / per_min_one:.2f}")
    finally:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
