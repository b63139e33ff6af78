"""Background storage work on the runtime's clock (Kafka's KafkaScheduler): one-shot and periodic
jobs, each a task of this node, so a crash stops them with everything else. A job's storage
error is traced and the job goes on (or ends, if one-shot); it never escapes as a task failure.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from kafkasim.runtime.api import Future, NodeDead, NodeRuntime, Task

Job = Callable[[], Awaitable[Any]]


class Scheduler:
    def __init__(self, rt: NodeRuntime, owner: str = "") -> None:
        self.rt = rt
        self.owner = owner
        self._tasks: dict[int, Task] = {}
        self._busy: set[int] = set()  # jobs running right now (never cancelled mid-job)
        self._next = 0
        self.stopped = False

    def _spawn(self, make: Callable[[int], Any], name: str) -> None:
        self._tasks = {i: t for i, t in self._tasks.items() if not t.done()}
        self._next += 1
        self._tasks[self._next] = self.rt.spawn(make(self._next), name=name)

    def schedule_once(self, name: str, delay_ms: float, job: Job) -> None:
        if not self.stopped:
            self._spawn(lambda i: self._once(i, name, delay_ms, job), name)

    def schedule(self, name: str, initial_delay_ms: float, period_ms: Callable[[], float] | float, job: Job) -> None:
        """Run `job` after `initial_delay_ms`, then every `period_ms` (a number, or a function
        read before each sleep so a config change takes effect)."""
        if not self.stopped:
            self._spawn(lambda i: self._periodic(i, name, initial_delay_ms, period_ms, job), name)

    async def _once(self, i: int, name: str, delay_ms: float, job: Job) -> None:
        if delay_ms > 0:
            await self.rt.sleep(delay_ms)
        await self._run(i, name, job)

    async def _periodic(self, i: int, name: str, initial_delay_ms: float, period_ms: Callable[[], float] | float,
                        job: Job) -> None:
        await self.rt.sleep(max(0.0, initial_delay_ms))
        while not self.stopped:
            await self._run(i, name, job)
            await self.rt.sleep(max(1.0, period_ms() if callable(period_ms) else period_ms))

    async def _run(self, i: int, name: str, job: Job) -> None:
        if self.stopped:
            return
        self._busy.add(i)
        try:
            await job()
        except NodeDead:
            raise
        except Exception as exc:  # a storage error: the log went offline and said so
            self.rt.trace("storage_task_error", task=name, owner=self.owner, error=f"{type(exc).__name__}: {exc}")
        finally:
            self._busy.discard(i)

    def shutdown(self) -> None:
        """Stop: idle jobs are cancelled, a running one finishes its pass (a job may be what
        shut the scheduler down) and does not run again."""
        self.stopped = True
        for i, t in self._tasks.items():
            if not t.done() and i not in self._busy:
                t.cancel()
        self._tasks = {}


class SerialQueue:
    """Async jobs one at a time, in call order (the lock Kafka's CheckpointFile takes)."""

    def __init__(self, rt: NodeRuntime) -> None:
        self.rt = rt
        self._last: Future[Any] | None = None

    async def run(self, job: Job) -> Any:
        prev, done = self._last, self.rt.future()
        self._last = done
        try:
            if prev is not None:
                await prev
            return await job()
        finally:
            done.set_result(None)
            if self._last is done:
                self._last = None
