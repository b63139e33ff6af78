"""kafkasim driver for confluent-kafka-python / librdkafka (protocol: ../README.md)."""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Optional

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import pyloop  # noqa: E402

import confluent_kafka  # noqa: E402
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer as CKConsumer, KafkaException, Producer, TopicPartition  # noqa: E402,E501

ARGS = pyloop.parse_args()
SECURITY = pyloop.librdkafka_security(pyloop.security())   # KAFKASIM_CLIENT_SECURITY
CLIENT_ERRORS: list[str] = []  # librdkafka's error events (error_cb), reported with the next reply


def on_error(err: Any) -> None:
    pyloop.note_error(CLIENT_ERRORS, KafkaException(err))


CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


class Consumer:
    def __init__(self, topic: str, group: Optional[str], cmd: dict[str, Any]) -> None:
        self.topic, self.group = topic, group
        self.returned: dict[int, int] = {}
        conf: dict[str, Any] = {"bootstrap.servers": ARGS.bootstrap, **SECURITY, "client.id": ARGS.client_id, "error_cb": on_error,
                                "group.id": group if group is not None else f"{ARGS.client_id}-assign-only",
                                "enable.auto.commit": False, "auto.offset.reset": cmd.get("from", "earliest")}
        if cmd.get("isolation") is not None:
            conf["isolation.level"] = cmd["isolation"]
        if group is not None:
            conf.update({"session.timeout.ms": cmd.get("session_timeout_ms", 10000),
                         "heartbeat.interval.ms": cmd.get("heartbeat_interval_ms", 1000)})
        self.c = CKConsumer(conf)
        if group is None:
            deadline = pyloop.Deadline(cmd.get("timeout_ms", 10000))
            parts: list[int] = []
            while not parts and not deadline.expired():
                md = self.c.list_topics(topic, timeout=max(0.5, deadline.left_s()))
                t = md.topics.get(topic)
                parts = sorted(t.partitions) if t is not None and t.error is None else []
                if not parts:
                    time.sleep(0.1)
            if not parts:
                raise RuntimeError(f"topic {topic!r} has no partitions in metadata")
            start = OFFSET_BEGINNING if cmd.get("from", "earliest") == "earliest" else OFFSET_END
            self.assigned = parts
            self.c.assign([TopicPartition(topic, p, start) for p in parts])
        else:
            self.c.subscribe([topic])

    def assignment(self) -> list[int]:
        if self.group is None:
            return self.assigned
        return sorted(tp.partition for tp in self.c.assignment() if tp.topic == self.topic)

    def consume(self, max_records: int, timeout_ms: int, errors: list[str]) -> list[list[Any]]:
        out: list[list[Any]] = []
        deadline = pyloop.Deadline(timeout_ms)
        while len(out) < max_records and not deadline.expired():
            for m in self.c.consume(num_messages=min(max_records - len(out), 10000),
                                    timeout=min(0.2, deadline.left_s())):
                if m.error() is not None:
                    pyloop.note_error(errors, KafkaException(m.error()))
                    continue
                out.append([m.partition(), m.offset(), pyloop.text(m.value())])
                self.returned[m.partition()] = m.offset() + 1
        return out

    def commit(self) -> list[list[int]]:
        owned = set(self.assignment())
        offsets = {p: o for p, o in self.returned.items() if p in owned}
        if offsets:
            self.c.commit(offsets=[TopicPartition(self.topic, p, o) for p, o in offsets.items()], asynchronous=False)
        return [[p, o] for p, o in sorted(offsets.items())]


PRODUCERS: dict[tuple, Producer] = {}
CONSUMERS: dict[tuple, Consumer] = {}


