"""Fault schedules: a broker killed and restarted loses nothing acknowledged; a power loss with
Kafka's default flush policy shows acknowledged loss and the run reports it as expected; bad
fault tables are named precisely."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkasim.harness.runner import run_scenario
from kafkasim.harness.scenario import ScenarioError, load_scenario, parse_scenario

pytestmark = pytest.mark.sim


def _checks(run: dict) -> dict[str, dict]:
    return {c["name"]: c for c in run["checks"]}


def test_kill_and_restart_loses_nothing(tmp_path: Path) -> None:
    r = run_scenario(load_scenario("scenarios/broker-kill-restart.toml"), 2, str(tmp_path))
    checks = _checks(r.run)
    assert r.passed, r.run["anomalies"][:3]
    for name in ("lost-write", "unseen", "inconsistent-offsets", "reorder", "liveness", "task-error"):
        assert checks[name]["ok"], name
    assert r.run["stats"]["acked"] == 1500
    assert [f["kind"] for f in r.run["faults"]] == ["crash", "restart"]
    trace = (tmp_path / "trace.jsonl").read_text()
    assert '"ev":"node_crash"' in trace and '"ev":"node_restart"' in trace and trace.count('"broker_started"') == 2


def test_power_loss_with_default_flush_shows_expected_acked_loss(tmp_path: Path) -> None:
    seen_loss = False
    for seed in (1, 3):
        r = run_scenario(load_scenario("scenarios/power-loss-default-flush.toml"), seed, str(tmp_path / str(seed)))
        assert r.passed, "every anomaly here is declared expected"
        checks = _checks(r.run)
        bad = checks["inconsistent-offsets"]["violations"] + checks["lost-write"]["violations"]
        seen_loss |= bad > 0 and checks["inconsistent-offsets"]["expected"]
        assert '"disk_crash_file"' in (tmp_path / str(seed) / "trace.jsonl").read_text()
    assert seen_loss, "a power loss without fsync should lose acknowledged writes in these seeds"


@pytest.mark.parametrize("fault, message", [
    ({"at_ms": 1, "kind": "explode"}, "faults[0].kind"),
    ({"at_ms": -5, "kind": "heal"}, "faults[0].at_ms"),
    ({"at_ms": 1, "kind": "crash", "targets": ["broker-0"], "mode": "gentle"}, "faults[0].mode"),
    ({"at_ms": 1, "kind": "partition", "sides": [["a"]]}, "faults[0].sides"),
    ({"at_ms": 1, "kind": "restart", "targets": []}, "faults[0].targets"),
])
def test_bad_fault_tables_are_named(fault: dict, message: str) -> None:
    raw = {"scenario": {"name": "x"}, "topics": [{"name": "t"}], "faults": [fault]}
    with pytest.raises(ScenarioError) as err:
        parse_scenario("s.toml", raw)
    assert "s.toml" in str(err.value) and message in str(err.value)
