"""LogManager: owns one log dir — loads (recovering) every partition log at startup, creates new
ones, runs the background jobs on the runtime's clock, writes the checkpoints, and marks a clean
shutdown so the next start skips recovery.

    <log.dir>/recovery-point-offset-checkpoint   every kafka-recovery-point-checkpoint period
    <log.dir>/log-start-offset-checkpoint        every kafka-log-start-offset-checkpoint period
    <log.dir>/replication-offset-checkpoint      high watermarks (ReplicaManager's job in Kafka)
    <log.dir>/cleaner-offset-checkpoint          after each cleaning
    <log.dir>/.kafka_cleanshutdown               written last by a clean shutdown, deleted at startup
    <log.dir>/<topic>-<p>.<uuid>-delete          a deleted partition's dir, removed file.delete.delay.ms later

Deleting a partition (``async_delete``, Kafka's LogManager.asyncDelete) renames its dir to the
``-delete`` name and fsyncs the log dir before anything else: one atomic, durable step, so a
crash leaves either the whole log (loaded as before) or a ``-delete`` dir, which startup removes
instead of loading — never a half-deleted log that recovery would serve.

Jobs (Kafka's names and defaults): kafka-log-retention (log.retention.check.interval.ms),
kafka-log-flusher (flush.ms per log, checked every log.flush.scheduler.interval.ms — Kafka's
default never checks; here the check runs every second unless that is set, so flush.ms works
without a second knob), the checkpoints, and the log cleaner (log.cleaner.backoff.ms). All start
after log.initial.task.delay.ms.

An I/O error in any log takes the whole dir offline (Kafka's LogDirFailureChannel): every log of
it refuses further work, the jobs stop, and no clean-shutdown marker is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kafkasim.config import build, setting
from kafkasim.runtime.api import Future, NodeRuntime
from kafkasim.storage.checkpoints import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CheckpointError,
    CleanShutdownFile,
    OffsetCheckpointFile,
)
from kafkasim.storage.cleaner import Cleaner, CleanerConfig, CleanResult, cleanable_range, dirty_ratio
from kafkasim.storage.log import LONG_MAX, KafkaStorageError, Log, LogConfig, parse_topic_partition
from kafkasim.storage.scheduler import Scheduler, SerialQueue

TopicPartition = tuple[str, int]
FLUSH_CHECK_FALLBACK_MS = 1000
DELETE_DIR_SUFFIX = "-delete"  # UnifiedLog.DeleteDirSuffix


@dataclass
class LogManagerConfig:
    """The LogManager's broker configs (typed and defaulted by kafkasim.config)."""

    retention_check_interval_ms: int = setting("log.retention.check.interval.ms")
    flush_scheduler_interval_ms: int = setting("log.flush.scheduler.interval.ms")
    flush_offset_checkpoint_interval_ms: int = setting("log.flush.offset.checkpoint.interval.ms")
    flush_start_offset_checkpoint_interval_ms: int = setting("log.flush.start.offset.checkpoint.interval.ms")
    high_watermark_checkpoint_interval_ms: int = setting("replica.high.watermark.checkpoint.interval.ms")
    initial_task_delay_ms: int = setting("log.initial.task.delay.ms")
    cleaner_enable: bool = setting("log.cleaner.enable")
    cleaner_backoff_ms: int = setting("log.cleaner.backoff.ms")
    cleaner_dedupe_buffer_size: int = setting("log.cleaner.dedupe.buffer.size")

    @classmethod
    def from_properties(cls, props: dict[str, Any]) -> LogManagerConfig:
        """From server.properties names (`log.retention.check.interval.ms`, ...); others ignored."""
        return build(cls, props)


