"""TransactionMetadata: one transactional id's state machine, as Kafka 3.9's
kafka.coordinator.transaction.TransactionMetadata — pure state, no I/O.

A change is two-phase, as in Kafka: `prepare_*` checks the transition and returns the
TxnTransitMetadata to write (the metadata's `pending_state` is set, so a concurrent request
gets CONCURRENT_TRANSACTIONS); once the log append succeeded, `complete_transition_to` applies
it. States and their ids (the TransactionStatus byte of `__transaction_state` values):

    0 Empty  1 Ongoing  2 PrepareCommit  3 PrepareAbort  4 CompleteCommit  5 CompleteAbort
    6 Dead  7 PrepareEpochFence
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Final

from kafkasim.protocol import errors as E

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
SHORT_MAX = 0x7FFF


class TransactionState(enum.Enum):
    EMPTY = (0, "Empty")
    ONGOING = (1, "Ongoing")
    PREPARE_COMMIT = (2, "PrepareCommit")
    PREPARE_ABORT = (3, "PrepareAbort")
    COMPLETE_COMMIT = (4, "CompleteCommit")
    COMPLETE_ABORT = (5, "CompleteAbort")
    DEAD = (6, "Dead")
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence")

    @property
    def id(self) -> int:
        return self.value[0]

    @property
    def state_name(self) -> str:
        return self.value[1]

    @property
    def is_expiration_allowed(self) -> bool:
        return self in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)

    @classmethod
    def from_id(cls, state_id: int) -> TransactionState:
        for s in cls:
            if s.id == state_id:
                return s
        raise IllegalTransactionStateError(f"Unknown transaction state id {state_id} from the transaction status")

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        return next((s for s in cls if s.state_name == name), None)


S = TransactionState

VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


class IllegalTransactionStateError(Exception):
    """A transition Kafka treats as fatal (IllegalStateException): a bug, never a client error."""


@dataclass(init=False, unsafe_hash=True, order=True)
class TopicPartition:
    topic: Final[str]
    partition: Final[int]

    # Written out (init=False; its defaults are the only ones) so that mypyc compiles it: a
    # dataclass-made __init__ runs interpreted.
    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition


def is_epoch_exhausted(producer_epoch: int) -> bool:
    return producer_epoch >= SHORT_MAX - 1


@dataclass(frozen=True)
class TxnTransitMetadata:
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    txn_state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int


@dataclass(eq=False)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    txn_last_update_timestamp: int
    txn_start_timestamp: int = -1
    # Insertion-ordered set: markers and records list partitions in the order they were added.
    topic_partitions: dict[TopicPartition, None] = field(default_factory=dict)
    pending_state: TransactionState | None = None
    has_failed_epoch_fence: bool = False

    # ---------------------------------------------------------------- partitions
    def add_partitions(self, partitions: frozenset[TopicPartition] | list[TopicPartition]) -> None:
        for tp in sorted(partitions):
            self.topic_partitions.setdefault(tp, None)

    def remove_partition(self, tp: TopicPartition) -> None:
        if self.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            raise IllegalTransactionStateError(
                f"Transaction metadata's current state is {self.state.state_name}, and its pending state is "
                f"{self.pending_state} while trying to remove partitions whose txn marker has been sent")
        self.topic_partitions.pop(tp, None)

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def _partitions(self) -> frozenset[TopicPartition]:
        return frozenset(self.topic_partitions)

    # ---------------------------------------------------------------- prepare
    def prepare_no_transit(self) -> TxnTransitMetadata:
        return TxnTransitMetadata(self.producer_id, self.last_producer_id, self.producer_epoch,
                                  self.last_producer_epoch, self.txn_timeout_ms, self.state, self._partitions(),
                                  self.txn_start_timestamp, self.txn_last_update_timestamp)

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        if self.producer_epoch == SHORT_MAX:
            raise IllegalTransactionStateError("Cannot fence producer with epoch equal to Short.MaxValue")
        # A fence whose write failed already bumped the epoch (never returned to a client): not again.
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(S.PREPARE_EPOCH_FENCE, self.producer_id, bumped, NO_PRODUCER_EPOCH, self.txn_timeout_ms,
                             self._partitions(), self.txn_start_timestamp, self.txn_last_update_timestamp)

    def prepare_increment_producer_epoch(self, new_timeout_ms: int, expected_epoch: int | None,
                                         now_ms: int) -> TxnTransitMetadata | int:
        """The transit, or PRODUCER_FENCED's error code when the expected epoch is neither the
        current nor the previous one."""
        if self.is_producer_epoch_exhausted:
            raise IllegalTransactionStateError(f"No more producer epochs for producerId {self.producer_id}")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            next_epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            next_epoch, last_epoch = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            # A retry of a bump whose answer was lost: hand out the same epoch again.
            next_epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        else:
            return E.PRODUCER_FENCED
        return self._prepare(S.EMPTY, self.producer_id, next_epoch, last_epoch, new_timeout_ms, frozenset(), -1, now_ms)

    def prepare_producer_id_rotation(self, new_producer_id: int, new_timeout_ms: int, now_ms: int,
                                     record_last_epoch: bool) -> TxnTransitMetadata:
        if self.state in (S.ONGOING, S.PREPARE_ABORT, S.PREPARE_COMMIT):
            raise IllegalTransactionStateError("Cannot rotate producer ids while a transaction is still pending")
        last_epoch = self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH
        return self._prepare(S.EMPTY, new_producer_id, 0, last_epoch,
                             new_timeout_ms, frozenset(), -1, now_ms)

    def prepare_add_partitions(self, added: frozenset[TopicPartition], now_ms: int) -> TxnTransitMetadata:
        start = now_ms if self.state in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT) else self.txn_start_timestamp
        return self._prepare(S.ONGOING, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, self._partitions() | added, start, now_ms)

    def prepare_abort_or_commit(self, new_state: TransactionState, now_ms: int) -> TxnTransitMetadata:
        return self._prepare(new_state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, self._partitions(), self.txn_start_timestamp, now_ms)

    def prepare_complete(self, now_ms: int) -> TxnTransitMetadata:
        new_state = S.COMPLETE_COMMIT if self.state == S.PREPARE_COMMIT else S.COMPLETE_ABORT
        self.has_failed_epoch_fence = False
        return self._prepare(new_state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(), self.txn_start_timestamp, now_ms)

    def prepare_dead(self) -> TxnTransitMetadata:
        return self._prepare(S.DEAD, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(), self.txn_start_timestamp, self.txn_last_update_timestamp)

    def _prepare(self, new_state: TransactionState, producer_id: int, epoch: int, last_epoch: int, timeout_ms: int,
                 partitions: frozenset[TopicPartition], start_ms: int, update_ms: int) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalTransactionStateError(f"Preparing transaction state transition to {new_state.state_name} "
                                               f"while it already a pending state {self.pending_state.state_name}")
        if producer_id < 0:
            raise IllegalTransactionStateError(f"Illegal new producer id {producer_id}")
        if new_state != S.DEAD and epoch < 0:
            raise IllegalTransactionStateError(f"Illegal new producer epoch {epoch}")
        if self.state not in VALID_PREVIOUS_STATES[new_state]:
            raise IllegalTransactionStateError(
                f"Preparing transaction state transition to {new_state.state_name} failed since the target state "
                f"{new_state.state_name} is not a valid previous state of the current state {self.state.state_name}")
        transit = TxnTransitMetadata(producer_id, self.producer_id, epoch, last_epoch, timeout_ms, new_state,
                                     partitions, start_ms, update_ms)
        self.pending_state = new_state
        return transit

    # ---------------------------------------------------------------- complete
    def complete_transition_to(self, t: TxnTransitMetadata) -> None:
        to_state = self.pending_state
        if to_state is None or to_state != t.txn_state:
            self._fail(t)
        assert to_state is not None
        same_epoch = t.producer_epoch == self.producer_epoch and t.producer_id == self.producer_id
        if to_state == S.EMPTY:  # InitProducerId
            bump = (t.producer_epoch == self.producer_epoch + 1
                    or (t.producer_epoch == 0 and t.producer_id != self.producer_id))
            if ((self.producer_epoch != t.producer_epoch and not bump) or t.topic_partitions
                    or t.txn_start_timestamp != -1):
                self._fail(t)
            self.txn_timeout_ms = t.txn_timeout_ms
            self.producer_epoch, self.last_producer_epoch = t.producer_epoch, t.last_producer_epoch
            self.producer_id, self.last_producer_id = t.producer_id, t.last_producer_id
        elif to_state == S.ONGOING:  # AddPartitionsToTxn
            if (not same_epoch or not self._partitions() <= t.topic_partitions
                    or self.txn_timeout_ms != t.txn_timeout_ms):
                self._fail(t)
            self.txn_start_timestamp = t.txn_start_timestamp
            self.add_partitions(t.topic_partitions)
        elif to_state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):  # EndTxn
            if (not same_epoch or self._partitions() != t.topic_partitions or self.txn_timeout_ms != t.txn_timeout_ms
                    or self.txn_start_timestamp != t.txn_start_timestamp):
                self._fail(t)
        elif to_state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT):  # the markers are written
            if not same_epoch or self.txn_timeout_ms != t.txn_timeout_ms or t.txn_start_timestamp == -1:
                self._fail(t)
            self.txn_start_timestamp = t.txn_start_timestamp
            self.topic_partitions.clear()
        else:  # PrepareEpochFence and Dead are never persisted as such
            self._fail(t)
        self.txn_last_update_timestamp = t.txn_last_update_timestamp
        self.pending_state = None
        self.state = to_state

    def _fail(self, t: TxnTransitMetadata) -> None:
        raise IllegalTransactionStateError(
            f"TransactionalId {self.transactional_id} failed transition to state {t} due to unexpected metadata")
