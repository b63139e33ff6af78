"""The purgatory: operations that wait for a condition, Kafka's DelayedOperation and
DelayedOperationPurgatory (kafka.server.DelayedOperation.scala), on the runtime's clock.

A delayed operation completes at most once: early, when `try_complete` (called when something
it watches changes) finds its condition holds and calls `force_complete`, or when its timeout
passes (`run`: force_complete, then `on_expiration`, as Kafka's DelayedOperation.run does).
Completing runs `on_complete`. Operations are watched under keys (the Delayed*Key classes
below, Kafka's DelayedOperationKey); `check_and_complete(key)` offers each watcher of the key,
in the order they were watched, the chance to complete. Everything runs on the node's
scheduler, so no locks are needed.

Two ways to wait:
- `try_complete_else_watch(op, keys)`: Kafka's. The operation is checked now, else watched; its
  timeout is a runtime timer (`call_later`) that runs `op.run`. The group coordinator's
  DelayedHeartbeat / DelayedJoin / DelayedSync.
- `await_completion(op, keys, deadline_ms)`: for an operation a request task waits on (Kafka
  answers from `on_complete`; here the handler coroutine continues). The operation is checked
  in the waiting task: now, and again each time an event on one of its keys wakes the task
  (`check_and_complete` ends the task's wait, whatever the condition says); past the deadline
  it expires. DelayedProduce, DelayedFetch, DelayedCreatePartitions, DelayedDeleteTopics.
  The wake-up is a future the task awaits with the remaining time as the runtime's timeout, so
  tasks resume in the order, and at the instants, they did when each of the three callers
  looped over its own future list (the trace hashes depend on it).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple, TypeVar

from mypy_extensions import mypyc_attr

from kafkasim.runtime.api import Future, NodeRuntime, Timer

T = TypeVar("T")


# ---------------------------------------------------------------- keys (DelayedOperationKey.scala)
class TopicPartitionOperationKey(NamedTuple):
    """DelayedProduce and DelayedFetch (and the group coordinator's acks=all appends). A
    NamedTuple, not a frozen dataclass: a follower's fetch watches every partition it asks
    for, and a tuple's hash and equality are C, not a Python call per dict lookup."""

    topic: str
    partition: int

    @property
    def key_label(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True)
class MemberKey:
    """DelayedHeartbeat: one member of one group."""

    group_id: str
    member_id: str

    @property
    def key_label(self) -> str:
        return f"{self.group_id}-{self.member_id}"


@dataclass(frozen=True)
class GroupJoinKey:
    """DelayedJoin / InitialDelayedJoin."""

    group_id: str

    @property
    def key_label(self) -> str:
        return f"join-{self.group_id}"


@dataclass(frozen=True)
class GroupSyncKey:
    """DelayedSync."""

    group_id: str

    @property
    def key_label(self) -> str:
        return f"sync-{self.group_id}"


@dataclass(frozen=True)
class TopicKey:
    """DelayedCreatePartitions / DelayedDeleteTopics."""

    topic: str

    @property
    def key_label(self) -> str:
        return self.topic


# ---------------------------------------------------------------- operations
@mypyc_attr(allow_interpreted_subclasses=True)
class DelayedOperation:
    def __init__(self, timeout_ms: float) -> None:
        self.timeout_ms = timeout_ms
        self.completed = False
        self.timer: Timer | None = None
        self.purgatory: DelayedOperationPurgatory | None = None
        self.keys: list[Hashable] = []
        self.watch_seq = -1  # when it was watched: check_and_complete_all's order

    def try_complete(self) -> bool:
        """Complete now (via force_complete) if the condition holds; True if it completed."""
        raise NotImplementedError

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        pass

    def is_completed(self) -> bool:
        return self.completed

    def force_complete(self) -> bool:
        """Complete (once): cancel the timer, stop watching, run on_complete. False if it was
        already completed."""
        if self.completed:
            return False
        self.completed = True
        if self.timer is not None:
            self.timer.cancel()
        if self.purgatory is not None:
            self.purgatory.unwatch(self)
        self.on_complete()
        return True

    def run(self) -> None:
        """The timeout passed (Kafka's DelayedOperation.run)."""
        if self.force_complete():
            self.on_expiration()


class _Wakeup(DelayedOperation):
    """One wait of a task in `await_completion`: any event on its keys ends it."""

    def __init__(self, woken: Future[Any]) -> None:
        super().__init__(0.0)
        self.woken = woken

    def try_complete(self) -> bool:
        return self.force_complete()

    def on_complete(self) -> None:
        if not self.woken.done():
            self.woken.set_result(None)


# ---------------------------------------------------------------- parking (request quotas)
class Parking:
    """How many waits request tasks have begun in a purgatory (or on a coordinator's callback,
    Kafka's DelayedJoin/DelayedSync). Kafka's request time (requestThreadTimeNanos) ends when the
    handler hands the request to a purgatory; the request quota's timer
    (quota_manager_request.RequestTimer) compares this count before and after each step of a
    handler, which is synchronous, to leave such waits out. Only ever compared, never reset."""

    begun: ClassVar[int] = 0


def parking() -> None:
    """Called right before a request task suspends to wait for a delayed operation."""
    Parking.begun += 1


async def park(aw: Future[T]) -> T:
    """Await a coordinator's callback future as a parked wait (see Parking)."""
    parking()
    result: T = await aw
    return result


# ---------------------------------------------------------------- the purgatory
class DelayedOperationPurgatory:
    def __init__(self, rt: NodeRuntime, name: str) -> None:
        self.rt = rt
        self.name = name
        self.watchers: dict[Hashable, list[DelayedOperation]] = {}
        self._watch_seq = 0

    def try_complete_else_watch(self, op: DelayedOperation, keys: Sequence[Hashable]) -> bool:
        """Complete op now if it can, else watch it under keys and start its timeout; True if
        it completed."""
        if op.try_complete():
            return True
        self._watch(op, keys)
        if op.completed:  # completed by a callback while being registered
            return True
        op.timer = self.rt.call_later(op.timeout_ms, op.run)
        return False

    async def await_completion(self, op: DelayedOperation, keys: Sequence[Hashable], deadline_ms: float) -> bool:
        """Wait, in the calling task, until op completes (True) or deadline_ms (the runtime's
        monotonic clock) passes and it expires (False). See the module's docstring."""
        while not op.try_complete():
            remaining = deadline_ms - self.rt.monotonic_ms()
            if remaining <= 0:
                op.run()
                return False
            wakeup = _Wakeup(self.rt.future())
            self._watch(wakeup, keys)
            parking()
            try:
                await self.rt.wait_first([wakeup.woken], remaining)
            finally:
                wakeup.completed = True
                self.unwatch(wakeup)
        return True

    def check_and_complete(self, key: Hashable) -> int:
        """Offer every operation watched under key, in watch order, the chance to complete;
        how many did."""
        completed = 0
        for op in list(self.watchers.get(key, ())):
            if not op.completed and op.try_complete():
                completed += 1
        return completed

    def check_and_complete_all(self) -> int:
        """check_and_complete for every watched operation, in the order they were watched."""
        ops = {id(op): op for watching in self.watchers.values() for op in watching}
        completed = 0
        for op in sorted(ops.values(), key=lambda o: o.watch_seq):
            if not op.completed and op.try_complete():
                completed += 1
        return completed

    def _watch(self, op: DelayedOperation, keys: Sequence[Hashable]) -> None:
        op.purgatory, op.keys = self, list(keys)
        op.watch_seq, self._watch_seq = self._watch_seq, self._watch_seq + 1
        for key in keys:
            self.watchers.setdefault(key, []).append(op)

    def unwatch(self, op: DelayedOperation) -> None:
        for key in op.keys:
            ops = self.watchers.get(key)
            if ops is not None:
                if op in ops:
                    ops.remove(op)
                if not ops:
                    del self.watchers[key]

    def cancel_all(self) -> None:
        """Shutdown: drop every watcher without running it (Kafka's purgatory.shutdown)."""
        for ops in list(self.watchers.values()):
            for op in ops:
                op.completed = True
                if op.timer is not None:
                    op.timer.cancel()
        self.watchers.clear()

    def num_watched(self) -> int:
        return sum(len(v) for v in self.watchers.values())
