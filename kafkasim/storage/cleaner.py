"""LogCleaner: log compaction (cleanup.policy=compact), as Kafka 3.9's Cleaner does it.

1. Cleanable range: from the first dirty offset (cleaner-offset-checkpoint, else the log start
   offset) to the first uncleanable offset = the lowest of the active segment's base, the high
   watermark, the first segment younger than min.compaction.lag.ms and — beyond Kafka — the
   base of the segment holding the checkpointed recovery point (so recovery, which only starts
   there, never mistakes a cleaned gap between segments for a lost tail) — rounded down, as
   Kafka's LogToClean does, to the base of the segment holding it.
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
   the last batch of its producer, which stays as an empty batch. Control batches: below.
4. The first dirty offset becomes the end of the mapped range (cleaner-offset-checkpoint).

Transactions (cleaner_txn.py, Kafka's CleanedTransactionMetadata): the cleanable range ends at
the first unstable offset, so no undecided transaction and no marker above the last stable
offset is ever cleaned. Records of ABORTED transactions never enter the offset map and are
removed; a marker whose transaction has no batch left gets a delete horizon (delete.retention.ms)
and is removed by the first clean past it; an ABORT marker that stays keeps its entry in the
cleaned segment's txn index, one that goes takes it along. Whatever holds an active producer's
last record stays (emptied if need be): its last data batch (the sequence) or, with no data
batch in its state, its marker at its current epoch (the epoch, for fencing). "Active" is
Kafka's: the producers of the log's producer state (expired ones are no longer there).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from kafkasim.records.batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_CODEC_MASK,
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
from kafkasim.storage.cleaner_txn import BatchRetention, CleanedTransactionMetadata, LastRecord, RetentionDecision
from kafkasim.storage.log import Log
from kafkasim.storage.segment import LogSegment

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
    # LogToClean (calculateCleanableBytes): the segment holding the uncleanable offset is not
    # cleaned at all — cleaning rewrites whole segments, and part of that one is above the LSO.
    uncleanable = min(candidates)
    holding = [s.base_offset for s in segs if s.base_offset <= uncleanable]
    return first_dirty, max(first_dirty, holding[-1] if holding else uncleanable)


def dirty_ratio(log: Log, first_dirty: int, first_uncleanable: int) -> float:
    clean = sum(s.size for s in log.segments_in(-1, first_dirty)) if first_dirty > 0 else 0
    dirty = sum(s.size for s in log.segments_in(first_dirty, max(first_dirty, first_uncleanable)))
    total = clean + dirty
    return dirty / total if total else 0.0


class Cleaner:
    def __init__(self, config: CleanerConfig) -> None:
        self.config = config

    async def clean(self, log: Log, first_dirty: int, first_uncleanable: int, now_ms: int) -> CleanResult:
        """Cleaner.doClean over [first_dirty, first_uncleanable)."""
        result = CleanResult(first_dirty, first_dirty)
        if first_uncleanable <= first_dirty:
            return result
        offset_map = self.build_offset_map(log, first_dirty, first_uncleanable, result)
        end = offset_map.latest_offset + 1
        result.end_offset = max(first_dirty, end)
        txns = CleanedTransactionMetadata()  # carried from group to group
        last_records = last_records_of_active_producers(log)
        for group in group_segments_by_size(log.segments_in(0, end), log.config.segment_bytes,
                                            log.config.segment_index_bytes, first_uncleanable):
            await self.clean_segments(log, group, offset_map, now_ms, txns, last_records, result)
            result.groups.append([s.base_offset for s in group])
        return result

    def build_offset_map(self, log: Log, start: int, end: int, result: CleanResult) -> OffsetMap:
        offset_map = OffsetMap(self.config.max_map_entries)
        txns = CleanedTransactionMetadata()
        txns.add_aborted_transactions(log.collect_aborted_transactions(start, end))
        dirty = log.segments_in(start, end)
        for i, seg in enumerate(dirty):
            next_start = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
            if not self.map_segment(seg, start, next_start, offset_map, txns, result):
                return offset_map
            offset_map.latest_offset = max(offset_map.latest_offset, next_start - 1)
        return offset_map

    def map_segment(self, seg: LogSegment, start: int, next_start: int, offset_map: OffsetMap,
                    txns: CleanedTransactionMetadata, result: CleanResult) -> bool:
        """Cleaner.buildOffsetMapForSegment: False once the map is full. An aborted
        transaction's records never enter the map (they must not shadow a committed value)."""
        _, position = seg.offset_index.lookup(start)
        for b in seg.batches(position):
            if b.base_offset >= next_start:
                break
            data = seg.log.read(b.position, b.size)
            h = read_header(data)
            if h.is_control:
                txns.on_control_batch_read(h, data)
            elif not txns.on_batch_read(h):
                for rec in decode_batch_records(data, 0, validate=False):
                    if rec.key is not None and rec.offset >= start:
                        if not offset_map.put(rec.key, rec.offset):
                            return False
                    result.records_read += 1
            if b.last_offset >= start:
                offset_map.latest_offset = max(offset_map.latest_offset, b.last_offset)
        return True

    async def clean_segments(self, log: Log, group: list[LogSegment], offset_map: OffsetMap, now_ms: int,
                             txns: CleanedTransactionMetadata, last_records: dict[int, LastRecord],
                             result: CleanResult) -> None:
        """Cleaner.cleanSegments: the group into one .cleaned segment, swapped in. Its txn index
        gets only the aborted transactions whose marker is kept with data left (CleanedTransactionMetadata)."""
        cleaned = log.create_cleaned_segment(group[0].base_offset)
        txns.cleaned_index = cleaned.txn_index
        try:
            for i, seg in enumerate(group):
                # From the whole segment's range: the new segment's txn index is rebuilt from them.
                upper = group[i + 1].base_offset if i + 1 < len(group) else seg.read_next_offset()
                txns.add_aborted_transactions(log.collect_aborted_transactions(seg.base_offset, upper))
                self.clean_into(seg, cleaned, offset_map, now_ms, log.config.delete_retention_ms,
                                txns, last_records, result)
            cleaned.on_become_inactive_segment()
            await cleaned.flush()
            cleaned.last_modified_ms = group[-1].last_modified_ms
            await log.replace_segments(cleaned, group)
            result.segments_cleaned += len(group)
        except BaseException:
            cleaned.delete_if_exists()
            raise

    def clean_into(self, source: LogSegment, dest: LogSegment, offset_map: OffsetMap, now_ms: int,
                   delete_retention_ms: int, txns: CleanedTransactionMetadata, last_records: dict[int, LastRecord],
                   result: CleanResult) -> None:
        for b in source.batches(0):
            data = source.log.read(b.position, b.size)
            h = read_header(data)
            decision = txns.check_batch_retention(h, data, now_ms, last_records)
            out = filter_batch(data, h, decision, offset_map, now_ms, delete_retention_ms, result)
            if out is None:
                continue
            oh = read_header(out)
            dest.append(oh.last_offset, oh.max_timestamp, oh.last_offset, out, dest.last_modified_ms)


