"""LogManager: owns the log dirs (`log.dirs`, comma-separated) — loads (recovering) every
partition log at startup, creates new ones, runs the background jobs on the runtime's clock,
writes the checkpoints, and marks a clean shutdown so the next start skips recovery.

Several dirs, as Kafka's LogManager: a new log goes to the dir holding the fewest logs (ties in
`log.dirs` order; nextLogDirs); each dir has its own checkpoint files, each listing the logs of
that dir, and its own clean-shutdown marker. The same partition in two dirs at startup is
Kafka's "Duplicate log directories" error (the broker cannot start). A replica moves between
dirs through a `-future` log (log_dir_mover.py, AlterReplicaLogDirs). Unlike Kafka, an I/O
error in any dir takes every dir offline.

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
from kafkasim.storage.log_dir_mover import FUTURE_DIR_SUFFIX, LogDirMover
from kafkasim.storage.scheduler import Scheduler, SerialQueue

TopicPartition = tuple[str, int]
FLUSH_CHECK_FALLBACK_MS = 1000
DELETE_DIR_SUFFIX = "-delete"  # UnifiedLog.DeleteDirSuffix


class DuplicateLogDirError(Exception):
    """LogManager.loadLog's IllegalStateException: one partition in two log dirs."""


def split_log_dirs(log_dirs: str) -> list[str]:
    """`log.dirs` (comma-separated, as Kafka's CSV list)."""
    return [d.strip() for d in log_dirs.split(",") if d.strip()] or [log_dirs]


