"""`kafkasim sweep`: many (scenario, seed) runs in local worker processes, a progress line on
stderr, JUnit XML for CI, and a non-zero exit on any violation. Interrupted (Ctrl-C, SIGTERM),
it stops its workers at once; the runs that finished keep their run.json and JUnit case, the
unfinished ones get neither."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from kafkasim.harness.host import run_in_processes, wall_seconds
from kafkasim.harness.progress import ProgressLine, sweep_text
from kafkasim.harness.repro import replay_command, repro_command
from kafkasim.harness.runner import default_out_dir, run_scenario
from kafkasim.harness.scenario import Scenario, ScenarioError, load_scenario, with_buggify


@dataclass(frozen=True)
class Job:
    scenario_path: str
    seed: int
    reports_dir: str
    seeded_bugs: tuple[str, ...] = ()
    buggify: bool = False  # --buggify: BUGGIFY on whatever the scenario's [buggify] says


def job_scenario(job: Job, scenario: Scenario) -> Scenario:
    return with_buggify(scenario) if job.buggify else scenario


def parse_seeds(spec: str) -> list[int]:
    """"7" -> [7]; "1-20" -> 1..20; "1,5,9-11" -> [1, 5, 9, 10, 11]."""
    seeds: list[int] = []
    for part in spec.split(","):
        lo, _, hi = part.strip().partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            raise ValueError(f"bad seed range {spec!r}: expected N, A-B or a comma list of those")
        seeds += list(range(int(lo), int(hi or lo) + 1))
    return seeds


def scenario_files(path: str) -> list[str]:
    if os.path.isdir(path):
        return [os.path.join(path, n) for n in sorted(os.listdir(path)) if n.endswith(".toml")]
    return [path]


def refuse_client_workload(path: str, scenario: Scenario) -> None:
    """A third-party client's scenario runs against the live cluster, paced to the wall clock and
    not replayable: a seed sweep of the simulation cannot run it."""
    if scenario.client:
        raise ScenarioError(f"{path}: [workload] client = {scenario.client!r}: a third-party client's scenario is "
                            f"run with `kafkasim run {path}` or `kafkasim matrix`, not `kafkasim sweep`")


def run_job(job: Job) -> dict[str, Any]:
    scenario = job_scenario(job, load_scenario(job.scenario_path))
    result = run_scenario(scenario, job.seed, default_out_dir(scenario, job.seed, job.reports_dir), job.seeded_bugs)
    return summarize(job, result.run, result.out_dir)


def summarize(job: Job, run: dict[str, Any], out_dir: str) -> dict[str, Any]:
    """A finished run as the sweep counts it (the progress line, JUnit, the FAIL lines)."""
    return {"scenario": run["scenario"], "path": job.scenario_path, "seed": job.seed, "verdict": run["verdict"],
            "repro": repro_command(run), "replay": replay_command(os.path.join(out_dir, "run.json")),
            "trace_hash": run["trace_hash"], "out_dir": out_dir, "wall_s": run["stats"]["wall_time_s"],
            "violations": [c["name"] for c in run["checks"] if not c["ok"] and not c["expected"]],
            "expected": [c["name"] for c in run["checks"] if not c["ok"] and c["expected"]]}


def sweep(path: str, seeds: list[int], jobs: int, reports_dir: str, junit: str | None,
          seeded_bugs: Iterable[str] = (), spark_master: str | None = None, buggify: bool = False
          ) -> list[dict[str, Any]]:
    """spark_master: run each (scenario, seed) as a Spark task there (harness/spark_sweep.py)
    instead of in `jobs` local processes."""
    files = scenario_files(path)
    for f in files:
        refuse_client_workload(f, load_scenario(f))  # fail fast, naming file and key, before any worker starts
    bugs = tuple(sorted(seeded_bugs))
    work = [Job(f, s, reports_dir, bugs, buggify) for f in files for s in seeds]
    results: list[dict[str, Any]] = []
    progress = ProgressLine(sys.stderr, wall_seconds)

    def done(job: Job, res: dict[str, Any]) -> None:
        results.append(res)
        failed = sum(1 for r in results if r["verdict"] != "pass")
        progress.show(sweep_text(len(results), len(work), failed, progress.elapsed()), force=len(results) == len(work))

    try:
        if spark_master is not None:
            from kafkasim.harness.spark_sweep import run_on_spark

            run_on_spark(work, spark_master, done)
        else:
            run_in_processes(run_job, work, jobs, done, lambda job, why: done(job, crashed(job, why)))
    finally:  # interrupted too: the finished runs keep their JUnit cases
        progress.close()
        results.sort(key=lambda r: (r["scenario"], r["seed"]))
        if junit:
            write_junit(junit, results)
    return results


def crashed(job: Job, why: str) -> dict[str, Any]:
    """A run whose worker process died (host.run_in_processes): an error for its (scenario, seed),
    as a Spark task that crashed is (spark_sweep.py)."""
    scenario = job_scenario(job, load_scenario(job.scenario_path))
    return error_summary(job, scenario.name, default_out_dir(scenario, job.seed, job.reports_dir),
                         f"worker died: {why}", why)


def error_summary(job: Job, scenario_name: str, out_dir: str, error: str, details: str) -> dict[str, Any]:
    """A run that gave no verdict (it raised, or its process died): OUT/.../error.txt holds the
    details; the sweep counts it as an error (a FAIL line, a JUnit <error>)."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "error.txt"), "w") as f:
        f.write(details)
    repro = repro_command({"scenario_path": job.scenario_path, "seed": job.seed,
                           "seeded_bugs": list(job.seeded_bugs), "buggify": {"enabled": job.buggify}})
    return {"scenario": scenario_name, "path": job.scenario_path, "seed": job.seed, "verdict": "error",
            "error": error, "traceback": details, "repro": repro, "replay": "", "trace_hash": "",
            "out_dir": out_dir, "wall_s": 0.0,
            "violations": [f"error: {error} (details in {out_dir}/error.txt)"], "expected": []}


def write_junit(path: str, results: list[dict[str, Any]]) -> None:
    by_scenario: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        by_scenario.setdefault(r["scenario"], []).append(r)
    lines = ['<?xml version="1.0" encoding="UTF-8"?>', "<testsuites>"]
    for name, runs in by_scenario.items():
        errors = sum(1 for r in runs if r["verdict"] == "error")
        fails = sum(1 for r in runs if r["verdict"] != "pass") - errors
        lines.append(f"  <testsuite name={quoteattr(name)} tests=\"{len(runs)}\" failures=\"{fails}\""
                     f" errors=\"{errors}\">")
        for r in runs:
            case = f"    <testcase classname={quoteattr(name)} name=\"seed-{r['seed']}\" time=\"{r['wall_s']}\""
            if r["verdict"] == "pass":
                lines.append(case + "/>")
                continue
            if r["verdict"] == "error":  # the task raised: no verdict, its traceback instead
                lines += [case + ">", f"      <error message={quoteattr(r['error'])}>{escape(r['traceback'])}"
                          f"\nreproduce: {escape(r['repro'])}</error>", "    </testcase>"]
                continue
            msg = "violations: " + ", ".join(r["violations"])
            lines += [case + ">", f"      <failure message={quoteattr(msg)}>{escape(r['repro'])}"
                      f"\nor, from the recorded scenario text: {escape(r['replay'])}"
                      f"\ntrace hash {escape(r['trace_hash'])}\nreport {escape(r['out_dir'])}</failure>",
                      "    </testcase>"]
        lines.append("  </testsuite>")
    lines.append("</testsuites>")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
