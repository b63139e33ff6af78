"""BUGGIFY (FoundationDB's name): rare but legal code paths that the simulated world switches on
from its own seeded stream, so a seed explores what a real cluster does only on a bad day —
short fetches, early segment rolls, slow fsyncs and coordinator loads, spurious retriable errors.

Broker, storage and client code asks `rt.buggify(<point name>)` in one short `if`; the real
world always answers no, the simulated world answers from a `Buggify` built for the run:

- each point, the first time it is asked in a run, is enabled for the whole run with probability
  `probability` (FoundationDB's P_BUGGIFIED_SECTION_ACTIVATED, 0.25);
- an enabled point then fires on each ask with its own probability (fixed by `fire_probability`,
  else drawn once per run from [0.05, 0.25]).

Every point has its own stream, split off the run's seed by the point's name ("buggify/<name>"),
so the draws touch no other stream: with BUGGIFY off nothing is drawn and a run's trace is what
it was before BUGGIFY existed; with it on, adding a point never shifts another point's draws.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kafkasim.runtime.rng import SeededRng

FIRE_RANGE = (0.05, 0.25)  # an enabled point's firing probability, when the run does not fix it


@dataclass(frozen=True)
class BuggifySpec:
    """A scenario's `[buggify]` table (or `--buggify`)."""

    enabled: bool = False
    probability: float = 0.25  # the chance a point is enabled for the run
    fire_probability: float = 0.0  # > 0: every enabled point fires with this; 0: drawn per point

    def describe(self) -> dict[str, Any]:
        return {"enabled": self.enabled, "probability": self.probability, "fire_probability": self.fire_probability}


class _Point:
    __slots__ = ("rng", "enabled", "fire_p", "asked", "fired")

    def __init__(self, rng: SeededRng, enabled: bool, fire_p: float) -> None:
        self.rng, self.enabled, self.fire_p = rng, enabled, fire_p
        self.asked = 0
        self.fired = 0


class Buggify:
    """One run's BUGGIFY state: which points are enabled, how often each was asked and fired."""

    def __init__(self, seed: int, spec: BuggifySpec) -> None:
        self.seed, self.spec = seed, spec
        self._points: dict[str, _Point] = {}

    def _first_ask(self, name: str) -> _Point:
        rng = SeededRng(self.seed, f"buggify/{name}")
        enabled = rng.random() < self.spec.probability
        fire_p = self.spec.fire_probability or rng.uniform(*FIRE_RANGE)
        return _Point(rng, enabled, fire_p)

    def ask(self, name: str) -> bool:
        p = self._points.get(name)
        if p is None:
            p = self._points[name] = self._first_ask(name)
        p.asked += 1
        if not p.enabled or p.rng.random() >= p.fire_p:
            return False
        p.fired += 1
        return True

    def summary(self) -> dict[str, Any]:
        """run.json's `buggify`: the spec, and every point asked this run (sorted by name)."""
        return {**self.spec.describe(), "points": {
            name: {"enabled": p.enabled, "fire_probability": round(p.fire_p, 4), "asked": p.asked, "fired": p.fired}
            for name, p in sorted(self._points.items())}}
