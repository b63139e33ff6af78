"""The simulated scheduler: simpy's event queue drives the project's `async def` coroutines.

simpy is the clock and the queue (virtual time in milliseconds; events at equal times run in
the order they were scheduled, so a run is a pure function of its inputs). A `SimTask` steps
one coroutine: the coroutine awaits objects whose `__await__` yields a simpy Event; the task
hangs its `_step` callback on that event and simpy calls it when the event is processed.
We step coroutines ourselves rather than through `simpy.Process` because a crash must stop a
task at once without throwing anything into it that could run "cleanup" code, and a cancel
must be deliverable even to a task that has not started yet.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Generator, Iterable
from typing import Any

import simpy
from simpy.events import NORMAL, URGENT

from kafkasim.runtime.api import Cancelled, Future, NodeDead, Task, Timer


class SimFuture(Future[Any]):
    __slots__ = ("_ev",)

    def __init__(self, env: simpy.Environment) -> None:
        self._ev = env.event()

    def set_result(self, value: Any) -> None:
        if not self._ev.triggered:
            self._ev.succeed(value)

    def set_exception(self, exc: BaseException) -> None:
        if not self._ev.triggered:
            self._ev.fail(exc)  # type: ignore[arg-type]  # simpy says Exception; Cancelled is a BaseException
            # A failure nobody waits for must not abort env.run(); waiters still get it.
            self._ev.defused = True

    def done(self) -> bool:
        return bool(self._ev.triggered)

    def result(self) -> Any:
        if not self._ev.triggered:
            raise RuntimeError("future not done")
        value = self._ev.value
        if not self._ev.ok:
            assert isinstance(value, BaseException)  # a failed event's value is its exception
            raise value
        return value

    def __await__(self) -> Generator[Any, Any, Any]:
        return (yield self._ev)


class SimAwait:
    """Await any simpy event from a coroutine."""

    __slots__ = ("_ev",)

    def __init__(self, ev: simpy.Event) -> None:
        self._ev = ev

    def __await__(self) -> Generator[Any, Any, Any]:
        return (yield self._ev)


class Owner:
    """What owns tasks and timers: a node (or the world itself). Killing it stops them all.

    Pausing it (SIGSTOP, a long GC pause) stops it running without killing anything: every
    task step and timer that comes due meanwhile is held, in the order it came due, and
    released in that order on resume. Its sockets stay open (bytes arriving are buffered,
    unread) and its ZooKeeper pings stop, so a long pause expires its session."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.alive = True
        self.paused = False
        self.held: list[Callable[[], None]] = []  # work that came due while paused, in order
        self.tasks: dict[int, SimTask] = {}  # insertion-ordered: kill order is deterministic
        self._next_task_id = 0

    def hold_if_paused(self, fn: Callable[[], None]) -> bool:
        """If paused, keep `fn` for the resume and answer True (the caller must not run it)."""
        if self.paused and self.alive:
            self.held.append(fn)
            return True
        return False

    def next_task_id(self) -> int:
        self._next_task_id += 1
        return self._next_task_id


class SimTask(Task):
    def __init__(self, kernel: SimKernel, owner: Owner, coro: Coroutine[Any, Any, Any], name: str) -> None:
        self.name = name or getattr(coro, "__qualname__", "task")
        self._kernel = kernel
        self._owner = owner
        self._coro = coro
        self._id = owner.next_task_id()
        owner.tasks[self._id] = self
        self._done = SimFuture(kernel.env)
        self._retrieved = False
        self._waiting: simpy.Event | None = None
        start = kernel.env.event()
        start._ok = True
        start._value = None
        self._wait_on(start)
        kernel.env.schedule(start, NORMAL)

    # -- public API
    def cancel(self) -> None:
        if self.done():
            return
        self._unhook()
        ev = self._kernel.env.event()
        ev._ok = False
        ev._value = Cancelled()
        ev.defused = True
        self._wait_on(ev)
        self._kernel.env.schedule(ev, URGENT)

    def done(self) -> bool:
        return self._done.done()

    def __await__(self) -> Generator[Any, Any, Any]:
        self._retrieved = True
        return (yield self._done._ev)

    # -- stepping
    def _wait_on(self, ev: simpy.Event) -> None:
        self._waiting = ev
        ev.callbacks.append(self._step)

    def _unhook(self) -> None:
        ev = self._waiting
        self._waiting = None
        if ev is not None and ev.callbacks is not None:
            try:
                ev.callbacks.remove(self._step)
            except ValueError:
                pass

    def _step(self, ev: simpy.Event) -> None:
        if self._waiting is not ev:
            return  # a wait abandoned by cancel()
        self._waiting = None
        if not self._owner.alive:
            self.kill()
            return
        if self._owner.hold_if_paused(lambda: self._step(ev)):
            self._waiting = ev  # still this task's wait: a cancel meanwhile supersedes it
            return
        ok, value = ev._ok, ev._value
        if not ok:
            ev.defused = True
        self._advance(ok, value)

    def _advance(self, ok: bool, value: Any) -> None:
        kernel = self._kernel
        prev, kernel.current = kernel.current, self._owner
        try:
            while True:
                try:
                    nxt = self._coro.send(value) if ok else self._coro.throw(value)
                except StopIteration as stop:
                    self._finish(True, stop.value)
                    return
                except BaseException as exc:  # the coroutine ended with an exception
                    if _stops_the_process(exc):
                        raise  # Ctrl-C / SystemExit stop the whole run; never a task's error
                    self._finish(False, exc)
                    return
                if not isinstance(nxt, simpy.Event):
                    ok, value = False, TypeError(f"task {self.name} awaited a non-simulation object {nxt!r}")
                    continue
                if nxt.callbacks is None:  # already processed: resume at once with its outcome
                    ok, value = nxt._ok, nxt._value
                    continue
                self._wait_on(nxt)
                return
        finally:
            kernel.current = prev

    def _finish(self, ok: bool, value: Any) -> None:
        self._owner.tasks.pop(self._id, None)
        if ok:
            self._done.set_result(value)
            return
        self._done.set_exception(value)
        # An exception nobody is waiting for is a bug in the node's code: record it (the run's
        # verdict fails on it). One someone awaits is theirs to handle.
        if not self._retrieved and not isinstance(value, (Cancelled, NodeDead)):
            self._kernel.task_failed(self, value)

    def kill(self) -> None:
        """Stop dead: drop the wait, close the coroutine (its `finally` blocks may run, but every
        runtime call they make raises NodeDead), fail waiters with NodeDead."""
        if self.done():
            return
        self._unhook()
        prev, self._kernel.current = self._kernel.current, self._owner
        try:
            self._coro.close()
        except BaseException as exc:  # cleanup code that touched the dead node's runtime
            if _stops_the_process(exc):
                raise
        finally:
            self._kernel.current = prev
        self._owner.tasks.pop(self._id, None)
        self._done.set_exception(NodeDead(self._owner.name))


