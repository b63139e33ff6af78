"""Workload clients: producers and consumers built on kafkasim's own client, recording a
Jepsen-style history. The same coroutines run in the simulated world (the scenario runner) and
against a real broker (`kafkasim load`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from kafkasim.client.consumer import Consumer, ConsumerConfig
from kafkasim.client.producer import Producer, ProducerConfig, RecordMetadata
from kafkasim.harness.scenario import ConsumerSpec, ProducerSpec
from kafkasim.protocol import errors as E
from kafkasim.runtime.api import NodeRuntime


@dataclass
class Send:
    process: str
    value: str
    key: Optional[str]
    invoke_ms: float
    complete_ms: float = -1.0
    ok: Optional[bool] = None   # None: no answer (info)
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


@dataclass
class History:
    sends: list[Send] = field(default_factory=list)
    polls: list[Poll] = field(default_factory=list)
    producers_done: int = 0

    def acked(self) -> list[Send]:
        return [s for s in self.sends if s.ok]


def make_value(process: str, i: int, size: int) -> bytes:
    head = f"{process}-{i}".encode()
    return head + b"." * max(0, size - len(head))


async def run_producer(rt: NodeRuntime, bootstrap: str, topic: str, spec: ProducerSpec, process: str,
                       history: History) -> None:
    cfg = ProducerConfig(acks=spec.acks, linger_ms=spec.linger_ms, compression=spec.compression)
    producer = Producer(rt, bootstrap, cfg, client_id=process)
    await producer.start([topic])
    rng = rt.rng(f"workload/{process}")
    interval_ms = 1000.0 / spec.rate_per_s
    pending = []
    for i in range(spec.messages):
        key = f"k{rng.randint(0, spec.key_space - 1)}" if spec.key_space else None
        value = make_value(process, i, spec.value_bytes)
        send = Send(process, value.split(b".", 1)[0].decode(), key, rt.monotonic_ms())
        history.sends.append(send)
        fut = producer.send(topic, value, key.encode() if key else None)
        pending.append((send, fut))
        rt.spawn(_complete(rt, send, fut), name=f"{process} ack {i}")
        await rt.sleep(rng.expovariate(1.0 / interval_ms) if interval_ms > 0 else 0)
    for _, fut in pending:
        await fut
    history.producers_done += 1
    rt.trace("producer_done", process=process, sent=spec.messages)


async def _complete(rt: NodeRuntime, send: Send, fut: Any) -> None:
    md: RecordMetadata = await fut
    send.complete_ms = rt.monotonic_ms()
    send.ok = md.error_code == E.NONE
    send.partition, send.offset, send.error = md.partition, md.offset, md.error_code
    rt.trace("send_complete", process=send.process, value=send.value, partition=md.partition,
             offset=md.offset, error=md.error_code)


async def run_consumer(rt: NodeRuntime, bootstrap: str, topic: str, spec: ConsumerSpec, process: str,
                       history: History, producers: int, idle_polls_after_done: int = 5) -> None:
    consumer = Consumer(rt, bootstrap, ConsumerConfig(fetch_max_wait_ms=spec.fetch_max_wait_ms), client_id=process)
    await consumer.assign_all(topic)
    idle = 0
    while idle < idle_polls_after_done:
        records = await consumer.poll()
        for r in records:
            value = (r.value or b"").split(b".", 1)[0].decode()
            history.polls.append(Poll(process, rt.monotonic_ms(), r.topic, r.partition, r.offset, value))
        if records:
            rt.trace("poll", process=process, records=len(records),
                     first=[records[0].partition, records[0].offset], last=[records[-1].partition, records[-1].offset])
        done = history.producers_done >= producers and all(s.ok is not None for s in history.sends)
        idle = idle + 1 if (done and not records) else 0
    rt.trace("consumer_done", process=process, polled=len([p for p in history.polls if p.process == process]))
