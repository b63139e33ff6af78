"""timeline.json: the client history a run's report page plots over simulated time.

The trace already says when each send completed and each poll returned, but not when a send was
*invoked*, so per-request produce latency cannot be derived from it; the history can. Written
beside run.json after the run (it is not part of the trace, so trace hashes do not change):

  {"version": 1,
   "sends": {"invoke_ms": [float, ...],          one entry per send, in invocation order
             "latency_ms": [float | null, ...],  complete - invoke; null when never answered
             "error": [int | null, ...]},        Kafka error code of the answer; null: no answer
   "unanswered": int,                            sends never answered
   "polls_ms": [float, ...]}                     when each consumed record was returned

Times are simulated milliseconds rounded to the microsecond.
"""

from __future__ import annotations

import json
import os
from typing import Any

from kafkasim.harness.workload import History

TIMELINE_FILE = "timeline.json"
VERSION = 1


def _ms(value: float) -> float:
    return round(value, 3)


def timeline(history: History) -> dict[str, Any]:
    answered = [s for s in history.sends if s.ok is not None]
    return {
        "version": VERSION,
        "sends": {
            "invoke_ms": [_ms(s.invoke_ms) for s in history.sends],
            "latency_ms": [_ms(s.complete_ms - s.invoke_ms) if s.ok is not None else None for s in history.sends],
            "error": [s.error if s.ok is not None else None for s in history.sends],
        },
        "unanswered": len(history.sends) - len(answered),
        "polls_ms": [_ms(p.at_ms) for p in history.polls],
    }


def write_timeline(out_dir: str, history: History) -> None:
    with open(os.path.join(out_dir, TIMELINE_FILE), "w") as f:
        json.dump(timeline(history), f, separators=(",", ":"))
