"""The real world: asyncio tasks and timers, OS sockets, OS files (fsync in a worker thread),
and ZooKeeper through kazoo or an embedded in-process store.

`RealNode` plays the part SimNode plays in the simulation: it owns every task, timer, stream and
file of one node, and `kill()` stops them all and refuses later calls (the in-process analogue
of kill -9; a real kill -9 of a broker process is done by tests with signals).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Callable, Coroutine, Generator, Iterable
from typing import IO, Any, TypeVar

from kafkasim.runtime.api import Cancelled, Coordination, Future, NodeDead, NodeRuntime, Rng, Task, Timer
from kafkasim.runtime.real.fs import RealFileSystem
from kafkasim.runtime.real.net import RealNetwork
from kafkasim.runtime.real.zk import EmbeddedCoordination, KazooCoordination, NodeEmbeddedCoordination
from kafkasim.runtime.rng import SeededRng
from kafkasim.runtime.seeded_bugs import check as seeded_bugs_check

T = TypeVar("T")


class RealFuture(Future[Any]):
    __slots__ = ("_f",)

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._f: asyncio.Future[Any] = loop.create_future()

    def set_result(self, value: Any) -> None:
        if not self._f.done():
            self._f.set_result(value)

    def set_exception(self, exc: BaseException) -> None:
        if not self._f.done():
            self._f.set_exception(exc)
            self._f.exception()  # mark retrieved: an unawaited failure is not a leak here

    def done(self) -> bool:
        return self._f.done()

    def result(self) -> Any:
        return self._f.result()

    def __await__(self) -> Generator[Any, Any, Any]:
        # Shielded: cancelling one waiter must not cancel the future for every other waiter
        # (a simulated future stays pending when a waiter is cancelled).
        return asyncio.shield(self._f).__await__()


class RealTask(Task):
    __slots__ = ("name", "_t", "_node")

    def __init__(self, t: asyncio.Task[Any], name: str, node: RealNode) -> None:
        self._t, self.name, self._node = t, name, node

    def cancel(self) -> None:
        self._t.cancel()

    def done(self) -> bool:
        return self._t.done()

    def __await__(self) -> Generator[Any, Any, Any]:
        # Shielded: asyncio cancels the task an awaiter waits on when the awaiter is cancelled;
        # in the seam (and the simulation) cancelling the awaiter leaves the awaited task alone.
        try:
            return (yield from asyncio.shield(self._t).__await__())
        except Cancelled:
            # kill() cancels the node's tasks; their awaiters see NodeDead, as in the simulation.
            if self._t.cancelled() and not self._node.alive():
                raise NodeDead(self._node.node) from None
            raise


class RealTimer(Timer):
    __slots__ = ("_h",)

    def __init__(self, h: asyncio.TimerHandle) -> None:
        self._h = h

    def cancel(self) -> None:
        self._h.cancel()


class JsonlTrace:
    """Trace sink for the real world: JSON lines with wall-clock times (not hashed)."""

    def __init__(self, out: IO[str] | None = None) -> None:
        self._out = out

    @classmethod
    def to_file(cls, path: str | None) -> JsonlTrace:
        """Appending, line-buffered, to `path` (its directory created); no sink for None."""
        if not path:
            return cls(None)
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        return cls(open(path, "a", buffering=1))

    def close(self) -> None:
        """Finish the trace. A task that ends after its node stopped (a fetcher finishing the
        append it was applying, a connection lost under it) has no trace left to write to: its
        failure stays in the node's `failures`, and the write is dropped, not a traceback."""
        if self._out is not None:
            self._out.close()
            self._out = None

    def emit(self, node: str, ev: str, fields: dict[str, Any]) -> None:
        if self._out is None:
            return
        record = dict(fields)
        record.update(t=time.time() * 1000.0, node=node, ev=ev)
        self._out.write(json.dumps(record, sort_keys=True, separators=(",", ":"), default=str) + "\n")


