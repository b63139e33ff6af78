"""ReplicaManager: the partitions this broker hosts; appends (Produce) and reads (Fetch), with
the DelayedFetch long poll.

DelayedFetch: a fetch that finds fewer than `min_bytes` waits until an append to one of its
partitions wakes it or `max_wait_ms` passes, then reads again — Kafka's purgatory semantics,
expressed as a wait on futures the partitions resolve.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from kafkasim.protocol import errors as E
from kafkasim.broker.partition import AppendError, Partition, validate_produce_records
from kafkasim.runtime.api import FileSystem, NodeRuntime
from kafkasim.storage.log import AppendInfo, KafkaStorageError, LogConfig
from kafkasim.storage.log_manager import LogManager


@dataclass
class PartitionAppendResult:
    error_code: int
    base_offset: int = -1
    log_start_offset: int = -1
    error_message: Optional[str] = None
    info: Optional[AppendInfo] = None


@dataclass
class FetchSpec:
    topic: str
    partition: int
    fetch_offset: int
    max_bytes: int


@dataclass
class FetchResult:
    error_code: int
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes = b""


@dataclass
class ReplicaManager:
    rt: NodeRuntime
    log_dir: str
    log_config: LogConfig
    partitions: dict[tuple[str, int], Partition] = field(default_factory=dict)
    # Called with (topic, partition, leader epoch) whenever this broker becomes (or stays) the
    # leader — Kafka's onLeadershipChange, how the group coordinator learns it owns a partition.
    leadership_listeners: list[Callable[[str, int, int], None]] = field(default_factory=list)

    log_manager: Optional[LogManager] = None

    def __post_init__(self) -> None:
        if self.log_manager is None:
            self.log_manager = LogManager(self.rt, self.log_dir, self.log_config)

    @property
    def fs(self) -> FileSystem:
        return self.rt.fs

    def get_partition(self, topic: str, partition: int) -> Optional[Partition]:
        return self.partitions.get((topic, partition))

    async def startup(self) -> None:
        """Load (recovering) every log in the log dir and start the storage jobs."""
        assert self.log_manager is not None
        await self.log_manager.startup()

    async def make_leader(self, topic: str, partition: int, leader_epoch: int,
                          topic_id: Optional[bytes] = None) -> Partition:
        """Open (recovering) the local log and lead it — what a LeaderAndIsr request does."""
        assert self.log_manager is not None
        p = self.partitions.get((topic, partition))
        if p is None:
            log = await self.log_manager.get_or_create_log(topic, partition, topic_id=topic_id)
            p = self.partitions.get((topic, partition))
            if p is None:
                p = self.partitions[(topic, partition)] = Partition(topic, partition, log, leader_epoch, True)
        p.leader_epoch, p.is_leader = leader_epoch, True
        await p.log.maybe_assign_epoch_start_offset(leader_epoch, p.log.log_end_offset)
        for listener in self.leadership_listeners:
            listener(topic, partition, leader_epoch)
        return p

    # ---------------------------------------------------------------- produce
    async def append_records(self, topic: str, partition: int, records: Any) -> PartitionAppendResult:
        p = self.partitions.get((topic, partition))
        if p is None:
            return PartitionAppendResult(E.UNKNOWN_TOPIC_OR_PARTITION)
        try:
            validated = validate_produce_records(records, p.log.config)  # the topic's max.message.bytes
            info = await p.append_records_to_leader(validated)
        except AppendError as exc:
            return PartitionAppendResult(exc.error_code, log_start_offset=p.log_start_offset, error_message=str(exc))
        except KafkaStorageError as exc:
            return PartitionAppendResult(E.KAFKA_STORAGE_ERROR, error_message=str(exc))
        return PartitionAppendResult(E.NONE, info.first_offset, p.log_start_offset, info=info)

    # ---------------------------------------------------------------- fetch
    def read_once(self, specs: list[FetchSpec], max_bytes: int, committed: bool) -> tuple[list[FetchResult], int]:
        results: list[FetchResult] = []
        total = 0
        for s in specs:
            p = self.partitions.get((s.topic, s.partition))
            if p is None:
                results.append(FetchResult(E.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            if not p.is_leader:
                results.append(FetchResult(E.NOT_LEADER_OR_FOLLOWER))
                continue
            if s.fetch_offset < p.log_start_offset or s.fetch_offset > p.log_end_offset:
                results.append(FetchResult(E.OFFSET_OUT_OF_RANGE, p.high_watermark, p.log_start_offset))
                continue
            # fetch.max.bytes caps the response, but the first batch always goes out (KIP-74).
            budget = min(s.max_bytes, max_bytes - total) if total else s.max_bytes
            try:
                data = p.read(s.fetch_offset, max(budget, 0), committed) if budget > 0 or not total else b""
            except KafkaStorageError:
                results.append(FetchResult(E.KAFKA_STORAGE_ERROR))
                continue
            total += len(data)
            results.append(FetchResult(E.NONE, p.high_watermark, p.log_start_offset, data))
        return results, total

    async def fetch_messages(self, specs: list[FetchSpec], max_wait_ms: int, min_bytes: int, max_bytes: int,
                             committed: bool) -> list[FetchResult]:
        deadline = self.rt.monotonic_ms() + max(0, max_wait_ms)
        while True:
            results, total = self.read_once(specs, max_bytes, committed)
            remaining = deadline - self.rt.monotonic_ms()
            if total >= max(min_bytes, 1) or remaining <= 0 or any(r.error_code for r in results):
                return results
            await self._wait_for_data(specs, remaining)

    async def _wait_for_data(self, specs: list[FetchSpec], timeout_ms: float) -> None:
        fut = self.rt.future()
        waiting = [p for s in specs if (p := self.partitions.get((s.topic, s.partition))) is not None]
        for p in waiting:
            p.add_waiter(fut)
        try:
            await self.rt.wait_first([fut], timeout_ms)
        finally:
            for p in waiting:
                p.remove_waiter(fut)

    async def shutdown(self) -> None:
        """Flush and close every log, write the checkpoints and the clean-shutdown marker."""
        assert self.log_manager is not None
        await self.log_manager.shutdown()
