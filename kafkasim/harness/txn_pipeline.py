"""The consume-transform-produce copiers of a transactional workload (`pipeline = N`), and the
spawning of the whole transactional workload on simulated nodes (runner.py's hook).

A copier is a read_committed group member of "copiers" on topics[0] with its own transactional
producer. Per non-empty poll, one transaction: each input record goes to topics[1] as
"copy:<input value>" on the same partition, then send_offsets_to_transaction commits the
positions after the poll with the group's generation and member id, then EndTxn. A transaction
that does not commit rewinds the copier to the group's committed offsets, read with
require_stable (Kafka does not rewind on abort, KAFKA-17582; a copier must), after a fresh
producer's init_transactions has settled the old transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafkasim.client.consumer import ConsumerConfig
from kafkasim.client.group import GroupConfig, GroupConsumer
from kafkasim.client.read_committed import READ_COMMITTED
from kafkasim.client.transactional import TransactionAbortableError, TransactionalProducer
from kafkasim.client.txn_coordinator_client import GROUP_KEY_TYPE, CoordinatorClient, CoordinatorUnreachable
from kafkasim.harness.scenario import ConsumerSpec, ProducerSpec, Scenario
from kafkasim.harness.txn_workload import (
    COPIER_GROUP,
    TXN_ERRORS,
    _outcome_on_error,
    _poll_row,
    new_producer,
    run_txn_consumer,
    run_txn_producer,
)
from kafkasim.harness.workload import History, Txn, TxnWrite
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.offset_fetch import OffsetFetchRequest
from kafkasim.runtime.api import NetworkError, NodeRuntime, RuntimeTimeout

TP = tuple[str, int]


async def committed_offsets(rt: NodeRuntime, p: TransactionalProducer, topic: str, partitions: int) -> dict[TP, int]:
    """The group's committed offsets, require_stable (retried while a transaction's offsets are
    pending: UNSTABLE_OFFSET_COMMIT)."""
    group = CoordinatorClient(rt, p.cluster, COPIER_GROUP, GROUP_KEY_TYPE, request_timeout_ms=5000,
                              retry_backoff_ms=200, max_block_ms=600_000)
    T = OffsetFetchRequest.OffsetFetchRequestTopic

    def code_of(resp: Any) -> int:
        codes = {int(x.error_code) for t in resp.topics for x in t.partitions} | {int(resp.error_code)}
        return max(codes)
    _, resp = await group.call(lambda: OffsetFetchRequest(group_id=COPIER_GROUP, require_stable=True, topics=[
        T(name=topic, partition_indexes=list(range(partitions)))]), code_of, frozenset({E.UNSTABLE_OFFSET_COMMIT}))
    return {(topic, int(x.partition_index)): int(x.committed_offset) for t in resp.topics for x in t.partitions}


class Copier:
    def __init__(self, rt: NodeRuntime, bootstrap: str, scenario: Scenario, process: str, history: History) -> None:
        self.rt, self.bootstrap, self.process, self.history = rt, bootstrap, process, history
        self.spec: ProducerSpec = scenario.producer
        self.input, self.output = scenario.topics[0].name, scenario.topics[1].name
        self.partitions = scenario.topics[0].partitions
        c: ConsumerSpec = scenario.consumer
        self.group = GroupConsumer(rt, bootstrap, GroupConfig(COPIER_GROUP, session_timeout_ms=c.session_timeout_ms,
                                                              heartbeat_interval_ms=c.heartbeat_interval_ms,
                                                              rebalance_timeout_ms=c.rebalance_timeout_ms),
                                   [self.input], ConsumerConfig(fetch_max_wait_ms=c.fetch_max_wait_ms,
                                                                isolation_level=READ_COMMITTED), client_id=process)
        self.producer: TransactionalProducer | None = None
        self.count = 0

    async def _producer(self) -> TransactionalProducer:
        if self.producer is None:
            self.producer = await new_producer(self.rt, self.bootstrap, [self.input, self.output], self.spec,
                                               self.process, f"txn-{self.process}")
        return self.producer

    async def copy(self, records: list[Any]) -> None:
        p = await self._producer()
        gen = self.group.member.generation
        txn = Txn(f"{self.process}/{self.count}", self.process, p.config.transactional_id, p.producer_id, p.epoch,
                  self.rt.monotonic_ms())
        self.count += 1
        txn.reads = [TxnWrite(r.topic, r.partition, r.offset, (r.value or b"").split(b".", 1)[0].decode())
                     for r in records]
        self.history.txns.append(txn)
        positions = self.group.positions()
        txn.offsets = {f"{t}-{q}": off for (t, q), off in sorted(positions.items())}
        try:
            try:
                p.begin_transaction()
                futs = [p.send(self.output, b"copy:" + (r.value or b""), partition=r.partition) for r in records]
                await p.flush()
                for r, f in zip(txn.reads, futs, strict=False):
                    md = f.result()
                    txn.writes.append(TxnWrite(self.output, md.partition, md.offset, "copy:" + r.value))
                await p.send_offsets_to_transaction(positions, COPIER_GROUP, gen.generation_id, gen.member_id)
                txn.end_invoke_ms = self.rt.monotonic_ms()
                await p.commit_transaction()
                txn.outcome = "committed"
            except TransactionAbortableError as exc:
                txn.intent, txn.error = "abort", str(exc)
                txn.end_invoke_ms = self.rt.monotonic_ms()
                await p.abort_transaction()
                txn.outcome = "aborted"
        except TXN_ERRORS as exc:
            txn.outcome, txn.error = _outcome_on_error(txn, exc), str(exc)
            p.close()
            self.producer = None
        txn.complete_ms = self.rt.monotonic_ms()
        self.rt.trace("copier_txn", process=self.process, txn=txn.id, outcome=txn.outcome, reads=len(records),
                      error=txn.error)
        if txn.outcome != "committed":
            await self.rewind()

    async def rewind(self) -> None:
        p = await self._producer()   # its init settled the old transaction
        try:
            offsets = await committed_offsets(self.rt, p, self.input, self.partitions)
        except CoordinatorUnreachable:
            return
        for tp in list(self.group.consumer.positions):
            off = offsets.get(tp, -1)
            self.group.consumer.positions[tp] = off if off >= 0 else None

    def caught_up(self, writers: int) -> bool:
        """Every committed input record is below this copier's position."""
        if self.history.producers_done < writers or any(
                x.outcome == "pending" for x in self.history.txns if not x.process.startswith("copier")):
            return False
        pos = self.group.positions()
        return all(w.offset < pos.get((w.topic, w.partition), -1) for x in self.history.txns
                   if x.outcome == "committed" and not x.process.startswith("copier")
                   for w in x.writes if w.offset >= 0)


