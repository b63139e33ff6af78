"""Partition: one topic-partition replica on this broker — its log, leader epoch, high watermark,
and the DelayedFetch waiters to wake when data arrives.

With a single replica in the ISR the high watermark is the log end offset as soon as an append
returns; the replication work generalises it to the minimum log end offset of the ISR.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from kafkasim.broker.producer_state import ProducerStateError, ProducerStateManager
from kafkasim.protocol import errors as E
from kafkasim.records.batch import MAGIC_VALUE_V2, BatchHeader, iter_batches, peek_magic
from kafkasim.records.errors import CorruptReason, CorruptRecordError
from kafkasim.runtime.api import Future
from kafkasim.storage.file_records import FileRecords
from kafkasim.storage.log import AppendInfo, Log, LogConfig


class AppendError(Exception):
    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


@dataclass
class ValidatedRecords:
    buf: bytearray
    headers: list[tuple[int, BatchHeader]]


def validate_produce_records(records: Any, config: LogConfig) -> ValidatedRecords:
    """Kafka's LogValidator checks that need no record parsing: magic 2, a sane length, a CRC
    that matches, exactly one batch per partition (magic 2 producers send one), size within
    max.message.bytes, no control batches from clients."""
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
    for _, h in headers:
        if h.size_in_bytes > config.max_message_bytes:
            raise AppendError(E.MESSAGE_TOO_LARGE, f"batch of {h.size_in_bytes} bytes > max.message.bytes")
        if h.is_control:
            raise AppendError(E.INVALID_RECORD, "clients may not send control batches")
        if h.records_count <= 0 or h.last_offset_delta != h.records_count - 1:
            raise AppendError(E.INVALID_RECORD, "record count and last offset delta disagree")
    return ValidatedRecords(bytearray(records), headers)


class Partition:
    def __init__(self, topic: str, index: int, log: Log, leader_epoch: int, is_leader: bool) -> None:
        self.topic, self.index, self.log = topic, index, log
        self.leader_epoch = leader_epoch
        self.is_leader = is_leader
        self.high_watermark = log.log_end_offset
        self._waiters: list[Future[Any]] = []
        self.producer_state = ProducerStateManager.load(log, f"{topic}-{index}")  # snapshot + log replay

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    async def append_records_to_leader(self, validated: ValidatedRecords) -> AppendInfo:
        if not self.is_leader:
            raise AppendError(E.NOT_LEADER_OR_FOLLOWER, f"not the leader of {self.topic}-{self.index}")
        try:  # idempotence: a duplicate of one of a producer's last 5 batches answers its original offsets
            duplicate = self.producer_state.analyze_append(validated.headers, self.log.log_end_offset)
        except ProducerStateError as exc:
            raise AppendError(exc.error_code, str(exc)) from exc
        if duplicate is not None:
            return duplicate
        info = self.log.append_as_leader(validated.buf, validated.headers, self.leader_epoch)
        self.producer_state.on_append(info)
        if self.log.needs_flush():
            # flush.messages reached: as in Kafka the flush happens inside the append, before the
            # high watermark moves, so no consumer reads what a power loss could take back.
            await self.log.flush()
        self.high_watermark = self.log.log_end_offset  # ISR = {this broker}
        self.wake_waiters()
        return info

    def read(self, offset: int, max_bytes: int, isolation_committed: bool) -> FileRecords:
        # Without transactions the last stable offset equals the high watermark.
        # File regions, not bytes: the socket server sends them with sendfile (Kafka's
        # FileRecords), so fetched data goes from the page cache to the socket.
        return self.log.read_records(offset, max_bytes, max_offset=self.high_watermark)

    def add_waiter(self, fut: Future[Any]) -> None:
        self._waiters.append(fut)

    def wake_waiters(self) -> None:
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            fut.set_result(None)

    def remove_waiter(self, fut: Future[Any]) -> None:
        if fut in self._waiters:
            self._waiters.remove(fut)

    def offset_for_timestamp(self, timestamp: int) -> Optional[tuple[int, int]]:
        return self.log.offset_for_timestamp(timestamp)
