"""Transactional workload (`transactional = true` in [workload.producer]): producers write
transactions of `txn_size` records with kafkasim's TransactionalProducer, aborting `abort_ratio`
of them on purpose; read_committed consumers read the topic; with `pipeline = N`, N copiers
consume topics[0] in the group "copiers" (read_committed) and, per poll, write each record to
topics[1] (value "copy:<input value>", same partition) and commit the input offsets in the same
transaction (send_offsets_to_transaction) — Kafka's consume-transform-produce.

Every transaction goes into History.txns with its writes (partition, offset, value), for a copier
its reads, and its outcome; every read_committed read into History.txn_polls. A producer that
is fenced or loses track of a transaction's fate is replaced by a new incarnation with the same
transactional.id (init_transactions fences the old one), as Jepsen's clients are.

Faults made by the workload itself (the broker's are in [[faults]]):
  stall_ratio / stall_ms   a transaction stalls stall_ms before its EndTxn (past
                           transaction_timeout_ms the coordinator aborts it)
  zombie_pause_ms          producer-0 pauses that long before the EndTxn(commit) of one
                           transaction, while a successor with its transactional.id takes over
                           (fencing it) and runs the rest: the zombie's late EndTxn must be
                           refused (KAFKA-17754's delayed EndTxn, with an epoch to stop it)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kafkasim.client.consumer import Consumer, ConsumerConfig
from kafkasim.client.producer import ProducerFatalError, RecordMetadata
from kafkasim.client.read_committed import READ_COMMITTED
from kafkasim.client.transactional import (
    TransactionAbortableError,
    TransactionalConfig,
    TransactionalProducer,
    TransactionOutcomeUnknown,
)
from kafkasim.client.txn_coordinator_client import CoordinatorUnreachable
from kafkasim.harness.scenario import ConsumerSpec, ProducerSpec, TxnSpec
from kafkasim.harness.workload import History, KeyChooser, Poll, Txn, TxnWrite, make_value
from kafkasim.runtime.api import NetworkError, NodeRuntime, RuntimeTimeout

COPIER_GROUP = "copiers"
TXN_ERRORS = (ProducerFatalError, TransactionAbortableError, TransactionOutcomeUnknown, CoordinatorUnreachable)


def _txn_spec(spec: ProducerSpec) -> TxnSpec:
    assert spec.txn is not None  # only called for transactional = true
    return spec.txn


async def new_producer(rt: NodeRuntime, bootstrap: str, topics: list[str], spec: ProducerSpec,
                       process: str, transactional_id: str) -> TransactionalProducer:
    """A producer whose init_transactions succeeded (retried while the coordinator is away)."""
    cfg = TransactionalConfig(transactional_id, transaction_timeout_ms=_txn_spec(spec).transaction_timeout_ms,
                              request_timeout_ms=spec.request_timeout_ms, max_block_ms=4 * spec.request_timeout_ms)
    while True:
        p = TransactionalProducer(rt, bootstrap, cfg, client_id=process)
        try:
            await p.start(topics)
            await p.init_transactions()
            return p
        except (*TXN_ERRORS, NetworkError, RuntimeTimeout):
            p.close()
            await rt.sleep(500)


@dataclass
class _Writer:
    rt: NodeRuntime
    bootstrap: str
    topic: str
    spec: ProducerSpec
    process: str
    history: History
    rng: Any
    next_value: int = 0

    @property
    def tid(self) -> str:
        return f"txn-{self.process}"


def _outcome_on_error(txn: Txn, exc: Exception) -> str:
    """A transaction's fate when its producer failed: a commit that was sent may have happened;
    one never sent did not (the coordinator aborts a fenced or timed-out producer's transaction)."""
    sent_commit = txn.end_invoke_ms >= 0 and txn.intent == "commit"
    if isinstance(exc, TransactionOutcomeUnknown) or sent_commit:
        return "unknown"
    return "aborted"


async def _write_txn(w: _Writer, p: TransactionalProducer, txn: Txn, keys: KeyChooser) -> None:
    t = _txn_spec(w.spec)
    p.begin_transaction()
    interval_ms = 1000.0 / w.spec.rate_per_s
    for _ in range(t.txn_size):
        key = keys.next()
        value = make_value(w.process, w.next_value, w.spec.value_bytes)
        w.next_value += 1
        fut = p.send(w.topic, value, key.encode() if key else None)
        write = TxnWrite(w.topic, -1, -1, value.split(b".", 1)[0].decode())
        txn.writes.append(write)
        try:
            await p.flush()  # eager, as a linger-free Java producer: records reach the log mid-transaction
        finally:
            if fut.done():
                md: RecordMetadata = fut.result()
                write.partition, write.offset = md.partition, md.offset
        await w.rt.sleep(w.rng.expovariate(1.0 / interval_ms) if interval_ms > 0 else 0)
    if t.stall_ratio > 0 and w.rng.random() < t.stall_ratio:
        w.rt.trace("txn_stall", process=w.process, txn=txn.id, ms=t.stall_ms)
        await w.rt.sleep(t.stall_ms)


async def _end_txn(w: _Writer, p: TransactionalProducer, txn: Txn) -> None:
    txn.end_invoke_ms = w.rt.monotonic_ms()
    if txn.intent == "commit":
        await p.commit_transaction()
        txn.outcome = "committed"
    else:
        await p.abort_transaction()
        txn.outcome = "aborted"


async def _one_txn(w: _Writer, p: TransactionalProducer, k: int, keys: KeyChooser,
                   pause_ms: float = 0.0, successor: Any = None) -> TransactionalProducer | None:
    """Run transaction k; the producer to go on with (None: it died, make a new one)."""
    t = _txn_spec(w.spec)
    txn = Txn(f"{w.process}/{k}", w.process, w.tid, p.producer_id, p.epoch, w.rt.monotonic_ms())
    txn.intent = "abort" if t.abort_ratio > 0 and w.rng.random() < t.abort_ratio else "commit"
    w.history.txns.append(txn)
    try:
        try:
            await _write_txn(w, p, txn, keys)
            if successor is not None:  # the zombie: paused before its EndTxn while a successor takes over
                txn.intent = "commit"
                w.rt.spawn(successor, name=f"{w.process} successor")
                await w.rt.sleep(pause_ms)
            await _end_txn(w, p, txn)
        except TransactionAbortableError:
            txn.intent = "abort"
            await _end_txn(w, p, txn)
    except TXN_ERRORS as exc:
        txn.outcome, txn.error = _outcome_on_error(txn, exc), str(exc)
    txn.complete_ms = w.rt.monotonic_ms()
    w.rt.trace("txn_end", process=w.process, txn=txn.id, intent=txn.intent, outcome=txn.outcome,
               writes=[[x.partition, x.offset] for x in txn.writes])
    if txn.outcome in ("committed", "aborted") and not txn.error:
        return p
    p.close()
    return None


async def _run_txns(w: _Writer, p: TransactionalProducer | None, first: int, last: int, keys: KeyChooser) -> None:
    t = _txn_spec(w.spec)
    zombie_at = last // 3 if t.zombie_pause_ms > 0 and w.process == "producer-0" and first == 0 else -1
    for k in range(first, last):
        if p is None:
            p = await new_producer(w.rt, w.bootstrap, [w.topic], w.spec, w.process, w.tid)
        if k == zombie_at:
            await _one_txn(w, p, k, keys, t.zombie_pause_ms, _run_txns(w, None, k + 1, last, keys))
            return  # the successor finishes the work (and counts the producer done)
        p = await _one_txn(w, p, k, keys)
    if p is not None:
        p.close()
    w.history.producers_done += 1
    w.rt.trace("producer_done", process=w.process, txns=last)


async def run_txn_producer(rt: NodeRuntime, bootstrap: str, topic: str, spec: ProducerSpec, process: str,
                           history: History) -> None:
    t = _txn_spec(spec)
    rng = rt.rng(f"workload/{process}")
    w = _Writer(rt, bootstrap, topic, spec, process, history, rng)
    txns = -(-spec.messages // t.txn_size)
    await _run_txns(w, None, 0, txns, KeyChooser(spec, rng))


def _poll_row(rt: NodeRuntime, process: str, r: Any, member_id: str = "", generation: int = -1,
              group: str = "") -> Poll:
    value = (r.value or b"").split(b".", 1)[0].decode()
    return Poll(process, rt.monotonic_ms(), r.topic, r.partition, r.offset, value, member_id, generation, group)


def _unseen_committed(history: History, topic: str, seen: set[tuple[int, int]]) -> bool:
    return any((w.partition, w.offset) not in seen for x in history.txns if x.outcome == "committed"
               for w in x.writes if w.topic == topic and w.offset >= 0)


async def run_txn_consumer(rt: NodeRuntime, bootstrap: str, topic: str, spec: ConsumerSpec, process: str,
                           history: History, writers: int, idle_polls: int = 5, patience: int = 60) -> None:
    """read_committed from the earliest offset until every writer is done and, either this
    consumer read every record of every committed transaction, or `patience` polls came back
    empty in a row (a committed record it never gets is for the checkers to report)."""
    consumer = Consumer(rt, bootstrap, ConsumerConfig(fetch_max_wait_ms=spec.fetch_max_wait_ms,
                                                      isolation_level=READ_COMMITTED), client_id=process)
    await consumer.assign_all(topic)
    seen: set[tuple[int, int]] = set()
    idle = 0
    while True:
        records = await consumer.poll()
        for r in records:
            history.txn_polls.append(_poll_row(rt, process, r))
            seen.add((r.partition, r.offset))
        done = history.producers_done >= writers and all(x.outcome != "pending" for x in history.txns)
        idle = idle + 1 if (done and not records) else 0
        if idle >= patience or (idle >= idle_polls and not _unseen_committed(history, topic, seen)):
            break
    consumer.close()
    rt.trace("consumer_done", process=process, polled=len(seen))
