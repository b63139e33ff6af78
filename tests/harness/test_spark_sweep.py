"""`kafkasim sweep --spark`: the same runs as a local-process sweep (same trace hashes, run.json,
traces and JUnit cases), in the same places, readable by `kafkasim report`; a failing seed is
named while the others' results are kept; a task that raises is an error for its seed only; and
a standalone master (real/spark/standalone.py, one worker) runs them the same way.

One local[*] session for the module (the CLI, run in this process, uses the active session and
leaves it running); the standalone case runs the CLI in a subprocess against its own master."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkasim import cli
from kafkasim.harness.spark_sweep import on_this_machine, run_on_spark, start_session
from kafkasim.harness.sweep import Job, write_junit

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
SMOKE = "scenarios/smoke.toml"
# Differ run to run: how long the run took on this machine.
WALL = ("wall_time_s", "sim_to_wall_ratio")


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    session = start_session("local[*]")
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def at_repo(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Scenario paths relative to the repo, as in CI; the CLI's signal handlers undone after."""
    monkeypatch.chdir(REPO)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    for s, h in handlers.items():
        signal.signal(s, h)


@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Seeds 1-3 of the smoke scenario swept as today (in this process, --jobs 1)."""
    out = tmp_path_factory.mktemp("local")
    os.chdir(REPO)
    assert cli.main(["sweep", SMOKE, "--seeds", "1-3", "--jobs", "1", "--out", str(out)]) == 0
    return out


def run_json(out: Path, scenario: str, seed: int) -> dict[str, Any]:
    run: dict[str, Any] = json.loads((out / "runs" / scenario / f"seed-{seed}" / "run.json").read_text())
    return run


def comparable(run: dict[str, Any]) -> dict[str, Any]:
    return {**run, "stats": {k: v for k, v in run["stats"].items() if k not in WALL}}


def junit_cases(path: Path) -> list[tuple[str, str, list[str]]]:
    """(suite, case, child tags) of every test case: all but the measured times."""
    root = ET.parse(path).getroot()
    return [(s.get("name", ""), c.get("name", ""), [e.tag for e in c]) for s in root for c in s]


def test_spark_sweep_matches_a_local_sweep_and_feeds_the_report(spark: Any, local_sweep: Path,
                                                                tmp_path: Path) -> None:
    out = tmp_path / "spark"
    assert cli.main(["sweep", SMOKE, "--seeds", "1-3", "--spark", "--out", str(out)]) == 0
    for seed in (1, 2, 3):
        mine, theirs = run_json(out, "smoke", seed), run_json(local_sweep, "smoke", seed)
        assert mine["verdict"] == "pass" and mine["trace_hash"] == theirs["trace_hash"]
        assert comparable(mine) == comparable(theirs)
        trace = out / "runs" / "smoke" / f"seed-{seed}" / "trace.jsonl"
        assert trace.read_bytes() == (local_sweep / "runs" / "smoke" / f"seed-{seed}" / "trace.jsonl").read_bytes()
    assert junit_cases(out / "junit.xml") == junit_cases(local_sweep / "junit.xml")
    assert [c[1] for c in junit_cases(out / "junit.xml")] == ["seed-1", "seed-2", "seed-3"]

    from kafkasim.report.job import run_report

    report = run_report(str(out), str(tmp_path / "summary"), "local[*]")
    assert report.runs == 3 and not report.data.invalid


CRASH_SWARM = REPO / "scenarios" / "crash-swarm"


def test_the_crash_swarm_directory_sweeps_on_spark_with_buggify(spark: Any, tmp_path: Path) -> None:
    """The 10,000-run crash sweep's command (scenarios/crash-swarm/README.md) at 2 seeds: every
    file of the directory ran on Spark, each seed wrote its run.json with its seed, a verdict,
    BUGGIFY on and the power losses or kills its nemesis drew."""
    out = tmp_path / "crash"
    code = cli.main(["sweep", "scenarios/crash-swarm/", "--seeds", "1-2", "--buggify", "--spark", "--out", str(out)])
    names = sorted(f.stem for f in CRASH_SWARM.glob("*.toml"))
    assert len(names) >= 3
    for name in names:
        for seed in (1, 2):
            run = run_json(out, name, seed)
            assert run["seed"] == seed and run["verdict"] == "pass"
            assert run["buggify"]["enabled"] is True
            assert any(f["kind"] == "crash" for f in run["faults"])
    assert code == 0
    assert len(junit_cases(out / "junit.xml")) == 2 * len(names)


def test_a_failing_seed_is_named_and_the_others_kept(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # commit-before-replicated is caught on seed 8 of this scenario, not on seed 7
    # (tests/harness/test_seeded_bugs.py).
    monkeypatch.setenv("KAFKASIM_SEEDED_BUGS", "commit-before-replicated")
    out = tmp_path / "out"
    code = cli.main(["sweep", "scenarios/coordinator-failover-commits.toml", "--seeds", "7-8", "--spark",
                     "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 1
    assert "FAIL coordinator-failover-commits seed 8: committed-offset-regression" in printed
    assert "seed 7:" not in printed and "2 runs, 1 passed, 1 failed" in printed
    assert run_json(out, "coordinator-failover-commits", 8)["verdict"] == "fail"
    assert run_json(out, "coordinator-failover-commits", 7)["verdict"] == "pass"
    cases = junit_cases(out / "junit.xml")
    assert cases == [("coordinator-failover-commits", "seed-7", []),
                     ("coordinator-failover-commits", "seed-8", ["failure"])]


def test_a_task_that_raises_is_an_error_for_its_seed_only(spark: Any, tmp_path: Path) -> None:
    # An unknown seeded bug makes the executor's world refuse to be built: the task raises.
    jobs = [Job(SMOKE, 1, str(tmp_path)), Job(SMOKE, 2, str(tmp_path), ("no-such-bug",))]
    results: dict[int, dict[str, Any]] = {}
    run_on_spark(jobs, "local[*]", lambda job, res: results.__setitem__(job.seed, res))
    assert results[1]["verdict"] == "pass" and (tmp_path / "runs/smoke/seed-1/run.json").exists()
    err = results[2]
    assert err["verdict"] == "error" and err["seed"] == 2 and "unknown seeded bug" in err["error"]
    assert not (tmp_path / "runs/smoke/seed-2/run.json").exists()
    assert "no-such-bug" in (tmp_path / "runs/smoke/seed-2/error.txt").read_text()
    write_junit(str(tmp_path / "junit.xml"), [results[1], results[2]])
    assert junit_cases(tmp_path / "junit.xml") == [("smoke", "seed-1", []), ("smoke", "seed-2", ["error"])]


def test_usage_errors_need_no_spark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "out")
    assert cli.main(["sweep", SMOKE, "--seeds", "1", "--master", "spark://127.0.0.1:7077", "--out", out]) == 2
    assert "--master needs --spark" in capsys.readouterr().err
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-java"))
    assert cli.main(["sweep", SMOKE, "--seeds", "1", "--spark", "--out", out]) == 2
    assert "sweep: PySpark needs Java" in capsys.readouterr().err
    assert not (tmp_path / "out" / "runs").exists()


@pytest.mark.parametrize(("master", "loopback"), [
    ("local[*]", True), ("spark://127.0.0.1:7077", True), ("spark://localhost:7077", True),
    ("spark://10.1.2.3:7077", False), ("yarn", False), ("k8s://https://10.1.2.3:6443", False)])
def test_the_driver_listens_beyond_loopback_only_for_a_remote_master(master: str, loopback: bool) -> None:
    assert on_this_machine(master) is loopback


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[str]:
    script = [sys.executable, str(REPO / "real" / "spark" / "standalone.py")]
    started = subprocess.run([*script, "start", "1", "--dir", str(tmp_path / "cluster")], capture_output=True,
                             text=True, timeout=240)
    try:
        assert started.returncode == 0, started.stderr
        yield started.stdout.strip()
    finally:
        subprocess.run([*script, "stop", "--dir", str(tmp_path / "cluster")], timeout=60)


def test_a_standalone_master_with_one_worker(standalone: str, local_sweep: Path, tmp_path: Path) -> None:
    assert standalone.startswith("spark://127.0.0.1:")
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "kafkasim.cli", "sweep", SMOKE, "--seeds", "1-2", "--spark",
                           "--master", standalone, "--out", str(out)], cwd=REPO, capture_output=True, text=True,
                          timeout=400, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    for seed in (1, 2):
        assert run_json(out, "smoke", seed)["trace_hash"] == run_json(local_sweep, "smoke", seed)["trace_hash"]


# About a minute of wall time per seed: an interrupt always lands mid-run.
SLOW = """
[scenario]
name = "slow"
duration_ms = 600000
[cluster]
brokers = 1
[[topics]]
name = "events"
partitions = 2
[workload.producer]
messages = 200000
rate_per_s = 2000
[workload.consumer]
count = 1
"""


def descendants(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    kids = [int(x) for x in out.split()]
    return kids + [d for k in kids for d in descendants(k)]


def alive(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def test_ctrl_c_stops_a_spark_sweep_within_2_s(tmp_path: Path) -> None:
    (tmp_path / "slow.toml").write_text(SLOW)
    scratch = tmp_path / "tmp"  # the executors' scratch dirs (TMPDIR): where a running seed's trace grows
    scratch.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "kafkasim.cli", "sweep", "slow.toml", "--seeds", "1-2", "--spark",
                             "--out", "out"], cwd=tmp_path, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(scratch)})
    try:
        deadline = time.monotonic() + 240
        while not any(p.stat().st_size > 10_000 for p in scratch.glob("*/run/trace.jsonl")):
            assert proc.poll() is None and time.monotonic() < deadline, "the sweep never started a run"
            time.sleep(0.2)
        started = descendants(proc.pid)
        assert started, "the Spark JVM and its Python workers"
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert took < 2.0
    assert "Traceback" not in err and "interrupted" in err
    assert not list(tmp_path.glob("out/runs/**/run.json"))
    assert "<testcase" not in (tmp_path / "out" / "junit.xml").read_text()
    deadline = time.monotonic() + 3
    while [p for p in started if alive(p)] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in started if alive(p)], "Spark's JVM or Python workers outlived the sweep"
