"""Transaction markers: the control batches a transaction coordinator writes to every partition of
a transaction when it ends (Kafka's ``EndTransactionMarker`` and
``MemoryRecords.withEndTransactionMarker``).

A marker is a record batch v2 (header layout at the top of batch.py) with::

    attributes        = 0x30   isTransactional (bit 4) | isControlBatch (bit 5), no codec,
                               CreateTime
    producerId        = the transaction's producer id
    producerEpoch     = the producer epoch the coordinator ends the transaction with
    baseSequence      = -1     markers carry no sequence
    lastOffsetDelta   = 0      one record
    baseTimestamp     = maxTimestamp = the marker's timestamp
    recordsCount      = 1

and its one record (no headers)::

    key   (4 bytes)  version int16 = 0 | type int16 (0 ABORT, 1 COMMIT)       ControlRecordType
    value (6 bytes)  version int16 = 0 | coordinatorEpoch int32               EndTransactionMarker

so a marker is always 61 + 17 (record: length varint 1, attributes 1, timestamp delta 1, offset
delta 1, key length 1 + 4, value length 1 + 6, header count 1) = 78 bytes. A parser reading an unknown newer key or
value version takes the fields it knows (Kafka reads the prefix too).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from kafkasim.records.batch import (
    NO_PARTITION_LEADER_EPOCH,
    Buffer,
    ControlRecordType,
    build_control_batch,
    decode_batch_records,
    parse_control_key,
    parse_end_txn_marker,
    read_header,
)
from kafkasim.records.errors import CorruptReason, CorruptRecordError

__all__ = ["EndTxnMarker", "end_txn_marker_batch", "parse_end_txn_marker_batch", "parse_end_txn_marker_record"]


@dataclass(init=False, unsafe_hash=True)
class EndTxnMarker:
    """One transaction marker as read back from a control batch."""

    producer_id: Final[int]
    producer_epoch: Final[int]
    coordinator_epoch: Final[int]
    committed: Final[bool]
    timestamp_ms: Final[int]
    base_offset: Final[int]

    # Written out (init=False; its defaults are the only ones) so that mypyc compiles it: a
    # dataclass-made __init__ runs interpreted.
    def __init__(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, committed: bool,
                 timestamp_ms: int, base_offset: int = 0) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.coordinator_epoch = coordinator_epoch
        self.committed = committed
        self.timestamp_ms = timestamp_ms
        self.base_offset = base_offset

    @property
    def control_type(self) -> ControlRecordType:
        return ControlRecordType.COMMIT if self.committed else ControlRecordType.ABORT


def end_txn_marker_batch(producer_id: int, producer_epoch: int, coordinator_epoch: int, committed: bool,
                         timestamp_ms: int, partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH) -> bytes:
    """The marker batch the coordinator's WriteTxnMarkers appends (base offset 0: the leader
    stamps the real one)."""
    return build_control_batch(ControlRecordType.COMMIT if committed else ControlRecordType.ABORT,
                               producer_id=producer_id, producer_epoch=producer_epoch,
                               coordinator_epoch=coordinator_epoch, timestamp_ms=timestamp_ms,
                               partition_leader_epoch=partition_leader_epoch)


def parse_end_txn_marker_record(key: bytes | None, value: bytes | None) -> tuple[bool, int] | None:
    """(committed, coordinator epoch) of a control record, None for a control type that is not
    an end-transaction marker; CorruptRecordError when the key or value is malformed."""
    _, ctype = parse_control_key(key)
    if ctype not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        return None
    _, coordinator_epoch = parse_end_txn_marker(value)
    return ctype == ControlRecordType.COMMIT, coordinator_epoch


def parse_end_txn_marker_batch(buf: Buffer, pos: int = 0) -> EndTxnMarker | None:
    """The marker in the control batch at `pos`; None for an empty control batch (the cleaner
    removed its record: the whole transaction is gone) or another control type. Raises
    CorruptRecordError for a batch that is not a control batch or a malformed record."""
    h = read_header(buf, pos)
    if not h.is_control:
        raise CorruptRecordError(CorruptReason.BAD_CONTROL, "not a control batch")
    records = decode_batch_records(buf, pos, validate=False)
    if not records:
        return None
    rec = records[0]
    parsed = parse_end_txn_marker_record(rec.key, rec.value)
    if parsed is None:
        return None
    committed, coordinator_epoch = parsed
    return EndTxnMarker(h.producer_id, h.producer_epoch, coordinator_epoch, committed, rec.timestamp_ms,
                        h.base_offset)
