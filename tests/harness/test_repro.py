"""The reproduction command sweep prints (FAIL lines, JUnit) carries what the run was a function
of: pasted into a shell without KAFKASIM_SEEDED_BUGS set, it fails the same way, with the same
trace hash."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kafkasim.harness.repro import repro_command

pytestmark = pytest.mark.sim

REPO = Path(__file__).resolve().parents[2]
PROBE = """
[scenario]
name = "repro-probe"
duration_ms = 60000
[cluster]
brokers = 3
[cluster.config]
"zookeeper.session.timeout.ms" = 6000
"min.insync.replicas" = 2
[[topics]]
name = "events"
partitions = 2
replication_factor = 3
[workload.producer]
messages = 300
rate_per_s = 300
[workload.consumer]
fetch_max_wait_ms = 100
[heal]
liveness_ms = 40000
"""


def test_repro_command_names_bugs_scenario_and_seed() -> None:
    run = {"scenario_path": "my dir/s.toml", "seed": 7, "seeded_bugs": ["b", "a"]}
    assert repro_command(run) == "KAFKASIM_SEEDED_BUGS=a,b kafkasim run 'my dir/s.toml' --seed 7"
    assert repro_command({**run, "seeded_bugs": []}) == "kafkasim run 'my dir/s.toml' --seed 7"


def test_the_pasted_sweep_command_fails_the_same_way(tmp_path: Path) -> None:
    (tmp_path / "probe.toml").write_text(PROBE)
    shim = tmp_path / "bin" / "kafkasim"  # `kafkasim` as an installed console script would be
    shim.parent.mkdir()
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} -m kafkasim.cli \"$@\"\n")
    shim.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "KAFKASIM_SEEDED_BUGS"}
    env.update(PYTHONPATH=str(REPO), PATH=f"{shim.parent}:{env['PATH']}")
    swept = subprocess.run(["kafkasim", "sweep", "probe.toml", "--seeds", "3", "--jobs", "1", "--out", "out"],
                           cwd=tmp_path, env={**env, "KAFKASIM_SEEDED_BUGS": "hw-before-isr"},
                           capture_output=True, text=True, timeout=600)
    assert swept.returncode == 1, swept.stderr
    fail = re.search(r"FAIL repro-probe seed 3: (\S+)  \((.*)\)$", swept.stdout, re.M)
    assert fail is not None, swept.stdout
    command = fail.group(2)
    assert command.startswith("KAFKASIM_SEEDED_BUGS=hw-before-isr kafkasim run probe.toml --seed 3")
    assert command in (tmp_path / "out" / "junit.xml").read_text()

    pasted = subprocess.run(command + " --out again", shell=True, cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=600)
    assert pasted.returncode == 1, pasted.stdout + pasted.stderr
    assert "FAIL" in pasted.stdout and "VIOLATION: hw-above-isr-replica" in pasted.stdout
    hashes = [re.search(r"trace hash (\w+)", out).group(1)  # type: ignore[union-attr]
              for out in (pasted.stdout, (tmp_path / "out/runs/repro-probe/seed-3/run.json").read_text()
                          .replace('"trace_hash": "', "trace hash "))]
    assert hashes[0] == hashes[1]
