"""Issue 5's rejoin claim, read off the trace of scenarios/cluster-power-loss-rejoin.toml: the
leader loses power with its disk keeping inodes first (unsynced tails read back as zeros or
garbage); after the restart its log recovery cuts every filled tail, and the broker rejoins the
ISR of every partition it hosts, with no acknowledged write lost and no two replicas differing
below the high watermark."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kafkasim.harness.runner import run_scenario
from kafkasim.harness.scenario import load_scenario, with_buggify
from tests.harness.epoch_reuse_support import old_epochs_led_again

pytestmark = pytest.mark.sim

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "cluster-power-loss-rejoin.toml"
BROKER_IDS = {"broker-0": 0, "broker-1": 1, "broker-2": 2}


def _events(trace: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in trace.read_text().splitlines()]


@pytest.mark.parametrize("seed", [4, 7])
def test_inode_first_power_loss_truncates_and_rejoins(tmp_path: Path, seed: int) -> None:
    result = run_scenario(load_scenario(str(SCENARIO)), seed, str(tmp_path))
    checks = {c["name"]: c for c in result.run["checks"]}
    assert result.passed, result.run["anomalies"][:5]
    for name in ("lost-write", "unseen", "replica-divergence", "isr-behind-high-watermark"):
        assert checks[name]["ok"], name
    events = _events(tmp_path / "trace.jsonl")
    crash = next(e for e in events if e["ev"] == "node_crash" and e["mode"] == "power")
    victim = crash["node"]
    filled = {e["path"].split("/")[1] for e in events if e["ev"] == "disk_crash_file" and e["node"] == victim
              and e["mode"] == "inode_first" and e.get("filled_bytes", 0) > 0 and e["path"].startswith("kafka-logs/events-")}
    assert filled, "the power loss left no inode-first filled tail to recover"
    restart = next(e for e in events if e["ev"] == "node_restart" and e["node"] == victim)
    after = [e for e in events if e["t"] >= restart["t"]]
    cut = {f"{e['topic']}-{e['partition']}" for e in after if e["ev"] == "log_recovery" and e["node"] == victim
           and e.get("dropped_bytes", 0) > 0}
    assert filled <= cut, f"filled tails {sorted(filled)} but recovery cut only {sorted(cut)}"
    rejoined = {f"{e['topic']}-{e['partition']}" for e in after if e["ev"] == "isr_changed"
                and e["topic"] == "events" and BROKER_IDS[victim] in e["isr"]}
    assert rejoined == {"events-0", "events-1", "events-2"}, rejoined


@pytest.mark.parametrize("seed", [61, 123])
def test_the_restarted_leader_never_leads_an_epoch_it_led_before_its_power_loss(tmp_path: Path, seed: int) -> None:
    """The restart waits out the victim's ZooKeeper session, so the controller elects new leaders
    (new epochs) before it returns. With the restart at 12 s, seeds 61 and 123 with BUGGIFY let
    it register again right after its session expired, a new controller handed it back its old
    epoch over the log the power loss cut, and the followers truncated acknowledged records."""
    result = run_scenario(with_buggify(load_scenario(str(SCENARIO))), seed, str(tmp_path))
    assert result.passed, result.run["anomalies"][:5]
    events = _events(tmp_path / "trace.jsonl")
    crash = next(e for e in events if e["ev"] == "node_crash" and e["mode"] == "power")
    before, again = old_epochs_led_again(events, crash)
    assert before and not again, f"{crash['node']} led an old epoch again: {again[:3]}"
