"""TransactionalProducer: kafkasim's own transactional producer (Kafka's KafkaProducer with a
transactional.id and its TransactionManager), over the real wire protocol.

  init_transactions      FindCoordinator(key_type 1) + InitProducerId(transactional id): a producer
                         id and epoch; this fences every older producer of the same id (the
                         coordinator bumps the epoch and aborts whatever it left open)
  begin_transaction      local only, as in Kafka
  send                   queues a record; `flush` (and commit) first adds the partitions new to the
                         transaction with AddPartitionsToTxn — before their first batch, as the
                         Java client does — then produces one transactional batch per partition
                         (attributes bit 4, transactional_id in the request, per-partition
                         sequences under (id, epoch), a retry resends the same bytes)
  send_offsets_to_transaction  AddOffsetsToTxn to the transaction coordinator, then
                         TxnOffsetCommit to the group coordinator: the offsets become visible
                         with the transaction's commit marker, not before
  commit / abort         EndTxn (after flushing; commit refuses while an abortable error stands)

Errors, as TransactionManager classifies them:
  fatal (ProducerFencedError, the producer is unusable; make a new one):
      PRODUCER_FENCED and INVALID_PRODUCER_EPOCH from the coordinator, INVALID_TXN_STATE,
      TRANSACTIONAL_ID_AUTHORIZATION_FAILED
  abortable (TransactionAbortableError: abort_transaction() and carry on): a produce that failed
      for good (INVALID_PRODUCER_EPOCH from a partition leader — KIP-588 made it abortable; the
      usual cause is the coordinator aborting a transaction past transaction.timeout.ms, after
      which the abort itself is fenced in Kafka 3.9: bufstream's "misleading ProducerFenced"),
      INVALID_PRODUCER_ID_MAPPING, a rejected TxnOffsetCommit
  unknown (TransactionOutcomeUnknown): EndTxn got no definite answer within max.block.ms
Coordinator moves and CONCURRENT_TRANSACTIONS / COORDINATOR_LOAD_IN_PROGRESS are retried inside
(txn_coordinator_client.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from kafkasim.client.cluster import ClientCluster
from kafkasim.client.producer import RETRIABLE, ProducerFatalError, RecordMetadata, partition_for_key
from kafkasim.client.txn_coordinator_client import (
    GROUP_KEY_TYPE,
    TRANSACTION_KEY_TYPE,
    CoordinatorClient,
    CoordinatorUnreachable,
)
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from kafkasim.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from kafkasim.protocol.messages.end_txn import EndTxnRequest
from kafkasim.protocol.messages.init_producer_id import InitProducerIdRequest
from kafkasim.protocol.messages.produce import ProduceRequest
from kafkasim.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from kafkasim.records.batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, Record, build_batch
from kafkasim.runtime.api import Future, NetworkError, NodeRuntime, RuntimeTimeout

TP = tuple[str, int]
FATAL = {E.PRODUCER_FENCED, E.INVALID_PRODUCER_EPOCH, E.INVALID_TXN_STATE, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
PRODUCE_RETRIABLE = RETRIABLE | {E.CONCURRENT_TRANSACTIONS, E.OUT_OF_ORDER_SEQUENCE_NUMBER}


class ProducerFencedError(ProducerFatalError):
    def __init__(self, what: str, code: int) -> None:
        super().__init__(f"{what}: {E.error_name(code)}")
        self.code = code


class TransactionAbortableError(Exception):
    def __init__(self, what: str, code: int) -> None:
        super().__init__(f"{what}: {E.error_name(code)}")
        self.code = code


class TransactionOutcomeUnknown(Exception):
    pass


class TxnState(Enum):
    UNINITIALIZED = "uninitialized"
    READY = "ready"
    IN_TRANSACTION = "in_transaction"
    ABORTABLE_ERROR = "abortable_error"
    FATAL_ERROR = "fatal_error"


@dataclass
class TransactionalConfig:
    transactional_id: str
    transaction_timeout_ms: int = 60000   # transaction.timeout.ms
    request_timeout_ms: float = 30000     # request.timeout.ms
    retry_backoff_ms: float = 100         # retry.backoff.ms
    delivery_timeout_ms: float = 120000   # delivery.timeout.ms
    max_block_ms: float = 60000           # max.block.ms (coordinator requests)
    acks: int = -1                        # a transactional producer needs acks=all


@dataclass
class _Open:
    """The current transaction's client-side state."""
    partitions: set[TP] = field(default_factory=set)           # added with AddPartitionsToTxn
    pending: dict[TP, list[tuple[Record, Future[Any]]]] = field(default_factory=dict)
    offsets_group: str | None = None
    abortable: TransactionAbortableError | None = None


