"""The group coordinator's purgatory: DelayedHeartbeat, DelayedJoin, InitialDelayedJoin and
DelayedSync, with Kafka's DelayedOperation semantics on the runtime's timers.

A delayed operation completes at most once: either early, when `try_complete` (called when
something it watches changes) decides it can, or when its timeout fires. Completing runs
`on_complete`; a timeout additionally runs `on_expiration` afterwards, as Kafka's
DelayedOperation.run does. Operations are watched under keys (member, join, sync — Kafka's
MemberKey / GroupJoinKey / GroupSyncKey); `check_and_complete(key)` offers each watcher the
chance to complete. Everything runs on the node's scheduler, so no locks are needed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kafkasim.runtime.api import NodeRuntime, Timer

if TYPE_CHECKING:
    from kafkasim.broker.group.coordinator import GroupCoordinator
    from kafkasim.broker.group.metadata import GroupMetadata

WatchKey = tuple[str, ...]


def member_key(group_id: str, member_id: str) -> WatchKey:
    return ("member", group_id, member_id)


def join_key(group_id: str) -> WatchKey:
    return ("join", group_id)


def sync_key(group_id: str) -> WatchKey:
    return ("sync", group_id)


class DelayedOperation:
    def __init__(self, timeout_ms: float) -> None:
        self.timeout_ms = timeout_ms
        self.completed = False
        self.timer: Timer | None = None
        self.purgatory: DelayedOperationPurgatory | None = None
        self.keys: list[WatchKey] = []

    def try_complete(self) -> bool:
        """Complete now (via force_complete) if the condition holds; True if it completed."""
        raise NotImplementedError

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        pass

    def force_complete(self) -> bool:
        if self.completed:
            return False
        self.completed = True
        if self.timer is not None:
            self.timer.cancel()
        if self.purgatory is not None:
            self.purgatory.unwatch(self)
        self.on_complete()
        return True

    def _expire(self) -> None:
        if self.force_complete():
            self.on_expiration()


class DelayedOperationPurgatory:
    def __init__(self, rt: NodeRuntime, name: str) -> None:
        self.rt = rt
        self.name = name
        self.watchers: dict[WatchKey, list[DelayedOperation]] = {}

    def try_complete_else_watch(self, op: DelayedOperation, keys: list[WatchKey]) -> bool:
        if op.try_complete():
            return True
        op.purgatory, op.keys = self, list(keys)
        for key in keys:
            self.watchers.setdefault(key, []).append(op)
        if op.completed:  # completed by a callback while being registered
            return True
        op.timer = self.rt.call_later(op.timeout_ms, op._expire)
        return False

    def check_and_complete(self, key: WatchKey) -> int:
        completed = 0
        for op in list(self.watchers.get(key, ())):
            if not op.completed and op.try_complete():
                completed += 1
        return completed

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


class DelayedHeartbeat(DelayedOperation):
    """Session-timeout check for one member; heartbeats are paused during a rebalance."""

    def __init__(self, coordinator: GroupCoordinator, group: GroupMetadata, member_id: str, is_pending: bool,
                 timeout_ms: float) -> None:
        super().__init__(timeout_ms)
        self.coordinator, self.group, self.member_id, self.is_pending = coordinator, group, member_id, is_pending

    def try_complete(self) -> bool:
        return self.coordinator.try_complete_heartbeat(self.group, self.member_id, self.is_pending, self.force_complete)

    def on_expiration(self) -> None:
        self.coordinator.on_expire_heartbeat(self.group, self.member_id, self.is_pending)


class DelayedJoin(DelayedOperation):
    """Waits for every known member to rejoin; on timeout the ones that did not are dropped."""

    def __init__(self, coordinator: GroupCoordinator, group: GroupMetadata, rebalance_timeout_ms: float) -> None:
        super().__init__(rebalance_timeout_ms)
        self.coordinator, self.group = coordinator, group

    def try_complete(self) -> bool:
        return self.coordinator.try_complete_join(self.group, self.force_complete)

    def on_complete(self) -> None:
        self.coordinator.on_complete_join(self.group)


class InitialDelayedJoin(DelayedJoin):
    """The first rebalance of an Empty group waits group.initial.rebalance.delay.ms, and again
    while new members keep arriving, up to the rebalance timeout — so a group of consumers
    started together gets one rebalance instead of one per member."""

    def __init__(self, coordinator: GroupCoordinator, purgatory: DelayedOperationPurgatory, group: GroupMetadata,
                 configured_rebalance_delay_ms: int, delay_ms: int, remaining_ms: int) -> None:
        super().__init__(coordinator, group, delay_ms)
        self.purgatory_ref = purgatory
        self.configured_rebalance_delay_ms = configured_rebalance_delay_ms
        self.delay_ms = delay_ms
        self.remaining_ms = remaining_ms

    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> None:
        group = self.group
        if group.new_member_added and self.remaining_ms != 0:
            group.new_member_added = False
            delay = min(self.configured_rebalance_delay_ms, self.remaining_ms)
            remaining = max(self.remaining_ms - self.delay_ms, 0)
            self.purgatory_ref.try_complete_else_watch(
                InitialDelayedJoin(self.coordinator, self.purgatory_ref, group, self.configured_rebalance_delay_ms,
                                   delay, remaining),
                [join_key(group.group_id)])
        else:
            super().on_complete()


class DelayedSync(DelayedOperation):
    """Waits for every member of a new generation to send SyncGroup; on timeout the missing
    ones are removed and the group rebalances."""

    def __init__(self, coordinator: GroupCoordinator, group: GroupMetadata, generation_id: int,
                 rebalance_timeout_ms: float) -> None:
        super().__init__(rebalance_timeout_ms)
        self.coordinator, self.group, self.generation_id = coordinator, group, generation_id

    def try_complete(self) -> bool:
        return self.coordinator.try_complete_pending_sync(self.group, self.generation_id, self.force_complete)

    def on_expiration(self) -> None:
        self.coordinator.on_expire_pending_sync(self.group, self.generation_id)


ForceComplete = Callable[[], bool]
