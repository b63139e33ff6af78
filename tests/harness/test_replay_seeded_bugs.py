"""A failing run made with a seeded bug replays bit for bit — `replay` switches on exactly the
bugs run.json records, without the environment variable — and `shrink` keeps them on while it
minimises, so the smaller scenario still fails the same way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafkasim.harness.replay import replay
from kafkasim.harness.runner import run_scenario
from kafkasim.harness.scenario import load_scenario, parse_scenario
from kafkasim.harness.shrink import dump_scenario, shrink, size

pytestmark = pytest.mark.sim


def _probe() -> dict[str, Any]:
    """Three brokers, RF 3, no faults: hw-before-isr shows at once (hw-above-isr-replica)."""
    return {
        "scenario": {"name": "replay-probe", "duration_ms": 60000},
        "cluster": {"brokers": 3, "config": {"zookeeper.session.timeout.ms": 6000, "min.insync.replicas": 2}},
        "topics": [{"name": "events", "partitions": 2, "replication_factor": 3}],
        "workload": {"producer": {"messages": 300, "rate_per_s": 300}, "consumer": {"fetch_max_wait_ms": 100}},
        "heal": {"liveness_ms": 40000},
    }


def test_a_seeded_bug_run_replays_identically_and_shrinks_with_its_bug(tmp_path: Path) -> None:
    path = tmp_path / "probe.toml"  # run.json points at a scenario file: write one
    path.write_text(dump_scenario(parse_scenario(str(path), _probe())))
    scenario = load_scenario(str(path))
    failing = run_scenario(scenario, 3, str(tmp_path / "run"), ["hw-before-isr"])
    assert not failing.passed and failing.run["seeded_bugs"] == ["hw-before-isr"]

    again = replay(str(tmp_path / "run" / "run.json"))  # the bugs come from run.json alone
    assert again.identical, again.first_divergence

    clean = run_scenario(scenario, 3, str(tmp_path / "clean"))
    assert clean.passed and clean.run["trace_hash"] != failing.run["trace_hash"]

    res = shrink(str(tmp_path / "run" / "run.json"), max_runs=6)
    assert size(res.shrunk) < size(res.original)
    assert "hw-above-isr-replica" in res.violations
    assert "KAFKASIM_SEEDED_BUGS=hw-before-isr" in Path(res.path).read_text()
    shrunk_run = run_scenario(load_scenario(res.path), 3, str(tmp_path / "shrunk"), ["hw-before-isr"])
    assert not shrunk_run.passed
