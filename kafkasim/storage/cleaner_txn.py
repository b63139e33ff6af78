"""The cleaner's transaction rules: Kafka 3.9's ``CleanedTransactionMetadata`` and the batch
retention decision of ``Cleaner.cleanInto``'s RecordFilter (``checkBatchRetention``).

While the cleaner walks a log in offset order it tracks, per producer, the transaction it is in:

  - aborted transactions (from the txn indexes) are queued by first offset and become
    "ongoing aborted" once the walk reaches their first offset; a transactional data batch of
    such a producer is part of the aborted transaction: it may be discarded;
  - any other transactional data batch makes its producer's transaction "ongoing committed";
  - an ABORT marker may be discarded when no batch of its transaction was seen (they are all
    gone); otherwise it stays and its aborted transaction is appended to the cleaned segment's
    txn index (the only way an entry survives a clean);
  - a COMMIT marker may be discarded when no batch of its transaction was seen;
  - an empty control batch (already emptied by an earlier clean) may be discarded; other
    control types are kept.

A discardable marker is not dropped at once: like a tombstone it first gets a delete horizon
(delete.retention.ms after the clean that found it empty, KIP-534: attribute bit 6, horizon in
baseTimestamp), and goes at the first clean after that horizon — so a read_committed consumer
that was reading the transaction still sees how it ended.

Batch retention (``BatchRetention``):

  - RETAIN_EMPTY  the batch holds its producer's last record: the last data batch (its last
                  offset is the producer's last data offset: it carries the last sequence) or,
                  for a producer with no data batch kept, a marker at its current epoch (it
                  carries the epoch, needed for fencing); stays, emptied if its records go;
  - DELETE        the whole batch goes (an aborted data batch; a discardable marker past its
                  horizon);
  - DELETE_EMPTY  the batch goes only if no record of it is retained.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from enum import Enum

from kafkasim.records.batch import BatchHeader, Buffer, ControlRecordType, decode_batch_records, parse_control_key
from kafkasim.storage.txn_index import AbortedTxn, TransactionIndex


class BatchRetention(Enum):
    DELETE = "delete"
    RETAIN_EMPTY = "retain_empty"
    DELETE_EMPTY = "delete_empty"


@dataclass(frozen=True)
class LastRecord:
    """UnifiedLog.lastRecordsOfActiveProducers' value: an active producer's last data offset
    (None when no data batch of it is in its state) and its epoch."""

    last_data_offset: int | None
    producer_epoch: int


@dataclass(frozen=True)
class RetentionDecision:
    retention: BatchRetention
    discard_records: bool            # every record of the batch goes
    marker_for_empty_txn: bool       # a discardable marker: give it a delete horizon


@dataclass
class _AbortedTxnState:
    txn: AbortedTxn
    last_observed_batch_offset: int | None = None


class CleanedTransactionMetadata:
    def __init__(self) -> None:
        self.ongoing_committed: set[int] = set()
        self.ongoing_aborted: dict[int, _AbortedTxnState] = {}
        self._queue: list[tuple[int, int, AbortedTxn]] = []  # min-heap by first offset (then arrival)
        self._arrivals = 0
        self.cleaned_index: TransactionIndex | None = None

    def add_aborted_transactions(self, txns: list[AbortedTxn]) -> None:
        for t in txns:
            heapq.heappush(self._queue, (t.first_offset, self._arrivals, t))
            self._arrivals += 1

    def _consume_aborted_up_to(self, offset: int) -> None:
        while self._queue and self._queue[0][0] <= offset:
            txn = heapq.heappop(self._queue)[2]
            self.ongoing_aborted.setdefault(txn.producer_id, _AbortedTxnState(txn))

    def on_batch_read(self, h: BatchHeader) -> bool:
        """A data batch: True when it belongs to an aborted transaction (may be discarded)."""
        self._consume_aborted_up_to(h.last_offset)
        if not h.is_transactional:
            return False
        state = self.ongoing_aborted.get(h.producer_id)
        if state is not None:
            state.last_observed_batch_offset = h.last_offset
            return True
        self.ongoing_committed.add(h.producer_id)
        return False

    def on_control_batch_read(self, h: BatchHeader, data: Buffer) -> bool:
        """A control batch: True when it may be discarded (its transaction has no data left)."""
        self._consume_aborted_up_to(h.last_offset)
        records = decode_batch_records(data, 0, validate=False)
        if not records:
            return True  # emptied by an earlier clean
        _, ctype = parse_control_key(records[0].key)
        if ctype == ControlRecordType.ABORT:
            state = self.ongoing_aborted.pop(h.producer_id, None)
            if state is not None and state.last_observed_batch_offset is not None:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(state.txn)
                return False
            return True
        if ctype == ControlRecordType.COMMIT:
            if h.producer_id in self.ongoing_committed:
                self.ongoing_committed.discard(h.producer_id)
                return False
            return True
        return False

    def check_batch_retention(self, h: BatchHeader, data: Buffer, now_ms: int,
                              last_records: dict[int, LastRecord]) -> RetentionDecision:
        """The cleaner's RecordFilter.checkBatchRetention for one batch (the walk's state moves on)."""
        can_discard = self.on_control_batch_read(h, data) if h.is_control else self.on_batch_read(h)
        if h.is_control:
            horizon = h.delete_horizon_ms
            discard_records = can_discard and horizon is not None and horizon <= now_ms
        else:
            discard_records = can_discard
        if h.has_producer_id and is_last_record_of_producer(h, last_records):
            retention = BatchRetention.RETAIN_EMPTY
        elif discard_records:
            retention = BatchRetention.DELETE
        else:
            retention = BatchRetention.DELETE_EMPTY
        return RetentionDecision(retention, discard_records, can_discard and h.is_control)


def is_last_record_of_producer(h: BatchHeader, last_records: dict[int, LastRecord]) -> bool:
    last = last_records.get(h.producer_id)
    if last is None:
        return False  # not an active producer: all its batches may go
    if last.last_data_offset is not None:
        return h.last_offset == last.last_data_offset
    return h.is_control and h.producer_epoch == last.producer_epoch