def parent_dir(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""


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
    producer_id_expiration_ms: int = setting("producer.id.expiration.ms")
    producer_id_expiration_check_interval_ms: int = setting("producer.id.expiration.check.interval.ms")

    @classmethod
    def from_properties(cls, props: dict[str, Any]) -> LogManagerConfig:
        """From server.properties names (`log.retention.check.interval.ms`, ...); others ignored."""
        return build(cls, props)


class LogManager:
    def __init__(self, rt: NodeRuntime, log_dir: str, default_config: LogConfig,
                 config: LogManagerConfig | None = None) -> None:
        """`log_dir`: `log.dirs`, one dir or several separated by commas."""
        self.rt, self.fs = rt, rt.fs
        self.log_dirs = split_log_dirs(log_dir)
        self.log_dir = self.log_dirs[0]
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
        self.clean_dirs: set[str] = set()                        # dirs whose last shutdown was clean
        # AlterReplicaLogDirs for a partition not hosted yet: where its log will be created.
        self.preferred_log_dirs: dict[TopicPartition, str] = {}
        self.mover = LogDirMover(rt, self)

    def _path(self, name: str, log_dir: str | None = None) -> str:
        d = self.log_dir if log_dir is None else log_dir
        return f"{d}/{name}" if d else name

    def _checkpoint(self, name: str, log_dir: str) -> OffsetCheckpointFile:
        return OffsetCheckpointFile(self.fs, self._path(name, log_dir))

    def _read_checkpoint(self, name: str, log_dir: str) -> dict[TopicPartition, int]:
        try:
            return self._checkpoint(name, log_dir).read()
        except CheckpointError as exc:
            self.rt.trace("checkpoint_unreadable", path=self._path(name, log_dir), error=str(exc))
            return {}

    def dir_of(self, log: Log) -> str:
        """The log dir holding `log` (its directory's parent)."""
        return parent_dir(log.dir)

    def logs_in(self, log_dir: str) -> list[tuple[TopicPartition, Log]]:
        return [(tp, log) for tp, log in self.live_logs() if self.dir_of(log) == log_dir]

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
        for log_dir in self.log_dirs:
            await self._start_dir(log_dir)
        self.had_clean_shutdown = len(self.clean_dirs) == len(self.log_dirs)
        self.load_completed = True
        self._start_jobs()

    async def _start_dir(self, log_dir: str) -> None:
        await self._create_log_dir(log_dir)
        marker = CleanShutdownFile(self.fs, log_dir)
        clean = marker.exists()
        if clean:
            self.clean_dirs.add(log_dir)
            await marker.delete()  # a crash while loading must count as unclean (KAFKA-10471)
        self._recovery_points.update(self._read_checkpoint(RECOVERY_POINT_CHECKPOINT, log_dir))
        self._log_start_offsets.update(self._read_checkpoint(LOG_START_OFFSET_CHECKPOINT, log_dir))
        self.high_watermark_checkpoint.update(self._read_checkpoint(REPLICATION_OFFSET_CHECKPOINT, log_dir))
        self.cleaner_checkpoint.update(self._read_checkpoint(CLEANER_OFFSET_CHECKPOINT, log_dir))
        self.rt.trace("log_manager_startup", log_dir=log_dir, clean_shutdown=clean)
        for name in self.fs.listdir(log_dir):
            if name.endswith(DELETE_DIR_SUFFIX) or name.endswith(FUTURE_DIR_SUFFIX):
                # A deletion a crash interrupted: finish it. A move a crash interrupted: the
                # replica stays where it is and the partial copy goes (Kafka would resume it).
                self._schedule_dir_deletion(self._path(name, log_dir))
                continue
            try:
                tp = parse_topic_partition(name)
                self.fs.listdir(self._path(name, log_dir))
            except (ValueError, OSError):
                continue  # not a topic-partition directory
            if tp in self.logs:
                raise DuplicateLogDirError(
                    f"Duplicate log directories for {tp[0]}-{tp[1]} are found in both {self.logs[tp].dir} and "
                    f"{self._path(name, log_dir)}. It is likely because log directory failure happened while broker "
                    "was replacing current replica with future replica. Recover broker from this failure by "
                    "manually deleting one of the two directories for this partition. It is recommended to delete "
                    "the partition in the log directory that is known to have failed recently.")
            await self._load(tp, clean, log_dir=log_dir)

    async def _create_log_dir(self, log_dir: str) -> None:
        """Create the log dir if needed and make its entry durable (Kafka flushes the parent)."""
        self.fs.mkdir(log_dir)
        await self.fs.fsync_dir(parent_dir(log_dir))

    async def _load(self, tp: TopicPartition, had_clean_shutdown: bool,
                    config: LogConfig | None = None, log_dir: str | None = None) -> Log:
        log = await Log.load(self.rt, self._path(f"{tp[0]}-{tp[1]}", log_dir), config or self.default_config,
                             recovery_point=self._recovery_points.get(tp, 0),
                             log_start_offset=self._log_start_offsets.get(tp, 0),
                             had_clean_shutdown=had_clean_shutdown, on_failure=self._on_log_failure,
                             producer_id_expiration_ms=self.config.producer_id_expiration_ms)
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
        # UnifiedLog's PeriodicProducerExpirationCheck (one per log there, first run after one interval).
        s.schedule("PeriodicProducerExpirationCheck", c.producer_id_expiration_check_interval_ms,
                   c.producer_id_expiration_check_interval_ms, self.remove_expired_producers)

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
                                    f"{','.join(self.log_dirs)} is offline")
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
        name = f"{tp[0]}-{tp[1]}"
        log_dir = next((d for d in self.log_dirs if self.fs.exists(self._path(name, d))), None)
        if log_dir is None:
            preferred = self.preferred_log_dirs.pop(tp, None)
            log_dir = preferred if preferred in self.log_dirs else self.next_log_dirs()[0]
            # A new log: checkpoint entries of an earlier incarnation (a deleted topic) do not apply.
            for table in (self._recovery_points, self._log_start_offsets, self.high_watermark_checkpoint,
                          self.cleaner_checkpoint):
                table.pop(tp, None)
            try:
                self.fs.mkdir(self._path(name, log_dir))
                await self.fs.fsync_dir(log_dir)
            except OSError as exc:
                self._dir_failed(exc)
                raise KafkaStorageError(f"Error while creating log for {name} in dir {log_dir}: {exc}") from exc
        return await self._load(tp, False, config, log_dir=log_dir)

    def next_log_dirs(self) -> list[str]:
        """LogManager.nextLogDirs: the dirs by how many logs they hold, fewest first (stable, so
        ties keep `log.dirs` order)."""
        counts = {d: 0 for d in self.log_dirs}
        placed = [self.dir_of(log) for _, log in self.live_logs()] + [f.log_dir for f in self.mover.futures.values()]
        for d in placed:
            if d in counts:
                counts[d] += 1
        return sorted(self.log_dirs, key=lambda d: counts[d])

    def maybe_update_preferred_log_dir(self, tp: TopicPartition, log_dir: str) -> None:
        """LogManager.maybeUpdatePreferredLogDir: remembered unless the log (or its future) is
        already there."""
        log, fut = self.logs.get(tp), self.mover.future(tp)
        if (log is None or self.dir_of(log) != log_dir) and (fut is None or fut.log_dir != log_dir):
            self.preferred_log_dirs[tp] = log_dir

    def retire_dir(self, log: Log) -> str:
        """replaceCurrentWithFutureLog's second rename: the replaced log's dir becomes
        `<tp>.<uuid>-delete`, removed file.delete.delay.ms later. Returns the new name."""
        uid = self.rt.rng("log-delete-dir").randbytes(16).hex()
        deleted = self._path(log_delete_dir_name(log.topic, log.partition, uid), self.dir_of(log))
        self.fs.rename(log.dir, deleted)
        self._schedule_dir_deletion(deleted)
        return deleted

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
        log_dir = self.dir_of(log)
        deleted = self._path(log_delete_dir_name(topic, partition, self.rt.rng("log-delete-dir").randbytes(16).hex()),
                             log_dir)
        try:
            self.fs.rename(log.dir, deleted)
            await self.fs.fsync_dir(log_dir)
        except OSError as exc:
            self._dir_failed(exc)
            raise KafkaStorageError(f"Error while deleting log for {topic}-{partition} in dir "
                                    f"{log_dir}: {exc}") from exc
        self.rt.trace("log_deleted", topic=topic, partition=partition, dir=deleted)
        self._schedule_dir_deletion(deleted)
        return log

    def schedule_dir_deletion(self, path: str) -> None:
        self._schedule_dir_deletion(path)

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
        if self.rt.buggify("log.retention.late"):
            return 0  # the scheduler ran kafka-log-retention late: segments past retention stay a while
        for _, log in self.live_logs():
            if not log.config.compact and not log.offline:
                total += log.delete_old_segments()
        return total

    async def remove_expired_producers(self) -> int:
        """Forget producers idle for producer.id.expiration.ms (ProducerStateManager)."""
        now, total, expiration_ms = self.rt.now_ms(), 0, self.config.producer_id_expiration_ms
        for tp, log in self.live_logs():
            if not log.offline:
                removed = log.producer_state_manager.remove_expired_producers(now, expiration_ms)
                if removed:
                    self.rt.trace("producers_expired", topic=tp[0], partition=tp[1], producer_ids=removed)
                total += len(removed)
        return total

    async def flush_dirty_logs(self) -> None:
        """kafka-log-flusher: flush every log whose flush.ms has passed since its last flush."""
        now = self.rt.now_ms()
        for _, log in self.live_logs():
            # buggify: a flush before flush.ms is due (as a smaller flush.ms would): fsync is never wrong
            if not log.offline and (now - log.last_flush_ms >= log.config.flush_ms
                                    or self.rt.buggify("log.flush.early")):
                await log.flush()

    async def checkpoint_recovery_offsets(self, logs: list[tuple[TopicPartition, Log]] | None = None) -> None:
        if self.offline:
            return
        logs = self.live_logs() if logs is None else logs
        points = {tp: log.recovery_point for tp, log in logs}
        await self._write(RECOVERY_POINT_CHECKPOINT, points, logs)
        for tp, log in logs:
            log.checkpointed_recovery_point = points[tp]

    async def checkpoint_log_start_offsets(self, logs: list[tuple[TopicPartition, Log]] | None = None) -> None:
        if self.offline:
            return
        logs = self.live_logs() if logs is None else logs
        await self._write(LOG_START_OFFSET_CHECKPOINT, {
            tp: log.log_start_offset for tp, log in logs
            if log.segments and log.log_start_offset > log.segments[0].base_offset}, logs)

    async def checkpoint_high_watermarks(self, logs: list[tuple[TopicPartition, Log]] | None = None) -> None:
        if self.offline:
            return
        logs = self.live_logs() if logs is None else logs
        await self._write(REPLICATION_OFFSET_CHECKPOINT, {tp: log.high_watermark for tp, log in logs}, logs)

    async def checkpoint_cleaner_offsets(self, logs: list[tuple[TopicPartition, Log]] | None = None) -> None:
        if self.offline:
            return
        logs = self.live_logs() if logs is None else logs
        live = {tp for tp, _ in logs}
        await self._write(CLEANER_OFFSET_CHECKPOINT,
                          {tp: o for tp, o in self.cleaner_checkpoint.items() if tp in live}, logs)

    async def _write(self, name: str, offsets: dict[TopicPartition, int],
                     logs: list[tuple[TopicPartition, Log]]) -> None:
        """Each dir's file lists that dir's logs (every dir gets its file, empty or not)."""
        where = {tp: self.dir_of(log) for tp, log in logs}
        for log_dir in self.log_dirs:
            mine = {tp: o for tp, o in offsets.items() if where.get(tp) == log_dir}
            path = self._path(name, log_dir)
            queue = self._checkpoint_writes.setdefault(path, SerialQueue(self.rt))
            try:
                await queue.run(lambda d=log_dir, m=mine: self._checkpoint(name, d).write(m))  # type: ignore[misc]
            except OSError as exc:
                self._dir_failed(exc)
                raise KafkaStorageError(f"Disk error while writing {name} in directory {log_dir}: {exc}") from exc

    async def clean_filthiest_log(self) -> CleanResult | None:
        """One pass of the cleaner thread: clean the compacted log with the highest dirty ratio
        above its min.cleanable.dirty.ratio, then retention of compact+delete logs."""
        if self.rt.buggify("log.cleaner.late"):
            return None  # the cleaner thread is behind (or backing off): dirty segments stay uncleaned
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
            for log_dir in self.log_dirs:
                await CleanShutdownFile(self.fs, log_dir).write(broker_epoch)
        self.rt.trace("log_manager_shutdown", log_dir=",".join(self.log_dirs), logs=len(logs))


def log_delete_dir_name(topic: str, partition: int, unique_id: str) -> str:
    """UnifiedLog.logDeleteDirName: `<topic>-<partition>.<uuid>-delete`, the topic cut so the
    name fits in 255 characters."""
    suffix = f"-{partition}.{unique_id}{DELETE_DIR_SUFFIX}"
    return topic[:max(0, 255 - len(suffix))] + suffix
