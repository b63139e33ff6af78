"""Message format conversion, as a Kafka 3.9 broker does it (its log is always record batch v2).

Up-conversion (produce v0-v2 carrying magic 0/1 message sets; Kafka's LogValidator with
``toMagic = 2``): every message of the set, wrappers opened, goes into ONE v2 batch with offset
deltas 0..n-1 (the leader stamps the base offset), no producer id, the topic's timestamp type
(magic 0 messages have no timestamp: -1), and the target codec — the topic's
``compression.type``, where ``producer`` keeps the producer's codec (the last compressed
wrapper's; none if no wrapper was compressed).

Down-conversion (fetch v0-v3; Kafka's RecordsUtil.downConvert driven by
LazyDownConversionRecords / LazyDownConversionRecordsSend): what goes on the wire for one
partition is computed in chunks:

    size       = max(len(records), len(first converted chunk)), or 0 when nothing converts
    chunk 1    = the first batch alone, converted
    chunk 2..  = the following batches, up to 128 KiB (MAX_READ_SIZE) of source per chunk
    padding    = once the chunks run out (or a chunk holds zstd, which magic 0/1 cannot carry),
                 an "overflow" message: offset -1, length max(remaining + 1, 61), zeros —
                 longer than what is left, so consumers drop it as a partial message
    everything is cut at `size` bytes.

Converting one batch (RecordsUtil.convertRecordBatch): control batches are dropped; to magic
0/1 an uncompressed batch keeps only records at or after the fetch offset (a compressed one
keeps all, as the wrapper must stay whole); the codec is kept (one wrapper per batch); headers
are dropped; LogAppendTime batches stay LogAppendTime with their max timestamp.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from .batch import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    MAGIC_VALUE_V2,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    Record,
    TimestampType,
    build_batch,
    decode_batch_records,
    iter_batches,
    peek_magic,
)
from .compression import CompressionType
from .legacy import LOG_OVERHEAD, build_legacy_message_set, iter_legacy_entries, iter_legacy_messages

Buffer = bytes | bytearray | memoryview

MAX_READ_SIZE = 128 * 1024             # LazyDownConversionRecordsSend.MAX_READ_SIZE
MIN_OVERFLOW_MESSAGE_LENGTH = LOG_OVERHEAD


class UnsupportedCompressionTypeError(Exception):
    """zstd cannot be down-converted to magic 0/1 (Kafka's UnsupportedCompressionTypeException)."""


# --------------------------------------------------------------------------- up-conversion


def target_compression(topic_compression_type: str, source: CompressionType) -> CompressionType:
    """BrokerCompressionType.targetCompression: the topic's codec, or the producer's."""
    name = topic_compression_type.lower()
    if name == "producer":
        return source
    if name == "uncompressed":
        return CompressionType.NONE
    return {c.kafka_name: c for c in CompressionType}[name]


def source_compression(buf: Buffer) -> CompressionType:
    """The codec of the last compressed top-level message (LogValidator's sourceCompression)."""
    codec = CompressionType.NONE
    for entry in iter_legacy_entries(buf):
        if entry.compression != CompressionType.NONE:
            codec = entry.compression
    return codec


def up_convert(buf: Buffer, *, topic_compression_type: str, timestamp_type: TimestampType,
               now_ms: int) -> bytes:
    """A magic 0/1 message set as the one v2 batch Kafka's LogValidator appends for it
    (base offset 0: the log assigns offsets). Raises CorruptRecordError on a bad message."""
    messages = list(iter_legacy_messages(buf))
    codec = target_compression(topic_compression_type, source_compression(buf))
    records = [Record(m.timestamp_ms, m.key, m.value) for m in messages]
    return build_batch(records, compression=codec, timestamp_type=timestamp_type,
                       log_append_time_ms=now_ms if timestamp_type == LOG_APPEND_TIME else None)


# --------------------------------------------------------------------------- down-conversion


def _convert_batch(buf: Buffer, pos: int, h: BatchHeader, to_magic: int, first_offset: int) -> bytes:
    records = decode_batch_records(buf, pos, validate=False)
    compressed = h.compression != CompressionType.NONE
    kept = [r for r in records if compressed or r.offset >= first_offset]
    if not kept:
        return b""
    base = kept[0].offset
    log_append = h.timestamp_type == LOG_APPEND_TIME
    return build_legacy_message_set(
        [Record(r.timestamp_ms, r.key, r.value, (), r.offset - base) for r in kept],
        magic=to_magic, base_offset=base, compression=h.compression,
        timestamp_type=LOG_APPEND_TIME if log_append and to_magic > 0 else CREATE_TIME,
        log_append_time_ms=h.max_timestamp if log_append and to_magic > 0 else None)


def down_convert(buf: Buffer, batches: Sequence[tuple[int, BatchHeader]], to_magic: int,
                 first_offset: int) -> bytes:
    """RecordsUtil.downConvert of v2 batches to magic 0 or 1."""
    for _, h in batches:
        if not h.is_control and h.compression == CompressionType.ZSTD:
            raise UnsupportedCompressionTypeError("Down-conversion of zstandard-compressed batches is not supported")
    out = [_convert_batch(buf, pos, h, to_magic, first_offset) for pos, h in batches if not h.is_control]
    return b"".join(out)


def _overflow_message(remaining: int) -> bytes:
    size = max(MIN_OVERFLOW_MESSAGE_LENGTH, min(remaining + 1, MAX_READ_SIZE))
    head = struct.pack(">qi", -1, max(remaining + 1, RECORD_BATCH_OVERHEAD))
    return (head + bytes(size - len(head)))[:size]


def _chunks(batches: list[tuple[int, BatchHeader]]) -> list[list[tuple[int, BatchHeader]]]:
    """Runs of batches of at most MAX_READ_SIZE source bytes (always at least one batch)."""
    out: list[list[tuple[int, BatchHeader]]] = []
    current: list[tuple[int, BatchHeader]] = []
    size = 0
    for b in batches:
        if current and size + b[1].size_in_bytes > MAX_READ_SIZE:
            out.append(current)
            current, size = [], 0
        current.append(b)
        size += b[1].size_in_bytes
    if current:
        out.append(current)
    return out


def lazy_down_convert(records: Buffer, to_magic: int, first_offset: int) -> bytes:
    """The bytes Kafka sends for a partition's records fetched at a version that needs magic
    `to_magic` (0 for fetch v0-v1, 1 for v2-v3). Raises UnsupportedCompressionTypeError when
    the first batch that converts to something is zstd (Kafka then answers
    UNSUPPORTED_COMPRESSION_TYPE for the partition)."""
    if not records or peek_magic(records, 0) != MAGIC_VALUE_V2:
        return bytes(records)
    batches = list(iter_batches(records))
    # LazyDownConversionRecords' constructor: single batches until one converts to something.
    first, i = b"", 0
    while not first and i < len(batches):
        first = down_convert(records, [batches[i]], to_magic, first_offset)
        i += 1
    if not first:
        return b""
    size = max(len(records), len(first))
    out = bytearray(first[:size])
    # The send's iterator then skips exactly one batch (the first) and converts the rest in
    # chunks; a chunk it cannot convert ends the data.
    for chunk in _chunks(batches[1:]):
        if len(out) >= size:
            break
        try:
            out += down_convert(records, chunk, to_magic, first_offset)[:size - len(out)]
        except UnsupportedCompressionTypeError:
            break
    while len(out) < size:
        out += _overflow_message(size - len(out))[:size - len(out)]
    return bytes(out)


__all__ = ["NO_TIMESTAMP", "UnsupportedCompressionTypeError", "down_convert", "lazy_down_convert",
           "source_compression", "target_compression", "up_convert"]
