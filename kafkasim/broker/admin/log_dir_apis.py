"""Log dir APIs: DescribeLogDirs 0-4 and AlterReplicaLogDirs 0-2, as a Kafka 3.9.1 broker answers
them over several log dirs (ReplicaManager.describeLogDirs / alterReplicaLogDirs; checked with
`realkafka` and two log.dirs).

DescribeLogDirs: one result per log dir in `log.dirs` order; in each, the topics with a log there
(current or `-future`) among those asked (all when `topics` is null), in the order of Kafka's
Scala immutable.HashMap; the partitions in its ConcurrentHashMap order (current logs, then future
logs). partition_size is the log's size (for a future log, what the copy holds); offset_lag is
0 for a current log and, for a future log, how far it is behind the current one. An offline dir
answers KAFKA_STORAGE_ERROR. log_dir is the dir's absolute path and total_bytes / usable_bytes
(v4) its file store's, from the runtime's disk (the simulated disk has none: -1).

AlterReplicaLogDirs, per partition (the request is a map: a partition named twice keeps the
last dir): a topic too long for a `-future` dir name INVALID_TOPIC_EXCEPTION, a dir not in
`log.dirs` LOG_DIR_NOT_FOUND, an offline one KAFKA_STORAGE_ERROR; the dir is remembered for a
partition not hosted yet (created there later) which answers REPLICA_NOT_AVAILABLE when its topic
exists and UNKNOWN_TOPIC_OR_PARTITION when not; a hosted one starts moving (storage.log_dir_mover)
and answers NONE — also when it is already in that dir.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafkasim.broker.zk.java_compat import (
    hash_order,
    java_topic_partition_hash,
    scala_immutable_hash_order,
)
from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.alter_replica_log_dirs import AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse
from kafkasim.protocol.messages.describe_log_dirs import DescribeLogDirsRequest, DescribeLogDirsResponse
from kafkasim.protocol.messages.headers import RequestHeader
from kafkasim.protocol.primitives import Message
from kafkasim.storage.log_dir_mover import log_future_dir_name

if TYPE_CHECKING:
    from kafkasim.broker.metadata_cache import MetadataCache
    from kafkasim.broker.replica_manager import ReplicaManager
    from kafkasim.runtime.api import NodeRuntime
    from kafkasim.storage.log import Log

VERSIONS: dict[int, tuple[int, int]] = {A.DESCRIBE_LOG_DIRS: (0, 4), A.ALTER_REPLICA_LOG_DIRS: (0, 2)}
TopicPartition = tuple[str, int]
MAX_DIR_NAME = 255
UUID_HEX = 32


def _tp_order(tps: list[TopicPartition], scala: bool = False) -> list[TopicPartition]:
    return hash_order(tps, [java_topic_partition_hash(t, p) for t, p in tps], concurrent=not scala, scala=scala)


class LogDirApis:
    def __init__(self, rt: NodeRuntime, replica_manager: ReplicaManager, metadata_cache: MetadataCache) -> None:
        self.rt = rt
        self.rm = replica_manager
        self.cache = metadata_cache

    def handlers(self) -> dict[int, Any]:
        return {A.DESCRIBE_LOG_DIRS: self.describe_log_dirs, A.ALTER_REPLICA_LOG_DIRS: self.alter_replica_log_dirs}

    # ---------------------------------------------------------------- DescribeLogDirs
    async def describe_log_dirs(self, header: RequestHeader, req: DescribeLogDirsRequest) -> Message:
        lm = self.rm.log_manager
        wanted: set[TopicPartition] | None = None
        if req.topics is not None:
            wanted = {(t.topic, p) for t in req.topics for p in t.partitions}
        R = DescribeLogDirsResponse.DescribeLogDirsResult
        T = R.DescribeLogDirsTopic
        current = dict(lm.live_logs())
        futures = dict(lm.mover.futures)
        results = []
        for log_dir in lm.log_dirs:
            path, total, usable = self._store_of(log_dir)
            if lm.offline:
                results.append(R(error_code=E.KAFKA_STORAGE_ERROR, log_dir=path, topics=[]))
                continue
            rows: list[tuple[TopicPartition, int, int, bool]] = []
            for tp in _tp_order(list(current)):
                log = current[tp]
                if lm.dir_of(log) == log_dir:
                    rows.append((tp, log.size_in_bytes, 0, False))
            for tp in _tp_order(list(futures)):
                fut = futures[tp]
                if fut.log_dir == log_dir:
                    lag = current[tp].log_end_offset - fut.log_end_offset if tp in current else -1
                    rows.append((tp, fut.size, lag, True))
            by_topic: dict[str, list[Any]] = {}
            for (topic, index), size, lag, future in rows:
                parts = by_topic.setdefault(topic, [])
                if wanted is None or (topic, index) in wanted:
                    parts.append(T.DescribeLogDirsPartition(partition_index=index, partition_size=size,
                                                            offset_lag=lag, is_future_key=future))
            topics = [T(name=t, partitions=by_topic[t]) for t in scala_immutable_hash_order(list(by_topic))
                      if by_topic[t]]
            results.append(R(error_code=E.NONE, log_dir=path, topics=topics, total_bytes=total, usable_bytes=usable))
        kw: dict[str, Any] = {"error_code": E.NONE} if header.request_api_version >= 3 else {}
        return DescribeLogDirsResponse(throttle_time_ms=0, results=results, **kw)

    def _store_of(self, log_dir: str) -> tuple[str, int, int]:
        """The dir's absolute path and file store sizes; a dir the disk cannot stat (gone with
        a failed disk) keeps its configured name and -1."""
        try:
            return self.rt.fs.store_of(log_dir)
        except OSError:
            return log_dir, -1, -1

    def _configured_dir(self, path: str) -> str:
        """The configured log dir a client names: DescribeLogDirs answers absolute paths (Kafka's
        log dirs are absolute), so a client moves a replica to one of those; the configured
        (possibly relative) name is accepted too."""
        for log_dir in self.rm.log_manager.log_dirs:
            if path == log_dir or path == self._store_of(log_dir)[0]:
                return log_dir
        return path

    # ---------------------------------------------------------------- AlterReplicaLogDirs
    async def alter_replica_log_dirs(self, header: RequestHeader, req: AlterReplicaLogDirsRequest) -> Message:
        wanted: dict[TopicPartition, str] = {}
        for d in req.dirs:
            for t in d.topics:
                for p in t.partitions:
                    wanted[(t.name, p)] = d.path
        errors = {tp: await self._alter_one(tp, dest) for tp, dest in wanted.items()}
        by_topic: dict[str, list[TopicPartition]] = {}
        for tp in _tp_order(list(errors), scala=True):
            by_topic.setdefault(tp[0], []).append(tp)
        R = AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult
        P = R.AlterReplicaLogDirPartitionResult
        results = [R(topic_name=topic, partitions=[P(partition_index=p, error_code=errors[(topic, p)])
                                                    for _, p in by_topic[topic]])
                   for topic in scala_immutable_hash_order(list(by_topic))]
        return AlterReplicaLogDirsResponse(throttle_time_ms=0, results=results)

    async def _alter_one(self, tp: TopicPartition, dest: str) -> int:
        lm = self.rm.log_manager
        if len(log_future_dir_name(tp[0], tp[1], "0" * UUID_HEX)) > MAX_DIR_NAME:
            return E.INVALID_TOPIC_EXCEPTION
        dest = self._configured_dir(dest)
        if dest not in lm.log_dirs:
            return E.LOG_DIR_NOT_FOUND
        if lm.offline:
            return E.KAFKA_STORAGE_ERROR
        part = self.rm.get_partition(*tp)
        if part is not None and part.offline:
            return E.KAFKA_STORAGE_ERROR
        lm.maybe_update_preferred_log_dir(tp, dest)
        if part is None:
            meta = self.cache.topic(tp[0])
            return E.REPLICA_NOT_AVAILABLE if meta is not None and tp[1] in meta.partitions \
                else E.UNKNOWN_TOPIC_OR_PARTITION
        lm.preferred_log_dirs.pop(tp, None)

        def swap(new: Log) -> None:
            hosted = self.rm.get_partition(*tp)
            if hosted is not None:
                hosted.log = new
        await lm.mover.start_move(tp, dest, swap)
        self.rt.trace("alter_replica_log_dir", topic=tp[0], partition=tp[1], dir=dest)
        return E.NONE
