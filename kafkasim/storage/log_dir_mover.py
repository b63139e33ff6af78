"""Moving a replica between log dirs (AlterReplicaLogDirs), as Kafka does it through a future log:
ReplicaManager.alterReplicaLogDirs creates `<dest>/<topic>-<p>.<uuid>-future`, the
ReplicaAlterLogDirsThread fills it from the current log until it has caught up, and
LogManager.replaceCurrentWithFutureLog swaps them:

  1. <dest>/<tp>.<uuid>-future      created (mkdir + fsync of <dest>); DescribeLogDirs lists it
                                    with is_future_key=true and its lag
  2. the copy                       the current log's segment files, leader-epoch-checkpoint,
                                    partition.metadata and producer snapshots, read in one step
                                    (a consistent snapshot: appends run between steps), fsynced
  3. rename future -> <dest>/<tp>   (Kafka's first rename), fsync of <dest>
  4. the new log loaded there       recovery rebuilds the indexes; what the current log got
                                    appended meanwhile is appended to it (replication)
  5. swap                           in one step: the partition serves the new log, the old one
                                    closes and its dir becomes <src>/<tp>.<uuid>-delete (Kafka's
                                    second rename), removed file.delete.delay.ms later

A crash between 3 and 5 leaves the partition in both dirs, which the next startup refuses, as
Kafka's does ("Duplicate log directories"). A crash before 3 leaves only a `-future` dir, which
startup deletes (Kafka would resume the move). A move to another dir while one is under way
abandons the first (Kafka's futureReplicaDirChanged).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkasim.records.batch import iter_batches
from kafkasim.storage.log import Log

if TYPE_CHECKING:
    from kafkasim.runtime.api import NodeRuntime
    from kafkasim.storage.log_manager import LogManager

TopicPartition = tuple[str, int]
FUTURE_DIR_SUFFIX = "-future"
ALTER_LOG_DIRS_DELAY_MS = 1000.0   # the thread's first fetch (a simulation choice, not a Kafka config)
COPIED_SUFFIXES = (".log", ".snapshot")
COPIED_NAMES = ("leader-epoch-checkpoint", "partition.metadata")
COPY_CHUNK = 1 << 20


def log_future_dir_name(topic: str, partition: int, unique_id: str) -> str:
    """UnifiedLog.logFutureDirName: `<topic>-<partition>.<uuid>-future`."""
    return f"{topic}-{partition}.{unique_id}{FUTURE_DIR_SUFFIX}"


@dataclass
class FutureLog:
    topic: str
    partition: int
    log_dir: str            # the destination log dir
    dir: str                # <log_dir>/<tp>.<uuid>-future while the copy runs
    size: int = 0           # bytes of segments copied so far
    log_end_offset: int = 0
    abandoned: bool = False


class LogDirMover:
    def __init__(self, rt: NodeRuntime, log_manager: LogManager) -> None:
        self.rt, self.fs, self.lm = rt, rt.fs, log_manager
        self.futures: dict[TopicPartition, FutureLog] = {}

    def future(self, tp: TopicPartition) -> FutureLog | None:
        return self.futures.get(tp)

    async def start_move(self, tp: TopicPartition, dest: str, on_swap: Callable[[Log], None]) -> None:
        """Partition.maybeCreateFutureReplica + the thread: no-op when the replica (or its
        future) is already in `dest`."""
        current = self.lm.logs.get(tp)
        fut = self.futures.get(tp)
        if current is None or self.lm.dir_of(current) == dest or (fut is not None and fut.log_dir == dest):
            return
        if fut is not None:
            self._abandon(fut)
        uid = self.rt.rng("log-future-dir").randbytes(16).hex()
        fut = FutureLog(tp[0], tp[1], dest, f"{dest}/{log_future_dir_name(tp[0], tp[1], uid)}")
        self.fs.mkdir(fut.dir)
        await self.fs.fsync_dir(dest)
        self.futures[tp] = fut
        self.rt.trace("future_log_created", topic=tp[0], partition=tp[1], dir=fut.dir)
        self.rt.spawn(self._run(fut, current, on_swap), name=f"alter-log-dirs {tp[0]}-{tp[1]}")

    def _abandon(self, fut: FutureLog) -> None:
        fut.abandoned = True
        self.futures.pop((fut.topic, fut.partition), None)
        if self.fs.exists(fut.dir):
            self.lm.schedule_dir_deletion(fut.dir)

    def _still_current(self, fut: FutureLog, log: Log) -> bool:
        return not fut.abandoned and self.lm.logs.get((fut.topic, fut.partition)) is log and not log.closed \
            and not log.offline and not self.lm.offline

    async def _run(self, fut: FutureLog, log: Log, on_swap: Callable[[Log], None]) -> None:
        await self.rt.sleep(ALTER_LOG_DIRS_DELAY_MS)
        if not self._still_current(fut, log):
            self._abandon(fut)
            return
        copied = self._copy(log, fut)
        for name in copied:
            f = self.fs.open(f"{fut.dir}/{name}", create=False)
            try:
                await f.fsync()
            finally:
                f.close()
        await self.fs.fsync_dir(fut.dir)
        if not self._still_current(fut, log):
            self._abandon(fut)
            return
        final = f"{fut.log_dir}/{fut.topic}-{fut.partition}"
        self.fs.rename(fut.dir, final)
        await self.fs.fsync_dir(fut.log_dir)
        new = await Log.load(self.rt, final, log.config, recovery_point=0, log_start_offset=log.log_start_offset,
                             had_clean_shutdown=False, on_failure=log.on_failure,
                             producer_id_expiration_ms=log.producer_id_expiration_ms)
        if not self._still_current(fut, log):
            new.close()
            fut.dir = final
            self._abandon(fut)
            return
        self._swap(fut, log, new, on_swap)
        await self.fs.fsync_dir(self.lm.dir_of(log))

    def _copy(self, log: Log, fut: FutureLog) -> list[str]:
        """One synchronous snapshot of the files a log is rebuilt from."""
        names = [n for n in sorted(self.fs.listdir(log.dir)) if n.endswith(COPIED_SUFFIXES) or n in COPIED_NAMES]
        for name in names:
            src = self.fs.open(f"{log.dir}/{name}", create=False)
            dst = self.fs.open(f"{fut.dir}/{name}")
            try:
                dst.truncate(0)
                size, pos = src.size(), 0
                while pos < size:
                    chunk = src.read(pos, min(COPY_CHUNK, size - pos))
                    dst.append(chunk)
                    pos += len(chunk)
            finally:
                src.close()
                dst.close()
        fut.size = log.size_in_bytes
        fut.log_end_offset = log.log_end_offset
        return names

    def _swap(self, fut: FutureLog, old: Log, new: Log, on_swap: Callable[[Log], None]) -> None:
        """replaceCurrentWithFutureLog, in one step: catch up, serve the new log, retire the old."""
        while new.log_end_offset < old.log_end_offset:
            data = old.read(new.log_end_offset, COPY_CHUNK)
            headers = list(iter_batches(data))
            if not headers:
                break
            new.append_as_follower(data, headers)
        new.update_high_watermark(old.high_watermark)
        tp = (fut.topic, fut.partition)
        self.futures.pop(tp, None)
        self.lm.logs[tp] = new
        on_swap(new)
        old.close()
        deleted = self.lm.retire_dir(old)
        self.rt.trace("future_log_swapped", topic=tp[0], partition=tp[1], dir=new.dir, deleted=deleted,
                      log_end_offset=new.log_end_offset)
