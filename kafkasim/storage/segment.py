"""LogSegment: one ``.log`` file of record batches and its two sparse indexes (Kafka's
org.apache.kafka.storage.internals.log.LogSegment, with FileRecords' batch scanning).

    <20-digit base offset>.log        record batches back to back, as on the wire (layout at the
                                      top of kafkasim/records/batch.py); the leader stamped
                                      baseOffset and partitionLeaderEpoch
    <20-digit base offset>.index      OffsetIndex   (layout in index.py)
    <20-digit base offset>.timeindex  TimeIndex     (layout in index.py)
    <20-digit base offset>.txnindex   TransactionIndex: the aborted transactions whose ABORT
                                      marker is in this segment (layout in txn_index.py; the
                                      file exists only once one was written)

A suffix (".deleted", ".cleaned", ".swap") marks files on their way out or in, as in Kafka.

Only the batch header is ever parsed here — the first 43 bytes of the 61::

    0 baseOffset int64 | 8 batchLength int32 | 12 partitionLeaderEpoch int32 | 16 magic int8 |
    17 crc uint32 | 21 attributes int16 | 23 lastOffsetDelta int32 | 27 baseTimestamp int64 |
    35 maxTimestamp int64

Recovery additionally checks the CRC-32C over [21, end) — records are never decoded except to
answer a ListOffsets by timestamp at record granularity.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Final

import crc32c as _crc32c  # the C implementation records.crc wraps; called bare on the hot path

from kafkasim.records.batch import LOG_OVERHEAD, MAGIC_VALUE_V2, MIN_BATCH_LENGTH, decode_batch_records
from kafkasim.runtime.api import FileHandle, FileSystem
from kafkasim.storage.file_records import FileRegion
from kafkasim.storage.index import NO_TIMESTAMP, IndexOffsetOverflowError, OffsetIndex, TimeIndex
from kafkasim.storage.txn_index import TXN_INDEX_SUFFIX, AbortedTxn, TransactionIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

HEADER_PREFIX = 43  # bytes of the batch header read to walk a segment (up to maxTimestamp)
_HDR = struct.Struct(">qiibIhiqq")  # baseOffset .. maxTimestamp, as laid out above
_LEN = struct.Struct(">i")
_CRC = struct.Struct(">I")
SCAN_CHUNK_BYTES = 64 * 1024        # reads while walking headers (offset/timestamp lookups)
RECOVERY_CHUNK_BYTES = 4 * 1024 * 1024  # reads while validating a whole segment
INT32_MAX = 0x7FFFFFFF


def filename_prefix(offset: int) -> str:
    return f"{offset:020d}"


def log_file_name(offset: int, suffix: str = "") -> str:
    return f"{filename_prefix(offset)}{LOG_SUFFIX}{suffix}"


def offset_from_file_name(name: str) -> int:
    return int(name.split(".", 1)[0])


@dataclass(init=False, unsafe_hash=True, slots=True)
class BatchInfo:
    """A batch's place in a segment and the header fields the log needs."""

    position: Final[int]
    base_offset: Final[int]
    size: Final[int]
    last_offset: Final[int]
    max_timestamp: Final[int]
    partition_leader_epoch: Final[int]

    # Written out (init=False; its defaults are the only ones) so that mypyc compiles it: a
    # dataclass-made __init__ runs interpreted.
    def __init__(self, position: int, base_offset: int, size: int, last_offset: int, max_timestamp: int,
                 partition_leader_epoch: int) -> None:
        self.position = position
        self.base_offset = base_offset
        self.size = size
        self.last_offset = last_offset
        self.max_timestamp = max_timestamp
        self.partition_leader_epoch = partition_leader_epoch


@dataclass
class RecoveryResult:
    truncated_bytes: int
    reason: str
    next_offset: int
    epochs: list[tuple[int, int]] = field(default_factory=list)  # (leader epoch, start offset)


