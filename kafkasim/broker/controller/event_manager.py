"""ControllerEventManager: the controller's single event thread. ZooKeeper watches, broker
responses and API requests only enqueue events; one task processes them in arrival order, so
the controller's state is never touched by two things at once (Kafka's design, which makes the
state machines race-free without locks).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kafkasim.runtime.api import Future, NodeRuntime, Task

EventBody = Callable[[], Awaitable[Any]]


@dataclass
class ControllerEvent:
    name: str
    body: EventBody
    done: Future[Any] | None = None  # set for events whose caller waits (API requests)
    started: Future[None] | None = None  # set for events whose putter waits for processing to begin


class ControllerMovedError(Exception):
    """A request the controller queued will not be processed here: the controller is shutting
    down (Kafka preempts such events with ControllerMovedException). The asker answers its
    client as Kafka does — NOT_CONTROLLER or STALE_CONTROLLER_EPOCH — and the client retries
    at the next controller."""


class ControllerEventManager:
    def __init__(self, rt: NodeRuntime, on_error: Callable[[ControllerEvent, Exception], Awaitable[None]]) -> None:
        self.rt = rt
        self.on_error = on_error
        self.queue: deque[ControllerEvent] = deque()
        self._wakeup: Future[Any] | None = None
        self._task: Task | None = None
        self._stopped = False
        self.processed = 0

    def start(self) -> None:
        self._task = self.rt.spawn(self._run(), name="controller-event-thread")

    def stop(self) -> None:
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
        self._preempt_queued("controller shutting down")

    def _preempt_queued(self, why: str) -> None:
        """Kafka's QueuedEvent.preempt: a dropped API request is answered as by a moved
        controller; a dropped ZooKeeper event needs nothing (a new controller reads ZooKeeper)."""
        for ev in self.queue:
            if ev.done is not None and not ev.done.done():
                ev.done.set_exception(ControllerMovedError(f"{why} with {ev.name} queued"))
            if ev.started is not None and not ev.started.done():
                ev.started.set_result(None)  # never processed: its waiter must not wait forever
        self.queue.clear()

    def clear_and_put(self, name: str, body: EventBody) -> ControllerEvent:
        """ControllerEventManager.clearAndPut: drop (preempt) every queued event, then enqueue
        this one; `await_processing` on it waits until the event thread has begun it."""
        self._preempt_queued(f"{name} cleared the queue")
        ev = ControllerEvent(name, body, started=self.rt.future())
        self._enqueue(ev)
        return ev

    async def await_processing(self, ev: ControllerEvent) -> None:
        """QueuedEvent.awaitProcessing: returns once the event thread began `ev` (so the event
        it was busy with has ended). A stopped manager never will: return at once."""
        if ev.started is not None and not self._stopped:
            await ev.started

    def put(self, name: str, body: EventBody) -> ControllerEvent:
        ev = ControllerEvent(name, body)
        self._enqueue(ev)
        return ev

    async def put_and_wait(self, name: str, body: EventBody) -> Any:
        """Enqueue and wait for the event's result (an API request the controller answers)."""
        ev = ControllerEvent(name, body, self.rt.future())
        self._enqueue(ev)
        assert ev.done is not None
        return await ev.done

    def _enqueue(self, ev: ControllerEvent) -> None:
        self.queue.append(ev)
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    async def _run(self) -> None:
        while True:
            if not self.queue:
                self._wakeup = self.rt.future()
                await self._wakeup
                continue
            ev = self.queue.popleft()
            if self.rt.buggify("controller.event.slow"):  # a busy event thread: ZK watches handled late, in order
                await self.rt.sleep(50)
            if ev.started is not None and not ev.started.done():
                ev.started.set_result(None)
            failure: Exception | None = None
            try:
                result = await ev.body()
            except Exception as exc:  # the controller survives one bad event, as Kafka's does
                failure = exc  # (handled below: no await in an except block, kafka_zk_client._get_or_none)
            if failure is not None:
                await self.on_error(ev, failure)
                if ev.done is not None and not ev.done.done():
                    ev.done.set_exception(failure)
            elif ev.done is not None and not ev.done.done():
                ev.done.set_result(result)
            self.processed += 1
