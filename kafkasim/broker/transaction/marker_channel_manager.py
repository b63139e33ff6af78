"""TransactionMarkerChannelManager: the coordinator's sender of transaction markers — Kafka 3.9's
TransactionMarkerChannelManager and TransactionMarkerRequestCompletionHandler.

When a transaction ends (PrepareCommit/PrepareAbort written) its markers are queued per
destination broker: the current leader of each partition of the transaction in this broker's
metadata cache (a partition without a live leader waits in the unknown-broker queue; one no
longer in the metadata is dropped — deleted). A sender loop drains every queue into one
WriteTxnMarkers request (v1, what inter.broker.protocol.version 3.9 sends) per broker. Answers:
NONE removes the partition from the transaction; NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR are retried (the leader
looked up again, after retry.backoff.ms); INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED
cancel the transaction's markers; a lost connection re-queues the whole request. Once no
partition is left the coordinator writes CompleteCommit/CompleteAbort (retried while the log
answers COORDINATOR_NOT_AVAILABLE). A change of coordinator epoch (resigned, re-elected) cancels
whatever was pending: the new coordinator's load sends the markers again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkasim.broker.security.inter_broker import inter_broker_address
from kafkasim.broker.transaction.metadata import TopicPartition, TransactionMetadata, TxnTransitMetadata
from kafkasim.client.network_client import NetworkClient
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.write_txn_markers import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from kafkasim.runtime.api import NetworkError, RuntimeTimeout

if TYPE_CHECKING:
    from kafkasim.broker.metadata_cache import MetadataCache
    from kafkasim.broker.transaction.state_manager import TransactionStateManager
    from kafkasim.client.channel_security import ChannelSecurity
    from kafkasim.runtime.api import Future, NodeRuntime

WRITE_TXN_MARKERS_VERSION = 1   # MetadataVersion.writeTxnMarkersRequestVersion for IBP >= 2.8
RETRY_BACKOFF_MS = 100          # retry.backoff.ms of the inter-broker client
UNKNOWN_BROKER = -1
RETRIABLE = frozenset({E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_LEADER_OR_FOLLOWER, E.NOT_ENOUGH_REPLICAS,
                       E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.REQUEST_TIMED_OUT, E.KAFKA_STORAGE_ERROR})
FENCED = frozenset({E.INVALID_PRODUCER_EPOCH, E.TRANSACTION_COORDINATOR_FENCED})
DROPPED = frozenset({E.UNSUPPORTED_FOR_MESSAGE_FORMAT, E.UNSUPPORTED_VERSION})


@dataclass(eq=False)
class PendingCompleteTxn:
    transactional_id: str
    coordinator_epoch: int
    txn_metadata: TransactionMetadata
    new_metadata: TxnTransitMetadata


@dataclass(frozen=True)
class TxnMarkerEntry:
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    committed: bool
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class PendingMarker:
    pending: PendingCompleteTxn
    marker: TxnMarkerEntry
    txn_topic_partition: int


# Appends the complete transition: (transactional id, coordinator epoch, transit, retry_on_error) -> error.
AppendToLog = Callable[[str, int, TxnTransitMetadata, Callable[[int], bool]], Any]


class TransactionMarkerChannelManager:
    def __init__(self, rt: NodeRuntime, broker_id: int, metadata_cache: MetadataCache,
                 state_manager: TransactionStateManager, request_timeout_ms: int,
                 security: ChannelSecurity | None = None) -> None:
        self.rt = rt
        self.security = security   # the inter-broker listener's TLS/SASL (security/inter_broker.py)
        self.broker_id = broker_id
        self.metadata_cache = metadata_cache
        self.state_manager = state_manager
        self.request_timeout_ms = request_timeout_ms
        self.queues: dict[int, list[PendingMarker]] = {}           # destination broker (-1: unknown)
        self.transactions_with_pending_markers: dict[str, PendingCompleteTxn] = {}
        self.log_append_retry_queue: list[PendingCompleteTxn] = []
        self.clients: dict[int, NetworkClient] = {}
        self._missing_since: dict[tuple[str, TopicPartition], float] = {}
        self._wakeup: Future[Any] | None = None
        self._running = False

    # ---------------------------------------------------------------- queueing
    def add_txn_markers_to_send(self, coordinator_epoch: int, committed: bool, md: TransactionMetadata,
                                new_metadata: TxnTransitMetadata) -> None:
        pending = PendingCompleteTxn(md.transactional_id, coordinator_epoch, md, new_metadata)
        self.transactions_with_pending_markers[md.transactional_id] = pending
        self.add_txn_markers_to_broker_queue(md.producer_id, md.producer_epoch, committed, pending,
                                             list(md.topic_partitions))
        self.maybe_write_txn_completion(md.transactional_id)

    def _leader_of(self, tp: TopicPartition) -> int | None:
        """The partition's live leader, UNKNOWN_BROKER when it has none now, None when the
        partition is not in the metadata (deleted)."""
        meta = self.metadata_cache.topic(tp.topic)
        pm = meta.partitions.get(tp.partition) if meta is not None else None
        if pm is None:
            return None
        return pm.leader if pm.leader in self.metadata_cache.brokers else UNKNOWN_BROKER

    def _destination(self, transactional_id: str, tp: TopicPartition) -> int | None:
        """The leader to send to; None once the partition has been missing from the metadata for
        request.timeout.ms (deleted). Kafka drops it at once, relying on UpdateMetadata coming
        before LeaderAndIsr; here a just-restarted coordinator may load its log first."""
        leader = self._leader_of(tp)
        key = (transactional_id, tp)
        if leader is not None:
            self._missing_since.pop(key, None)
            return leader
        since = self._missing_since.setdefault(key, self.rt.monotonic_ms())
        if self.rt.monotonic_ms() - since < self.request_timeout_ms:
            return UNKNOWN_BROKER
        del self._missing_since[key]
        return None

    def add_txn_markers_to_broker_queue(self, producer_id: int, producer_epoch: int, committed: bool,
                                        pending: PendingCompleteTxn, partitions: list[TopicPartition]) -> None:
        txn_partition = self.state_manager.partition_for(pending.transactional_id)
        by_dest: dict[int | None, list[TopicPartition]] = {}
        for tp in partitions:
            by_dest.setdefault(self._destination(pending.transactional_id, tp), []).append(tp)
        for dest, tps in by_dest.items():
            if dest is not None:
                marker = TxnMarkerEntry(producer_id, producer_epoch, pending.coordinator_epoch, committed, tuple(tps))
                self.queues.setdefault(dest, []).append(PendingMarker(pending, marker, txn_partition))
                continue
            code, entry = self.state_manager.get_transaction_state(pending.transactional_id)
            if code != E.NONE or entry is None or entry.coordinator_epoch != pending.coordinator_epoch:
                self._remove_pending(pending)
                continue
            # Deleted partitions: nothing to mark.
            for tp in tps:
                entry.transaction_metadata.remove_partition(tp)
            self.maybe_write_txn_completion(pending.transactional_id)
        self.wakeup()

    def maybe_write_txn_completion(self, transactional_id: str) -> None:
        pending = self.transactions_with_pending_markers.get(transactional_id)
        if pending is None or pending.txn_metadata.topic_partitions:
            return
        del self.transactions_with_pending_markers[transactional_id]
        code, entry = self.state_manager.get_transaction_state(transactional_id)
        if code != E.NONE or entry is None or entry.coordinator_epoch != pending.coordinator_epoch:
            # Not the coordinator any more, or loading: the loader completes it.
            self.rt.trace("txn_completion_cancelled", transactional_id=transactional_id, error=code)
            return
        self.rt.spawn(self._try_append_to_log(pending), name=f"txn-complete {transactional_id}")

    async def _try_append_to_log(self, pending: PendingCompleteTxn) -> None:
        code = await self.state_manager.append_transaction_to_log(
            pending.transactional_id, pending.coordinator_epoch, pending.new_metadata,
            lambda e: e == E.COORDINATOR_NOT_AVAILABLE)
        if code == E.COORDINATOR_NOT_AVAILABLE:
            self.log_append_retry_queue.append(pending)
            self.wakeup()
        self.rt.trace("txn_completed", transactional_id=pending.transactional_id,
                      state=pending.new_metadata.txn_state.state_name, error=code)

    def remove_markers_for_txn_topic_partition(self, txn_topic_partition: int) -> None:
        for dest in sorted(self.queues):
            keep = []
            for pm in self.queues[dest]:
                if pm.txn_topic_partition == txn_topic_partition:
                    self._remove_pending(pm.pending)
                else:
                    keep.append(pm)
            self.queues[dest] = keep

    def _remove_pending(self, pending: PendingCompleteTxn) -> None:
        if self.transactions_with_pending_markers.get(pending.transactional_id) is pending:
            del self.transactions_with_pending_markers[pending.transactional_id]

    # ---------------------------------------------------------------- the sender
    def start(self) -> None:
        if not self._running:
            self._running = True
            self.rt.spawn(self._run(), name=f"TxnMarkerSenderThread-{self.broker_id}")

    def shutdown(self) -> None:
        self._running = False
        self.wakeup()
        for client in self.clients.values():
            client.close("shutdown")
        self.clients.clear()
        self.queues.clear()

    def wakeup(self) -> None:
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    async def _run(self) -> None:
        while self._running:
            self._generate_requests()
            # Markers waiting for a leader (or log appends to retry) are looked at again after a
            # backoff; otherwise sleep until something is queued.
            waiting = bool(self.queues.get(UNKNOWN_BROKER)) or bool(self.log_append_retry_queue)
            self._wakeup = self.rt.future()
            await self.rt.wait_first([self._wakeup], RETRY_BACKOFF_MS if waiting else None)

    def _generate_requests(self) -> None:
        retries, self.log_append_retry_queue = self.log_append_retry_queue, []
        for pending in retries:
            self.rt.spawn(self._try_append_to_log(pending), name=f"txn-complete {pending.transactional_id}")
        for pm in self.queues.pop(UNKNOWN_BROKER, []):
            m = pm.marker
            self.add_txn_markers_to_broker_queue(m.producer_id, m.producer_epoch, m.committed, pm.pending,
                                                 list(m.partitions))
        for dest in sorted(self.queues):
            entries = self.queues[dest]
            if dest == UNKNOWN_BROKER or not entries:
                continue
            self.queues[dest] = []
            self.rt.spawn(self._send(dest, entries), name=f"txn-markers to {dest}")

    async def _send(self, dest: int, entries: list[PendingMarker]) -> None:
        request = build_request([pm.marker for pm in entries])
        if self.rt.buggify("txn.markers.slow"):  # the marker sender is behind: markers (and the LSO) lag
            await self.rt.sleep(RETRY_BACKOFF_MS)
        try:
            client = await self._client(dest)
            resp: WriteTxnMarkersResponse | None = await client.send(request, WRITE_TXN_MARKERS_VERSION,
                                                                      self.request_timeout_ms)
        except (NetworkError, RuntimeTimeout, KeyError) as exc:
            self.rt.trace("txn_markers_disconnected", destination=dest, error=str(exc))
            self.clients.pop(dest, None)
            resp = None  # (no await in an except block: kafka_zk_client._get_or_none says why)
        if resp is None:
            await self.rt.sleep(RETRY_BACKOFF_MS)
            self._on_disconnected(entries)
            return
        errors = response_errors(resp)
        self.rt.trace("txn_markers_sent", destination=dest,
                      markers=[[pm.marker.producer_id, pm.marker.committed, len(pm.marker.partitions)]
                               for pm in entries])
        for pm in entries:
            self._on_marker_response(pm, errors.get(pm.marker.producer_id, {}))

    async def _client(self, dest: int) -> NetworkClient:
        client = self.clients.get(dest)
        if client is not None and not client.closed:
            return client
        broker = self.metadata_cache.brokers[dest]
        client = NetworkClient(self.rt, *inter_broker_address(broker, self.security),
                               f"broker-{self.broker_id}-txn-marker-sender", security=self.security)
        await client.connect(self.request_timeout_ms)
        self.clients[dest] = client
        return client

    # ---------------------------------------------------------------- answers
    def _current(self, pm: PendingMarker) -> TransactionMetadata | None:
        """The transaction's metadata if this coordinator epoch still owns it, else cancel."""
        code, entry = self.state_manager.get_transaction_state(pm.pending.transactional_id)
        if code != E.NONE or entry is None or entry.coordinator_epoch != pm.marker.coordinator_epoch:
            self._remove_pending(pm.pending)
            return None
        if self.transactions_with_pending_markers.get(pm.pending.transactional_id) is not pm.pending:
            # An answer for a transaction whose markers are no longer pending: a marker sent
            # twice (re-queued after a lost connection while the first request got through) after
            # the other copy completed it — or the id's next transaction is ending now. Nothing
            # of this one is left to remove (TransactionMetadata.removePartition would refuse:
            # the state is no longer PrepareCommit/PrepareAbort).
            self.rt.trace("txn_marker_stale_answer", transactional_id=pm.pending.transactional_id)
            return None
        return entry.transaction_metadata

    def _on_disconnected(self, entries: list[PendingMarker]) -> None:
        for pm in entries:
            if self._current(pm) is not None:
                m = pm.marker
                self.add_txn_markers_to_broker_queue(m.producer_id, m.producer_epoch, m.committed, pm.pending,
                                                     list(m.partitions))

    def _on_marker_response(self, pm: PendingMarker, errors: dict[TopicPartition, int]) -> None:
        md = self._current(pm)
        if md is None:
            return
        retry: list[TopicPartition] = []
        for tp in pm.marker.partitions:
            code = errors.get(tp, E.UNKNOWN_SERVER_ERROR)
            if code == E.NONE or code in DROPPED:
                md.remove_partition(tp)
            elif code in RETRIABLE:
                retry.append(tp)
            elif code in FENCED:
                self.rt.trace("txn_markers_fenced", transactional_id=pm.pending.transactional_id, error=code)
                self._remove_pending(pm.pending)
                return
            else:
                # Kafka throws (a bug); keep retrying rather than lose the transaction's markers.
                self.rt.trace("txn_marker_unexpected_error", transactional_id=pm.pending.transactional_id,
                              topic=tp.topic, partition=tp.partition, error=code)
                retry.append(tp)
        if retry:
            m = pm.marker
            self.rt.call_later(RETRY_BACKOFF_MS, lambda: self.add_txn_markers_to_broker_queue(
                m.producer_id, m.producer_epoch, m.committed, pm.pending, retry))
        else:
            self.maybe_write_txn_completion(pm.pending.transactional_id)


def build_request(markers: list[TxnMarkerEntry]) -> WriteTxnMarkersRequest:
    M = WriteTxnMarkersRequest.WritableTxnMarker
    T = M.WritableTxnMarkerTopic
    out = []
    for m in markers:
        by_topic: dict[str, list[int]] = {}
        for tp in m.partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        out.append(M(producer_id=m.producer_id, producer_epoch=m.producer_epoch, transaction_result=m.committed,
                     topics=[T(name=n, partition_indexes=ps) for n, ps in by_topic.items()],
                     coordinator_epoch=m.coordinator_epoch))
    return WriteTxnMarkersRequest(markers=out)


def response_errors(resp: WriteTxnMarkersResponse) -> dict[int, dict[TopicPartition, int]]:
    """WriteTxnMarkersResponse.errorsByProducerId."""
    out: dict[int, dict[TopicPartition, int]] = {}
    for r in resp.markers:
        errs = out.setdefault(r.producer_id, {})
        for t in r.topics:
            for p in t.partitions:
                errs[TopicPartition(t.name, p.partition_index)] = p.error_code
    return out
