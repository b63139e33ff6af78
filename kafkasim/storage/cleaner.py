"""LogCleaner: log compaction (cleanup.policy=compact), as Kafka 3.9's Cleaner does it.

1. Cleanable range: from the first dirty offset (cleaner-offset-checkpoint, else the log start
   offset) to the first uncleanable offset = the lowest of the active segment's base, the high
   watermark, the first segment younger than min.compaction.lag.ms and — beyond Kafka — the
   base of the segment holding the checkpointed recovery point (so recovery, which only starts
   there, never mistakes a cleaned gap between segments for a lost tail).
2. Offset map: for every keyed record in the dirty range, key -> its latest offset (bounded by
   log.cleaner.dedupe.buffer.size, 24 bytes an entry as Kafka's SkimpyOffsetMap counts).
3. Every segment below the end of the mapped range is rewritten, in groups that fit one segment
   (groupSegmentsBySize), into a ``.cleaned`` segment, which is flushed and swapped in (log.py's
   crash-safe replace). Per record: keep it if it is the latest for its key (or past the map);
   drop records without a key; a tombstone is kept until its batch's delete horizon
   (delete.retention.ms after the clean that first saw it, stored in baseTimestamp with
   attribute bit 6 — KIP-534) has passed. Per batch (MemoryRecords.filterTo): an untouched batch
   is copied byte for byte; a filtered one is rebuilt with its base offset, last offset delta,
   producer id/epoch, base sequence, leader epoch and codec kept, so every batch keeps its last
   offset and the producer's last sequence; a batch left with no records is dropped unless it is
   the last batch of its producer, which stays as an empty batch. Control batches are kept.
4. The first dirty offset becomes the end of the mapped range (cleaner-offset-checkpoint).

Transactions (Kafka's CleanedTransactionMetadata, in part): the cleanable range ends at the
first unstable offset (an undecided transaction is never cleaned); records of ABORTED
transactions (by the log's txn indexes) never enter the offset map and are removed (their batch
kept empty when it is its producer's last, for the sequence); the cleaned segment keeps the txn
index entries of its sources. Not modelled yet: removing control batches once their transaction
is fully cleaned and delete.retention.ms has passed (markers are kept for good).

"Active producers" are approximated as every producer id in the log (Kafka asks its producer
state manager, which forgets producers after producer.id.expiration.ms).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from kafkasim.records.batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    CRC_OFFSET,
    DELETE_HORIZON_FLAG_MASK,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    MAGIC_VALUE_V2,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    DecodedRecord,
    Record,
    decode_batch_records,
    encode_record,
    read_header,
)
from kafkasim.records.compression import CompressionType, compress
from kafkasim.records.crc import crc32c
from kafkasim.storage.log import Log
from kafkasim.storage.segment import LogSegment
from kafkasim.storage.txn_index import AbortedTxn

_HEADER = struct.Struct(">qiibIhiqqqhii")  # the 61-byte v2 batch header (records/batch.py)
_UINT32 = struct.Struct(">I")
OFFSET_MAP_ENTRY_BYTES = 24  # SkimpyOffsetMap: 16-byte MD5 of the key + 8-byte offset
DEDUPE_LOAD_FACTOR = 0.9     # log.cleaner.io.buffer.load.factor
INT32_MAX = 0x7FFFFFFF


@dataclass
class CleanerConfig:
    dedupe_buffer_size: int = 134217728  # log.cleaner.dedupe.buffer.size
    backoff_ms: int = 15000              # log.cleaner.backoff.ms
    enable: bool = True                  # log.cleaner.enable

    @property
    def max_map_entries(self) -> int:
        return int(self.dedupe_buffer_size // OFFSET_MAP_ENTRY_BYTES * DEDUPE_LOAD_FACTOR)


@dataclass
class CleanResult:
    first_dirty_offset: int
    end_offset: int
    segments_cleaned: int = 0
    records_read: int = 0
    records_kept: int = 0
    batches_emptied: int = 0
    groups: list[list[int]] = field(default_factory=list)


@dataclass
class OffsetMap:
    max_entries: int
    offsets: dict[bytes, int] = field(default_factory=dict)
    latest_offset: int = -1

    def put(self, key: bytes, offset: int) -> bool:
        """False when full (the caller stops mapping there)."""
        if key not in self.offsets and len(self.offsets) >= self.max_entries:
            return False
        self.offsets[key] = offset
        self.latest_offset = max(self.latest_offset, offset)
        return True

    def get(self, key: bytes) -> int:
        return self.offsets.get(key, -1)


def cleanable_range(log: Log, checkpoint: int | None, now_ms: int) -> tuple[int, int]:
    """(first dirty offset, first uncleanable offset) — LogCleanerManager.cleanableOffsets."""
    first_dirty = log.log_start_offset if checkpoint is None else checkpoint
    if first_dirty < log.log_start_offset or first_dirty > log.log_end_offset:
        first_dirty = log.log_start_offset
    candidates = [log.high_watermark, log.active_segment.base_offset]
    first_unstable = log.producer_state_manager.first_unstable_offset()
    if first_unstable is not None:
        candidates.append(first_unstable)
    segs = log.segments
    rp = log.checkpointed_recovery_point
    holding_rp = [s.base_offset for s in segs if s.base_offset <= rp]
    candidates.append(holding_rp[-1] if holding_rp else segs[0].base_offset)
    lag = max(log.config.min_compaction_lag_ms, 0)
    if lag > 0:
        for s in segs[:-1]:
            if s.base_offset >= first_dirty and s.largest_timestamp() > now_ms - lag:
                candidates.append(s.base_offset)
                break
    return first_dirty, max(first_dirty, min(candidates))


def dirty_ratio(log: Log, first_dirty: int, first_uncleanable: int) -> float:
    clean = sum(s.size for s in log.segments_in(-1, first_dirty)) if first_dirty > 0 else 0
    dirty = sum(s.size for s in log.segments_in(first_dirty, max(first_dirty, first_uncleanable)))
    total = clean + dirty
    return dirty / total if total else 0.0


class Cleaner:
    def __init__(self, config: CleanerConfig) -> None:
        self.config = config
        self.aborted = AbortedBatches([])

    async def clean(self, log: Log, first_dirty: int, first_uncleanable: int, now_ms: int) -> CleanResult:
        """Cleaner.doClean over [first_dirty, first_uncleanable)."""
        result = CleanResult(first_dirty, first_dirty)
        if first_uncleanable <= first_dirty:
            return result
        self.aborted = AbortedBatches(log.collect_aborted_transactions(0, log.log_end_offset))
        offset_map = self.build_offset_map(log, first_dirty, first_uncleanable, result)
        end = offset_map.latest_offset + 1
        result.end_offset = max(first_dirty, end)
        active_producers = last_batches_of_producers(log)
        for group in group_segments_by_size(log.segments_in(0, end), log.config.segment_bytes,
                                            log.config.segment_index_bytes, first_uncleanable):
            await self.clean_segments(log, group, offset_map, now_ms, active_producers, result)
            result.groups.append([s.base_offset for s in group])
        return result

    def build_offset_map(self, log: Log, start: int, end: int, result: CleanResult) -> OffsetMap:
        offset_map = OffsetMap(self.config.max_map_entries)
        dirty = log.segments_in(start, end)
        for i, seg in enumerate(dirty):
            next_start = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
            _, position = seg.offset_index.lookup(start)
            for b in seg.batches(position):
                if b.base_offset >= next_start:
                    break
                data = seg.log.read(b.position, b.size)
                h = read_header(data)
                if not h.is_control and not self.aborted.holds(h):
                    for rec in decode_batch_records(data, 0, validate=False):
                        if rec.key is not None and rec.offset >= start:
                            if not offset_map.put(rec.key, rec.offset):
                                return offset_map
                        result.records_read += 1
                if b.last_offset >= start:
                    offset_map.latest_offset = max(offset_map.latest_offset, b.last_offset)
            offset_map.latest_offset = max(offset_map.latest_offset, next_start - 1)
        return offset_map

    async def clean_segments(self, log: Log, group: list[LogSegment], offset_map: OffsetMap, now_ms: int,
                             active_producers: dict[int, int], result: CleanResult) -> None:
        cleaned = log.create_cleaned_segment(group[0].base_offset)
        try:
            for seg in group:
                self.clean_into(seg, cleaned, offset_map, now_ms, log.config.delete_retention_ms,
                                active_producers, result)
                for txn in seg.txn_index.all_aborted_txns():  # every marker is kept: so are its entries
                    cleaned.txn_index.append(txn)
            cleaned.on_become_inactive_segment()
            await cleaned.flush()
            cleaned.last_modified_ms = group[-1].last_modified_ms
            await log.replace_segments(cleaned, group)
            result.segments_cleaned += len(group)
        except BaseException:
            cleaned.delete_if_exists()
            raise

    def clean_into(self, source: LogSegment, dest: LogSegment, offset_map: OffsetMap, now_ms: int,
                   delete_retention_ms: int, active_producers: dict[int, int], result: CleanResult) -> None:
        for b in source.batches(0):
            data = source.log.read(b.position, b.size)
            h = read_header(data)
            out = filter_batch(data, h, offset_map, now_ms, delete_retention_ms, active_producers, result,
                               aborted=self.aborted.holds(h))
            if out is None:
                continue
            oh = read_header(out)
            dest.append(oh.last_offset, oh.max_timestamp, oh.last_offset, out, dest.last_modified_ms)


def filter_batch(data: bytes, h: BatchHeader, offset_map: OffsetMap, now_ms: int, delete_retention_ms: int,
                 active_producers: dict[int, int], result: CleanResult, aborted: bool = False) -> bytes | None:
    """MemoryRecords.filterTo for one batch with the cleaner's RecordFilter: the batch to
    write (the original bytes, a rebuilt batch, an empty batch) or None to drop it. An aborted
    transaction's batch loses every record (Cleaner.shouldDiscardBatch)."""
    if h.is_control:
        return data
    records = [] if aborted else decode_batch_records(data, 0, validate=False)
    horizon = h.delete_horizon_ms
    kept: list[DecodedRecord] = []
    tombstones = False
    for rec in records:
        if should_retain(rec, horizon, offset_map, now_ms):
            kept.append(rec)
            tombstones |= rec.value is None
    result.records_kept += len(kept)
    if kept:
        need_horizon = tombstones and horizon is None
        if len(kept) == len(records) and not need_horizon:
            return data
        new_horizon = now_ms + delete_retention_ms if need_horizon else horizon
        return rebuild_batch(h, kept, new_horizon)
    if h.has_producer_id and active_producers.get(h.producer_id) == h.last_offset:
        result.batches_emptied += 1
        return empty_batch_like(h)
    return None


