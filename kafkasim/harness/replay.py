"""`kafkasim replay RUN_JSON`: re-run a recorded run from its scenario and seed, verify the trace
hash, and on a mismatch show the first event where the two traces diverge. The replay writes
next to the recorded run, in <run dir>/replay/."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from kafkasim.harness.runner import run_scenario
from kafkasim.harness.scenario import load_scenario


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


def replay(run_json: str) -> ReplayResult:
    with open(run_json) as f:
        run = json.load(f)
    scenario = load_scenario(run["scenario_path"])
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