async def run_copier(rt: NodeRuntime, bootstrap: str, scenario: Scenario, process: str, history: History,
                     writers: int, idle_polls: int = 5, patience: int = 100) -> None:
    c = Copier(rt, bootstrap, scenario, process, history)
    idle = 0
    while idle < patience and not (idle >= idle_polls and c.caught_up(writers)):
        try:
            records = await c.group.poll()
        except (NetworkError, RuntimeTimeout):
            records = []
        for r in records:
            history.txn_polls.append(_poll_row(rt, process, r, group=COPIER_GROUP))
        if records:
            idle = 0
            await c.copy(records)
        elif history.producers_done >= writers:
            idle += 1
    p = await c._producer()
    final = await committed_offsets(rt, p, c.input, c.partitions)
    history.final_offsets = {f"{t}-{q}": off for (t, q), off in sorted(final.items())}
    p.close()
    await c.group.close()
    history.producers_done += 1
    rt.trace("copier_done", process=process, txns=c.count)


Spawn = Callable[[str, Any], None]   # (node name, coroutine factory taking the node's runtime)


def spawn_txn_workload(scenario: Scenario, bootstrap: str, history: History, spawn: Spawn,
                       spawn_final: Callable[[str, Any], Any]) -> list[Any]:
    """Producers (and copiers) on producer-i / copier-i, read_committed consumers on consumer-i
    (of topics[1] with a pipeline, else topics[0]); the consumers' tasks end the run."""
    t = scenario.producer.txn
    assert t is not None
    topic = scenario.topics[0].name
    for i in range(scenario.producer.count):
        spawn(f"producer-{i}", lambda rt, n=f"producer-{i}": run_txn_producer(
            rt, bootstrap, topic, scenario.producer, n, history))
    writers = scenario.producer.count
    if t.pipeline:
        for i in range(t.pipeline):
            spawn(f"copier-{i}", lambda rt, n=f"copier-{i}": run_copier(
                rt, bootstrap, scenario, n, history, scenario.producer.count))
        writers += t.pipeline
        topic = scenario.topics[1].name
    return [spawn_final(f"consumer-{i}", lambda rt, n=f"consumer-{i}": run_txn_consumer(
        rt, bootstrap, topic, scenario.consumer, n, history, writers)) for i in range(scenario.consumer.count)]