class SimTimer(Timer):
    __slots__ = ("_cancelled",)

    def __init__(self) -> None:
        self._cancelled = False

    def cancel(self) -> None:
        self._cancelled = True


class SimKernel:
    """The event loop of one simulated world."""

    def __init__(self) -> None:
        self.env = simpy.Environment()
        self.current: Owner | None = None
        self.failures: list[tuple[str, str, str]] = []  # (owner, task, repr(exception))
        self.on_failure: Callable[[str, str, BaseException], None] = lambda o, t, e: None

    def now(self) -> float:
        return float(self.env.now)

    def future(self) -> SimFuture:
        return SimFuture(self.env)

    def spawn(self, owner: Owner, coro: Coroutine[Any, Any, Any], name: str = "") -> SimTask:
        if not owner.alive:
            coro.close()
            raise NodeDead(owner.name)
        return SimTask(self, owner, coro, name)

    def sleep(self, ms: float) -> SimAwait:
        return SimAwait(self.env.timeout(max(0.0, ms)))

    def call_later(self, owner: Owner, ms: float, fn: Callable[[], None]) -> SimTimer:
        timer = SimTimer()

        def fire(_ev: simpy.Event) -> None:
            if timer._cancelled or not owner.alive:
                return
            if owner.hold_if_paused(lambda: fire(_ev)):
                return
            prev, self.current = self.current, owner
            try:
                fn()
            except BaseException as exc:
                if _stops_the_process(exc):
                    raise
                self._record_failure(owner.name, "timer", exc)
            finally:
                self.current = prev

        self.env.timeout(max(0.0, ms)).callbacks.append(fire)
        return timer

    def pause(self, owner: Owner) -> None:
        owner.paused = True

    def resume(self, owner: Owner) -> None:
        """Release what was held, in order, each as an event of the current instant (so it runs
        as any due event does, after the caller returns)."""
        owner.paused = False
        held, owner.held = owner.held, []
        for fn in held:
            self.env.timeout(0).callbacks.append(_run_held(fn))

    async def wait_first(self, items: Iterable[Future[Any] | Task], timeout_ms: float | None) -> int | None:
        events = [_event_of(it) for it in items]
        for i, ev in enumerate(events):
            if ev.triggered:
                return i
        woke = self.env.event()

        def on_done(ev: simpy.Event) -> None:
            if not woke.triggered:
                woke.succeed(events.index(ev))

        for ev in events:
            ev.callbacks.append(on_done)
        if timeout_ms is not None:
            def on_timeout(_e: Any) -> None:
                if not woke.triggered:
                    woke.succeed(None)

            self.env.timeout(max(0.0, timeout_ms)).callbacks.append(on_timeout)
        try:
            await SimAwait(woke)
            # Several may have completed at the same instant before this task resumed (and a
            # timeout may coincide with one): answer the lowest index done now, as the contract
            # says, not the first one whose callback happened to run.
            for i, ev in enumerate(events):
                if ev.triggered:
                    return i
            return None
        finally:
            for ev in events:
                if ev.callbacks is not None and on_done in ev.callbacks:
                    ev.callbacks.remove(on_done)

    def task_failed(self, task: SimTask, exc: BaseException) -> None:
        self._record_failure(task._owner.name, task.name, exc)

    def _record_failure(self, owner: str, what: str, exc: BaseException) -> None:
        self.failures.append((owner, what, f"{type(exc).__name__}: {exc}"))
        self.on_failure(owner, what, exc)

    def run(self, until_ms: float | None = None) -> None:
        self.env.run(until=until_ms)


def _stops_the_process(exc: BaseException) -> bool:
    """KeyboardInterrupt, SystemExit and their like (a BaseException that is not an Exception)
    belong to whoever runs the simulation, not to the task they happened to land in: they
    propagate out of env.run(). Cancelled (asyncio's CancelledError, also a BaseException) is
    the one such exception tasks own."""
    return not isinstance(exc, (Exception, Cancelled))


def _run_held(fn: Callable[[], None]) -> Callable[[simpy.Event], None]:
    def run(_ev: simpy.Event) -> None:
        fn()
    return run


def _event_of(item: Future[Any] | Task) -> simpy.Event:
    if isinstance(item, SimFuture):
        return item._ev
    if isinstance(item, SimTask):
        item._retrieved = True
        return item._done._ev
    raise TypeError(f"not a simulated future or task: {item!r}")