def producer_for(cmd: dict[str, Any]) -> Producer:
    txn_id = cmd.get("transactional_id")
    key = (str(cmd.get("acks")), cmd.get("compression", "none"), cmd.get("idempotent"), txn_id)
    if key not in PRODUCERS:
        conf: dict[str, Any] = {"bootstrap.servers": ARGS.bootstrap, **SECURITY, "client.id": ARGS.client_id,
                                "error_cb": on_error}
        if txn_id is not None:
            conf["transactional.id"] = txn_id
        if cmd.get("acks") is not None:
            conf["acks"] = str(pyloop.acks_of(cmd))
        if cmd.get("compression", "none") != "none":
            conf["compression.type"] = cmd["compression"]
        if cmd.get("idempotent") is not None:
            conf["enable.idempotence"] = bool(cmd["idempotent"])
        producer = Producer(conf)
        if txn_id is not None:
            producer.init_transactions(30)
        PRODUCERS[key] = producer
    return PRODUCERS[key]


def produce(cmd: dict[str, Any]) -> dict[str, Any]:
    p = producer_for(cmd)
    txn = cmd.get("transactional_id") is not None
    if txn:
        p.begin_transaction()
    n = int(cmd["count"])
    results: list[Optional[list[Any]]] = [None] * n
    errors: list[str] = []

    def on_delivery(i: int, v: str) -> Any:
        def cb(err: Any, msg: Any) -> None:
            if err is None:
                results[i] = [msg.partition(), msg.offset(), v]
            else:
                pyloop.note_error(errors, KafkaException(err))
        return cb

    for i in range(n):
        v = pyloop.value_of(cmd["prefix"], i)
        k = pyloop.key_of(cmd.get("key_prefix"), i)
        kw: dict[str, Any] = {"value": v.encode(), "on_delivery": on_delivery(i, v)}
        if k is not None:
            kw["key"] = k.encode()
        if cmd.get("partition") is not None:
            kw["partition"] = int(cmd["partition"])
        while True:
            try:
                p.produce(cmd["topic"], **kw)
                break
            except BufferError:
                p.poll(0.05)
    # poll() rather than flush(): a fatal error (e.g. idempotence refused) raises from poll() as a
    # KafkaException, whereas flush() turns it into a SystemError.
    deadline = pyloop.Deadline(cmd.get("timeout_ms", 30000))
    while len(p) and not deadline.expired():
        try:
            p.poll(0.05)
        except KafkaException as exc:
            pyloop.note_error(errors, exc)
            break
    if len(p):
        errors.append(f"{len(p)} messages still undelivered")
    errors.extend(e for e in CLIENT_ERRORS if e not in errors)
    CLIENT_ERRORS.clear()
    reply: dict[str, Any] = {"op": "produced", "acked": [r for r in results if r is not None], "errors": errors}
    if txn:
        if cmd.get("transaction", "commit") == "commit" and not errors:
            p.commit_transaction(30)
            reply["transaction"] = "committed"
        else:
            p.abort_transaction(30)
            reply["transaction"] = "aborted"
    return reply


