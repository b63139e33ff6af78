"""Produce (api key 0), versions 0-11, as Kafka 3.9's KafkaApis.handleProduceRequest answers them.

Per version (ProduceRequest.validateRecords, then the log's LogValidator):
  v0-v2   any message format: magic 0/1 message sets are up-converted to one record batch v2
          (kafkasim.records.conversion.up_convert; ReplicaManager.append_records), magic 2
          batches go in as they are — Kafka does not check the magic below v3.
  v3+     exactly one record batch, magic 2 (else INVALID_RECORD).
  v3-v6   zstd is refused (UNSUPPORTED_COMPRESSION_TYPE): clients that can read zstd ask v7+.
  v10+    NOT_LEADER_OR_FOLLOWER carries the current leader, and the response its endpoint
          (KIP-951), so the producer can move without a metadata round trip.
  v3+     a transactional producer's first batch of a transaction to a partition is appended
          only once the transaction coordinator confirms the partition is in the transaction
          (KIP-890 part 1, add_partitions_to_txn_manager.py): else INVALID_TXN_STATE "Partition
          was not added to the transaction" (TRANSACTION_ABORTABLE from v11), and a coordinator
          that cannot answer now NOT_ENOUGH_REPLICAS, which every producer retries.
Internal topics (__consumer_offsets, __transaction_state) take no client's writes
(INVALID_TOPIC_EXCEPTION), only the admin client's. acks=0 gets no response at all — and when
a partition failed, the connection is closed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafkasim.broker.add_partitions_to_txn_manager import maybe_start_transaction_verification
from kafkasim.broker.api_registry import CloseConnection
from kafkasim.broker.metadata_cache import INTERNAL_TOPICS
from kafkasim.broker.request_context import context_of
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.produce import ProduceRequest, ProduceResponse
from kafkasim.records.batch import MAGIC_VALUE_V2, iter_batches, peek_magic
from kafkasim.records.compression import CompressionType
from kafkasim.records.errors import CorruptRecordError
from kafkasim.storage.verification import SENTINEL, VerificationGuard

if TYPE_CHECKING:
    from kafkasim.broker.metadata_cache import MetadataCache
    from kafkasim.broker.replica_manager import ReplicaManager
    from kafkasim.protocol.messages.headers import RequestHeader
    from kafkasim.runtime.api import NodeRuntime

ADMIN_CLIENT_ID = "__admin_client"   # AdminUtils.ADMIN_CLIENT_ID
# Verification errors older clients may not retry correctly: NOT_ENOUGH_REPLICAS, which they do
# (and which does not trigger a metadata refresh) — ReplicaManager.handleProduceAppend.
VERIFY_RETRIABLE = frozenset({E.CONCURRENT_TRANSACTIONS, E.NETWORK_EXCEPTION, E.COORDINATOR_LOAD_IN_PROGRESS,
                              E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR})
R = ProduceResponse.TopicProduceResponse
PR = R.PartitionProduceResponse
# ReplicaManager.appendToLocalLog answers these with LogAppendInfo.UNKNOWN_LOG_APPEND_INFO (log
# start offset -1); any other refusal (a sequence or epoch error, NOT_ENOUGH_REPLICAS, a record
# validation error) carries the partition's log start offset (processFailedRecord).
UNKNOWN_LOG_APPEND_INFO_ERRORS = frozenset({
    E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_LEADER_OR_FOLLOWER, E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE,
    E.CORRUPT_MESSAGE, E.KAFKA_STORAGE_ERROR})


def validate_records(version: int, records: Any) -> tuple[int, str | None]:
    """ProduceRequest.validateRecords: (error, message) for what a version may carry."""
    if version < 3:
        return E.NONE, None
    if records is None or len(records) == 0:
        return E.INVALID_RECORD, f"Produce requests with version {version} must have at least one record batch " \
                                 "per partition"
    if len(records) < 17 or peek_magic(records, 0) != MAGIC_VALUE_V2:
        return E.INVALID_RECORD, f"Produce requests with version {version} are only allowed to contain record " \
                                 "batches with magic version 2"
    try:
        batches = list(iter_batches(records))
    except CorruptRecordError:
        return E.NONE, None   # the log's validation answers corrupt data
    if batches and version < 7 and batches[0][1].compression_id == CompressionType.ZSTD:
        return E.UNSUPPORTED_COMPRESSION_TYPE, f"Produce requests with version {version} are not allowed to use " \
                                               "ZStandard compression"
    if len(batches) > 1:
        return E.INVALID_RECORD, f"Produce requests with version {version} are only allowed to contain exactly " \
                                 "one record batch per partition"
    return E.NONE, None


class ProduceApi:
    def __init__(self, rt: NodeRuntime, replica_manager: ReplicaManager, metadata_cache: MetadataCache) -> None:
        self.rt = rt
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache

    async def handle(self, header: RequestHeader, req: ProduceRequest) -> ProduceResponse | None:
        """Append every partition, then — for acks=all — wait for each append to be replicated
        (DelayedProduce: until the high watermark passes it, or the request's timeout_ms)."""
        rm, rt, acks = self.replica_manager, self.rt, req.acks
        version = header.request_api_version
        deadline = rt.monotonic_ms() + max(0, req.timeout_ms)
        responses = []
        delayed: list[tuple[Any, str, int, int]] = []
        refused, guards = await self._verify(version, req)
        for td in req.topic_data:
            parts = []
            for pd in td.partition_data:
                verified = refused.get((td.name, pd.index)), guards.get((td.name, pd.index))
                part, required = await self._append(version, acks, td.name, pd, header.client_id, verified)
                parts.append(part)
                if required is not None:
                    delayed.append((part, td.name, pd.index, required))
            responses.append(R(name=td.name, partition_responses=parts))
        for part, topic, index, required in delayed:
            code = await rm.wait_for_replication(topic, index, required, deadline)
            if code != E.NONE:
                part.error_code, part.base_offset = code, -1
                rt.trace("produce_not_replicated", topic=topic, partition=index, error=code, required_offset=required)
        if acks == 0:
            if any(part.error_code != E.NONE for topic in responses for part in topic.partition_responses):
                # No response to carry the error: Kafka closes the connection, so the producer
                # notices and refreshes its metadata.
                rt.trace("connection_closed", reason="acks=0 produce failed")
                raise CloseConnection("error in a produce request with acks=0")
            return None  # acks=0: the producer expects no response at all
        endpoints = self.leader_hints(responses, context_of(header).listener_name) if version >= 10 else []
        return ProduceResponse(responses=responses, throttle_time_ms=0, node_endpoints=endpoints)

    async def _verify(self, version: int, req: ProduceRequest
                      ) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], VerificationGuard]]:
        """KIP-890 part 1 for the partitions whose batch is transactional: (errors, guards)."""
        manager = self.replica_manager.add_partitions_to_txn_manager
        if manager is None or version < 3 or not req.transactional_id:
            return {}, {}
        first: dict[tuple[str, int], int] = {}
        pid_epoch: tuple[int, int] | None = None
        for td in req.topic_data:
            for pd in td.partition_data:
                h = _first_transactional_header(pd.records)
                if h is not None:
                    first[(td.name, pd.index)] = h.base_sequence
                    pid_epoch = (h.producer_id, h.producer_epoch)
        if pid_epoch is None:
            return {}, {tp: SENTINEL for tp in first}
        errors, guards = await maybe_start_transaction_verification(
            self.replica_manager, manager, req.transactional_id, *pid_epoch, first, generic_error=version > 10)
        return errors, {**{tp: SENTINEL for tp in first}, **guards}

    async def _append(self, version: int, acks: int, topic: str, pd: Any, client_id: str | None,
                      verified: tuple[int | None, VerificationGuard | None] = (None, None)
                      ) -> tuple[Any, int | None]:
        """One partition's answer, and for acks=all the offset replication must reach."""
        if acks not in (0, 1, -1):
            return PR(index=pd.index, error_code=E.INVALID_REQUIRED_ACKS, base_offset=-1, log_append_time_ms=-1,
                      log_start_offset=-1), None
        meta = self.metadata_cache.topic(topic)
        if meta is None or pd.index not in meta.partitions:
            return PR(index=pd.index, error_code=E.UNKNOWN_TOPIC_OR_PARTITION, base_offset=-1,
                      log_append_time_ms=-1, log_start_offset=-1), None
        code, message = validate_records(version, pd.records)
        if code != E.NONE:
            return PR(index=pd.index, error_code=code, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1,
                      record_errors=[], error_message=message), None
        if topic in INTERNAL_TOPICS and client_id != ADMIN_CLIENT_ID:
            # ReplicaManager.appendToLocalLog: only the admin client may write an internal topic.
            return PR(index=pd.index, error_code=E.INVALID_TOPIC_EXCEPTION, base_offset=-1, log_append_time_ms=-1,
                      log_start_offset=-1), None
        refused, guard = verified
        if refused is not None:
            return _verification_refused(self.rt, topic, pd.index, refused), None
        if self.rt.buggify("produce.not_leader.spurious"):
            # As a Produce that raced a leadership change and its reversal sees it: refused before
            # anything is appended; the producer refreshes its metadata and retries the batch.
            self.rt.trace("produce_refused", topic=topic, partition=pd.index, error=E.NOT_LEADER_OR_FOLLOWER,
                          reason="buggify")
            return PR(index=pd.index, error_code=E.NOT_LEADER_OR_FOLLOWER, base_offset=-1, log_append_time_ms=-1,
                      log_start_offset=-1, record_errors=[], error_message=None), None
        res = await self.replica_manager.append_records(topic, pd.index, pd.records, acks, verification_guard=guard)
        self.rt.trace("produce", topic=topic, partition=pd.index, error=res.error_code,
                      base_offset=res.base_offset, records=res.info.record_count if res.info else 0)
        if res.error_code != E.NONE:
            # No offsets; Kafka sends a message only with record errors (RecordValidationException),
            # never for a refused batch as a whole. The log start offset is known for every error
            # but ReplicaManager.appendToLocalLog's own list (UNKNOWN_LOG_APPEND_INFO).
            lso = -1 if res.error_code in UNKNOWN_LOG_APPEND_INFO_ERRORS else res.log_start_offset
            part = PR(index=pd.index, error_code=res.error_code, base_offset=-1, log_append_time_ms=-1,
                      log_start_offset=lso, record_errors=[], error_message=None)
            self.rt.trace("produce_refused", topic=topic, partition=pd.index, error=res.error_code,
                          reason=res.error_message or "")
            return part, None
        append_time = res.info.log_append_time if res.info is not None else -1
        part = PR(index=pd.index, error_code=res.error_code, base_offset=res.base_offset,
                  log_append_time_ms=append_time, log_start_offset=res.log_start_offset,
                  record_errors=[], error_message=None)
        if acks == -1 and res.error_code == E.NONE and res.info is not None:
            return part, res.info.last_offset + 1
        return part, None

    def leader_hints(self, responses: list[Any], listener: str) -> list[Any]:
        """KIP-951: NOT_LEADER_OR_FOLLOWER partitions name the leader this broker knows (also
        for an injected one: broker/request_faults.py)."""
        NE = ProduceResponse.NodeEndpoint
        leaders: set[int] = set()
        for topic in responses:
            meta = self.metadata_cache.topic(topic.name)
            for part in topic.partition_responses:
                if part.error_code != E.NOT_LEADER_OR_FOLLOWER:
                    continue
                p = self.replica_manager.get_partition(topic.name, part.index)
                pm = meta.partitions.get(part.index) if meta is not None else None
                if p is not None:
                    leader, epoch = (p.leader_id if p.leader_id is not None else -1), p.leader_epoch
                elif pm is not None:
                    leader, epoch = pm.leader, pm.leader_epoch
                else:
                    leader, epoch = -1, -1
                part.current_leader = PR.LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch)
                leaders.add(leader)
        brokers = self.metadata_cache.brokers
        # Each leader's endpoint on the request's listener (Kafka: getAliveBrokerNode(id, listenerName)).
        return [NE(node_id=b, host=ep[0], port=ep[1], rack=brokers[b].rack)
                for b in sorted(leaders) if b in brokers and (ep := brokers[b].endpoint(listener)) is not None]


def _first_transactional_header(records: Any) -> Any:
    """The partition's batch header if it is a transactional data batch (v3+: exactly one)."""
    if records is None or len(records) < 61 or peek_magic(records, 0) != MAGIC_VALUE_V2:
        return None
    try:
        for _, h in iter_batches(records):
            return h if h.is_transactional and h.has_producer_id and not h.is_control else None
    except CorruptRecordError:
        return None
    return None


def _verification_refused(rt: NodeRuntime, topic: str, index: int, error: int) -> Any:
    """ReplicaManager.handleProduceAppend's postVerificationCallback: the error, with Kafka's
    message where it substitutes its own exception."""
    message: str | None = None
    if error == E.INVALID_TXN_STATE:
        message = "Partition was not added to the transaction"
    elif error in VERIFY_RETRIABLE:
        message = f"Unable to verify the partition has been added to the transaction. Underlying error: " \
                  f"{E.error_name(error)}"
        error = E.NOT_ENOUGH_REPLICAS
    rt.trace("produce_refused", topic=topic, partition=index, error=error, reason=message or "verification")
    return PR(index=index, error_code=error, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1,
              record_errors=[], error_message=message)
