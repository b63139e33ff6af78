"""Producer: kafkasim's own Kafka producer over the real wire protocol.

Per partition, records queue in an accumulator; one sender task per partition lingers
`linger_ms`, builds a record batch v2 of up to `batch_size` bytes and sends it with at most one
request in flight (so retries cannot reorder a partition). Retriable errors (leader moves,
timeouts, dropped connections) refresh metadata and retry until `delivery.timeout.ms`; a retried
batch may be written twice without idempotence, which is exactly the anomaly the checkers
look for. Keys are partitioned with Kafka's murmur2 so keyed data lands where Java's client
would put it.

Idempotence (`enable.idempotence`, Kafka's TransactionManager for a non-transactional
producer): `start` gets a producer id and epoch with InitProducerId from any broker (retrying
COORDINATOR_NOT_AVAILABLE and unreachable brokers). Each partition numbers its records from 0
under the current (producer id, epoch); a batch is stamped with (id, epoch, base sequence) once
and a retry resends exactly those bytes, so a broker that already appended it answers the
original offsets (or DUPLICATE_SEQUENCE_NUMBER, also a success) instead of appending it twice.
One batch in flight per partition keeps the sequences gap-free on the wire. As Kafka's client
does for an idempotent-only producer (KIP-360), OUT_OF_ORDER_SEQUENCE_NUMBER and
UNKNOWN_PRODUCER_ID (the broker lost this producer's state, e.g. the records were truncated)
bump the epoch locally and restart that partition's sequences at 0, then retry the batch
restamped; a batch that finally fails also bumps the epoch, because its sequence may or may
not have been written (Java's "unresolved sequence" with one batch in flight). Other
partitions move to the new epoch at their next batch (`maybeUpdateProducerIdAndEpoch`). At
epoch 32767 the producer asks InitProducerId for a new id instead.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from kafkasim.client.cluster import ClientCluster
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.init_producer_id import InitProducerIdRequest
from kafkasim.protocol.messages.produce import ProduceRequest
from kafkasim.records.batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, Record, build_batch
from kafkasim.records.compression import CompressionType
from kafkasim.runtime.api import Future, NetworkError, NodeRuntime, RuntimeTimeout

RETRIABLE = {E.NOT_LEADER_OR_FOLLOWER, E.LEADER_NOT_AVAILABLE, E.UNKNOWN_TOPIC_OR_PARTITION, E.REQUEST_TIMED_OUT,
             E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.NETWORK_EXCEPTION,
             E.KAFKA_STORAGE_ERROR, E.CORRUPT_MESSAGE}
# The broker lost (or never had) the sequences this batch follows: bump the epoch, resequence.
RESEQUENCE = {E.OUT_OF_ORDER_SEQUENCE_NUMBER, E.UNKNOWN_PRODUCER_ID}
INIT_PRODUCER_ID_RETRIABLE = {E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS,
                              E.CONCURRENT_TRANSACTIONS, E.REQUEST_TIMED_OUT, E.NETWORK_EXCEPTION}
MAX_PRODUCER_EPOCH = 32767


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


class ProducerFatalError(Exception):
    pass


@dataclass(init=False)
class RecordMetadata:
    topic: str
    partition: int
    offset: int
    error_code: int

    # Written out (init=False; its defaults are the only ones) so that mypyc compiles it: a
    # dataclass-made __init__ runs interpreted.
    def __init__(self, topic: str, partition: int, offset: int, error_code: int = E.NONE) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.error_code = error_code


@dataclass(init=False)
class _Pending:
    record: Record
    future: Future[Any]
    size: int

    # Written out (init=False; its defaults are the only ones) so that mypyc compiles it: a
    # dataclass-made __init__ runs interpreted.
    def __init__(self, record: Record, future: Future[Any], size: int) -> None:
        self.record = record
        self.future = future
        self.size = size


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
    idempotence: bool = False      # enable.idempotence (Kafka's default is true since 3.0; off keeps old runs)


@dataclass
class _SequenceState:
    """A partition's sequence numbers and the (producer id, epoch) they count under."""
    producer_id: int = NO_PRODUCER_ID
    epoch: int = NO_PRODUCER_EPOCH
    next_sequence: int = 0


@dataclass
class ProducerStats:
    retries: int = 0            # produce attempts after the first, all batches
    epoch_bumps: int = 0        # local epoch bumps (KIP-360) and re-inits
    duplicate_answers: int = 0  # DUPLICATE_SEQUENCE_NUMBER answers taken as success


