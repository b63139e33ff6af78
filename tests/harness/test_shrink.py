"""`kafkasim shrink`: a failing run is minimised to a smaller scenario file that still fails the
same way with the same seed, and that file round-trips through the scenario loader."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkasim.harness.runner import run_scenario
from kafkasim.harness.scenario import load_scenario
from kafkasim.harness.shrink import dump_scenario, shrink, size

pytestmark = pytest.mark.sim


def test_dump_scenario_round_trips(tmp_path: Path) -> None:
    for scenario_file in sorted(Path("scenarios").glob("*.toml")):  # every key the suite uses
        name = scenario_file.stem
        s = load_scenario(f"scenarios/{name}.toml")
        path = tmp_path / f"{name}.toml"
        path.write_text(dump_scenario(s))
        again = load_scenario(str(path))
        again.path = s.path
        assert again == s


def test_shrink_keeps_the_failure_and_reduces_the_scenario(tmp_path: Path) -> None:
    # Kafka's default flush policy loses acknowledged writes on power loss; declaring no anomaly
    # expected turns that into a genuine failing run to shrink.
    src = load_scenario("scenarios/power-loss-default-flush.toml")
    src.expected = []
    src.producer.messages = 1200
    scen = tmp_path / "failing.toml"
    scen.write_text(dump_scenario(src))
    failing = load_scenario(str(scen))
    run = run_scenario(failing, 1, str(tmp_path / "run"))
    assert not run.passed
    res = shrink(str(tmp_path / "run" / "run.json"), max_runs=25)
    assert size(res.shrunk) < size(res.original) and res.runs <= 25
    shrunk = load_scenario(res.path)
    again = run_scenario(shrunk, 1, str(tmp_path / "again"))
    violated = {c["name"] for c in again.run["checks"] if not c["ok"] and not c["expected"]}
    assert violated & set(res.violations), "the shrunk scenario must still fail the same way"


def test_fewer_nodes_prune_the_faults_that_named_them() -> None:
    from kafkasim.harness.shrink import _prune_faults

    s = load_scenario("scenarios/diverged-leader-rejoins.toml")
    assert s.producer.count == 2
    s.producer.count, s.brokers = 1, 2
    s.faults[0].sides = [["leader:events-0", "producer-1"], ["broker-0", "broker-2", "producer-0", "zookeeper"]]
    _prune_faults(s)
    assert s.faults[0].sides == [["leader:events-0"], ["broker-0", "producer-0", "zookeeper"]]
    s.faults[0].sides = [["producer-1"], ["broker-0"]]
    _prune_faults(s)
    assert s.faults == []  # a side left empty: the cut would cut nothing
