"""The fault schedule: timed faults a scenario injects into the simulated world.

    [[faults]]
    at_ms = 4000
    jitter_ms = 2000          # optional: fire at at_ms + a seeded uniform draw in [0, jitter_ms)
    kind = "crash"            # crash | restart | partition | block | clog | heal
    targets = ["broker-0"]    # crash / restart: node names, or roles resolved when the fault
                              #   fires: "controller", "leader:<topic>-<partition>"
    mode = "power"            # crash: "kill" (process dies, page cache survives, peers get RST)
                              #        "power" (machine loses power: unsynced writes resolve by the
                              #        disk's crash model, peers hear nothing)
    disk_modes = ["inode_first"]   # crash, power: only these SimDisk crash modes (default: all)
    sides = [["broker-0"], ["producer-0"]]   # partition: symmetric cut between two groups
    from = "broker-0"  to = "zookeeper"      # block / clog: one direction
    extra_ms = 50                            # clog: added one-way delay

Every injected fault is written to the trace and listed in run.json's `faults`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from kafkasim.runtime.sim.filesystem import CRASH_MODES

FAULT_KINDS = ("crash", "restart", "partition", "block", "clog", "heal")


@dataclass
class Fault:
    at_ms: float
    kind: str
    targets: list[str] = field(default_factory=list)
    mode: str = "kill"
    disk_modes: list[str] = field(default_factory=list)
    sides: list[list[str]] = field(default_factory=list)
    src: str = ""
    dst: str = ""
    extra_ms: float = 0.0
    jitter_ms: float = 0.0

    def describe(self) -> dict[str, Any]:
        d: dict[str, Any] = {"at_ms": self.at_ms, "kind": self.kind}
        if self.kind in ("crash", "restart"):
            d["target"] = ",".join(self.targets)
        if self.kind == "crash":
            d["mode"] = self.mode
            if self.disk_modes:
                d["disk_modes"] = ",".join(self.disk_modes)
        if self.kind == "partition":
            d["target"] = " | ".join(",".join(s) for s in self.sides)
        if self.kind in ("block", "clog"):
            d["target"] = f"{self.src}->{self.dst}"
        if self.kind == "clog":
            d["extra_ms"] = self.extra_ms
        if self.jitter_ms:
            d["jitter_ms"] = self.jitter_ms
        return d


def parse_faults(path: str, raw: list[Any], fail: Callable[[str, str, Any], Exception]) -> list[Fault]:
    """Validate [[faults]] tables; `fail(key, expected, got)` builds the error naming file and key."""
    faults = []
    for i, t in enumerate(raw):
        key = f"faults[{i}]"
        if not isinstance(t, dict):
            raise fail(key, "a table", t)
        kind = t.get("kind")
        if kind not in FAULT_KINDS:
            raise fail(f"{key}.kind", f"one of {list(FAULT_KINDS)}", kind)
        at = t.get("at_ms")
        if isinstance(at, bool) or not isinstance(at, (int, float)) or at < 0:
            raise fail(f"{key}.at_ms", "a time in ms >= 0", at)
        f = Fault(float(at), kind)
        jitter = t.get("jitter_ms", 0)
        if isinstance(jitter, bool) or not isinstance(jitter, (int, float)) or jitter < 0:
            raise fail(f"{key}.jitter_ms", "a time in ms >= 0", jitter)
        f.jitter_ms = float(jitter)
        if kind in ("crash", "restart"):
            f.targets = _names(t.get("targets"), f"{key}.targets", fail)
        if kind == "crash":
            f.mode = t.get("mode", "kill")
            if f.mode not in ("kill", "power"):
                raise fail(f"{key}.mode", '"kill" or "power"', f.mode)
            f.disk_modes = list(t.get("disk_modes", []))
            if any(m not in CRASH_MODES for m in f.disk_modes) or (f.disk_modes and f.mode != "power"):
                raise fail(f"{key}.disk_modes", f"SimDisk crash modes {list(CRASH_MODES)} with mode = \"power\"",
                           f.disk_modes)
        if kind == "partition":
            sides = t.get("sides")
            if not isinstance(sides, list) or len(sides) != 2:
                raise fail(f"{key}.sides", "two lists of node names", sides)
            f.sides = [_names(s, f"{key}.sides", fail) for s in sides]
        if kind in ("block", "clog"):
            f.src, f.dst = str(t.get("from", "")), str(t.get("to", ""))
            if not f.src or not f.dst:
                raise fail(f"{key}.from/to", "two node names", [f.src, f.dst])
        if kind == "clog":
            extra = t.get("extra_ms")
            if isinstance(extra, bool) or not isinstance(extra, (int, float)) or extra < 0:
                raise fail(f"{key}.extra_ms", "a delay in ms >= 0", extra)
            f.extra_ms = float(extra)
        faults.append(f)
    return sorted(faults, key=lambda f: f.at_ms)


def _names(v: Any, key: str, fail: Callable[[str, str, Any], Exception]) -> list[str]:
    if not isinstance(v, list) or not v or not all(isinstance(x, str) and x for x in v):
        raise fail(key, "a non-empty list of node names", v)
    return list(v)
