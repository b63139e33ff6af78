"""Partition: one topic-partition replica on this broker (Kafka's kafka.cluster.Partition) — its
log, its role (leader or follower of leader epoch E), and as leader the state of the other
replicas, the ISR and the high watermark.

Leader:
  - high watermark = the smallest log end offset among the leader and the replicas of the
    *maximal* ISR (the ISR plus a replica whose addition is in flight) — so no offset counts as
    committed before every replica that is, or is about to be, in the ISR has it
    (maybe_increment_leader_hw); it stands still while the ISR is below the effective min ISR
    (see acks=all), whatever the writes' acks;
  - ISR expansion: a follower whose log end offset reached the high watermark and this leader
    epoch's start offset joins (maybe_expand_isr); ISR shrink: a follower not caught up for
    replica.lag.time.max.ms leaves (maybe_shrink_isr). Either is proposed to the controller
    with AlterPartition (Kafka 3.9's ZooKeeper mode, inter.broker.protocol.version 3.9) and
    takes effect when the controller has written the state znode; until then one change at a
    time is in flight;
  - acks=all: refused with NOT_ENOUGH_REPLICAS before the append when the ISR is smaller than
    the effective min ISR (min.insync.replicas capped by the replication factor); after it,
    complete when the high watermark passes the batch (NOT_ENOUGH_REPLICAS_AFTER_APPEND if the
    maximal ISR shrank below the minimum meanwhile).
Last stable offset (READ_COMMITTED reads and ListOffsets): min(the log's first unstable offset,
high watermark), recomputed from the log's producer state as the high watermark moves.
Follower: appends the leader's batches as fetched; its high watermark is the leader's, capped
by its own log end offset.

Requests waiting on the partition (DelayedFetch, DelayedProduce, the group coordinator's acks=all
appends) are checked whenever the log end offset, the high watermark or the ISR moves, or the
role changes (try_complete_delayed_requests: Kafka's tryCompleteDelayedRequests).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafkasim.broker.purgatory import DelayedOperationPurgatory, TopicPartitionOperationKey
from kafkasim.protocol import errors as E
from kafkasim.records.batch import MAGIC_VALUE_V2, BatchHeader, decode_batch_records, iter_batches, peek_magic
from kafkasim.records.errors import CorruptReason, CorruptRecordError
from kafkasim.runtime.api import Future
from kafkasim.storage.file_records import FileRecords
from kafkasim.storage.log import AppendInfo, Log, LogConfig
from kafkasim.storage.log_validator import stamp_log_append_time, uses_log_append_time
from kafkasim.storage.producer_state import AppendOrigin, ProducerStateError
from kafkasim.storage.txn_index import AbortedTxn
from kafkasim.storage.verification import VerificationGuard

UNKNOWN_OFFSET = -1
# A produced batch that decompresses past this is refused (CORRUPT_MESSAGE): a 1 MiB gzip of
# zeros is a gigabyte. Kafka streams the records and needs no bound; kafkasim holds them whole.
MAX_DECOMPRESSED_BATCH_BYTES = 128 * 1024 * 1024
LEADER_RECOVERY_RECOVERED, LEADER_RECOVERY_RECOVERING = 0, 1


class AppendError(Exception):
    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


@dataclass(init=False)
class ValidatedRecords:
    buf: bytearray
    headers: list[tuple[int, BatchHeader]]

    # Written out (init=False; its defaults are the only ones) so that mypyc compiles it: a
    # dataclass-made __init__ runs interpreted.
    def __init__(self, buf: bytearray, headers: list[tuple[int, BatchHeader]]) -> None:
        self.buf = buf
        self.headers = headers


def validate_produce_records(records: Any, config: LogConfig,
                             origin: AppendOrigin = AppendOrigin.CLIENT) -> ValidatedRecords:
    """Kafka's LogValidator checks: magic 2, a sane length, a CRC that matches, exactly one batch
    per partition (magic 2 producers send one), size within max.message.bytes, no control
    batches from clients (only the coordinator writes them: AppendOrigin.COORDINATOR,
    WriteTxnMarkers), and records that parse."""
    if records is None or len(records) == 0:
        raise AppendError(E.INVALID_RECORD, "no records")
    try:
        if peek_magic(records, 0) != MAGIC_VALUE_V2:
            raise AppendError(E.UNSUPPORTED_FOR_MESSAGE_FORMAT, "only record batch v2 (magic 2) is accepted")
        it = iter_batches(records, validate=True)
        headers = list(it)
    except CorruptRecordError as exc:
        code = E.CORRUPT_MESSAGE if exc.reason in (CorruptReason.CRC_MISMATCH, CorruptReason.BAD_LENGTH,
                                                    CorruptReason.TRUNCATED) else E.INVALID_RECORD
        raise AppendError(code, f"invalid record batch: {exc}") from exc
    if it.partial or it.position != len(records):
        raise AppendError(E.CORRUPT_MESSAGE, "trailing partial batch")
    if len(headers) != 1:
        raise AppendError(E.INVALID_RECORD, f"expected exactly one record batch, got {len(headers)}")
    for pos, h in headers:
        if h.size_in_bytes > config.max_message_bytes:
            raise AppendError(E.MESSAGE_TOO_LARGE, f"batch of {h.size_in_bytes} bytes > max.message.bytes")
        if h.is_control and origin == AppendOrigin.CLIENT:
            raise AppendError(E.INVALID_RECORD, "Clients are not allowed to write control records")
        if h.records_count <= 0 or h.last_offset_delta != h.records_count - 1:
            raise AppendError(E.INVALID_RECORD, "record count and last offset delta disagree")
        _check_records(records, pos)
    return ValidatedRecords(bytearray(records), headers)


def _check_records(records: Any, pos: int) -> None:
    """LogValidator iterates every record of the batch (decompressing it): a record whose
    lengths or varints do not fit is InvalidRecordException (INVALID_RECORD), and a batch that
    does not decompress is refused too — appended, it would fail every later reader."""
    try:
        decode_batch_records(records, pos, validate=False, max_decompressed=MAX_DECOMPRESSED_BATCH_BYTES)
    except CorruptRecordError as exc:
        code = E.CORRUPT_MESSAGE if exc.reason == CorruptReason.BAD_COMPRESSION else E.INVALID_RECORD
        raise AppendError(code, f"invalid record batch: {exc}") from exc


@dataclass
class Replica:
    """What the leader knows of a follower (Kafka's kafka.cluster.Replica)."""

    broker_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_time_ms: float = 0.0
    last_caught_up_time_ms: float = 0.0

    def update_fetch_state(self, fetch_offset: int, log_start_offset: int, fetch_time_ms: float,
                           leader_end_offset: int) -> None:
        """A follower fetch at `fetch_offset` (= its log end offset). It was caught up at this
        fetch if it asked for the leader's end; or at the previous fetch if it now asks for at
        least what the leader's end was then."""
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, fetch_time_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_start_offset = log_start_offset
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_log_end_offset = leader_end_offset
        self.last_fetch_time_ms = fetch_time_ms

    def is_caught_up(self, leader_end_offset: int, now_ms: float, lag_max_ms: int) -> bool:
        return leader_end_offset == self.log_end_offset or now_ms - self.last_caught_up_time_ms <= lag_max_ms

    def reset_replica_state(self, now_ms: float, leader_end_offset: int, is_new_leader: bool,
                            in_sync: bool) -> None:
        """On a new leader epoch: an ISR member counts as caught up now, others not at all
        (so they neither hold the high watermark back nor rejoin before fetching)."""
        self.last_caught_up_time_ms = now_ms if in_sync else 0.0
        if is_new_leader:
            self.log_end_offset = self.log_start_offset = UNKNOWN_OFFSET
            self.last_fetch_leader_log_end_offset = UNKNOWN_OFFSET
            self.last_fetch_time_ms = 0.0
        else:
            self.last_fetch_leader_log_end_offset = leader_end_offset
            self.last_fetch_time_ms = now_ms if in_sync else 0.0


@dataclass
class PartitionState:
    """The leader's view of a LeaderAndIsr partition state (controller -> broker)."""

    leader: int
    leader_epoch: int
    isr: list[int]
    replicas: list[int]
    partition_epoch: int = 0
    adding_replicas: list[int] = field(default_factory=list)
    removing_replicas: list[int] = field(default_factory=list)
    leader_recovery_state: int = LEADER_RECOVERY_RECOVERED
    is_new: bool = False


@dataclass
class PendingIsrChange:
    """An AlterPartition in flight (Kafka's PendingExpandIsr / PendingShrinkIsr)."""

    isr: list[int]            # the proposed ISR
    maximal_isr: list[int]    # what the high watermark waits for meanwhile
    leader_recovery_state: int


class DelayedOperations:
    """The requests waiting on one partition (Kafka's DelayedOperations in Partition.scala)."""

    def __init__(self, purgatory: DelayedOperationPurgatory, key: TopicPartitionOperationKey) -> None:
        self.purgatory, self.key = purgatory, key

    def check_and_complete_all(self) -> None:
        self.purgatory.check_and_complete(self.key)
# The AlterPartition answers after which Kafka's Partition.handleAlterPartitionError keeps the
# pending state and waits for the controller's LeaderAndIsr instead of retrying.
_ALTER_PARTITION_GIVE_UP = frozenset({E.UNKNOWN_TOPIC_OR_PARTITION, E.FENCED_LEADER_EPOCH,
                                      E.INVALID_UPDATE_VERSION, E.INVALID_REQUEST, E.NEW_LEADER_ELECTED})
# Sends a proposed ISR to the controller: (partition, proposed ISR, leader recovery state).
AlterPartitionSubmitter = Callable[["Partition", list[int], int], None]


class Partition:
    def __init__(self, topic: str, index: int, log: Log, leader_epoch: int, is_leader: bool,
                 local_broker_id: int = 0, high_watermark: int | None = None, *,
                 now_ms: Callable[[], float] = lambda: 0.0, replica_lag_time_max_ms: int = 30000,
                 alter_partition: AlterPartitionSubmitter | None = None,
                 delayed_operations: DelayedOperations | None = None,
                 is_alive_broker: Callable[[int], bool] = lambda _: True) -> None:
        self.topic, self.index, self.log = topic, index, log
        self.rt = log.rt  # the node the partition lives on: seeded bugs and invariants
        self.local_broker_id = local_broker_id
        self.leader_epoch = leader_epoch
        self.leader_id: int | None = local_broker_id if is_leader else None
        self.partition_epoch = 0
        self.leader_epoch_start_offset: int | None = log.log_end_offset if is_leader else None
        self.assignment: list[int] = [local_broker_id]
        self.isr: list[int] = [local_broker_id] if is_leader else []
        self.pending: PendingIsrChange | None = None
        self.leader_recovery_state = LEADER_RECOVERY_RECOVERED
        self.remote_replicas: dict[int, Replica] = {}
        # Kafka's defaults until the topic's configs are applied (AdminManager.apply_topic_config).
        self.min_insync_replicas = 1
        self.replica_lag_time_max_ms = replica_lag_time_max_ms   # replica.lag.time.max.ms
        self.now_ms = now_ms                                     # the runtime's monotonic clock
        # Is a broker alive in this broker's metadata cache (the controller's last UpdateMetadata)?
        self.is_alive_broker = is_alive_broker
        # Where ISR changes go (the ReplicaManager's AlterPartitionManager); None: nowhere, as for
        # a partition without a controller.
        self.alter_partition = alter_partition
        self.on_high_watermark_change: Callable[[Partition], None] | None = None
        # The requests (DelayedProduce/DelayedFetch) this partition's changes complete; None for
        # a partition outside a ReplicaManager (unit tests).
        self.delayed_operations = delayed_operations
        self.offline = False
        # Set while become_leader writes the new epoch's start offset: appends to the leader wait
        # for it (Kafka's leaderIsrUpdateLock, held by makeLeader, taken by appendRecordsToLeader).
        self._becoming_leader: Future[None] | None = None
        # A restarted replica resumes from its checkpointed high watermark (0 without one): what
        # it had beyond was never known to be committed.
        log.update_high_watermark(high_watermark if high_watermark is not None else
                                  (log.log_end_offset if is_leader else 0))

    # ---------------------------------------------------------------- offsets
    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    @is_leader.setter
    def is_leader(self, value: bool) -> None:  # single-broker callers (tests) set the role directly
        self.leader_id = self.local_broker_id if value else None
        if value and not self.isr:
            self.isr = [self.local_broker_id]

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        self.rt.invariant(not self.is_leader or offset >= self.high_watermark, "leader-high-watermark-never-moves-back")
        self.log.update_high_watermark(offset)

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def maximal_isr(self) -> list[int]:
        return self.pending.maximal_isr if self.pending is not None else self.isr

    @property
    def effective_min_isr(self) -> int:
        """Kafka's effectiveMinIsr (since 3.7, KIP-966): min.insync.replicas capped by the
        replication factor, as the topic config itself is not bounded by it."""
        return min(self.min_insync_replicas, len(self.remote_replicas) + 1)

    @property
    def is_under_min_isr(self) -> bool:
        """Kafka's isUnderMinIsr: a leader whose committed ISR is below the effective min ISR."""
        return self.is_leader and len(self.isr) < self.effective_min_isr

    # ---------------------------------------------------------------- role changes
    def is_stale(self, state: PartitionState) -> bool:
        """A LeaderAndIsr state older than the partition epoch held: Kafka's makeLeader and
        makeFollower skip it. An equal epoch is applied: an AlterPartition answer may have
        brought the epoch before the LeaderAndIsr that carries it."""
        return state.partition_epoch < self.partition_epoch

    def make_leader(self, state: PartitionState) -> bool:
        """LeaderAndIsr made this broker leader; returns whether it was not leader before (False
        for a stale state, skipped)."""
        if self.is_stale(state):
            return False
        is_new_leader = not self.is_leader
        is_new_epoch = state.leader_epoch > self.leader_epoch or is_new_leader
        self.rt.invariant(state.leader_epoch >= self.leader_epoch, "leader-epoch-never-decreases")
        # KIP-704, as Kafka 3.9's makeLeader: the leader of a RECOVERING partition (after an
        # unclean election) marks it RECOVERED locally and sends nothing; the controller learns
        # it from the next AlterPartition (an ISR change carries the leader's recovery state).
        self._update_assignment_and_isr(state.replicas, state.isr, LEADER_RECOVERY_RECOVERED)
        self.rt.invariant(self.local_broker_id in self.isr, "leader-in-isr")
        if is_new_epoch:
            start = self.log.log_end_offset
            now = self.now_ms()
            for r in self.remote_replicas.values():
                r.reset_replica_state(now, start, is_new_leader, r.broker_id in state.isr)
            self.leader_epoch = state.leader_epoch
            self.leader_epoch_start_offset = start
        self.partition_epoch = state.partition_epoch
        self.leader_id = self.local_broker_id
        self.pending = None
        self.maybe_increment_leader_hw()
        self.try_complete_delayed_requests()
        return is_new_leader

    async def become_leader(self, state: PartitionState) -> bool:
        """make_leader, then the new epoch's start offset written to the leader-epoch checkpoint,
        as one step for appends: Kafka's makeLeader does both under leaderIsrUpdateLock's write
        lock (LeaderEpochFileCache.assign writes the file synchronously) and appendRecordsToLeader
        takes its read lock, so no batch of the new epoch is appended before the epoch is on
        disk and the broker has become leader. Without the wait an append of the new epoch ran
        during the write, a power loss then cut it short, and the leader's record of having led
        the epoch (`become_leader`) was lost while a follower kept the epoch's batches
        (power-loss-default-flush-swarm seed 1442). Returns make_leader's answer."""
        if self.is_stale(state):
            return False  # skipped: nothing to record (an older epoch's assign would cut the cache)
        gate: Future[None] = self.rt.future()
        self._becoming_leader = gate
        try:
            new = self.make_leader(state)
            await self.log.maybe_assign_epoch_start_offset(state.leader_epoch, self.log.log_end_offset)
        finally:
            self._becoming_leader = None
            gate.set_result(None)
        return new

    def make_follower(self, state: PartitionState) -> bool:
        """LeaderAndIsr made this broker a follower of state.leader; returns whether the
        fetcher must (re)start (the leader epoch changed; False for a stale state, skipped)."""
        if self.is_stale(state):
            return False
        is_new_epoch = state.leader_epoch > self.leader_epoch or self.is_leader or self.leader_id is None
        self.rt.invariant(state.leader_epoch >= self.leader_epoch, "leader-epoch-never-decreases")
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.leader_epoch_start_offset = None
        self.partition_epoch = state.partition_epoch
        self.assignment = list(state.replicas)
        self.isr = []
        self.pending = None
        self.remote_replicas = {}
        self.leader_recovery_state = state.leader_recovery_state
        self.try_complete_delayed_requests()
        return is_new_epoch

    def _update_assignment_and_isr(self, replicas: list[int], isr: list[int], recovery: int) -> None:
        self.assignment = list(replicas)
        for b in list(self.remote_replicas):
            if b not in replicas:
                del self.remote_replicas[b]
        for b in replicas:
            if b != self.local_broker_id and b not in self.remote_replicas:
                self.remote_replicas[b] = Replica(b)
        # No ISR-within-replicas check here: Kafka's reassignment (KafkaController
        # onPartitionReassignment, step B3) sends LeaderAndIsr with the target replicas while the
        # ISR still holds the replicas being removed, until step B4 shrinks it.
        self.isr = list(isr)
        self.leader_recovery_state = recovery

    # ---------------------------------------------------------------- appends
    async def append_records_to_leader(self, validated: ValidatedRecords, required_acks: int = 1,
                                       origin: AppendOrigin = AppendOrigin.CLIENT,
                                       verification_guard: VerificationGuard | None = None) -> AppendInfo:
        while self._becoming_leader is not None:
            await self._becoming_leader  # become_leader in progress (leaderIsrUpdateLock)
        if not self.is_leader:
            raise AppendError(E.NOT_LEADER_OR_FOLLOWER, f"not the leader of {self.topic}-{self.index}")
        min_isr = self.effective_min_isr
        if required_acks == -1 and len(self.isr) < min_isr:
            raise AppendError(E.NOT_ENOUGH_REPLICAS,
                              f"The size of the current ISR {sorted(self.isr)} is insufficient to satisfy the "
                              f"min.isr requirement of {min_isr} for partition {self.topic}-{self.index}")
        append_time = -1
        if uses_log_append_time(self.log.config.message_timestamp_type):
            # Before the producer state looks at the batch: Kafka validates (and stamps) first.
            append_time = int(self.rt.now_ms())
            validated.headers = stamp_log_append_time(validated.buf, validated.headers, append_time)
        try:  # idempotence: a duplicate of one of a producer's last 5 batches answers its original offsets
            duplicate = self.log.producer_state_manager.analyze_append(validated.headers, self.log.log_end_offset,
                                                                       origin, validated.buf, verification_guard)
        except ProducerStateError as exc:
            raise AppendError(exc.error_code, str(exc)) from exc
        if duplicate is not None:
            return duplicate
        info = self.log.append_as_leader(validated.buf, validated.headers, self.leader_epoch, append_time)
        self.log.producer_state_manager.on_append(info)
        if self.log.needs_flush():
            # flush.messages reached: as in Kafka the flush happens inside the append, before the
            # high watermark moves, so no consumer reads what a power loss could take back.
            await self.log.flush()
        self.maybe_increment_leader_hw()
        self.try_complete_delayed_requests()
        return info

    async def append_records_to_follower(self, records: bytes, headers: list[tuple[int, BatchHeader]],
                                         leader_high_watermark: int, leader_log_start_offset: int) -> None:
        """The leader's batches, offsets and epochs as they are."""
        if headers:
            self.log.append_as_follower(records, headers)
            self.log.producer_state_manager.on_replicated_append(records, headers)
            if self.log.needs_flush():
                followed = (self.leader_id, self.leader_epoch)
                await self.log.flush()
                if self.is_leader or (self.leader_id, self.leader_epoch) != followed:
                    # A LeaderAndIsr changed our role during the flush. In Kafka it cannot: the
                    # fetcher appends and sets the high watermark under partitionMapLock, which
                    # makeLeader/makeFollower's removeFetcherForPartitions waits for. The old
                    # leader's high watermark no longer applies (as a new leader ours may already
                    # be past it); the records are in, the new role's fetches/HW take over. A leader
                    # never takes a high watermark from a fetch, whenever its role changed.
                    return
        if leader_log_start_offset > self.log.log_start_offset:
            try:
                self.log.delete_records(min(leader_log_start_offset, self.log.high_watermark))
            except Exception:  # the leader's start is ahead of our high watermark: catch up first
                pass
        new_hw = min(leader_high_watermark, self.log.log_end_offset)
        self.rt.invariant(not self.is_leader or new_hw >= self.high_watermark, "leader-high-watermark-never-moves-back")
        self.log.update_high_watermark(new_hw)
        self.try_complete_delayed_requests()

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, int]:
        """DelayedProduce's check: (done, error). Kafka's checkEnoughReplicasReachOffset counts
        the maximal ISR against the effective min ISR: a replica whose joining is in flight
        already holds the high watermark, so it counts for acks=all as well."""
        if not self.is_leader:
            return True, E.NOT_LEADER_OR_FOLLOWER
        if self.high_watermark >= required_offset:
            if len(self.maximal_isr) >= self.effective_min_isr:
                return True, E.NONE
            return True, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return False, E.NONE

    # ---------------------------------------------------------------- followers' fetches
    def update_follower_fetch_state(self, replica_id: int, fetch_offset: int, log_start_offset: int,
                                    leader_end_offset: int) -> None:
        replica = self.remote_replicas.get(replica_id)
        if replica is None:
            return
        replica.update_fetch_state(fetch_offset, log_start_offset, self.now_ms(), leader_end_offset)
        self.maybe_expand_isr(replica)
        self.maybe_increment_leader_hw()

    def maybe_increment_leader_hw(self) -> bool:
        """HW = min log end offset over the leader and the maximal ISR, plus any follower caught
        up enough to be about to join. An ISR member not heard from yet in this leader epoch
        (unknown log end offset) holds it where it is. It only moves forward, and not at all
        while the committed ISR is below the effective min ISR (Kafka 3.7+, KAFKA-15583 for
        KIP-966, in ZooKeeper mode too): with min.insync.replicas=2 a lone leader's acks=1
        writes stay invisible to consumers until a follower is back in the ISR."""
        if not self.is_leader or self.is_under_min_isr:
            return False
        leo, old = self.log.log_end_offset, self.log.high_watermark
        if leo <= old:
            return False  # the HW is at the log end already: nothing below can move it (hot: every follower fetch)
        now, new_hw = self.now_ms(), leo
        maximal = set(self.maximal_isr)
        for r in self.remote_replicas.values():
            known = r.log_end_offset != UNKNOWN_OFFSET
            joining = (r.broker_id not in maximal and known and self._isr_eligible(r.broker_id)
                       and r.is_caught_up(leo, now, self.replica_lag_time_max_ms))
            if r.broker_id in maximal or joining:
                new_hw = min(new_hw, r.log_end_offset if known else old)
        if self.rt.seeded_bug("hw-before-isr"):
            new_hw = leo  # seeded bug: the ISR is not waited for
        if new_hw <= old:
            return False
        self.log.update_high_watermark(new_hw)
        if self.on_high_watermark_change is not None:
            self.on_high_watermark_change(self)
        self.try_complete_delayed_requests()
        return True

    def _isr_eligible(self, broker_id: int) -> bool:
        """Kafka's Partition.isReplicaIsrEligible in ZooKeeper mode: the broker is alive in the
        metadata cache. A follower whose session expired stays out of the ISR, and is not waited
        for by the high watermark, until the controller announces it alive again, however far it
        has fetched (the controller would refuse it too). Also: it is assigned the partition."""
        return broker_id in self.assignment and self.is_alive_broker(broker_id)

    def maybe_expand_isr(self, replica: Replica) -> None:
        if self.pending is not None or replica.broker_id in self.isr or not self._isr_eligible(replica.broker_id):
            return
        start = self.leader_epoch_start_offset if self.leader_epoch_start_offset is not None else 0
        if replica.log_end_offset >= self.high_watermark and replica.log_end_offset >= start:
            new_isr = self.isr + [replica.broker_id]
            self._propose(new_isr, new_isr, self.leader_recovery_state)

    def maybe_shrink_isr(self) -> None:
        """Called every replica.lag.time.max.ms / 2 (isr-expiration)."""
        if not self.is_leader or self.pending is not None:
            return
        leo, now = self.log.log_end_offset, self.now_ms()
        out = [b for b in self.isr if b != self.local_broker_id and
               (self.remote_replicas.get(b) is None or
                not self.remote_replicas[b].is_caught_up(leo, now, self.replica_lag_time_max_ms))]
        if out:
            new_isr = [b for b in self.isr if b not in out]
            # The high watermark keeps waiting for the leaving replicas until the shrink commits.
            self._propose(new_isr, list(self.isr), self.leader_recovery_state)

    def _propose(self, isr: list[int], maximal: list[int], recovery: int) -> None:
        if self.alter_partition is None:
            return
        self.pending = PendingIsrChange(isr, maximal, recovery)
        self.alter_partition(self, isr, recovery)

    def on_alter_partition_response(self, error: int, leader_epoch: int, isr: list[int], partition_epoch: int,
                                    recovery: int) -> None:
        """The controller's answer to our AlterPartition."""
        if self.pending is None:
            return
        if error == E.NONE:
            # Kafka's handleAlterPartitionUpdate: an answer for another leader epoch, or older
            # than the partition epoch we hold (a LeaderAndIsr overtook it), is ignored and the
            # change stays pending until the controller's next LeaderAndIsr.
            if leader_epoch != self.leader_epoch or partition_epoch < self.partition_epoch:
                return
            added = set(isr) - set(self.isr)
            self.isr, self.partition_epoch, self.leader_recovery_state = list(isr), partition_epoch, recovery
            self.rt.invariant(added <= set(self.assignment), "isr-grows-only-with-replicas")
            self.rt.invariant(self.local_broker_id in self.isr, "leader-in-isr")
            self.pending = None
            self.maybe_increment_leader_hw()
            self.try_complete_delayed_requests()
        elif error in (E.INELIGIBLE_REPLICA, E.OPERATION_NOT_ATTEMPTED):
            self.pending = None  # the controller says it was not applied: back to the committed ISR
        elif error not in _ALTER_PARTITION_GIVE_UP and self.alter_partition is not None:
            # Anything else (UNKNOWN_SERVER_ERROR from a controller whose ZooKeeper write failed,
            # NOT_CONTROLLER for one partition) says nothing about what the controller holds:
            # send the same proposal again, as Kafka's Partition.handleAlterPartitionError does
            # (`case _ => ... Retrying`). Waiting instead would block every later ISR change.
            self.alter_partition(self, self.pending.isr, self.pending.leader_recovery_state)
        # UNKNOWN_TOPIC_OR_PARTITION, FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, ...: keep the
        # pending state until the LeaderAndIsr the controller will send (Kafka does the same).

    # ---------------------------------------------------------------- reads
    @property
    def last_stable_offset(self) -> int:
        """The LSO: the first offset of the earliest transaction not yet decided (or decided with
        its marker at or above the high watermark), capped by the high watermark — recomputed
        from the log's producer state as the high watermark moves (UnifiedLog.lastStableOffset)."""
        return self.log.last_stable_offset

    def read(self, offset: int, max_bytes: int, isolation_committed: bool,
             max_offset: int | None = None) -> FileRecords:
        """A consumer reads to the high watermark (READ_COMMITTED: to the LSO; read_committed()
        adds the aborted transactions), a follower to `max_offset` (the log end)."""
        if max_offset is None:
            max_offset = self.last_stable_offset if isolation_committed else self.high_watermark
        # File regions, not bytes: the socket server sends them with sendfile (Kafka's
        # FileRecords), so fetched data goes from the page cache to the socket.
        return self.log.read_records(offset, max_bytes, max_offset=max_offset)

    def read_committed(self, offset: int, max_bytes: int) -> tuple[FileRecords, list[AbortedTxn]]:
        """FetchIsolation.TXN_COMMITTED: up to the LSO, with the aborted transactions the
        consumer must skip in what it gets."""
        return self.log.read_committed(offset, max_bytes, self.last_stable_offset)

    def try_complete_delayed_requests(self) -> None:
        if self.delayed_operations is not None:
            self.delayed_operations.check_and_complete_all()

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        return self.log.offset_for_timestamp(timestamp)

    def last_offset_for_leader_epoch(self, current_leader_epoch: int, leader_epoch: int) -> tuple[int, int, int]:
        """OffsetForLeaderEpoch on the leader: (error, epoch, end offset) — the largest epoch
        <= the requested one this log knows and where it ends (Kafka's
        LeaderEpochFileCache.endOffsetFor). A follower asking with an epoch this leader does
        not know yet gets UNKNOWN_LEADER_EPOCH and asks again (KIP-279). The current leader
        epoch is checked before leadership, as Kafka's getLocalLog does: a replica that is no
        longer leader answers a client behind it FENCED_LEADER_EPOCH, not NOT_LEADER_OR_FOLLOWER."""
        if current_leader_epoch != -1 and current_leader_epoch < self.leader_epoch:
            return E.FENCED_LEADER_EPOCH, -1, -1
        if current_leader_epoch != -1 and current_leader_epoch > self.leader_epoch:
            return E.UNKNOWN_LEADER_EPOCH, -1, -1
        if not self.is_leader:
            return E.NOT_LEADER_OR_FOLLOWER, -1, -1
        entries = list(self.log.leader_epoch_cache.entries)
        if self.leader_epoch > (entries[-1][0] if entries else -1):
            # An epoch the cache has not recorded yet begins at the log end (make_leader records
            # it before any append of the epoch).
            entries.append((self.leader_epoch, self.log.log_end_offset))
        epoch, end = end_offset_for(entries, leader_epoch, self.log.log_end_offset)
        return E.NONE, epoch, end


def end_offset_for(entries: list[tuple[int, int]], requested: int, log_end_offset: int) -> tuple[int, int]:
    """LeaderEpochFileCache.endOffsetFor over (epoch, start offset) entries: the largest epoch
    <= requested and the start of the next one (the log end for the latest epoch)."""
    if requested < 0 or not entries:
        return -1, -1
    if requested == entries[-1][0]:
        return requested, log_end_offset
    later = [e for e in entries if e[0] > requested]
    earlier = [e for e in entries if e[0] <= requested]
    if not later:
        return -1, -1
    if not earlier:
        return requested, later[0][1]
    return earlier[-1][0], later[0][1]