class LogManager:
    def __init__(self, rt: NodeRuntime, log_dir: str, default_config: LogConfig,
                 config: LogManagerConfig | None = None) -> None:
        self.rt, self.fs, self.log_dir = rt, rt.fs, log_dir
        self.default_config = default_config
        self.config = config or LogManagerConfig()
        self.logs: dict[TopicPartition, Log] = {}
        self.scheduler = Scheduler(rt, owner=f"log-manager {log_dir}")
        self.cleaner = Cleaner(CleanerConfig(self.config.cleaner_dedupe_buffer_size, self.config.cleaner_backoff_ms,
                                             self.config.cleaner_enable))
        self.started = False
        self.load_completed = False
        self.had_clean_shutdown = False
        self.offline = False
        self._recovery_points: dict[TopicPartition, int] = {}
        self._log_start_offsets: dict[TopicPartition, int] = {}
        self.high_watermark_checkpoint: dict[TopicPartition, int] = {}
        self.cleaner_checkpoint: dict[TopicPartition, int] = {}
        self.last_clean: CleanResult | None = None
        self._ready: Future[Any] | None = None           # startup done
        self._creating: dict[TopicPartition, Future[Any]] = {}  # logs being created or loaded
        self._checkpoint_writes: dict[str, SerialQueue] = {}     # one writer per checkpoint file

    def _path(self, name: str) -> str:
        return f"{self.log_dir}/{name}" if self.log_dir else name

    def _checkpoint(self, name: str) -> OffsetCheckpointFile:
        return OffsetCheckpointFile(self.fs, self._path(name))

    def _read_checkpoint(self, name: str) -> dict[TopicPartition, int]:
        try:
            return self._checkpoint(name).read()
        except CheckpointError as exc:
            self.rt.trace("checkpoint_unreadable", path=self._path(name), error=str(exc))
            return {}

    # ---------------------------------------------------------------- startup
    async def startup(self) -> None:
        """LogManager.startup: load every log (recovering unless the last shutdown was clean),
        then start the background jobs."""
        if self._ready is not None:
            await self._ready
            return
        self._ready = self.rt.future()
        self.started = True
        try:
            await self._startup()
        finally:
            self._ready.set_result(None)

    async def _startup(self) -> None:
        await self._create_log_dir()
        marker = CleanShutdownFile(self.fs, self.log_dir)
        self.had_clean_shutdown = marker.exists()
        if self.had_clean_shutdown:
            await marker.delete()  # a crash while loading must count as unclean (KAFKA-10471)
        self._recovery_points = self._read_checkpoint(RECOVERY_POINT_CHECKPOINT)
        self._log_start_offsets = self._read_checkpoint(LOG_START_OFFSET_CHECKPOINT)
        self.high_watermark_checkpoint = self._read_checkpoint(REPLICATION_OFFSET_CHECKPOINT)
        self.cleaner_checkpoint = self._read_checkpoint(CLEANER_OFFSET_CHECKPOINT)
        self.rt.trace("log_manager_startup", log_dir=self.log_dir, clean_shutdown=self.had_clean_shutdown)
        for name in self.fs.listdir(self.log_dir):
            if name.endswith(DELETE_DIR_SUFFIX):  # a deletion a crash interrupted: finish it
                self._schedule_dir_deletion(self._path(name))
                continue
            try:
                tp = parse_topic_partition(name)
                self.fs.listdir(self._path(name))
            except (ValueError, OSError):
                continue  # not a topic-partition directory
            await self._load(tp, self.had_clean_shutdown)
        self.load_completed = True
        self._start_jobs()

    async def _create_log_dir(self) -> None:
        """Create the log dir if needed and make its entry durable (Kafka flushes the parent)."""
        self.fs.mkdir(self.log_dir)
        parent = self.log_dir.rsplit("/", 1)[0] if "/" in self.log_dir else ""
        await self.fs.fsync_dir(parent)

    async def _load(self, tp: TopicPartition, had_clean_shutdown: bool,
                    config: LogConfig | None = None) -> Log:
        log = await Log.load(self.rt, self._path(f"{tp[0]}-{tp[1]}"), config or self.default_config,
                             recovery_point=self._recovery_points.get(tp, 0),
                             log_start_offset=self._log_start_offsets.get(tp, 0),
                             had_clean_shutdown=had_clean_shutdown, on_failure=self._on_log_failure)
        # The high watermark checkpoint is kept for the replication layer (Partition owns the
        # high watermark; with one replica it is the log end offset, which the log reports
        # until someone calls update_high_watermark).
        self.logs[tp] = log
        return log

    def _start_jobs(self) -> None:
        c, s = self.config, self.scheduler
        delay = c.initial_task_delay_ms
        s.schedule("kafka-log-retention", delay, c.retention_check_interval_ms, self.cleanup_logs)
        s.schedule("kafka-log-flusher", delay, self._flush_check_ms, self.flush_dirty_logs)
        s.schedule("kafka-recovery-point-checkpoint", delay, c.flush_offset_checkpoint_interval_ms,
                   self.checkpoint_recovery_offsets)
        s.schedule("kafka-log-start-offset-checkpoint", delay, c.flush_start_offset_checkpoint_interval_ms,
                   self.checkpoint_log_start_offsets)
        s.schedule("highwatermark-checkpoint", delay, c.high_watermark_checkpoint_interval_ms,
                   self.checkpoint_high_watermarks)
        if c.cleaner_enable:
            s.schedule("kafka-log-cleaner", delay, c.cleaner_backoff_ms, self.clean_filthiest_log)

    def _flush_check_ms(self) -> float:
        if self.config.flush_scheduler_interval_ms < LONG_MAX:
            return float(self.config.flush_scheduler_interval_ms)
        return float(FLUSH_CHECK_FALLBACK_MS)

    # ---------------------------------------------------------------- logs
    def get_log(self, topic: str, partition: int) -> Log | None:
        log = self.logs.get((topic, partition))
        return None if log is None or log.closed else log

    async def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None,
                                topic_id: bytes | None = None) -> Log:
        """The partition's log, created (with its directory entry made durable) when missing."""
        if self.offline:
            raise KafkaStorageError(f"Can not create log for {topic}-{partition} because log directory "
                                    f"{self.log_dir} is offline")
        await self.startup()
        tp = (topic, partition)
        while tp in self._creating:
            await self._creating[tp]
        log = self.get_log(topic, partition)
        if log is None:
            done = self._creating[tp] = self.rt.future()
            try:
                log = await self._create_log(tp, config)
            finally:
                del self._creating[tp]
                done.set_result(None)
        elif config is not None:
            log.config = config
        if topic_id is not None and topic_id != bytes(16):
            await log.write_partition_metadata(topic_id)
        return log

    async def _create_log(self, tp: TopicPartition, config: LogConfig | None) -> Log:
        d = self._path(f"{tp[0]}-{tp[1]}")
        if not self.fs.exists(d):
            # A new log: checkpoint entries of an earlier incarnation (a deleted topic) do not apply.
            for table in (self._recovery_points, self._log_start_offsets, self.high_watermark_checkpoint,
                          self.cleaner_checkpoint):
                table.pop(tp, None)
            try:
                self.fs.mkdir(d)
                await self.fs.fsync_dir(self.log_dir)
            except OSError as exc:
                self._dir_failed(exc)
                raise KafkaStorageError(f"Error while creating log for {tp[0]}-{tp[1]} in dir "
                                        f"{self.log_dir}: {exc}") from exc
        return await self._load(tp, False, config)

    def live_logs(self) -> list[tuple[TopicPartition, Log]]:
        """Logs still in use, sorted (closed ones — deleted topics — are dropped here)."""
        for tp in [tp for tp, log in self.logs.items() if log.closed]:
            del self.logs[tp]
        return sorted(self.logs.items())

    async def async_delete(self, topic: str, partition: int) -> Log | None:
        """LogManager.asyncDelete: take the log out of service, rename its dir to
        `<topic>-<partition>.<uuid>-delete` and make that durable (fsync of the log dir); the
        files go file.delete.delay.ms later. Returns the removed log (None: there was none)."""
        if self.offline:
            raise KafkaStorageError(f"Failed to delete log for {topic}-{partition} because it may be in "
                                    f"the offline directory {self.log_dir}")
        log = self.logs.pop((topic, partition), None)
        if log is None:
            return None
        log.close()
        deleted = self._path(log_delete_dir_name(topic, partition, self.rt.rng("log-delete-dir").randbytes(16).hex()))
        try:
            self.fs.rename(log.dir, deleted)
            await self.fs.fsync_dir(self.log_dir)
        except OSError as exc:
            self._dir_failed(exc)
            raise KafkaStorageError(f"Error while deleting log for {topic}-{partition} in dir "
                                    f"{self.log_dir}: {exc}") from exc
        self.rt.trace("log_deleted", topic=topic, partition=partition, dir=deleted)
        self._schedule_dir_deletion(deleted)
        return log

    def _schedule_dir_deletion(self, path: str) -> None:
        """The kafka-delete-logs job: remove a `-delete` dir after file.delete.delay.ms."""
        async def delete() -> None:
            for name in self.fs.listdir(path):
                self.fs.unlink(f"{path}/{name}")
            self.fs.rmdir(path)
        self.scheduler.schedule_once("kafka-delete-logs", self.default_config.file_delete_delay_ms, delete)

    # ---------------------------------------------------------------- failure
    def _on_log_failure(self, log: Log, exc: BaseException) -> None:
        self._dir_failed(exc)

    def _dir_failed(self, exc: BaseException) -> None:
        if self.offline:
            return
        self.offline = True
        self.scheduler.shutdown()
        self.rt.trace("log_dir_offline", log_dir=self.log_dir, error=f"{type(exc).__name__}: {exc}")
        for _, log in sorted(self.logs.items()):
            log.go_offline(exc)

    # ---------------------------------------------------------------- jobs
    async def cleanup_logs(self) -> int:
        """kafka-log-retention: deleteOldSegments of every log not compacted (compacted logs
        with delete too are the cleaner's)."""
        total = 0
        for _, log in self.live_logs():
            if not log.config.compact and not log.offline:
                total += log.delete_old_segments()
        return total

    async def flush_dirty_logs(self) -> None:
        """kafka-log-flusher: flush every log whose flush.ms has passed since its last flush."""
        now = self.rt.now_ms()
        for _, log in self.live_logs():
            if not log.offline and now - log.last_flush_ms >= log.config.flush_ms:
                await log.flush()

    async def checkpoint_recovery_offsets(self, logs: list[tuple[TopicPartition, Log]] | None = None) -> None:
        if self.offline:
            return
        logs = self.live_logs() if logs is None else logs
        points = {tp: log.recovery_point for tp, log in logs}
        await self._write(RECOVERY_POINT_CHECKPOINT, points)
        for tp, log in logs:
            log.checkpointed_recovery_point = points[tp]

    async def checkpoint_log_start_offsets(self, logs: list[tuple[TopicPartition, Log]] | None = None) -> None:
        if self.offline:
            return
        logs = self.live_logs() if logs is None else logs
        await self._write(LOG_START_OFFSET_CHECKPOINT, {
            tp: log.log_start_offset for tp, log in logs
            if log.segments and log.log_start_offset > log.segments[0].base_offset})

    async def checkpoint_high_watermarks(self, logs: list[tuple[TopicPartition, Log]] | None = None) -> None:
        if self.offline:
            return
        logs = self.live_logs() if logs is None else logs
        await self._write(REPLICATION_OFFSET_CHECKPOINT, {tp: log.high_watermark for tp, log in logs})

    async def checkpoint_cleaner_offsets(self, logs: list[tuple[TopicPartition, Log]] | None = None) -> None:
        if self.offline:
            return
        live = {tp for tp, _ in (self.live_logs() if logs is None else logs)}
        await self._write(CLEANER_OFFSET_CHECKPOINT, {tp: o for tp, o in self.cleaner_checkpoint.items() if tp in live})

    async def _write(self, name: str, offsets: dict[TopicPartition, int]) -> None:
        queue = self._checkpoint_writes.setdefault(name, SerialQueue(self.rt))
        try:
            await queue.run(lambda: self._checkpoint(name).write(offsets))
        except OSError as exc:
            self._dir_failed(exc)
            raise KafkaStorageError(f"Disk error while writing {name} in directory {self.log_dir}: {exc}") from exc

    async def clean_filthiest_log(self) -> CleanResult | None:
        """One pass of the cleaner thread: clean the compacted log with the highest dirty ratio
        above its min.cleanable.dirty.ratio, then retention of compact+delete logs."""
        now = self.rt.now_ms()
        best: tuple[float, TopicPartition, Log, int, int] | None = None
        for tp, log in self.live_logs():
            if not log.config.compact or log.offline:
                continue
            first_dirty, uncleanable = cleanable_range(log, self.cleaner_checkpoint.get(tp), now)
            ratio = dirty_ratio(log, first_dirty, uncleanable)
            if ratio >= log.config.min_cleanable_dirty_ratio and uncleanable > first_dirty and \
                    (best is None or ratio > best[0]):
                best = (ratio, tp, log, first_dirty, uncleanable)
        result = None
        if best is not None:
            result = await self.clean_log(best[2])
        for _, log in self.live_logs():
            if log.config.compact and log.config.delete and not log.offline:
                log.delete_old_segments()
        return result

    async def clean_log(self, log: Log) -> CleanResult:
        """Clean one log now (whatever its dirty ratio) and checkpoint its new first dirty offset."""
        tp = (log.topic, log.partition)
        now = self.rt.now_ms()
        first_dirty, uncleanable = cleanable_range(log, self.cleaner_checkpoint.get(tp), now)
        try:
            result = await self.cleaner.clean(log, first_dirty, uncleanable, now)
        except OSError as exc:
            log.go_offline(exc)
            raise KafkaStorageError(f"Error while cleaning {tp}: {exc}") from exc
        self.cleaner_checkpoint[tp] = result.end_offset
        self.last_clean = result
        self.rt.trace("log_cleaned", topic=log.topic, partition=log.partition, first_dirty=first_dirty,
                      end_offset=result.end_offset, segments=result.segments_cleaned, groups=result.groups,
                      records_kept=result.records_kept, empty_batches=result.batches_emptied)
        await self.checkpoint_cleaner_offsets()
        return result

    # ---------------------------------------------------------------- shutdown
    async def shutdown(self, broker_epoch: int = -1) -> None:
        """LogManager.shutdown: flush and close every log, write the checkpoints, then the
        clean-shutdown marker (only if every log loaded and the dir never failed)."""
        self.scheduler.shutdown()
        if not self.started:
            return
        logs = self.live_logs()
        if self.offline:
            for _, log in logs:
                log.close_handlers()
            return
        for _, log in logs:
            if not log.offline:
                await log.flush(force_flush_active_segment=True)
        for _, log in logs:
            log.close()
        self.logs = {}
        await self.checkpoint_recovery_offsets(logs)
        await self.checkpoint_log_start_offsets(logs)
        await self.checkpoint_high_watermarks(logs)
        await self.checkpoint_cleaner_offsets(logs)
        if self.load_completed and not self.offline and not any(log.offline for _, log in logs):
            await CleanShutdownFile(self.fs, self.log_dir).write(broker_epoch)
        self.rt.trace("log_manager_shutdown", log_dir=self.log_dir, logs=len(logs))


def log_delete_dir_name(topic: str, partition: int, unique_id: str) -> str:
    """UnifiedLog.logDeleteDirName: `<topic>-<partition>.<uuid>-delete`, the topic cut so the
    name fits in 255 characters."""
    suffix = f"-{partition}.{unique_id}{DELETE_DIR_SUFFIX}"
    return topic[:max(0, 255 - len(suffix))] + suffix
