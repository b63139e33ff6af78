"""TransactionCoordinator: the transactional producer's coordinator — Kafka 3.9's
kafka.coordinator.transaction.TransactionCoordinator, handler for handler and error for error
(ZooKeeper mode, transaction.version 0: no KIP-890 part 2 epoch bump per transaction).

Each broker coordinates the transactional ids whose `__transaction_state` partition it leads
(TransactionStateManager). InitProducerId gives a transactional id a producer id and bumps its
epoch (fencing older producers of that id; an open transaction is aborted first and the client
told CONCURRENT_TRANSACTIONS to retry; KIP-360 recovery when the request carries the id/epoch);
AddPartitionsToTxn / AddOffsetsToTxn record the partitions of the transaction (Ongoing);
EndTxn writes PrepareCommit/PrepareAbort, answers, then has the TransactionMarkerChannelManager
write the markers, after which CompleteCommit/CompleteAbort is written. Transactions open longer
than their timeout are aborted with a bumped epoch (transaction.abort.timed.out.transaction.
cleanup.interval.ms); ids idle for transactional.id.expiration.ms are removed
(transaction.remove.expired.transaction.cleanup.interval.ms).

Handlers are `async` and return what Kafka's callbacks receive; they re-check the metadata after
every await, as Kafka's append callbacks do (the pending state keeps concurrent changes out).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkasim.broker.transaction.marker_channel_manager import TransactionMarkerChannelManager
from kafkasim.broker.transaction.metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from kafkasim.broker.transaction.state_manager import TransactionStateManager
from kafkasim.broker.transaction.transaction_log import TRANSACTION_STATE_TOPIC_NAME
from kafkasim.protocol import errors as E

if TYPE_CHECKING:
    from kafkasim.broker.config import TransactionConfig
    from kafkasim.broker.metadata_cache import MetadataCache
    from kafkasim.broker.replica_manager import ReplicaManager
    from kafkasim.client.channel_security import ChannelSecurity
    from kafkasim.runtime.api import NodeRuntime

S = TransactionState
# A new producer id: (error, id) — the ZkProducerIdManager's, injected (it sits a layer above).
GenerateProducerId = Callable[[], Awaitable[tuple[int, int]]]


@dataclass(frozen=True)
class InitProducerIdResult:
    producer_id: int
    producer_epoch: int
    error: int


def init_error(code: int) -> InitProducerIdResult:
    return InitProducerIdResult(NO_PRODUCER_ID, NO_PRODUCER_EPOCH, code)


@dataclass(frozen=True)
class TransactionDescription:
    error: int
    state: str = ""
    timeout_ms: int = 0
    start_time_ms: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    partitions: tuple[TopicPartition, ...] = ()


class TransactionCoordinator:
    def __init__(self, rt: NodeRuntime, config: TransactionConfig, broker_id: int, replica_manager: ReplicaManager,
                 metadata_cache: MetadataCache, generate_producer_id: GenerateProducerId,
                 inter_broker_security: ChannelSecurity | None = None) -> None:
        self.rt = rt
        self.config = config
        self.generate_producer_id = generate_producer_id
        self.txn_manager = TransactionStateManager(rt, config, replica_manager, metadata_cache)
        self.txn_marker_channel_manager = TransactionMarkerChannelManager(
            rt, broker_id, metadata_cache, self.txn_manager, config.request_timeout_ms, inter_broker_security)
        self.is_active = False

    def partition_for(self, transactional_id: str) -> int:
        return self.txn_manager.partition_for(transactional_id)

    def transaction_topic_configs(self) -> dict[str, str]:
        return self.txn_manager.transaction_topic_configs()

    # ---------------------------------------------------------------- InitProducerId
    async def handle_init_producer_id(self, transactional_id: str | None, timeout_ms: int,
                                      expected: tuple[int, int] | None) -> InitProducerIdResult:
        if transactional_id is None:
            # The idempotent producer: always a new producer id, epoch 0.
            code, pid = await self.generate_producer_id()
            return init_error(code) if code != E.NONE else InitProducerIdResult(pid, 0, E.NONE)
        if not transactional_id:
            return init_error(E.INVALID_REQUEST)
        if not self.txn_manager.validate_transaction_timeout_ms(timeout_ms):
            return init_error(E.INVALID_TRANSACTION_TIMEOUT)
        code, entry = self.txn_manager.get_transaction_state(transactional_id)
        if code == E.NONE and entry is None:
            code, pid = await self.generate_producer_id()
            if code == E.NONE:
                created = TransactionMetadata(transactional_id, pid, NO_PRODUCER_ID, NO_PRODUCER_EPOCH,
                                              NO_PRODUCER_EPOCH, timeout_ms, S.EMPTY, self.rt.now_ms())
                code, entry = self.txn_manager.put_transaction_state_if_not_exists(created)
        if code != E.NONE or entry is None:
            return init_error(code if code != E.NONE else E.NOT_COORDINATOR)
        md, coordinator_epoch = entry.transaction_metadata, entry.coordinator_epoch
        transit = await self._prepare_init_producer_id_transit(timeout_ms, md, expected)
        if isinstance(transit, int):
            return init_error(transit)
        if transit.txn_state == S.PREPARE_EPOCH_FENCE:
            # Abort the open transaction; the client retries (and gets the epoch bumped again).
            error = await self._end_transaction(transactional_id, transit.producer_id, transit.producer_epoch,
                                                committed=False, is_from_client=False)
            return init_error(error if error != E.NONE else E.CONCURRENT_TRANSACTIONS)
        error = await self.txn_manager.append_transaction_to_log(transactional_id, coordinator_epoch, transit)
        if error != E.NONE:
            return init_error(error)
        self.rt.trace("txn_init_producer_id", transactional_id=transactional_id, producer_id=transit.producer_id,
                      producer_epoch=transit.producer_epoch, partition=self.partition_for(transactional_id))
        return InitProducerIdResult(transit.producer_id, transit.producer_epoch, E.NONE)

    async def _prepare_init_producer_id_transit(self, timeout_ms: int, md: TransactionMetadata,
                                                expected: tuple[int, int] | None) -> TxnTransitMetadata | int:
        def is_valid_producer_id(pid: int, epoch: int) -> bool:
            # Fence unless the metadata was just created (epoch -1), the id is the current one (the
            # epoch is checked by the bump), or it is the previous one with an exhausted epoch (a
            # retry of a rotation whose answer was lost).
            return (md.producer_epoch == NO_PRODUCER_EPOCH or pid == md.producer_id
                    or (pid == md.last_producer_id and is_epoch_exhausted(epoch)))

        if md.pending_transition_in_progress:
            return E.CONCURRENT_TRANSACTIONS
        if expected is not None and not is_valid_producer_id(*expected):
            return E.PRODUCER_FENCED
        if md.state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            return E.CONCURRENT_TRANSACTIONS
        if md.state == S.ONGOING:
            return md.prepare_fence_producer_epoch()
        if md.state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT, S.EMPTY):
            if md.is_producer_epoch_exhausted and (expected is None or expected[1] == md.producer_epoch):
                code, pid = await self.generate_producer_id()
                if code != E.NONE:
                    return code
                if md.pending_transition_in_progress:
                    return E.CONCURRENT_TRANSACTIONS
                return md.prepare_producer_id_rotation(pid, timeout_ms, self.rt.now_ms(), expected is not None)
            return md.prepare_increment_producer_epoch(timeout_ms, None if expected is None else expected[1],
                                                       self.rt.now_ms())
        raise AssertionError(f"Found transactionalId {md.transactional_id} with state {md.state.state_name}. "
                             "This is illegal as we should never have transitioned to this state.")

    # ---------------------------------------------------------------- AddPartitionsToTxn
    async def handle_add_partitions_to_transaction(self, transactional_id: str, producer_id: int,
                                                   producer_epoch: int, partitions: frozenset[TopicPartition]) -> int:
        if not transactional_id:
            return E.INVALID_REQUEST
        code, entry = self.txn_manager.get_transaction_state(transactional_id)
        if code != E.NONE:
            return code
        if entry is None:
            return E.INVALID_PRODUCER_ID_MAPPING
        md = entry.transaction_metadata
        if md.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING
        if md.producer_epoch != producer_epoch:
            return E.PRODUCER_FENCED
        if md.pending_transition_in_progress or md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return E.CONCURRENT_TRANSACTIONS
        if md.state == S.ONGOING and partitions <= frozenset(md.topic_partitions):
            return E.NONE  # already in the transaction: no write
        transit = md.prepare_add_partitions(partitions, self.rt.now_ms())
        return await self.txn_manager.append_transaction_to_log(transactional_id, entry.coordinator_epoch, transit)

    def handle_verify_partitions_in_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                                partitions: frozenset[TopicPartition]) -> dict[TopicPartition, int]:
        """AddPartitionsToTxn v4+ verify_only (KIP-890 part 1: a partition leader asks before
        appending a transactional batch)."""
        if not transactional_id:
            return {tp: E.INVALID_REQUEST for tp in partitions}
        code, entry = self.txn_manager.get_transaction_state(transactional_id)
        if code == E.NONE and entry is None:
            code = E.INVALID_PRODUCER_ID_MAPPING
        if code != E.NONE or entry is None:
            return {tp: code for tp in partitions}
        md = entry.transaction_metadata
        if md.producer_id != producer_id:
            code = E.INVALID_PRODUCER_ID_MAPPING
        elif md.producer_epoch != producer_epoch:
            code = E.PRODUCER_FENCED
        elif md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            code = E.CONCURRENT_TRANSACTIONS
        else:
            return {tp: E.NONE if tp in md.topic_partitions else E.TRANSACTION_ABORTABLE for tp in partitions}
        return {tp: code for tp in partitions}

    # ---------------------------------------------------------------- EndTxn
    async def handle_end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                     committed: bool) -> int:
        return await self._end_transaction(transactional_id, producer_id, producer_epoch, committed,
                                           is_from_client=True)

    def _pre_append_end(self, md: TransactionMetadata, producer_id: int, producer_epoch: int, committed: bool,
                        is_from_client: bool) -> TxnTransitMetadata | int:
        if md.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING
        # Clients must match the epoch exactly; the coordinator's own aborts carry the bumped one.
        stale = (is_from_client and producer_epoch != md.producer_epoch) or producer_epoch < md.producer_epoch
        if stale and not self.rt.seeded_bug("txn-end-ignores-epoch"):  # seeded bug: a zombie ends the current txn
            return E.PRODUCER_FENCED
        if md.pending_transition_in_progress and md.pending_state != S.PREPARE_EPOCH_FENCE:
            return E.CONCURRENT_TRANSACTIONS
        if md.state == S.ONGOING:
            next_state = S.PREPARE_COMMIT if committed else S.PREPARE_ABORT
            if next_state == S.PREPARE_ABORT and md.pending_state == S.PREPARE_EPOCH_FENCE:
                md.pending_state = None
                md.producer_epoch = producer_epoch
                md.last_producer_epoch = NO_PRODUCER_EPOCH
            return md.prepare_abort_or_commit(next_state, self.rt.now_ms())
        if md.state == S.COMPLETE_COMMIT:
            return E.NONE if committed else E.INVALID_TXN_STATE
        if md.state == S.COMPLETE_ABORT:
            return E.NONE if not committed else E.INVALID_TXN_STATE
        if md.state == S.PREPARE_COMMIT:
            return E.CONCURRENT_TRANSACTIONS if committed else E.INVALID_TXN_STATE
        if md.state == S.PREPARE_ABORT:
            return E.CONCURRENT_TRANSACTIONS if not committed else E.INVALID_TXN_STATE
        if md.state == S.EMPTY:
            return E.INVALID_TXN_STATE
        raise AssertionError(f"Found transactionalId {md.transactional_id} with state {md.state.state_name}")

    async def _end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool,
                               is_from_client: bool) -> int:
        if not transactional_id:
            return E.INVALID_REQUEST
        code, entry = self.txn_manager.get_transaction_state(transactional_id)
        if code != E.NONE:
            return code
        if entry is None:
            return E.INVALID_PRODUCER_ID_MAPPING
        md, coordinator_epoch = entry.transaction_metadata, entry.coordinator_epoch
        is_epoch_fence = md.pending_state == S.PREPARE_EPOCH_FENCE
        transit = self._pre_append_end(md, producer_id, producer_epoch, committed, is_from_client)
        if isinstance(transit, int):
            if is_epoch_fence and md.pending_state == S.PREPARE_EPOCH_FENCE:
                md.pending_state = None  # the fence was not used: nothing pending any more
            return transit
        error = await self.txn_manager.append_transaction_to_log(transactional_id, coordinator_epoch, transit)
        if error != E.NONE:
            if is_epoch_fence:
                code, entry = self.txn_manager.get_transaction_state(transactional_id)
                if code == E.NONE and entry is not None and entry.coordinator_epoch == coordinator_epoch:
                    # The epoch was bumped in memory but never handed out: do not bump it again.
                    entry.transaction_metadata.has_failed_epoch_fence = True
            return error
        return self._send_markers(transactional_id, producer_id, producer_epoch, committed, coordinator_epoch)

    def _send_markers(self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool,
                      coordinator_epoch: int) -> int:
        code, entry = self.txn_manager.get_transaction_state(transactional_id)
        if code != E.NONE:
            return code
        if entry is None or entry.coordinator_epoch != coordinator_epoch:
            return E.NOT_COORDINATOR
        md = entry.transaction_metadata
        if md.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING
        if md.producer_epoch != producer_epoch:
            return E.PRODUCER_FENCED
        if md.pending_transition_in_progress:
            return E.CONCURRENT_TRANSACTIONS
        if md.state != (S.PREPARE_COMMIT if committed else S.PREPARE_ABORT):
            return E.INVALID_TXN_STATE
        transit = md.prepare_complete(self.rt.now_ms())
        self.txn_marker_channel_manager.add_txn_markers_to_send(coordinator_epoch, committed, md, transit)
        self.rt.trace("txn_end", transactional_id=transactional_id, producer_id=producer_id,
                      producer_epoch=producer_epoch, committed=committed)
        return E.NONE

    # ---------------------------------------------------------------- timeouts
    def abort_timed_out_transactions(self) -> None:
        for t in self.txn_manager.timed_out_transactions():
            code, entry = self.txn_manager.get_transaction_state(t.transactional_id)
            if code != E.NONE or entry is None:
                continue
            md = entry.transaction_metadata
            if md.producer_id != t.producer_id or md.pending_transition_in_progress:
                continue
            transit = md.prepare_fence_producer_epoch()
            self.rt.trace("txn_timed_out", transactional_id=t.transactional_id, producer_id=t.producer_id,
                          producer_epoch=t.producer_epoch)
            self.rt.spawn(self._end_transaction(md.transactional_id, transit.producer_id, transit.producer_epoch,
                                                committed=False, is_from_client=False),
                          name=f"txn-abort-timed-out {md.transactional_id}")

    # ---------------------------------------------------------------- Describe / List
    def handle_describe_transactions(self, transactional_id: str) -> TransactionDescription:
        if not self.is_active:
            return TransactionDescription(E.COORDINATOR_NOT_AVAILABLE)
        if not transactional_id:
            return TransactionDescription(E.INVALID_REQUEST)
        code, entry = self.txn_manager.get_transaction_state(transactional_id)
        if code != E.NONE:
            return TransactionDescription(code)
        if entry is None or entry.transaction_metadata.state == S.DEAD:
            return TransactionDescription(E.TRANSACTIONAL_ID_NOT_FOUND)
        md = entry.transaction_metadata
        return TransactionDescription(E.NONE, md.state.state_name, md.txn_timeout_ms, md.txn_start_timestamp,
                                      md.producer_id, md.producer_epoch, tuple(md.topic_partitions))

    def handle_list_transactions(self, producer_ids: set[int], states: set[str],
                                 duration_ms: int) -> tuple[int, list[str], list[TransactionMetadata]]:
        if not self.is_active:
            return E.COORDINATOR_NOT_AVAILABLE, [], []
        return self.txn_manager.list_transaction_states(producer_ids, states, duration_ms)

    # ---------------------------------------------------------------- election / resignation
    def on_election(self, txn_topic_partition: int, coordinator_epoch: int) -> None:
        self.txn_marker_channel_manager.remove_markers_for_txn_topic_partition(txn_topic_partition)
        self.txn_manager.load_transactions_for_txn_topic_partition(
            txn_topic_partition, coordinator_epoch, self.txn_marker_channel_manager.add_txn_markers_to_send)

    def on_resignation(self, txn_topic_partition: int, coordinator_epoch: int | None) -> None:
        self.txn_manager.remove_transactions_for_txn_topic_partition(txn_topic_partition, coordinator_epoch)
        self.txn_marker_channel_manager.remove_markers_for_txn_topic_partition(txn_topic_partition)

    def on_leadership_change(self, topic: str, partition: int, leader_epoch: int) -> None:
        """ReplicaManager listener: leading a `__transaction_state` partition = coordinating its ids."""
        if topic == TRANSACTION_STATE_TOPIC_NAME:
            self.on_election(partition, leader_epoch)

    def on_resignation_change(self, topic: str, partition: int, leader_epoch: int | None) -> None:
        if topic == TRANSACTION_STATE_TOPIC_NAME:
            self.on_resignation(partition, leader_epoch)

    # ---------------------------------------------------------------- lifecycle
    def startup(self) -> None:
        self.is_active = True
        self._every(self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
                    self.abort_timed_out_transactions)
        self._every(self.config.transaction_remove_expired_transaction_cleanup_interval_ms, self._expire_ids)
        self.txn_marker_channel_manager.start()

    def _expire_ids(self) -> None:
        self.rt.spawn(self.txn_manager.remove_expired_transactional_ids(), name="transactionalId-expiration")

    def _every(self, interval_ms: int, fn: Callable[[], None]) -> None:
        def tick() -> None:
            if self.is_active:
                fn()
                self.rt.call_later(interval_ms, tick)

        self.rt.call_later(interval_ms, tick)

    def shutdown(self) -> None:
        self.is_active = False
        self.txn_manager.shutdown()
        self.txn_marker_channel_manager.shutdown()
