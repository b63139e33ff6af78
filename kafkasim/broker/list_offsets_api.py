"""ListOffsets (api key 2), versions 0-9, as Kafka 3.9's KafkaApis answers them.

v0 (handleListOffsetRequestV0 -> UnifiedLog.legacyFetchOffsetsBefore): up to max_num_offsets
offsets, newest first, from the list "each segment's base offset (at least the log start
offset) with the segment's last-modified time, then the log end offset with now when the last
segment holds data"; LATEST starts at the end of that list, EARLIEST at its head, a timestamp at
the newest entry modified at or before it. A consumer never sees offsets above the high
watermark: they are replaced by it. A negative timestamp other than LATEST/EARLIEST is
UNSUPPORTED_VERSION.

v1+ (handleListOffsetRequestV1AndAbove): one offset per partition. A partition named twice is
INVALID_REQUEST; a special timestamp needs its version (LATEST/EARLIEST v1, MAX_TIMESTAMP v7,
EARLIEST_LOCAL v8, LATEST_TIERED v9) or is UNSUPPORTED_VERSION. Without tiered storage
EARLIEST_LOCAL is the log start offset and LATEST_TIERED is offset -1 of epoch -1. The leader
epoch is answered from v4.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse

if TYPE_CHECKING:
    from kafkasim.broker.partition import Partition
    from kafkasim.broker.replica_manager import ReplicaManager
    from kafkasim.protocol.messages.headers import RequestHeader
    from kafkasim.runtime.api import NodeRuntime

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
CONSUMER_REPLICA_ID = -1
DEBUGGING_REPLICA_ID = -2
TIMESTAMP_MIN_VERSION = {EARLIEST_TIMESTAMP: 1, LATEST_TIMESTAMP: 1, MAX_TIMESTAMP: 7, EARLIEST_LOCAL_TIMESTAMP: 8,
                         LATEST_TIERED_TIMESTAMP: 9}
TR = ListOffsetsResponse.ListOffsetsTopicResponse
PR = TR.ListOffsetsPartitionResponse


def leader_check(part: Partition | None, current_leader_epoch: int, only_leader: bool = True) -> int:
    """Partition.localLogWithEpochOrThrow: epoch first, then role."""
    if part is None:
        return E.UNKNOWN_TOPIC_OR_PARTITION
    if part.offline:
        return E.KAFKA_STORAGE_ERROR
    if current_leader_epoch >= 0 and current_leader_epoch < part.leader_epoch:
        return E.FENCED_LEADER_EPOCH
    if current_leader_epoch > part.leader_epoch:
        return E.UNKNOWN_LEADER_EPOCH
    if only_leader and not part.is_leader:
        return E.NOT_LEADER_OR_FOLLOWER
    return E.NONE


def legacy_offsets_before(part: Partition, timestamp: int, max_num_offsets: int, now_ms: int) -> list[int]:
    """UnifiedLog.legacyFetchOffsetsBefore."""
    log = part.log
    segments = log.segments
    table = [(max(s.base_offset, log.log_start_offset), s.last_modified_ms) for s in segments]
    if segments and segments[-1].size > 0:
        table.append((log.log_end_offset, now_ms))
    if timestamp == LATEST_TIMESTAMP:
        start = len(table) - 1
    elif timestamp == EARLIEST_TIMESTAMP:
        start = 0
    else:
        start = len(table) - 1
        while start >= 0 and table[start][1] > timestamp:
            start -= 1
    count = min(max_num_offsets, start + 1)
    return sorted((table[start - j][0] for j in range(max(count, 0))), reverse=True)


class ListOffsetsApi:
    def __init__(self, rt: NodeRuntime, replica_manager: ReplicaManager) -> None:
        self.rt = rt
        self.replica_manager = replica_manager

    async def handle(self, header: RequestHeader, req: ListOffsetsRequest) -> ListOffsetsResponse:
        version = header.request_api_version
        answer = self._v0 if version == 0 else self._v1_and_above
        counts = Counter((t.name, p.partition_index) for t in req.topics for p in t.partitions)
        topics = [TR(name=t.name, partitions=[answer(req, version, t.name, p, counts[(t.name, p.partition_index)] > 1)
                                              for p in t.partitions])
                  for t in req.topics]
        return ListOffsetsResponse(throttle_time_ms=0, topics=topics)

    def _v0(self, req: ListOffsetsRequest, version: int, topic: str, p: Any, duplicate: bool) -> Any:
        if p.timestamp < EARLIEST_TIMESTAMP:
            return PR(partition_index=p.partition_index, error_code=E.UNSUPPORTED_VERSION)
        part = self.replica_manager.get_partition(topic, p.partition_index)
        code = leader_check(part, -1, only_leader=req.replica_id != DEBUGGING_REPLICA_ID) if part is not None \
            else self.replica_manager.missing_partition_error(topic, p.partition_index)
        if code != E.NONE:
            return PR(partition_index=p.partition_index, error_code=code)
        assert part is not None
        offsets = legacy_offsets_before(part, p.timestamp, p.max_num_offsets, self.rt.now_ms())
        if req.replica_id == CONSUMER_REPLICA_ID and any(o > part.high_watermark for o in offsets):
            offsets = [part.high_watermark, *[o for o in offsets if o <= part.high_watermark]]
        return PR(partition_index=p.partition_index, error_code=E.NONE, old_style_offsets=offsets)

    def _v1_and_above(self, req: ListOffsetsRequest, version: int, topic: str, p: Any, duplicate: bool) -> Any:
        def error(code: int) -> Any:
            return PR(partition_index=p.partition_index, error_code=code, timestamp=-1, offset=-1, leader_epoch=-1)
        if duplicate:
            return error(E.INVALID_REQUEST)
        ts = p.timestamp
        if ts < 0 and version < TIMESTAMP_MIN_VERSION.get(ts, 32767):
            return error(E.UNSUPPORTED_VERSION)
        part = self.replica_manager.get_partition(topic, p.partition_index)
        current = p.current_leader_epoch if version >= 4 else -1
        code = leader_check(part, current, only_leader=req.replica_id != DEBUGGING_REPLICA_ID) if part is not None \
            else self.replica_manager.missing_partition_error(topic, p.partition_index)
        if code != E.NONE:
            return error(code)
        assert part is not None
        # Only a consumer's request is bounded by its isolation level; a replica's by the log end.
        is_client = req.replica_id == CONSUMER_REPLICA_ID
        found_ts, off, epoch = self._list_offset(part, ts, is_client, is_client and req.isolation_level == 1)
        return PR(partition_index=p.partition_index, error_code=E.NONE, timestamp=found_ts, offset=off,
                  leader_epoch=epoch if version >= 4 else -1)

    @staticmethod
    def _list_offset(part: Any, timestamp: int, is_client: bool, read_committed: bool = False) -> tuple[int, int, int]:
        """(timestamp, offset, leader epoch) as Partition.fetchOffsetForTimestamp finds them; a
        READ_COMMITTED consumer's latest offset is the last stable offset."""
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return -1, part.log_start_offset, part.leader_epoch
        if timestamp == LATEST_TIMESTAMP:
            latest = part.last_stable_offset if read_committed else part.high_watermark if is_client \
                else part.log_end_offset
            return -1, latest, part.leader_epoch
        if timestamp == LATEST_TIERED_TIMESTAMP:
            return -1, -1, -1
        if timestamp == MAX_TIMESTAMP:
            best = part.log.max_timestamp_and_offset()
            return (best[0], best[1], part.leader_epoch) if best else (-1, -1, -1)
        found = part.offset_for_timestamp(timestamp)
        if found is None or (is_client and found[0] >= part.high_watermark):
            return -1, -1, -1
        return found[1], found[0], part.leader_epoch
