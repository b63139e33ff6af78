"""The simulated scheduler: a heap of timed callbacks drives the project's `async def` coroutines.

The queue holds entries `(at_ms, priority, seq, fn, arg)`; `run` pops the earliest and calls
`fn(arg)`. Entries at equal times run by priority (URGENT before NORMAL), then in the order they
were scheduled (`seq`), so a run is a pure function of its inputs. A `SimTask` steps one
coroutine: the coroutine awaits a `SimFuture` (the task hangs its `_step` on the future's
callbacks, run as one queue entry when the future completes) or a `_Sleep` (the task schedules
its own `_step` directly: one entry per sleep, no intermediate event object). We step
coroutines ourselves because a crash must stop a task at once without throwing anything into it
that could run "cleanup" code, and a cancel must be deliverable even to a task that has not
started yet.

Why not simpy (which this kernel replaced): a simpy Event per wait, a second event per
`wait_first`, and simpy's generic step cost were a fifth of a run's CPU. The ordering rules
are the same (time, priority, scheduling order).
"""

from __future__ import annotations

import contextlib
import gc
import heapq
import itertools
from collections.abc import Callable, Coroutine, Generator, Iterable, Iterator
from typing import Any

from kafkasim.runtime.api import Cancelled, Future, NodeDead, Task, Timer

URGENT, NORMAL = 0, 1
# The cyclic collector's thresholds while a simulation runs (default: 700, 10, 10).
GC_THRESHOLDS = (50_000, 20, 100)
_PENDING, _OK, _FAILED = 0, 1, 2
Callback = Callable[[Any], None]


class SimFuture(Future[Any]):
    """`_state` is _PENDING, _OK or _FAILED; `_callbacks` run (as one queue entry at the instant
    it completes) with the future as argument."""

    __slots__ = ("_kernel", "_state", "_value", "_callbacks")

    def __init__(self, kernel: SimKernel) -> None:
        self._kernel = kernel
        self._state = _PENDING
        self._value: Any = None
        self._callbacks: list[Callback] = []

    def set_result(self, value: Any) -> None:
        if self._state == _PENDING:
            self._state, self._value = _OK, value
            if self._callbacks:
                # kernel.schedule(0.0, self._fire), inline: one call less per completed future.
                k = self._kernel
                heapq.heappush(k._queue, (k._now, NORMAL, next(k._seq), self._fire, None))

    def set_exception(self, exc: BaseException) -> None:
        if self._state == _PENDING:
            self._state, self._value = _FAILED, exc
            if self._callbacks:
                self._kernel.schedule(0.0, self._fire)

    def _resolve_now(self, value: Any) -> None:
        """set_result, running the callbacks at once. Only for kernel code that itself runs as a
        queue entry (a network delivery, another future's callback): the waiters then run in
        this entry, as they would have in the next one at the same instant, saving an event."""
        if self._state == _PENDING:
            self._state, self._value = _OK, value
            self._fire(None)

    def _fire(self, _arg: Any) -> None:
        callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            cb(self)

    def done(self) -> bool:
        return self._state != _PENDING

    def result(self) -> Any:
        if self._state == _PENDING:
            raise RuntimeError("future not done")
        if self._state == _FAILED:
            raise self._value
        return self._value

    def __await__(self) -> Generator[Any, Any, Any]:
        return (yield self)


class _Sleep:
    """What `kernel.sleep` returns: awaiting it parks the task until `ms` later. An outcome
    like a done future's (`_state`, `_value`) so a task resumes from either the same way."""

    __slots__ = ("ms",)
    _state = _OK
    _value = None

    def __init__(self, ms: float) -> None:
        self.ms = ms

    def __await__(self) -> Generator[Any, Any, Any]:
        return (yield self)


