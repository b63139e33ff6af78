"""How fast the simulation runs, against a peer measured in the same run.

The peer is the same measurement of the code at a baseline revision (default: BASELINE_REV, the
commit before the speed work of issue 15), checked out into a temporary git worktree. Both sides
run the scenario files of *this* checkout, in fresh subprocesses, interleaved (peer, this, peer,
this, ...) so that load from other work on the machine falls on both alike.

  failover  scenarios/cluster-leader-failover.toml, seeds 1..--failover-seeds, one process per
            side and repeat: simulated seconds per wall second and per CPU second (the
            process's own CPU time: what the simulation costs whatever else the machine runs),
            and kernel events per CPU second (queue entries scheduled by the simulation kernel;
            for the simpy kernel of old, simpy events scheduled). Medians over seeds x repeats.
  suite     `kafkasim sweep scenarios/ --seeds 1-N --jobs J`: runs per wall minute, process
            start-up included. Each side's median over --suite-repeats.

    python bench/scenario_bench.py [--baseline REV] [--failover-seeds 3] [--repeats 3]
                                   [--suite-seeds 2] [--suite-repeats 1] [--jobs 2] [--no-suite]

Every run of this checkout must pass (a fast wrong answer is worth nothing); the same seed gives
the same trace hash on both sides only if the change kept the trace (printed, not required). The
default baseline still runs on simpy, which kafkasim itself no longer depends on: `pip install
'simpy>=4.1,<5'` to measure against it.
This checkout runs its native build (kafkasim/runtime/native.py: `python3 real/build_native.py` compiles the
hot modules with mypyc) when the build is present and fresh, and pure Python otherwise; the failover
table says which. `KAFKASIM_NATIVE=0 python bench/scenario_bench.py` measures it pure.
Reports go to a temporary directory that is removed afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAILOVER = os.path.join(ROOT, "scenarios", "cluster-leader-failover.toml")
BASELINE_REV = "e1cba26"  # main before the speed work (issue 15, item 1)


# ------------------------------------------------------------------ worker (runs in either tree)
def worker_failover(scenario_path: str, seeds: list[int], out: str) -> list[dict[str, Any]]:
    """Run in a subprocess whose PYTHONPATH is the tree under test."""
    from kafkasim.harness.runner import run_scenario
    from kafkasim.harness.scenario import load_scenario
    from kafkasim.runtime.sim import world as wmod

    # The kernel, through the world that makes it: SimWorld stays pure Python in the native build
    # (real/build_native.py), while a compiled SimKernel's __init__ cannot be wrapped.
    kernels: list[Any] = []
    init = wmod.SimWorld.__init__

    def capture(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        kernels.append(self.kernel)

    wmod.SimWorld.__init__ = capture  # type: ignore[method-assign]
    scenario = load_scenario(scenario_path)
    rows = []
    for seed in seeds:
        kernels.clear()
        cpu0, wall0 = time.process_time(), time.perf_counter()
        result = run_scenario(scenario, seed, os.path.join(out, f"failover-{seed}"))
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        k = kernels[0]
        scheduled = next(k._seq) if hasattr(k, "_seq") else next(k.env._eid)
        rows.append({"seed": seed, "passed": result.passed, "native": _native_active(), "sim_s": result.run["stats"]["sim_time_ms"] / 1000.0,
                     "wall_s": wall, "cpu_s": cpu, "events": scheduled, "trace_hash": result.run["trace_hash"],
                     "messages": result.run["stats"]["produced"]})
    return rows


def _native_active() -> bool:
    """Whether this worker runs the compiled build (kafkasim/runtime/native.py; a baseline has none)."""
    try:
        from kafkasim.runtime import native
    except ImportError:
        return False
    return native.active()


# ------------------------------------------------------------------ driver
def _run_side(tree: str, args: list[str]) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=tree)
    return subprocess.run([sys.executable, *args], cwd=tree, env=env, capture_output=True, text=True)


def failover_side(tree: str, seeds: int, out: str) -> list[dict[str, Any]]:
    proc = _run_side(tree, [os.path.abspath(__file__), "--worker-failover", FAILOVER, "--seeds-list",
                            ",".join(str(s) for s in range(1, seeds + 1)), "--out", out])
    if proc.returncode != 0:
        raise SystemExit(f"failover worker in {tree} failed:\n{proc.stderr[-3000:]}")
    rows: list[dict[str, Any]] = json.loads(proc.stdout.strip().splitlines()[-1])
    return rows


def suite_side(tree: str, seeds: int, jobs: int, out: str) -> tuple[float, int, int, bool]:
    """(wall seconds, runs asked, runs finished, all passed) of one sweep over ROOT's scenarios.
    Finished runs are those that wrote a run.json: an older baseline refuses scenario files
    newer than itself at once, and its runs/minute would count runs it never made."""
    start = time.perf_counter()
    proc = _run_side(tree, ["-m", "kafkasim.cli", "sweep", os.path.join(ROOT, "scenarios"), "--seeds",
                            f"1-{seeds}", "--jobs", str(jobs), "--out", out])
    wall = time.perf_counter() - start
    runs = sum(1 for f in os.listdir(os.path.join(ROOT, "scenarios")) if f.endswith(".toml")) * seeds
    finished = sum(1 for _, _, files in os.walk(out) if "run.json" in files)
    return wall, runs, finished, proc.returncode == 0


def _med(rows: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def report_failover(peer: list[dict[str, Any]], this: list[dict[str, Any]]) -> None:
    for side in (peer, this):
        for r in side:
            r["ratio_wall"], r["ratio_cpu"] = r["sim_s"] / r["wall_s"], r["sim_s"] / r["cpu_s"]
            r["events_per_cpu_s"] = r["events"] / r["cpu_s"]
            r["events_per_msg"] = r["events"] / max(1, r["messages"])
    print(f"leader failover ({os.path.relpath(FAILOVER, ROOT)}), medians of {len(this)} runs per side:")
    print(f"  {'':28} {'baseline':>12} {'this':>12} {'this/baseline':>14}")
    for label, key in (("simulated s / wall s", "ratio_wall"), ("simulated s / CPU s", "ratio_cpu"),
                       ("kernel events / CPU s", "events_per_cpu_s"), ("kernel events / message", "events_per_msg"),
                       ("CPU s per run", "cpu_s")):
        a, b = _med(peer, key), _med(this, key)
        print(f"  {label:28} {a:12.2f} {b:12.2f} {b / a:14.2f}")
    modes = {"native (mypyc build)" if r["native"] else "pure Python" for r in this}
    print(f"  this ran: {', '.join(sorted(modes))}")
    same = {r["seed"]: r["trace_hash"] for r in peer} == {r["seed"]: r["trace_hash"] for r in this}
    print(f"  trace hashes equal to the baseline's: {same}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", default=BASELINE_REV, help="git revision measured as the peer")
    ap.add_argument("--failover-seeds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3, help="failover: processes per side")
    ap.add_argument("--suite-seeds", type=int, default=2)
    ap.add_argument("--suite-repeats", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--no-suite", action="store_true")
    ap.add_argument("--worker-failover", help=argparse.SUPPRESS)
    ap.add_argument("--seeds-list", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker_failover:
        rows = worker_failover(args.worker_failover, [int(s) for s in args.seeds_list.split(",")], args.out)
        print(json.dumps(rows))
        return
    out = tempfile.mkdtemp(prefix="kafkasim-scenario-bench-")
    base = os.path.join(out, "baseline-tree")
    subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", base, args.baseline], check=True,
                   capture_output=True)
    try:
        print(f"peer: {args.baseline} in a temporary worktree; this: {ROOT}")
        peer: list[dict[str, Any]] = []
        this: list[dict[str, Any]] = []
        for i in range(args.repeats):
            peer += failover_side(base, args.failover_seeds, os.path.join(out, f"p{i}"))
            this += failover_side(ROOT, args.failover_seeds, os.path.join(out, f"t{i}"))
        if not all(r["passed"] for r in this):
            raise SystemExit(f"this checkout failed a failover run: {[r for r in this if not r['passed']]}")
        report_failover(peer, this)
        if args.no_suite:
            return
        walls: dict[str, list[float]] = {"baseline": [], "this": []}
        finished: dict[str, int] = {"baseline": 0, "this": 0}
        runs = 0
        for i in range(args.suite_repeats):
            for name, tree in (("baseline", base), ("this", ROOT)):
                wall, runs, done, ok = suite_side(tree, args.suite_seeds, args.jobs,
                                                  os.path.join(out, f"s-{name}-{i}"))
                if not ok and name == "this":
                    raise SystemExit("this checkout failed a suite run")
                walls[name].append(wall)
                finished[name] = done
        per_min = {k: runs / statistics.median(v) * 60 for k, v in walls.items()}
        print(f"suite (kafkasim sweep scenarios/ --seeds 1-{args.suite_seeds} --jobs {args.jobs}: {runs} runs), "
              f"median of {args.suite_repeats}:")
        if finished["baseline"] < runs:
            print(f"  baseline: only {finished['baseline']} of {runs} runs finished (scenario files it cannot "
                  f"run): no comparable figure")
            print(f"  this {per_min['this']:7.1f} runs/minute")
        else:
            print(f"  baseline {per_min['baseline']:7.1f} runs/minute, this {per_min['this']:7.1f} runs/minute, "
                  f"this/baseline {per_min['this'] / per_min['baseline']:.2f}")
    finally:
        subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", base], capture_output=True)
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
