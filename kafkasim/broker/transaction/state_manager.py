"""TransactionStateManager: the `__transaction_state` log behind the transaction coordinator —
Kafka 3.9's kafka.coordinator.transaction.TransactionStateManager: the cache of transactional
ids per owned partition (with the coordinator epoch = that partition's leader epoch), appends
of their state changes (acks=all), loading a partition on becoming its leader (requests for its
ids get COORDINATOR_LOAD_IN_PROGRESS meanwhile; PrepareCommit/PrepareAbort found in the log are
completed by sending their markers again), unloading on resignation (NOT_COORDINATOR), the
timed-out transactions the coordinator aborts and the expired transactional ids it tombstones.

Errors of an append, as the coordinator reports them (appendTransactionToLog):
UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT ->
COORDINATOR_NOT_AVAILABLE; NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR -> NOT_COORDINATOR;
MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE -> UNKNOWN_SERVER_ERROR.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from kafkasim.broker.transaction.metadata import TransactionMetadata, TransactionState, TxnTransitMetadata
from kafkasim.broker.transaction.transaction_log import (
    TRANSACTION_STATE_TOPIC_NAME,
    TxnKey,
    key_to_bytes,
    partition_for,
    read_txn_record_key,
    read_txn_record_value,
    value_to_bytes,
)
from kafkasim.protocol import errors as E
from kafkasim.records.batch import Record, build_batch, decode_batch_records, iter_batches
from kafkasim.storage.producer_state import AppendOrigin

if TYPE_CHECKING:
    from kafkasim.broker.config import TransactionConfig
    from kafkasim.broker.metadata_cache import MetadataCache
    from kafkasim.broker.partition import Partition
    from kafkasim.broker.replica_manager import ReplicaManager
    from kafkasim.runtime.api import NodeRuntime

S = TransactionState
# (coordinator epoch, result: True = commit, metadata, transit to CompleteCommit/CompleteAbort)
SendTxnMarkers = Callable[[int, bool, TransactionMetadata, TxnTransitMetadata], None]


@dataclass
class TxnMetadataCacheEntry:
    coordinator_epoch: int
    metadata_per_transactional_id: dict[str, TransactionMetadata] = field(default_factory=dict)


@dataclass(init=False, unsafe_hash=True)
class CoordinatorEpochAndTxnMetadata:
    coordinator_epoch: Final[int]
    transaction_metadata: Final[TransactionMetadata]

    # Written out (init=False; its defaults are the only ones) so that mypyc compiles it: a
    # dataclass-made __init__ runs interpreted.
    def __init__(self, coordinator_epoch: int, transaction_metadata: TransactionMetadata) -> None:
        self.coordinator_epoch = coordinator_epoch
        self.transaction_metadata = transaction_metadata


@dataclass(frozen=True)
class TransactionalIdAndProducerIdEpoch:
    transactional_id: str
    producer_id: int
    producer_epoch: int


# Left(error) or Right(Option(entry)), as Kafka's Either.
StateResult = tuple[int, CoordinatorEpochAndTxnMetadata | None]


def append_error(code: int) -> int:
    if code in (E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                E.REQUEST_TIMED_OUT):
        return E.COORDINATOR_NOT_AVAILABLE
    if code in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        return E.NOT_COORDINATOR
    if code in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE):
        return E.UNKNOWN_SERVER_ERROR
    return code


class TransactionStateManager:
    def __init__(self, rt: NodeRuntime, config: TransactionConfig, replica_manager: ReplicaManager,
                 metadata_cache: MetadataCache) -> None:
        self.rt = rt
        self.config = config
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        self.loading_partitions: dict[int, int] = {}     # partition -> coordinator epoch being loaded
        self.transaction_metadata_cache: dict[int, TxnMetadataCacheEntry] = {}
        self.shutting_down = False

    # ---------------------------------------------------------------- partitions
    def partition_count(self) -> int:
        """The topic's partition count once it exists (a changed config cannot remap ids), else
        transaction.state.log.num.partitions."""
        meta = self.metadata_cache.topic(TRANSACTION_STATE_TOPIC_NAME)
        if meta is not None and meta.partitions:
            return len(meta.partitions)
        return self.config.transaction_state_log_num_partitions

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.partition_count())

    def transaction_topic_configs(self) -> dict[str, str]:
        return {"unclean.leader.election.enable": "false", "compression.type": "uncompressed",
                "cleanup.policy": "compact", "min.insync.replicas": str(self.config.transaction_state_log_min_isr),
                "segment.bytes": str(self.config.transaction_state_log_segment_bytes)}

    def validate_transaction_timeout_ms(self, timeout_ms: int) -> bool:
        return 0 < timeout_ms <= self.config.transaction_max_timeout_ms

    @property
    def is_loading(self) -> bool:
        return bool(self.loading_partitions)

    # ---------------------------------------------------------------- cache
    def get_transaction_state(self, transactional_id: str) -> StateResult:
        return self._get_and_maybe_add(transactional_id, None)

    def put_transaction_state_if_not_exists(self, md: TransactionMetadata) -> StateResult:
        return self._get_and_maybe_add(md.transactional_id, md)

    def _get_and_maybe_add(self, transactional_id: str, created: TransactionMetadata | None) -> StateResult:
        partition = self.partition_for(transactional_id)
        if partition in self.loading_partitions:
            return E.COORDINATOR_LOAD_IN_PROGRESS, None
        entry = self.transaction_metadata_cache.get(partition)
        if entry is None:
            return E.NOT_COORDINATOR, None
        md = entry.metadata_per_transactional_id.get(transactional_id)
        if md is None and created is not None:
            md = entry.metadata_per_transactional_id.setdefault(transactional_id, created)
        return E.NONE, (None if md is None else CoordinatorEpochAndTxnMetadata(entry.coordinator_epoch, md))

    def all_metadata(self) -> list[TransactionMetadata]:
        return [md for _, entry in sorted(self.transaction_metadata_cache.items())
                for md in entry.metadata_per_transactional_id.values()]

    # ---------------------------------------------------------------- appends
    def _leader(self, partition: int) -> Partition | None:
        p = self.replica_manager.get_partition(TRANSACTION_STATE_TOPIC_NAME, partition)
        return p if p is not None and p.is_leader else None

    async def _append(self, partition: int, records: list[Record], timeout_ms: int) -> int:
        """One uncompressed batch, acks=all; the raw append error."""
        if self._leader(partition) is None:
            return E.NOT_LEADER_OR_FOLLOWER
        deadline = self.rt.monotonic_ms() + timeout_ms
        result = await self.replica_manager.append_records(TRANSACTION_STATE_TOPIC_NAME, partition,
                                                           build_batch(records), -1,
                                                           origin=AppendOrigin.COORDINATOR)
        if result.error_code != E.NONE or result.info is None:
            return result.error_code
        return await self.replica_manager.wait_for_replication(TRANSACTION_STATE_TOPIC_NAME, partition,
                                                               result.info.last_offset + 1, deadline)

    async def append_transaction_to_log(self, transactional_id: str, coordinator_epoch: int,
                                        new_metadata: TxnTransitMetadata,
                                        retry_on_error: Callable[[int], bool] = lambda _: False) -> int:
        """Write the transit; on success complete it in the cache (if this coordinator epoch still
        owns the id). The error for the caller."""
        code, entry = self.get_transaction_state(transactional_id)
        if code != E.NONE:
            return code
        if entry is None or entry.coordinator_epoch != coordinator_epoch:
            return E.NOT_COORDINATOR
        partition = self.partition_for(transactional_id)
        record = Record(self.rt.now_ms(), key_to_bytes(transactional_id), value_to_bytes(new_metadata))
        error = append_error(await self._append(partition, [record], new_metadata.txn_timeout_ms))
        self.rt.trace("txn_state_appended", transactional_id=transactional_id, partition=partition,
                      state=new_metadata.txn_state.state_name, producer_id=new_metadata.producer_id,
                      producer_epoch=new_metadata.producer_epoch, error=error)
        code, entry = self.get_transaction_state(transactional_id)
        if error == E.NONE:
            if code != E.NONE:
                return code
            if entry is None or entry.coordinator_epoch != coordinator_epoch:
                return E.NOT_COORDINATOR
            entry.transaction_metadata.complete_transition_to(new_metadata)
            return E.NONE
        if code == E.NONE and entry is not None and entry.coordinator_epoch == coordinator_epoch:
            if not retry_on_error(error):
                entry.transaction_metadata.pending_state = None
        return error

    # ---------------------------------------------------------------- timeouts and expiration
    def timed_out_transactions(self) -> list[TransactionalIdAndProducerIdEpoch]:
        now = self.rt.now_ms()
        return [TransactionalIdAndProducerIdEpoch(md.transactional_id, md.producer_id, md.producer_epoch)
                for md in self.all_metadata()
                if not md.pending_transition_in_progress and md.state == S.ONGOING
                and md.txn_start_timestamp + md.txn_timeout_ms < now]

    async def remove_expired_transactional_ids(self) -> int:
        """Tombstone every id idle for transactional.id.expiration.ms in a final state; drop it
        from the cache once the tombstone is written. Returns how many were removed."""
        removed = 0
        for partition, entry in sorted(self.transaction_metadata_cache.items()):
            now = self.rt.now_ms()
            expired: list[tuple[TransactionMetadata, TxnTransitMetadata]] = []
            for md in entry.metadata_per_transactional_id.values():
                if (md.pending_state is None and md.state.is_expiration_allowed
                        and md.txn_last_update_timestamp <= now - self.config.transactional_id_expiration_ms):
                    expired.append((md, md.prepare_dead()))
            if not expired:
                continue
            records = [Record(now, key_to_bytes(md.transactional_id), None) for md, _ in expired]
            code = await self._append(partition, records, self.config.request_timeout_ms)
            current = self.transaction_metadata_cache.get(partition)
            for md, transit in expired:
                if (current is entry and current.coordinator_epoch == entry.coordinator_epoch
                        and md.pending_state == S.DEAD and md.producer_epoch == transit.producer_epoch
                        and code == E.NONE):
                    entry.metadata_per_transactional_id.pop(md.transactional_id, None)
                    removed += 1
                else:
                    md.pending_state = None
            self.rt.trace("txn_ids_expired", partition=partition, ids=[md.transactional_id for md, _ in expired],
                          error=code)
        return removed

    def list_transaction_states(self, producer_ids: set[int], state_names: set[str],
                                duration_ms: int) -> tuple[int, list[str], list[TransactionMetadata]]:
        """(error, unknown state filters, matching transactions)."""
        if self.loading_partitions:
            return E.COORDINATOR_LOAD_IN_PROGRESS, [], []
        unknown = [n for n in state_names if TransactionState.from_name(n) is None]
        states = {s for n in state_names if (s := TransactionState.from_name(n)) is not None}
        now = self.rt.now_ms()
        out = []
        for md in self.all_metadata():
            if md.state == S.DEAD or (producer_ids and md.producer_id not in producer_ids):
                continue
            if state_names and md.state not in states:
                continue
            if duration_ms >= 0 and now - md.txn_start_timestamp <= duration_ms:
                continue
            out.append(md)
        return E.NONE, unknown, out

    # ---------------------------------------------------------------- load / unload
    def load_transactions_for_txn_topic_partition(self, partition: int, coordinator_epoch: int,
                                                  send_txn_markers: SendTxnMarkers) -> None:
        self.loading_partitions[partition] = coordinator_epoch
        self.rt.spawn(self._load(partition, coordinator_epoch, send_txn_markers),
                      name=f"load {TRANSACTION_STATE_TOPIC_NAME}-{partition}")

    async def pause_between_load_chunks(self) -> None:
        """Yield between chunks of a load (Kafka loads on its scheduler thread); a test may
        replace this to model a slow load."""
        await self.rt.sleep(0)

    async def _load(self, partition: int, epoch: int, send_txn_markers: SendTxnMarkers) -> None:
        self.rt.trace("txn_load_started", partition=partition, epoch=epoch)
        if self.rt.buggify("txn.load.slow"):  # the scheduler is behind: COORDINATOR_LOAD_IN_PROGRESS meanwhile
            await self.rt.sleep(1000)
        loaded = await self._read_partition(partition, epoch)
        if self.loading_partitions.get(partition) != epoch:
            return  # resigned (or re-elected at a newer epoch) meanwhile
        self.transaction_metadata_cache[partition] = TxnMetadataCacheEntry(epoch, loaded)
        pending: list[tuple[bool, TransactionMetadata, TxnTransitMetadata]] = []
        for md in loaded.values():
            if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                pending.append((md.state == S.PREPARE_COMMIT, md, md.prepare_complete(self.rt.now_ms())))
        del self.loading_partitions[partition]
        self.rt.trace("txn_load_completed", partition=partition, epoch=epoch, transactions=len(loaded),
                      pending_markers=len(pending))
        for committed, md, transit in pending:
            send_txn_markers(epoch, committed, md, transit)

    async def _read_partition(self, partition: int, epoch: int) -> dict[str, TransactionMetadata]:
        loaded: dict[str, TransactionMetadata] = {}
        p = self._leader(partition)
        if p is None:
            return loaded
        offset = p.log_start_offset
        while (offset < p.log_end_offset and not self.shutting_down
               and self.loading_partitions.get(partition) == epoch):
            data = p.log.read(offset, self.config.transaction_state_log_load_buffer_size, max_offset=p.log_end_offset)
            if not data:
                break
            for pos, header in iter_batches(data):
                if not header.is_control:
                    self._replay_batch(data, pos, loaded)
                offset = header.next_offset
            await self.pause_between_load_chunks()
        return loaded

    def _replay_batch(self, data: bytes, pos: int, loaded: dict[str, TransactionMetadata]) -> None:
        for record in decode_batch_records(data, pos, validate=False):
            if record.key is None:
                continue  # Kafka requires a key in this log
            key = read_txn_record_key(record.key)
            if not isinstance(key, TxnKey):
                self.rt.trace("txn_load_unknown_key", version=key.version)
                continue
            md = read_txn_record_value(key.transactional_id, record.value)
            if md is None:
                loaded.pop(key.transactional_id, None)
            else:
                loaded[key.transactional_id] = md

    def remove_transactions_for_txn_topic_partition(self, partition: int, coordinator_epoch: int | None) -> None:
        if coordinator_epoch is None or self.loading_partitions.get(partition) == coordinator_epoch:
            self.loading_partitions.pop(partition, None)
        elif partition in self.loading_partitions and self.loading_partitions[partition] < coordinator_epoch:
            self.loading_partitions.pop(partition, None)
        self.transaction_metadata_cache.pop(partition, None)
        self.rt.trace("txn_unload", partition=partition, epoch=coordinator_epoch)

    def shutdown(self) -> None:
        self.shutting_down = True
        self.loading_partitions.clear()
        self.transaction_metadata_cache.clear()
