"""SimWorld: one deterministic simulated universe — clock, network, disks, ZooKeeper, nodes.

A run is a pure function of (scenario, seed, code): every random choice comes from a stream
split off the root seed by name, every iteration is over insertion-ordered or sorted
collections, and the wall clock is never read. The trace (one JSON line per event, keys sorted)
is hashed as it is written; two runs agree iff their hashes do.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import IO, Any

from kafkasim.runtime.api import InvariantViolation
from kafkasim.runtime.buggify import Buggify, BuggifySpec
from kafkasim.runtime.rng import SeededRng
from kafkasim.runtime.seeded_bugs import check as seeded_bugs_check
from kafkasim.runtime.sim.filesystem import SimDisk
from kafkasim.runtime.sim.kernel import Owner, SimKernel
from kafkasim.runtime.sim.network import SimNetwork
from kafkasim.runtime.sim.node_runtime import SimNodeRuntime
from kafkasim.runtime.sim.zookeeper import SimZooKeeperServer


def _line_encoder() -> Callable[[Any], str]:
    """json.dumps(record, sort_keys=True, separators=(",", ":")), the same text, made cheaper:
    JSONEncoder.encode builds a new C encoder (and a float formatter) on every call; this builds
    one for the run. Without the C accelerator, the plain encoder."""
    plain = json.JSONEncoder(sort_keys=True, separators=(",", ":"))
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return plain.encode
    # (markers, default, encoder, indent, key_separator, item_separator, sort_keys, skipkeys,
    # allow_nan): no circular-reference bookkeeping (a trace record is a flat dict of scalars
    # and lists), ASCII output as ensure_ascii gives, NaN allowed as by default.
    chunks = make(None, plain.default, json.encoder.encode_basestring_ascii, None, ":", ",", True, False, True)

    def encode(record: Any) -> str:
        return "".join(chunks(record, 0))

    return encode


class Trace:
    """Canonical JSON lines, hashed incrementally; optionally also written to a file."""

    def __init__(self, out: IO[str] | None = None) -> None:
        self._hash = hashlib.sha256()
        self._out = out
        self.count = 0

    _encode = staticmethod(_line_encoder())

    def emit(self, record: dict[str, Any]) -> None:
        line = self._encode(record) + "\n"
        self._hash.update(line.encode())
        self.count += 1
        if self._out is not None:
            self._out.write(line)

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


@dataclass(frozen=True)
class Violation:
    """A failed `NodeRuntime.invariant`: which, where and when (virtual ms)."""

    what: str
    node: str
    t_ms: float


class SimNode:
    """A machine: a disk that outlives crashes, and the current process incarnation."""

    def __init__(self, world: SimWorld, name: str) -> None:
        self.world = world
        self.name = name
        self.disk = SimDisk(name, world.rng(f"disk/{name}"), world.kernel)
        self.disk.on_event = lambda ev, f: world.emit(name, ev, f)
        self.incarnation = 0
        self.owner = Owner(name)
        self.runtime = SimNodeRuntime(world, self, self.owner)

    @property
    def alive(self) -> bool:
        return self.owner.alive

    def crash(self, mode: str = "kill") -> None:
        """kill: the process dies, the OS resets its connections, the page cache survives;
        power: the machine loses power, peers hear nothing and unsynced writes resolve by the
        disk's crash model."""
        if not self.owner.alive:
            return
        self.world.emit(self.name, "node_crash", {"mode": mode, "incarnation": self.incarnation})
        self.owner.alive = False
        self.owner.paused, self.owner.held = False, []  # a paused process can be killed too
        # The network first: streams die as the machine does (power: unsent data lost; kill: RST
        # after the queued data) before any `finally` of a killed task could close them politely.
        self.world.net.host_crashed(self.name, notify_peers=(mode == "kill"))
        for task in list(self.owner.tasks.values()):
            task.kill()
        if mode == "power":
            self.disk.crash()

    @property
    def paused(self) -> bool:
        return self.owner.paused

    def pause(self) -> None:
        """SIGSTOP: the process stops running (see Owner); nothing is lost."""
        if not self.owner.alive or self.owner.paused:
            return
        self.world.emit(self.name, "node_pause", {"incarnation": self.incarnation})
        self.world.kernel.pause(self.owner)

    def resume(self) -> None:
        if not self.owner.alive or not self.owner.paused:
            return
        self.world.emit(self.name, "node_resume", {"incarnation": self.incarnation, "held": len(self.owner.held)})
        self.world.kernel.resume(self.owner)

    def restart(self) -> SimNodeRuntime:
        if self.owner.alive:
            raise RuntimeError(f"{self.name} is running")
        self.incarnation += 1
        self.owner = Owner(self.name)
        self.runtime = SimNodeRuntime(self.world, self, self.owner)
        self.world.net.host_restarted(self.name)
        self.world.emit(self.name, "node_restart", {"incarnation": self.incarnation})
        return self.runtime


class SimWorld:
    def __init__(self, seed: int, trace_out: IO[str] | None = None,
                 latency_ms: tuple[float, float] = (0.1, 0.8), seeded_bugs: Iterable[str] = (),
                 buggify: BuggifySpec | None = None) -> None:
        self.seed = seed
        # BUGGIFY's own streams ("buggify/<point>"), never drawn from when it is off.
        self.buggify = Buggify(seed, buggify) if buggify is not None and buggify.enabled else None
        self.seeded_bugs = seeded_bugs_check(seeded_bugs)  # unknown names refused here
        self.violations: list[Violation] = []  # failed invariants, in the order they failed
        self.kernel = SimKernel()
        self.trace = Trace(trace_out)
        # Told of every event after it is traced (harness.godseye.listen), in the order added.
        self.listeners: list[Callable[[str, str, dict[str, Any]], None]] = []
        self._rngs: dict[str, SeededRng] = {}
        self.net = SimNetwork(self.kernel, self.rng("net"), latency_ms)
        self.zookeeper = SimZooKeeperServer(self.kernel, self.net)
        self.zookeeper.on_event = lambda ev, f: self.emit("zookeeper", ev, f)
        self.kernel.on_failure = lambda owner, what, exc: self.emit(
            owner, "task_error", {"task": what, "error": f"{type(exc).__name__}: {exc}"})
        self.nodes: dict[str, SimNode] = {}

    def rng(self, name: str) -> SeededRng:
        r = self._rngs.get(name)
        if r is None:
            r = self._rngs[name] = SeededRng(self.seed, name)
        return r

    def emit(self, node: str, ev: str, fields: dict[str, Any]) -> None:
        # A new dict (listeners get `fields` as given); the same keys and values as
        # dict(fields) + update(t=..., node=..., ev=...), in one step.
        self.trace.emit({**fields, "t": round(self.kernel._now, 6), "node": node, "ev": ev})
        for listener in self.listeners:
            listener(node, ev, fields)

    def invariant_failed(self, node: str, what: str) -> None:
        """Recorded here as well as raised: broker code that catches the exception (a request
        handler turning it into an error code) cannot hide it from the run's verdict."""
        self.violations.append(Violation(what, node, self.kernel.now()))
        self.emit(node, "invariant_violated", {"what": what})
        raise InvariantViolation(what)

    def add_node(self, name: str) -> SimNode:
        if name in self.nodes:
            raise ValueError(f"node {name} exists")
        node = self.nodes[name] = SimNode(self, name)
        return node

    def run(self, until_ms: float | None = None) -> None:
        self.kernel.run(until_ms)

    def now_ms(self) -> float:
        return self.kernel.now()

    @property
    def failures(self) -> list[tuple[str, str, str]]:
        return self.kernel.failures
