"""KafkaApis: one handler per API key, turning a decoded request into a response message.

What the broker ADVERTISES (ApiVersions) is exactly what the handlers implement, with minimums
low enough for old clients (aiokafka refuses a broker whose minimum exceeds its maximum) and
Fetch capped at 12 because topic IDs are not served end to end (clients send topic IDs from
Fetch 13 on). Produce starts at 3 and Fetch at 4: the versions that carry record batch v2,
which every client in scope uses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kafkasim.broker import admin_apis, controller_apis
from kafkasim.broker import producer_id_manager as producer_id_manager_module
from kafkasim.broker.admin_apis import AdminApis, AdminManager
from kafkasim.broker.api_registry import Handler
from kafkasim.broker.controller_apis import ControllerApis
from kafkasim.broker.delayed_topic_ops import DelayedCreatePartitions
from kafkasim.broker.group.apis import GroupApis
from kafkasim.broker.group.apis import register as register_group_apis
from kafkasim.broker.group.txn_offsets import register as register_txn_offset_commit
from kafkasim.broker.replica_manager import FetchSpec
from kafkasim.broker.transaction import apis as transaction_apis
from kafkasim.broker.transaction.marker_append import append_coordinator_batch
from kafkasim.broker.zk.kafka_zk_client import TopicError
from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafkasim.protocol.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from kafkasim.protocol.messages.fetch import FetchRequest, FetchResponse
from kafkasim.protocol.messages.headers import RequestHeader
from kafkasim.protocol.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from kafkasim.protocol.messages.metadata import MetadataRequest, MetadataResponse
from kafkasim.protocol.messages.produce import ProduceRequest, ProduceResponse
from kafkasim.protocol.primitives import Message

if TYPE_CHECKING:
    from kafkasim.broker.config import BrokerConfig
    from kafkasim.broker.controller.kafka_controller import KafkaController
    from kafkasim.broker.group.coordinator import GroupCoordinator
    from kafkasim.broker.metadata_cache import MetadataCache
    from kafkasim.broker.partition import Partition
    from kafkasim.broker.replica_manager import ReplicaManager
    from kafkasim.broker.topic_admin import TopicAdmin
    from kafkasim.broker.transaction.coordinator import TransactionCoordinator
    from kafkasim.broker.zk.kafka_zk_client import KafkaZkClient
    from kafkasim.runtime.api import NodeRuntime

# api key -> (min, max) advertised by the core handlers below; feature modules (groups, admin,
# idempotence, ...) add theirs with KafkaApis.register().
CORE_VERSIONS: dict[int, tuple[int, int]] = {
    A.PRODUCE: (3, 9),
    A.FETCH: (4, 12),
    A.LIST_OFFSETS: (1, 7),
    A.METADATA: (0, 12),
    A.API_VERSIONS: (0, 3),
    A.CREATE_TOPICS: (2, 7),
}

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
ZERO_UUID = bytes(16)


class KafkaApis:
    def __init__(self, rt: NodeRuntime, config: BrokerConfig, replica_manager: ReplicaManager,
                 metadata_cache: MetadataCache, controller: KafkaController, topic_admin: TopicAdmin,
                 group_coordinator: GroupCoordinator, admin_manager: AdminManager,
                 txn_coordinator: TransactionCoordinator, kzk: KafkaZkClient,
                 broker_epoch: Callable[[], int]) -> None:
        """`broker_epoch` is read per request (it changes when the broker re-registers)."""
        self.rt = rt
        self.config = config
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        self.controller = controller
        self.topic_admin = topic_admin
        self.group_coordinator = group_coordinator
        self.supported: dict[int, tuple[int, int]] = {}
        self.handlers: dict[int, Handler] = {}
        core: dict[int, Handler] = {
            A.API_VERSIONS: self.handle_api_versions,
            A.METADATA: self.handle_metadata,
            A.PRODUCE: self.handle_produce,
            A.FETCH: self.handle_fetch,
            A.LIST_OFFSETS: self.handle_list_offsets,
            A.CREATE_TOPICS: self.handle_create_topics,
        }
        for key, handler in core.items():
            self.register(key, *CORE_VERSIONS[key], handler)
        register_group_apis(self, GroupApis(rt, config, metadata_cache, group_coordinator,
                                            topic_admin.create_topic, txn_coordinator))
        producer_id_manager_module.register(self, txn_coordinator)  # InitProducerId
        register_txn_offset_commit(self, group_coordinator, metadata_cache)
        # AddPartitionsToTxn, EndTxn, WriteTxnMarkers, ... (TxnOffsetCommit is the group's)
        transaction_apis.register(self, transaction_apis.TransactionApis(
            rt, txn_coordinator, metadata_cache, replica_manager, group_coordinator.partition_for,
            group_coordinator.on_transaction_completed,
            lambda topic, partition, batch, timeout: append_coordinator_batch(
                rt, replica_manager, topic, partition, batch, timeout),
            config.request_timeout_ms))
        # DeleteTopics, CreatePartitions, configs, DeleteRecords, ...
        admin_apis.register(self, AdminApis(rt, config, admin_manager, replica_manager, metadata_cache, kzk,
                                            topic_admin))
        # LeaderAndIsr, UpdateMetadata, StopReplica, ...
        self.controller_apis = ControllerApis(rt, replica_manager, metadata_cache, controller, group_coordinator,
                                              topic_admin, broker_epoch)
        controller_apis.register(self, self.controller_apis)

    def register(self, api_key: int, min_version: int, max_version: int, handler: Handler) -> None:
        """Advertise [min, max] for api_key and route its requests to handler. Only what is
        registered is advertised, so ApiVersions never claims an API the broker lacks."""
        self.supported[api_key] = (min_version, max_version)
        self.handlers[api_key] = handler

    def is_supported(self, api_key: int, version: int) -> bool:
        rng = self.supported.get(api_key)
        return rng is not None and rng[0] <= version <= rng[1]

    async def handle(self, header: RequestHeader, request: Any) -> Message | None:
        return await self.handlers[header.request_api_key](header, request)

    # ---------------------------------------------------------------- ApiVersions
    async def handle_api_versions(self, header: RequestHeader, req: ApiVersionsRequest) -> Message:
        keys = [ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                for k, (lo, hi) in sorted(self.supported.items())]
        return ApiVersionsResponse(error_code=E.NONE, api_keys=keys, throttle_time_ms=0)

    # ---------------------------------------------------------------- Metadata
    async def handle_metadata(self, header: RequestHeader, req: MetadataRequest) -> Message:
        cache = self.metadata_cache
        version = header.request_api_version
        if req.topics is None or (version == 0 and not req.topics):
            names: list[str | None] = [*sorted(cache.topics)]
        else:
            names = [t.name for t in req.topics]
        allow_create = req.allow_auto_topic_creation if version >= 4 else True
        topics = []
        for name in names:
            topics.append(await self._topic_metadata(name, allow_create and self.config.auto_create_topics_enable))
        brokers = [MetadataResponse.MetadataResponseBroker(node_id=b.broker_id, host=b.host, port=b.port, rack=b.rack)
                   for b in sorted(cache.brokers.values(), key=lambda b: b.broker_id)]
        return MetadataResponse(throttle_time_ms=0, brokers=brokers, cluster_id=cache.cluster_id,
                                controller_id=cache.controller_id, topics=topics,
                                cluster_authorized_operations=-2147483648)

    async def _topic_metadata(self, name: str | None, auto_create: bool) -> Any:
        T = MetadataResponse.MetadataResponseTopic
        if name is None:
            return T(error_code=E.UNKNOWN_TOPIC_OR_PARTITION, name=None, topic_id=ZERO_UUID, partitions=[])
        cache = self.metadata_cache
        meta = cache.topic(name)
        if meta is None:
            if not auto_create:
                return T(error_code=E.UNKNOWN_TOPIC_OR_PARTITION, name=name, topic_id=ZERO_UUID, partitions=[])
            if self.config.broker_id not in cache.brokers:
                # No UpdateMetadata yet (just started): the live brokers are unknown, so the
                # replicas cannot be assigned. Not ready — the client asks again.
                return T(error_code=E.LEADER_NOT_AVAILABLE, name=name, topic_id=ZERO_UUID, partitions=[])
            try:
                await self.topic_admin.create_topic(name, -1, -1, None, {})
            except TopicError as exc:
                code = exc.error_code if exc.error_code != E.TOPIC_ALREADY_EXISTS else E.LEADER_NOT_AVAILABLE
                return T(error_code=code, name=name, topic_id=ZERO_UUID, partitions=[])
            # As Kafka answers a Metadata request that auto-created the topic: not ready yet.
            return T(error_code=E.LEADER_NOT_AVAILABLE, name=name, topic_id=ZERO_UUID, partitions=[])
        P = T.MetadataResponsePartition
        alive = self.metadata_cache.brokers
        parts = []
        for i, pm in sorted(meta.partitions.items()):
            # A leader that is not a live broker is no leader (Kafka's ZkMetadataCache).
            if pm.leader in alive:
                parts.append(P(error_code=E.NONE, partition_index=i, leader_id=pm.leader, leader_epoch=pm.leader_epoch,
                               replica_nodes=list(pm.replicas), isr_nodes=list(pm.isr),
                               offline_replicas=list(pm.offline_replicas)))
            else:
                parts.append(P(error_code=E.LEADER_NOT_AVAILABLE, partition_index=i, leader_id=-1,
                               leader_epoch=pm.leader_epoch, replica_nodes=list(pm.replicas), isr_nodes=list(pm.isr),
                               offline_replicas=list(pm.offline_replicas)))
        return T(error_code=E.NONE, name=name, topic_id=meta.topic_id, is_internal=meta.is_internal,
                 partitions=parts, topic_authorized_operations=-2147483648)

    # ---------------------------------------------------------------- Produce
    async def handle_produce(self, header: RequestHeader, req: ProduceRequest) -> Message | None:
        """Append every partition, then — for acks=all — wait for each append to be replicated
        (DelayedProduce: until the high watermark passes it, or the request's timeout_ms)."""
        rm = self.replica_manager
        rt = self.rt
        acks = req.acks
        deadline = rt.monotonic_ms() + max(0, req.timeout_ms)
        R = ProduceResponse.TopicProduceResponse
        PR = R.PartitionProduceResponse
        responses = []
        delayed: list[tuple[Any, str, int, int]] = []
        for td in req.topic_data:
            parts = []
            for pd in td.partition_data:
                if acks not in (0, 1, -1):
                    parts.append(PR(index=pd.index, error_code=E.INVALID_REQUIRED_ACKS, base_offset=-1,
                                    log_append_time_ms=-1, log_start_offset=-1))
                    continue
                res = await rm.append_records(td.name, pd.index, pd.records, acks)
                rt.trace("produce", topic=td.name, partition=pd.index, error=res.error_code,
                         base_offset=res.base_offset, records=res.info.record_count if res.info else 0)
                part = PR(index=pd.index, error_code=res.error_code, base_offset=res.base_offset,
                          log_append_time_ms=-1, log_start_offset=res.log_start_offset,
                          record_errors=[], error_message=res.error_message)
                parts.append(part)
                if acks == -1 and res.error_code == E.NONE and res.info is not None:
                    delayed.append((part, td.name, pd.index, res.info.last_offset + 1))
            responses.append(R(name=td.name, partition_responses=parts))
        for part, topic, index, required in delayed:
            code = await rm.wait_for_replication(topic, index, required, deadline)
            if code != E.NONE:
                part.error_code, part.base_offset = code, -1
                rt.trace("produce_not_replicated", topic=topic, partition=index, error=code, required_offset=required)
        if acks == 0:
            return None  # acks=0: the producer expects no response at all
        return ProduceResponse(responses=responses, throttle_time_ms=0)

    # ---------------------------------------------------------------- Fetch
    async def handle_fetch(self, header: RequestHeader, req: FetchRequest) -> Message:
        version = header.request_api_version
        specs = [FetchSpec(t.topic, p.partition, p.fetch_offset, p.partition_max_bytes,
                           p.current_leader_epoch if version >= 9 else -1, p.log_start_offset if version >= 5 else -1)
                 for t in req.topics for p in t.partitions]
        committed = req.isolation_level == 1
        max_bytes = min(req.max_bytes, self.config.fetch_max_bytes)
        results = await self.replica_manager.fetch_messages(specs, req.max_wait_ms, req.min_bytes,
                                                                   max_bytes, committed, req.replica_id)
        FT = FetchResponse.FetchableTopicResponse
        PD = FT.PartitionData
        topics: list[Any] = []
        by_topic: dict[str, list[Any]] = {}
        for spec, r in zip(specs, results, strict=False):
            if spec.topic not in by_topic:
                by_topic[spec.topic] = []
                topics.append(FT(topic=spec.topic, partitions=by_topic[spec.topic]))
            by_topic[spec.topic].append(PD(
                partition_index=spec.partition, error_code=r.error_code, high_watermark=r.high_watermark,
                last_stable_offset=r.last_stable_offset, log_start_offset=r.log_start_offset,
                aborted_transactions=None if r.aborted_transactions is None else [
                    PD.AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
                    for a in r.aborted_transactions], preferred_read_replica=-1, records=r.records))
        return FetchResponse(throttle_time_ms=0, error_code=E.NONE, session_id=0, responses=topics)

    # ---------------------------------------------------------------- ListOffsets
    async def handle_list_offsets(self, header: RequestHeader, req: ListOffsetsRequest) -> Message:
        rm = self.replica_manager
        version = header.request_api_version
        TR = ListOffsetsResponse.ListOffsetsTopicResponse
        PR = TR.ListOffsetsPartitionResponse
        topics = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                part = rm.get_partition(t.name, p.partition_index)
                current = p.current_leader_epoch if version >= 4 else -1
                code = _leader_check(part, current)
                if code != E.NONE:
                    parts.append(PR(partition_index=p.partition_index, error_code=code, timestamp=-1, offset=-1,
                                    leader_epoch=-1))
                    continue
                # A follower (replica_id >= 0) may see up to the log end offset.
                assert part is not None
                ts, off = self._list_offset(part, p.timestamp, req.replica_id >= 0, req.isolation_level == 1)
                epoch = part.leader_epoch if off >= 0 and version >= 4 else -1
                parts.append(PR(partition_index=p.partition_index, error_code=E.NONE, timestamp=ts, offset=off,
                                leader_epoch=epoch))
            topics.append(TR(name=t.name, partitions=parts))
        return ListOffsetsResponse(throttle_time_ms=0, topics=topics)

    @staticmethod
    def _list_offset(part: Any, timestamp: int, from_follower: bool = False,
                     read_committed: bool = False) -> tuple[int, int]:
        if timestamp == EARLIEST_TIMESTAMP:
            return -1, part.log_start_offset
        if timestamp == LATEST_TIMESTAMP:  # READ_COMMITTED consumers: the last stable offset
            return -1, part.log_end_offset if from_follower else \
                part.last_stable_offset if read_committed else part.high_watermark
        if timestamp == MAX_TIMESTAMP:
            best = part.log.max_timestamp_and_offset()
            return best if best else (-1, -1)
        found = part.offset_for_timestamp(timestamp)
        if found is None or found[0] >= part.high_watermark:
            return -1, -1
        return found[1], found[0]

    # ---------------------------------------------------------------- CreateTopics
    async def handle_create_topics(self, header: RequestHeader, req: CreateTopicsRequest) -> Message:
        """Only the controller creates topics (NOT_CONTROLLER elsewhere, as a ZooKeeper-mode
        broker answers); the answer waits until every new partition has a leader in this
        broker's metadata (DelayedCreatePartitions) or timeout_ms passes (REQUEST_TIMED_OUT)."""
        R = CreateTopicsResponse.CreatableTopicResult
        results = []
        waiting: list[tuple[Any, str, int]] = []
        is_controller = self.controller.is_active
        for t in req.topics:
            assignment = {a.partition_index: list(a.broker_ids) for a in t.assignments} or None
            configs = {c.name: c.value for c in t.configs if c.value is not None}
            if not is_controller:
                results.append(R(name=t.name, topic_id=ZERO_UUID, error_code=E.NOT_CONTROLLER,
                                 error_message="This is not the correct controller for this cluster.",
                                 num_partitions=-1, replication_factor=-1, configs=None))
                continue
            try:
                n, rf = await self.topic_admin.create_topic(t.name, t.num_partitions, t.replication_factor, assignment,
                                             configs, validate_only=req.validate_only)
                r = R(name=t.name, topic_id=ZERO_UUID, error_code=E.NONE, error_message=None, num_partitions=n,
                      replication_factor=rf, configs=[])
                results.append(r)
                if not req.validate_only:
                    waiting.append((r, t.name, n))
            except TopicError as exc:
                results.append(R(name=t.name, topic_id=ZERO_UUID, error_code=exc.error_code, error_message=str(exc),
                                 num_partitions=-1, replication_factor=-1, configs=None))
        if waiting and req.timeout_ms > 0:
            cache = self.metadata_cache
            op = DelayedCreatePartitions(cache, [(name, n) for _, name, n in waiting], req.timeout_ms)
            ready = await self.topic_admin.wait_for_topic_operation(op, req.timeout_ms)
            for r, name, n in waiting:
                meta = cache.topic(name)
                if meta is not None:
                    r.topic_id = meta.topic_id
                if not ready and not cache.has_leaders(name, n):
                    r.error_code = E.REQUEST_TIMED_OUT
                    r.error_message = f"Timed out waiting for topic {name} to be created."
        return CreateTopicsResponse(throttle_time_ms=0, topics=results)


def _leader_check(part: Partition | None, current_leader_epoch: int) -> int:
    """Partition.localLogWithEpochOrThrow with fetchOnlyFromLeader: epoch first, then role."""
    if part is None:
        return E.UNKNOWN_TOPIC_OR_PARTITION
    if part.offline:
        return E.KAFKA_STORAGE_ERROR
    if current_leader_epoch >= 0 and current_leader_epoch < part.leader_epoch:
        return E.FENCED_LEADER_EPOCH
    if current_leader_epoch > part.leader_epoch:
        return E.UNKNOWN_LEADER_EPOCH
    if not part.is_leader:
        return E.NOT_LEADER_OR_FOLLOWER
    return E.NONE