def filter_batch(data: bytes, h: BatchHeader, decision: RetentionDecision, offset_map: OffsetMap, now_ms: int,
                 delete_retention_ms: int, result: CleanResult) -> bytes | None:
    """MemoryRecords.filterTo for one batch with the cleaner's RecordFilter: the batch to
    write (the original bytes, a rebuilt batch, an empty batch) or None to drop it."""
    if decision.retention == BatchRetention.DELETE:
        return None
    records = [] if decision.discard_records else decode_batch_records(data, 0, validate=False)
    horizon = h.delete_horizon_ms
    kept: list[DecodedRecord] = []
    tombstones = False
    for rec in records:
        if h.is_control or should_retain(rec, horizon, offset_map, now_ms):
            kept.append(rec)
            tombstones |= rec.value is None
    result.records_kept += len(kept)
    if kept:
        need_horizon = (tombstones or decision.marker_for_empty_txn) and horizon is None
        if len(kept) == len(records) and not need_horizon:
            return data
        new_horizon = now_ms + delete_retention_ms if need_horizon else horizon
        return rebuild_batch(h, kept, new_horizon)
    if decision.retention == BatchRetention.RETAIN_EMPTY:
        result.batches_emptied += 1
        return empty_batch_like(h)
    return None


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
    """DefaultRecordBatch.writeEmptyHeader: no records, same offsets, producer, sequence and
    transactional/control bits; no codec, no delete horizon, baseTimestamp NO_TIMESTAMP (-1)."""
    attributes = h.attributes & (COMPRESSION_CODEC_MASK ^ 0xFFFF) & ~DELETE_HORIZON_FLAG_MASK
    return assemble(h, attributes=attributes, base_timestamp=-1, max_timestamp=h.max_timestamp,
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


def last_records_of_active_producers(log: Log) -> dict[int, LastRecord]:
    """UnifiedLog.lastRecordsOfActiveProducers: from the producer state (expired producers are
    no longer in it, so their batches may all go)."""
    return {pid: LastRecord(e.last_data_offset if e.last_data_offset >= 0 else None, e.producer_epoch)
            for pid, e in log.producer_state_manager.producers.items()}


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
