"""A partition's log in Kafka's on-disk layout (UnifiedLog + LocalLog + LogLoader).

    <log.dir>/<topic>-<partition>/<20-digit base offset>.log | .index | .timeindex
                                  leader-epoch-checkpoint, partition.metadata, *.snapshot (producer state)

Segments (segment.py) hold record batches back to back; the offset and time indexes (index.py)
are sparse, one entry per ``index.interval.bytes``. The segment list is copy-on-write: every
change (roll, retention, cleaning, truncation) publishes a new tuple, so a reader that took the
tuple binary-searches a consistent snapshot and never waits for a deletion — and a deleted
segment's files are renamed ``.deleted`` and removed only ``file.delete.delay.ms`` later.

Offsets: log start offset (first readable offset; DeleteRecords and retention move it), log end
offset (next offset to assign), recovery point (everything below is fsynced: data, indexes and
directory entries), high watermark (set by the replication layer; the log end offset until then).

Flush policy: ``flush.messages`` (the caller awaits ``flush()`` once ``needs_flush()``) and
``flush.ms`` (the LogManager's flusher). A roll schedules a flush of the finished segment.

Recovery (``Log.load``, Kafka's LogLoader): unless the log dir had a clean shutdown, every
segment from the one holding the recovery point on is validated batch by batch (length, magic,
CRC-32C, offsets moving forward), cut at the first invalid byte, and its indexes rebuilt; after a
cut — or when a segment ends before the next one begins (its unflushed tail was lost) — the later
segments are deleted. Segments below the recovery point keep their indexes after Kafka's
``sanityCheck`` plus a check that every entry points at a batch that is really there (a stale
entry beyond the data is caught and the segment rebuilt). Every cut and deletion is traced as
``log_recovery``. Beyond Kafka: truncations are fsynced before the log is used, so a crash cannot
resurrect a tail recovery removed.

Producer state (``producer_state_manager``, producer_state.py): rebuilt from its snapshots and
the log at load and after every truncation; retention removes the snapshots of the segments it
deletes.

Transactions: the last stable offset (LSO) is min(the producer state's first unstable offset,
high watermark) — what a READ_COMMITTED fetch reads up to and ListOffsets(latest) answers it.
Every segment has a ``.txnindex`` (txn_index.py) of the transactions aborted in it; recovery
resets the indexes of the segments it validates and rebuilds them by replaying the producer
state from the first of them (Kafka's LogSegment.recover with a ProducerStateManager), and
truncation cuts them with the segment.

I/O errors take the log offline (Kafka's log dir failure): every later call raises
``KafkaStorageError``; the broker answers KAFKA_STORAGE_ERROR.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from kafkasim.config import TOPIC, setting
from kafkasim.records.batch import PARTITION_LEADER_EPOCH_OFFSET, BatchHeader, decode_batch_records
from kafkasim.runtime.api import NodeRuntime
from kafkasim.storage.append_info import AppendInfo as AppendInfo  # re-exported: callers import it from here
from kafkasim.storage.checkpoints import PARTITION_METADATA, PartitionMetadataFile
from kafkasim.storage.epoch import LeaderEpochFileCache
from kafkasim.storage.file_records import FileRecords
from kafkasim.storage.index import CorruptIndexError
from kafkasim.storage.producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS, ProducerStateManager
from kafkasim.storage.scheduler import Scheduler, SerialQueue
from kafkasim.storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    log_file_name,
    offset_from_file_name,
)
from kafkasim.storage.txn_index import TXN_INDEX_SUFFIX, AbortedTxn

LONG_MAX = 2**63 - 1
_STAMP = struct.Struct(">q")  # baseOffset at byte 0 of a batch (records/batch.py: outside the CRC)
_EPOCH = struct.Struct(">i")  # partitionLeaderEpoch at byte 12 (outside the CRC too)
MIN_RECOVERY_BATCH_LIMIT = 32 * 1024 * 1024  # recovery never reads a "batch" bigger than this
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


@dataclass
class LogConfig:
    """A log's topic configs (Kafka's LogConfig): one field per topic config, named as it with '_'
    for '.' (which is how topic overrides find them), typed and defaulted by kafkasim.config.
    The broker's log.* synonyms give the broker-wide values (BrokerConfig.log_config)."""

    segment_bytes: int = setting("segment.bytes", scope=TOPIC)
    segment_ms: int = setting("segment.ms", scope=TOPIC)
    segment_jitter_ms: int = setting("segment.jitter.ms", scope=TOPIC)
    segment_index_bytes: int = setting("segment.index.bytes", scope=TOPIC)
    index_interval_bytes: int = setting("index.interval.bytes", scope=TOPIC)
    flush_messages: int = setting("flush.messages", scope=TOPIC)
    flush_ms: int = setting("flush.ms", scope=TOPIC)
    retention_ms: int = setting("retention.ms", scope=TOPIC)
    retention_bytes: int = setting("retention.bytes", scope=TOPIC)
    cleanup_policy: str = setting("cleanup.policy", scope=TOPIC)
    delete_retention_ms: int = setting("delete.retention.ms", scope=TOPIC)
    min_compaction_lag_ms: int = setting("min.compaction.lag.ms", scope=TOPIC)
    max_compaction_lag_ms: int = setting("max.compaction.lag.ms", scope=TOPIC)
    min_cleanable_dirty_ratio: float = setting("min.cleanable.dirty.ratio", scope=TOPIC)
    file_delete_delay_ms: int = setting("file.delete.delay.ms", scope=TOPIC)
    max_message_bytes: int = setting("max.message.bytes", scope=TOPIC)
    preallocate: bool = setting("preallocate", scope=TOPIC)  # accepted; files stay sparse
    # Stored, not acted on by the log (min.insync.replicas and unclean.leader.election.enable are
    # the replication layer's and the controller's, which read them as topic configs).
    compression_type: str = setting("compression.type", scope=TOPIC)
    compression_gzip_level: int = setting("compression.gzip.level", scope=TOPIC)
    compression_lz4_level: int = setting("compression.lz4.level", scope=TOPIC)
    compression_zstd_level: int = setting("compression.zstd.level", scope=TOPIC)
    min_insync_replicas: int = setting("min.insync.replicas", scope=TOPIC)
    unclean_leader_election_enable: bool = setting("unclean.leader.election.enable", scope=TOPIC)
    message_downconversion_enable: bool = setting("message.downconversion.enable", scope=TOPIC)
    message_format_version: str = setting("message.format.version", scope=TOPIC)
    message_timestamp_type: str = setting("message.timestamp.type", scope=TOPIC)
    message_timestamp_difference_max_ms: int = setting("message.timestamp.difference.max.ms", scope=TOPIC)
    message_timestamp_before_max_ms: int = setting("message.timestamp.before.max.ms", scope=TOPIC)
    message_timestamp_after_max_ms: int = setting("message.timestamp.after.max.ms", scope=TOPIC)
    local_retention_ms: int = setting("local.retention.ms", scope=TOPIC)
    local_retention_bytes: int = setting("local.retention.bytes", scope=TOPIC)
    remote_storage_enable: bool = setting("remote.storage.enable", scope=TOPIC)
    remote_log_copy_disable: bool = setting("remote.log.copy.disable", scope=TOPIC)
    remote_log_delete_on_disable: bool = setting("remote.log.delete.on.disable", scope=TOPIC)
    leader_replication_throttled_replicas: str = setting("leader.replication.throttled.replicas", scope=TOPIC)
    follower_replication_throttled_replicas: str = setting("follower.replication.throttled.replicas", scope=TOPIC)

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy.replace(" ", "").split(",")

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy.replace(" ", "").split(",")


