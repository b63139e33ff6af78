"""The command that reproduces a recorded run, as sweep's FAIL lines, its JUnit XML and the
report print it: everything the run was a function of besides the code — the scenario file, the
seed, and the seeded bugs when any were on (without them the pasted command would pass).
Dependency-free so the report can import it without the broker."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

# Test-only: the seeded bugs (runtime/seeded_bugs.py) the CLI builds `run` and `sweep` worlds
# with; replay and shrink take them from run.json instead.
SEEDED_BUGS_ENV = "KAFKASIM_SEEDED_BUGS"


def repro_command(run: Mapping[str, Any]) -> str:
    """`[KAFKASIM_SEEDED_BUGS=a,b ]kafkasim run <scenario_path> --seed <N>` for a run.json (or any
    mapping with `scenario_path`, `seed` and optionally `seeded_bugs`), shell-quoted."""
    bugs = sorted(run.get("seeded_bugs") or [])
    env = f"{SEEDED_BUGS_ENV}={shlex.quote(','.join(bugs))} " if bugs else ""
    buggify = " --buggify" if (run.get("buggify") or {}).get("enabled") else ""
    return f"{env}kafkasim run {shlex.quote(str(run['scenario_path']))} --seed {int(run['seed'])}{buggify}"


def replay_command(run_json_path: str) -> str:
    """Replays the run from run.json's stored scenario text, whatever became of the file."""
    return f"kafkasim replay {shlex.quote(run_json_path)}"
