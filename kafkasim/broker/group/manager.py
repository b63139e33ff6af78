"""GroupMetadataManager: the `__consumer_offsets` log behind the group coordinator — Kafka's
kafka.coordinator.group.GroupMetadataManager (3.9): the in-memory cache of groups and their
committed offsets, what is appended to the log for them, replaying the log on becoming leader
of a partition, tombstones, and offset retention.

Record layouts in `__consumer_offsets` (every key and value starts with an int16 version, then
the struct of Kafka's group-coordinator schemas, encoded non-flexibly; kafkasim.protocol.
messages.consumer_offsets has the generated classes):

    offset commit   key   int16 1 | OffsetCommitKey v1   group STRING, topic STRING, partition INT32
                    value int16 3 | OffsetCommitValue v3 offset INT64, leader_epoch INT32,
                                                         metadata STRING, commit_timestamp INT64
                       or int16 1 | OffsetCommitValue v1 offset INT64, metadata STRING,
                                                         commit_timestamp INT64, expire_timestamp INT64
                                    (v1 only when the commit carried retention_time_ms, v2-v4)
    group metadata  key   int16 2 | GroupMetadataKey v2  group STRING
                    value int16 3 | GroupMetadataValue v3 protocol_type STRING, generation INT32,
                                    protocol NULLABLE_STRING, leader NULLABLE_STRING,
                                    current_state_timestamp INT64,
                                    members [member_id STRING, group_instance_id NULLABLE_STRING,
                                             client_id STRING, client_host STRING,
                                             rebalance_timeout INT32, session_timeout INT32,
                                             subscription BYTES, assignment BYTES]
    tombstone       the key with a null value (offset deleted / expired, group deleted)

These are the versions Kafka 3.9 writes with inter.broker.protocol.version >= 2.3 (the values'
flexible v4 is never written by 3.9). Records go in one uncompressed batch v2 with CreateTime
per store, appended through the ReplicaManager like a producer's batch; a group is mapped to
partition `Utils.abs(groupId.hashCode) % offsets.topic.num.partitions` with Java's
String.hashCode, so a group lands on the same partition number as on a real Kafka broker.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafkasim.broker.config import BrokerConfig
from kafkasim.broker.group.delayed import DelayedGroupAppend
from kafkasim.broker.group.metadata import (
    CommitRecordMetadataAndOffset,
    GroupMetadata,
    GroupState,
    MemberMetadata,
    OffsetAndMetadata,
    PendingTxnOffsets,
    TopicPartition,
)
from kafkasim.broker.metadata_cache import MetadataCache
from kafkasim.broker.purgatory import TopicPartitionOperationKey
from kafkasim.broker.replica_manager import ReplicaManager
from kafkasim.broker.zk.java_compat import java_string_hash_code, kafka_utils_abs
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.consumer_offsets import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
)
from kafkasim.records.batch import (
    ControlRecordType,
    Record,
    build_batch,
    decode_batch_records,
    iter_batches,
    parse_control_key,
)
from kafkasim.runtime.api import NodeRuntime
from kafkasim.storage.producer_state import AppendOrigin

GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"
OFFSET_COMMIT_KEY_VERSION = 1          # OffsetCommitKey.HIGHEST_SUPPORTED_VERSION
GROUP_METADATA_KEY_VERSION = 2         # GroupMetadataKey.HIGHEST_SUPPORTED_VERSION
OFFSET_VALUE_VERSION = 3               # highest non-flexible OffsetCommitValue
OFFSET_VALUE_VERSION_WITH_EXPIRE = 1   # the one version with expire_timestamp
GROUP_VALUE_VERSION = 3                # highest non-flexible GroupMetadataValue
INVALID_OFFSET = -1
NO_PARTITION_LEADER_EPOCH = -1
DEFAULT_TIMESTAMP = -1
_INT16 = struct.Struct(">h")


# ---------------------------------------------------------------- hashing
def partition_for_group(group_id: str, partitions: int) -> int:
    return kafka_utils_abs(java_string_hash_code(group_id)) % partitions


# ---------------------------------------------------------------- record codec
def offset_commit_key(group_id: str, tp: TopicPartition) -> bytes:
    key = OffsetCommitKey(group=group_id, topic=tp.topic, partition=tp.partition)
    return _INT16.pack(OFFSET_COMMIT_KEY_VERSION) + key.encode(OFFSET_COMMIT_KEY_VERSION)


def group_metadata_key(group_id: str) -> bytes:
    return _INT16.pack(GROUP_METADATA_KEY_VERSION) + GroupMetadataKey(group=group_id).encode(GROUP_METADATA_KEY_VERSION)


def offset_commit_value(om: OffsetAndMetadata) -> bytes:
    version = OFFSET_VALUE_VERSION_WITH_EXPIRE if om.expire_timestamp_ms is not None else OFFSET_VALUE_VERSION
    value = OffsetCommitValue(offset=om.offset, metadata=om.metadata, commit_timestamp=om.commit_timestamp_ms)
    if version == OFFSET_VALUE_VERSION:
        value.leader_epoch = om.leader_epoch
    else:
        assert om.expire_timestamp_ms is not None
        value.expire_timestamp = om.expire_timestamp_ms
    return _INT16.pack(version) + value.encode(version)


def group_metadata_value(group: GroupMetadata, assignment: dict[str, bytes]) -> bytes:
    members = []
    for m in group.members.values():
        if group.protocol_name is None:
            raise ValueError("attempted to write non-empty group metadata with no defined protocol")
        members.append(GroupMetadataValue.MemberMetadata(
            member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
            client_host=m.client_host, rebalance_timeout=m.rebalance_timeout_ms, session_timeout=m.session_timeout_ms,
            subscription=m.metadata(group.protocol_name), assignment=assignment[m.member_id]))
    value = GroupMetadataValue(protocol_type=group.protocol_type or "", generation=group.generation_id,
                               protocol=group.protocol_name, leader=group.leader_or_none,
                               current_state_timestamp=group.current_state_timestamp_or_default(), members=members)
    return _INT16.pack(GROUP_VALUE_VERSION) + value.encode(GROUP_VALUE_VERSION)


@dataclass(frozen=True)
class OffsetKey:
    version: int
    group: str
    tp: TopicPartition


@dataclass(frozen=True)
class GroupKey:
    version: int
    group: str


@dataclass(frozen=True)
class UnknownKey:
    version: int


BaseKey = OffsetKey | GroupKey | UnknownKey


def read_message_key(buf: bytes) -> BaseKey:
    (version,) = _INT16.unpack_from(buf, 0)
    body = memoryview(buf)[2:]
    if OffsetCommitKey.MIN_VERSION <= version <= OffsetCommitKey.MAX_VERSION:
        k = OffsetCommitKey.decode(body, version)
        return OffsetKey(version, k.group, TopicPartition(k.topic, k.partition))
    if GroupMetadataKey.MIN_VERSION <= version <= GroupMetadataKey.MAX_VERSION:
        return GroupKey(version, GroupMetadataKey.decode(body, version).group)
    return UnknownKey(version)


def read_offset_message_value(buf: bytes | None) -> OffsetAndMetadata | None:
    if buf is None:
        return None  # tombstone
    (version,) = _INT16.unpack_from(buf, 0)
    if not OffsetCommitValue.MIN_VERSION <= version <= OffsetCommitValue.MAX_VERSION:
        raise ValueError(f"unknown offset message version {version}")
    v = OffsetCommitValue.decode(memoryview(buf)[2:], version)
    return OffsetAndMetadata(offset=v.offset, leader_epoch=v.leader_epoch, metadata=v.metadata,
                             commit_timestamp_ms=v.commit_timestamp,
                             expire_timestamp_ms=(None if v.expire_timestamp == DEFAULT_TIMESTAMP
                                                  else v.expire_timestamp))


def read_group_message_value(group_id: str, buf: bytes | None, now_ms: int) -> GroupMetadata | None:
    if buf is None:
        return None  # tombstone
    (version,) = _INT16.unpack_from(buf, 0)
    if not GroupMetadataValue.MIN_VERSION <= version <= GroupMetadataValue.MAX_VERSION:
        raise ValueError(f"unknown group metadata message version {version}")
    v = GroupMetadataValue.decode(memoryview(buf)[2:], version)
    members = [MemberMetadata(member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                              client_host=m.client_host,
                              rebalance_timeout_ms=m.session_timeout if version == 0 else m.rebalance_timeout,
                              session_timeout_ms=m.session_timeout, protocol_type=v.protocol_type,
                              supported_protocols=[(v.protocol or "", bytes(m.subscription))],
                              assignment=bytes(m.assignment))
               for m in v.members]
    return GroupMetadata.load_group(
        group_id, GroupState.STABLE if members else GroupState.EMPTY, v.generation, v.protocol_type, v.protocol,
        v.leader, None if v.current_state_timestamp == -1 else v.current_state_timestamp, members, now_ms)


# ---------------------------------------------------------------- error mapping
def store_group_error(code: int) -> int:
    """An append error as the GroupCoordinator reports it for a group-metadata write."""
    if code in (E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return E.COORDINATOR_NOT_AVAILABLE
    if code in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        return E.NOT_COORDINATOR
    if code == E.REQUEST_TIMED_OUT:
        return E.REBALANCE_IN_PROGRESS
    if code in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE, E.INVALID_FETCH_SIZE):
        return E.UNKNOWN_SERVER_ERROR
    return code


def offset_commit_error(code: int) -> int:
    """Kafka's GroupMetadataManager.maybeConvertOffsetCommitError."""
    if code == E.NETWORK_EXCEPTION:
        return E.COORDINATOR_LOAD_IN_PROGRESS
    if code in (E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return E.COORDINATOR_NOT_AVAILABLE
    if code in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        return E.NOT_COORDINATOR
    if code in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE, E.INVALID_FETCH_SIZE):
        return E.INVALID_COMMIT_OFFSET_SIZE
    return code


