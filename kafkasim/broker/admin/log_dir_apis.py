"""Log dir APIs: DescribeLogDirs 0-4, as a Kafka 3.9.1 broker answers it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.describe_log_dirs import DescribeLogDirsRequest, DescribeLogDirsResponse
from kafkasim.protocol.messages.headers import RequestHeader
from kafkasim.protocol.primitives import Message

if TYPE_CHECKING:
    from kafkasim.broker.config import BrokerConfig
    from kafkasim.broker.replica_manager import ReplicaManager

VERSIONS: dict[int, tuple[int, int]] = {A.DESCRIBE_LOG_DIRS: (0, 4)}


class LogDirApis:
    def __init__(self, config: BrokerConfig, replica_manager: ReplicaManager) -> None:
        self.config = config
        self.rm = replica_manager

    def handlers(self) -> dict[int, Any]:
        return {A.DESCRIBE_LOG_DIRS: self.describe_log_dirs}

    async def describe_log_dirs(self, header: RequestHeader, req: DescribeLogDirsRequest) -> Message:
        version = header.request_api_version
        rm = self.rm
        wanted: dict[str, set[int]] | None = None
        if req.topics is not None:
            wanted = {}
            for t in req.topics:
                wanted.setdefault(t.topic, set()).update(t.partitions)
        R = DescribeLogDirsResponse.DescribeLogDirsResult
        T = R.DescribeLogDirsTopic
        by_topic: dict[str, list[Any]] = {}
        for (topic, index), part in sorted(rm.partitions.items()):
            if wanted is not None and index not in wanted.get(topic, set()):
                continue
            size = part.log.size_in_bytes
            by_topic.setdefault(topic, []).append(T.DescribeLogDirsPartition(
                partition_index=index, partition_size=size, offset_lag=0, is_future_key=False))
        topics = [T(name=name, partitions=parts) for name, parts in by_topic.items()]
        result = R(error_code=E.NONE, log_dir=self.config.log_dir, topics=topics)
        kw: dict[str, Any] = {"error_code": E.NONE} if version >= 3 else {}
        return DescribeLogDirsResponse(throttle_time_ms=0, results=[result], **kw)
