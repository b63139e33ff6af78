"""Swarm testing (Groce et al., "Swarm Testing", ISSTA 2012): a `[[nemesis]]` profile of kind
"swarm" that, per seed, enables a random SUBSET of fault kinds, each with a random subset of the
target pool and a random rate and length, instead of every kind at once. Fewer kinds per run
lets each one act long enough to matter (a run that only pauses followers reaches states a run
drowning in every fault never does), and across seeds every combination gets its turn.

    [[nemesis]]
    kind = "swarm"
    kinds = ["crash", "partition", "pause", "clog", "isolate", "disk", "zk_expire"]  # the pool (default: all)
    min_kinds = 1                 # how many kinds a seed enables: uniform in [min_kinds, max_kinds]
    max_kinds = 3                 # (default: every kind of the pool)
    targets = ["broker-0", "broker-1", "broker-2", "controller", "zookeeper"]  # the target pool
    from_ms = 2000
    until_ms = 20000
    interval_ms = [3000, 12000]   # each enabled kind's mean gap: uniform in this range (or one number)
    duration_ms = [1000, 5000]    # each enabled kind's mean fault length: likewise
    mode = "kill"  disk_modes = [...]  extra_ms = 300  slow_fsync_ms = 50 ...   # as for the kinds

What a seed draws, in this order from the profile's own stream "nemesis/<i>": how many kinds, which
(a shuffle of the pool), then for each enabled kind in pool order: its targets (a non-empty
random subset of the pool members that kind can act on — ZooKeeper only for network kinds; at
least two for partition and clog), its mean gap, its mean length. Each enabled kind then expands
exactly as a plain profile of that kind, from its own stream "nemesis/<i>/<kind>", so its faults
do not move when another kind is enabled or not. Faults of one kind never overlap; faults of
different kinds may. The draws go to run.json (`swarm`), the faults to `faults` (source
"nemesis[<i>]/<kind>"), so replay and shrink see exactly what ran.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kafkasim.harness.faults import DISK_KEYS, Fail, names, number, parse_crash_mode, parse_disk_knobs
from kafkasim.runtime.rng import SeededRng

SWARM_KINDS = ("crash", "partition", "isolate", "pause", "clog", "disk", "zk_expire")
NETWORK_KINDS = ("partition", "isolate", "clog")  # the kinds that may name ZooKeeper
PAIR_KINDS = ("partition", "clog")                 # need two distinct pool members
ZOOKEEPER = "zookeeper"
SWARM_KEYS = {"kind", "kinds", "min_kinds", "max_kinds", "targets", "from_ms", "until_ms", "interval_ms",
              "duration_ms", "mode", "disk_modes", "extra_ms"} | set(DISK_KEYS)


@dataclass
class SwarmSpec:
    kinds: list[str]
    min_kinds: int
    max_kinds: int
    interval_ms: tuple[float, float]
    duration_ms: tuple[float, float]


@dataclass
class SwarmDraw:
    """What one seed enabled for one kind."""
    kind: str
    targets: list[str]
    interval_ms: float
    duration_ms: float
    extra: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "targets": self.targets, "interval_ms": self.interval_ms,
                "duration_ms": self.duration_ms}


def eligible(kind: str, pool: list[str]) -> list[str]:
    return [t for t in pool if kind in NETWORK_KINDS or t != ZOOKEEPER]


def _range(t: dict[str, Any], k: str, key: str, fail: Fail) -> tuple[float, float]:
    v = t.get(k)
    if isinstance(v, list):
        ok = len(v) == 2 and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)
        if not ok or not 0 < v[0] <= v[1]:
            raise fail(f"{key}.{k}", "[low, high] in ms with 0 < low <= high", v)
        return float(v[0]), float(v[1])
    one = number(t, k, key, fail, None)
    if one <= 0:
        raise fail(f"{key}.{k}", "a number of ms > 0 or [low, high]", v)
    return one, one


def _count(t: dict[str, Any], k: str, key: str, fail: Fail, default: int, hi: int) -> int:
    v = t.get(k, default)
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= hi:
        raise fail(f"{key}.{k}", f"an integer in [1, {hi}] (the pool has {hi} kinds)", v)
    return v


def parse_swarm(key: str, t: dict[str, Any], fail: Fail) -> tuple[SwarmSpec, dict[str, Any]]:
    """The swarm's own keys, and the shared ones (targets, times, kind keys) for its NemesisSpec."""
    for k in t:
        if k not in SWARM_KEYS:
            raise fail(f"{key}.{k}", f"one of {sorted(SWARM_KEYS)} (unknown key)", k)
    kinds = t.get("kinds", list(SWARM_KINDS))
    if (not isinstance(kinds, list) or not kinds or any(k not in SWARM_KINDS for k in kinds)
            or len(set(kinds)) != len(kinds)):
        raise fail(f"{key}.kinds", f"a non-empty list of distinct kinds from {list(SWARM_KINDS)}", kinds)
    pool = names(t.get("targets"), f"{key}.targets", fail)
    for kind in kinds:
        need = 2 if kind in PAIR_KINDS else 1
        if len(eligible(kind, pool)) < need:
            raise fail(f"{key}.targets", f"at least {need} target(s) a {kind} fault can act on "
                                         f"(ZooKeeper is no process: only network kinds can target it)", pool)
    lo = _count(t, "min_kinds", key, fail, 1, len(kinds))
    hi = _count(t, "max_kinds", key, fail, len(kinds), len(kinds))
    if hi < lo:
        raise fail(f"{key}.max_kinds", f"at least min_kinds ({lo})", hi)
    if "clog" in kinds and "extra_ms" not in t:
        raise fail(f"{key}.extra_ms", "a delay in ms >= 0 (the pool has clog)", None)
    spec = SwarmSpec(list(kinds), lo, hi, _range(t, "interval_ms", key, fail), _range(t, "duration_ms", key, fail))
    shared: dict[str, Any] = {"targets": pool, "from_ms": number(t, "from_ms", key, fail, 0.0),
                              "until_ms": number(t, "until_ms", key, fail, None),
                              "extra_ms": number(t, "extra_ms", key, fail, 0.0), "mode": "kill",
                              "disk_modes": [], "disk": {}}
    if "crash" in kinds:
        shared["mode"], shared["disk_modes"] = parse_crash_mode(key, t, fail)
    if "disk" in kinds:
        shared["disk"] = parse_disk_knobs(key, t, fail)
    elif any(k in t for k in DISK_KEYS):
        raise fail(key, "disk knobs only with \"disk\" in kinds", None)
    return spec, shared


