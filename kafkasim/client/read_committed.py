"""read_committed on the consumer side: Kafka's CompletedFetch logic for dropping the batches of
aborted transactions.

A read_committed fetch returns data only below the last stable offset, plus `aborted_transactions`
— (producer id, first offset) of every aborted transaction overlapping the returned range. Walking
the batches in offset order:
  * before a batch with a producer id, every aborted transaction whose first offset is at or
    below the batch's last offset makes its producer id "aborted";
  * an ABORT control batch of an aborted producer id ends that transaction: the id is removed
    (later batches of the same producer belong to a new transaction);
  * a transactional data batch of an aborted producer id is skipped whole;
  * control batches are never returned as records (the caller skips them).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import Any

from kafkasim.records.batch import BatchHeader, ControlRecordType, decode_batch_records, parse_control_key
from kafkasim.records.errors import CorruptRecordError

READ_UNCOMMITTED, READ_COMMITTED = 0, 1


def is_abort_marker(data: bytes, at: int, h: BatchHeader) -> bool:
    if not h.is_control:
        return False
    try:
        for r in decode_batch_records(data, at):
            return parse_control_key(r.key)[1] == ControlRecordType.ABORT
    except CorruptRecordError:
        return False
    return False


class AbortedTransactions:
    def __init__(self, aborted: Iterable[Any] | None) -> None:
        self._queue = [(int(a.first_offset), int(a.producer_id)) for a in (aborted or [])]
        heapq.heapify(self._queue)
        self._producers: set[int] = set()

    def skip(self, data: bytes, at: int, h: BatchHeader) -> bool:
        """Whether the batch at `at` is to be dropped (it belongs to an aborted transaction);
        control batches are left to the caller, which drops them anyway."""
        if not h.has_producer_id:
            return False
        while self._queue and self._queue[0][0] <= h.last_offset:
            self._producers.add(heapq.heappop(self._queue)[1])
        if h.is_control:
            if is_abort_marker(data, at, h):
                self._producers.discard(h.producer_id)
            return False
        return h.is_transactional and h.producer_id in self._producers