class TransactionalProducer:
    def __init__(self, rt: NodeRuntime, bootstrap: str, config: TransactionalConfig,
                 client_id: str = "kafkasim-txn-producer") -> None:
        self.rt, self.config = rt, config
        self.cluster = ClientCluster(rt, bootstrap, client_id, config.request_timeout_ms)
        self.coordinator = self._coordinator_client(config.transactional_id, TRANSACTION_KEY_TYPE)
        self.producer_id, self.epoch = NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        self.state = TxnState.UNINITIALIZED
        self._txn = _Open()
        self._sequences: dict[TP, int] = {}
        self._sticky = 0

    def _coordinator_client(self, key: str, key_type: int) -> CoordinatorClient:
        c = self.config
        return CoordinatorClient(self.rt, self.cluster, key, key_type, request_timeout_ms=c.request_timeout_ms,
                                 retry_backoff_ms=c.retry_backoff_ms, max_block_ms=c.max_block_ms)

    # ---------------------------------------------------------------- lifecycle
    async def start(self, topics: list[str]) -> None:
        for t in topics:
            await self.cluster.wait_for_topic(t)

    async def init_transactions(self) -> None:
        c = self.config

        def make() -> InitProducerIdRequest:
            return InitProducerIdRequest(transactional_id=c.transactional_id,
                                         transaction_timeout_ms=c.transaction_timeout_ms)
        code, resp = await self.coordinator.call(make, lambda r: int(r.error_code))
        if code != E.NONE:
            self._fatal("InitProducerId", code)
        self.producer_id, self.epoch = int(resp.producer_id), int(resp.producer_epoch)
        self._sequences.clear()
        self.state = TxnState.READY
        self.rt.trace("txn_client_init", transactional_id=c.transactional_id, producer_id=self.producer_id,
                      epoch=self.epoch)

    def begin_transaction(self) -> None:
        self._require(TxnState.READY, "begin_transaction")
        self._txn = _Open()
        self.state = TxnState.IN_TRANSACTION

    def _require(self, state: TxnState, what: str) -> None:
        if self.state != state:
            raise ProducerFatalError(f"{what} in state {self.state.value}")

    def _fatal(self, what: str, code: int) -> None:
        self.state = TxnState.FATAL_ERROR
        raise ProducerFencedError(what, code)

    def _abortable(self, what: str, code: int) -> TransactionAbortableError:
        err = TransactionAbortableError(what, code)
        if self._txn.abortable is None:
            self._txn.abortable = err
        if self.state == TxnState.IN_TRANSACTION:
            self.state = TxnState.ABORTABLE_ERROR
        return err

    # ---------------------------------------------------------------- send
    def send(self, topic: str, value: bytes | None, key: bytes | None = None,
             partition: int | None = None) -> Future[Any]:
        if self.state not in (TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR):
            raise ProducerFatalError(f"send outside a transaction (state {self.state.value})")
        n = self.cluster.partition_counts.get(topic)
        if n is None:
            raise ValueError(f"topic {topic} unknown to the producer; call start([...]) first")
        if partition is None:
            self._sticky = (self._sticky + 1) % n
            partition = partition_for_key(key, n) if key is not None else self._sticky
        fut: Future[Any] = self.rt.future()
        self._txn.pending.setdefault((topic, partition), []).append(
            (Record(self.rt.now_ms(), key, value), fut))
        return fut

    async def flush(self) -> None:
        """Add the new partitions to the transaction, then produce everything queued."""
        txn = self._txn
        pending, txn.pending = txn.pending, {}
        if not pending or self.state == TxnState.ABORTABLE_ERROR:
            self._fail_all(pending, txn.abortable.code if txn.abortable else E.TRANSACTION_ABORTABLE)
            return
        new = sorted(set(pending) - txn.partitions)
        if new:
            code = await self._add_partitions(new)
            if code != E.NONE:
                self._fail_all(pending, code)
                if code in FATAL:
                    self._fatal("AddPartitionsToTxn", code)
                raise self._abortable("AddPartitionsToTxn", code)
            txn.partitions.update(new)
        tasks = [self.rt.spawn(self._produce(tp, batch), name=f"txn produce {tp[0]}-{tp[1]}")
                 for tp, batch in sorted(pending.items())]
        codes = [await t for t in tasks]
        for code in codes:
            if code != E.NONE:
                raise self._abortable("Produce", code)

    def _fail_all(self, pending: dict[TP, list[tuple[Record, Future[Any]]]], code: int) -> None:
        for (topic, partition), batch in pending.items():
            for _, fut in batch:
                fut.set_result(RecordMetadata(topic, partition, -1, code))

    async def _add_partitions(self, tps: list[TP]) -> int:
        by_topic: dict[str, list[int]] = {}
        for t, p in tps:
            by_topic.setdefault(t, []).append(p)
        T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic

        def make() -> AddPartitionsToTxnRequest:
            return AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=self.config.transactional_id,
                v3_and_below_producer_id=self.producer_id, v3_and_below_producer_epoch=self.epoch,
                v3_and_below_topics=[T(name=t, partitions=ps) for t, ps in sorted(by_topic.items())])

        def code_of(resp: Any) -> int:
            codes = {int(p.partition_error_code) for t in resp.results_by_topic_v3_and_below
                     for p in t.results_by_partition} - {E.NONE, E.OPERATION_NOT_ATTEMPTED}
            return min(codes) if codes else int(resp.error_code)
        return await self._coordinator_code("AddPartitionsToTxn", make, code_of,
                                            frozenset({E.UNKNOWN_TOPIC_OR_PARTITION}))

    async def _coordinator_code(self, what: str, make: Any, code_of: Any,
                                retry_also: frozenset[int] = frozenset()) -> int:
        try:
            code, _ = await self.coordinator.call(make, code_of, retry_also)
        except CoordinatorUnreachable:
            raise self._abortable(what, E.REQUEST_TIMED_OUT) from None
        return code

    async def _produce(self, tp: TP, batch: list[tuple[Record, Future[Any]]]) -> int:
        seq = self._sequences.get(tp, 0)
        records = build_batch([r for r, _ in batch], producer_id=self.producer_id, producer_epoch=self.epoch,
                              base_sequence=seq, is_transactional=True)
        deadline = self.rt.monotonic_ms() + self.config.delivery_timeout_ms
        while True:
            code, base = await self._produce_once(tp, records)
            if code in (E.NONE, E.DUPLICATE_SEQUENCE_NUMBER):
                self._sequences[tp] = seq + len(batch)
                for i, (_, fut) in enumerate(batch):
                    fut.set_result(RecordMetadata(tp[0], tp[1], base + i if code == E.NONE and base >= 0 else -1))
                return E.NONE
            if code not in PRODUCE_RETRIABLE or self.rt.monotonic_ms() >= deadline:
                for _, fut in batch:
                    fut.set_result(RecordMetadata(tp[0], tp[1], -1, code))
                return code
            await self.rt.sleep(self.config.retry_backoff_ms)
            try:
                await self.cluster.refresh_metadata([tp[0]])
            except (NetworkError, RuntimeTimeout):
                pass

    async def _produce_once(self, tp: TP, records: bytes) -> tuple[int, int]:
        leader = self.cluster.leaders.get(tp)
        if leader is None or leader.leader not in self.cluster.brokers:
            return E.LEADER_NOT_AVAILABLE, -1
        PD = ProduceRequest.TopicProduceData.PartitionProduceData
        req = ProduceRequest(transactional_id=self.config.transactional_id, acks=self.config.acks,
                             timeout_ms=int(self.config.request_timeout_ms),
                             topic_data=[ProduceRequest.TopicProduceData(
                                 name=tp[0], partition_data=[PD(index=tp[1], records=records)])])
        try:
            conn = await self.cluster.broker_connection(leader.leader)
            resp = await conn.request_within(req, self.config.request_timeout_ms)
        except RuntimeTimeout:
            return E.REQUEST_TIMED_OUT, -1
        except NetworkError:
            return E.NETWORK_EXCEPTION, -1
        pr = resp.responses[0].partition_responses[0]
        return int(pr.error_code), int(pr.base_offset)

    # ---------------------------------------------------------------- offsets
    async def send_offsets_to_transaction(self, offsets: dict[TP, int], group_id: str, generation_id: int = -1,
                                          member_id: str = "", group_instance_id: str | None = None) -> None:
        """AddOffsetsToTxn (once per group and transaction), then TxnOffsetCommit to the group's
        coordinator. `offsets`: the next offset to read per partition."""
        self._require(TxnState.IN_TRANSACTION, "send_offsets_to_transaction")
        if self._txn.offsets_group != group_id:
            code = await self._coordinator_code("AddOffsetsToTxn", lambda: AddOffsetsToTxnRequest(
                transactional_id=self.config.transactional_id, producer_id=self.producer_id,
                producer_epoch=self.epoch, group_id=group_id), lambda r: int(r.error_code))
            if code in FATAL:
                self._fatal("AddOffsetsToTxn", code)
            if code != E.NONE:
                raise self._abortable("AddOffsetsToTxn", code)
            self._txn.offsets_group = group_id
        by_topic: dict[str, list[Any]] = {}
        P = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition
        for (t, p), off in sorted(offsets.items()):
            by_topic.setdefault(t, []).append(P(partition_index=p, committed_offset=off))
        req = TxnOffsetCommitRequest(
            transactional_id=self.config.transactional_id, group_id=group_id, producer_id=self.producer_id,
            producer_epoch=self.epoch, generation_id=generation_id, member_id=member_id,
            group_instance_id=group_instance_id,
            topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=t, partitions=ps)
                    for t, ps in by_topic.items()])

        def code_of(resp: Any) -> int:
            codes = {int(p.error_code) for t in resp.topics for p in t.partitions} - {E.NONE}
            return min(codes) if codes else E.NONE
        group = self._coordinator_client(group_id, GROUP_KEY_TYPE)
        try:
            code, _ = await group.call(lambda: req, code_of, frozenset({E.UNKNOWN_TOPIC_OR_PARTITION}))
        except CoordinatorUnreachable:
            code = E.REQUEST_TIMED_OUT
        if code in FATAL:
            self._fatal("TxnOffsetCommit", code)
        if code != E.NONE:
            raise self._abortable("TxnOffsetCommit", code)

    # ---------------------------------------------------------------- end
    async def commit_transaction(self) -> None:
        """Flush, then EndTxn(commit). Raises TransactionAbortableError (the caller aborts),
        ProducerFencedError (fatal) or TransactionOutcomeUnknown."""
        if self.state == TxnState.IN_TRANSACTION:
            await self.flush()
        if self.state == TxnState.ABORTABLE_ERROR:
            raise self._txn.abortable or TransactionAbortableError("commit", E.TRANSACTION_ABORTABLE)
        self._require(TxnState.IN_TRANSACTION, "commit_transaction")
        await self._end(True)

    async def abort_transaction(self) -> None:
        if self.state not in (TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR):
            raise ProducerFatalError(f"abort_transaction in state {self.state.value}")
        self._fail_all(self._txn.pending, E.TRANSACTION_ABORTABLE)
        self._txn.pending = {}
        await self._end(False)

    async def _end(self, committed: bool) -> None:
        if not self._txn.partitions and self._txn.offsets_group is None:
            self.state = TxnState.READY  # nothing reached the coordinator: Kafka skips the EndTxn
            return

        def make() -> EndTxnRequest:
            return EndTxnRequest(transactional_id=self.config.transactional_id, producer_id=self.producer_id,
                                 producer_epoch=self.epoch, committed=committed)
        try:
            code, _ = await self.coordinator.call(make, lambda r: int(r.error_code))
        except CoordinatorUnreachable as exc:
            self.state = TxnState.FATAL_ERROR  # the transaction's fate is unknown: start again
            raise TransactionOutcomeUnknown(str(exc)) from None
        if code in FATAL:
            self._fatal("EndTxn", code)
        if code != E.NONE:
            self.state = TxnState.FATAL_ERROR
            raise TransactionOutcomeUnknown(f"EndTxn: {E.error_name(code)}")
        self.state = TxnState.READY

    def close(self) -> None:
        self.cluster.close()
