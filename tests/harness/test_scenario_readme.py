"""README's "Write your first scenario" is a scenario that loads and passes as written, and its
misspelt target is refused as README says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kafkasim.harness.runner import run_scenario
from kafkasim.harness.scenario import ScenarioError, load_scenario

pytestmark = pytest.mark.sim

README = Path(__file__).resolve().parents[2] / "README.md"


def _first_scenario() -> str:
    m = re.search(r"## Write your first scenario.*?```toml\n(.*?)```", README.read_text(), re.S)
    assert m, "README has no first-scenario TOML block"
    return m.group(1)


def test_the_readme_scenario_passes(tmp_path: Path) -> None:
    path = tmp_path / "my-first.toml"
    path.write_text(_first_scenario())
    run = run_scenario(load_scenario(str(path)), 1, str(tmp_path / "out")).run
    assert run["verdict"] == "pass", [c for c in run["checks"] if not c["ok"] and not c["expected"]]
    assert run["faults_fired"], "the power loss never fired"


def test_the_readme_typo_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "typo.toml"
    path.write_text(_first_scenario().replace("leader:orders-0", "leader:ordrs-0"))
    with pytest.raises(ScenarioError, match="did you mean 'orders'"):
        load_scenario(str(path))