class AbortedBatches:
    """Which transactional batches belong to an aborted transaction: those of its producer from
    its first offset up to its ABORT marker."""

    def __init__(self, txns: list[AbortedTxn]) -> None:
        self.ranges: dict[int, list[tuple[int, int]]] = {}
        for t in txns:
            self.ranges.setdefault(t.producer_id, []).append((t.first_offset, t.last_offset))

    def holds(self, h: BatchHeader) -> bool:
        if not h.is_transactional or h.is_control:
            return False
        return any(first <= h.base_offset < last for first, last in self.ranges.get(h.producer_id, ()))


def should_retain(rec: DecodedRecord, horizon: int | None, offset_map: OffsetMap, now_ms: int) -> bool:
    """Cleaner.shouldRetainRecord (magic v2)."""
    if rec.offset > offset_map.latest_offset:
        return True
    if rec.key is None:
        return False  # a compacted topic's records need keys
    latest = rec.offset >= offset_map.get(rec.key)
    retain_deletes = horizon is None or now_ms < horizon
    return latest and (rec.value is not None or retain_deletes)


def rebuild_batch(h: BatchHeader, kept: list[DecodedRecord], delete_horizon_ms: int | None) -> bytes:
    """MemoryRecordsBuilder over the retained records with the original batch's identity, its
    last offset kept (builder.overrideLastOffset) so the producer's last sequence survives."""
    # Records read from a LogAppendTime batch carry its max timestamp (as Kafka's do).
    base_ts = delete_horizon_ms if delete_horizon_ms is not None else kept[0].timestamp_ms
    body = b"".join(encode_record(Record(r.timestamp_ms, r.key, r.value, r.headers), r.offset - h.base_offset,
                                  r.timestamp_ms - base_ts) for r in kept)
    codec = h.attributes & COMPRESSION_CODEC_MASK
    if codec != CompressionType.NONE:
        body = compress(codec, body)
    max_ts = h.max_timestamp if h.timestamp_type == LOG_APPEND_TIME else max(r.timestamp_ms for r in kept)
    attributes = h.attributes & ~DELETE_HORIZON_FLAG_MASK
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_FLAG_MASK
    return assemble(h, attributes=attributes, base_timestamp=base_ts, max_timestamp=max_ts,
                    records_count=len(kept), body=body)


