"""A partition's log: segments of record batches in Kafka's on-disk layout.

    <log.dir>/<topic>-<partition>/<20-digit base offset>.log

A `.log` file is the record batches back to back, exactly as on the wire after the leader
stamped base offsets and its epoch (see kafkasim/records/batch.py for the batch layout), so
Kafka's own kafka-dump-log reads it. This first log keeps each segment's batch positions in
memory (rebuilt by the recovery scan at open) instead of the sparse `.index`/`.timeindex`
files; the storage work adds those, the checkpoints and the flush/retention machinery on this
same structure.

Recovery (every open, as an unclean shutdown is assumed): scan each segment batch by batch,
validate length, magic and CRC-32C, and truncate the segment at the first invalid byte;
later segments (which can only hold garbage after a torn tail) are deleted.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Optional

from kafkasim.records.batch import (LOG_OVERHEAD, BatchHeader, iter_batches,
                                    set_base_offset, set_partition_leader_epoch)
from kafkasim.records.errors import CorruptRecordError
from kafkasim.runtime.api import FileHandle, FileSystem

LOG_SUFFIX = ".log"


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}{LOG_SUFFIX}"


@dataclass
class LogConfig:
    segment_bytes: int = 1 << 30          # log.segment.bytes / segment.bytes
    flush_messages: int = 2**63 - 1        # log.flush.interval.messages / flush.messages
    max_message_bytes: int = 1048588       # message.max.bytes / max.message.bytes


@dataclass
class BatchEntry:
    base_offset: int
    last_offset: int
    position: int
    size: int
    max_timestamp: int


@dataclass
class Segment:
    base_offset: int
    file: FileHandle
    entries: list[BatchEntry] = field(default_factory=list)
    bases: list[int] = field(default_factory=list)  # entries' base offsets, for bisect

    @property
    def size(self) -> int:
        return self.file.size()

    def add(self, e: BatchEntry) -> None:
        self.entries.append(e)
        self.bases.append(e.base_offset)


@dataclass
class AppendInfo:
    first_offset: int
    last_offset: int
    record_count: int
    max_timestamp: int


class Log:
    def __init__(self, fs: FileSystem, dir_path: str, config: LogConfig) -> None:
        self.fs, self.dir, self.config = fs, dir_path, config
        self.segments: list[Segment] = []
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.unflushed_messages = 0
        self.recovery_truncations: list[dict[str, int | str]] = []

    # ---------------------------------------------------------------- open + recovery
    @classmethod
    def open(cls, fs: FileSystem, dir_path: str, config: LogConfig) -> "Log":
        log = cls(fs, dir_path, config)
        fs.mkdir(dir_path)
        names = [n for n in fs.listdir(dir_path) if n.endswith(LOG_SUFFIX)]
        for name in sorted(names, key=lambda n: int(n[: -len(LOG_SUFFIX)])):
            base = int(name[: -len(LOG_SUFFIX)])
            seg = Segment(base, fs.open(f"{dir_path}/{name}"))
            if log.segments and log.log_end_offset > base:
                log._drop(seg, "overlaps previous segment")
                continue
            if not log._recover_segment(seg):
                log.segments.append(seg)
                log._drop_rest(names, name)
                break
            log.segments.append(seg)
        if not log.segments:
            log.segments.append(Segment(0, fs.open(f"{dir_path}/{segment_name(0)}")))
        first = log.segments[0]
        log.log_start_offset = first.entries[0].base_offset if first.entries else first.base_offset
        return log

    def _recover_segment(self, seg: Segment) -> bool:
        """Index the segment's valid prefix; truncate the rest. Returns False if it was torn."""
        data = seg.file.read(0, seg.file.size())
        it = iter_batches(data, validate=True, max_batch_size=self.config.max_message_bytes + LOG_OVERHEAD + 1024)
        reason = ""
        try:
            for pos, h in it:
                if h.base_offset < max(self.log_end_offset, seg.base_offset):
                    reason = "offset went backwards"
                    it.position = pos
                    break
                seg.add(BatchEntry(h.base_offset, h.last_offset, pos, h.size_in_bytes, h.max_timestamp))
                self.log_end_offset = h.next_offset
        except CorruptRecordError as exc:
            reason = exc.reason.value
        end = it.position  # the iterator stops at the first invalid or partial batch
        if end < len(data):
            seg.file.truncate(end)
            self.recovery_truncations.append({"segment": seg.base_offset, "valid_bytes": end,
                                              "dropped_bytes": len(data) - end,
                                              "reason": reason or "partial batch"})
            return False
        if not seg.entries:
            self.log_end_offset = max(self.log_end_offset, seg.base_offset)
        return True

    def _drop(self, seg: Segment, why: str) -> None:
        seg.file.close()
        self.fs.unlink(f"{self.dir}/{segment_name(seg.base_offset)}")
        self.recovery_truncations.append({"segment": seg.base_offset, "deleted": 1, "reason": why})

    def _drop_rest(self, names: list[str], after: str) -> None:
        later = [n for n in names if int(n[: -len(LOG_SUFFIX)]) > int(after[: -len(LOG_SUFFIX)])]
        for name in later:
            self.fs.unlink(f"{self.dir}/{name}")
            self.recovery_truncations.append({"segment": int(name[: -len(LOG_SUFFIX)]), "deleted": 1,
                                              "reason": "after a torn segment"})

    # ---------------------------------------------------------------- append
    def append_as_leader(self, batches: bytearray, headers: list[tuple[int, BatchHeader]],
                         leader_epoch: int) -> AppendInfo:
        """Stamp offsets and the leader epoch into validated batches and append them.
        `headers` are (position, header) pairs from validation, in order."""
        first = self.log_end_offset
        next_offset = first
        count = 0
        max_ts = -1
        for pos, h in headers:
            set_base_offset(batches, pos, next_offset)
            set_partition_leader_epoch(batches, pos, leader_epoch)
            next_offset += h.last_offset_delta + 1
            count += h.records_count
            max_ts = max(max_ts, h.max_timestamp)
        self._append_stamped(batches, headers, first)
        return AppendInfo(first, next_offset - 1, count, max_ts)

    def _append_stamped(self, batches: bytearray, headers: list[tuple[int, BatchHeader]], first: int) -> None:
        seg = self.segments[-1]
        if seg.entries and seg.size + len(batches) > self.config.segment_bytes:
            seg = self._roll(first)
        start = seg.file.append(batches)
        offset = first
        for pos, h in headers:
            last = offset + h.last_offset_delta
            seg.add(BatchEntry(offset, last, start + pos, h.size_in_bytes, h.max_timestamp))
            offset = last + 1
            self.unflushed_messages += h.records_count
        self.log_end_offset = offset

    def _roll(self, base_offset: int) -> Segment:
        seg = Segment(base_offset, self.fs.open(f"{self.dir}/{segment_name(base_offset)}"))
        self.segments.append(seg)
        return seg

    def needs_flush(self) -> bool:
        return self.unflushed_messages >= self.config.flush_messages

    async def flush(self) -> None:
        for seg in self.segments:
            await seg.file.fsync()
        self.unflushed_messages = 0

    # ---------------------------------------------------------------- read
    def read(self, offset: int, max_bytes: int, max_offset: Optional[int] = None) -> bytes:
        """Whole batches from the one containing `offset`, up to max_bytes — but always the
        first batch, however large, so a consumer can make progress. Batches starting at or
        after `max_offset` (the high watermark, exclusive) are not returned."""
        limit = self.log_end_offset if max_offset is None else max_offset
        if offset >= limit:
            return b""
        out: list[bytes] = []
        total = 0
        seg_idx = self._segment_for(offset)
        for seg in self.segments[seg_idx:]:
            i = max(0, bisect.bisect_right(seg.bases, offset) - 1)
            run_start, run_len = -1, 0
            for e in seg.entries[i:]:
                if e.last_offset < offset:
                    continue
                if e.base_offset >= limit or (total and total + e.size > max_bytes):
                    break
                if run_start < 0:
                    run_start = e.position
                run_len += e.size
                total += e.size
            else:
                if run_len:
                    out.append(seg.file.read(run_start, run_len))
                continue
            if run_len:
                out.append(seg.file.read(run_start, run_len))
            break
        return b"".join(out)

    def _segment_for(self, offset: int) -> int:
        bases = [s.base_offset for s in self.segments]
        return max(0, bisect.bisect_right(bases, offset) - 1)

    def offset_for_timestamp(self, timestamp_ms: int) -> Optional[tuple[int, int]]:
        """(offset, timestamp) of the first batch whose max timestamp is >= timestamp_ms.
        Batch granularity: the storage work refines this to the record with the time index."""
        for seg in self.segments:
            for e in seg.entries:
                if e.max_timestamp >= timestamp_ms:
                    return max(e.base_offset, self.log_start_offset), e.max_timestamp
        return None

    def close(self) -> None:
        for seg in self.segments:
            seg.file.close()
