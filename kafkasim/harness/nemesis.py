"""Randomized nemesis profiles: `[[nemesis]]` tables that expand, from the run's seed and BEFORE
the run starts, into concrete timed faults (so run.json lists the exact schedule, a replay needs
nothing but the seed, and `kafkasim shrink` minimises the concrete faults like any others).

    [[nemesis]]
    kind = "crash"            # crash | partition | isolate | pause | clog | disk | zk_expire
    targets = ["broker-0", "broker-1", "controller"]   # the pool each fault draws from
    from_ms = 3000            # first fault no earlier than this
    until_ms = 30000          # every fault, and its undo, is over by then
    interval_ms = 4000        # mean gap between one fault's end and the next (exponential)
    duration_ms = 3000        # mean length of each fault (uniform in [0.5, 1.5] x this)
    mode = "kill"             # crash: kill | power, disk_modes = [...] as in [[faults]]
    extra_ms = 200            # clog: added one-way delay
    eio_rate = 0.01 ...       # disk: the [[faults]] disk knobs

Faults of one profile never overlap (the next starts after the previous one's undo); profiles
are independent of each other. Each profile draws from its own stream, "nemesis/<index>", so
adding a profile does not move the faults of the others.

partition: the pool is split at random into two non-empty sides, cut both ways.
clog: a random ordered pair of distinct pool members, one direction.

kind = "swarm" (kafkasim/harness/swarm.py): per seed, a random subset of kinds, each with a random
subset of the targets and a random rate and length, each then expanded as a plain profile.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from kafkasim.harness.faults import DISK_KEYS, Fail, Fault, names, number, parse_crash_mode, parse_disk_knobs
from kafkasim.harness.swarm import SwarmDraw, SwarmSpec, draw, parse_swarm
from kafkasim.runtime.rng import SeededRng

NEMESIS_KINDS = ("crash", "partition", "isolate", "pause", "clog", "disk", "zk_expire", "swarm")


@dataclass
class NemesisSpec:
    kind: str
    targets: list[str]
    from_ms: float
    until_ms: float
    interval_ms: float
    duration_ms: float
    mode: str = "kill"
    disk_modes: list[str] = field(default_factory=list)
    extra_ms: float = 0.0
    disk: dict[str, Any] = field(default_factory=dict)
    swarm: SwarmSpec | None = None  # kind "swarm": what each seed draws its kinds from


def parse_nemesis(raw: list[Any], fail: Fail) -> list[NemesisSpec]:
    out = []
    for i, t in enumerate(raw):
        key = f"nemesis[{i}]"
        if not isinstance(t, dict):
            raise fail(key, "a table", t)
        out.append(_parse_one(key, t, fail))
    return out


def _parse_one(key: str, t: dict[str, Any], fail: Fail) -> NemesisSpec:
    if t.get("kind") == "swarm":
        return _parse_swarm(key, t, fail)
    known = {"kind", "targets", "from_ms", "until_ms", "interval_ms", "duration_ms", "mode", "disk_modes",
             "extra_ms"} | set(DISK_KEYS)
    for k in t:
        if k not in known:
            raise fail(f"{key}.{k}", f"one of {sorted(known)} (unknown key)", k)
    kind = t.get("kind")
    if kind not in NEMESIS_KINDS:
        raise fail(f"{key}.kind", f"one of {list(NEMESIS_KINDS)}", kind)
    n = NemesisSpec(kind, names(t.get("targets"), f"{key}.targets", fail), number(t, "from_ms", key, fail, 0.0),
                    number(t, "until_ms", key, fail, None), number(t, "interval_ms", key, fail, None),
                    number(t, "duration_ms", key, fail, 0.0 if kind == "zk_expire" else None))
    if n.until_ms <= n.from_ms:
        raise fail(f"{key}.until_ms", f"a time after from_ms ({n.from_ms})", n.until_ms)
    if n.interval_ms <= 0:
        raise fail(f"{key}.interval_ms", "a mean gap in ms > 0", n.interval_ms)
    if kind != "zk_expire" and n.duration_ms <= 0:
        raise fail(f"{key}.duration_ms", "a mean fault length in ms > 0", n.duration_ms)
    if kind in ("partition", "clog") and len(n.targets) < 2:
        raise fail(f"{key}.targets", "a pool of at least two nodes", n.targets)
    if kind == "crash":
        n.mode, n.disk_modes = parse_crash_mode(key, t, fail)
    if kind == "clog":
        n.extra_ms = number(t, "extra_ms", key, fail, None)
    if kind == "disk":
        n.disk = parse_disk_knobs(key, t, fail)
    return n


def _parse_swarm(key: str, t: dict[str, Any], fail: Fail) -> NemesisSpec:
    swarm, shared = parse_swarm(key, t, fail)
    n = NemesisSpec("swarm", shared["targets"], shared["from_ms"], shared["until_ms"], swarm.interval_ms[1],
                    swarm.duration_ms[1], shared["mode"], shared["disk_modes"], shared["extra_ms"], shared["disk"],
                    swarm)
    if n.until_ms <= n.from_ms:
        raise fail(f"{key}.until_ms", f"a time after from_ms ({n.from_ms})", n.until_ms)
    return n


def expand(specs: list[NemesisSpec], seed: int) -> list[Fault]:
    """The concrete faults of every profile for this seed, sorted by time."""
    out: list[Fault] = []
    for i, spec in enumerate(specs):
        rng = SeededRng(seed, f"nemesis/{i}")
        if spec.swarm is None:
            out += _expand_one(spec, rng, f"nemesis[{i}]")
            continue
        for d in draw(spec.swarm, spec.targets, rng):
            out += _expand_one(_drawn_spec(spec, d), SeededRng(seed, f"nemesis/{i}/{d.kind}"),
                               f"nemesis[{i}]/{d.kind}")
    return sorted(out, key=lambda f: f.at_ms)


def _drawn_spec(spec: NemesisSpec, d: SwarmDraw) -> NemesisSpec:
    """The plain profile one enabled swarm kind expands as."""
    return NemesisSpec(d.kind, d.targets, spec.from_ms, spec.until_ms, d.interval_ms,
                       0.0 if d.kind == "zk_expire" else d.duration_ms, spec.mode, list(spec.disk_modes),
                       spec.extra_ms, dict(spec.disk))


def swarm_draws(specs: list[NemesisSpec], seed: int) -> list[dict[str, Any]]:
    """What each swarm profile enabled for this seed (run.json's `swarm`): the kinds, and for
    each its targets, mean gap and mean length. The same draws `expand` makes (same streams)."""
    out = []
    for i, spec in enumerate(specs):
        if spec.swarm is not None:
            drawn = draw(spec.swarm, spec.targets, SeededRng(seed, f"nemesis/{i}"))
            out.append({"source": f"nemesis[{i}]", "enabled": [d.describe() for d in drawn],
                        "disabled": [k for k in spec.swarm.kinds if k not in {d.kind for d in drawn}]})
    return out


def _expand_one(spec: NemesisSpec, rng: SeededRng, source: str) -> list[Fault]:
    out = []
    t = spec.from_ms + rng.expovariate(1.0 / spec.interval_ms)
    while t < spec.until_ms:
        length = min(spec.duration_ms * rng.uniform(0.5, 1.5), spec.until_ms - t)
        f = _fault(spec, rng, round(t, 3), round(length, 3))
        f.source = source
        out.append(f)
        t += length + rng.expovariate(1.0 / spec.interval_ms)
    return out


def _fault(spec: NemesisSpec, rng: SeededRng, at: float, length: float) -> Fault:
    pool = list(spec.targets)
    if spec.kind == "partition":
        rng.shuffle(pool)
        cut = rng.randint(1, len(pool) - 1)
        return Fault(at, "partition", sides=[sorted(pool[:cut]), sorted(pool[cut:])], duration_ms=length)
    if spec.kind == "clog":
        src = rng.choice(pool)
        dst = rng.choice([p for p in pool if p != src])
        return Fault(at, "clog", src=src, dst=dst, extra_ms=spec.extra_ms, duration_ms=length)
    target = [rng.choice(pool)]
    if spec.kind == "zk_expire":
        return Fault(at, "zk_expire", target)
    f = Fault(at, spec.kind, target, duration_ms=length)
    if spec.kind == "crash":
        f.mode, f.disk_modes = spec.mode, list(spec.disk_modes)
    if spec.kind == "disk":
        f.disk = dict(spec.disk)
    return f


def with_concrete_faults(scenario: Any, seed: int) -> Any:
    """A copy of the scenario whose nemesis profiles are expanded into its fault list (the
    scenario itself is left alone: a sweep or shrink reuses it with other seeds)."""
    if not scenario.nemesis:
        return scenario
    s = copy.deepcopy(scenario)
    s.faults = sorted(s.faults + expand(s.nemesis, seed), key=lambda f: f.at_ms)
    s.nemesis = []
    return s
