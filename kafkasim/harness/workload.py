"""Workload clients: producers and consumers built on kafkasim's own client, recording a
Jepsen-style history. The same coroutines run in the simulated world (the scenario runner) and
against a real broker (`kafkasim load`). Consumer-group members and their churn are in
group_workload.py; their history records (assignments, commits, OffsetFetch answers, membership
events) are defined here with the rest of the history."""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from kafkasim.client.consumer import Consumer, ConsumerConfig
from kafkasim.client.producer import Producer, ProducerConfig, RecordMetadata
from kafkasim.harness.scenario import ConsumerSpec, ProducerSpec
from kafkasim.protocol import errors as E
from kafkasim.runtime.api import NodeRuntime


@dataclass
class Send:
    process: str
    value: str
    key: str | None
    invoke_ms: float
    complete_ms: float = -1.0
    ok: bool | None = None   # None: no answer (info)
    partition: int = -1
    offset: int = -1
    error: int = 0


@dataclass
class Poll:
    process: str
    at_ms: float
    topic: str
    partition: int
    offset: int
    value: str
    member_id: str = ""   # group members: the member and generation the fetch was made in
    generation: int = -1
    group: str = ""


@dataclass
class Assignment:
    """A group member completed a rebalance: its generation and the partitions assigned."""
    group: str
    process: str
    member_id: str
    generation: int
    partitions: list[int]
    at_ms: float


@dataclass
class Commit:
    group: str
    process: str
    member_id: str
    generation: int
    offsets: dict[int, int]        # partition -> committed offset (the next one to read)
    invoke_ms: float
    complete_ms: float = -1.0
    acked: bool | None = None   # True: the broker answered NONE for every partition; None: no answer
    errors: dict[int, int] = field(default_factory=dict)


@dataclass
class OffsetRead:
    """An OffsetFetch answer: the group's committed offsets (-1: none) as the broker reported them."""
    group: str
    process: str
    sent_ms: float
    at_ms: float
    offsets: dict[int, int]


@dataclass
class MemberEvent:
    group: str
    process: str
    kind: str          # start | leave | crash | restart | done
    at_ms: float
    member_id: str = ""


@dataclass
class TxnWrite:
    topic: str
    partition: int
    offset: int          # -1: not known (the produce failed or never happened)
    value: str


@dataclass
class Txn:
    """One transaction of a transactional producer (txn_workload.py). `outcome`: committed (EndTxn
    commit answered NONE), aborted (EndTxn abort answered, or the producer was fenced before it
    asked to commit: the coordinator aborts a fenced producer's open transaction), unknown (a
    commit without a definite answer). `reads`: the input records a pipeline copier consumed in it."""
    id: str
    process: str
    transactional_id: str
    producer_id: int
    epoch: int
    invoke_ms: float
    intent: str = "commit"          # commit | abort (the workload's choice)
    writes: list[TxnWrite] = field(default_factory=list)
    reads: list[TxnWrite] = field(default_factory=list)
    offsets: dict[str, int] = field(default_factory=dict)   # "topic-partition" -> offset sent to the txn
    end_invoke_ms: float = -1.0     # EndTxn sent (commit or abort)
    complete_ms: float = -1.0
    outcome: str = "pending"        # pending | committed | aborted | unknown
    error: str = ""


@dataclass
class History:
    sends: list[Send] = field(default_factory=list)
    polls: list[Poll] = field(default_factory=list)
    # Records a consumer fetched in a batch whose header offsets were corrupt and skipped as
    # Kafka's consumer does (Consumer.take_misplaced), at the offsets the header claimed.
    misplaced: list[Poll] = field(default_factory=list)
    producers_done: int = 0
    assignments: list[Assignment] = field(default_factory=list)
    commits: list[Commit] = field(default_factory=list)
    offset_reads: list[OffsetRead] = field(default_factory=list)
    member_events: list[MemberEvent] = field(default_factory=list)
    # Transactional workloads (txn_workload.py): transactions, and the reads of read_committed
    # consumers (kept apart from `polls`: markers and aborted records leave gaps in the offsets).
    txns: list[Txn] = field(default_factory=list)
    txn_polls: list[Poll] = field(default_factory=list)
    final_offsets: dict[str, int] = field(default_factory=dict)  # pipeline group: OffsetFetch at the end

    def sends_resolved(self, producers: int) -> bool:
        return self.producers_done >= producers and all(s.ok is not None for s in self.sends)

    def acked(self) -> list[Send]:
        return [s for s in self.sends if s.ok]


def make_value(process: str, i: int, size: int) -> bytes:
    head = f"{process}-{i}".encode()
    return head + b"." * max(0, size - len(head))


