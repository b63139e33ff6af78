"""BUGGIFY in whole runs: every `rt.buggify("...")` point in the code fires on a pinned seed of a
scenario (found by `kafkasim sweep scenarios/ --seeds 1-5 --buggify`), a BUGGIFY run is the same
in another process whatever PYTHONHASHSEED, and replays identically from its run.json."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kafkasim.harness.replay import replay
from kafkasim.harness.runner import run_scenario
from kafkasim.harness.scenario import load_scenario, with_buggify

pytestmark = pytest.mark.sim

ROOT = Path(__file__).resolve().parents[2]
SMOKE = "scenarios/smoke.toml"

# point -> (scenario, seed) on which it fires with --buggify (the sweep's run.json `buggify`).
PINS: dict[str, tuple[str, int]] = {
    "controller.send.slow": ("power-loss-default-flush", 4),
    "log.retention.late": ("power-loss-default-flush", 4),
    "producer.linger.skip": ("power-loss-default-flush", 4),
    "timer.sleep.late": ("power-loss-default-flush", 4),
    "consumer.metadata.refresh": ("broker-kill-restart", 10),
    "controller.event.slow": ("broker-kill-restart", 10),
    "fetch.response.tiny": ("broker-kill-restart", 10),
    "log.roll.early": ("broker-kill-restart", 10),
    "simfs.fsync.slow": ("broker-kill-restart", 10),
    "simfs.write.split": ("broker-kill-restart", 10),
    "consumer.fetch.tiny": ("broker-kill-restart", 3),
    "controller.failover.slow": ("broker-kill-restart", 3),
    "producer.batch.small": ("broker-kill-restart", 3),
    "log.flush.early": ("idempotent-producer-failover", 3),
    "producer.timeout.short": ("idempotent-producer-failover", 3),
    "replica_fetcher.tiny_fetch": ("idempotent-producer-failover", 3),
    "replica_fetcher.slow": ("bit-rot", 2),
    "controller.elect.slow": ("broker-kill-restart", 8),
    "leader_and_isr.slow": ("broker-kill-restart", 1),
    "produce.not_leader.spurious": ("broker-kill-restart", 1),
    "alter_partition.slow": ("unclean-election", 5),
    "consumer.heartbeat.early": ("coordinator-failover-commits", 5),
    "group.load.short_read": ("coordinator-failover-commits", 5),
    "log.cleaner.late": ("txn-timeout-abort", 1),
    "group.load.slow": ("rebalance-storm", 4),
    "txn.load.slow": ("txn-coordinator-failover", 3),
    "txn.markers.slow": ("txn-zombie-fenced", 2),
}


def points_in_code() -> set[str]:
    found: set[str] = set()
    for path in (ROOT / "kafkasim").rglob("*.py"):
        found |= set(re.findall(r"buggify\(\"([a-z_.]+)\"\)", path.read_text()))
    return found


def test_every_point_in_the_code_is_pinned() -> None:
    code = points_in_code()
    assert len(code) >= 20, sorted(code)
    assert set(PINS) == code


@pytest.mark.parametrize("scenario, seed", sorted(set(PINS.values())))
def test_each_point_fires_on_its_pinned_seed(scenario: str, seed: int, tmp_path: Path) -> None:
    result = run_scenario(with_buggify(load_scenario(f"scenarios/{scenario}.toml")), seed, str(tmp_path))
    fired = {name for name, p in result.run["buggify"]["points"].items() if p["fired"]}
    pinned = {point for point, at in PINS.items() if at == (scenario, seed)}
    assert pinned <= fired, f"not fired: {sorted(pinned - fired)}"
    assert result.passed, [c for c in result.run["checks"] if not c["ok"]]
    trace = (tmp_path / "trace.jsonl").read_text()
    assert trace.count('"ev":"buggify"') == sum(p["fired"] for p in result.run["buggify"]["points"].values())


def _run(seed: int, out: Path, hashseed: str, *flags: str) -> dict:
    env = dict(os.environ, PYTHONHASHSEED=hashseed, PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, "-m", "kafkasim.cli", "run", SMOKE, "--seed", str(seed), "--out", str(out),
                    *flags], capture_output=True, text=True, env=env, timeout=600, check=False)
    return dict(json.loads((out / "run.json").read_text()))


def test_a_buggify_run_is_the_same_in_another_process(tmp_path: Path) -> None:
    a = _run(1, tmp_path / "a", "0", "--buggify")
    b = _run(1, tmp_path / "b", "4242", "--buggify")
    assert a["trace_hash"] == b["trace_hash"] and a["buggify"] == b["buggify"]
    assert any(p["fired"] for p in a["buggify"]["points"].values())
    off = _run(1, tmp_path / "off", "0")
    assert "buggify" not in off and off["trace_hash"] != a["trace_hash"]
    assert a["repro"].endswith("--buggify")


def test_a_buggify_run_replays_identically(tmp_path: Path) -> None:
    result = run_scenario(with_buggify(load_scenario(SMOKE)), 2, str(tmp_path))
    assert result.run["buggify"]["enabled"]
    res = replay(str(tmp_path / "run.json"))
    assert res.identical, res.first_divergence
