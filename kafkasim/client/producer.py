"""Producer: kafkasim's own Kafka producer over the real wire protocol.

Per partition, records queue in an accumulator; one sender task per partition lingers
`linger_ms`, builds a record batch v2 of up to `batch_size` bytes and sends it with at most one
request in flight (so retries cannot reorder a partition). Retriable errors (leader moves,
timeouts, dropped connections) refresh metadata and retry until `delivery.timeout.ms`; a retried
batch may be written twice without idempotence, which is exactly the anomaly the checkers
look for. Keys are partitioned with Kafka's murmur2 so keyed data lands where Java's client
would put it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Optional

from kafkasim.client.cluster import ClientCluster
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.produce import ProduceRequest
from kafkasim.records.batch import Record, build_batch
from kafkasim.records.compression import CompressionType
from kafkasim.runtime.api import Future, NetworkError, NodeRuntime, RuntimeTimeout

RETRIABLE = {E.NOT_LEADER_OR_FOLLOWER, E.LEADER_NOT_AVAILABLE, E.UNKNOWN_TOPIC_OR_PARTITION, E.REQUEST_TIMED_OUT,
             E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.NETWORK_EXCEPTION,
             E.KAFKA_STORAGE_ERROR, E.CORRUPT_MESSAGE}


def murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2 (32-bit, seed 0x9747b28c), as a signed int32."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    tail = length % 4
    base = length - tail
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % partitions


@dataclass
class RecordMetadata:
    topic: str
    partition: int
    offset: int
    error_code: int = E.NONE


@dataclass
class _Pending:
    record: Record
    future: Future[Any]
    size: int


@dataclass
class ProducerConfig:
    acks: int = -1                 # acks
    linger_ms: float = 5.0         # linger.ms
    batch_size: int = 16384        # batch.size
    retries: int = 2**31 - 1       # retries (Kafka's default: retry until delivery.timeout.ms)
    delivery_timeout_ms: float = 120000  # delivery.timeout.ms
    retry_backoff_ms: float = 100  # retry.backoff.ms
    request_timeout_ms: float = 30000  # request.timeout.ms
    compression: str = "none"      # compression.type


class Producer:
    def __init__(self, rt: NodeRuntime, bootstrap: str, config: Optional[ProducerConfig] = None,
                 client_id: str = "kafkasim-producer") -> None:
        self.rt = rt
        self.config = config or ProducerConfig()
        self.cluster = ClientCluster(rt, bootstrap, client_id, self.config.request_timeout_ms)
        self._queues: dict[tuple[str, int], deque[_Pending]] = {}
        self._wakeups: dict[tuple[str, int], Future[Any]] = {}
        self._sticky = 0
        self.codec = CompressionType[self.config.compression.upper()]

    async def start(self, topics: list[str]) -> None:
        for t in topics:
            await self.cluster.wait_for_topic(t)

    def send(self, topic: str, value: Optional[bytes], key: Optional[bytes] = None,
             partition: Optional[int] = None) -> Future[Any]:
        n = self.cluster.partition_counts.get(topic)
        if n is None:
            raise ValueError(f"topic {topic} unknown to the producer; call start([...]) first")
        if partition is None:
            partition = partition_for_key(key, n) if key is not None else self._next_sticky(n)
        tp = (topic, partition)
        fut = self.rt.future()
        rec = Record(self.rt.now_ms(), key, value)
        q = self._queues.get(tp)
        if q is None:
            q = self._queues[tp] = deque()
            self.rt.spawn(self._sender(tp), name=f"producer {topic}-{partition}")
        q.append(_Pending(rec, fut, len(value or b"") + len(key or b"") + 16))
        w = self._wakeups.pop(tp, None)
        if w is not None:
            w.set_result(None)
        return fut

    def _next_sticky(self, n: int) -> int:
        self._sticky = (self._sticky + 1) % n
        return self._sticky

    async def _sender(self, tp: tuple[str, int]) -> None:
        q = self._queues[tp]
        while True:
            if not q:
                w = self._wakeups[tp] = self.rt.future()
                await w
            if self.config.linger_ms > 0:
                await self.rt.sleep(self.config.linger_ms)
            batch: list[_Pending] = []
            size = 0
            while q and (not batch or size + q[0].size <= self.config.batch_size):
                item = q.popleft()
                batch.append(item)
                size += item.size
            await self._send_batch(tp, batch)

    async def _send_batch(self, tp: tuple[str, int], batch: list[_Pending]) -> None:
        topic, partition = tp
        records = build_batch([b.record for b in batch], compression=self.codec)
        attempt = 0
        deadline = self.rt.monotonic_ms() + self.config.delivery_timeout_ms
        while True:
            code, base = await self._produce_once(topic, partition, records)
            if code == E.NONE:
                for i, b in enumerate(batch):
                    b.future.set_result(RecordMetadata(topic, partition, base + i if base >= 0 else -1))
                return
            attempt += 1
            expired = self.rt.monotonic_ms() >= deadline
            if code not in RETRIABLE or attempt > self.config.retries or expired:
                for b in batch:
                    b.future.set_result(RecordMetadata(topic, partition, -1, code))
                return
            await self.rt.sleep(self.config.retry_backoff_ms)
            try:
                await self.cluster.refresh_metadata([topic])
            except (NetworkError, RuntimeTimeout):
                pass

    async def _produce_once(self, topic: str, partition: int, records: bytes) -> tuple[int, int]:
        leader = self.cluster.leaders.get((topic, partition))
        if leader is None or leader.leader < 0 or leader.leader not in self.cluster.brokers:
            return E.LEADER_NOT_AVAILABLE, -1
        PD = ProduceRequest.TopicProduceData.PartitionProduceData
        req = ProduceRequest(transactional_id=None, acks=self.config.acks, timeout_ms=int(self.config.request_timeout_ms),
                             topic_data=[ProduceRequest.TopicProduceData(
                                 name=topic, partition_data=[PD(index=partition, records=records)])])
        try:
            conn = await self.cluster.broker_connection(leader.leader)
            if self.config.acks == 0:
                await conn.request(req, expect_response=False)
                return E.NONE, -1
            resp = await conn.request_within(req, self.config.request_timeout_ms)
        except RuntimeTimeout:
            return E.REQUEST_TIMED_OUT, -1
        except NetworkError:
            return E.NETWORK_EXCEPTION, -1
        pr = resp.responses[0].partition_responses[0]
        return pr.error_code, pr.base_offset

    def close(self) -> None:
        self.cluster.close()
