"""DelayedProduce (Kafka's kafka.server.DelayedProduce) for one partition of an acks=all
Produce: done when the high watermark covers the batch (the error NOT_ENOUGH_REPLICAS_AFTER_APPEND
if the maximal ISR shrank below the effective min ISR meanwhile), when this broker no longer
leads the partition (NOT_LEADER_OR_FOLLOWER) or its log dir failed (KAFKA_STORAGE_ERROR);
expired: REQUEST_TIMED_OUT — what a batch gets while the ISR stays below the minimum, as the
high watermark then stands still. Watched under the partition's TopicPartitionOperationKey, checked whenever
the partition's high watermark, log end offset, ISR or role changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkasim.broker.purgatory import DelayedOperation
from kafkasim.protocol import errors as E

if TYPE_CHECKING:
    from kafkasim.broker.replica_manager import ReplicaManager


class DelayedProduce(DelayedOperation):
    def __init__(self, replica_manager: ReplicaManager, topic: str, partition: int, required_offset: int,
                 timeout_ms: float) -> None:
        super().__init__(timeout_ms)
        self.replica_manager = replica_manager
        self.topic, self.partition, self.required_offset = topic, partition, required_offset
        self.error = E.NONE  # the partition's error in the response once completed

    def try_complete(self) -> bool:
        """The partition is looked up each time: a deleted or re-created one answers for itself."""
        p = self.replica_manager.partitions.get((self.topic, self.partition))
        if p is None or p.offline:
            self.error = E.NOT_LEADER_OR_FOLLOWER if p is None else E.KAFKA_STORAGE_ERROR
            return self.force_complete()
        done, self.error = p.check_enough_replicas_reach_offset(self.required_offset)
        return self.force_complete() if done else False

    def on_expiration(self) -> None:
        self.error = E.REQUEST_TIMED_OUT