def consume(cmd: dict[str, Any]) -> dict[str, Any]:
    key = (cmd["topic"], cmd.get("group"), cmd.get("isolation"))
    if key not in CONSUMERS:
        CONSUMERS[key] = Consumer(cmd["topic"], cmd.get("group"), cmd)
    c = CONSUMERS[key]
    errors: list[str] = []
    recs = c.consume(int(cmd.get("max", 1 << 30)), int(cmd.get("timeout_ms", 10000)), errors)
    errors.extend(e for e in CLIENT_ERRORS if e not in errors)
    CLIENT_ERRORS.clear()
    reply: dict[str, Any] = {"op": "consumed", "records": recs, "assignment": c.assignment(), "errors": errors}
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
        self.c = CKConsumer({"bootstrap.servers": ARGS.bootstrap, **SECURITY, "client.id": ARGS.client_id, "error_cb": on_error,
                             "group.id": cmd["group"], "enable.auto.commit": False, "auto.offset.reset": "earliest",
                             "isolation.level": "read_committed",
                             "session.timeout.ms": cmd.get("session_timeout_ms", 10000),
                             "heartbeat.interval.ms": cmd.get("heartbeat_interval_ms", 1000)})
        self.c.subscribe([self.input])
        self.txn_id = cmd["transactional_id"]
        self.p = self.new_producer()

    def new_producer(self) -> Producer:
        p = Producer({"bootstrap.servers": ARGS.bootstrap, **SECURITY, "client.id": ARGS.client_id, "error_cb": on_error,
                      "transactional.id": self.txn_id})
        p.init_transactions(30)
        return p

    def end(self, commit: bool, errors: list[str]) -> bool:
        """commit_transaction / abort_transaction as librdkafka documents it: a retriable error
        (a timeout while the coordinator fails over) is retried with the same call — the first
        call is still in progress, and any other call conflicts with it; an error that requires
        an abort is answered by aborting; a fatal one (fenced) replaces the producer. True: the
        transaction committed."""
        for _ in range(20):
            try:
                (self.p.commit_transaction if commit else self.p.abort_transaction)(30)
                return commit
            except KafkaException as exc:
                pyloop.note_error(errors, exc)
                err = exc.args[0]
                if err.retriable():
                    continue
                if commit and err.txn_requires_abort():
                    return self.end(False, errors)
                if err.fatal():
                    self.p = self.new_producer()
                return False
        return False

    def assignment(self) -> list[int]:
        return sorted(tp.partition for tp in self.c.assignment() if tp.topic == self.input)

    def step(self, batch: int, timeout_s: float, errors: list[str], abort_every: int) -> tuple[list[list[Any]], bool]:
        rows: list[list[Any]] = []
        for m in self.c.consume(num_messages=batch, timeout=timeout_s):
            if m.error() is not None:
                pyloop.note_error(errors, KafkaException(m.error()))
            else:
                rows.append([m.partition(), m.offset(), pyloop.text(m.value())])
        if not rows:
            return rows, False
        self.transactions += 1
        try:
            self.p.begin_transaction()
            for p, _, v in rows:
                self.p.produce(self.output, value=v.encode(), partition=p)
            positions = [tp for tp in self.c.position(self.c.assignment()) if tp.offset >= 0]
            self.p.send_offsets_to_transaction(positions, self.c.consumer_group_metadata(), 30)
            if abort_every and self.transactions % abort_every == 0:
                # On purpose: its output must never be read. Flushed first, so that the aborted
                # records are in the log (abort_transaction purges what librdkafka has not sent).
                self.p.flush(30)
                self.abort_and_rewind(errors)
                return rows, False
            if self.end(True, errors):
                return rows, True
            self.rewind()
            return rows, False
        except KafkaException as exc:
            pyloop.note_error(errors, exc)
            self.abort_and_rewind(errors)
            return rows, False

    def abort_and_rewind(self, errors: list[str]) -> None:
        self.end(False, errors)
        self.rewind()

    def rewind(self) -> None:
        assigned = self.c.assignment()
        if assigned:
            for tp in self.c.committed(assigned, timeout=30):
                tp.offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
                self.c.seek(tp)

    def close(self) -> None:
        self.c.close()
        self.p.flush(10)


PIPELINES: dict[tuple, Pipeline] = {}


def transform(cmd: dict[str, Any]) -> dict[str, Any]:
    key = (cmd["input"], cmd["output"], cmd["group"], cmd["transactional_id"])
    if key not in PIPELINES:
        PIPELINES[key] = Pipeline(cmd)
    pl = PIPELINES[key]
    reply = pyloop.run_transform(cmd, pl.step, pl.assignment)
    reply["errors"].extend(e for e in CLIENT_ERRORS if e not in reply["errors"])
    CLIENT_ERRORS.clear()
    return reply


def close() -> None:
    for pl in PIPELINES.values():
        pl.close()
    for c in CONSUMERS.values():
        c.c.close()
    for p in PRODUCERS.values():
        p.flush(10)


def hello(cmd: dict[str, Any]) -> dict[str, Any]:
    return {"op": "hello", "client": "confluent-kafka", "version": confluent_kafka.version()[0]
            if isinstance(confluent_kafka.version(), tuple) else confluent_kafka.version(),
            "librdkafka": confluent_kafka.libversion()[0], "language": "python", "codecs": CODECS,
            "default_idempotent": False}


pyloop.serve({"hello": hello, "produce": produce, "consume": consume, "commit": commit, "transform": transform},
             close)
