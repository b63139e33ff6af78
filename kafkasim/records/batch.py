"""Record batch v2 (magic 2): Kafka's on-disk and on-wire record format since 0.11.

Batch header (61 bytes, big-endian; ``DefaultRecordBatch``)::

    offset  size  field
         0     8  baseOffset            int64   assigned by the leader (producer sends 0)
         8     4  batchLength           int32   bytes after this field = size - 12
        12     4  partitionLeaderEpoch  int32   stamped by the leader
        16     1  magic                 int8    = 2
        17     4  crc                   uint32  CRC-32C of bytes [21, end)
        21     2  attributes            int16   see below
        23     4  lastOffsetDelta       int32   last offset - baseOffset
        27     8  baseTimestamp         int64   first record's timestamp (or delete horizon)
        35     8  maxTimestamp          int64   max record timestamp (or log append time)
        43     8  producerId            int64   -1 = none
        51     2  producerEpoch         int16   -1 = none
        53     4  baseSequence          int32   -1 = none
        57     4  recordsCount          int32
        61     .  records               (compressed as one stream when codec != 0)

    attributes: bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd)
                bit 3 timestampType (0 CreateTime, 1 LogAppendTime)
                bit 4 isTransactional     bit 5 isControlBatch
                bit 6 hasDeleteHorizonMs  (baseTimestamp holds the delete horizon; KIP-534)
                bits 7-15 unused (0)

The CRC starts at ``attributes``: ``baseOffset``, ``batchLength``, ``partitionLeaderEpoch``
and ``magic`` are outside it, so the leader can stamp offsets and its epoch in place without
recomputing the checksum (``set_base_offset`` / ``set_partition_leader_epoch``).

Record (inside ``records``; varints are ZigZag, see ``varint.py``)::

    length          varint   bytes that follow
    attributes      int8     unused (0)
    timestampDelta  varlong  timestamp - baseTimestamp
    offsetDelta     varint   offset - baseOffset
    keyLength       varint   -1 = null key
    key             bytes
    valueLength     varint   -1 = null value
    value           bytes
    headersCount    varint
    headers         [headerKeyLength varint (>= 0), headerKey UTF-8,
                     headerValueLength varint (-1 = null), headerValue bytes]

Control batch (isControlBatch): exactly one control record whose::

    key   = version int16 (0), type int16 (0 ABORT, 1 COMMIT; KRaft uses 2..)
    value = for ABORT/COMMIT (EndTxnMarker): version int16 (0), coordinatorEpoch int32

Functions that only look at the header (``read_header``, ``validate_batch``,
``iter_batches``, ``set_*``) never parse records and never copy: the broker keeps records
as opaque bytes from socket to disk.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Final, NamedTuple

from . import compression as _compression
from .compression import CompressionType, codec_of
from .crc import crc32c
from .errors import CorruptReason, CorruptRecordError
from .varint import decode_varint, decode_varlong, encode_varint, encode_varlong

Buffer = bytes | bytearray | memoryview
WritableBuffer = bytearray | memoryview

# --------------------------------------------------------------------------- layout

BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57
RECORDS_OFFSET = 61

RECORD_BATCH_OVERHEAD = 61  # header size, the smallest possible (empty) batch
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part every magic shares
HEADER_SIZE_UP_TO_MAGIC = 17  # bytes needed to know which layout follows
MIN_BATCH_LENGTH = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD  # 49
MAGIC_VALUE_V0 = 0
MAGIC_VALUE_V1 = 1
MAGIC_VALUE_V2 = 2
CURRENT_MAGIC = MAGIC_VALUE_V2

COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
assert _HEADER.size == RECORD_BATCH_OVERHEAD
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")
_INT8 = struct.Struct(">b")
_MAX_TS = struct.Struct(">q")


class TimestampType(IntEnum):
    NO_TIMESTAMP_TYPE = -1  # magic 0 messages
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1

    @property
    def kafka_name(self) -> str:
        """As Kafka prints it (``CreateTime``, ``LogAppendTime``, ``NoTimestampType``)."""
        return {-1: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"}[self.value]


CREATE_TIME = TimestampType.CREATE_TIME
LOG_APPEND_TIME = TimestampType.LOG_APPEND_TIME
NO_TIMESTAMP_TYPE = TimestampType.NO_TIMESTAMP_TYPE


class ControlRecordType(IntEnum):
    """Control record key ``type`` (``org.apache.kafka.common.record.ControlRecordType``)."""

    ABORT = 0
    COMMIT = 1
    # KRaft metadata log markers; listed so they decode, never built here.
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


CONTROL_RECORD_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0
_CONTROL_KEY = struct.Struct(">hh")
_END_TXN_VALUE = struct.Struct(">hi")


# --------------------------------------------------------------------------- header


def _increment_sequence(sequence: int, increment: int) -> int:
    """Producer sequences wrap at INT32_MAX back to 0 (``DefaultRecordBatch.incrementSequence``)."""
    if sequence > 0x7FFFFFFF - increment:
        return increment - (0x7FFFFFFF - sequence) - 1
    return sequence + increment


class BatchHeader(NamedTuple):
    """The 61-byte header of a v2 batch, every field as stored. A named tuple rather than a
    frozen dataclass: one is made per batch walked, and a tuple is built ~5x faster."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def compression_id(self) -> int:
        return self.attributes & COMPRESSION_CODEC_MASK

    @property
    def compression(self) -> CompressionType:
        """Codec; raises ``CorruptRecordError(bad_compression)`` for ids 5..7."""
        return codec_of(self.attributes & COMPRESSION_CODEC_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        # With bit 6 set the cleaner stored the horizon in baseTimestamp (KIP-534).
        return self.base_timestamp if self.has_delete_horizon else None

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size_in_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def record_count(self) -> int:
        return self.records_count

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return _increment_sequence(self.base_sequence, self.last_offset_delta)


_make_header = BatchHeader._make


def peek_magic(buf: Buffer, pos: int = 0) -> int:
    """Magic byte of the batch/message at ``pos`` (byte 16 in every format)."""
    if len(buf) - pos < HEADER_SIZE_UP_TO_MAGIC:
        raise CorruptRecordError(
            CorruptReason.TRUNCATED, "fewer than 17 bytes: no magic byte yet", pos
        )
    return int(_INT8.unpack_from(buf, pos + MAGIC_OFFSET)[0])


def read_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Parse the v2 header at ``pos`` without checking length or CRC."""
    magic = peek_magic(buf, pos)
    if magic != MAGIC_VALUE_V2:
        # magic 0/1 use a different layout after byte 16: see legacy.py.
        raise CorruptRecordError(
            CorruptReason.BAD_MAGIC, f"magic {magic}, expected 2", pos
        )
    if len(buf) - pos < RECORD_BATCH_OVERHEAD:
        raise CorruptRecordError(
            CorruptReason.TRUNCATED, "fewer than 61 bytes of batch header", pos
        )
    return _make_header(_HEADER.unpack_from(buf, pos))


def _check_frame(buf: Buffer, pos: int, max_batch_size: int | None) -> int:
    """Length sanity of the batch at ``pos``; returns its size in bytes."""
    remaining = len(buf) - pos
    if remaining < LOG_OVERHEAD:
        raise CorruptRecordError(
            CorruptReason.TRUNCATED,
            f"{remaining} bytes, need 12 for offset+length",
            pos,
        )
    (batch_length,) = _INT32.unpack_from(buf, pos + LENGTH_OFFSET)
    if batch_length < MIN_BATCH_LENGTH:
        if (
            remaining >= HEADER_SIZE_UP_TO_MAGIC
            and buf[pos + MAGIC_OFFSET] != MAGIC_VALUE_V2
        ):
            raise CorruptRecordError(
                CorruptReason.BAD_MAGIC,
                f"magic {buf[pos + MAGIC_OFFSET]}, expected 2",
                pos,
            )
        raise CorruptRecordError(
            CorruptReason.BAD_LENGTH,
            f"batchLength {batch_length} < {MIN_BATCH_LENGTH}",
            pos,
        )
    if max_batch_size is not None and batch_length + LOG_OVERHEAD > max_batch_size:
        raise CorruptRecordError(
            CorruptReason.TOO_LARGE,
            f"batch of {batch_length + LOG_OVERHEAD} bytes > {max_batch_size}",
            pos,
        )
    if (
        remaining >= HEADER_SIZE_UP_TO_MAGIC
        and buf[pos + MAGIC_OFFSET] != MAGIC_VALUE_V2
    ):
        raise CorruptRecordError(
            CorruptReason.BAD_MAGIC, f"magic {buf[pos + MAGIC_OFFSET]}, expected 2", pos
        )
    if batch_length + LOG_OVERHEAD > remaining:
        raise CorruptRecordError(
            CorruptReason.TRUNCATED,
            f"batch needs {batch_length + LOG_OVERHEAD} bytes, {remaining} left",
            pos,
        )
    return int(batch_length) + LOG_OVERHEAD


def validate_batch(
    buf: Buffer, pos: int = 0, *, max_batch_size: int | None = None
) -> BatchHeader:
    """Check length, magic and CRC-32C of the v2 batch at ``pos``; return its header.

    One crc32c call over a memoryview slice: no copy of the records. Does not parse records
    (``DefaultRecordBatch.ensureValid`` does not either).
    """
    size = _check_frame(buf, pos, max_batch_size)
    header = _make_header(_HEADER.unpack_from(buf, pos))
    computed = crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size])
    if computed != header.crc:
        raise CorruptRecordError(
            CorruptReason.CRC_MISMATCH,
            f"stored crc {header.crc}, computed {computed}",
            pos,
        )
    return header


def compute_crc(buf: Buffer, pos: int = 0) -> int:
    """CRC-32C the batch at ``pos`` should carry (from its own batchLength)."""
    size = _check_frame(buf, pos, None)
    return crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size])


class BatchIterator:
    """Iterate ``(position, header)`` over concatenated v2 batches.

    Stops cleanly at a trailing partial batch (a fetch response cut at ``max_bytes``, a
    segment torn by a crash): afterwards ``position`` is where the next batch would start and
    ``partial`` says whether bytes remain there. A structurally impossible batch (bad length
    or magic, CRC mismatch when ``validate``) raises ``CorruptRecordError`` whose ``pos`` is
    the batch's start, which is where log recovery truncates.
    """

    __slots__ = ("_buf", "_max", "_validate", "end", "partial", "position")

    def __init__(
        self,
        buf: Buffer,
        pos: int = 0,
        *,
        validate: bool = False,
        max_batch_size: int | None = None,
    ):
        self._buf = buf
        self.position = pos
        self.end = len(buf)
        self._validate = validate
        self._max = max_batch_size
        self.partial = False

    def __iter__(self) -> BatchIterator:
        return self

    # Annotated Any, not tuple[int, BatchHeader]: mypyc (the native build) would return that
    # tuple unboxed from the C iternext slot, which expects an object, and crash.
    def __next__(self) -> Any:
        buf, pos = self._buf, self.position
        remaining = self.end - pos
        if remaining == 0:
            raise StopIteration
        if remaining < LOG_OVERHEAD:
            self.partial = True
            raise StopIteration
        (batch_length,) = _INT32.unpack_from(buf, pos + LENGTH_OFFSET)
        # A well-formed prefix of a batch that is not all here yet is not corruption.
        if (
            batch_length >= MIN_BATCH_LENGTH
            and batch_length + LOG_OVERHEAD > remaining
            and (
                remaining < HEADER_SIZE_UP_TO_MAGIC
                or buf[pos + MAGIC_OFFSET] == MAGIC_VALUE_V2
            )
            and (self._max is None or batch_length + LOG_OVERHEAD <= self._max)
        ):
            self.partial = True
            raise StopIteration
        if self._validate:
            header = validate_batch(buf, pos, max_batch_size=self._max)
        else:
            _check_frame(buf, pos, self._max)
            header = _make_header(_HEADER.unpack_from(buf, pos))
        self.position = pos + header.batch_length + LOG_OVERHEAD
        return pos, header


def iter_batches(
    buf: Buffer,
    pos: int = 0,
    *,
    validate: bool = False,
    max_batch_size: int | None = None,
) -> BatchIterator:
    """``(position, BatchHeader)`` for each complete v2 batch in ``buf`` from ``pos``."""
    return BatchIterator(buf, pos, validate=validate, max_batch_size=max_batch_size)


# --------------------------------------------------------------------------- in-place edits


def set_base_offset(buf: WritableBuffer, pos: int, base_offset: int) -> None:
    """Stamp the leader-assigned base offset. Bytes 0..7 are outside the CRC (which starts
    at byte 21), so the stored CRC stays valid -- tests/records/test_batch.py proves it."""
    _INT64.pack_into(buf, pos + BASE_OFFSET_OFFSET, base_offset)


def set_partition_leader_epoch(buf: WritableBuffer, pos: int, epoch: int) -> None:
    """Stamp the leader epoch. Bytes 12..15, outside the CRC, so no recomputation."""
    _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_max_timestamp(
    buf: WritableBuffer, pos: int, timestamp_type: TimestampType, max_timestamp: int
) -> None:
    """Set timestamp type + maxTimestamp (LogAppendTime stamping) and recompute the CRC.

    Both fields ARE inside the CRC, so unlike the offset/epoch stamps this costs one
    crc32c pass; Kafka's ``DefaultRecordBatch.setMaxTimestamp`` does the same.
    """
    size = _check_frame(buf, pos, None)
    (attributes,) = _INT16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    else:
        attributes &= ~TIMESTAMP_TYPE_MASK
    _INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, max_timestamp)
    _UINT32.pack_into(
        buf,
        pos + CRC_OFFSET,
        crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size]),
    )


# --------------------------------------------------------------------------- records


@dataclass(init=False, unsafe_hash=True, slots=True)
class Record:
    """A record to build. ``offset_delta`` None means "its index in the batch"."""

    timestamp_ms: Final[int]
    key: Final[bytes | None]
    value: Final[bytes | None]
    headers: Final[Sequence[tuple[str, bytes | None]]]
    offset_delta: Final[int | None]

    # Written out (init=False; its defaults are the only ones) so that mypyc compiles it: a
    # dataclass-made __init__ runs interpreted.
    def __init__(self, timestamp_ms: int, key: bytes | None, value: bytes | None,
                 headers: Sequence[tuple[str, bytes | None]] = (), offset_delta: int | None = None) -> None:
        self.timestamp_ms = timestamp_ms
        self.key = key
        self.value = value
        self.headers = headers
        self.offset_delta = offset_delta


class DecodedRecord(NamedTuple):
    """A record read back, with absolute offset and the timestamp Kafka reports. A named tuple
    (like BatchHeader): one is made per record a consumer, follower check or checker reads."""

    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    sequence: int = NO_SEQUENCE


def _encode_bytes(data: bytes | None) -> bytes:
    if data is None:
        return b"\x01"  # varint(-1): null
    return encode_varint(len(data)) + bytes(data)


def encode_record(record: Record, offset_delta: int, timestamp_delta: int) -> bytes:
    """One record, length-prefixed (``DefaultRecord.writeTo``)."""
    parts = [b"\x00", encode_varlong(timestamp_delta), encode_varint(offset_delta)]
    parts.append(_encode_bytes(record.key))
    parts.append(_encode_bytes(record.value))
    parts.append(encode_varint(len(record.headers)))
    for hkey, hvalue in record.headers:
        if hkey is None:
            raise ValueError("header key must not be null")
        parts.append(_encode_bytes(hkey.encode("utf-8")))
        parts.append(_encode_bytes(hvalue))
    body = b"".join(parts)
    return encode_varint(len(body)) + body


def _attributes(
    compression: CompressionType,
    timestamp_type: TimestampType,
    is_transactional: bool,
    is_control: bool,
    has_delete_horizon: bool = False,
) -> int:
    attrs = int(compression) & COMPRESSION_CODEC_MASK
    if timestamp_type == LOG_APPEND_TIME:
        attrs |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attrs |= TRANSACTIONAL_FLAG_MASK
    if is_control:
        attrs |= CONTROL_FLAG_MASK
    if has_delete_horizon:
        attrs |= DELETE_HORIZON_FLAG_MASK
    return attrs


def _assemble(
    *,
    base_offset: int,
    partition_leader_epoch: int,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    records_count: int,
    body: bytes,
) -> bytes:
    """Header + body with the CRC computed over [attributes, end)."""
    out = bytearray(RECORD_BATCH_OVERHEAD + len(body))
    _HEADER.pack_into(
        out,
        0,
        base_offset,
        RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(body),
        partition_leader_epoch,
        MAGIC_VALUE_V2,
        0,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        records_count,
    )
    out[RECORD_BATCH_OVERHEAD:] = body
    _UINT32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def build_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    compression: CompressionType | int = CompressionType.NONE,
    timestamp_type: TimestampType = CREATE_TIME,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    is_transactional: bool = False,
    is_control: bool = False,
    log_append_time_ms: int | None = None,
) -> bytes:
    """Build a v2 batch as ``MemoryRecordsBuilder`` does.

    baseTimestamp = first record's timestamp; maxTimestamp = max record timestamp, or
    ``log_append_time_ms`` for LogAppendTime (required then). Offset deltas default to the
    record's index and must strictly increase. An empty ``records`` builds an empty batch
    (count 0, timestamps -1), the shape the cleaner leaves behind.
    """
    codec = CompressionType(compression)
    timestamp_type = TimestampType(timestamp_type)
    if timestamp_type == NO_TIMESTAMP_TYPE:
        raise ValueError("magic 2 batches have CreateTime or LogAppendTime")
    base_timestamp = records[0].timestamp_ms if records else NO_TIMESTAMP
    encoded: list[bytes] = []
    max_timestamp = NO_TIMESTAMP
    last_delta = -1
    for index, record in enumerate(records):
        delta = index if record.offset_delta is None else record.offset_delta
        if delta <= last_delta:
            raise ValueError(
                f"offset deltas must strictly increase: {delta} after {last_delta}"
            )
        last_delta = delta
        max_timestamp = max(max_timestamp, record.timestamp_ms)
        encoded.append(
            encode_record(record, delta, record.timestamp_ms - base_timestamp)
        )
    if timestamp_type == LOG_APPEND_TIME:
        if log_append_time_ms is None:
            raise ValueError("LogAppendTime batches need log_append_time_ms")
        max_timestamp = log_append_time_ms
    body = b"".join(encoded)
    if codec != CompressionType.NONE:
        body = _compression.compress(codec, body)
    return _assemble(
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        attributes=_attributes(codec, timestamp_type, is_transactional, is_control),
        last_offset_delta=max(last_delta, 0),
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        records_count=len(records),
        body=body,
    )


def build_empty_batch(
    *,
    base_offset: int,
    last_offset: int,
    timestamp_ms: int,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    timestamp_type: TimestampType = CREATE_TIME,
    is_transactional: bool = False,
    is_control: bool = False,
) -> bytes:
    """A record-less batch keeping offsets/sequence (``DefaultRecordBatch.writeEmptyHeader``):
    what the log cleaner writes when it removed every record but must keep the producer's
    last sequence."""
    return _assemble(
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        attributes=_attributes(
            CompressionType.NONE, timestamp_type, is_transactional, is_control
        ),
        last_offset_delta=last_offset - base_offset,
        base_timestamp=timestamp_ms,
        max_timestamp=timestamp_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        records_count=0,
        body=b"",
    )


# --------------------------------------------------------------------------- control records


def encode_control_key(
    control_type: ControlRecordType | int, version: int = CONTROL_RECORD_KEY_VERSION
) -> bytes:
    return _CONTROL_KEY.pack(version, int(control_type))


def parse_control_key(key: bytes | None) -> tuple[int, ControlRecordType | int]:
    """``(version, type)`` of a control record key; unknown types come back as int."""
    if key is None or len(key) < _CONTROL_KEY.size:
        raise CorruptRecordError(
            CorruptReason.BAD_CONTROL, "control record key shorter than 4 bytes"
        )
    version, ctype = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(
            CorruptReason.BAD_CONTROL, f"negative control key version {version}"
        )
    try:
        return version, ControlRecordType(ctype)
    except ValueError:
        return version, ctype


def encode_end_txn_marker(
    coordinator_epoch: int, version: int = END_TXN_MARKER_VERSION
) -> bytes:
    return _END_TXN_VALUE.pack(version, coordinator_epoch)


def parse_end_txn_marker(value: bytes | None) -> tuple[int, int]:
    """``(version, coordinatorEpoch)`` of an ABORT/COMMIT control record value."""
    if value is None or len(value) < _END_TXN_VALUE.size:
        raise CorruptRecordError(
            CorruptReason.BAD_CONTROL, "end-txn marker value shorter than 6 bytes"
        )
    version, epoch = _END_TXN_VALUE.unpack_from(value)
    if version < 0:
        raise CorruptRecordError(
            CorruptReason.BAD_CONTROL, f"negative end-txn marker version {version}"
        )
    return version, epoch


def build_control_batch(
    control_type: ControlRecordType,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp_ms: int,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """Transaction marker batch (``MemoryRecords.withEndTransactionMarker``): transactional +
    control, no sequence, uncompressed, one record key=(0,type) value=(0,coordinatorEpoch)."""
    if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise ValueError("only ABORT/COMMIT end-transaction markers are built here")
    record = Record(
        timestamp_ms=timestamp_ms,
        key=encode_control_key(control_type),
        value=encode_end_txn_marker(coordinator_epoch),
    )
    return build_batch(
        [record],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=NO_SEQUENCE,
        partition_leader_epoch=partition_leader_epoch,
        is_transactional=True,
        is_control=True,
    )


# --------------------------------------------------------------------------- decoding


def _bad(detail: str, pos: int | None = None) -> CorruptRecordError:
    return CorruptRecordError(CorruptReason.BAD_RECORD, detail, pos)


def _read_nullable(
    view: memoryview, p: int, end: int, what: str
) -> tuple[bytes | None, int]:
    n, p = decode_varint(view, p)
    if n == -1:
        return None, p
    if n < -1 or p + n > end:
        raise _bad(f"{what} length {n} does not fit the record", p)
    return bytes(view[p : p + n]), p + n


def decode_records(
    data: Buffer, count: int, header: BatchHeader
) -> list[DecodedRecord]:
    """Parse ``count`` records from an uncompressed records section."""
    view = memoryview(data).cast("B") if not isinstance(data, memoryview) else data
    total = len(view)
    log_append = header.timestamp_type == LOG_APPEND_TIME
    out: list[DecodedRecord] = []
    p = 0
    for _ in range(count):
        length, p = decode_varint(view, p)
        end = p + length
        if length < 0 or end > total:
            raise _bad(f"record length {length} exceeds the batch", p)
        sub = view[:end]  # bounds every read below to this record
        p += 1  # attributes: unused
        ts_delta, p = decode_varlong(sub, p)
        off_delta, p = decode_varint(sub, p)
        key, p = _read_nullable(sub, p, end, "key")
        value, p = _read_nullable(sub, p, end, "value")
        n_headers, p = decode_varint(sub, p)
        if n_headers < 0:
            raise _bad(f"negative header count {n_headers}", p)
        headers = []
        for _h in range(n_headers):
            hlen, p = decode_varint(sub, p)
            if hlen < 0 or p + hlen > end:
                raise _bad(f"header key length {hlen} does not fit the record", p)
            # Java's Utils.utf8 (new String(.., UTF_8)) replaces what is not UTF-8.
            hkey = str(sub[p : p + hlen], "utf-8", "replace")
            p += hlen
            hvalue, p = _read_nullable(sub, p, end, "header value")
            headers.append((hkey, hvalue))
        if p != end:
            raise _bad(
                f"record declared {length} bytes but used {length - (end - p)}", p
            )
        timestamp = (
            header.max_timestamp if log_append else header.base_timestamp + ts_delta
        )
        sequence = (
            NO_SEQUENCE
            if header.base_sequence == NO_SEQUENCE
            else _increment_sequence(header.base_sequence, off_delta)
        )
        out.append(
            DecodedRecord(
                header.base_offset + off_delta,
                timestamp,
                key,
                value,
                tuple(headers),
                sequence,
            )
        )
    if p != total:
        raise _bad(f"{total - p} bytes after the last of {count} records")
    return out


def decode_batch_records(
    buf: Buffer, pos: int = 0, *, validate: bool = True, max_decompressed: int | None = None
) -> list[DecodedRecord]:
    """All records of the v2 batch at ``pos`` (decompressed, refused past ``max_decompressed``
    bytes when given), with absolute offsets.

    LogAppendTime batches report ``maxTimestamp`` as every record's timestamp, as Kafka's
    consumer does. Control records come back as records; use ``parse_control_key``.
    """
    header = validate_batch(buf, pos) if validate else read_header(buf, pos)
    if header.records_count < 0:
        raise _bad(f"negative record count {header.records_count}", pos)
    view = memoryview(buf)[pos + RECORDS_OFFSET : pos + header.size_in_bytes]
    codec = header.compression
    data: Buffer = (
        view if codec == CompressionType.NONE else _compression.decompress(codec, view, limit=max_decompressed)
    )
    return decode_records(data, header.records_count, header)


def iter_batch_records(
    buf: Buffer, pos: int = 0, *, validate: bool = True
) -> Iterator[tuple[BatchHeader, DecodedRecord]]:
    """Every record of every batch in ``buf`` (stops at a trailing partial batch)."""
    for batch_pos, header in iter_batches(buf, pos, validate=validate):
        for record in decode_batch_records(buf, batch_pos, validate=False):
            yield header, record
