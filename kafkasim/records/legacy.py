"""Legacy message sets: magic 0 (Kafka < 0.10) and magic 1 (0.10 .. 0.11).

A message set is messages back to back, with no count in front (``LegacyRecord``)::

    offset        int64    v0: absolute; v1 inner (compressed) messages: relative 0..n-1
    messageSize   int32    bytes that follow (crc .. end of value)
    crc           uint32   CRC-32 (IEEE, not 32C) of magic .. end of value
    magic         int8     0 or 1
    attributes    int8     bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4; zstd is v2-only)
                           bit 3 timestampType (v1 only: 0 CreateTime, 1 LogAppendTime)
    timestamp     int64    v1 only
    key           int32 length (-1 = null) + bytes
    value         int32 length (-1 = null) + bytes

    smallest message: v0 14 bytes after messageSize (RECORD_OVERHEAD_V0), v1 22.

Compression nests: a *wrapper* message (null key) whose attributes name the codec and whose
value is the compressed bytes of an inner message set of the same magic. The wrapper's
offset is the absolute offset of the LAST inner message:

    v0: inner offsets are absolute (the broker recompressed with real offsets);
    v1: inner offsets are relative; absolute = wrapper.offset - last_inner.offset + inner.offset
        (so the broker can assign offsets by touching only the wrapper).

    v1 timestamps: wrapper timestamp = max inner timestamp (CreateTime) or the log append
    time; with LogAppendTime inner messages report the wrapper's timestamp.

A broker handed magic 0/1 converts to a v2 batch (``convert_legacy_to_v2``): offsets and
timestamps kept, magic 0's missing timestamp becomes NO_TIMESTAMP (-1).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise

from . import compression as _compression
from .batch import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    NO_TIMESTAMP,
    NO_TIMESTAMP_TYPE,
    Record,
    TimestampType,
    build_batch,
)
from .compression import CompressionType, codec_of
from .crc import crc32
from .errors import CorruptReason, CorruptRecordError

Buffer = bytes | bytearray | memoryview

OFFSET_OFFSET = 0
SIZE_OFFSET = 8
CRC_OFFSET = 12
MAGIC_OFFSET = 16
ATTRIBUTES_OFFSET = 17
TIMESTAMP_OFFSET = 18  # v1 only
LOG_OVERHEAD = 12
RECORD_OVERHEAD_V0 = (
    14  # crc 4 + magic 1 + attributes 1 + key length 4 + value length 4
)
RECORD_OVERHEAD_V1 = 22  # + timestamp 8
COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08

_ENTRY_HEAD = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class LegacyEntry:
    """One top-level message of a set (a plain message or a compressed wrapper)."""

    position: int
    offset: int
    magic: int
    attributes: int
    crc: int
    timestamp_ms: int  # NO_TIMESTAMP for magic 0
    key: bytes | None
    value: bytes | None

    @property
    def compression(self) -> CompressionType:
        return codec_of(self.attributes & COMPRESSION_CODEC_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.magic == 0:
            return NO_TIMESTAMP_TYPE
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def size_in_bytes(self) -> int:
        overhead = RECORD_OVERHEAD_V0 if self.magic == 0 else RECORD_OVERHEAD_V1
        return LOG_OVERHEAD + overhead + len(self.key or b"") + len(self.value or b"")


@dataclass(frozen=True, slots=True)
class LegacyMessage:
    """A message after deep iteration: absolute offset, the timestamp Kafka reports."""

    offset: int
    magic: int
    timestamp_ms: int
    timestamp_type: TimestampType
    key: bytes | None
    value: bytes | None
    compression: CompressionType  # of the wrapper it came from (NONE if not wrapped)


# --------------------------------------------------------------------------- parsing


def _read_bytes(
    buf: Buffer, p: int, end: int, what: str, entry_pos: int
) -> tuple[bytes | None, int]:
    if p + 4 > end:
        raise CorruptRecordError(
            CorruptReason.BAD_RECORD, f"{what} length runs past the message", entry_pos
        )
    (n,) = _INT32.unpack_from(buf, p)
    p += 4
    if n == -1:
        return None, p
    if n < 0 or p + n > end:
        raise CorruptRecordError(
            CorruptReason.BAD_RECORD,
            f"{what} length {n} does not fit the message",
            entry_pos,
        )
    return bytes(buf[p : p + n]), p + n


def read_legacy_entry(
    buf: Buffer, pos: int = 0, *, verify_crc: bool = True
) -> LegacyEntry:
    """Parse and CRC-check the message at ``pos`` (must be complete)."""
    remaining = len(buf) - pos
    if remaining < LOG_OVERHEAD:
        raise CorruptRecordError(CorruptReason.TRUNCATED, "fewer than 12 bytes", pos)
    offset, size = struct.unpack_from(">qi", buf, pos)
    if size < RECORD_OVERHEAD_V0:
        raise CorruptRecordError(
            CorruptReason.BAD_LENGTH, f"message size {size} < {RECORD_OVERHEAD_V0}", pos
        )
    end = pos + LOG_OVERHEAD + size
    if remaining >= MAGIC_OFFSET + 1 and buf[pos + MAGIC_OFFSET] not in (0, 1):
        raise CorruptRecordError(
            CorruptReason.BAD_MAGIC,
            f"magic {buf[pos + MAGIC_OFFSET]}, expected 0 or 1",
            pos,
        )
    if end > len(buf):
        raise CorruptRecordError(
            CorruptReason.TRUNCATED, f"message needs {LOG_OVERHEAD + size} bytes", pos
        )
    _, _, crc, magic, attributes = _ENTRY_HEAD.unpack_from(buf, pos)
    if magic == 1 and size < RECORD_OVERHEAD_V1:
        raise CorruptRecordError(
            CorruptReason.BAD_LENGTH,
            f"v1 message size {size} < {RECORD_OVERHEAD_V1}",
            pos,
        )
    if verify_crc:
        computed = crc32(memoryview(buf)[pos + MAGIC_OFFSET : end])
        if computed != crc:
            raise CorruptRecordError(
                CorruptReason.CRC_MISMATCH,
                f"stored crc {crc}, computed {computed}",
                pos,
            )
    p = pos + TIMESTAMP_OFFSET
    timestamp = NO_TIMESTAMP
    if magic == 1:
        (timestamp,) = _INT64.unpack_from(buf, p)
        p += 8
    key, p = _read_bytes(buf, p, end, "key", pos)
    value, p = _read_bytes(buf, p, end, "value", pos)
    if p != end:
        raise CorruptRecordError(
            CorruptReason.BAD_RECORD, f"{end - p} bytes after the value", pos
        )
    return LegacyEntry(pos, offset, magic, attributes, crc, timestamp, key, value)


class LegacyIterator:
    """Top-level entries of a message set; stops at a trailing partial message
    (Kafka < 0.11 fetch responses routinely end in one) and records where in ``position``."""

    __slots__ = ("_buf", "_verify", "partial", "position")

    def __init__(self, buf: Buffer, pos: int = 0, *, verify_crc: bool = True) -> None:
        self._buf = buf
        self.position = pos
        self.partial = False
        self._verify = verify_crc

    def __iter__(self) -> LegacyIterator:
        return self

    def __next__(self) -> LegacyEntry:
        buf, pos = self._buf, self.position
        remaining = len(buf) - pos
        if remaining == 0:
            raise StopIteration
        if remaining < LOG_OVERHEAD:
            self.partial = True
            raise StopIteration
        (size,) = _INT32.unpack_from(buf, pos + SIZE_OFFSET)
        if (
            size >= RECORD_OVERHEAD_V0
            and LOG_OVERHEAD + size > remaining
            and (remaining <= MAGIC_OFFSET or buf[pos + MAGIC_OFFSET] in (0, 1))
        ):
            self.partial = True
            raise StopIteration
        entry = read_legacy_entry(buf, pos, verify_crc=self._verify)
        self.position = pos + LOG_OVERHEAD + size
        return entry


def iter_legacy_entries(
    buf: Buffer, pos: int = 0, *, verify_crc: bool = True
) -> LegacyIterator:
    """Shallow iteration: wrappers are returned as they are, not opened."""
    return LegacyIterator(buf, pos, verify_crc=verify_crc)


def _inner_messages(wrapper: LegacyEntry) -> list[LegacyMessage]:
    """Open a compressed wrapper (``AbstractLegacyRecordBatch.DeepRecordsIterator``)."""
    codec = wrapper.compression
    if wrapper.value is None:
        raise CorruptRecordError(
            CorruptReason.BAD_RECORD,
            "compressed wrapper with null value",
            wrapper.position,
        )
    data = _compression.decompress(codec, wrapper.value, magic=wrapper.magic)
    entries = LegacyIterator(data)
    inner = list(entries)
    # A partial inner message is corruption: the wrapper's CRC said the bytes are whole.
    if entries.partial or not inner:
        raise CorruptRecordError(
            CorruptReason.BAD_RECORD,
            "truncated or empty inner message set",
            wrapper.position,
        )
    out: list[LegacyMessage] = []
    base = 0
    if wrapper.magic > 0:
        base = wrapper.offset - inner[-1].offset
    log_append = wrapper.timestamp_type == LOG_APPEND_TIME
    for msg in inner:
        if msg.magic != wrapper.magic:
            raise CorruptRecordError(
                CorruptReason.BAD_RECORD,
                f"inner magic {msg.magic} != wrapper magic {wrapper.magic}",
                wrapper.position,
            )
        if msg.attributes & COMPRESSION_CODEC_MASK:
            raise CorruptRecordError(
                CorruptReason.BAD_RECORD, "nested compressed message", wrapper.position
            )
        if msg.magic == 0:
            ts, ts_type = NO_TIMESTAMP, NO_TIMESTAMP_TYPE
        elif log_append:
            ts, ts_type = wrapper.timestamp_ms, LOG_APPEND_TIME
        else:
            ts, ts_type = msg.timestamp_ms, CREATE_TIME
        out.append(
            LegacyMessage(
                base + msg.offset, msg.magic, ts, ts_type, msg.key, msg.value, codec
            )
        )
    return out


def iter_legacy_messages(buf: Buffer, pos: int = 0) -> Iterator[LegacyMessage]:
    """Deep iteration with CRC validation of wrappers and inner messages."""
    for entry in LegacyIterator(buf, pos):
        if entry.attributes & COMPRESSION_CODEC_MASK:
            yield from _inner_messages(entry)
        else:
            yield LegacyMessage(
                entry.offset,
                entry.magic,
                entry.timestamp_ms,
                entry.timestamp_type,
                entry.key,
                entry.value,
                CompressionType.NONE,
            )


# --------------------------------------------------------------------------- building


def encode_legacy_message(
    offset: int,
    magic: int,
    attributes: int,
    timestamp_ms: int,
    key: bytes | None,
    value: bytes | None,
) -> bytes:
    """One message with its offset/size prefix and CRC-32."""
    if magic not in (0, 1):
        raise ValueError(f"legacy magic must be 0 or 1, not {magic}")
    body = bytearray(struct.pack(">bb", magic, attributes))
    if magic == 1:
        body += _INT64.pack(timestamp_ms)
    for part in (key, value):
        if part is None:
            body += _INT32.pack(-1)
        else:
            body += _INT32.pack(len(part)) + part
    return struct.pack(">qiI", offset, 4 + len(body), crc32(body)) + bytes(body)


def build_legacy_message_set(
    records: Sequence[Record],
    *,
    magic: int,
    base_offset: int = 0,
    compression: CompressionType | int = CompressionType.NONE,
    timestamp_type: TimestampType = CREATE_TIME,
    log_append_time_ms: int | None = None,
) -> bytes:
    """Build what a pre-0.11 producer/broker wrote (``MemoryRecordsBuilder`` with magic 0/1).

    Offsets are ``base_offset + (offset_delta or index)``; with compression all records go
    into one wrapper. Headers cannot be represented and raise ``ValueError``.
    """
    codec = CompressionType(compression)
    if codec == CompressionType.ZSTD:
        raise ValueError("zstd needs magic 2")
    if not records and codec != CompressionType.NONE:
        raise ValueError("a compressed wrapper needs at least one message")
    ts_attr = (
        TIMESTAMP_TYPE_MASK if (magic == 1 and timestamp_type == LOG_APPEND_TIME) else 0
    )
    if ts_attr and log_append_time_ms is None:
        raise ValueError("LogAppendTime needs log_append_time_ms")
    deltas = [
        i if r.offset_delta is None else r.offset_delta for i, r in enumerate(records)
    ]
    messages = []
    for record, delta in zip(records, deltas, strict=False):
        if record.headers:
            raise ValueError("magic 0/1 messages have no headers")
        ts = (
            log_append_time_ms
            if ts_attr and log_append_time_ms is not None
            else record.timestamp_ms
        )
        # v1 inner messages carry relative offsets; v0 (and uncompressed) absolute ones.
        inner_offset = (
            delta
            if (codec != CompressionType.NONE and magic == 1)
            else base_offset + delta
        )
        messages.append(
            encode_legacy_message(
                inner_offset, magic, ts_attr, ts, record.key, record.value
            )
        )
    inner = b"".join(messages)
    if codec == CompressionType.NONE:
        return inner
    wrapper_ts = (
        log_append_time_ms
        if ts_attr and log_append_time_ms is not None
        else max(r.timestamp_ms for r in records)
    )
    return encode_legacy_message(
        base_offset + deltas[-1],
        magic,
        int(codec) | ts_attr,
        wrapper_ts,
        None,
        _compression.compress(codec, inner, magic=magic),
    )


# --------------------------------------------------------------------------- conversion


def convert_legacy_to_v2(
    buf: Buffer,
    *,
    base_offset: int | None = None,
    compression: CompressionType | int | None = None,
    partition_leader_epoch: int = -1,
) -> bytes:
    """One v2 batch holding every message of a magic 0/1 message set.

    ``base_offset=None`` keeps the messages' absolute offsets (they must strictly increase,
    as in a log); an int assigns ``base_offset + index`` (what the leader does to a produce
    request, where offsets are whatever the client put there). Timestamps are kept; magic 0
    messages get NO_TIMESTAMP (-1) with CreateTime, as Kafka's up-conversion does. The batch
    is LogAppendTime only if every message was. ``compression=None`` keeps the wrappers'
    codec when they all agree, else NONE. No producer id: legacy messages have none.
    A trailing partial message is ignored, like a fetch response's.
    """
    messages = list(iter_legacy_messages(buf))
    if not messages:
        raise CorruptRecordError(
            CorruptReason.TRUNCATED, "no complete message in the set", 0
        )
    if compression is None:
        codecs = {m.compression for m in messages}
        compression = codecs.pop() if len(codecs) == 1 else CompressionType.NONE
    if base_offset is None:
        base_offset = messages[0].offset
        deltas = [m.offset - base_offset for m in messages]
        if any(b <= a for a, b in pairwise(deltas)):
            raise CorruptRecordError(
                CorruptReason.BAD_RECORD, "legacy offsets do not strictly increase", 0
            )
    else:
        deltas = list(range(len(messages)))
    all_log_append = all(m.timestamp_type == LOG_APPEND_TIME for m in messages)
    records = [
        Record(m.timestamp_ms, m.key, m.value, (), d) for m, d in zip(messages, deltas, strict=False)
    ]
    return build_batch(
        records,
        base_offset=base_offset,
        compression=compression,
        timestamp_type=LOG_APPEND_TIME if all_log_append else CREATE_TIME,
        log_append_time_ms=max(m.timestamp_ms for m in messages)
        if all_log_append
        else None,
        partition_leader_epoch=partition_leader_epoch,
    )