class Producer:
    def __init__(self, rt: NodeRuntime, bootstrap: str, config: ProducerConfig | None = None,
                 client_id: str = "kafkasim-producer") -> None:
        self.rt = rt
        self.config = config or ProducerConfig()
        self.cluster = ClientCluster(rt, bootstrap, client_id, self.config.request_timeout_ms)
        self._queues: dict[tuple[str, int], deque[_Pending]] = {}
        self._wakeups: dict[tuple[str, int], Future[Any]] = {}
        self._sticky = 0
        self.codec = CompressionType[self.config.compression.upper()]
        self.producer_id, self.epoch = NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        self._sequences: dict[tuple[str, int], _SequenceState] = {}
        self.stats = ProducerStats()

    async def start(self, topics: list[str]) -> None:
        for t in topics:
            await self.cluster.wait_for_topic(t)
        if self.config.idempotence:
            await self.init_producer_id()

    async def init_producer_id(self, attempts: int = 600) -> None:
        """InitProducerId (no transactional id) from any broker until one answers."""
        for _ in range(attempts):
            try:
                conn = await self.cluster.any_connection()
                init = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1)
                resp = await conn.request_within(init, self.config.request_timeout_ms)
                if resp.error_code == E.NONE:
                    self.producer_id, self.epoch = int(resp.producer_id), int(resp.producer_epoch)
                    self.rt.trace("producer_id", client=self.cluster.client_id, producer_id=self.producer_id,
                                  epoch=self.epoch)
                    return
                if resp.error_code not in INIT_PRODUCER_ID_RETRIABLE:
                    raise ProducerFatalError(f"InitProducerId failed: {E.error_name(resp.error_code)}")
            except (NetworkError, RuntimeTimeout):
                pass
            await self.rt.sleep(self.config.retry_backoff_ms)
        raise ProducerFatalError(f"InitProducerId: no answer after {attempts} attempts")

    def send(self, topic: str, value: bytes | None, key: bytes | None = None,
             partition: int | None = None) -> Future[Any]:
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
            if self.config.linger_ms > 0 and not self.rt.buggify("producer.linger.skip"):  # as linger.ms=0
                await self.rt.sleep(self.config.linger_ms)
            batch: list[_Pending] = []
            size = 0
            limit = 1 if self.rt.buggify("producer.batch.small") else self.config.batch_size  # as batch.size=1
            while q and (not batch or size + q[0].size <= limit):
                item = q.popleft()
                batch.append(item)
                size += item.size
            await self._send_batch(tp, batch)

    async def _send_batch(self, tp: tuple[str, int], batch: list[_Pending]) -> None:
        if self.config.idempotence:
            await self._send_idempotent_batch(tp, batch)
            return
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

    # ---------------------------------------------------------------- idempotence
    def _stamp(self, tp: tuple[str, int], batch: list[_Pending]) -> tuple[bytes, _SequenceState]:
        """The batch's bytes under the partition's next sequence; a partition whose sequences
        belong to an older (id, epoch) starts again at 0 (nothing of it is in flight here)."""
        seq = self._sequences.setdefault(tp, _SequenceState())
        if (seq.producer_id, seq.epoch) != (self.producer_id, self.epoch):
            self._sequences[tp] = seq = _SequenceState(self.producer_id, self.epoch, 0)
        stamped = _SequenceState(seq.producer_id, seq.epoch, seq.next_sequence)
        records = build_batch([b.record for b in batch], compression=self.codec, producer_id=stamped.producer_id,
                              producer_epoch=stamped.epoch, base_sequence=stamped.next_sequence)
        return records, stamped

    async def _bump_epoch(self, tp: tuple[str, int], stamped: _SequenceState, code: int) -> None:
        """Move the producer past the epoch the failed batch was stamped with (once per epoch,
        however many partitions report it), so no (epoch, sequence) pair is ever reused."""
        if (stamped.producer_id, stamped.epoch) == (self.producer_id, self.epoch):
            self.stats.epoch_bumps += 1
            if self.epoch >= MAX_PRODUCER_EPOCH:
                await self.init_producer_id()
            else:
                self.epoch += 1
            self.rt.trace("producer_epoch_bump", client=self.cluster.client_id, topic=tp[0], partition=tp[1],
                          error=code, producer_id=self.producer_id, epoch=self.epoch)

    async def _send_idempotent_batch(self, tp: tuple[str, int], batch: list[_Pending]) -> None:
        topic, partition = tp
        records, stamped = self._stamp(tp, batch)
        deadline = self.rt.monotonic_ms() + self.config.delivery_timeout_ms
        attempt = 0
        while True:
            code, base = await self._produce_once(topic, partition, records)
            if code in (E.NONE, E.DUPLICATE_SEQUENCE_NUMBER):
                # DUPLICATE_SEQUENCE_NUMBER: an older broker's "already have it" — a success
                # whose offsets it does not say.
                if code == E.DUPLICATE_SEQUENCE_NUMBER:
                    self.stats.duplicate_answers += 1
                self._sequences[tp].next_sequence = stamped.next_sequence + len(batch)
                known = code == E.NONE and base >= 0
                for i, b in enumerate(batch):
                    b.future.set_result(RecordMetadata(topic, partition, base + i if known else -1))
                return
            attempt += 1
            expired = self.rt.monotonic_ms() >= deadline
            retriable = code in RETRIABLE or code in RESEQUENCE
            if not retriable or attempt > self.config.retries or expired:
                await self._bump_epoch(tp, stamped, code)  # the sequence may or may not be written
                for b in batch:
                    b.future.set_result(RecordMetadata(topic, partition, -1, code))
                return
            self.stats.retries += 1
            if code in RESEQUENCE:
                await self._bump_epoch(tp, stamped, code)
                records, stamped = self._stamp(tp, batch)
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
        req = ProduceRequest(transactional_id=None, acks=self.config.acks,
                             # buggify: a 1 ms produce timeout, so the broker answers REQUEST_TIMED_OUT while
                             # the ISR catches up and the idempotent producer retries what was written
                             timeout_ms=1 if self.config.idempotence and self.rt.buggify("producer.timeout.short")
                             else int(self.config.request_timeout_ms),
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