class KeyChooser:
    """Keys k0..k{N-1}: uniform (one randint per key, as before), or Zipf with exponent 1 —
    key i has weight 1/(i+1), drawn by inverting the cumulative weights with one random()."""

    def __init__(self, spec: ProducerSpec, rng: Any) -> None:
        self.spec, self.rng = spec, rng
        self._cumulative = list(accumulate(1.0 / (i + 1) for i in range(spec.key_space))) \
            if spec.key_distribution == "zipf" else []

    def next(self) -> str | None:
        if not self.spec.key_space:
            return None
        if not self._cumulative:
            return f"k{self.rng.randint(0, self.spec.key_space - 1)}"
        x = self.rng.random() * self._cumulative[-1]
        return f"k{min(bisect_left(self._cumulative, x), self.spec.key_space - 1)}"


def value_size(spec: ProducerSpec, rng: Any) -> int:
    if spec.value_bytes_max > spec.value_bytes:
        return int(rng.randint(spec.value_bytes, spec.value_bytes_max))
    return spec.value_bytes


async def run_producer(rt: NodeRuntime, bootstrap: str, topic: str, spec: ProducerSpec, process: str,
                       history: History) -> None:
    cfg = ProducerConfig(acks=spec.acks, linger_ms=spec.linger_ms, compression=spec.compression,
                         idempotence=spec.idempotence, request_timeout_ms=spec.request_timeout_ms)
    producer = Producer(rt, bootstrap, cfg, client_id=process)
    await producer.start([topic])
    rng = rt.rng(f"workload/{process}")
    keys = KeyChooser(spec, rng)
    interval_ms = 1000.0 / spec.rate_per_s
    pending = []
    for i in range(spec.messages):
        key = keys.next()
        value = make_value(process, i, value_size(spec, rng))
        send = Send(process, value.split(b".", 1)[0].decode(), key, rt.monotonic_ms())
        history.sends.append(send)
        fut = producer.send(topic, value, key.encode() if key else None)
        pending.append((send, fut))
        rt.spawn(_complete(rt, send, fut), name=f"{process} ack {i}")
        await rt.sleep(rng.expovariate(1.0 / interval_ms) if interval_ms > 0 else 0)
    for _, fut in pending:
        await fut
    history.producers_done += 1
    if spec.idempotence:
        rt.trace("producer_done", process=process, sent=spec.messages, retries=producer.stats.retries,
                 epoch_bumps=producer.stats.epoch_bumps)
    else:
        rt.trace("producer_done", process=process, sent=spec.messages)


async def _complete(rt: NodeRuntime, send: Send, fut: Any) -> None:
    md: RecordMetadata = await fut
    send.complete_ms = rt.monotonic_ms()
    send.ok = md.error_code == E.NONE
    send.partition, send.offset, send.error = md.partition, md.offset, md.error_code
    rt.trace("send_complete", process=send.process, value=send.value, partition=md.partition,
             offset=md.offset, error=md.error_code)


def behind_acked(history: History, topic: str, positions: dict[tuple[str, int], int | None]) -> bool:
    """Whether some acknowledged record lies at or past the consumer's position in its partition
    (a partition not yet positioned is behind all of them)."""
    last: dict[int, int] = {}
    for s in history.sends:
        if s.ok and s.offset >= 0:
            last[s.partition] = max(last.get(s.partition, -1), s.offset)
    return any((pos := positions.get((topic, p))) is None or offset >= pos for p, offset in last.items())


async def run_consumer(rt: NodeRuntime, bootstrap: str, topic: str, spec: ConsumerSpec, process: str,
                       history: History, producers: int, idle_polls_after_done: int = 5,
                       patience: int = 60) -> None:
    """Read every partition from the earliest offset until the producers are done and either
    `idle_polls_after_done` polls in a row came back empty with every acknowledged record behind
    the consumer's positions, or `patience` did (an acknowledged record it never reads is for
    the checkers to report). The patience covers a leader that was cut off and has not yet
    learned it was replaced: in ZooKeeper mode it answers fetches from its old log, without an
    error, until the controller's LeaderAndIsr reaches it (partition-isolating-leader seed 54)."""
    consumer = Consumer(rt, bootstrap, ConsumerConfig(fetch_max_wait_ms=spec.fetch_max_wait_ms), client_id=process)
    await consumer.assign_all(topic)
    idle = 0
    while idle < patience and (idle < idle_polls_after_done or behind_acked(history, topic, consumer.positions)):
        records = await consumer.poll()
        for r in records:
            value = (r.value or b"").split(b".", 1)[0].decode()
            history.polls.append(Poll(process, rt.monotonic_ms(), r.topic, r.partition, r.offset, value))
        for r in consumer.take_misplaced():
            value = (r.value or b"").split(b".", 1)[0].decode()
            history.misplaced.append(Poll(process, rt.monotonic_ms(), r.topic, r.partition, r.offset, value))
        if records:
            rt.trace("poll", process=process, records=len(records),
                     first=[records[0].partition, records[0].offset], last=[records[-1].partition, records[-1].offset])
        done = history.sends_resolved(producers)
        idle = idle + 1 if (done and not records) else 0
    rt.trace("consumer_done", process=process, polled=len([p for p in history.polls if p.process == process]))
