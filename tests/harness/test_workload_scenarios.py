"""The workload's two scenarios, one seed each, asserting what each one claims:
rebalance-storm really churns the group (several generations, member crashes, commits read
back) and still consumes everything acknowledged; idempotent-producer-failover retries
through a leader's power loss without one duplicate, while the same run without idempotence
does duplicate."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kafkasim.harness.runner import run_scenario
from kafkasim.harness.scenario import load_scenario

pytestmark = pytest.mark.sim


def _trace(out: str) -> list[dict[str, Any]]:
    with open(os.path.join(out, "trace.jsonl")) as f:
        return [json.loads(line) for line in f]


def _violations(run: dict[str, Any]) -> dict[str, int]:
    return {c["name"]: c["violations"] for c in run["checks"] if c["violations"]}


def test_rebalance_storm_churns_the_group_and_loses_nothing(tmp_path: Path) -> None:
    res = run_scenario(load_scenario("scenarios/rebalance-storm.toml"), 1, str(tmp_path / "a"))
    assert res.passed and _violations(res.run) == {}, res.run["anomalies"][:3]
    stats = res.run["stats"]
    assert stats["acked"] == stats["produced"] == 2400 and stats["consumed"] >= 2400
    names = {c["name"] for c in res.run["checks"]}
    assert {"two-owners", "committed-offset-regression", "unseen", "lost-write"} <= names
    events = _trace(res.out_dir)
    generations = {e["generation"] for e in events if e["ev"] == "group_assigned"}
    crashes = [e for e in events if e["ev"] == "node_crash" and e["node"].startswith("consumer-")]
    churn = {e["action"] for e in events if e["ev"] == "churn"}
    assert len(generations) >= 3 and len(crashes) >= 2 and churn == {"join", "leave", "crash"}
    # The same seed in another process, under another PYTHONHASHSEED, is the same run.
    env = dict(os.environ, PYTHONHASHSEED="4242")
    subprocess.run([sys.executable, "-m", "kafkasim.cli", "run", "scenarios/rebalance-storm.toml", "--seed", "1",
                    "--out", str(tmp_path / "b")], capture_output=True, text=True, env=env, timeout=300, check=False)
    again = json.loads((tmp_path / "b" / "run.json").read_text())
    assert again["trace_hash"] == res.run["trace_hash"]


def test_idempotent_producer_has_no_duplicates_where_a_plain_one_does(tmp_path: Path) -> None:
    scenario = load_scenario("scenarios/idempotent-producer-failover.toml")
    assert "duplicate" not in scenario.expected and scenario.producer.idempotence
    res = run_scenario(scenario, 1, str(tmp_path / "idempotent"))
    assert res.passed and _violations(res.run) == {}, res.run["anomalies"][:3]
    assert res.run["stats"]["failovers"], "the leader must really have failed over"
    done = [e for e in _trace(res.out_dir) if e["ev"] == "producer_done"]
    assert done and done[0]["retries"] >= 1, "some batch must have been retried through the failover"
    scenario.producer.idempotence = False   # the same run, seed and faults without idempotence
    plain = run_scenario(scenario, 1, str(tmp_path / "plain"))
    assert _violations(plain.run).get("duplicate", 0) >= 1
