"""`kafkasim replay RUN_JSON`: re-run a recorded run from its scenario and seed, verify the trace
hash, and on a mismatch show the first event where the two traces diverge. The replay writes
next to the recorded run, in <run dir>/replay/.

The scenario replayed is the text run.json stored (`scenario_text`), not whatever the file says
now: a file edited since the run would otherwise "diverge" and look like nondeterminism. When
the file changed (or is gone) the replay says so. Runs recorded before run.json stored the text
replay from the file."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafkasim.harness.runner import run_scenario
from kafkasim.harness.scenario import Scenario, load_scenario, scenario_from_text, with_buggify

Note = Callable[[str], None]


@dataclass
class ReplayResult:
    original_hash: str
    replay_hash: str
    first_divergence: tuple[int, str, str] | None  # (line number, original, replay)

    @property
    def identical(self) -> bool:
        return self.original_hash == self.replay_hash


def first_divergence(a_path: str, b_path: str) -> tuple[int, str, str] | None:
    with open(a_path) as a, open(b_path) as b:
        n = 0
        while True:
            n += 1
            la, lb = a.readline(), b.readline()
            if la != lb:
                return n, la.rstrip("\n") or "<end of trace>", lb.rstrip("\n") or "<end of trace>"
            if not la:
                return None


def file_sha256(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def scenario_of_run(run: dict[str, Any], on_note: Note = lambda msg: None) -> Scenario:
    """The scenario the run ran: its stored text when run.json has it (noting when the file on
    disk no longer matches), else the file."""
    scenario = _scenario_of_run(run, on_note)
    # A run with `--buggify` replays (and shrinks) with it: BUGGIFY is part of what the run was.
    return with_buggify(scenario) if (run.get("buggify") or {}).get("enabled") else scenario


def _scenario_of_run(run: dict[str, Any], on_note: Note) -> Scenario:
    path = str(run["scenario_path"])
    text = run.get("scenario_text")
    if not text:
        return load_scenario(path)
    recorded = run.get("scenario_sha256") or hashlib.sha256(text.encode()).hexdigest()
    now = file_sha256(path)
    if now is None:
        on_note(f"scenario file {path} is gone since the run; replaying the stored text")
    elif now != recorded:
        on_note(f"scenario file changed since the run (hash {recorded[:12]} → {now[:12]}); "
                f"replaying the stored text")
    return scenario_from_text(path, text)


def replay(run_json: str, run: dict[str, Any] | None = None, on_note: Note = lambda msg: None) -> ReplayResult:
    if run is None:
        with open(run_json) as f:
            run = json.load(f)
    scenario = scenario_of_run(run, on_note)
    run_dir = os.path.dirname(os.path.abspath(run_json))
    replay_dir = os.path.join(run_dir, "replay")  # kept: the replayed trace is evidence
    # A run recorded with seeded bugs replays with exactly those bugs (and no others): they are
    # part of what the run was a function of, like the seed.
    again = run_scenario(scenario, int(run["seed"]), replay_dir, run.get("seeded_bugs", []))
    original_trace = os.path.join(run_dir, "trace.jsonl")
    diverge = None
    if again.run["trace_hash"] != run["trace_hash"] and os.path.exists(original_trace):
        diverge = first_divergence(original_trace, os.path.join(replay_dir, "trace.jsonl"))
    return ReplayResult(run["trace_hash"], again.run["trace_hash"], diverge)
