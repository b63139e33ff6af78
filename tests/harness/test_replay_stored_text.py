"""run.json keeps the scenario's text and sha256; `replay` runs that text, saying so when the file
changed since (an edited file is not nondeterminism), and run.json lists the nodes each fault hit."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from kafkasim.harness.inject import fired_summary
from kafkasim.harness.replay import replay
from kafkasim.harness.runner import run_scenario
from kafkasim.harness.scenario import load_scenario

pytestmark = pytest.mark.sim

TEXT = """
[scenario]
name = "tiny"
duration_ms = 30000
[[topics]]
name = "events"
[workload.producer]
messages = 200
rate_per_s = 400
[[faults]]
at_ms = 3000
kind = "pause"
duration_ms = 300
targets = ["leader:events-0"]
[[faults]]
at_ms = 100
kind = "isolate"
duration_ms = 100
targets = ["controller"]
"""


def test_replay_runs_the_stored_text_and_says_the_file_changed(tmp_path: Path) -> None:
    path = tmp_path / "tiny.toml"
    path.write_text(TEXT)
    res = run_scenario(load_scenario(str(path)), 2, str(tmp_path / "run"))
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["scenario_text"] == TEXT
    assert run["scenario_sha256"] == hashlib.sha256(TEXT.encode()).hexdigest()
    assert res.passed

    edited = TEXT.replace("messages = 200", "messages = 300")
    path.write_text(edited)
    notes: list[str] = []
    again = replay(str(tmp_path / "run" / "run.json"), on_note=notes.append)
    assert again.identical, again.first_divergence
    old, new = run["scenario_sha256"][:12], hashlib.sha256(edited.encode()).hexdigest()[:12]
    assert notes == [f"scenario file changed since the run (hash {old} → {new}); replaying the stored text"]

    path.unlink()
    notes.clear()
    assert replay(str(tmp_path / "run" / "run.json"), on_note=notes.append).identical
    assert "is gone" in notes[0]


def test_run_json_records_the_nodes_each_fault_hit(tmp_path: Path) -> None:
    path = tmp_path / "tiny.toml"
    path.write_text(TEXT)
    run = run_scenario(load_scenario(str(path)), 1, str(tmp_path / "run")).run
    fired = run["faults_fired"]
    assert [(f["kind"], f["target"], f["nodes"], f["source"]) for f in fired] == [
        ("isolate", "controller", ["broker-0"], "faults[1]"),
        ("pause", "leader:events-0", ["broker-0"], "faults[0]")]
    assert fired_summary(fired, len(run["faults"])) == \
        "faults: 2/2 fired: isolate x1 (broker-0); pause x1 (broker-0)"


def test_the_summary_names_a_fault_that_hit_nothing() -> None:
    fired = [{"t_ms": 1500.0, "kind": "crash", "target": "controller", "nodes": [], "source": "faults[0]"}]
    assert fired_summary(fired, 3) == \
        "faults: 1/3 fired: crash x1 (no node); HIT NO NODE: crash controller at 1.5s"
