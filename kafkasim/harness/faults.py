"""The fault schedule: timed faults a scenario injects into the simulated world.

    [[faults]]
    at_ms = 4000
    jitter_ms = 2000          # optional: fire at at_ms + a seeded uniform draw in [0, jitter_ms)
    kind = "crash"            # crash | restart | partition | block | clog | heal | isolate |
                              # disk | disk_clear | zk_expire | pause
    targets = ["broker-0"]    # node names, or roles resolved when the fault fires:
                              #   "controller", "leader:<topic>-<partition>", "zookeeper"
    duration_ms = 5000        # optional (required for pause): undo this fault after so long —
                              #   crash: restart the nodes it crashed; partition / block / clog /
                              #   isolate: lift exactly the cuts it made; disk: clear the knobs;
                              #   pause: resume
    mode = "power"            # crash: "kill" (process dies, page cache survives, peers get RST)
                              #        "power" (machine loses power: unsynced writes resolve by the
                              #        disk's crash model, peers hear nothing)
    disk_modes = ["inode_first"]   # crash, power: only these SimDisk crash modes (default: all)
    sides = [["broker-0"], ["producer-0"]]   # partition: symmetric cut between two groups
    from = "broker-0"  to = "zookeeper"      # block / clog: one direction
    extra_ms = 50                            # clog: added one-way delay

  isolate      cut each target from every other node (and ZooKeeper), both directions
  disk         SimDisk fault knobs on each target: eio_rate (write and fsync EIO probability),
               enospc = true (capacity = bytes used now + free_bytes), bitflip_rate (a read
               returns one flipped bit), slow_fsync_ms (each fsync takes about this long),
               corrupt_bits (flip this many stored bits in the target's .log files, now)
  disk_clear   restore the targets' disks to no faults (also: kind = "disk" with clear = true)
  zk_expire    expire the targets' ZooKeeper sessions now, as Kafka's tests do
  pause        the targets stop running for duration_ms (SIGSTOP, a long GC pause): no task
               runs, timers wait, sockets stay open but unread, ZooKeeper pings stop

Request-level kinds (kafkasim/broker/request_faults.py; the same in every world and on the
fault control plane), on each target broker:
  request_error     api_key = "Produce" (or a key number), error_code = "NOT_LEADER_OR_FOLLOWER"
                    (or a code), count = N, topic = "t", partition = 0 (both optional): the next N
                    requests of that API (touching t-0) are answered with the error, unhandled
  request_delay     api_key (optional), delay_ms = D, count (optional): responses held D ms
  close_connection  after_requests = N, api_key (optional), count = C: N requests are answered,
                    the connection carrying the next is closed unanswered; C times

Every injected fault is written to the trace and listed in run.json's `faults`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafkasim.broker.request_faults import parse_request_fault
from kafkasim.runtime.control_api import FaultError
from kafkasim.runtime.sim.filesystem import CRASH_MODES

REQUEST_KINDS = ("request_error", "request_delay", "close_connection")   # = control_api.REQUEST_FAULT_KINDS
REQUEST_KEYS = ("api_key", "error_code", "count", "topic", "partition", "delay_ms", "after_requests")
FAULT_KINDS = ("crash", "restart", "partition", "block", "clog", "heal", "isolate", "disk", "disk_clear",
               "zk_expire", "pause", *REQUEST_KINDS)
TARGETED = ("crash", "restart", "isolate", "disk", "disk_clear", "zk_expire", "pause", *REQUEST_KINDS)
UNDOABLE = ("crash", "partition", "block", "clog", "isolate", "disk", "pause", *REQUEST_KINDS)  # accept duration_ms
DISK_RATES = ("eio_rate", "bitflip_rate")
DISK_KEYS = DISK_RATES + ("enospc", "free_bytes", "slow_fsync_ms", "corrupt_bits")

Fail = Callable[[str, str, Any], Exception]


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
    duration_ms: float = 0.0
    disk: dict[str, Any] = field(default_factory=dict)  # disk: the knobs, keys from DISK_KEYS
    request: dict[str, Any] = field(default_factory=dict)  # request-level kinds: keys from REQUEST_KEYS
    source: str = ""  # "nemesis[i]" when a nemesis profile generated it
    key: str = field(default="", compare=False)  # "faults[i]": where the scenario file declares it

    @property
    def end_ms(self) -> float:
        """The latest time this fault (and its undo) can act."""
        return self.at_ms + self.jitter_ms + self.duration_ms

    def describe(self) -> dict[str, Any]:
        d: dict[str, Any] = {"at_ms": self.at_ms, "kind": self.kind}
        if self.kind in TARGETED:
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
        for k in sorted(self.disk):
            d[k] = self.disk[k]
        for k in sorted(self.request):
            d[k] = self.request[k]
        if self.duration_ms:
            d["duration_ms"] = self.duration_ms
        if self.jitter_ms:
            d["jitter_ms"] = self.jitter_ms
        if self.source:
            d["source"] = self.source
        return d

    def named_nodes(self) -> list[str]:
        """Every node name or role this fault mentions (for validation before the run)."""
        return [n for n in self.targets + [x for side in self.sides for x in side] + [self.src, self.dst] if n]


def parse_faults(path: str, raw: list[Any], fail: Fail) -> list[Fault]:
    """Validate [[faults]] tables; `fail(key, expected, got)` builds the error naming file and key."""
    faults = []
    for i, t in enumerate(raw):
        key = f"faults[{i}]"
        if not isinstance(t, dict):
            raise fail(key, "a table", t)
        faults.append(parse_fault(key, t, fail))
        faults[-1].key = key
    return sorted(faults, key=lambda f: f.at_ms)


def parse_fault(key: str, t: dict[str, Any], fail: Fail) -> Fault:
    known = {"at_ms", "jitter_ms", "kind", "targets", "duration_ms", "mode", "disk_modes", "sides", "from", "to",
             "extra_ms", "clear"} | set(DISK_KEYS) | set(REQUEST_KEYS)
    for k in t:
        if k not in known:
            raise fail(f"{key}.{k}", f"one of {sorted(known)} (unknown key)", k)
    kind = t.get("kind")
    if kind not in FAULT_KINDS:
        raise fail(f"{key}.kind", f"one of {list(FAULT_KINDS)}", kind)
    if kind == "disk" and t.get("clear") is True:
        kind = "disk_clear"
    f = Fault(number(t, "at_ms", key, fail, None), kind)
    f.jitter_ms = number(t, "jitter_ms", key, fail, 0.0)
    f.duration_ms = number(t, "duration_ms", key, fail, 0.0)
    if f.duration_ms and kind not in UNDOABLE:
        raise fail(f"{key}.duration_ms", f"only on kinds {list(UNDOABLE)}", f.duration_ms)
    if kind == "pause" and f.duration_ms <= 0:
        raise fail(f"{key}.duration_ms", "a pause length in ms > 0", t.get("duration_ms"))
    if kind in TARGETED:
        f.targets = names(t.get("targets"), f"{key}.targets", fail)
    parse_kind_keys(f, key, t, fail)
    return f


def parse_crash_mode(key: str, t: dict[str, Any], fail: Fail) -> tuple[str, list[str]]:
    """A crash's `mode` and `disk_modes` (the latter only for a power loss), for [[faults]] and
    [[nemesis]] alike."""
    mode = t.get("mode", "kill")
    if mode not in ("kill", "power"):
        raise fail(f"{key}.mode", '"kill" or "power"', mode)
    disk_modes = list(t.get("disk_modes", []))
    if any(m not in CRASH_MODES for m in disk_modes) or (disk_modes and mode != "power"):
        raise fail(f"{key}.disk_modes", f"SimDisk crash modes {list(CRASH_MODES)} with mode = \"power\"", disk_modes)
    return mode, disk_modes


def parse_kind_keys(f: Fault, key: str, t: dict[str, Any], fail: Fail) -> None:
    """The keys only some kinds take (crash mode, partition sides, clog delay, disk knobs)."""
    if f.kind == "crash":
        f.mode, f.disk_modes = parse_crash_mode(key, t, fail)
    if f.kind == "partition":
        sides = t.get("sides")
        if not isinstance(sides, list) or len(sides) != 2:
            raise fail(f"{key}.sides", "two lists of node names", sides)
        f.sides = [names(s, f"{key}.sides", fail) for s in sides]
    if f.kind in ("block", "clog"):
        f.src, f.dst = str(t.get("from", "")), str(t.get("to", ""))
        if not f.src or not f.dst:
            raise fail(f"{key}.from/to", "two node names", [f.src, f.dst])
    if f.kind == "clog":
        if "extra_ms" not in t:
            raise fail(f"{key}.extra_ms", "a delay in ms >= 0", None)
        f.extra_ms = number(t, "extra_ms", key, fail, 0.0)
    if f.kind == "disk":
        f.disk = parse_disk_knobs(key, t, fail)
    if f.kind in REQUEST_KINDS:
        f.request = parse_request_keys(key, t, fail)
    elif any(k in t for k in REQUEST_KEYS):
        raise fail(key, f"request keys {list(REQUEST_KEYS)} only on kinds {list(REQUEST_KINDS)}", f.kind)


def parse_request_keys(key: str, t: dict[str, Any], fail: Fail) -> dict[str, Any]:
    """The request-level keys, checked by the broker's own parser (one fault model)."""
    spec = {k: t[k] for k in REQUEST_KEYS if k in t}
    try:
        parse_request_fault(key, {"kind": t["kind"], **spec})
    except FaultError as exc:
        raise fail(key, "a valid request-level fault", exc.message) from None
    return spec


