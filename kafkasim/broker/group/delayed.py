"""The group coordinator's delayed operations: DelayedHeartbeat, DelayedJoin, InitialDelayedJoin
and DelayedSync (Kafka's kafka.coordinator.group.Delayed*), watched in the generic purgatory
(kafkasim.broker.purgatory) under MemberKey / GroupJoinKey / GroupSyncKey; and
DelayedGroupAppend, the manager's acks=all append, under its partition's
TopicPartitionOperationKey.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kafkasim.broker.purgatory import DelayedOperation, DelayedOperationPurgatory, GroupJoinKey

if TYPE_CHECKING:
    from kafkasim.broker.group.coordinator import GroupCoordinator
    from kafkasim.broker.group.metadata import GroupMetadata
    from kafkasim.broker.partition import Partition


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
                [GroupJoinKey(group.group_id)])
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


class DelayedGroupAppend(DelayedOperation):
    """The coordinator's acks=all append of a group's metadata or offsets: done when the high
    watermark of the __consumer_offsets partition it was appended to passes the batch (Kafka
    uses a DelayedProduce). Checks the same Partition object throughout — it does not give up
    when leadership moves but times out (offsets.commit.timeout.ms), as this coordinator always has."""

    def __init__(self, partition: Partition, last_offset: int, timeout_ms: float) -> None:
        super().__init__(timeout_ms)
        self.partition, self.last_offset = partition, last_offset

    def try_complete(self) -> bool:
        return self.force_complete() if self.partition.high_watermark > self.last_offset else False
