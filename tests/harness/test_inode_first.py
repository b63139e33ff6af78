"""Issue 3's acceptance run: a simulated power loss where every unsynced segment resolves
inode-first (size durable, data zeros or garbage); the broker's recovery cuts each segment at
exactly the first invalid byte, and the trace shows both sides."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafkasim.harness.runner import run_scenario
from kafkasim.harness.scenario import load_scenario

pytestmark = pytest.mark.sim


def test_inode_first_crash_is_recovered_and_traced(tmp_path: Path) -> None:
    r = run_scenario(load_scenario("scenarios/inode-first-crash.toml"), 1, str(tmp_path))
    assert r.passed, [a for a in r.run["anomalies"] if not a["expected"]][:3]
    events = [json.loads(line) for line in (tmp_path / "trace.jsonl").read_text().splitlines()]
    crashed = {e["path"].split("/")[1]: e for e in events if e["ev"] == "disk_crash_file"
               and e["path"].endswith(".log")}
    assert {e["mode"] for e in crashed.values()} == {"inode_first"}
    assert {e["fill"] for e in crashed.values()} <= {"zeros", "garbage", "stale"}
    recovered = {f"{e['topic']}-{e['partition']}": e for e in events if e["ev"] == "log_recovery"}
    assert set(recovered) == set(crashed)
    for part, rec in recovered.items():
        crash = crashed[part]
        # The filled tail is exactly what recovery drops; everything before it stays.
        assert rec["valid_bytes"] + rec["dropped_bytes"] == crash["size"]
        assert rec["dropped_bytes"] >= crash["filled_bytes"] > 0
    assert [f["disk_modes"] for f in r.run["faults"] if f["kind"] == "crash"] == ["inode_first"]
