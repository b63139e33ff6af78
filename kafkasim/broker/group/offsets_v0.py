"""OffsetCommit v0 and OffsetFetch v0, which a ZooKeeper-mode Kafka 3.9 broker still answers from
ZooKeeper, not from the group coordinator (KafkaApis.commitOffsetsToZookeeper and
handleOffsetFetchRequestFromZookeeper): no group membership, generation or metadata is checked
or kept; a partition the cluster does not have is UNKNOWN_TOPIC_OR_PARTITION, and so is one
without a stored offset (OffsetFetchResponse.UNKNOWN_PARTITION).

Also the orders Kafka's response builders leave, which kafkasim reproduces so the bytes match:
OffsetCommitResponse.Builder (refusals first, grouped by topic as first seen) and the
java.util.HashMap the v0 OffsetFetch answer is gathered in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from kafkasim.broker.group.metadata import TopicPartition
from kafkasim.broker.zk.java_compat import java_string_hash
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from kafkasim.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from kafkasim.protocol.primitives import Message
from kafkasim.runtime.api import CoordinationError

if TYPE_CHECKING:
    from kafkasim.broker.group.zk_offsets import ZkConsumerOffsets
    from kafkasim.broker.metadata_cache import MetadataCache

_Item = TypeVar("_Item")


def java_hash_map_order(items: list[_Item], key: Callable[[_Item], str]) -> list[_Item]:
    """The iteration order of a java.util.HashMap<String, _> filled with `items` in order: by
    bucket (spread hash & (capacity - 1); capacity 16, doubled past 3/4 full), then insertion."""
    capacity = 16
    while len(items) > capacity * 3 // 4:
        capacity *= 2

    def bucket(item: _Item) -> int:
        h = java_string_hash(key(item))
        return (h ^ (h >> 16)) & (capacity - 1)
    return sorted(items, key=bucket)   # sorted() is stable: insertion order within a bucket


def commit_response(order: list[TopicPartition], errors: dict[TopicPartition, int]) -> Message:
    """OffsetCommitResponse.Builder: partitions in the order given (Kafka adds those refused by
    the metadata check first, then the coordinator's answers), grouped by topic as first seen."""
    T = OffsetCommitResponse.OffsetCommitResponseTopic
    P = T.OffsetCommitResponsePartition
    by_topic: dict[str, list[Any]] = {}
    for tp in order:
        by_topic.setdefault(tp.topic, []).append(P(partition_index=tp.partition, error_code=errors[tp]))
    return OffsetCommitResponse(throttle_time_ms=0, topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()])


class OffsetsV0Api:
    def __init__(self, metadata_cache: MetadataCache, offset_metadata_max_bytes: int,
                 zk_offsets: ZkConsumerOffsets | None) -> None:
        """`zk_offsets` None (a broker without ZooKeeper): COORDINATOR_NOT_AVAILABLE."""
        self.metadata_cache = metadata_cache
        self.offset_metadata_max_bytes = offset_metadata_max_bytes
        self.zk_offsets = zk_offsets

    async def commit(self, req: OffsetCommitRequest) -> Message:
        """OffsetCommit v0: each known partition's offset to ZooKeeper, no group checks."""
        errors: dict[TopicPartition, int] = {}
        valid: list[tuple[TopicPartition, Any]] = []
        for t in req.topics:
            meta = self.metadata_cache.topic(t.name)
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                if meta is None or p.partition_index not in meta.partitions:
                    errors[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    valid.append((tp, p))
        refused = list(errors)
        for tp, p in valid:
            if p.committed_metadata is not None and len(p.committed_metadata) > self.offset_metadata_max_bytes:
                errors[tp] = E.OFFSET_METADATA_TOO_LARGE
            elif self.zk_offsets is None:
                errors[tp] = E.COORDINATOR_NOT_AVAILABLE
            else:
                errors[tp] = await self._zk_commit(req.group_id, tp.topic, tp.partition, p.committed_offset)
        return commit_response([*refused, *(tp for tp, _ in valid)], errors)

    async def _zk_commit(self, group: str, topic: str, partition: int, offset: int) -> int:
        assert self.zk_offsets is not None
        try:
            await self.zk_offsets.set_or_create(group, topic, partition, offset)
        except CoordinationError:
            return E.UNKNOWN_SERVER_ERROR   # Errors.forException of a ZooKeeper failure
        return E.NONE

    async def fetch(self, req: OffsetFetchRequest) -> Message:
        """OffsetFetch v0: offsets from ZooKeeper."""
        T = OffsetFetchResponse.OffsetFetchResponseTopic
        P = T.OffsetFetchResponsePartition
        topics = []
        for t in req.topics or []:
            meta = self.metadata_cache.topic(t.name)
            parts = []
            for i in t.partition_indexes:
                offset, code = -1, E.UNKNOWN_TOPIC_OR_PARTITION   # OffsetFetchResponse.UNKNOWN_PARTITION
                if meta is not None and i in meta.partitions:
                    offset, code = await self._zk_fetch(req.group_id, t.name, i)
                parts.append(P(partition_index=i, committed_offset=offset, committed_leader_epoch=-1, metadata="",
                               error_code=code))
            topics.append(T(name=t.name, partitions=parts))
        # Kafka gathers the topics in a java.util.HashMap: answer them in its iteration order.
        return OffsetFetchResponse(throttle_time_ms=0, topics=java_hash_map_order(topics, lambda t: t.name))

    async def _zk_fetch(self, group: str, topic: str, partition: int) -> tuple[int, int]:
        if self.zk_offsets is None:
            return -1, E.COORDINATOR_NOT_AVAILABLE
        try:
            found = await self.zk_offsets.get(group, topic, partition)
        except CoordinationError:
            return -1, E.UNKNOWN_SERVER_ERROR
        return (-1, E.UNKNOWN_TOPIC_OR_PARTITION) if found is None else (found, E.NONE)
