"""kafkasim driver for kafka-python (protocol: ../README.md)."""

from __future__ import annotations

import os
import sys
from typing import Any, Optional

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import pyloop  # noqa: E402

import kafka  # noqa: E402
import kafka.codec  # noqa: E402
from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.structs import OffsetAndMetadata  # noqa: E402

ARGS = pyloop.parse_args()


def _security(sec: dict[str, Any]) -> dict[str, Any]:
    """KAFKASIM_CLIENT_SECURITY as kafka-python's arguments."""
    names = {"protocol": "security_protocol", "mechanism": "sasl_mechanism", "username": "sasl_plain_username",
             "password": "sasl_plain_password", "ca": "ssl_cafile", "cert": "ssl_certfile", "key": "ssl_keyfile"}
    return {names[k]: v for k, v in sec.items() if k in names}


SECURITY = _security(pyloop.security())
CODECS = ["none", "gzip"] + [c for c, ok in (("snappy", kafka.codec.has_snappy()), ("lz4", kafka.codec.has_lz4()),
                                              ("zstd", kafka.codec.has_zstd())) if ok]


class Consumer:
    def __init__(self, topic: str, group: Optional[str], cmd: dict[str, Any]) -> None:
        self.topic, self.group = topic, group
        conf: dict[str, Any] = dict(bootstrap_servers=ARGS.bootstrap, **SECURITY, client_id=ARGS.client_id,
                                    enable_auto_commit=False, auto_offset_reset=cmd.get("from", "earliest"),
                                    group_id=group, isolation_level=cmd.get("isolation") or "read_uncommitted")
        if group is not None:
            conf["session_timeout_ms"] = cmd.get("session_timeout_ms", 10000)
            conf["heartbeat_interval_ms"] = cmd.get("heartbeat_interval_ms", 1000)
        self.c = KafkaConsumer(**conf)
        self.returned: dict[int, int] = {}  # partition -> offset after the last record handed back
        if group is None:
            deadline = pyloop.Deadline(cmd.get("timeout_ms", 10000))
            parts = self.c.partitions_for_topic(topic)
            while not parts and not deadline.expired():
                self.c.poll(timeout_ms=100)
                parts = self.c.partitions_for_topic(topic)
            if not parts:
                raise RuntimeError(f"topic {topic!r} has no partitions in metadata")
            tps = [TopicPartition(topic, p) for p in sorted(parts)]
            self.c.assign(tps)
            if cmd.get("from", "earliest") == "earliest":
                self.c.seek_to_beginning(*tps)
            else:
                self.c.seek_to_end(*tps)
        else:
            self.c.subscribe([topic])

    def assignment(self) -> list[int]:
        return sorted(tp.partition for tp in self.c.assignment() if tp.topic == self.topic)

    def consume(self, max_records: int, timeout_ms: int) -> list[list[Any]]:
        out: list[list[Any]] = []
        deadline = pyloop.Deadline(timeout_ms)
        while len(out) < max_records and not deadline.expired():
            batch = self.c.poll(timeout_ms=int(min(200, deadline.left_s() * 1000)) or 1,
                                max_records=max_records - len(out))
            for tp, recs in sorted(batch.items(), key=lambda kv: kv[0].partition):
                for r in recs:
                    out.append([tp.partition, r.offset, pyloop.text(r.value)])
                    self.returned[tp.partition] = r.offset + 1
        return out

    def commit(self) -> list[list[int]]:
        owned = set(self.assignment())
        offsets = {p: o for p, o in self.returned.items() if p in owned}
        if offsets:
            self.c.commit({TopicPartition(self.topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})
        return [[p, o] for p, o in sorted(offsets.items())]


PRODUCERS: dict[tuple, KafkaProducer] = {}
CONSUMERS: dict[tuple, Consumer] = {}


def producer_for(cmd: dict[str, Any]) -> KafkaProducer:
    txn_id = cmd.get("transactional_id")
    key = (str(cmd.get("acks")), cmd.get("compression", "none"), cmd.get("idempotent"), txn_id)
    if key not in PRODUCERS:
        conf: dict[str, Any] = dict(bootstrap_servers=ARGS.bootstrap, **SECURITY, client_id=ARGS.client_id)
        if txn_id is not None:
            conf["transactional_id"] = txn_id
        if "acks" in cmd and cmd["acks"] is not None:
            conf["acks"] = pyloop.acks_of(cmd)
        if cmd.get("compression", "none") != "none":
            conf["compression_type"] = cmd["compression"]
        if cmd.get("idempotent") is not None:
            conf["enable_idempotence"] = bool(cmd["idempotent"])
        producer = KafkaProducer(**conf)
        if txn_id is not None:
            producer.init_transactions()
        PRODUCERS[key] = producer
    return PRODUCERS[key]


def hello(cmd: dict[str, Any]) -> dict[str, Any]:
    return {"op": "hello", "client": "kafka-python", "version": kafka.__version__, "language": "python",
            "codecs": CODECS, "default_idempotent": True}


def produce(cmd: dict[str, Any]) -> dict[str, Any]:
    p = producer_for(cmd)
    txn = cmd.get("transactional_id") is not None
    if txn:
        p.begin_transaction()
    futures = []
    for i in range(int(cmd["count"])):
        v = pyloop.value_of(cmd["prefix"], i)
        k = pyloop.key_of(cmd.get("key_prefix"), i)
        futures.append((v, p.send(cmd["topic"], value=v.encode(), key=None if k is None else k.encode(),
                                  partition=cmd.get("partition"))))
    p.flush(timeout=cmd.get("timeout_ms", 30000) / 1000)
    acked: list[list[Any]] = []
    errors: list[str] = []
    for v, f in futures:
        try:
            md = f.get(timeout=0.1)
            acked.append([md.partition, md.offset, v])
        except Exception as exc:  # noqa: BLE001 - per-record failure is data
            pyloop.note_error(errors, exc)
    reply: dict[str, Any] = {"op": "produced", "acked": acked, "errors": errors}
    if txn:
        if cmd.get("transaction", "commit") == "commit" and not errors:
            p.commit_transaction()
            reply["transaction"] = "committed"
        else:
            p.abort_transaction()
            reply["transaction"] = "aborted"
    return reply


def consume(cmd: dict[str, Any]) -> dict[str, Any]:
    key = (cmd["topic"], cmd.get("group"), cmd.get("isolation"))
    if key not in CONSUMERS:
        CONSUMERS[key] = Consumer(cmd["topic"], cmd.get("group"), cmd)
    c = CONSUMERS[key]
    recs = c.consume(int(cmd.get("max", 1 << 30)), int(cmd.get("timeout_ms", 10000)))
    reply: dict[str, Any] = {"op": "consumed", "records": recs, "assignment": c.assignment()}
    if cmd.get("commit") and c.group is not None:
        reply["committed"] = c.commit()
    return reply


def commit(cmd: dict[str, Any]) -> dict[str, Any]:
    offsets: list[list[int]] = []
    for c in CONSUMERS.values():
        if c.group is not None:
            offsets += c.commit()
    return {"op": "committed", "offsets": offsets}


class Pipeline:
    """consume-transform-produce: a read_committed member of `group` on `input`, a transactional
    producer writing each input value to the same partition of `output`, with the consumed offsets
    in the same transaction (send_offsets_to_transaction with the consumer's group metadata)."""

    def __init__(self, cmd: dict[str, Any]) -> None:
        self.input, self.output = cmd["input"], cmd["output"]
        self.transactions = 0
        self.c = KafkaConsumer(bootstrap_servers=ARGS.bootstrap, **SECURITY, client_id=ARGS.client_id, group_id=cmd["group"],
                               enable_auto_commit=False, auto_offset_reset="earliest",
                               isolation_level="read_committed",
                               session_timeout_ms=cmd.get("session_timeout_ms", 10000),
                               heartbeat_interval_ms=cmd.get("heartbeat_interval_ms", 1000))
        self.c.subscribe([self.input])
        self.txn_id = cmd["transactional_id"]
        self.p = self.new_producer()

    def new_producer(self) -> KafkaProducer:
        p = KafkaProducer(bootstrap_servers=ARGS.bootstrap, **SECURITY, client_id=ARGS.client_id, transactional_id=self.txn_id)
        p.init_transactions()
        return p

    def assignment(self) -> list[int]:
        return sorted(tp.partition for tp in self.c.assignment() if tp.topic == self.input)

    def step(self, batch: int, timeout_s: float, errors: list[str], abort_every: int) -> tuple[list[list[Any]], bool]:
        polled = self.c.poll(timeout_ms=max(1, int(timeout_s * 1000)), max_records=batch)
        rows = [[tp.partition, r.offset, pyloop.text(r.value)] for tp, recs in sorted(polled.items()) for r in recs]
        if not rows:
            return rows, False
        offsets = {tp: OffsetAndMetadata(recs[-1].offset + 1, "", -1) for tp, recs in polled.items() if recs}
        self.transactions += 1
        try:
            self.p.begin_transaction()
            for p, _, v in rows:
                self.p.send(self.output, value=v.encode(), partition=p)
            self.p.send_offsets_to_transaction(offsets, self.c.group_metadata())
            if abort_every and self.transactions % abort_every == 0:
                # On purpose: its output must never be read. Flushed first, so that the aborted
                # records are in the log (an abort drops what the producer has not sent).
                self.p.flush(30)
                self.abort_and_rewind(errors)
                return rows, False
            self.p.commit_transaction()
            return rows, True
        except Exception as exc:  # noqa: BLE001 - abort, rewind, go on
            pyloop.note_error(errors, exc)
            self.abort_and_rewind(errors)
            return rows, False

    def abort_and_rewind(self, errors: list[str]) -> None:
        try:
            self.p.abort_transaction()
        except Exception as exc:  # noqa: BLE001 - fatal (fenced): start a new producer
            pyloop.note_error(errors, exc)
            self.p.close(timeout=5)
            self.p = self.new_producer()
        for tp in self.c.assignment():
            committed = self.c.committed(tp)
            self.c.seek(tp, committed if committed is not None else 0)

    def close(self) -> None:
        self.c.close()
        self.p.close(timeout=10)


PIPELINES: dict[tuple, Pipeline] = {}


def transform(cmd: dict[str, Any]) -> dict[str, Any]:
    key = (cmd["input"], cmd["output"], cmd["group"], cmd["transactional_id"])
    if key not in PIPELINES:
        PIPELINES[key] = Pipeline(cmd)
    pl = PIPELINES[key]
    return pyloop.run_transform(cmd, pl.step, pl.assignment)


def close() -> None:
    for pl in PIPELINES.values():
        pl.close()
    for c in CONSUMERS.values():
        c.c.close()
    for p in PRODUCERS.values():
        p.close(timeout=10)


pyloop.serve({"hello": hello, "produce": produce, "consume": consume, "commit": commit, "transform": transform},
             close)
