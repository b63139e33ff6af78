"""`kafkasim sweep --spark [--master URL]`: each (scenario, seed) of a sweep as a Spark task, on
PySpark's local[*] or any master the SparkSession builder takes (spark://, yarn, k8s://).

One path for every master: an executor runs its seed in a scratch directory and returns run.json
and the trace (zlib-compressed) to the driver, which writes them where a local sweep would
(OUT/runs/<scenario>/seed-N/run.json, trace.jsonl) as each task finishes. So executors need no
shared filesystem and no kafkasim checkout: the driver ships its own kafkasim package (a zip,
SparkContext.addPyFile) and each task carries its scenario's text. They need a Python with
kafkasim's dependencies (PYSPARK_PYTHON; this interpreter unless it is set). The driver stamps
run.json with its own code_version: the code that ran is the code it shipped.

Each run is a one-task Spark job submitted from a driver thread, so a finished run is written
(and counted on the progress line) as soon as it finishes, and an interrupt loses only the
unfinished ones. A task that raises, or a Spark job that fails (a crashed Python worker, a lost
executor), is recorded as an error for its (scenario, seed): a FAIL line, a JUnit <error> and
OUT/runs/<scenario>/seed-N/error.txt with the traceback; the other seeds go on.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import sys
import traceback
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafkasim.harness.host import code_version, process_scratch_dir, run_in_threads, scratch_dir
from kafkasim.harness.runner import default_out_dir, run_scenario
from kafkasim.harness.scenario import Scenario, load_scenario, scenario_from_text
from kafkasim.harness.sweep import Job, error_summary, job_scenario, summarize

APP_NAME = "kafkasim-sweep"
# One-task Spark jobs the driver keeps submitted at once (Spark queues what exceeds the cores).
MIN_THREADS = 64


@dataclass(frozen=True)
class Task:
    """One run as an executor gets it: the job and its scenario file's text."""
    job: Job
    scenario_text: str


def run_task(task: Task) -> dict[str, Any]:
    """On an executor: {"run_json", "trace"} (zlib bytes), or {"error", "traceback"} if the run
    raised. An interrupt (the executor being stopped) is not caught: it is no verdict."""
    job = task.job
    try:
        scenario = job_scenario(job, scenario_from_text(job.scenario_path, task.scenario_text))
        with scratch_dir() as tmp:
            result = run_scenario(scenario, job.seed, os.path.join(tmp, "run"), job.seeded_bugs)
            with open(os.path.join(result.out_dir, "run.json"), "rb") as f:
                run_json = f.read()
            with open(os.path.join(result.out_dir, "trace.jsonl"), "rb") as f:
                trace = f.read()
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
    return {"run_json": zlib.compress(run_json), "trace": zlib.compress(trace)}