@dataclass(frozen=True)
class PartitionData:
    """One partition of an OffsetFetch answer."""

    offset: int
    leader_epoch: int
    metadata: str
    error: int


UNKNOWN_OFFSET = PartitionData(INVALID_OFFSET, NO_PARTITION_LEADER_EPOCH, "", E.NONE)

GroupCallback = Callable[[GroupMetadata], None]
Selector = Callable[[GroupMetadata], dict[TopicPartition, OffsetAndMetadata]]


class GroupMetadataManager:
    def __init__(self, rt: NodeRuntime, config: BrokerConfig, replica_manager: ReplicaManager,
                 metadata_cache: MetadataCache) -> None:
        self.rt = rt
        self.config = config
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        self.group_metadata_cache: dict[str, GroupMetadata] = {}
        self.loading_partitions: set[int] = set()
        self.owned_partitions: set[int] = set()
        self.epoch_for_partition: dict[int, int] = {}
        self.shutting_down = False

    # ---------------------------------------------------------------- partitions
    def partition_count(self) -> int:
        """The partition count of `__consumer_offsets`: the topic's, once it exists (so a changed
        config cannot remap groups), else offsets.topic.num.partitions — what Kafka reads at
        startup from ZooKeeper."""
        meta = self.metadata_cache.topic(GROUP_METADATA_TOPIC_NAME)
        if meta is not None and meta.partitions:
            return len(meta.partitions)
        return self.config.offsets_topic_num_partitions

    def partition_for(self, group_id: str) -> int:
        return partition_for_group(group_id, self.partition_count())

    def is_partition_owned(self, partition: int) -> bool:
        return partition in self.owned_partitions

    def is_partition_loading(self, partition: int) -> bool:
        return partition in self.loading_partitions

    def is_group_local(self, group_id: str) -> bool:
        return self.is_partition_owned(self.partition_for(group_id))

    def is_group_loading(self, group_id: str) -> bool:
        return self.is_partition_loading(self.partition_for(group_id))

    @property
    def is_loading(self) -> bool:
        return bool(self.loading_partitions)

    def group_not_exists(self, group_id: str) -> bool:
        group = self.group_metadata_cache.get(group_id)
        return self.is_group_local(group_id) and (group is None or group.is_state(GroupState.DEAD))

    # ---------------------------------------------------------------- cache
    def current_groups(self) -> list[GroupMetadata]:
        return list(self.group_metadata_cache.values())

    def get_group(self, group_id: str) -> GroupMetadata | None:
        return self.group_metadata_cache.get(group_id)

    def get_or_maybe_create_group(self, group_id: str, create_if_not_exist: bool) -> GroupMetadata | None:
        group = self.group_metadata_cache.get(group_id)
        if group is None and create_if_not_exist:
            group = self.group_metadata_cache[group_id] = GroupMetadata(group_id, GroupState.EMPTY, self.rt.now_ms())
        return group

    def add_group(self, group: GroupMetadata) -> GroupMetadata:
        return self.group_metadata_cache.setdefault(group.group_id, group)

    # ---------------------------------------------------------------- appends
    def _local_partition(self, partition: int) -> Any:
        p = self.replica_manager.get_partition(GROUP_METADATA_TOPIC_NAME, partition)
        return p if p is not None and p.is_leader else None

    async def _append(self, partition: int, records: list[Record], required_acks: int) -> tuple[int, int]:
        """Append one batch; returns (error code, base offset). With required_acks=-1 this
        returns only once the high watermark covers the batch (acks=all: with one replica in the
        ISR that is the local append; with replication, when the followers have it)."""
        if self._local_partition(partition) is None:
            return E.NOT_LEADER_OR_FOLLOWER, -1
        batch = build_batch(records)
        result = await self.replica_manager.append_records(GROUP_METADATA_TOPIC_NAME, partition, batch,
                                                           origin=AppendOrigin.COORDINATOR)
        if result.error_code != E.NONE:
            return result.error_code, -1
        if required_acks == -1:
            last_offset = result.base_offset + len(records) - 1
            code = await self._await_high_watermark(partition, last_offset)
            if code != E.NONE:
                return code, -1
        return E.NONE, result.base_offset

    async def _await_high_watermark(self, partition: int, last_offset: int) -> int:
        p = self._local_partition(partition)
        if p is None:
            return E.NOT_LEADER_OR_FOLLOWER
        timeout = self.config.offsets_commit_timeout_ms
        deadline = self.rt.monotonic_ms() + timeout
        op = DelayedGroupAppend(p, last_offset, timeout)
        key = TopicPartitionOperationKey(GROUP_METADATA_TOPIC_NAME, partition)
        if not await self.replica_manager.delayed_request_purgatory.await_completion(op, [key], deadline):
            return E.REQUEST_TIMED_OUT
        return E.NONE

    async def store_group(self, group: GroupMetadata, assignment: dict[str, bytes]) -> int:
        """Append the group's metadata record (acks=all); returns the error for the coordinator."""
        partition = self.partition_for(group.group_id)
        if self._local_partition(partition) is None:
            return E.NOT_COORDINATOR
        now = self.rt.now_ms()
        record = Record(now, group_metadata_key(group.group_id), group_metadata_value(group, assignment))
        code, _ = await self._append(partition, [record], required_acks=-1)
        self.rt.trace("group_stored", group=group.group_id, generation=group.generation_id, partition=partition,
                      members=len(group.members), error=code)
        return store_group_error(code)

    def _valid_metadata(self, metadata: str | None) -> bool:
        return metadata is None or len(metadata) <= self.config.offset_metadata_max_bytes

    async def store_offsets(self, group: GroupMetadata, consumer_id: str,
                            offsets: dict[TopicPartition, OffsetAndMetadata]) -> dict[TopicPartition, int]:
        """Append the commits (acks=all), then make them visible in the cache; per-partition
        errors. Visible only after the append, so OffsetFetch never returns an offset that a
        crash could still lose."""
        filtered = {tp: om for tp, om in offsets.items() if self._valid_metadata(om.metadata)}
        if not filtered:
            return {tp: E.OFFSET_METADATA_TOO_LARGE for tp in offsets}
        partition = self.partition_for(group.group_id)
        if self._local_partition(partition) is None:
            return {tp: E.NOT_COORDINATOR for tp in offsets}
        now = self.rt.now_ms()
        records = [Record(now, offset_commit_key(group.group_id, tp), offset_commit_value(om))
                   for tp, om in filtered.items()]
        group.prepare_offset_commit(filtered)
        acks = 1 if self.rt.seeded_bug("commit-before-replicated") else -1  # seeded bug: ack before replication
        code, base_offset = await self._append(partition, records, required_acks=acks)
        if code == E.NONE:
            if not group.is_state(GroupState.DEAD):
                for tp, om in filtered.items():
                    group.on_offset_commit_append(tp, CommitRecordMetadataAndOffset(base_offset, om))
            error = E.NONE
        else:
            if not group.is_state(GroupState.DEAD):
                for tp, om in filtered.items():
                    group.fail_pending_offset_write(tp, om)
            error = offset_commit_error(code)
        self.rt.trace("offsets_committed", group=group.group_id, member=consumer_id, partition=partition,
                      offsets=[[tp.topic, tp.partition, om.offset] for tp, om in filtered.items()], error=error)
        return {tp: (error if self._valid_metadata(om.metadata) else E.OFFSET_METADATA_TOO_LARGE)
                for tp, om in offsets.items()}

    def get_offsets(self, group_id: str, require_stable: bool,
                    tps: list[TopicPartition] | None) -> dict[TopicPartition, PartitionData]:
        """Never a stale offset: the cache is only ever ahead of the log by nothing."""
        group = self.group_metadata_cache.get(group_id)
        if group is None or group.is_state(GroupState.DEAD):
            return {tp: UNKNOWN_OFFSET for tp in tps or []}
        out: dict[TopicPartition, PartitionData] = {}
        for tp in (tps if tps is not None else list(group.offsets)):
            if require_stable and group.has_pending_offset_commits_for(tp):
                out[tp] = PartitionData(INVALID_OFFSET, NO_PARTITION_LEADER_EPOCH, "", E.UNSTABLE_OFFSET_COMMIT)
                continue
            om = group.offset(tp)
            out[tp] = UNKNOWN_OFFSET if om is None else PartitionData(om.offset, om.leader_epoch, om.metadata, E.NONE)
        return out

    # ---------------------------------------------------------------- load / unload
    def schedule_load_group_and_offsets(self, partition: int, coordinator_epoch: int,
                                        on_group_loaded: GroupCallback) -> None:
        """Become the coordinator of this partition's groups: replay its log in the background
        (requests for its groups get COORDINATOR_LOAD_IN_PROGRESS meanwhile)."""
        if not self._maybe_update_coordinator_epoch(partition, coordinator_epoch):
            return
        if partition in self.owned_partitions or partition in self.loading_partitions:
            return
        self.loading_partitions.add(partition)
        self.rt.spawn(self._load_groups_and_offsets(partition, coordinator_epoch, on_group_loaded),
                      name=f"load {GROUP_METADATA_TOPIC_NAME}-{partition}")

    async def _load_groups_and_offsets(self, partition: int, epoch: int, on_group_loaded: GroupCallback) -> None:
        started = self.rt.monotonic_ms()
        self.rt.trace("group_load_started", partition=partition, epoch=epoch)
        groups = offsets = 0
        try:
            if self.rt.buggify("group.load.slow"):  # the scheduler is behind: COORDINATOR_LOAD_IN_PROGRESS meanwhile
                await self.rt.sleep(1000)
            groups, offsets = await self._do_load(partition, on_group_loaded)
        finally:
            if partition in self.loading_partitions:
                self.loading_partitions.discard(partition)
                self.owned_partitions.add(partition)
            self.rt.trace("group_load_completed", partition=partition, epoch=epoch, groups=groups, offsets=offsets,
                          duration_ms=round(self.rt.monotonic_ms() - started, 3))

    async def pause_between_load_chunks(self) -> None:
        """Yield between chunks of a load so other requests are served meanwhile (Kafka loads on
        its own scheduler thread). A test may replace this to model a slow disk."""
        await self.rt.sleep(0)

    async def _do_load(self, partition: int, on_group_loaded: GroupCallback) -> tuple[int, int]:
        p = self._local_partition(partition)
        if p is None:
            return 0, 0
        loaded_offsets: dict[tuple[str, TopicPartition], CommitRecordMetadataAndOffset] = {}
        pending_offsets: dict[int, dict[tuple[str, TopicPartition], CommitRecordMetadataAndOffset]] = {}
        loaded_groups: dict[str, GroupMetadata] = {}
        removed_groups: dict[str, None] = {}
        now = self.rt.now_ms()
        offset = p.log_start_offset
        while offset < p.log_end_offset and not self.shutting_down:
            data = p.log.read(offset, 1 if self.rt.buggify("group.load.short_read")  # offsets.load.buffer.size=1
                              else self.config.offsets_load_buffer_size, max_offset=p.log_end_offset)
            if not data:
                break
            for pos, header in iter_batches(data):
                if header.is_control:
                    records = decode_batch_records(data, pos, validate=False)
                    if records and records[0].key is not None:
                        _, kind = parse_control_key(records[0].key)
                        committed = pending_offsets.pop(header.producer_id, {})
                        if kind == ControlRecordType.COMMIT:
                            for k, entry in committed.items():
                                current = loaded_offsets.get(k)
                                if current is None or current.older_than(entry):
                                    loaded_offsets[k] = entry
                else:
                    self._replay_batch(data, pos, header.is_transactional, header.producer_id, loaded_offsets,
                                       pending_offsets, loaded_groups, removed_groups, now)
                offset = header.next_offset
            await self.pause_between_load_chunks()
        return self._install_loaded(loaded_offsets, pending_offsets, loaded_groups, on_group_loaded)

    def _replay_batch(self, data: bytes, pos: int, is_txn: bool, producer_id: int,
                      loaded_offsets: dict[tuple[str, TopicPartition], CommitRecordMetadataAndOffset],
                      pending_offsets: dict[int, dict[tuple[str, TopicPartition], CommitRecordMetadataAndOffset]],
                      loaded_groups: dict[str, GroupMetadata], removed_groups: dict[str, None], now: int) -> None:
        batch_base_offset: int | None = None
        for record in decode_batch_records(data, pos, validate=False):
            if record.key is None:
                continue  # Kafka requires a key; a keyless record cannot be a coordinator record
            if batch_base_offset is None:
                batch_base_offset = record.offset
            key = read_message_key(record.key)
            if isinstance(key, OffsetKey):
                target = pending_offsets.setdefault(producer_id, {}) if is_txn else loaded_offsets
                om = read_offset_message_value(record.value)
                if om is None:
                    target.pop((key.group, key.tp), None)
                else:
                    target[(key.group, key.tp)] = CommitRecordMetadataAndOffset(batch_base_offset, om)
            elif isinstance(key, GroupKey):
                group = read_group_message_value(key.group, record.value, now)
                if group is not None:
                    removed_groups.pop(key.group, None)
                    loaded_groups[key.group] = group
                else:
                    loaded_groups.pop(key.group, None)
                    removed_groups[key.group] = None
            else:
                self.rt.trace("group_load_unknown_key", version=key.version)

    def _install_loaded(self, loaded_offsets: dict[tuple[str, TopicPartition], CommitRecordMetadataAndOffset],
                        pending_offsets: dict[int, dict[tuple[str, TopicPartition], CommitRecordMetadataAndOffset]],
                        loaded_groups: dict[str, GroupMetadata], on_group_loaded: GroupCallback) -> tuple[int, int]:
        """Kafka's doLoadGroupsAndOffsets, the end of it: every group gets its committed offsets
        and the transactional offsets still waiting for a marker (a transaction whose offsets the
        previous coordinator stored, committed after the move: the marker completes them here)."""
        by_group: dict[str, dict[TopicPartition, CommitRecordMetadataAndOffset]] = {}
        for (group_id, tp), entry in loaded_offsets.items():
            by_group.setdefault(group_id, {})[tp] = entry
        pending_by_group: dict[str, PendingTxnOffsets] = {}
        for producer_id, entries in pending_offsets.items():
            for (group_id, tp), entry in entries.items():
                pending_by_group.setdefault(group_id, {}).setdefault(producer_id, {})[tp] = entry
        for group in loaded_groups.values():
            self._load_group(group, by_group.get(group.group_id, {}), pending_by_group.get(group.group_id, {}),
                             on_group_loaded)
        # Groups that only store offsets (no members ever, or all gone) have no metadata record.
        offsets_only = [g for g in {**by_group, **pending_by_group} if g not in loaded_groups]
        for group_id in offsets_only:
            self._load_group(GroupMetadata(group_id, GroupState.EMPTY, self.rt.now_ms()), by_group.get(group_id, {}),
                             pending_by_group.get(group_id, {}), on_group_loaded)
        return len(loaded_groups) + len(offsets_only), len(loaded_offsets)

    def _load_group(self, group: GroupMetadata, offsets: dict[TopicPartition, CommitRecordMetadataAndOffset],
                    pending: PendingTxnOffsets, on_group_loaded: GroupCallback) -> None:
        # Offsets first, so no client ever sees the group without them.
        group.initialize_offsets(offsets, pending)
        if self.add_group(group) is group:
            on_group_loaded(group)

    def remove_groups_for_partition(self, partition: int, coordinator_epoch: int | None,
                                    on_group_unloaded: GroupCallback) -> None:
        """Resign as coordinator of this partition's groups (another broker leads it now)."""
        if not self._maybe_update_coordinator_epoch(partition, coordinator_epoch):
            return
        self.owned_partitions.discard(partition)
        self.loading_partitions.discard(partition)
        for group in list(self.group_metadata_cache.values()):
            if self.partition_for(group.group_id) == partition:
                on_group_unloaded(group)
                del self.group_metadata_cache[group.group_id]
        self.rt.trace("group_unload", partition=partition)

    def _maybe_update_coordinator_epoch(self, partition: int, epoch: int | None) -> bool:
        current = self.epoch_for_partition.get(partition)
        if epoch is None:
            return True
        if current is None or epoch > current:
            self.epoch_for_partition[partition] = epoch
            return True
        return epoch == current

    # ---------------------------------------------------------------- deletion and expiry
    async def cleanup_group_metadata(self, groups: list[GroupMetadata], selector: Selector) -> int:
        """Remove offsets chosen by `selector` from each group, mark groups that end up Empty
        with no offsets Dead, and append tombstones for both (acks=0: a lost tombstone is
        written again by the next cleanup)."""
        removed_total = 0
        for group in groups:
            group_id = group.group_id
            removed = selector(group)
            if group.is_state(GroupState.EMPTY) and not group.has_offsets():
                group.transition_to(GroupState.DEAD, self.rt.now_ms())
            is_dead, generation = group.is_state(GroupState.DEAD), group.generation_id
            partition = self.partition_for(group_id)
            if self._local_partition(partition) is None:
                continue
            now = self.rt.now_ms()
            tombstones = [Record(now, offset_commit_key(group_id, tp), None) for tp in removed]
            # No group tombstone for generation 0: such a group only ever stored offsets.
            if is_dead and self.group_metadata_cache.get(group_id) is group:
                del self.group_metadata_cache[group_id]
                if generation > 0:
                    tombstones.append(Record(now, group_metadata_key(group_id), None))
            if tombstones:
                code, _ = await self._append(partition, tombstones, required_acks=0)
                if code == E.NONE:
                    removed_total += len(removed)
                self.rt.trace("group_tombstones", group=group_id, partition=partition, offsets=len(removed),
                              group_removed=is_dead, error=code)
        return removed_total

    async def cleanup_expired_offsets(self) -> int:
        now = self.rt.now_ms()
        retention_ms = self.config.offsets_retention_minutes * 60 * 1000
        return await self.cleanup_group_metadata(self.current_groups(),
                                                 lambda g: g.remove_expired_offsets(now, retention_ms))

    def shutdown(self) -> None:
        self.shutting_down = True
