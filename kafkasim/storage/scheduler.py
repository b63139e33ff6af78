"""Background storage work on the runtime's clock (Kafka's KafkaScheduler): one-shot and periodic
jobs, each a task of this node, so a crash stops them with everything else. A job's storage
error is traced and the job goes on (or ends, if one-shot); it never escapes as a task failure.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from kafkasim.runtime.api import NodeDead, NodeRuntime, Task

Job = Callable[[], Awaitable[Any]]


class Scheduler:
    def __init__(self, rt: NodeRuntime, owner: str = "") -> None:
        self.rt = rt
        self.owner = owner
        self._tasks: list[Task] = []
        self.stopped = False

    def _spawn(self, coro: Any, name: str) -> None:
        self._tasks = [t for t in self._tasks if not t.done()]
        self._tasks.append(self.rt.spawn(coro, name=name))

    def schedule_once(self, name: str, delay_ms: float, job: Job) -> None:
        if self.stopped:
            return
        self._spawn(self._once(name, delay_ms, job), name)

    def schedule(self, name: str, initial_delay_ms: float, period_ms: Callable[[], float] | float, job: Job) -> None:
        """Run `job` after `initial_delay_ms`, then every `period_ms` (a number, or a function
        read before each sleep so a config change takes effect)."""
        if self.stopped:
            return
        self._spawn(self._periodic(name, initial_delay_ms, period_ms, job), name)

    async def _once(self, name: str, delay_ms: float, job: Job) -> None:
        if delay_ms > 0:
            await self.rt.sleep(delay_ms)
        await self._run(name, job)

    async def _periodic(self, name: str, initial_delay_ms: float, period_ms: Callable[[], float] | float,
                        job: Job) -> None:
        await self.rt.sleep(max(0.0, initial_delay_ms))
        while not self.stopped:
            await self._run(name, job)
            await self.rt.sleep(max(1.0, period_ms() if callable(period_ms) else period_ms))

    async def _run(self, name: str, job: Job) -> None:
        if self.stopped:
            return
        try:
            await job()
        except NodeDead:
            raise
        except Exception as exc:  # a storage error: the log went offline and said so
            self.rt.trace("storage_task_error", task=name, owner=self.owner, error=f"{type(exc).__name__}: {exc}")

    def shutdown(self) -> None:
        self.stopped = True
        for t in self._tasks:
            if not t.done():
                t.cancel()
        self._tasks = []