def package_zip(dest_dir: str) -> str:
    """The kafkasim package this driver runs, zipped for SparkContext.addPyFile, named by its
    content: a session that ships the same code twice ships the same file (Spark refuses a
    second file of one name with other bytes), changed code goes under a new name."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # kafkasim/harness/.. = kafkasim/
    entries: dict[str, bytes] = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        arc = os.path.normpath(os.path.join("kafkasim", os.path.relpath(folder, root)))
        for name in sorted(files):
            with open(os.path.join(folder, name), "rb") as f:
                entries[os.path.join(arc, name)] = f.read()
        if "__init__.py" not in files:  # zipimport knows no namespace packages
            entries[os.path.join(arc, "__init__.py")] = b""
    digest = hashlib.sha256()
    for arc, data in sorted(entries.items()):
        digest.update(f"{arc}\0{len(data)}\0".encode() + data)
    path = os.path.join(dest_dir, f"kafkasim-{digest.hexdigest()[:16]}.zip")
    if os.path.exists(path):
        return path
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in sorted(entries.items()):
            z.writestr(zipfile.ZipInfo(arc, date_time=(1980, 1, 1, 0, 0, 0)), data, zipfile.ZIP_DEFLATED)
    return path


class _Driver:
    """The driver's side: submits one Spark job per run and writes what comes back."""

    def __init__(self, sc: Any, scenarios: dict[str, Scenario]) -> None:
        self.sc, self.scenarios = sc, scenarios
        self.version = code_version()
        self.stopping = False  # interrupted: runs cut short write nothing

    def run(self, job: Job) -> dict[str, Any]:
        scenario = self.scenarios[job.scenario_path]
        out_dir = default_out_dir(scenario, job.seed, job.reports_dir)
        for stale in ("run.json", "error.txt"):  # an earlier sweep's verdict would outlive this run
            if os.path.exists(os.path.join(out_dir, stale)):
                os.remove(os.path.join(out_dir, stale))
        self.sc.setJobDescription(f"{scenario.name} seed {job.seed}")
        try:
            [payload] = self.sc.parallelize([Task(job, scenario.text)], 1).map(run_task).collect()
        except Exception as exc:  # the job failed, not the run: a worker crashed, executors lost
            if self.stopping:
                raise
            payload = {"error": f"Spark job failed: {_cause(exc)}", "traceback": str(exc)}
        if self.stopping:
            raise KeyboardInterrupt
        if "error" in payload:
            return self._write_error(job, scenario, out_dir, payload)
        return self._write_run(job, out_dir, payload)

    def _write_run(self, job: Job, out_dir: str, payload: dict[str, Any]) -> dict[str, Any]:
        run = json.loads(zlib.decompress(payload["run_json"]))
        run["code_version"] = self.version
        os.makedirs(out_dir, exist_ok=True)
        with open(os.path.join(out_dir, "trace.jsonl"), "wb") as f:
            f.write(zlib.decompress(payload["trace"]))
        tmp = os.path.join(out_dir, "run.json.tmp")
        with open(tmp, "w") as f:
            json.dump(run, f, indent=2, sort_keys=True)  # as runner.py writes it
        os.replace(tmp, os.path.join(out_dir, "run.json"))  # all or nothing, as in a local run
        return summarize(job, run, out_dir)

    def _write_error(self, job: Job, scenario: Scenario, out_dir: str, payload: dict[str, Any]) -> dict[str, Any]:
        return error_summary(job, scenario.name, out_dir, payload["error"], payload["traceback"])


def ship_package(sc: Any) -> None:
    """Send this kafkasim to the session's executors, once per session and code: Spark refuses
    a file name it has from another path, and serves the file for the session's life, so the
    zip lives in a directory kept until this process exits."""
    path = package_zip(process_scratch_dir())
    if not any(os.path.basename(f) == os.path.basename(path) for f in sc.listFiles):
        sc.addPyFile(path)


def _cause(exc: Exception) -> str:
    """The Python error inside a failed Spark job's message (its last `SomeError: ...` line),
    else the message's first line."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    found = [line for line in lines if re.match(r"^[\w.]+(Error|Exception|Exit)\b", line)]
    if found:
        return found[-1]
    return lines[0] if lines else type(exc).__name__


def on_this_machine(master: str) -> bool:
    """local[...] or a master on loopback: the driver can listen on 127.0.0.1 only."""
    if master.startswith("local"):
        return True
    host = master.split("://", 1)[-1].split("/", 1)[0].rsplit(":", 1)[0]
    return master.startswith("spark://") and host in ("127.0.0.1", "localhost")


def start_session(master: str) -> Any:
    """report/job.py's session settings under the sweep's name; the driver listens on 127.0.0.1
    unless the master is elsewhere (its executors must reach it). PySpark installs its own
    SIGINT handler; the command's (stop once, exit 130) is put back."""
    from kafkasim.report.job import start_spark

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    previous = signal.getsignal(signal.SIGINT)
    spark = start_spark(master, app=APP_NAME, loopback=on_this_machine(master))
    if previous is not None:
        signal.signal(signal.SIGINT, previous)
    return spark


def run_on_spark(jobs: list[Job], master: str, on_result: Callable[[Job, dict[str, Any]], None]) -> None:
    """Run every job as a Spark task on `master`; on_result(job, summary) on this thread as each
    finishes. A session already running (a notebook, a test) is used and left running."""
    from pyspark.sql import SparkSession

    scenarios = {path: load_scenario(path) for path in sorted({j.scenario_path for j in jobs})}
    owned = SparkSession.getActiveSession() is None
    spark = start_session(master)
    driver = _Driver(spark.sparkContext, scenarios)
    try:
        ship_package(spark.sparkContext)
        threads = min(len(jobs), max(MIN_THREADS, 2 * spark.sparkContext.defaultParallelism))
        run_in_threads(driver.run, jobs, threads, on_result)
    except KeyboardInterrupt:
        driver.stopping = True
        owned = False  # no stop(), which waits on running jobs: the command kills the JVM (cli.py)
        raise
    finally:
        if owned:
            spark.stop()
