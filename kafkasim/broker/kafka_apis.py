"""KafkaApis: one handler per API key, turning a decoded request into a response message.

What the broker ADVERTISES (ApiVersions) is exactly what the handlers implement, and for every
key it has it is Kafka 3.9.1's ZooKeeper-mode range (tests/broker/test_api_versions.py holds
the two tables side by side). Old versions get Kafka's answers, not a newer version's: the
data path's per-version rules live beside their handlers (produce_api.py, fetch_api.py,
list_offsets_api.py); Metadata, ApiVersions and CreateTopics are here.

Clients decide what they may do from these ranges — librdkafka, for one, only compresses
gzip/snappy/lz4 when Produce v0 is in range — so a range narrower than Kafka's changes what
third-party clients send, not only which versions they pick.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from kafkasim.broker import admin_apis, controller_apis, request_faults
from kafkasim.broker import producer_id_manager as producer_id_manager_module
from kafkasim.broker.admin_apis import AdminApis, AdminManager
from kafkasim.broker.api_registry import Handler
from kafkasim.broker.config_helper import topic_config_entries
from kafkasim.broker.controller_apis import ControllerApis
from kafkasim.broker.delayed_topic_ops import DelayedCreatePartitions
from kafkasim.broker.fetch_api import FetchApi
from kafkasim.broker.group.apis import GroupApis
from kafkasim.broker.group.apis import register as register_group_apis
from kafkasim.broker.group.txn_offsets import register as register_txn_offset_commit
from kafkasim.broker.group.zk_offsets import ZkConsumerOffsets
from kafkasim.broker.list_offsets_api import ListOffsetsApi
from kafkasim.broker.produce_api import ProduceApi
from kafkasim.broker.quota_manager_request import RequestTimer
from kafkasim.broker.request_context import context_of
from kafkasim.broker.security import acl_apis
from kafkasim.broker.security import apis as security_apis
from kafkasim.broker.security.authorizer_rules import RequestAuthorizer
from kafkasim.broker.transaction import apis as transaction_apis
from kafkasim.broker.transaction.marker_append import append_coordinator_batch
from kafkasim.broker.zk.kafka_zk_client import TopicError, validate_topic_name
from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafkasim.protocol.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from kafkasim.protocol.messages.headers import RequestHeader
from kafkasim.protocol.messages.metadata import MetadataRequest, MetadataResponse
from kafkasim.protocol.primitives import Message
from kafkasim.runtime.api import SessionExpiredError

if TYPE_CHECKING:
    from kafkasim.broker.config import BrokerConfig
    from kafkasim.broker.controller.kafka_controller import KafkaController
    from kafkasim.broker.group.coordinator import GroupCoordinator
    from kafkasim.broker.metadata_cache import MetadataCache
    from kafkasim.broker.quota_manager import QuotaManagers
    from kafkasim.broker.replica_manager import ReplicaManager
    from kafkasim.broker.security.authorizer import AclAuthorizer
    from kafkasim.broker.topic_admin import TopicAdmin
    from kafkasim.broker.transaction.coordinator import TransactionCoordinator
    from kafkasim.broker.zk.kafka_zk_client import KafkaZkClient
    from kafkasim.runtime.api import NodeRuntime

# api key -> (min, max) advertised by the core handlers below; feature modules (groups, admin,
# idempotence, ...) add theirs with KafkaApis.register().
CORE_VERSIONS: dict[int, tuple[int, int]] = {
    A.PRODUCE: (0, 11),
    A.FETCH: (0, 17),
    A.LIST_OFFSETS: (0, 9),
    A.METADATA: (0, 12),
    A.API_VERSIONS: (0, 4),
    A.CREATE_TOPICS: (0, 7),
}

ZERO_UUID = bytes(16)
AUTHORIZED_OPERATIONS_OMITTED = -2147483648
# What Kafka answers without an authorizer: every operation that applies to a topic (READ, WRITE,
# CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS) / to the cluster.
TOPIC_AUTHORIZED_OPERATIONS_ALL = 3576
CLUSTER_AUTHORIZED_OPERATIONS_ALL = 8096
_SOFTWARE_NAME = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


class KafkaApis:
    def __init__(self, rt: NodeRuntime, config: BrokerConfig, replica_manager: ReplicaManager,
                 metadata_cache: MetadataCache, controller: KafkaController, topic_admin: TopicAdmin,
                 group_coordinator: GroupCoordinator, admin_manager: AdminManager,
                 txn_coordinator: TransactionCoordinator, kzk: KafkaZkClient,
                 broker_epoch: Callable[[], int], authorizer: AclAuthorizer | None = None,
                 quotas: QuotaManagers | None = None) -> None:
        """`broker_epoch` is read per request (it changes when the broker re-registers).
        `authorizer`: authorizer.class.name's (None: every request is allowed); `quotas`: the
        client quota managers (None: no quotas)."""
        self.rt = rt
        self.config = config
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        self.controller = controller
        self.topic_admin = topic_admin
        self.group_coordinator = group_coordinator
        self.admin_manager = admin_manager
        self.supported: dict[int, tuple[int, int]] = {}
        self.handlers: dict[int, Handler] = {}
        core: dict[int, Handler] = {
            A.API_VERSIONS: self.handle_api_versions,
            A.METADATA: self.handle_metadata,
            A.PRODUCE: ProduceApi(rt, replica_manager, metadata_cache).handle,
            A.FETCH: FetchApi(rt, config, replica_manager, metadata_cache, authorizer).handle,
            A.LIST_OFFSETS: ListOffsetsApi(rt, replica_manager).handle,
            A.CREATE_TOPICS: self.handle_create_topics,
        }
        for key, handler in core.items():
            self.register(key, *CORE_VERSIONS[key], handler)
        register_group_apis(self, GroupApis(rt, config, metadata_cache, group_coordinator,
                                            topic_admin.create_topic, txn_coordinator, ZkConsumerOffsets(kzk.zk)))
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
        security_apis.register(self)   # SaslHandshake, SaslAuthenticate after authentication
        acl_apis.register(self, acl_apis.AclApis(authorizer))   # Describe/Create/DeleteAcls
        self.request_authorizer = None if authorizer is None else RequestAuthorizer(
            authorizer, metadata_cache, config.auto_create_topics_enable)
        self.quotas = quotas

    def register(self, api_key: int, min_version: int, max_version: int, handler: Handler) -> None:
        """Advertise [min, max] for api_key and route its requests to handler. Only what is
        registered is advertised, so ApiVersions never claims an API the broker lacks."""
        self.supported[api_key] = (min_version, max_version)
        self.handlers[api_key] = handler

    def is_supported(self, api_key: int, version: int) -> bool:
        rng = self.supported.get(api_key)
        return rng is not None and rng[0] <= version <= rng[1]

    async def handle(self, header: RequestHeader, request: Any) -> Message | None:
        try:
            return await self._handle(header, request)
        except SessionExpiredError as exc:
            # A handler's ZooKeeper read met this broker's expired session (seed 234 of
            # kill-failover-swarm: LeaderAndIsr reading a new partition's topic config). Kafka's
            # getEntityConfigs throws the SessionExpiredException, ReplicaManager rethrows "for it
            # to be caught in KafkaApis", and KafkaApis.handle's catch-all answers the request's
            # error response (Errors.forException: UNKNOWN_SERVER_ERROR); the controller ignores
            # a failed LeaderAndIsr and sends it again once the broker re-registers. The
            # environment's doing, not a bug: traced, not a task error. Any other exception still
            # escapes and kills the connection task, which the sweep's task-error check reports.
            if not request_faults.has_error_response(header.request_api_key):
                raise
            self.rt.trace("request_failed", api_key=header.request_api_key, correlation_id=header.correlation_id,
                          error=f"{type(exc).__name__}: {exc}")
            return request_faults.error_response(header.request_api_key, header.request_api_version, request,
                                                 E.UNKNOWN_SERVER_ERROR)

    async def _handle(self, header: RequestHeader, request: Any) -> Message | None:
        handler = self.handlers[header.request_api_key]
        if self.request_authorizer is not None:   # the per-API checks: security/authorizer_rules*.py
            handling: Awaitable[Message | None] = self.request_authorizer.handle(
                header, request, functools.partial(handler, header))
        else:
            handling = handler(header, request)
        if self.quotas is None:
            return await handling
        # Timed only while some request_percentage quota exists (Kafka: quotasEnabled).
        timer = RequestTimer(self.rt.monotonic_ms) if self.quotas.request.enabled() else None
        response = await (handling if timer is None else timer.run(handling))
        return await self.quotas.throttle(header, request, response, 0.0 if timer is None else timer.request_ms)

    def channel_throttle_ms(self, header: RequestHeader) -> int:
        """How long the socket server mutes the channel after answering (a client over its quota)."""
        return 0 if self.quotas is None else self.quotas.channel_throttle_ms(header)

    # ---------------------------------------------------------------- ApiVersions
    async def handle_api_versions(self, header: RequestHeader, req: ApiVersionsRequest) -> Message:
        if header.request_api_version >= 3 and not (_SOFTWARE_NAME.fullmatch(req.client_software_name)
                                                    and _SOFTWARE_NAME.fullmatch(req.client_software_version)):
            # ApiVersionsRequest.isValid (KIP-511): INVALID_REQUEST and no keys.
            return ApiVersionsResponse(error_code=E.INVALID_REQUEST, api_keys=[], throttle_time_ms=0)
        keys = [ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                for k, (lo, hi) in sorted(self.supported.items())]
        # A ZooKeeper-mode broker has no finalized features: epoch 0, no feature lists.
        return ApiVersionsResponse(error_code=E.NONE, api_keys=keys, throttle_time_ms=0, finalized_features_epoch=0)

    # ---------------------------------------------------------------- Metadata
    async def handle_metadata(self, header: RequestHeader, req: MetadataRequest) -> Message:
        cache = self.metadata_cache
        version = header.request_api_version
        T = MetadataResponse.MetadataResponseTopic
        topics: list[Any] = []
        if req.topics is None or (version == 0 and not req.topics):
            names: list[str | None] = [*sorted(cache.topics)]
        elif version < 12 and any(t.name is None or t.topic_id != ZERO_UUID for t in req.topics):
            # Topic ids are looked up from v12 on; before, an id or a null name is an invalid request.
            return _metadata_error(req, E.INVALID_REQUEST)
        elif any(t.topic_id != ZERO_UUID for t in req.topics):
            # By topic id (v12): unknown ids first, then the known ones by name.
            by_id = {m.topic_id: m.name for m in cache.topics.values()}
            ids = list(dict.fromkeys(t.topic_id for t in req.topics if t.topic_id != ZERO_UUID))
            topics = [T(error_code=E.UNKNOWN_TOPIC_ID, name=None, topic_id=i, partitions=[])
                      for i in ids if i not in by_id]
            names = [by_id[i] for i in ids if i in by_id]
        elif any(t.name is None for t in req.topics):
            return _metadata_error(req, E.UNKNOWN_SERVER_ERROR)   # Kafka trips over the null name
        else:
            names = list(dict.fromkeys(t.name for t in req.topics))   # asked twice, answered once
        allow_create = req.allow_auto_topic_creation if version >= 4 else True
        for name in names:
            t = await self._topic_metadata(name, allow_create and self.config.auto_create_topics_enable)
            # Without an authorizer every operation is allowed (v8+, when asked).
            t.topic_authorized_operations = TOPIC_AUTHORIZED_OPERATIONS_ALL if version >= 8 and \
                req.include_topic_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED
            topics.append(t)
        listener = context_of(header).listener_name   # the brokers' endpoints on the listener asked
        brokers = [MetadataResponse.MetadataResponseBroker(node_id=b.broker_id, host=ep[0], port=ep[1], rack=b.rack)
                   for b in sorted(cache.brokers.values(), key=lambda b: b.broker_id)
                   if (ep := b.endpoint(listener)) is not None]
        cluster_ops = CLUSTER_AUTHORIZED_OPERATIONS_ALL if 8 <= version <= 10 and \
            req.include_cluster_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED
        return MetadataResponse(throttle_time_ms=0, brokers=brokers, cluster_id=cache.cluster_id,
                                controller_id=cache.controller_id, topics=topics,
                                cluster_authorized_operations=cluster_ops)

    async def _topic_metadata(self, name: str | None, auto_create: bool) -> Any:
        T = MetadataResponse.MetadataResponseTopic
        if name is None:
            return T(error_code=E.UNKNOWN_TOPIC_OR_PARTITION, name=None, topic_id=ZERO_UUID, partitions=[])
        cache = self.metadata_cache
        meta = cache.topic(name)
        if meta is None:
            try:   # an unknown topic with an illegal name (KafkaApis / AutoTopicCreationManager: Topic.validate)
                validate_topic_name(name)
            except TopicError:
                return T(error_code=E.INVALID_TOPIC_EXCEPTION, name=name, topic_id=ZERO_UUID, partitions=[])
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

    # ---------------------------------------------------------------- CreateTopics
    async def handle_create_topics(self, header: RequestHeader, req: CreateTopicsRequest) -> Message:
        """Only the controller creates topics (NOT_CONTROLLER elsewhere, as a ZooKeeper-mode
        broker answers); the answer waits until every new partition has a leader in this
        broker's metadata (DelayedCreatePartitions) or timeout_ms passes (REQUEST_TIMED_OUT)."""
        R = CreateTopicsResponse.CreatableTopicResult
        results = []
        waiting: list[tuple[Any, str, int]] = []
        is_controller = self.controller.is_active
        counts = Counter(t.name for t in req.topics)
        for t in req.topics:
            assignment = {a.partition_index: list(a.broker_ids) for a in t.assignments} or None
            configs = {c.name: c.value for c in t.configs if c.value is not None}
            if counts[t.name] > 1:
                results.append(R(name=t.name, topic_id=ZERO_UUID, error_code=E.INVALID_REQUEST,
                                 error_message="Found multiple entries for this topic.", num_partitions=-1,
                                 replication_factor=-1, configs=[]))
                continue
            if not is_controller:
                results.append(R(name=t.name, topic_id=ZERO_UUID, error_code=E.NOT_CONTROLLER,
                                 error_message="This is not the correct controller for this cluster.",
                                 num_partitions=-1, replication_factor=-1, configs=[]))
                continue
            try:
                null_configs = [c.name for c in t.configs if c.value is None]
                if null_configs and self.metadata_cache.topic(t.name) is None:
                    raise TopicError(E.INVALID_CONFIG, f"Null value not supported for topic configs: "
                                     f"{','.join(null_configs)}")
                n, rf, topic_id = await self.topic_admin.create(t.name, t.num_partitions, t.replication_factor,
                                                                assignment, configs, validate_only=req.validate_only)
                # From v5 the answer carries the topic's configs (ZkAdminManager.createTopics), and
                # the new topic's id at once, before any broker knows the topic (populateIds).
                r = R(name=t.name, topic_id=topic_id, error_code=E.NONE, error_message=None, num_partitions=n,
                      replication_factor=rf,
                      configs=await self._created_topic_configs(configs) if header.request_api_version >= 5 else [])
                results.append(r)
                if not req.validate_only:
                    waiting.append((r, t.name, n))
            except TopicError as exc:
                results.append(R(name=t.name, topic_id=ZERO_UUID, error_code=exc.error_code, error_message=str(exc),
                                 num_partitions=-1, replication_factor=-1, configs=[]))
        if waiting:
            cache = self.metadata_cache
            ready = False
            if req.timeout_ms > 0:
                op = DelayedCreatePartitions(cache, [(name, n) for _, name, n in waiting], req.timeout_ms)
                ready = await self.topic_admin.wait_for_topic_operation(op, req.timeout_ms)
            for r, name, n in waiting:
                if not ready and not (req.timeout_ms > 0 and cache.has_leaders(name, n)):
                    # DelayedCreatePartitions.onComplete (or timeout <= 0): REQUEST_TIMED_OUT with
                    # no message, and the failed topic's configs and counts reset (KafkaApis).
                    r.error_code, r.error_message = E.REQUEST_TIMED_OUT, None
                    r.num_partitions, r.replication_factor, r.configs = -1, -1, []
        return CreateTopicsResponse(throttle_time_ms=0, topics=results)

    async def _created_topic_configs(self, overrides: dict[str, str]) -> list[Any]:
        """Every topic config with its value and source, as DescribeConfigs would describe the
        new topic (ConfigHelper.createTopicConfigEntry without synonyms)."""
        C = CreateTopicsResponse.CreatableTopicResult.CreatableTopicConfigs
        entries = topic_config_entries(overrides, await self.admin_manager.broker_layers(), None)
        return [C(name=e.name, value=e.value, read_only=e.read_only, config_source=e.source, is_sensitive=False)
                for e in entries]


def _metadata_error(req: MetadataRequest, code: int) -> Message:
    """MetadataRequest.getErrorResponse: every asked topic with the error, nothing else."""
    T = MetadataResponse.MetadataResponseTopic
    return MetadataResponse(throttle_time_ms=0, brokers=[], cluster_id=None, controller_id=-1, topics=[
        T(error_code=code, name=t.name or "", topic_id=t.topic_id, partitions=[]) for t in req.topics or []],
        cluster_authorized_operations=-2147483648)
