"""KafkaApis: one handler per API key, turning a decoded request into a response message.

What the broker ADVERTISES (ApiVersions) is exactly what the handlers implement, with minimums
low enough for old clients (aiokafka refuses a broker whose minimum exceeds its maximum) and
Fetch capped at 12 because topic IDs are not served end to end (clients send topic IDs from
Fetch 13 on). Produce starts at 3 and Fetch at 4: the versions that carry record batch v2,
which every client in scope uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Awaitable, Callable, Optional

from kafkasim.broker import admin_apis, producer_id_manager
from kafkasim.broker.group.apis import register as register_group_apis
from kafkasim.broker.kafka_zk_client import TopicError
from kafkasim.broker.replica_manager import FetchSpec
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
    from kafkasim.broker.server import KafkaServer

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

Handler = Callable[[RequestHeader, Any], Awaitable[Optional[Message]]]


class KafkaApis:
    def __init__(self, server: "KafkaServer") -> None:
        self.server = server
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
        self.group_coordinator = register_group_apis(self)
        producer_id_manager.register(self)  # InitProducerId (the idempotent producer)
        self.admin = admin_apis.register(self)  # DeleteTopics, CreatePartitions, configs, DeleteRecords, ...

    def register(self, api_key: int, min_version: int, max_version: int, handler: Handler) -> None:
        """Advertise [min, max] for api_key and route its requests to handler. Only what is
        registered is advertised, so ApiVersions never claims an API the broker lacks."""
        self.supported[api_key] = (min_version, max_version)
        self.handlers[api_key] = handler

    def is_supported(self, api_key: int, version: int) -> bool:
        rng = self.supported.get(api_key)
        return rng is not None and rng[0] <= version <= rng[1]

    async def handle(self, header: RequestHeader, request: Any) -> Optional[Message]:
        return await self.handlers[header.request_api_key](header, request)

    # ---------------------------------------------------------------- ApiVersions
    async def handle_api_versions(self, header: RequestHeader, req: ApiVersionsRequest) -> Message:
        keys = [ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                for k, (lo, hi) in sorted(self.supported.items())]
        return ApiVersionsResponse(error_code=E.NONE, api_keys=keys, throttle_time_ms=0)

    # ---------------------------------------------------------------- Metadata
    async def handle_metadata(self, header: RequestHeader, req: MetadataRequest) -> Message:
        s = self.server
        cache = s.metadata_cache
        version = header.request_api_version
        if req.topics is None or (version == 0 and not req.topics):
            names = sorted(cache.topics)
        else:
            names = [t.name for t in req.topics]
        allow_create = req.allow_auto_topic_creation if version >= 4 else True
        topics = []
        for name in names:
            topics.append(await self._topic_metadata(name, allow_create and s.config.auto_create_topics_enable))
        brokers = [MetadataResponse.MetadataResponseBroker(node_id=b.broker_id, host=b.host, port=b.port, rack=b.rack)
                   for b in sorted(cache.brokers.values(), key=lambda b: b.broker_id)]
        return MetadataResponse(throttle_time_ms=0, brokers=brokers, cluster_id=cache.cluster_id,
                                controller_id=cache.controller_id, topics=topics,
                                cluster_authorized_operations=-2147483648)

    async def _topic_metadata(self, name: Optional[str], auto_create: bool) -> Any:
        T = MetadataResponse.MetadataResponseTopic
        if name is None:
            return T(error_code=E.UNKNOWN_TOPIC_OR_PARTITION, name=None, topic_id=ZERO_UUID, partitions=[])
        meta = self.server.metadata_cache.topic(name)
        if meta is None:
            if not auto_create:
                return T(error_code=E.UNKNOWN_TOPIC_OR_PARTITION, name=name, topic_id=ZERO_UUID, partitions=[])
            try:
                await self.server.create_topic(name, -1, -1, None, {})
            except TopicError as exc:
                code = exc.error_code if exc.error_code != E.TOPIC_ALREADY_EXISTS else E.LEADER_NOT_AVAILABLE
                return T(error_code=code, name=name, topic_id=ZERO_UUID, partitions=[])
            # As Kafka answers a Metadata request that auto-created the topic: not ready yet.
            return T(error_code=E.LEADER_NOT_AVAILABLE, name=name, topic_id=ZERO_UUID, partitions=[])
        P = T.MetadataResponsePartition
        parts = [P(error_code=E.NONE, partition_index=i, leader_id=pm.leader, leader_epoch=pm.leader_epoch,
                   replica_nodes=list(pm.replicas), isr_nodes=list(pm.isr), offline_replicas=[])
                 for i, pm in sorted(meta.partitions.items())]
        return T(error_code=E.NONE, name=name, topic_id=meta.topic_id, is_internal=meta.is_internal,
                 partitions=parts, topic_authorized_operations=-2147483648)

    # ---------------------------------------------------------------- Produce
    async def handle_produce(self, header: RequestHeader, req: ProduceRequest) -> Optional[Message]:
        rm = self.server.replica_manager
        acks = req.acks
        R = ProduceResponse.TopicProduceResponse
        PR = R.PartitionProduceResponse
        responses = []
        for td in req.topic_data:
            parts = []
            for pd in td.partition_data:
                if acks not in (0, 1, -1):
                    parts.append(PR(index=pd.index, error_code=E.INVALID_REQUIRED_ACKS, base_offset=-1,
                                    log_append_time_ms=-1, log_start_offset=-1))
                    continue
                res = await rm.append_records(td.name, pd.index, pd.records)
                self.server.rt.trace("produce", topic=td.name, partition=pd.index, error=res.error_code,
                                     base_offset=res.base_offset,
                                     records=res.info.record_count if res.info else 0)
                parts.append(PR(index=pd.index, error_code=res.error_code, base_offset=res.base_offset,
                                log_append_time_ms=-1, log_start_offset=res.log_start_offset,
                                record_errors=[], error_message=res.error_message))
            responses.append(R(name=td.name, partition_responses=parts))
        if acks == 0:
            return None  # acks=0: the producer expects no response at all
        return ProduceResponse(responses=responses, throttle_time_ms=0)

    # ---------------------------------------------------------------- Fetch
    async def handle_fetch(self, header: RequestHeader, req: FetchRequest) -> Message:
        specs = [FetchSpec(t.topic, p.partition, p.fetch_offset, p.partition_max_bytes)
                 for t in req.topics for p in t.partitions]
        committed = req.isolation_level == 1
        max_bytes = min(req.max_bytes, self.server.config.fetch_max_bytes)
        results = await self.server.replica_manager.fetch_messages(specs, req.max_wait_ms, req.min_bytes,
                                                                   max_bytes, committed)
        FT = FetchResponse.FetchableTopicResponse
        PD = FT.PartitionData
        topics: list[Any] = []
        by_topic: dict[str, list[Any]] = {}
        for spec, r in zip(specs, results):
            if spec.topic not in by_topic:
                by_topic[spec.topic] = []
                topics.append(FT(topic=spec.topic, partitions=by_topic[spec.topic]))
            by_topic[spec.topic].append(PD(
                partition_index=spec.partition, error_code=r.error_code, high_watermark=r.high_watermark,
                last_stable_offset=r.high_watermark, log_start_offset=r.log_start_offset,
                aborted_transactions=[] if committed else None, preferred_read_replica=-1, records=r.records))
        return FetchResponse(throttle_time_ms=0, error_code=E.NONE, session_id=0, responses=topics)

    # ---------------------------------------------------------------- ListOffsets
    async def handle_list_offsets(self, header: RequestHeader, req: ListOffsetsRequest) -> Message:
        rm = self.server.replica_manager
        TR = ListOffsetsResponse.ListOffsetsTopicResponse
        PR = TR.ListOffsetsPartitionResponse
        topics = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                part = rm.get_partition(t.name, p.partition_index)
                if part is None:
                    parts.append(PR(partition_index=p.partition_index, error_code=E.UNKNOWN_TOPIC_OR_PARTITION,
                                    timestamp=-1, offset=-1, leader_epoch=-1))
                    continue
                ts, off = self._list_offset(part, p.timestamp)
                epoch = part.leader_epoch if off >= 0 and header.request_api_version >= 4 else -1
                parts.append(PR(partition_index=p.partition_index, error_code=E.NONE, timestamp=ts, offset=off,
                                leader_epoch=epoch))
            topics.append(TR(name=t.name, partitions=parts))
        return ListOffsetsResponse(throttle_time_ms=0, topics=topics)

    @staticmethod
    def _list_offset(part: Any, timestamp: int) -> tuple[int, int]:
        if timestamp == EARLIEST_TIMESTAMP:
            return -1, part.log_start_offset
        if timestamp == LATEST_TIMESTAMP:
            return -1, part.high_watermark
        if timestamp == MAX_TIMESTAMP:
            best = part.log.max_timestamp_and_offset()
            return best if best else (-1, -1)
        found = part.offset_for_timestamp(timestamp)
        if found is None or found[0] >= part.high_watermark:
            return -1, -1
        return found[1], found[0]

    # ---------------------------------------------------------------- CreateTopics
    async def handle_create_topics(self, header: RequestHeader, req: CreateTopicsRequest) -> Message:
        R = CreateTopicsResponse.CreatableTopicResult
        results = []
        for t in req.topics:
            assignment = {a.partition_index: list(a.broker_ids) for a in t.assignments} or None
            configs = {c.name: c.value for c in t.configs if c.value is not None}
            try:
                n, rf = await self.server.create_topic(t.name, t.num_partitions, t.replication_factor, assignment,
                                                       configs, validate_only=req.validate_only)
                meta = self.server.metadata_cache.topic(t.name)
                results.append(R(name=t.name, topic_id=meta.topic_id if meta else ZERO_UUID, error_code=E.NONE,
                                 error_message=None, num_partitions=n, replication_factor=rf, configs=[]))
            except TopicError as exc:
                results.append(R(name=t.name, topic_id=ZERO_UUID, error_code=exc.error_code, error_message=str(exc),
                                 num_partitions=-1, replication_factor=-1, configs=None))
        return CreateTopicsResponse(throttle_time_ms=0, topics=results)
