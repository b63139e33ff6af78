"""The repro command of a run carries its seeded bugs: without them the command runs another run."""

from __future__ import annotations

import pytest

from kafkasim.report.html import reproduce_command
from kafkasim.harness.repro import repro_command

pytestmark = pytest.mark.unit


def test_clean_run() -> None:
    run = {"scenario_path": "scenarios/smoke.toml", "seed": 3, "seeded_bugs": []}
    assert repro_command(run) == "kafkasim run scenarios/smoke.toml --seed 3"
    assert repro_command({"scenario_path": "scenarios/smoke.toml", "seed": 3}) == repro_command(run)  # old run.json


def test_seeded_bugs_prefix_the_command_sorted_and_quoted() -> None:
    run = {"scenario_path": "my dir/x.toml", "seed": 7, "seeded_bugs": ["two-owners", "hw-before-isr"]}
    assert repro_command(run) == "KAFKASIM_SEEDED_BUGS=hw-before-isr,two-owners kafkasim run 'my dir/x.toml' --seed 7"


def test_summary_rows_hold_bugs_comma_joined() -> None:
    row = {"scenario_path": "s.toml", "seed": 1, "seeded_bugs": "hw-before-isr"}
    assert reproduce_command(row) == "KAFKASIM_SEEDED_BUGS=hw-before-isr kafkasim run s.toml --seed 1"
    assert reproduce_command({"scenario_path": "s.toml", "seed": 1, "seeded_bugs": ""}) == "kafkasim run s.toml --seed 1"
