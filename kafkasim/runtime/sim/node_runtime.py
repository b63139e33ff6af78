"""A simulated node's runtime (NodeRuntime) and network handle, apart from world.py so that the
native build compiles them: broker, client and storage code call them some 400,000 times in a
leader-failover run (the clock, BUGGIFY asks, futures, waits, sleeps), and world.py stays pure
because tests and tools wrap a world's methods. Behaviour is world.py's as before: a node's calls
reach the world (trace, rng, BUGGIFY, invariants) and its kernel through these two classes."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from kafkasim.runtime.api import (
    Coordination,
    FileSystem,
    Future,
    Network,
    NodeDead,
    NodeRuntime,
    Rng,
    Server,
    Stream,
    StreamHandler,
    Task,
    Timer,
    TlsSettings,
)
from kafkasim.runtime.sim.filesystem import SimFileSystem
from kafkasim.runtime.sim.kernel import Owner
from kafkasim.runtime.sim.zookeeper import SimCoordination

if TYPE_CHECKING:
    from kafkasim.runtime.sim.world import SimNode, SimWorld

T = TypeVar("T")

SIM_EPOCH_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z: simulated wall clocks start here


class SimNet(Network):
    def __init__(self, world: SimWorld, owner: Owner, host: str) -> None:
        self._w, self._owner, self._host = world, owner, host

    async def serve(self, host: str, port: int, handler: StreamHandler, tls: TlsSettings | None = None) -> Server:
        if not self._owner.alive:
            raise NodeDead(self._owner.name)
        return self._w.net.listen(self._owner, self._host, port, handler, tls)

    async def connect(self, host: str, port: int, timeout_ms: float, tls: TlsSettings | None = None) -> Stream:
        if not self._owner.alive:
            raise NodeDead(self._owner.name)
        return await self._w.net.connect(self._owner, self._host, host, port, timeout_ms, tls)


class SimNodeRuntime(NodeRuntime):
    def __init__(self, world: SimWorld, node: SimNode, owner: Owner) -> None:
        self._w, self._owner = world, owner
        self._kernel = world.kernel
        self.node = self.host = node.name
        self.net = SimNet(world, owner, node.name)
        self.fs: FileSystem = SimFileSystem(node.disk, owner, self.buggify)
        self.coordination: Coordination = SimCoordination(world.zookeeper, owner, node.name)
        self.seeded_bugs = world.seeded_bugs

    def _check(self) -> None:
        if not self._owner.alive:
            raise NodeDead(self._owner.name)

    def now_ms(self) -> int:
        return SIM_EPOCH_MS + int(self._kernel._now)

    def monotonic_ms(self) -> float:
        return self._kernel._now

    async def sleep(self, ms: float) -> None:
        self._check()
        if self._w.buggify is not None and self.buggify("timer.sleep.late"):
            ms += 1.0 + ms / 10  # a thread wakes late (scheduling latency): two tasks' wake-ups may swap
        await self._kernel.sleep(ms)
        self._check()

    def call_later(self, ms: float, fn: Callable[[], None]) -> Timer:
        self._check()
        return self._kernel.call_later(self._owner, ms, fn)

    def future(self) -> Future[Any]:
        return self._kernel.future()

    def spawn(self, coro: Coroutine[Any, Any, T], name: str = "") -> Task:
        return self._kernel.spawn(self._owner, coro, name)

    def wait_first(self, futures: Iterable[Future[Any] | Task],
                   timeout_ms: float | None) -> Coroutine[Any, Any, int | None]:
        # The kernel's coroutine itself, not one more around it (~40k waits a run). No check
        # after the wait is needed: a dead node's task is killed, never resumed.
        self._check()
        return self._kernel.wait_first(futures, timeout_ms)

    def rng(self, name: str) -> Rng:
        return self._w.rng(f"{self.node}/{name}")

    def trace(self, ev: str, **fields: Any) -> None:
        self._check()
        self._w.emit(self.node, ev, fields)

    def alive(self) -> bool:
        return self._owner.alive

    def invariant(self, cond: bool, what: str) -> None:
        if not cond:
            self._w.invariant_failed(self.node, what)

    def buggify(self, name: str) -> bool:
        b = self._w.buggify
        if b is None or not b.ask(name):
            return False  # off: nothing drawn, nothing traced
        self._w.emit(self.node, "buggify", {"point": name})
        return True
