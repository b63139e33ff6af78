"""Transactional offset commits (TxnOffsetCommit 0-4) — Kafka 3.9's GroupCoordinator
.handleTxnCommitOffsets, GroupMetadataManager.storeOffsets with a producer id and
handleTxnCompletion, GroupMetadata's pending transactional offsets.

A transactional producer's offsets are written to the group's `__consumer_offsets` partition in a
transactional batch of its producer id/epoch, and kept per producer id as pending: invisible to
OffsetFetch (require_stable answers UNSTABLE_OFFSET_COMMIT for them) until the transaction
coordinator's marker lands on that partition (WriteTxnMarkers calls
`on_transaction_completed`): COMMIT materialises them (a later log offset wins), ABORT drops them.

Before anything is written the group's offsets partition is verified with the transaction
coordinator (KIP-890 part 1, add_partitions_to_txn_manager.py) unless the producer already has a
transaction ongoing there: offsets of a transaction that never did AddOffsetsToTxn get
INVALID_TXN_STATE (TRANSACTION_ABORTABLE from v4), an unknown producer id
INVALID_PRODUCER_ID_MAPPING, a fenced epoch INVALID_PRODUCER_EPOCH — before the member and
generation are looked at (GroupCoordinator.handleTxnCommitOffsets).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkasim.broker.add_partitions_to_txn_manager import maybe_start_transaction_verification
from kafkasim.broker.group.manager import (
    GROUP_METADATA_TOPIC_NAME,
    offset_commit_error,
    offset_commit_key,
    offset_commit_value,
)
from kafkasim.broker.group.metadata import (
    UNKNOWN_MEMBER_ID,
    CommitRecordMetadataAndOffset,
    GroupMetadata,
    GroupState,
    OffsetAndMetadata,
    TopicPartition,
)
from kafkasim.broker.transaction.marker_append import append_coordinator_batch
from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.headers import RequestHeader
from kafkasim.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest, TxnOffsetCommitResponse
from kafkasim.protocol.primitives import Message
from kafkasim.records.batch import NO_SEQUENCE, Record, build_batch
from kafkasim.storage.verification import SENTINEL, VerificationGuard

if TYPE_CHECKING:
    from kafkasim.broker.api_registry import ApiRegistry
    from kafkasim.broker.group.coordinator import GroupCoordinator
    from kafkasim.broker.group.manager import GroupMetadataManager
    from kafkasim.broker.metadata_cache import MetadataCache
    from kafkasim.broker.replica_manager import ReplicaManager
    from kafkasim.runtime.api import NodeRuntime

TXN_OFFSET_COMMIT_VERSIONS = (0, 4)
Offsets = dict[TopicPartition, OffsetAndMetadata]


def complete_pending_txn_offset_commit(group: GroupMetadata, producer_id: int, is_commit: bool) -> int:
    """GroupMetadata.completePendingTxnOffsetCommit; how many offsets became visible."""
    pending = group.pending_transactional_offset_commits.pop(producer_id, {})
    if not is_commit:
        return 0
    applied = 0
    for tp, entry in pending.items():
        current = group.offsets.get(tp)
        if entry.appended_batch_offset is not None and (current is None or current.older_than(entry)):
            group.offsets[tp] = entry
            applied += 1
    return applied


def handle_txn_completion(manager: GroupMetadataManager, producer_id: int, offsets_partitions: list[int],
                          is_commit: bool) -> None:
    """GroupMetadataManager.handleTxnCompletion: every group of those partitions."""
    wanted = set(offsets_partitions)
    for group in manager.current_groups():
        pending = group.pending_transactional_offset_commits
        if manager.partition_for(group.group_id) in wanted and producer_id in pending:
            applied = complete_pending_txn_offset_commit(group, producer_id, is_commit)
            manager.rt.trace("txn_offsets_completed", group=group.group_id, producer_id=producer_id,
                             committed=is_commit, applied=applied)


async def store_txn_offsets(manager: GroupMetadataManager, group: GroupMetadata, producer_id: int,
                            producer_epoch: int, offsets: Offsets,
                            verification_guard: VerificationGuard | None = None) -> dict[TopicPartition, int]:
    filtered = {tp: om for tp, om in offsets.items()
                if om.metadata is None or len(om.metadata) <= manager.config.offset_metadata_max_bytes}
    if not filtered:
        return {tp: E.OFFSET_METADATA_TOO_LARGE for tp in offsets}
    partition = manager.partition_for(group.group_id)
    now = manager.rt.now_ms()
    records = [Record(now, offset_commit_key(group.group_id, tp), offset_commit_value(om))
               for tp, om in filtered.items()]
    batch = build_batch(records, producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=0,
                        is_transactional=True)
    pending = group.pending_transactional_offset_commits.setdefault(producer_id, {})
    for tp, om in filtered.items():
        pending[tp] = CommitRecordMetadataAndOffset(None, om)
    code, base_offset = await _append(manager, partition, batch, verification_guard)
    for tp, om in filtered.items():
        current = group.pending_transactional_offset_commits.get(producer_id, {})
        if current.get(tp) != CommitRecordMetadataAndOffset(None, om):
            continue  # completed, or replaced by a later commit, meanwhile
        if code == E.NONE and not group.is_state(GroupState.DEAD):
            current[tp] = CommitRecordMetadataAndOffset(base_offset, om)
        else:
            del current[tp]
    error = offset_commit_error(code)
    manager.rt.trace("txn_offsets_stored", group=group.group_id, producer_id=producer_id, partition=partition,
                     offsets=[[tp.topic, tp.partition, om.offset] for tp, om in filtered.items()], error=error)
    return {tp: error if tp in filtered else E.OFFSET_METADATA_TOO_LARGE for tp in offsets}


async def _append(manager: GroupMetadataManager, partition: int, batch: bytes,
                  verification_guard: VerificationGuard | None) -> tuple[int, int]:
    p = manager.replica_manager.get_partition(GROUP_METADATA_TOPIC_NAME, partition)
    if p is None or not p.is_leader:
        return E.NOT_LEADER_OR_FOLLOWER, -1
    base = p.log_end_offset
    code = await append_coordinator_batch(manager.rt, manager.replica_manager, GROUP_METADATA_TOPIC_NAME, partition,
                                          batch, manager.config.offsets_commit_timeout_ms, verification_guard)
    return code, base


async def verify_offsets_partition(manager: GroupMetadataManager, transactional_id: str, producer_id: int,
                                   producer_epoch: int, group_id: str, generic_error: bool
                                   ) -> tuple[int, VerificationGuard | None]:
    """The group's offsets partition verified with the transaction coordinator: (error, guard;
    None when verification is off)."""
    rm = manager.replica_manager
    if rm.add_partitions_to_txn_manager is None:
        return E.NONE, None
    tp = (GROUP_METADATA_TOPIC_NAME, manager.partition_for(group_id))
    errors, guards = await maybe_start_transaction_verification(
        rm, rm.add_partitions_to_txn_manager, transactional_id, producer_id, producer_epoch, {tp: NO_SEQUENCE},
        generic_error)
    if tp in errors:
        return offset_commit_error(errors[tp]), None
    return E.NONE, guards.get(tp, SENTINEL)


async def handle_txn_commit_offsets(coordinator: GroupCoordinator, group_id: str, producer_id: int,
                                    producer_epoch: int, member_id: str, group_instance_id: str | None,
                                    generation_id: int, offsets: Offsets, transactional_id: str = "",
                                    generic_error: bool = False) -> dict[TopicPartition, int]:
    error = coordinator.validate_group_status(group_id, A.TXN_OFFSET_COMMIT)
    if error is not None:
        return {tp: error for tp in offsets}
    manager = coordinator.group_manager
    group = manager.get_group(group_id) or manager.add_group(GroupMetadata(group_id, GroupState.EMPTY,
                                                                           coordinator.rt.now_ms()))
    code, guard = await verify_offsets_partition(manager, transactional_id, producer_id, producer_epoch, group_id,
                                                 generic_error)
    if code != E.NONE:
        return {tp: code for tp in offsets}
    if group.is_state(GroupState.DEAD):
        return {tp: E.COORDINATOR_NOT_AVAILABLE for tp in offsets}
    if group_instance_id is not None and group.current_static_member_id(group_instance_id) not in (None, member_id):
        return {tp: E.FENCED_INSTANCE_ID for tp in offsets}
    if member_id != UNKNOWN_MEMBER_ID and not group.has(member_id):
        return {tp: E.UNKNOWN_MEMBER_ID for tp in offsets}
    if generation_id >= 0 and generation_id != group.generation_id:
        return {tp: E.ILLEGAL_GENERATION for tp in offsets}
    return await store_txn_offsets(manager, group, producer_id, producer_epoch, offsets, guard)


class TxnOffsetCommitApi:
    def __init__(self, rt: NodeRuntime, coordinator: GroupCoordinator, metadata_cache: MetadataCache) -> None:
        self.rt, self.coordinator, self.metadata_cache = rt, coordinator, metadata_cache

    async def handle(self, header: RequestHeader, req: TxnOffsetCommitRequest) -> Message:
        version = header.request_api_version
        now = self.rt.now_ms()
        errors: dict[TopicPartition, int] = {}
        offsets: Offsets = {}
        for t in req.topics:
            meta = self.metadata_cache.topic(t.name)
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                if meta is None or p.partition_index not in meta.partitions:
                    errors[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                epoch = p.committed_leader_epoch if version >= 2 else -1
                offsets[tp] = OffsetAndMetadata(p.committed_offset, epoch, p.committed_metadata or "", now, None)
        if offsets:
            v3 = version >= 3
            errors.update(await handle_txn_commit_offsets(
                self.coordinator, req.group_id, req.producer_id, req.producer_epoch,
                req.member_id if v3 else UNKNOWN_MEMBER_ID, req.group_instance_id if v3 else None,
                req.generation_id if v3 else -1, offsets, req.transactional_id, generic_error=version >= 4))
        if version < 2:  # clients before 2.0 do not know the loading error (KAFKA-7296)
            errors = {tp: E.COORDINATOR_NOT_AVAILABLE if c == E.COORDINATOR_LOAD_IN_PROGRESS else c
                      for tp, c in errors.items()}
        T = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
        P = T.TxnOffsetCommitResponsePartition
        return TxnOffsetCommitResponse(throttle_time_ms=0, topics=[
            T(name=t.name, partitions=[P(partition_index=p.partition_index,
                                         error_code=errors[TopicPartition(t.name, p.partition_index)])
                                       for p in t.partitions]) for t in req.topics])


def register(apis: ApiRegistry, coordinator: GroupCoordinator, metadata_cache: MetadataCache,
             replica_manager: ReplicaManager | None = None) -> None:
    apis.register(A.TXN_OFFSET_COMMIT, *TXN_OFFSET_COMMIT_VERSIONS,
                  TxnOffsetCommitApi(coordinator.rt, coordinator, metadata_cache).handle)
