"""The transaction APIs on the wire — request decoding and version-specific answers as Kafka 3.9's
KafkaApis gives them (no authorizer: every authorization passes), on top of the
TransactionCoordinator: AddPartitionsToTxn (0-5; v4+ batched, from brokers, with verify_only),
AddOffsetsToTxn (0-4), EndTxn (0-4), WriteTxnMarkers (0-1, the partition leader's side),
DescribeTransactions (0), ListTransactions (0-1), DescribeProducers (0).

PRODUCER_FENCED is new with KIP-588: older versions get INVALID_PRODUCER_EPOCH instead
(AddPartitionsToTxn < 2, AddOffsetsToTxn < 2, EndTxn < 2; InitProducerId < 4 in
kafkasim.broker.producer_id_manager).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from kafkasim.broker.transaction.coordinator import TransactionCoordinator
from kafkasim.broker.transaction.metadata import TopicPartition
from kafkasim.broker.zk.kafka_zk_client import TopicError, validate_topic_name
from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from kafkasim.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from kafkasim.protocol.messages.describe_producers import DescribeProducersRequest, DescribeProducersResponse
from kafkasim.protocol.messages.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
)
from kafkasim.protocol.messages.end_txn import EndTxnRequest, EndTxnResponse
from kafkasim.protocol.messages.headers import RequestHeader
from kafkasim.protocol.messages.list_transactions import ListTransactionsRequest, ListTransactionsResponse
from kafkasim.protocol.messages.write_txn_markers import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from kafkasim.protocol.primitives import Message
from kafkasim.records.control import end_txn_marker_batch

if TYPE_CHECKING:
    from kafkasim.broker.api_registry import ApiRegistry, Handler
    from kafkasim.broker.metadata_cache import MetadataCache
    from kafkasim.broker.replica_manager import ReplicaManager
    from kafkasim.runtime.api import NodeRuntime

TRANSACTION_VERSIONS: dict[int, tuple[int, int]] = {
    A.ADD_PARTITIONS_TO_TXN: (0, 5),
    A.ADD_OFFSETS_TO_TXN: (0, 4),
    A.END_TXN: (0, 4),
    A.WRITE_TXN_MARKERS: (0, 1),
    A.DESCRIBE_PRODUCERS: (0, 0),
    A.DESCRIBE_TRANSACTIONS: (0, 0),
    A.LIST_TRANSACTIONS: (0, 1),
}
GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"

# The group coordinator's side of a marker on __consumer_offsets: (producer id, partitions of
# __consumer_offsets that got the marker, committed) — GroupCoordinator.onTransactionCompleted.
OnTransactionCompleted = Callable[[int, list[int], bool], None]
# Appends a marker batch as the coordinator origin and waits for acks=all: (topic, partition,
# batch, timeout ms) -> error code.
AppendMarker = Callable[[str, int, bytes, int], Awaitable[int]]


def register(apis: ApiRegistry, txn_apis: TransactionApis) -> None:
    handlers: dict[int, Handler] = {
        A.ADD_PARTITIONS_TO_TXN: txn_apis.handle_add_partitions_to_txn,
        A.ADD_OFFSETS_TO_TXN: txn_apis.handle_add_offsets_to_txn,
        A.END_TXN: txn_apis.handle_end_txn,
        A.WRITE_TXN_MARKERS: txn_apis.handle_write_txn_markers,
        A.DESCRIBE_PRODUCERS: txn_apis.handle_describe_producers,
        A.DESCRIBE_TRANSACTIONS: txn_apis.handle_describe_transactions,
        A.LIST_TRANSACTIONS: txn_apis.handle_list_transactions,
    }
    for key, handler in handlers.items():
        apis.register(key, *TRANSACTION_VERSIONS[key], handler)


def fenced_for(version: int, first_version: int, code: int) -> int:
    """PRODUCER_FENCED as INVALID_PRODUCER_EPOCH for versions that predate it."""
    return E.INVALID_PRODUCER_EPOCH if version < first_version and code == E.PRODUCER_FENCED else code


class TransactionApis:
    def __init__(self, rt: NodeRuntime, coordinator: TransactionCoordinator, metadata_cache: MetadataCache,
                 replica_manager: ReplicaManager, group_partition_for: Callable[[str], int],
                 on_transaction_completed: OnTransactionCompleted, append_marker: AppendMarker,
                 request_timeout_ms: int) -> None:
        self.rt = rt
        self.coordinator = coordinator
        self.metadata_cache = metadata_cache
        self.replica_manager = replica_manager
        self.group_partition_for = group_partition_for
        self.on_transaction_completed = on_transaction_completed
        self.append_marker = append_marker
        self.request_timeout_ms = request_timeout_ms

    def _partition_known(self, tp: TopicPartition) -> bool:
        meta = self.metadata_cache.topic(tp.topic)
        return meta is not None and tp.partition in meta.partitions

    # ---------------------------------------------------------------- AddPartitionsToTxn
    async def handle_add_partitions_to_txn(self, header: RequestHeader, req: AddPartitionsToTxnRequest) -> Message:
        version = header.request_api_version
        R = AddPartitionsToTxnResponse
        if version < 4:
            tps = [TopicPartition(t.name, p) for t in req.v3_and_below_topics for p in t.partitions]
            errors = await self._add_one(req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
                                         req.v3_and_below_producer_epoch, False, tps, version)
            return R(throttle_time_ms=0, results_by_topic_v3_and_below=_topic_results(tps, errors))
        results = []
        for txn in req.transactions:
            tps = [TopicPartition(t.name, p) for t in txn.topics for p in t.partitions]
            errors = await self._add_one(txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.verify_only,
                                         tps, version)
            results.append(R.AddPartitionsToTxnResult(transactional_id=txn.transactional_id,
                                                      topic_results=_topic_results(tps, errors)))
        return R(throttle_time_ms=0, error_code=E.NONE, results_by_transaction=results)

    async def _add_one(self, transactional_id: str, producer_id: int, producer_epoch: int, verify_only: bool,
                       tps: list[TopicPartition], version: int) -> dict[TopicPartition, int]:
        unknown = [tp for tp in tps if not self._partition_known(tp)]
        if unknown:
            # One bad partition fails the transaction's request; the rest were not attempted.
            return {tp: E.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else E.OPERATION_NOT_ATTEMPTED for tp in tps}
        partitions = frozenset(tps)
        if verify_only:
            return self.coordinator.handle_verify_partitions_in_transaction(transactional_id, producer_id,
                                                                            producer_epoch, partitions)
        code = await self.coordinator.handle_add_partitions_to_transaction(transactional_id, producer_id,
                                                                           producer_epoch, partitions)
        code = fenced_for(version, 2, code)
        return {tp: code for tp in tps}

    # ---------------------------------------------------------------- AddOffsetsToTxn
    async def handle_add_offsets_to_txn(self, header: RequestHeader, req: AddOffsetsToTxnRequest) -> Message:
        offsets_tp = TopicPartition(GROUP_METADATA_TOPIC_NAME, self.group_partition_for(req.group_id))
        code = await self.coordinator.handle_add_partitions_to_transaction(
            req.transactional_id, req.producer_id, req.producer_epoch, frozenset({offsets_tp}))
        return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=fenced_for(header.request_api_version, 2, code))

    # ---------------------------------------------------------------- EndTxn
    async def handle_end_txn(self, header: RequestHeader, req: EndTxnRequest) -> Message:
        code = await self.coordinator.handle_end_transaction(req.transactional_id, req.producer_id,
                                                             req.producer_epoch, req.committed)
        return EndTxnResponse(throttle_time_ms=0, error_code=fenced_for(header.request_api_version, 2, code))

    # ---------------------------------------------------------------- WriteTxnMarkers (partition leader)
    async def handle_write_txn_markers(self, header: RequestHeader, req: WriteTxnMarkersRequest) -> Message:
        R = WriteTxnMarkersResponse.WritableTxnMarkerResult
        T = R.WritableTxnMarkerTopicResult
        P = T.WritableTxnMarkerPartitionResult
        results = []
        for marker in req.markers:
            errors = await self._write_marker(marker)
            by_topic: dict[str, list[Any]] = {}
            for tp, code in errors.items():
                by_topic.setdefault(tp.topic, []).append(P(partition_index=tp.partition, error_code=code))
            results.append(R(producer_id=marker.producer_id,
                             topics=[T(name=n, partitions=ps) for n, ps in by_topic.items()]))
        return WriteTxnMarkersResponse(markers=results)

    async def _write_marker(self, marker: WriteTxnMarkersRequest.WritableTxnMarker) -> dict[TopicPartition, int]:
        errors: dict[TopicPartition, int] = {}
        now = self.rt.now_ms()
        for t in marker.topics:
            for index in t.partition_indexes:
                tp = TopicPartition(t.name, index)
                if self.replica_manager.get_partition(t.name, index) is None:
                    errors[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                batch = end_txn_marker_batch(marker.producer_id, marker.producer_epoch, marker.coordinator_epoch,
                                             marker.transaction_result, now)
                errors[tp] = await self.append_marker(t.name, index, batch, self.request_timeout_ms)
        offsets = [tp.partition for tp, code in errors.items()
                   if tp.topic == GROUP_METADATA_TOPIC_NAME and code == E.NONE]
        if offsets:
            # The marker is in __consumer_offsets: materialise (or drop) the pending offsets.
            self.on_transaction_completed(marker.producer_id, offsets, marker.transaction_result)
        self.rt.trace("txn_markers_written", producer_id=marker.producer_id, committed=marker.transaction_result,
                      coordinator_epoch=marker.coordinator_epoch,
                      partitions=[[tp.topic, tp.partition, code] for tp, code in errors.items()])
        return errors

    # ---------------------------------------------------------------- DescribeTransactions / ListTransactions
    async def handle_describe_transactions(self, header: RequestHeader, req: DescribeTransactionsRequest) -> Message:
        St = DescribeTransactionsResponse.TransactionState
        TD = St.TopicData
        states = []
        for txn_id in req.transactional_ids:
            d = self.coordinator.handle_describe_transactions(txn_id)
            by_topic: dict[str, list[int]] = {}
            for tp in d.partitions:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            st = St(error_code=d.error, transactional_id=txn_id,
                    topics=[TD(topic=n, partitions=ps) for n, ps in by_topic.items()])
            if d.error == E.NONE:
                st.transaction_state, st.transaction_timeout_ms = d.state, d.timeout_ms
                st.transaction_start_time_ms = d.start_time_ms
                st.producer_id, st.producer_epoch = d.producer_id, d.producer_epoch
            states.append(st)
        return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=states)

    async def handle_list_transactions(self, header: RequestHeader, req: ListTransactionsRequest) -> Message:
        duration = req.duration_filter if header.request_api_version >= 1 else -1
        code, unknown, found = self.coordinator.handle_list_transactions(
            set(req.producer_id_filters), set(req.state_filters), duration)
        St = ListTransactionsResponse.TransactionState
        return ListTransactionsResponse(
            throttle_time_ms=0, error_code=code, unknown_state_filters=unknown,
            transaction_states=[St(transactional_id=md.transactional_id, producer_id=md.producer_id,
                                   transaction_state=md.state.state_name) for md in found])

    # ---------------------------------------------------------------- DescribeProducers
    async def handle_describe_producers(self, header: RequestHeader, req: DescribeProducersRequest) -> Message:
        TR = DescribeProducersResponse.TopicResponse
        PR = TR.PartitionResponse
        topics = []
        for t in req.topics:
            error: tuple[int, str | None] | None = None
            try:
                validate_topic_name(t.name)
            except TopicError as exc:
                error = (exc.error_code, str(exc))
            if error is None and self.metadata_cache.topic(t.name) is None:
                error = (E.UNKNOWN_TOPIC_OR_PARTITION, E.ERRORS[E.UNKNOWN_TOPIC_OR_PARTITION].message)
            parts = [PR(partition_index=i, error_code=error[0], error_message=error[1]) if error is not None
                     else self._active_producer_state(t.name, i) for i in t.partition_indexes]
            topics.append(TR(name=t.name, partitions=parts))
        return DescribeProducersResponse(throttle_time_ms=0, topics=topics)

    def _active_producer_state(self, topic: str, index: int) -> Any:
        """ReplicaManager.activeProducerState: any replica answers, leader or follower."""
        PR = DescribeProducersResponse.TopicResponse.PartitionResponse
        p = self.replica_manager.get_partition(topic, index)
        if p is None:
            code = E.NOT_LEADER_OR_FOLLOWER if self._partition_known(TopicPartition(topic, index)) \
                else E.UNKNOWN_TOPIC_OR_PARTITION
            return PR(partition_index=index, error_code=code)
        if p.offline:
            return PR(partition_index=index, error_code=E.KAFKA_STORAGE_ERROR)
        PS = PR.ProducerState
        producers = [PS(producer_id=pid, producer_epoch=e.producer_epoch, last_sequence=e.last_seq,
                        last_timestamp=e.last_timestamp, coordinator_epoch=e.coordinator_epoch,
                        current_txn_start_offset=e.current_txn_first_offset)
                     for pid, e in p.log.producer_state_manager.producers.items()]
        return PR(partition_index=index, error_code=E.NONE, active_producers=producers)


def _topic_results(tps: list[TopicPartition], errors: dict[TopicPartition, int]
                   ) -> list[AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult]:
    TR = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
    PR = AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult
    by_topic: dict[str, list[Any]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(PR(partition_index=tp.partition, partition_error_code=errors[tp]))
    return [TR(name=n, results_by_partition=ps) for n, ps in by_topic.items()]