class KafkaStorageError(Exception):
    """KafkaStorageException: an I/O error took the log dir offline."""


class OffsetOutOfRangeError(Exception):
    pass


def parse_topic_partition(dir_name: str) -> tuple[str, int]:
    """`<topic>-<partition>` (UnifiedLog.parseTopicPartitionName)."""
    name = dir_name.rsplit("/", 1)[-1]
    topic, _, part = name.rpartition("-")
    if not topic or not part.isdigit():
        raise ValueError(f"Found directory {dir_name}, '{name}' is not in the form of topic-partition")
    return topic, int(part)


class Log:
    def __init__(self, rt: NodeRuntime, dir_path: str, config: LogConfig,
                 on_failure: Callable[[Log, BaseException], None] | None = None) -> None:
        self.rt, self.fs, self.dir, self.config = rt, rt.fs, dir_path, config
        self.topic, self.partition = parse_topic_partition(dir_path)
        self._segments: tuple[LogSegment, ...] = ()
        self._bases: tuple[int, ...] = ()
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.recovery_point = 0
        self.checkpointed_recovery_point = 0  # what recovery-point-offset-checkpoint says (LogManager)
        self._high_watermark: int | None = None
        self.last_flush_ms = rt.now_ms()
        self.leader_epoch_cache = LeaderEpochFileCache(self.fs, dir_path)
        self.recovery_truncations: list[dict[str, int | str]] = []
        self.scheduler = Scheduler(rt, owner=dir_path)
        self._epoch_writes = SerialQueue(rt)  # one leader-epoch-checkpoint write at a time
        self.on_failure = on_failure
        self.offline = False
        self.closed = False
        self.topic_id: bytes | None = None
        self._pending_index_rebuild: set[int] = set()
        self._recovered_bases: set[int] = set()  # segments recover() reset (txn indexes to rebuild)
        self._recovered_epochs: list[tuple[int, int]] = []
        # One cap per flush in progress: the recovery point it may set (see _flush).
        self._flush_caps: list[list[int]] = []
        # The idempotent producers' state (UnifiedLog.producerStateManager): rebuilt from its
        # snapshots and the log by load(), and again after every truncation.
        self.producer_state_manager = ProducerStateManager(self)
        self.producer_id_expiration_ms = DEFAULT_PRODUCER_ID_EXPIRATION_MS  # the broker's (LogManager)

    # ---------------------------------------------------------------- the segment list
    @property
    def segments(self) -> tuple[LogSegment, ...]:
        """A snapshot of the segment list, oldest first (copy-on-write: never mutated)."""
        return self._segments

    def _publish(self, segments: list[LogSegment] | tuple[LogSegment, ...]) -> None:
        ordered = tuple(sorted(segments, key=lambda s: s.base_offset))
        self._segments, self._bases = ordered, tuple(s.base_offset for s in ordered)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    def _floor_index(self, offset: int, bases: tuple[int, ...]) -> int:
        return max(0, bisect.bisect_right(bases, offset) - 1)

    def segments_in(self, start: int, end: int) -> list[LogSegment]:
        """LogSegments.values(from, to): segments with a base in [floor(start), end)."""
        if start == end:
            return []
        segs, bases = self._segments, self._bases
        i = bisect.bisect_right(bases, start) - 1
        i = max(i, 0)
        return [s for s in segs[i:] if s.base_offset < end]

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def high_watermark(self) -> int:
        return self.log_end_offset if self._high_watermark is None else min(self._high_watermark, self.log_end_offset)

    def update_high_watermark(self, offset: int) -> None:
        self._high_watermark = max(self.log_start_offset, min(offset, self.log_end_offset))
        self.rt.invariant(self._high_watermark <= self.log_end_offset, "high-watermark<=log-end-offset")
        # Transactions whose marker is now below the high watermark no longer hold the LSO back.
        self.producer_state_manager.on_high_watermark_updated(self._high_watermark)

    @property
    def last_stable_offset(self) -> int:
        """UnifiedLog.lastStableOffset: the first unstable offset when below the high watermark,
        else the high watermark."""
        hw = self.high_watermark
        first_unstable = self.producer_state_manager.first_unstable_offset()
        return first_unstable if first_unstable is not None and first_unstable < hw else hw

    def segment_containing(self, offset: int) -> LogSegment | None:
        """The segment whose range holds `offset` (floor by base offset)."""
        segs = self._segments
        if not segs or offset < segs[0].base_offset:
            return None
        return segs[self._floor_index(offset, self._bases)]

    def _new_segment(self, base_offset: int, suffix: str = "") -> LogSegment:
        jitter = 0
        if self.config.segment_jitter_ms > 0:
            jitter = self.rt.rng(f"log-roll-jitter/{self.dir}").randint(0, self.config.segment_jitter_ms - 1)
        return LogSegment(self.fs, self.dir, base_offset, index_interval_bytes=self.config.index_interval_bytes,
                          max_index_size=self.config.segment_index_bytes, roll_jitter_ms=jitter,
                          now_ms=self.rt.now_ms(), suffix=suffix)

    # ---------------------------------------------------------------- errors
    @contextmanager
    def _io(self, what: str) -> Iterator[None]:
        if self.offline:
            raise KafkaStorageError(f"The log for {self.topic}-{self.partition} is offline")
        try:
            yield
        except OSError as exc:
            self.go_offline(exc)
            raise KafkaStorageError(f"Error while {what} for {self.topic}-{self.partition} in dir {self.dir}: "
                                    f"{exc}") from exc

    def go_offline(self, exc: BaseException) -> None:
        if self.offline:
            return
        self.offline = True
        self.scheduler.shutdown()
        self.rt.trace("log_offline", topic=self.topic, partition=self.partition, error=f"{type(exc).__name__}: {exc}")
        if self.on_failure is not None:
            self.on_failure(self, exc)

    def _trace_recovery(self, **fields: int | str) -> None:
        self.recovery_truncations.append(dict(fields))
        self.rt.trace("log_recovery", topic=self.topic, partition=self.partition, **fields)

    # ================================================================ loading (LogLoader)
    @classmethod
    async def load(cls, rt: NodeRuntime, dir_path: str, config: LogConfig, *, recovery_point: int = 0,
                   log_start_offset: int = 0, had_clean_shutdown: bool = False,
                   on_failure: Callable[[Log, BaseException], None] | None = None,
                   producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> Log:
        """Open a log directory (creating it when missing), recovering it if needed."""
        log = cls(rt, dir_path, config, on_failure)
        log.producer_id_expiration_ms = producer_id_expiration_ms
        log.checkpointed_recovery_point = recovery_point
        with log._io("loading log"):
            rt.fs.mkdir(dir_path)
            log._remove_temp_files_and_complete_swaps()
            log._load_segment_files(recovery_point, had_clean_shutdown)
            await log._recover_log(recovery_point, log_start_offset, had_clean_shutdown)
            meta = PartitionMetadataFile(log.fs, f"{dir_path}/{PARTITION_METADATA}")
            try:
                log.topic_id = meta.read()
            except Exception:
                log.topic_id = None
            log._load_producer_state()
        return log

    def _names(self) -> list[str]:
        return self.fs.listdir(self.dir)

    def _remove_temp_files_and_complete_swaps(self) -> None:
        """Delete .deleted and .cleaned leftovers; finish an interrupted swap (.swap files)."""
        names = self._names()
        cleaned = [n for n in names if n.endswith(CLEANED_SUFFIX)]
        swaps = [n for n in names if n.endswith(SWAP_SUFFIX)]
        min_cleaned = min((offset_from_file_name(n) for n in cleaned), default=LONG_MAX)
        for n in names:
            if n.endswith(DELETED_SUFFIX) or n.endswith(CLEANED_SUFFIX) or \
                    (n.endswith(SWAP_SUFFIX) and offset_from_file_name(n) >= min_cleaned):
                self.fs.unlink(f"{self.dir}/{n}")
        swaps = [n for n in swaps if offset_from_file_name(n) < min_cleaned]
        swap_logs = [n for n in swaps if n.endswith(LOG_SUFFIX + SWAP_SUFFIX)]
        if not swap_logs:
            return
        lo, hi = LONG_MAX, -1
        for n in swap_logs:
            seg = self._new_segment(offset_from_file_name(n), SWAP_SUFFIX)
            lo, hi = min(lo, seg.base_offset), max(hi, seg.read_next_offset())
            seg.close_handlers()
        for n in self._names():
            if not n.endswith(SWAP_SUFFIX) and n.split(".", 1)[0].isdigit() and lo <= offset_from_file_name(n) < hi:
                self.fs.unlink(f"{self.dir}/{n}")
        for n in self._names():
            if n.endswith(SWAP_SUFFIX):
                self.fs.rename(f"{self.dir}/{n}", f"{self.dir}/{n[:-len(SWAP_SUFFIX)]}")
        self._trace_recovery(segment=lo, reason="completed an interrupted swap")

    def _load_segment_files(self, recovery_point: int, had_clean_shutdown: bool) -> None:
        names = self._names()
        logs = {n for n in names if n.endswith(LOG_SUFFIX) and n.split(".", 1)[0].isdigit()}
        segments: list[LogSegment] = []
        for n in names:
            stem = n.split(".", 1)[0]
            if not stem.isdigit():
                continue
            if n.endswith(INDEX_SUFFIX) or n.endswith(TIME_INDEX_SUFFIX) or n.endswith(TXN_INDEX_SUFFIX):
                if f"{stem}{LOG_SUFFIX}" not in logs:
                    self.fs.unlink(f"{self.dir}/{n}")  # orphaned index
            elif n.endswith(LOG_SUFFIX):
                segments.append(self._new_segment(int(stem)))
        self._publish(segments)
        # Segments recovery will rebuild anyway (from the recovery point's on, after an unclean
        # shutdown) need no index check; the others must prove their indexes sound.
        first_recovered = LONG_MAX
        if not had_clean_shutdown and self._segments:
            first_recovered = self._bases[self._floor_index(recovery_point, self._bases)]
        for i, seg in enumerate(self._segments):
            if seg.base_offset >= first_recovered:
                continue
            if not seg.offset_index_existed or not seg.time_index_existed:
                self._pending_index_rebuild.add(seg.base_offset)
                self._trace_recovery(segment=seg.base_offset, reason="index rebuilt: index file missing")
                continue
            next_base = self._segments[i + 1].base_offset if i + 1 < len(self._segments) else None
            problem = index_problem(seg, next_base)
            if problem:
                self._pending_index_rebuild.add(seg.base_offset)
                self._trace_recovery(segment=seg.base_offset, reason=f"index rebuilt: {problem}")

    def _max_batch_size(self) -> int:
        return max(self.config.max_message_bytes + 12, MIN_RECOVERY_BATCH_LIMIT)

    async def _recover_log(self, recovery_point: int, log_start_checkpoint: int, had_clean_shutdown: bool) -> None:
        cut_segments: list[LogSegment] = []
        deleted_any = False
        # Segments below the recovery point whose indexes failed their checks: rebuilt. Should
        # their data be invalid too (corruption of fsynced bytes), the log ends there.
        for seg in list(self._segments):
            if seg.base_offset not in self._pending_index_rebuild or seg.deleted:
                continue
            result = seg.recover(max_batch_size=self._max_batch_size(), min_offset=self._prev_next_offset(seg),
                                 latest_epoch=self.leader_epoch_cache.latest_epoch, seeded_bug=self.rt.seeded_bug)
            self._recovered_bases.add(seg.base_offset)
            if result.truncated_bytes:
                self._trace_recovery(segment=seg.base_offset, valid_bytes=seg.size,
                                     dropped_bytes=result.truncated_bytes, reason=result.reason)
                cut_segments.append(seg)
                for later in [s for s in self._segments if s.base_offset > seg.base_offset]:
                    self._trace_recovery(segment=later.base_offset, deleted=1, reason="after a corrupt segment")
                    later.delete_if_exists()
                self._publish([s for s in self._segments if not s.deleted])
                deleted_any = True
                break
        self._pending_index_rebuild = set()
        if not had_clean_shutdown:
            deleted_any |= self._recover_unflushed(recovery_point, cut_segments)
        log_end = self._segments[-1].read_next_offset() if self._segments else log_start_checkpoint
        if self._segments and log_end < log_start_checkpoint:
            for seg in self._segments:
                self._trace_recovery(segment=seg.base_offset, deleted=1, reason="log end offset below log start offset")
                seg.delete_if_exists()
            self._publish([])
            deleted_any = True
        if not self._segments:
            self._publish([self._new_segment(log_start_checkpoint)])
            log_end = log_start_checkpoint
        self.log_end_offset = log_end
        self.recovery_point = log_end if had_clean_shutdown else min(recovery_point, log_end)
        self.active_segment.resize_indexes(self.config.segment_index_bytes)
        self.log_start_offset = max(log_start_checkpoint, self._segments[0].base_offset)
        cache = self.leader_epoch_cache
        cache.load()
        cache.truncate_from_end(log_end)
        cache.truncate_from_start(self.log_start_offset)
        for epoch, start in self._recovered_epochs:
            if epoch > cache.latest_epoch:
                cache.assign(epoch, start)
        live = {s.base_offset for s in self._segments}
        ProducerStateManager.rebuild_txn_indexes(self, self._recovered_bases & live)
        self._recovered_bases = set()
        # Beyond Kafka: make recovery's cuts durable before anything new is appended.
        for seg in cut_segments:
            if not seg.deleted:
                await seg.log.fsync()
        if cut_segments or deleted_any:
            await self.fs.fsync_dir(self.dir)
        await self._epoch_writes.run(cache.flush)

    def _prev_next_offset(self, seg: LogSegment) -> int:
        i = self._bases.index(seg.base_offset)
        return self._segments[i - 1].read_next_offset() if i > 0 else 0

    def _recover_unflushed(self, recovery_point: int, cut_segments: list[LogSegment]) -> bool:
        """LogLoader.recoverLog for an unclean shutdown: recover from the recovery point's
        segment on; after a cut (or a gap before the next segment) delete the rest."""
        unflushed = self.segments_in(recovery_point, LONG_MAX)
        epochs: list[tuple[int, int]] = []
        latest_epoch = self.leader_epoch_cache.latest_epoch
        deleted = False
        for i, seg in enumerate(unflushed):
            prev = self._prev_next_offset(seg)
            result = seg.recover(max_batch_size=self._max_batch_size(), min_offset=prev, latest_epoch=latest_epoch,
                                 seeded_bug=self.rt.seeded_bug)
            self._recovered_bases.add(seg.base_offset)
            self._pending_index_rebuild.discard(seg.base_offset)
            epochs += result.epochs
            if result.epochs:
                latest_epoch = result.epochs[-1][0]
            rest = unflushed[i + 1:]
            reason = ""
            if result.truncated_bytes > 0:
                self._trace_recovery(segment=seg.base_offset, valid_bytes=seg.size,
                                     dropped_bytes=result.truncated_bytes, reason=result.reason)
                cut_segments.append(seg)
                reason = "after a torn segment"
            elif rest and result.next_offset < rest[0].base_offset:
                reason = f"gap: segment {seg.base_offset} ends at {result.next_offset}"
            if reason and rest:
                for later in rest:
                    self._trace_recovery(segment=later.base_offset, deleted=1, reason=reason)
                    later.delete_if_exists()
                self._publish([s for s in self._segments if not s.deleted])
                deleted = True
            if reason:
                break
        self._recovered_epochs = epochs
        return deleted

    # ================================================================ append
    def append_as_leader(self, batches: bytearray, headers: list[tuple[int, BatchHeader]],
                         leader_epoch: int, log_append_time: int = -1) -> AppendInfo:
        """Stamp offsets and the leader epoch into validated batches and append them.
        `headers` are (position, header) pairs from validation, in order. `log_append_time`:
        the time a LogAppendTime topic's batches were stamped with (log_validator.py), -1 for
        CreateTime. (The hot path: the error handling of _io is spelled out inline.)"""
        if self.offline:
            raise KafkaStorageError(f"The log for {self.topic}-{self.partition} is offline")
        try:
            first = self.log_end_offset
            next_offset, count, max_ts, shallow = first, 0, -1, -1
            for pos, h in headers:
                _STAMP.pack_into(batches, pos, next_offset)
                _EPOCH.pack_into(batches, pos + PARTITION_LEADER_EPOCH_OFFSET, leader_epoch)
                last = next_offset + h.last_offset_delta
                if h.max_timestamp > max_ts:
                    max_ts, shallow = h.max_timestamp, last
                next_offset = last + 1
                count += h.records_count
            if log_append_time >= 0:  # LogValidator: maxTimestamp = now at the last offset
                max_ts, shallow = log_append_time, next_offset - 1
            if leader_epoch > self.leader_epoch_cache.latest_epoch:
                self._maybe_assign_epoch(leader_epoch, first)
            self._append(batches, first, next_offset - 1, max_ts, shallow)
            return AppendInfo(first, next_offset - 1, count, max_ts, shallow, log_append_time)
        except OSError as exc:
            self.go_offline(exc)
            raise KafkaStorageError(f"Error while appending to the log for {self.topic}-{self.partition} in dir "
                                    f"{self.dir}: {exc}") from exc

    def append_as_follower(self, records: bytes | bytearray | memoryview,
                           headers: list[tuple[int, BatchHeader]]) -> AppendInfo:
        """Append batches that already carry their offsets (replication, the cleaner's tests):
        the first must start at or after the log end offset, offsets must increase."""
        with self._io("appending to the log"):
            if not headers:
                raise ValueError("no batches")
            first = headers[0][1].base_offset
            if first < self.log_end_offset:
                raise OffsetOutOfRangeError(f"first offset {first} is below the log end offset {self.log_end_offset}")
            if first > self.log_end_offset:
                # Kafka takes it (UnifiedLog.append refuses only a first offset below the log end):
                # legitimate after compaction or a moved log start, else a corrupt base offset.
                self.rt.trace("follower_offset_gap", topic=self.topic, partition=self.partition,
                              log_end_offset=self.log_end_offset, first_offset=first)
            prev, count, max_ts, shallow = first - 1, 0, -1, -1
            for _, h in headers:
                if h.base_offset <= prev:
                    raise ValueError(f"out of order offsets: {h.base_offset} after {prev}")
                if h.max_timestamp > max_ts:
                    max_ts, shallow = h.max_timestamp, h.last_offset
                if h.partition_leader_epoch >= 0:
                    # UnifiedLog.append -> maybeAssignEpochStartOffset: the cache's assign for
                    # every batch, a lower epoch included (assign drops the entries it
                    # contradicts). Only recovery assigns "if greater" (LogSegment.recover).
                    if self.leader_epoch_cache.assign(h.partition_leader_epoch, h.base_offset):
                        self.scheduler.schedule_once("leader-epoch-checkpoint", 0, self._flush_epoch_cache)
                prev = h.last_offset
                count += h.records_count
            self._append(records, first, prev, max_ts, shallow)
            return AppendInfo(first, prev, count, max_ts, shallow)

    def _append(self, records: bytes | bytearray | memoryview, first: int, last: int, max_ts: int,
                shallow: int) -> None:
        now = self.rt.now_ms()
        seg = self._segments[-1]
        cfg = self.config
        if seg.should_roll(now_ms=now, max_timestamp_in_messages=max_ts, max_offset_in_messages=last,
                           messages_size=len(records), segment_ms=cfg.segment_ms, segment_bytes=cfg.segment_bytes) \
                or (seg.size > 0 and self.rt.buggify("log.roll.early")):  # as a smaller segment.bytes would
            seg = self.roll(first)
        seg.append(last, max_ts, shallow, records, now)
        self.log_end_offset = last + 1

    def _maybe_assign_epoch(self, epoch: int, start_offset: int) -> None:
        if epoch > self.leader_epoch_cache.latest_epoch and self.leader_epoch_cache.assign(epoch, start_offset):
            self.scheduler.schedule_once("leader-epoch-checkpoint", 0, self._flush_epoch_cache)

    async def _flush_epoch_cache(self) -> None:
        if not self.closed and not self.offline:
            with self._io("writing leader-epoch-checkpoint"):
                await self._epoch_writes.run(self.leader_epoch_cache.flush)

    async def maybe_assign_epoch_start_offset(self, epoch: int, start_offset: int) -> None:
        """Partition.makeLeader: the new epoch starts at the log end offset; written before use.
        UnifiedLog.maybeAssignEpochStartOffset is the cache's plain assign, which drops the entries
        the new one contradicts: an entry of a higher epoch (a flipped epoch bit taken in from a
        batch) must go, or the leader answers every follower's last_fetched_epoch with the end of
        its older epoch and the follower truncates and refetches that batch for good."""
        with self._io("writing leader-epoch-checkpoint"):
            self.leader_epoch_cache.assign(epoch, start_offset)
            await self._epoch_writes.run(self.leader_epoch_cache.flush)

    async def write_partition_metadata(self, topic_id: bytes) -> None:
        if self.topic_id == topic_id:
            return
        with self._io("writing partition.metadata"):
            await PartitionMetadataFile(self.fs, f"{self.dir}/{PARTITION_METADATA}").write(topic_id)
            self.topic_id = topic_id

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """LocalLog.roll: finish the active segment (closing time index entry, trimmed
        indexes) and start a new one at the log end offset; its flush runs in the background."""
        with self._io("rolling the log"):
            new_offset = max(expected_next_offset or 0, self.log_end_offset)
            active = self.active_segment
            if new_offset in self._bases:
                if active.base_offset == new_offset and active.size == 0:
                    return active
                raise ValueError(f"Trying to roll a new log segment with start offset {new_offset} "
                                 "while it already exists")
            if new_offset < active.base_offset:
                raise ValueError(f"Trying to roll a new log segment with start offset {new_offset} lower than the "
                                 f"active segment {active.base_offset}")
            for kind in SEGMENT_SUFFIXES:
                stale = f"{self.dir}/{log_file_name(new_offset).replace(LOG_SUFFIX, kind)}"
                if self.fs.exists(stale):
                    self.fs.unlink(stale)
            active.on_become_inactive_segment()
            seg = self._new_segment(new_offset)
            self._publish(self._segments + (seg,))
            self.scheduler.schedule_once("flush-log", 0, lambda: self.flush_upto_offset_exclusive(new_offset))
            return seg

    # ================================================================ flush
    @property
    def unflushed_messages(self) -> int:
        return self.log_end_offset - self.recovery_point

    def needs_flush(self) -> bool:
        return self.unflushed_messages >= self.config.flush_messages

    async def flush(self, force_flush_active_segment: bool = False) -> None:
        """Flush up to the log end offset (and an empty active segment too when forced, as a
        clean shutdown does); the recovery point becomes the log end offset."""
        await self._flush(self.log_end_offset, force_flush_active_segment)

    async def flush_upto_offset_exclusive(self, offset: int) -> None:
        await self._flush(offset, False)

    async def _flush(self, offset: int, including_offset: bool) -> None:
        if self.closed or self.offline:
            return
        flush_offset = offset + 1 if including_offset else offset
        with self._io("flushing the log"):
            if flush_offset <= self.recovery_point:
                return
            current = self.recovery_point
            segments = self.segments_in(current, flush_offset)
            # A truncation while the fsyncs below wait lowers this cap: offsets at and above its
            # target may be rewritten by later appends that this flush never synced. Kafka's
            # UnifiedLog.flush marks `offset` flushed regardless (a recovery point above the log
            # end after a concurrent truncateTo, so a later crash would skip recovering the
            # rewritten tail); kafkasim keeps the recovery point within what was synced.
            cap = [offset]
            self._flush_caps.append(cap)
            try:
                for seg in segments:
                    await seg.flush()
                await self._sync_dir_for_flush(current, any(s.base_offset >= current for s in segments))
            finally:
                self._flush_caps.remove(cap)
            offset = cap[0]
            if offset > self.recovery_point:
                self.recovery_point = offset
                self.rt.invariant(self.log_start_offset <= offset <= self.log_end_offset, "recovery-point-within-log")
                self.last_flush_ms = self.rt.now_ms()

    async def _sync_dir_for_flush(self, current: int, new_segments: bool) -> None:
        """Make the directory durable as far as the flush claims. New segments' entries must be
        durable; and segments deleted from [current, ...) since the last flush held offsets no
        fsync covered (retention renamed them `.deleted` unsynced): a recovery point past them
        is true only once their deletion is durable — else a power loss brings such a segment
        back with its unsynced tail lost, trusted below the recovery point, and the log serves
        a gap. Kafka's flush has the same exposure (it skips deleted segments and renames
        without syncing the directory); kafkasim syncs the directory. A deletion racing the
        fsync is caught by the loop."""
        synced_first = -1
        while True:
            first = self._segments[0].base_offset if self._segments else current
            deleted_unsynced = current < first and first != synced_first
            if not (new_segments or deleted_unsynced):
                return
            new_segments = False
            synced_first = first
            await self.fs.fsync_dir(self.dir)

    # ================================================================ read
    def read(self, offset: int, max_bytes: int, max_offset: int | None = None,
             min_one_message: bool = True) -> bytes:
        """Whole batches from the one containing `offset`, up to max_bytes — always the first
        batch, however large, when min_one_message. Nothing at or past `max_offset` (the high
        watermark, exclusive; default the log end offset) is returned. Reads one segment, as
        Kafka's LocalLog.read does (the next one only if this one has nothing from `offset`)."""
        data = self._read(offset, max_bytes, max_offset, min_one_message, LogSegment.read)
        return b"" if data is None else data

    def read_records(self, offset: int, max_bytes: int, max_offset: int | None = None,
                     min_one_message: bool = True) -> FileRecords:
        """The same batches as read(), as file regions (Kafka's FileRecords) for sendfile."""
        region = self._read(offset, max_bytes, max_offset, min_one_message, LogSegment.read_region)
        return FileRecords([] if region is None else [region])

    def read_committed(self, offset: int, max_bytes: int, max_offset: int,
                       min_one_message: bool = True) -> tuple[FileRecords, list[AbortedTxn]]:
        """A READ_COMMITTED read (LocalLog.read with includeAbortedTxns): read_records up to
        `max_offset` (the LSO), and the aborted transactions overlapping what was read — from the
        read's segment on, up to the offset index entry past its end (LocalLog's
        addAbortedTransactions)."""
        with self._io("reading the log"):
            found = self._read_at(offset, max_bytes, max_offset, min_one_message, LogSegment.read_region)
            if found is None:
                return FileRecords([]), []
            region, i = found
            segs = self._segments
            upper = segs[i].fetch_upper_bound_offset(region.position, region.size)
            if upper is None:
                upper = segs[i + 1].base_offset if i + 1 < len(segs) else self.log_end_offset
            return FileRecords([region]), self._collect_aborted(offset, upper, i)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """UnifiedLog.collectAbortedTransactions: the aborted transactions overlapping
        [start_offset, upper_bound_offset), from the segment holding start_offset on."""
        with self._io("reading the transaction index"):
            if not self._segments:
                return []
            return self._collect_aborted(start_offset, upper_bound_offset,
                                         self._floor_index(start_offset, self._bases))

    def _collect_aborted(self, start_offset: int, upper_bound_offset: int, first_index: int) -> list[AbortedTxn]:
        out: list[AbortedTxn] = []
        for seg in self._segments[first_index:]:
            txns, complete = seg.collect_aborted_txns(start_offset, upper_bound_offset)
            out += txns
            if complete:
                break
        return out

    def _read(self, offset: int, max_bytes: int, max_offset: int | None, min_one_message: bool,
              reader: Callable[..., Any]) -> Any:
        # _io("reading the log") spelled out: every fetch comes here, and a generator-based
        # context manager costs more than the read of a caught-up follower.
        if self.offline:
            raise KafkaStorageError(f"The log for {self.topic}-{self.partition} is offline")
        try:
            found = self._read_at(offset, max_bytes, max_offset, min_one_message, reader)
        except OSError as exc:
            self.go_offline(exc)
            raise KafkaStorageError(f"Error while reading the log for {self.topic}-{self.partition} in dir "
                                    f"{self.dir}: {exc}") from exc
        return None if found is None else found[0]

    def _read_at(self, offset: int, max_bytes: int, max_offset: int | None, min_one_message: bool,
                 reader: Callable[..., Any]) -> tuple[Any, int] | None:
        """(what `reader` read, the index of its segment), None when nothing is there."""
        segs, bases = self._segments, self._bases
        leo = self.log_end_offset
        limit = leo if max_offset is None else min(max_offset, leo)
        if offset >= limit or not segs:
            return None
        if limit >= leo:
            limit_index, limit_pos = len(segs) - 1, segs[-1].size
        else:
            limit_index = self._floor_index(limit, bases)
            found = segs[limit_index].translate_offset(limit)
            limit_pos = found.position if found is not None else segs[limit_index].size
        i = self._floor_index(offset, bases)
        while i < len(segs) and i <= limit_index:
            max_pos = segs[i].size if i < limit_index else limit_pos
            data = reader(segs[i], offset, max_bytes, max_pos, min_one_message)
            if data is not None:
                return data, i
            i += 1
        return None

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= timestamp_ms at or after
        the log start offset (UnifiedLog.fetchOffsetByTimestamp via the time index)."""
        with self._io("searching by timestamp"):
            for seg in self._segments:
                if seg.max_timestamp_so_far >= timestamp_ms:
                    found = seg.find_offset_by_timestamp(timestamp_ms, self.log_start_offset)
                    return None if found is None else (found[1], found[0])
            return None

    def max_timestamp_and_offset(self) -> tuple[int, int] | None:
        """ListOffsets MAX_TIMESTAMP: (max timestamp, offset of the first record carrying it)."""
        with self._io("searching by timestamp"):
            segs = self._segments
            if not segs:
                return None
            seg = max(segs, key=lambda s: s.max_timestamp_so_far)  # the first of equals, as maxBy
            ts, off = seg.read_max_timestamp_and_offset_so_far()
            if ts < 0:
                return None
            _, position = seg.offset_index.lookup(off)
            for b in seg.batches(position):
                if b.max_timestamp == ts:
                    for rec in decode_batch_records(seg.log.read(b.position, b.size), 0, validate=False):
                        if rec.timestamp_ms == ts:
                            return ts, rec.offset
                    return None
            return None

    # ================================================================ log start offset, retention
    def delete_records(self, offset: int) -> int:
        """DeleteRecords (maybeIncrementLogStartOffset, ClientRecordDeletion): move the log
        start offset forward to `offset` (at most the high watermark); the segments wholly
        below it go at the next retention pass. Returns the log start offset."""
        with self._io("moving the log start offset"):
            if offset > self.high_watermark:
                raise OffsetOutOfRangeError(f"Cannot increment the log start offset to {offset} of partition "
                                            f"{self.topic}-{self.partition} since it is larger than the high "
                                            f"watermark {self.high_watermark}")
            self._maybe_increment_log_start_offset(offset)
            return self.log_start_offset

    def _maybe_increment_log_start_offset(self, offset: int) -> None:
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self.producer_state_manager.on_log_start_offset_incremented(offset)
            self.leader_epoch_cache.truncate_from_start(offset)
            if self.leader_epoch_cache.dirty:
                self.scheduler.schedule_once("leader-epoch-checkpoint", 0, self._flush_epoch_cache)

    def delete_old_segments(self) -> int:
        """UnifiedLog.deleteOldSegments: whole segments below the log start offset, then (with
        cleanup.policy=delete) by retention.bytes and by retention.ms (a segment's largest
        timestamp). Returns how many segments went."""
        with self._io("deleting old segments"):
            if self.closed:
                return 0
            n = self._delete_segments(lambda s, nxt: nxt is not None and nxt.base_offset <= self.log_start_offset,
                                      "log start offset breach")
            if self.config.delete:
                n += self._delete_retention_size_breached()
                n += self._delete_retention_ms_breached()
            return n

    def _delete_retention_ms_breached(self) -> int:
        retention = self.config.retention_ms
        if retention < 0:
            return 0
        now = self.rt.now_ms()
        return self._delete_segments(lambda s, nxt: now - s.largest_timestamp() > retention, "retention time breach")

    def _delete_retention_size_breached(self) -> int:
        limit = self.config.retention_bytes
        if limit < 0 or self.size_in_bytes < limit:
            return 0
        diff = [self.size_in_bytes - limit]

        def should_delete(s: LogSegment, nxt: LogSegment | None) -> bool:
            if diff[0] - s.size >= 0:
                diff[0] -= s.size
                return True
            return False
        return self._delete_segments(should_delete, "retention size breach")

    def _delete_segments(self, predicate: Callable[[LogSegment, LogSegment | None], bool], reason: str) -> int:
        segs = self._segments
        deletable: list[LogSegment] = []
        hw = self.high_watermark
        for i, seg in enumerate(segs):
            nxt = segs[i + 1] if i + 1 < len(segs) else None
            upper = nxt.base_offset if nxt is not None else self.log_end_offset
            last_and_empty = nxt is None and seg.size == 0
            if hw >= upper and predicate(seg, nxt) and not last_and_empty:
                deletable.append(seg)
            else:
                break
        if not deletable:
            return 0
        if len(deletable) == len(self._segments):
            self.roll()  # always keep one segment: start the new one first
        gone = {id(s) for s in deletable}
        self._publish([s for s in self._segments if id(s) not in gone])
        self._delete_segment_files(deletable)
        self._delete_producer_snapshots(deletable)
        self._maybe_increment_log_start_offset(self._segments[0].base_offset)
        self.rt.trace("log_segments_deleted", topic=self.topic, partition=self.partition, reason=reason,
                      segments=[s.base_offset for s in deletable], log_start_offset=self.log_start_offset)
        return len(deletable)

    def _delete_segment_files(self, segments: list[LogSegment]) -> None:
        """Rename to .deleted now, remove after file.delete.delay.ms (readers holding the old
        segment list keep reading through their open handles meanwhile)."""
        for seg in segments:
            if seg.suffix != DELETED_SUFFIX:
                seg.change_file_suffixes(seg.suffix, DELETED_SUFFIX)

        async def delete() -> None:
            for seg in segments:
                seg.delete_if_exists()
        self.scheduler.schedule_once("delete-file", self.config.file_delete_delay_ms, delete)

    def _delete_producer_snapshots(self, segments: list[LogSegment]) -> None:
        """UnifiedLog.deleteProducerSnapshots: the deleted segments' producer snapshots are
        renamed `.deleted` now and removed file.delete.delay.ms later, as their segments are."""
        psm = self.producer_state_manager
        doomed = [p for p in (psm.remove_and_mark_snapshot_for_deletion(s.base_offset) for s in segments) if p]
        if not doomed:
            return

        async def delete() -> None:
            for path in doomed:
                if self.fs.exists(path):
                    self.fs.unlink(path)
        self.scheduler.schedule_once("delete-producer-snapshot", self.config.file_delete_delay_ms, delete)

    # ================================================================ truncation (replication)
    def _load_producer_state(self) -> None:
        """UnifiedLog.loadProducerState: drop the snapshots beyond the log, then rebuild the
        state from the latest valid one and the batches after it."""
        self.producer_state_manager = ProducerStateManager.load(self)
        if self._high_watermark is not None:
            self.producer_state_manager.on_high_watermark_updated(self.high_watermark)

    async def truncate_to(self, target_offset: int) -> bool:
        """UnifiedLog.truncateTo: drop every offset >= target (a follower's divergent tail).
        Beyond Kafka, the truncation is fsynced."""
        with self._io("truncating the log"):
            if target_offset < 0:
                raise ValueError(f"Cannot truncate to a negative offset ({target_offset})")
            if target_offset >= self.log_end_offset:
                # Kafka always cuts the epoch cache at the log end: a replica that became leader
                # and assigned its epoch's start but appended nothing keeps an entry no other
                # replica knows, and a follower fetching with it as last_fetched_epoch would be
                # told it diverged at every fetch. Kafka flushes this asynchronously; here it is
                # left dirty for the next checkpoint write (a reload drops such entries anyway).
                self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
                return False
            if self._segments[0].base_offset > target_offset:
                await self.truncate_fully_and_start_at(target_offset)
                return True
            doomed = [s for s in self._segments if s.base_offset > target_offset]
            if doomed:
                self._publish([s for s in self._segments if s.base_offset <= target_offset])
                self._delete_segment_files(doomed)
            active = self.active_segment
            active.truncate_to(target_offset)
            active.resize_indexes(self.config.segment_index_bytes)
            self.log_end_offset = target_offset
            if self._high_watermark is not None and self._high_watermark > target_offset:
                # UnifiedLog.truncateTo lowers the high watermark to the new end. Reads cap it at
                # the log end anyway, but a stored 83 over a log cut to 82 would come back as
                # this replica's high watermark once it leads and appends again, above its ISR.
                self._high_watermark = target_offset
            self.recovery_point = min(self.recovery_point, target_offset)
            self._cap_flushes(target_offset)
            self.leader_epoch_cache.truncate_from_end(target_offset)
            await active.log.fsync()
            await self.fs.fsync_dir(self.dir)
            await self._epoch_writes.run(self.leader_epoch_cache.flush)
            self._load_producer_state()
            return True

    def _cap_flushes(self, target_offset: int) -> None:
        for cap in self._flush_caps:
            cap[0] = min(cap[0], target_offset)

    async def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete every segment and start empty at new_offset (UnifiedLog.truncateFullyAndStartAt)."""
        with self._io("truncating the log"):
            old = list(self._segments)
            self._delete_segment_files(old)  # renamed away first: the new segment may reuse a base
            self._publish([self._new_segment(new_offset)])
            self.log_end_offset = self.log_start_offset = new_offset
            self.recovery_point = min(self.recovery_point, new_offset)
            self._cap_flushes(new_offset)
            self.leader_epoch_cache.truncate_from_end(new_offset)
            self.leader_epoch_cache.truncate_from_start(new_offset)
            await self.fs.fsync_dir(self.dir)
            await self._epoch_writes.run(self.leader_epoch_cache.flush)
            self._load_producer_state()

    # ================================================================ cleaning support
    def create_cleaned_segment(self, base_offset: int) -> LogSegment:
        for kind in SEGMENT_SUFFIXES:
            path = f"{self.dir}/{log_file_name(base_offset).replace(LOG_SUFFIX, kind)}{CLEANED_SUFFIX}"
            if self.fs.exists(path):
                self.fs.unlink(path)
        return self._new_segment(base_offset, CLEANED_SUFFIX)

    async def replace_segments(self, new: LogSegment, old: list[LogSegment]) -> None:
        """LocalLog.replaceSegments, crash-safe in two phases: .cleaned -> .swap, publish, old
        segments -> .deleted, .swap -> live names, directory fsync. A crash in between is
        finished by the next load (the .swap files win)."""
        with self._io("replacing cleaned segments"):
            live = {id(s) for s in self._segments}
            old = [s for s in old if id(s) in live]
            new.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
            await self.fs.fsync_dir(self.dir)
            gone = {id(s) for s in old}
            self._publish([s for s in self._segments if id(s) not in gone] + [new])
            self._delete_segment_files(old)
            # UnifiedLog.replaceSegments: the snapshots of the replaced segments go too.
            self._delete_producer_snapshots([s for s in old if s.base_offset != new.base_offset])
            new.change_file_suffixes(SWAP_SUFFIX, "")
            await self.fs.fsync_dir(self.dir)

    # ================================================================ close
    def close(self) -> None:
        """Close every segment (trimming its indexes); background jobs stop."""
        if self.closed:
            return
        self.closed = True
        self.scheduler.shutdown()
        try:  # UnifiedLog.close: a snapshot at the log end offset, so a restart replays nothing
            self.producer_state_manager.take_snapshot()
        except OSError:
            pass  # none then: the restart rebuilds the state from the log
        for seg in self._segments:
            try:
                seg.close()
            except OSError:
                seg.close_handlers()

    def close_handlers(self) -> None:
        self.closed = True
        self.scheduler.shutdown()
        for seg in self._segments:
            seg.close_handlers()


def index_problem(seg: LogSegment, next_base: int | None) -> str:
    """Why a segment's indexes cannot be trusted, or "" — Kafka's sanityCheck of both indexes,
    then (beyond Kafka) entries that increase and point at batches that are really there: the
    offset entry's position must be a batch boundary inside the file, holding the entry's
    offset; the last time entry must name a batch's last offset and that batch's max timestamp
    (a zeroed entry would make retention think the segment is ancient)."""
    try:
        seg.offset_index.sanity_check()
        seg.time_index.sanity_check()
        seg.txn_index.sanity_check()
    except CorruptIndexError as exc:
        return str(exc)
    size = seg.size
    prev_off, prev_pos = -1, -1
    for off, pos in seg.offset_index.all_entries():
        if off <= prev_off or pos <= prev_pos or pos >= size:
            return f"offset index entry ({off}, {pos}) out of order or beyond the log ({size} bytes)"
        prev_off, prev_pos = off, pos
    if prev_pos >= 0:
        head = next(iter(seg.batches(prev_pos, 1)), None)
        if head is None or head.base_offset > prev_off or (next_base is not None and prev_off >= next_base):
            return f"offset index entry ({prev_off}, {prev_pos}) does not point at its batch"
    prev_ts, prev_o = -2, -1
    for ts, o in seg.time_index.all_entries():
        if ts <= prev_ts or o < prev_o:
            return f"time index entry ({ts}, {o}) out of order"
        prev_ts, prev_o = ts, o
    if prev_o >= 0:
        _, position = seg.offset_index.lookup(prev_o)
        at = next((b for b in seg.batches(position) if b.last_offset >= prev_o), None)
        if at is None or at.last_offset != prev_o or at.max_timestamp != prev_ts:
            return f"time index entry ({prev_ts}, {prev_o}) is not a batch's last offset and max timestamp"
    return ""
