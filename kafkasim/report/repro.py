"""The shell command that reproduces a run, from its run.json.

Same contract as kafkasim/harness/repro.py's ``repro_command(run_json)`` (being written beside
the runner); the report keeps this copy until that lands, then imports it instead (the report
may import the harness: they share a row in README's layers table).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

SEEDED_BUGS_ENV = "KAFKASIM_SEEDED_BUGS"  # as kafkasim/harness/runner.py reads it


def repro_command(run_json: Mapping[str, Any]) -> str:
    """`kafkasim run SCENARIO --seed N`, prefixed with KAFKASIM_SEEDED_BUGS=... when the run had
    seeded bugs on (without them the replay would be a different run); quoted for POSIX shells."""
    cmd = f"kafkasim run {shlex.quote(str(run_json['scenario_path']))} --seed {int(run_json['seed'])}"
    bugs = run_json.get("seeded_bugs") or []
    if bugs:
        cmd = f"{SEEDED_BUGS_ENV}={shlex.quote(','.join(sorted(str(b) for b in bugs)))} {cmd}"
    return cmd
