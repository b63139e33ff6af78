"""kafkasim driver for aiokafka (protocol: ../README.md). The asyncio loop runs in a background
thread so that group members keep heartbeating between commands."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from typing import Any, Optional

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import pyloop  # noqa: E402

import aiokafka  # noqa: E402
import aiokafka.codec  # noqa: E402
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition  # noqa: E402

ARGS = pyloop.parse_args()
CODECS = ["none"] + [c for c, ok in (("gzip", aiokafka.codec.has_gzip()), ("snappy", aiokafka.codec.has_snappy()),
                                     ("lz4", aiokafka.codec.has_lz4()), ("zstd", aiokafka.codec.has_zstd())) if ok]
LOOP = asyncio.new_event_loop()
threading.Thread(target=LOOP.run_forever, daemon=True, name="aiokafka-loop").start()


def run(coro: Any) -> Any:
    return asyncio.run_coroutine_threadsafe(coro, LOOP).result()


class Consumer:
    def __init__(self, topic: str, group: Optional[str]) -> None:
        self.topic, self.group = topic, group
        self.returned: dict[int, int] = {}
        self.c: AIOKafkaConsumer

    async def start(self, cmd: dict[str, Any]) -> None:
        conf: dict[str, Any] = dict(bootstrap_servers=ARGS.bootstrap, client_id=ARGS.client_id, group_id=self.group,
                                    enable_auto_commit=False, auto_offset_reset=cmd.get("from", "earliest"))
        if self.group is not None:
            conf["session_timeout_ms"] = cmd.get("session_timeout_ms", 10000)
            conf["heartbeat_interval_ms"] = cmd.get("heartbeat_interval_ms", 1000)
        self.c = AIOKafkaConsumer(**conf)
        await self.c.start()
        if self.group is None:
            loop_deadline = pyloop.Deadline(cmd.get("timeout_ms", 10000))
            parts = None
            while not parts and not loop_deadline.expired():
                # aiokafka has no public metadata refresh for one topic; topics() does not update the
                # cluster view that partitions_for_topic reads.
                await self.c._client.force_metadata_update()
                parts = self.c.partitions_for_topic(self.topic)
                if not parts:
                    await asyncio.sleep(0.1)
            if not parts:
                raise RuntimeError(f"topic {self.topic!r} has no partitions in metadata")
            tps = [TopicPartition(self.topic, p) for p in sorted(parts)]
            self.c.assign(tps)
            if cmd.get("from", "earliest") == "earliest":
                await self.c.seek_to_beginning(*tps)
            else:
                await self.c.seek_to_end(*tps)
        else:
            self.c.subscribe([self.topic])

    def assignment(self) -> list[int]:
        return sorted(tp.partition for tp in self.c.assignment() if tp.topic == self.topic)

    async def consume(self, max_records: int, timeout_ms: int) -> list[list[Any]]:
        out: list[list[Any]] = []
        deadline = pyloop.Deadline(timeout_ms)
        while len(out) < max_records and not deadline.expired():
            batch = await self.c.getmany(timeout_ms=int(min(200, deadline.left_s() * 1000)) or 1,
                                         max_records=max_records - len(out))
            for tp, recs in sorted(batch.items(), key=lambda kv: kv[0].partition):
                for r in recs:
                    out.append([tp.partition, r.offset, pyloop.text(r.value)])
                    self.returned[tp.partition] = r.offset + 1
        return out

    async def commit(self) -> list[list[int]]:
        owned = set(self.assignment())
        offsets = {p: o for p, o in self.returned.items() if p in owned}
        if offsets:
            await self.c.commit({TopicPartition(self.topic, p): o for p, o in offsets.items()})
        return [[p, o] for p, o in sorted(offsets.items())]


PRODUCERS: dict[tuple, AIOKafkaProducer] = {}
CONSUMERS: dict[tuple, Consumer] = {}


async def producer_for(cmd: dict[str, Any]) -> AIOKafkaProducer:
    key = (str(cmd.get("acks")), cmd.get("compression", "none"), cmd.get("idempotent"))
    if key not in PRODUCERS:
        conf: dict[str, Any] = dict(bootstrap_servers=ARGS.bootstrap, client_id=ARGS.client_id)
        if cmd.get("acks") is not None:
            conf["acks"] = pyloop.acks_of(cmd)
        if cmd.get("compression", "none") != "none":
            conf["compression_type"] = cmd["compression"]
        if cmd.get("idempotent") is not None:
            conf["enable_idempotence"] = bool(cmd["idempotent"])
        p = AIOKafkaProducer(**conf)
        await p.start()
        PRODUCERS[key] = p
    return PRODUCERS[key]


async def _produce(cmd: dict[str, Any]) -> dict[str, Any]:
    p = await producer_for(cmd)
    futures = []
    for i in range(int(cmd["count"])):
        v = pyloop.value_of(cmd["prefix"], i)
        k = pyloop.key_of(cmd.get("key_prefix"), i)
        futures.append((v, await p.send(cmd["topic"], value=v.encode(), key=None if k is None else k.encode(),
                                        partition=cmd.get("partition"))))
    acked: list[list[Any]] = []
    errors: list[str] = []
    timeout_s = cmd.get("timeout_ms", 30000) / 1000
    for v, f in futures:
        try:
            md = await asyncio.wait_for(asyncio.shield(f), timeout_s)
            if md is None:  # acks=0: aiokafka resolves the future with no metadata
                acked.append([cmd.get("partition", -1), -1, v])
            else:
                acked.append([md.partition, md.offset, v])
        except Exception as exc:  # noqa: BLE001 - per-record failure is data
            pyloop.note_error(errors, exc)
    return {"op": "produced", "acked": acked, "errors": errors}


async def _consume(cmd: dict[str, Any]) -> dict[str, Any]:
    key = (cmd["topic"], cmd.get("group"))
    if key not in CONSUMERS:
        c = Consumer(cmd["topic"], cmd.get("group"))
        await c.start(cmd)
        CONSUMERS[key] = c
    c = CONSUMERS[key]
    recs = await c.consume(int(cmd.get("max", 1 << 30)), int(cmd.get("timeout_ms", 10000)))
    reply: dict[str, Any] = {"op": "consumed", "records": recs, "assignment": c.assignment()}
    if cmd.get("commit") and c.group is not None:
        reply["committed"] = await c.commit()
    return reply


async def _commit() -> dict[str, Any]:
    offsets: list[list[int]] = []
    for c in CONSUMERS.values():
        if c.group is not None:
            offsets += await c.commit()
    return {"op": "committed", "offsets": offsets}


async def _close() -> None:
    for c in CONSUMERS.values():
        await c.c.stop()
    for p in PRODUCERS.values():
        await p.stop()


def hello(cmd: dict[str, Any]) -> dict[str, Any]:
    return {"op": "hello", "client": "aiokafka", "version": aiokafka.__version__, "language": "python",
            "codecs": CODECS, "default_idempotent": False}


pyloop.serve({"hello": hello,
              "produce": lambda cmd: run(_produce(cmd)),
              "consume": lambda cmd: run(_consume(cmd)),
              "commit": lambda cmd: run(_commit())},
             lambda: run(_close()))