class RealNode(NodeRuntime):
    def __init__(self, name: str, data_dir: str, zookeeper: str | Coordination | None = None,
                 host: str = "127.0.0.1", seed: int | None = None,
                 trace: JsonlTrace | None = None, seeded_bugs: Iterable[str] = ()) -> None:
        self.node = name
        self.seeded_bugs = seeded_bugs_check(seeded_bugs)  # unknown names refused here
        self.host = host
        self._alive = True
        self._tasks: set[asyncio.Task[Any]] = set()
        self._timers: set[asyncio.TimerHandle] = set()
        self._seed = seed if seed is not None else int.from_bytes(os.urandom(8), "big")
        self._rngs: dict[str, SeededRng] = {}
        self._trace = trace or JsonlTrace(None)
        self.failures: list[tuple[str, str, str]] = []
        self.net: RealNetwork = RealNetwork(self)
        self.fs: RealFileSystem = RealFileSystem(data_dir, self)
        # A ZooKeeper connect string means real ZooKeeper through kazoo; None means an embedded
        # in-process store; a Coordination object is shared (several nodes, one process).
        if isinstance(zookeeper, str):
            self.coordination: Coordination = KazooCoordination(zookeeper, self)
        else:
            shared = zookeeper if zookeeper is not None else EmbeddedCoordination()
            # The embedded store is shared by the process's nodes; each node gets a view that
            # ends its own sessions when it is killed.
            self.coordination = (NodeEmbeddedCoordination(shared)
                                 if isinstance(shared, EmbeddedCoordination) else shared)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    def check(self) -> None:
        if not self._alive:
            raise NodeDead(self.node)

    def now_ms(self) -> int:
        return int(time.time() * 1000)

    def monotonic_ms(self) -> float:
        return time.monotonic() * 1000.0

    async def sleep(self, ms: float) -> None:
        self.check()
        await asyncio.sleep(max(0.0, ms) / 1000.0)
        self.check()

    def call_later(self, ms: float, fn: Callable[[], None]) -> Timer:
        self.check()

        def fire() -> None:
            self._timers.discard(handle)
            if self._alive:
                try:
                    fn()
                except Exception as exc:
                    self._record_failure("timer", exc)

        handle = self.loop.call_later(max(0.0, ms) / 1000.0, fire)
        self._timers.add(handle)
        return RealTimer(handle)

    def future(self) -> Future[Any]:
        return RealFuture(self.loop)

    def spawn(self, coro: Coroutine[Any, Any, T], name: str = "") -> Task:
        if not self._alive:
            coro.close()
            raise NodeDead(self.node)
        t = self.loop.create_task(coro, name=name or None)
        self._tasks.add(t)
        t.add_done_callback(self._task_done)
        return RealTask(t, name, self)

    def _task_done(self, t: asyncio.Task[Any]) -> None:
        self._tasks.discard(t)
        if t.cancelled():
            return
        exc = t.exception()
        if exc is not None and not isinstance(exc, NodeDead):
            self._record_failure(t.get_name(), exc)

    def _record_failure(self, what: str, exc: BaseException) -> None:
        self.failures.append((self.node, what, f"{type(exc).__name__}: {exc}"))
        self._trace.emit(self.node, "task_error", {"task": what, "error": f"{type(exc).__name__}: {exc}"})

    async def wait_first(self, futures: Iterable[Future[Any] | Task], timeout_ms: float | None) -> int | None:
        self.check()
        items = [_aio(f) for f in futures]
        for i, f in enumerate(items):
            if f.done():
                return i
        done, _ = await asyncio.wait(items, timeout=None if timeout_ms is None else max(0.0, timeout_ms) / 1000.0,
                                     return_when=asyncio.FIRST_COMPLETED)
        self.check()
        for i, f in enumerate(items):
            if f in done:
                return i
        return None

    def rng(self, name: str) -> Rng:
        # One stream per name, as SimWorld keeps them: asking again continues the stream
        # instead of replaying the same numbers.
        r = self._rngs.get(name)
        if r is None:
            r = self._rngs[name] = SeededRng(self._seed, f"{self.node}/{name}")
        return r

    def trace(self, ev: str, **fields: Any) -> None:
        self._trace.emit(self.node, ev, fields)

    def alive(self) -> bool:
        return self._alive

    def invariant(self, cond: bool, what: str) -> None:
        # A real broker keeps serving: the violation is logged for whoever reads the trace.
        if not cond:
            self._trace.emit(self.node, "invariant_violated", {"what": what})

    def kill(self) -> None:
        """Stop every task and timer of this node now; later runtime calls raise NodeDead."""
        self._alive = False
        for h in list(self._timers):
            h.cancel()
        for t in list(self._tasks):
            t.cancel()
        self.net.kill()
        self.fs.kill()
        kill_sessions = getattr(self.coordination, "kill", None)
        if kill_sessions is not None:
            kill_sessions()


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run a real-world program's main coroutine to its end on a fresh event loop (the real
    world's scheduler): what `kafkasim serve` and `kafkasim load` run under."""
    return asyncio.run(main)


async def stop_requested() -> None:
    """Return once the process is asked to stop (SIGTERM or SIGINT)."""
    loop = asyncio.get_running_loop()
    stop: asyncio.Future[None] = loop.create_future()

    def on_signal() -> None:
        if not stop.done():
            stop.set_result(None)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    await stop


def _aio(item: Future[Any] | Task) -> asyncio.Future[Any]:
    if isinstance(item, RealFuture):
        return item._f
    if isinstance(item, RealTask):
        return item._t
    raise TypeError(f"not a real-world future or task: {item!r}")


__all__ = ["RealNode", "RealFuture", "RealTask", "JsonlTrace", "Cancelled", "run", "stop_requested"]