def empty_batch_like(h: BatchHeader) -> bytes:
    """DefaultRecordBatch.writeEmptyHeader: no records, same offsets, producer and sequence."""
    attributes = h.attributes & (COMPRESSION_CODEC_MASK ^ 0xFFFF) & ~DELETE_HORIZON_FLAG_MASK
    return assemble(h, attributes=attributes, base_timestamp=h.max_timestamp, max_timestamp=h.max_timestamp,
                    records_count=0, body=b"")


def assemble(h: BatchHeader, *, attributes: int, base_timestamp: int, max_timestamp: int, records_count: int,
             body: bytes) -> bytes:
    out = bytearray(RECORD_BATCH_OVERHEAD + len(body))
    _HEADER.pack_into(out, 0, h.base_offset, RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(body),
                      h.partition_leader_epoch, MAGIC_VALUE_V2, 0, attributes, h.last_offset_delta, base_timestamp,
                      max_timestamp, h.producer_id, h.producer_epoch, h.base_sequence, records_count)
    out[RECORD_BATCH_OVERHEAD:] = body
    _UINT32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def last_batches_of_producers(log: Log) -> dict[int, int]:
    """producer id -> last offset of its last batch in the log (control batches excluded)."""
    out: dict[int, int] = {}
    for seg in log.segments:
        for b in seg.batches(0):
            head = seg.log.read(b.position, RECORD_BATCH_OVERHEAD)
            if len(head) < RECORD_BATCH_OVERHEAD:
                continue
            h = read_header(head)
            if h.has_producer_id and not (h.attributes & CONTROL_FLAG_MASK):
                out[h.producer_id] = b.last_offset
    return out


def group_segments_by_size(segments: list[LogSegment], max_size: int, max_index_size: int,
                           first_uncleanable: int) -> list[list[LogSegment]]:
    """Cleaner.groupSegmentsBySize: consecutive segments whose sizes (log and both indexes) and
    offset span fit one segment."""
    groups: list[list[LogSegment]] = []
    segs = list(segments)
    while segs:
        group = [segs.pop(0)]
        log_size = group[0].size
        index_size = group[0].offset_index.size_in_bytes()
        time_size = group[0].time_index.size_in_bytes()
        while segs:
            nxt = segs[0]
            last_offset = segs[1].base_offset - 1 if len(segs) > 1 else max(first_uncleanable - 1, nxt.base_offset)
            if not (log_size + nxt.size <= max_size
                    and index_size + nxt.offset_index.size_in_bytes() <= max_index_size
                    and time_size + nxt.time_index.size_in_bytes() <= max_index_size
                    and (nxt.size == 0 or last_offset - group[0].base_offset <= INT32_MAX)):
                break
            group.append(segs.pop(0))
            log_size += nxt.size
            index_size += nxt.offset_index.size_in_bytes()
            time_size += nxt.time_index.size_in_bytes()
        groups.append(group)
    return groups
