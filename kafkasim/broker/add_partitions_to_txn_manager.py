"""KIP-890 part 1 on the partition leader: before the first transactional batch of a producer's
transaction is appended to a partition (Produce, or the group coordinator's TxnOffsetCommit), the
leader asks the transaction coordinator whether the partition is in the transaction — Kafka
3.9's AddPartitionsToTxnManager and ReplicaManager.maybeStartTransactionVerificationForPartitions
(`transaction.partition.verification.enable`, default true).

The ask: AddPartitionsToTxn v4 (the broker-to-broker form) with verify_only = true, batched per
coordinator broker (the leader of the id's `__transaction_state` partition in this broker's
metadata), at most one request in flight per broker. A second ask for the same transactional id
while one waits: the one with the lower epoch is answered INVALID_PRODUCER_EPOCH at once, with the
same epoch the older one NETWORK_EXCEPTION. Answers per partition: NONE (verified), else the
coordinator's error with PRODUCER_FENCED as INVALID_PRODUCER_EPOCH and, for callers that predate
KIP-890 part 2 (Produce <= v10, TxnOffsetCommit <= v3), TRANSACTION_ABORTABLE as
INVALID_TXN_STATE. No coordinator known: COORDINATOR_NOT_AVAILABLE; a lost connection or timeout:
NETWORK_EXCEPTION; a top-level error: that error (CLUSTER_AUTHORIZATION_FAILED as
INVALID_TXN_STATE).

Before asking, each partition's producer state gets a verification entry (storage/verification.py)
unless the producer already has a transaction ongoing there (then nothing is asked); the append
must then carry that entry's guard.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kafkasim.broker.security.inter_broker import inter_broker_address
from kafkasim.client.network_client import NetworkClient
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from kafkasim.runtime.api import Future, NetworkError, RuntimeTimeout
from kafkasim.storage.verification import SENTINEL, VerificationGuard

if TYPE_CHECKING:
    from kafkasim.broker.metadata_cache import MetadataCache
    from kafkasim.broker.replica_manager import ReplicaManager
    from kafkasim.client.channel_security import ChannelSecurity
    from kafkasim.runtime.api import NodeRuntime

TopicPartition = tuple[str, int]
TRANSACTION_STATE_TOPIC_NAME = "__transaction_state"   # Topic.TRANSACTION_STATE_TOPIC_NAME
ADD_PARTITIONS_TO_TXN_VERSION = 4     # the first version brokers send (verify_only)
Req = AddPartitionsToTxnRequest


@dataclass
class PendingVerification:
    producer_id: int
    producer_epoch: int
    partitions: list[TopicPartition]
    generic_error: bool                  # the caller knows TRANSACTION_ABORTABLE (KIP-890 part 2)
    answer: Future[dict[TopicPartition, int]]


@dataclass
class NodeBatch:
    transactions: dict[str, PendingVerification] = field(default_factory=dict)


class AddPartitionsToTxnManager:
    def __init__(self, rt: NodeRuntime, broker_id: int, metadata_cache: MetadataCache,
                 partition_for: Callable[[str], int], request_timeout_ms: int,
                 security: ChannelSecurity | None = None) -> None:
        self.rt = rt
        self.security = security   # the inter-broker listener's TLS/SASL (security/inter_broker.py)
        self.broker_id = broker_id
        self.metadata_cache = metadata_cache
        self.partition_for = partition_for     # the transaction coordinator's (injected: it sits a layer above)
        self.request_timeout_ms = request_timeout_ms
        self.nodes_to_transactions: dict[int, NodeBatch] = {}
        self.inflight_nodes: set[int] = set()
        self.clients: dict[int, NetworkClient] = {}

    # ---------------------------------------------------------------- asking
    def _coordinator(self, transactional_id: str) -> int | None:
        meta = self.metadata_cache.topic(TRANSACTION_STATE_TOPIC_NAME)
        if meta is None or not meta.partitions:
            return None
        pm = meta.partitions.get(self.partition_for(transactional_id))
        if pm is None or pm.leader < 0 or pm.leader not in self.metadata_cache.brokers:
            return None
        return pm.leader

    async def verify_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                 partitions: list[TopicPartition], generic_error: bool) -> dict[TopicPartition, int]:
        """The partitions not verified, with their errors (empty: all verified)."""
        node = self._coordinator(transactional_id)
        if node is None:
            return {tp: E.COORDINATOR_NOT_AVAILABLE for tp in partitions}
        answer: Future[dict[TopicPartition, int]] = self.rt.future()
        new = PendingVerification(producer_id, producer_epoch, list(partitions), generic_error, answer)
        batch = self.nodes_to_transactions.setdefault(node, NodeBatch())
        old = batch.transactions.get(transactional_id)
        if old is not None:
            if old.producer_epoch > producer_epoch:
                return {tp: E.INVALID_PRODUCER_EPOCH for tp in partitions}
            error = E.INVALID_PRODUCER_EPOCH if old.producer_epoch < producer_epoch else E.NETWORK_EXCEPTION
            _answer(old, {tp: error for tp in old.partitions})
        batch.transactions[transactional_id] = new
        self._maybe_send(node)
        errors: dict[TopicPartition, int] = await answer
        return errors

    def _maybe_send(self, node: int) -> None:
        if node in self.inflight_nodes or node not in self.nodes_to_transactions:
            return
        batch = self.nodes_to_transactions.pop(node)
        self.inflight_nodes.add(node)
        self.rt.spawn(self._send(node, batch), name=f"AddPartitionsToTxnSenderThread-{self.broker_id} to {node}")

    async def _send(self, node: int, batch: NodeBatch) -> None:
        try:
            self._complete(node, batch, await self._request(node, batch))
        finally:
            self.inflight_nodes.discard(node)
            self._maybe_send(node)

    async def _request(self, node: int, batch: NodeBatch) -> AddPartitionsToTxnResponse | None:
        request = Req(transactions=[_transaction(txn_id, p) for txn_id, p in batch.transactions.items()])
        try:
            client = await self._client(node)
            resp: AddPartitionsToTxnResponse = await client.send(request, ADD_PARTITIONS_TO_TXN_VERSION,
                                                                  self.request_timeout_ms)
            return resp
        except (NetworkError, RuntimeTimeout, KeyError) as exc:
            self.rt.trace("txn_verify_disconnected", destination=node, error=str(exc))
            self.clients.pop(node, None)
            return None

    async def _client(self, node: int) -> NetworkClient:
        client = self.clients.get(node)
        if client is not None and not client.closed:
            return client
        broker = self.metadata_cache.brokers[node]
        client = NetworkClient(self.rt, *inter_broker_address(broker, self.security),
                               f"broker-{self.broker_id}-add-partitions-to-txn", security=self.security)
        await client.connect(self.request_timeout_ms)
        self.clients[node] = client
        return client

    # ---------------------------------------------------------------- answers
    def _complete(self, node: int, batch: NodeBatch, resp: AddPartitionsToTxnResponse | None) -> None:
        if resp is None or resp.error_code != E.NONE:
            code = E.NETWORK_EXCEPTION if resp is None else resp.error_code
            if code == E.CLUSTER_AUTHORIZATION_FAILED:
                code = E.INVALID_TXN_STATE  # the client must not see the broker's authorization
            for pending in batch.transactions.values():
                _answer(pending, {tp: code for tp in pending.partitions})
            return
        for result in resp.results_by_transaction:
            found = batch.transactions.get(result.transactional_id)
            if found is None:
                continue
            pending = found
            unverified: dict[TopicPartition, int] = {}
            for t in result.topic_results:
                for p in t.results_by_partition:
                    if p.partition_error_code != E.NONE:
                        unverified[(t.name, p.partition_index)] = _client_error(p.partition_error_code,
                                                                                pending.generic_error)
            self.rt.trace("txn_verified", destination=node, transactional_id=result.transactional_id,
                          producer_id=pending.producer_id, unverified=sorted([*tp, c] for tp, c in unverified.items()))
            _answer(pending, unverified)
        for left_out in batch.transactions.values():  # a transaction the answer left out
            _answer(left_out, {tp: E.UNKNOWN_SERVER_ERROR for tp in left_out.partitions})

    def shutdown(self) -> None:
        for client in self.clients.values():
            client.close("shutdown")
        self.clients.clear()


def _transaction(transactional_id: str, p: PendingVerification) -> Req.AddPartitionsToTxnTransaction:
    by_topic: dict[str, list[int]] = {}
    for topic, index in p.partitions:
        by_topic.setdefault(topic, []).append(index)
    return Req.AddPartitionsToTxnTransaction(
        transactional_id=transactional_id, producer_id=p.producer_id, producer_epoch=p.producer_epoch,
        verify_only=True, topics=[Req.AddPartitionsToTxnTopic(name=n, partitions=ps) for n, ps in by_topic.items()])


def _client_error(code: int, generic_error: bool) -> int:
    if code == E.PRODUCER_FENCED:
        return E.INVALID_PRODUCER_EPOCH  # what producers expect here
    if code == E.TRANSACTION_ABORTABLE and not generic_error:
        return E.INVALID_TXN_STATE       # clients before KIP-890 part 2 do not know it
    return code


def _answer(pending: PendingVerification, errors: dict[TopicPartition, int]) -> None:
    if not pending.answer.done():
        pending.answer.set_result(errors)


# ---------------------------------------------------------------- the leader's side
async def maybe_start_transaction_verification(
        replica_manager: ReplicaManager, manager: AddPartitionsToTxnManager | None, transactional_id: str | None,
        producer_id: int, producer_epoch: int, partitions: dict[TopicPartition, int], generic_error: bool,
) -> tuple[dict[TopicPartition, int], dict[TopicPartition, VerificationGuard]]:
    """ReplicaManager.maybeStartTransactionVerificationForPartitions: `partitions` maps each
    partition to its first batch's base sequence. Returns the errors of partitions that must not
    be appended and the guards of those that may (SENTINEL: already in a transaction here);
    nothing at all when verification is off or the request is not transactional."""
    if transactional_id is None or manager is None:
        return {}, {}
    errors: dict[TopicPartition, int] = {}
    guards: dict[TopicPartition, VerificationGuard] = {}
    for tp, sequence in partitions.items():
        p = replica_manager.get_partition(*tp)
        if p is None or not p.is_leader or p.offline:
            errors[tp] = (replica_manager.missing_partition_error(*tp) if p is None
                          else E.KAFKA_STORAGE_ERROR if p.offline else E.NOT_LEADER_OR_FOLLOWER)
            continue
        psm = p.log.producer_state_manager
        if psm.has_ongoing_transaction(producer_id):
            guards[tp] = SENTINEL
            continue
        guards[tp] = psm.maybe_create_verification_state_entry(producer_id, sequence, producer_epoch,
                                                               replica_manager.rt.now_ms()).verification_guard
    to_verify = [tp for tp, g in guards.items() if g != SENTINEL]
    if to_verify:
        errors.update(await manager.verify_transaction(transactional_id, producer_id, producer_epoch, to_verify,
                                                       generic_error))
    return errors, {tp: g for tp, g in guards.items() if tp not in errors}