class LogSegment:
    def __init__(self, fs: FileSystem, dir_path: str, base_offset: int, *, index_interval_bytes: int,
                 max_index_size: int, roll_jitter_ms: int, now_ms: int, suffix: str = "") -> None:
        self.fs, self.dir, self.base_offset = fs, dir_path, base_offset
        self.suffix = suffix
        self.index_interval_bytes = index_interval_bytes
        self.roll_jitter_ms = roll_jitter_ms
        self.offset_index_existed = fs.exists(self._path(INDEX_SUFFIX))
        self.time_index_existed = fs.exists(self._path(TIME_INDEX_SUFFIX))
        self.log: FileHandle = fs.open(self._path(LOG_SUFFIX))
        self.offset_index = OffsetIndex(fs, self._path(INDEX_SUFFIX), base_offset, max_index_size)
        self.time_index = TimeIndex(fs, self._path(TIME_INDEX_SUFFIX), base_offset, max_index_size)
        self.txn_index = TransactionIndex(fs, self._path(TXN_INDEX_SUFFIX), base_offset)
        self.created_ms = now_ms
        self.last_modified_ms = now_ms
        self.rolling_based_timestamp: int | None = None
        self._max_ts_and_offset: tuple[int, int] | None = None  # None: not read yet (UNKNOWN)
        self.bytes_since_last_index_entry = 0
        self.deleted = False

    def _path(self, kind: str, suffix: str | None = None) -> str:
        s = self.suffix if suffix is None else suffix
        return f"{self.dir}/{filename_prefix(self.base_offset)}{kind}{s}"

    @property
    def size(self) -> int:
        return self.log.size()

    def __repr__(self) -> str:
        return f"LogSegment(baseOffset={self.base_offset}, size={self.size})"

    # ---------------------------------------------------------------- timestamps
    def read_max_timestamp_and_offset_so_far(self) -> tuple[int, int]:
        if self._max_ts_and_offset is None:
            self._max_ts_and_offset = self.time_index.last_entry
        return self._max_ts_and_offset

    @property
    def max_timestamp_so_far(self) -> int:
        return self.read_max_timestamp_and_offset_so_far()[0]

    def largest_timestamp(self) -> int:
        """The segment's largest record timestamp, else its last-modified time (kept in memory:
        the runtime's FileSystem has no mtime)."""
        ts = self.max_timestamp_so_far
        return ts if ts >= 0 else self.last_modified_ms

    def _load_first_batch_timestamp(self) -> None:
        if self.rolling_based_timestamp is None:
            for b in self.batches(0, 1):
                self.rolling_based_timestamp = b.max_timestamp

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        self._load_first_batch_timestamp()
        ts = self.rolling_based_timestamp if self.rolling_based_timestamp is not None else -1
        if ts >= 0:
            return message_timestamp - ts
        return now_ms - self.created_ms

    def should_roll(self, *, now_ms: int, max_timestamp_in_messages: int, max_offset_in_messages: int,
                    messages_size: int, segment_ms: int, segment_bytes: int) -> bool:
        """LogSegment.shouldRoll: full by size, old by segment.ms, an index full, or an offset
        too far from the base for the 4-byte relative offsets."""
        size = self.log.size()
        if size > segment_bytes - messages_size:
            return True
        if size > 0 and self.time_waited_for_roll(now_ms, max_timestamp_in_messages) > segment_ms - self.roll_jitter_ms:
            return True
        return (self.offset_index.is_full() or self.time_index.is_full()
                or not 0 <= max_offset_in_messages - self.base_offset <= INT32_MAX)

    # ---------------------------------------------------------------- append
    def append(self, largest_offset: int, largest_timestamp: int, shallow_offset_of_max_timestamp: int,
               records: bytes | bytearray | memoryview, now_ms: int) -> None:
        """LogSegment.append: the bytes at the end of the .log, an index entry every
        index.interval.bytes (the append's last offset at the position it starts at)."""
        n = len(records)
        if n == 0:
            return
        position = self.log.size()
        if position == 0:
            self.rolling_based_timestamp = largest_timestamp
        if not 0 <= largest_offset - self.base_offset <= INT32_MAX:
            raise IndexOffsetOverflowError(f"offset {largest_offset} overflows segment {self.base_offset}")
        self.log.append(records)
        self.last_modified_ms = now_ms
        so_far = self._max_ts_and_offset or self.read_max_timestamp_and_offset_so_far()
        if largest_timestamp > so_far[0]:
            so_far = self._max_ts_and_offset = (largest_timestamp, shallow_offset_of_max_timestamp)
        if self.bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append(largest_offset, position)
            self.time_index.maybe_append(so_far[0], so_far[1])
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += n

    # ---------------------------------------------------------------- walking batches
    def batches(self, start: int = 0, limit: int | None = None, end: int | None = None) -> Iterator[BatchInfo]:
        """Batch headers from byte `start` (a batch boundary) to `end` (default: the file end);
        stops at anything that is not a whole batch."""
        stop = self.log.size() if end is None else end
        pos, count = start, 0
        chunk, chunk_start = b"", start
        while pos + LOG_OVERHEAD <= stop and (limit is None or count < limit):
            i = pos - chunk_start
            if i + HEADER_PREFIX > len(chunk):
                chunk, chunk_start, i = self.log.read(pos, min(SCAN_CHUNK_BYTES, stop - pos)), pos, 0
                if len(chunk) < LOG_OVERHEAD:
                    return
            if i + HEADER_PREFIX > len(chunk):  # a batch shorter than a header: not whole
                return
            base, length, epoch, _magic, _crc, _attr, lod, _bts, max_ts = _HDR.unpack_from(chunk, i)
            size = length + LOG_OVERHEAD
            if length < MIN_BATCH_LENGTH or pos + size > stop:
                return
            yield BatchInfo(pos, base, size, base + lod, max_ts, epoch)
            pos += size
            count += 1

    def translate_offset(self, offset: int, starting_position: int = 0) -> BatchInfo | None:
        """The first batch whose last offset is >= offset (searching from the index entry)."""
        _, position = self.offset_index.lookup(offset)
        # batches()'s walk, inlined: a fetch passes ~10 batches between two index entries, and
        # only the one answered is worth a BatchInfo.
        pos = max(position, starting_position)
        stop = self.log.size()
        chunk, chunk_start = b"", pos
        while pos + LOG_OVERHEAD <= stop:
            i = pos - chunk_start
            if i + HEADER_PREFIX > len(chunk):
                chunk, chunk_start, i = self.log.read(pos, min(SCAN_CHUNK_BYTES, stop - pos)), pos, 0
                if len(chunk) < HEADER_PREFIX:
                    return None
            base, length, epoch, _magic, _crc, _attr, lod, _bts, max_ts = _HDR.unpack_from(chunk, i)
            size = length + LOG_OVERHEAD
            if length < MIN_BATCH_LENGTH or pos + size > stop:
                return None
            if base + lod >= offset:
                return BatchInfo(pos, base, size, base + lod, max_ts, epoch)
            pos += size
        return None

    def read(self, start_offset: int, max_size: int, max_position: int | None,
             min_one_message: bool) -> bytes | None:
        """Whole batches from the one holding start_offset, at most max_size bytes (the first
        batch whatever its size when min_one_message), none at or past max_position. None when
        no batch here reaches start_offset."""
        if max_size < 0:
            raise ValueError(f"Invalid max size {max_size} for log read from segment {self.base_offset}")
        first = self.translate_offset(start_offset)
        if first is None:
            return None
        adjusted = max(max_size, first.size) if min_one_message else max_size
        if adjusted == 0 or max_position is None:
            return b""
        fetch = min(max_position - first.position, adjusted)
        if fetch < first.size:
            return b""
        data = self.log.read(first.position, fetch)
        end = whole_batches_end(data)
        return data if end == len(data) else data[:end]

    def read_region(self, start_offset: int, max_size: int, max_position: int | None,
                    min_one_message: bool) -> FileRegion | None:
        """As read(), but the whole batches as a region of the segment file, for sendfile: the
        end is found by walking batch length fields (12-byte reads), not by reading the data."""
        if max_size < 0:
            raise ValueError(f"Invalid max size {max_size} for log read from segment {self.base_offset}")
        first = self.translate_offset(start_offset)
        if first is None:
            return None
        adjusted = max(max_size, first.size) if min_one_message else max_size
        if adjusted == 0 or max_position is None:
            return FileRegion(self.log, first.position, 0)
        limit = first.position + min(max_position - first.position, adjusted)
        end = first.position
        while end + LOG_OVERHEAD <= limit:
            size = _LEN.unpack_from(self.log.read(end, LOG_OVERHEAD), 8)[0] + LOG_OVERHEAD
            if size < MIN_BATCH_LENGTH + LOG_OVERHEAD or end + size > limit:
                break
            end += size
        return FileRegion(self.log, first.position, end - first.position)

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        return self.txn_index.collect_aborted_txns(fetch_offset, upper_bound_offset)

    def fetch_upper_bound_offset(self, start_position: int, fetch_size: int) -> int | None:
        """LogSegment.fetchUpperBoundOffset: the offset of the first offset index entry at or
        past the end of a read (where the aborted transactions to return may stop), None when
        the index has none."""
        target = start_position + fetch_size
        for off, pos in self.offset_index.all_entries():
            if pos >= target:
                return off
        return None

    def read_next_offset(self) -> int:
        """The offset after the last batch (LogSegment.readNextOffset)."""
        _, position = self.offset_index.lookup(self.offset_index.last_offset)
        nxt = self.base_offset
        for b in self.batches(position):
            nxt = b.last_offset + 1
        return nxt

    def find_offset_by_timestamp(self, timestamp_ms: int, starting_offset: int) -> tuple[int, int, int] | None:
        """(timestamp, offset, leader epoch) of the first record at or after starting_offset
        whose timestamp is >= timestamp_ms (LogSegment.findOffsetByTimestamp)."""
        _, ts_offset = self.time_index.lookup(timestamp_ms)
        _, position = self.offset_index.lookup(max(ts_offset, starting_offset))
        for b in self.batches(position):
            if b.max_timestamp < timestamp_ms or b.last_offset < starting_offset:
                continue
            data = self.log.read(b.position, b.size)
            for rec in decode_batch_records(data, 0, validate=False):
                if rec.timestamp_ms >= timestamp_ms and rec.offset >= starting_offset:
                    return rec.timestamp_ms, rec.offset, b.partition_leader_epoch
        return None

    # ---------------------------------------------------------------- recovery
    def recover(self, *, max_batch_size: int, min_offset: int, latest_epoch: int,
                seeded_bug: Callable[[str], bool]) -> RecoveryResult:
        """LogSegment.recover: rebuild both indexes from the .log, validating every batch
        (length, magic, CRC-32C; and, beyond Kafka, offsets that never go backwards), and cut
        the file at the first byte that is not a valid batch. `seeded_bug` is the node's
        NodeRuntime.seeded_bug."""
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()  # rebuilt by the log's producer-state pass (Log._recover_log)
        self._max_ts_and_offset = (NO_TIMESTAMP, self.base_offset)
        file_size = self.log.size()
        scan = _RecoveryScan(self, file_size, max_batch_size, max(min_offset, self.base_offset), latest_epoch)
        scan.check_crc = not seeded_bug("skip-recovery-crc")  # seeded bug: torn batches with intact headers kept
        scan.run()
        truncated = file_size - scan.valid
        if truncated > 0:
            self.log.truncate(scan.valid)
        if scan.max_ts > NO_TIMESTAMP:
            self._max_ts_and_offset = (scan.max_ts, scan.shallow)
        self.offset_index.trim_to_valid_size()
        ts, off = self.read_max_timestamp_and_offset_so_far()
        self.time_index.maybe_append(ts, off, skip_full_check=True)
        self.time_index.trim_to_valid_size()
        self.rolling_based_timestamp = scan.first_max_ts if scan.valid else None
        return RecoveryResult(truncated, scan.reason, scan.next_offset, scan.epochs)

    def truncate_to(self, offset: int) -> int:
        """Remove every batch with offsets >= offset (LogSegment.truncateTo); returns bytes cut."""
        mapping = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.offset_index.resize(self.offset_index.max_index_size)
        self.time_index.resize(self.time_index.max_index_size)
        cut = 0
        if mapping is not None:
            cut = self.log.size() - mapping.position
            self.log.truncate(mapping.position)
        if self.log.size() == 0:
            self.rolling_based_timestamp = None
        self.bytes_since_last_index_entry = 0
        if self.max_timestamp_so_far >= 0:
            self._max_ts_and_offset = self._read_largest_timestamp()
        return cut

    def _read_largest_timestamp(self) -> tuple[int, int]:
        last = self.time_index.last_entry
        _, position = self.offset_index.lookup(last[1])
        best = last
        for b in self.batches(position):
            if b.max_timestamp > best[0]:
                best = (b.max_timestamp, b.last_offset)
        return best

    # ---------------------------------------------------------------- life cycle
    def resize_indexes(self, size: int) -> None:
        self.offset_index.resize(size)
        self.time_index.resize(size)

    def on_become_inactive_segment(self) -> None:
        """At roll: the closing time index entry, then trim both indexes."""
        ts, off = self.read_max_timestamp_and_offset_so_far()
        self.time_index.maybe_append(ts, off, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()

    async def flush(self) -> None:
        if self.deleted:
            return
        await self.log.fsync()
        await self.offset_index.fsync()
        await self.time_index.fsync()
        await self.txn_index.flush()

    def close(self) -> None:
        if self._max_ts_and_offset is not None:
            ts, off = self._max_ts_and_offset
            self.time_index.maybe_append(ts, off, skip_full_check=True)
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()
        self.log.close()

    def close_handlers(self) -> None:
        self.offset_index.close_handler()
        self.time_index.close_handler()
        self.txn_index.close()
        self.log.close()

    def change_file_suffixes(self, old: str, new: str) -> None:
        """Rename the three files (FileRecords/AbstractIndex.renameTo); handles stay valid."""
        assert self.suffix == old, (self.suffix, old)
        self.offset_index.rename_to(self._path(INDEX_SUFFIX, new))
        self.time_index.rename_to(self._path(TIME_INDEX_SUFFIX, new))
        self.txn_index.rename_to(self._path(TXN_INDEX_SUFFIX, new))
        self.fs.rename(self._path(LOG_SUFFIX, old), self._path(LOG_SUFFIX, new))
        self.suffix = new

    def delete_if_exists(self) -> None:
        self.deleted = True
        self.close_handlers()
        for kind in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            path = self._path(kind)
            if self.fs.exists(path):
                self.fs.unlink(path)


def whole_batches_end(data: bytes | bytearray | memoryview) -> int:
    """Length of the longest prefix of `data` made of whole batches (by their length fields)."""
    n, i = len(data), 0
    unpack = _LEN.unpack_from
    while i + LOG_OVERHEAD <= n:
        size = unpack(data, i + 8)[0] + LOG_OVERHEAD
        if size < MIN_BATCH_LENGTH + LOG_OVERHEAD or i + size > n:
            break
        i += size
    return i


class _RecoveryScan:
    """The validating walk of LogSegment.recover: the file in large chunks, one header unpack
    and one CRC-32C per batch, index entries collected and written to the indexes at the end."""

    def __init__(self, seg: LogSegment, file_size: int, max_batch_size: int, min_offset: int,
                 latest_epoch: int) -> None:
        self.seg, self.file_size, self.max_batch_size = seg, file_size, max_batch_size
        self.next_offset = min_offset
        self.latest_epoch = latest_epoch
        self.valid = 0
        self.last_index_entry = 0
        self.max_ts, self.shallow = NO_TIMESTAMP, seg.base_offset
        self.first_max_ts: int | None = None
        self.reason = ""
        self.epochs: list[tuple[int, int]] = []
        self.offset_entries: list[int] = []  # relative offset, position, ...
        self.time_entries: list[int] = []    # timestamp, relative offset, ...
        self.last_time_ts = NO_TIMESTAMP
        self.check_crc = True

    def run(self) -> None:
        while self.valid < self.file_size:
            want = min(max(RECOVERY_CHUNK_BYTES, self._pending_size()), self.file_size - self.valid)
            chunk = self.seg.log.read(self.valid, want)
            used = self._scan_chunk(chunk)
            if self.reason or used == 0:
                if not self.reason:
                    self.reason = "partial batch"
                break
        self.seg.offset_index.load_entries(self.offset_entries)
        self.seg.time_index.load_entries(self.time_entries)

    def _pending_size(self) -> int:
        """The size the batch at `valid` claims (so one read can hold it), or 0."""
        head = self.seg.log.read(self.valid, LOG_OVERHEAD)
        if len(head) < LOG_OVERHEAD:
            return 0
        length = _LEN.unpack_from(head, 8)[0]
        return length + LOG_OVERHEAD if 0 < length + LOG_OVERHEAD <= self.max_batch_size else 0

    def _scan_chunk(self, chunk: bytes) -> int:
        """Validate whole batches in `chunk` (which starts at `valid`); returns bytes accepted
        and sets `reason` at the first invalid batch."""
        view = memoryview(chunk)
        n = len(chunk)
        i = 0
        base_offset = self.seg.base_offset
        interval = self.seg.index_interval_bytes
        unpack, length_of, crc_of = _HDR.unpack_from, _LEN.unpack_from, _crc32c.crc32c
        max_batch, valid, next_offset = self.max_batch_size, self.valid, self.next_offset
        max_ts, shallow, last_time_ts = self.max_ts, self.shallow, self.last_time_ts
        last_index_entry, latest_epoch = self.last_index_entry, self.latest_epoch
        offset_entries, time_entries = self.offset_entries, self.time_entries
        reason = ""
        check_crc = self.check_crc
        if self.first_max_ts is None and n >= HEADER_PREFIX and length_of(chunk, 8)[0] >= MIN_BATCH_LENGTH:
            self.first_max_ts = _HDR.unpack_from(chunk, 0)[8]
        while i + LOG_OVERHEAD <= n:
            if i + HEADER_PREFIX <= n:  # one unpack gives the length and every field needed
                base, length, epoch, magic, crc, _attr, lod, _bts, batch_max_ts = unpack(chunk, i)
            else:
                length, magic = length_of(chunk, i + 8)[0], -1
            size = length + LOG_OVERHEAD
            if length < MIN_BATCH_LENGTH:
                reason = "bad_length" if n - i < 17 or chunk[i + 16] == MAGIC_VALUE_V2 else "bad_magic"
                break
            if size > max_batch:
                reason = "too_large"
                break
            if i + size > n:
                if valid + i + size > self.file_size:
                    reason = "partial batch"
                break
            if magic != MAGIC_VALUE_V2:
                reason = "bad_magic"
                break
            if check_crc and crc_of(view[i + 21:i + size]) != crc:
                reason = "crc_mismatch"
                break
            last = base + lod
            if base < next_offset or lod < 0:
                reason = "offset went backwards"
                break
            if last - base_offset > INT32_MAX:
                reason = "offset overflows the segment"
                break
            if batch_max_ts > max_ts:
                max_ts, shallow = batch_max_ts, last
            position = valid + i
            if position - last_index_entry > interval:
                offset_entries += (last - base_offset, position)
                if max_ts > last_time_ts:
                    time_entries += (max_ts, shallow - base_offset)
                    last_time_ts = max_ts
                last_index_entry = position
            if epoch > latest_epoch:
                latest_epoch = epoch
                self.epochs.append((epoch, base))
            next_offset = last + 1
            i += size
        self.reason = reason
        self.valid, self.next_offset = valid + i, next_offset
        self.max_ts, self.shallow, self.last_time_ts = max_ts, shallow, last_time_ts
        self.last_index_entry, self.latest_epoch = last_index_entry, latest_epoch
        return i