class _Outcome:
    """A wake-up carrying a fixed outcome (a cancel's Cancelled, a task's first step)."""

    __slots__ = ("_state", "_value")

    def __init__(self, state: int, value: Any) -> None:
        self._state, self._value = state, value


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
        self._done = SimFuture(kernel)
        self._retrieved = False
        # What the task waits on now (a SimFuture, a _Sleep or an _Outcome); a wake-up for
        # anything else is stale (the wait was abandoned by cancel()) and ignored.
        self._waiting: Any = _START
        kernel.schedule(0.0, self._step, _START)

    # -- public API
    def cancel(self) -> None:
        if self.done():
            return
        self._unhook()
        wake = _Outcome(_FAILED, Cancelled())
        self._waiting = wake
        self._kernel.schedule(0.0, self._step, wake, URGENT)

    def done(self) -> bool:
        return self._done._state != _PENDING

    def __await__(self) -> Generator[Any, Any, Any]:
        self._retrieved = True
        return (yield self._done)

    # -- stepping
    def _unhook(self) -> None:
        w = self._waiting
        self._waiting = None
        if type(w) is SimFuture:
            try:
                w._callbacks.remove(self._step)
            except ValueError:
                pass

    def _step(self, wake: Any) -> None:
        if self._waiting is not wake:
            return  # a wait abandoned by cancel()
        self._waiting = None
        owner = self._owner
        if not owner.alive:
            self.kill()
            return
        if owner.paused and owner.hold_if_paused(lambda: self._step(wake)):
            self._waiting = wake  # still this task's wait: a cancel meanwhile supersedes it
            return
        # Advance the coroutine (inline: one call per step less, ~80k steps a run).
        ok, value = wake._state == _OK, wake._value
        kernel = self._kernel
        prev, kernel.current = kernel.current, owner
        coro = self._coro
        try:
            while True:
                try:
                    nxt = coro.send(value) if ok else coro.throw(value)
                except StopIteration as stop:
                    self._finish(True, stop.value)
                    return
                except BaseException as exc:  # the coroutine ended with an exception
                    if _stops_the_process(exc):
                        raise  # Ctrl-C / SystemExit stop the whole run; never a task's error
                    self._finish(False, exc)
                    return
                kind = type(nxt)
                if kind is _Sleep:
                    self._waiting = nxt
                    kernel.schedule(nxt.ms, self._step, nxt)
                    return
                if kind is not SimFuture:
                    ok, value = False, TypeError(f"task {self.name} awaited a non-simulation object {nxt!r}")
                    continue
                if nxt._state != _PENDING:  # already done: resume at once with its outcome
                    ok, value = nxt._state == _OK, nxt._value
                    continue
                self._waiting = nxt
                nxt._callbacks.append(self._step)
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


_START = _Outcome(_OK, None)  # a task's first step: send(None) into the fresh coroutine


class SimTimer(Timer):
    __slots__ = ("_cancelled",)

    def __init__(self) -> None:
        self._cancelled = False

    def cancel(self) -> None:
        self._cancelled = True