def parse_disk_knobs(key: str, t: dict[str, Any], fail: Fail) -> dict[str, Any]:
    knobs: dict[str, Any] = {}
    for k in DISK_RATES:
        if k in t:
            knobs[k] = number(t, k, key, fail, 0.0, hi=1.0)
    if "enospc" in t:
        if not isinstance(t["enospc"], bool):
            raise fail(f"{key}.enospc", "true or false", t["enospc"])
        knobs["enospc"] = t["enospc"]
    if "free_bytes" in t:
        if not knobs.get("enospc"):
            raise fail(f"{key}.free_bytes", "only with enospc = true", t["free_bytes"])
        knobs["free_bytes"] = integer(t, "free_bytes", key, fail)
    if "slow_fsync_ms" in t:
        knobs["slow_fsync_ms"] = number(t, "slow_fsync_ms", key, fail, 0.0)
    if "corrupt_bits" in t:
        knobs["corrupt_bits"] = integer(t, "corrupt_bits", key, fail)
    if not knobs:
        raise fail(key, f"a disk fault with at least one of {list(DISK_KEYS)} (or clear = true)", None)
    return knobs


def number(t: dict[str, Any], k: str, key: str, fail: Fail, default: float | None, hi: float | None = None) -> float:
    """A number in [0, hi] at t[k]; `default` None means the key is required."""
    v = t.get(k, default)
    bad = isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or (hi is not None and v > hi)
    if bad:
        raise fail(f"{key}.{k}", f"a number in [0, {hi}]" if hi is not None else "a number (ms) >= 0", v)
    return float(v)  # type: ignore[arg-type]


def integer(t: dict[str, Any], k: str, key: str, fail: Fail) -> int:
    v = t.get(k)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise fail(f"{key}.{k}", "an integer >= 0", v)
    return v


def names(v: Any, key: str, fail: Fail) -> list[str]:
    if not isinstance(v, list) or not v or not all(isinstance(x, str) and x for x in v):
        raise fail(key, "a non-empty list of node names", v)
    return list(v)