def draw(spec: SwarmSpec, pool: list[str], rng: SeededRng) -> list[SwarmDraw]:
    """This seed's enabled kinds, in pool order, each with its targets, mean gap and mean length."""
    order = list(spec.kinds)
    n = rng.randint(spec.min_kinds, spec.max_kinds)
    rng.shuffle(order)
    enabled = set(order[:n])
    out = []
    for kind in spec.kinds:
        if kind not in enabled:
            continue
        members = eligible(kind, pool)
        picked = list(members)
        rng.shuffle(picked)
        m = rng.randint(2 if kind in PAIR_KINDS else 1, len(members))
        chosen = set(picked[:m])
        out.append(SwarmDraw(kind, [t for t in members if t in chosen],
                             round(rng.uniform(*spec.interval_ms), 3), round(rng.uniform(*spec.duration_ms), 3)))
    return out


def swarm_table(n: Any, value: Any) -> list[str]:
    """A swarm NemesisSpec `n` as a [[nemesis]] table (`value` writes one TOML value), which the
    loader reads back to an equal spec."""
    s: SwarmSpec = n.swarm
    lines = ["[[nemesis]]", 'kind = "swarm"', f"kinds = {value(s.kinds)}", f"min_kinds = {s.min_kinds}",
             f"max_kinds = {s.max_kinds}", f"targets = {value(n.targets)}", f"from_ms = {value(n.from_ms)}",
             f"until_ms = {value(n.until_ms)}", f"interval_ms = {value(list(s.interval_ms))}",
             f"duration_ms = {value(list(s.duration_ms))}"]
    if "crash" in s.kinds:
        lines.append(f"mode = {value(n.mode)}")
        if n.disk_modes:
            lines.append(f"disk_modes = {value(n.disk_modes)}")
    if "clog" in s.kinds:
        lines.append(f"extra_ms = {value(n.extra_ms)}")
    lines += [f"{k} = {value(n.disk[k])}" for k in sorted(n.disk)]
    return lines + [""]