class SimKernel:
    """The event loop of one simulated world."""

    def __init__(self) -> None:
        self._queue: list[tuple[float, int, int, Callback, Any]] = []
        self._seq = itertools.count()
        self._now = 0.0
        self.events = 0  # queue entries processed so far (what the benchmark reports per second)
        self._dead = 0  # wait_first timeouts in the queue whose wait ended first (_timeout_dropped)
        self.current: Owner | None = None
        self.failures: list[tuple[str, str, str]] = []  # (owner, task, repr(exception))
        self.on_failure: Callable[[str, str, BaseException], None] = lambda o, t, e: None

    def now(self) -> float:
        return self._now

    def schedule(self, ms: float, fn: Callback, arg: Any = None, priority: int = NORMAL) -> None:
        """Call fn(arg) `ms` from now (at once if ms <= 0, after what is already due)."""
        at = self._now + ms if ms > 0 else self._now
        heapq.heappush(self._queue, (at, priority, next(self._seq), fn, arg))

    def next_due_ms(self) -> float | None:
        """When the earliest queued entry is due (None: nothing queued). The live world
        (runtime/live/pacing.py) sleeps until then on the wall clock instead of jumping there;
        a simulated run never asks."""
        return self._queue[0][0] if self._queue else None

    def future(self) -> SimFuture:
        return SimFuture(self)

    def spawn(self, owner: Owner, coro: Coroutine[Any, Any, Any], name: str = "") -> SimTask:
        if not owner.alive:
            coro.close()
            raise NodeDead(owner.name)
        return SimTask(self, owner, coro, name)

    def sleep(self, ms: float) -> _Sleep:
        return _Sleep(ms)

    def call_later(self, owner: Owner, ms: float, fn: Callable[[], None]) -> SimTimer:
        timer = SimTimer()

        def fire(_arg: Any) -> None:
            if timer._cancelled or not owner.alive:
                return
            if owner.hold_if_paused(lambda: fire(None)):
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

        self.schedule(ms, fire)
        return timer

    def pause(self, owner: Owner) -> None:
        owner.paused = True

    def resume(self, owner: Owner) -> None:
        """Release what was held, in order, each as an event of the current instant (so it runs
        as any due event does, after the caller returns)."""
        owner.paused = False
        held, owner.held = owner.held, []
        for fn in held:
            self.schedule(0.0, _run_held, fn)

    async def wait_first(self, items: Iterable[Future[Any] | Task], timeout_ms: float | None) -> int | None:
        futures: list[SimFuture] = []
        for it in items:
            f = it if type(it) is SimFuture else _future_of(it)
            if f._state != _PENDING:
                return len(futures)
            futures.append(f)
        woke = SimFuture(self)
        # Both run as queue entries (a future's callbacks, a timer): the waiter resumes in the
        # same entry rather than one more. (woke's value is never read: the future as value is
        # as good as None, and the bound method saves a closure per wait.)
        on_done = woke._resolve_now
        for f in futures:
            f._callbacks.append(on_done)
        timeout: list[SimFuture | None] | None = None
        if timeout_ms is not None:
            timeout = [woke]
            self.schedule(timeout_ms, _fire_timeout, timeout)
        try:
            await woke
            # Several may have completed at the same instant before this task resumed (and a
            # timeout may coincide with one): answer the lowest index done now, as the contract
            # says, not the first one whose callback happened to run.
            for i, f in enumerate(futures):
                if f._state != _PENDING:
                    return i
            return None
        finally:
            for f in futures:
                if on_done in f._callbacks:
                    f._callbacks.remove(on_done)
            if timeout is not None and timeout[0] is not None:
                timeout[0] = None
                self._timeout_dropped()

    def _timeout_dropped(self) -> None:
        """A wait_first ended before its timeout: its queue entry is dead. Most waits end that
        way (a request answered long before its 30 s timeout), and the dead entries made the
        queue ~100 times deeper than the live ones; when they are over half of it, drop them.
        The live entries keep their (time, priority, seq) keys, so the order is unchanged."""
        self._dead += 1
        queue = self._queue
        if self._dead > 256 and 2 * self._dead > len(queue):
            queue[:] = [e for e in queue if not (e[3] is _fire_timeout and e[4][0] is None)]
            heapq.heapify(queue)
            self._dead = 0

    def task_failed(self, task: SimTask, exc: BaseException) -> None:
        self._record_failure(task._owner.name, task.name, exc)

    def _record_failure(self, owner: str, what: str, exc: BaseException) -> None:
        self.failures.append((owner, what, f"{type(exc).__name__}: {exc}"))
        self.on_failure(owner, what, exc)

    def run(self, until_ms: float | None = None) -> None:
        """Process entries due before `until_ms` (all of them if None), then stand the clock at
        `until_ms`. An exception out of an entry (Ctrl-C in a task) stops the run there."""
        with fewer_collections():
            self._run(until_ms)

    def _run(self, until_ms: float | None) -> None:
        queue, pop = self._queue, heapq.heappop
        n = 0
        try:
            if until_ms is None:
                while queue:
                    at, _, _, fn, arg = pop(queue)
                    self._now = at
                    n += 1
                    fn(arg)
                return
            while queue and queue[0][0] < until_ms:
                at, _, _, fn, arg = pop(queue)
                self._now = at
                n += 1
                fn(arg)
            if until_ms > self._now:
                self._now = float(until_ms)
        finally:
            self.events += n


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """Run the body with the cyclic collector's thresholds raised to GC_THRESHOLDS. A simulation
    allocates a future, a heap entry and coroutine frames per event, nearly all freed by refcount
    at once: at the default thresholds (700, 10, 10) the collector ran ~300 times in a failover
    run, and each full collection walks the whole world (its disks' pages, the histories) — ~15%
    of the run's CPU. Garbage cycles wait longer to be freed; the old thresholds come back after."""
    old = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*old)


def _stops_the_process(exc: BaseException) -> bool:
    """KeyboardInterrupt, SystemExit and their like (a BaseException that is not an Exception)
    belong to whoever runs the simulation, not to the task they happened to land in: they
    propagate out of run(). Cancelled (asyncio's CancelledError, also a BaseException) is
    the one such exception tasks own."""
    return not isinstance(exc, (Exception, Cancelled))


def _fire_timeout(timeout: list[SimFuture | None]) -> None:
    woke = timeout[0]
    if woke is not None:
        # A queue entry itself: the waiter resumes in it rather than one more.
        timeout[0] = None
        woke._resolve_now(None)


def _run_held(fn: Callable[[], None]) -> None:
    fn()


def _future_of(item: Future[Any] | Task) -> SimFuture:
    if isinstance(item, SimFuture):
        return item
    if isinstance(item, SimTask):
        item._retrieved = True
        return item._done
    raise TypeError(f"not a simulated future or task: {item!r}")
