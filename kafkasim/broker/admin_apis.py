"""Admin APIs, ZooKeeper mode, answered as a Kafka 3.9 broker answers them (each checked against
a real 3.9.1 broker with `realkafka`): DeleteTopics 0-6, CreatePartitions 0-3, DescribeConfigs
0-4, AlterConfigs 0-2, IncrementalAlterConfigs 0-1, DeleteRecords 0-2, DescribeCluster 0-1,
DescribeLogDirs 0-4, OffsetForLeaderEpoch 2-4.

ZooKeeper writes, as Kafka's AdminZkClient / KafkaController make them:

  /admin/delete_topics/<t>             DeleteTopics (on the controller) marks the topic; the
                                       KafkaController's TopicDeletionManager has the replicas
                                       deleted (StopReplica), then removes /brokers/topics/<t>,
                                       /config/topics/<t> and the mark. The answer waits until the
                                       topic left the metadata cache (DelayedDeleteTopics).
  /brokers/topics/<t>                  CreatePartitions (on the controller): the assignment grows
                                       (CAS on the znode version; AdminUtils from the existing
                                       partition 0's first replica), the controller gives the new
                                       partitions leaders; the answer waits for them.
  /config/topics/<t>                   {"version":1,"config":{...}} topic overrides (sorted keys)
  /config/brokers/<id>|<default>       {"version":1,"config":{...}} dynamic broker configs
  /config/changes/config_change_<seq>  {"version":2,"entity_path":"topics/<t>"} (persistent
                                       sequential) after every config change, as Kafka notifies

Config changes reach the live logs at once (config_helper.effective_log_config: every field
LogConfig has; min.insync.replicas to the partitions); topic overrides are applied again
whenever a partition is created on this broker (apply_topic_config, the ReplicaManager's hook).

Leader epochs: Metadata (v7+), ListOffsets (v4+) and OffsetForLeaderEpoch all answer the ZooKeeper
leader epoch of the partition, so a client validating its position (Java 3-4, librdkafka 2,
kafka-python/franz-go <= 4) gets a consistent end offset: for the current epoch the log end
offset; for an older one where the next epoch starts (Kafka's LeaderEpochFileCache.endOffsetFor).
Followers ask the same question before fetching (KIP-101/279).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkasim.broker import config_helper as C
from kafkasim.broker.admin_utils import AssignmentError, BrokerMetadata, assign_replicas_to_brokers
from kafkasim.broker.delayed_topic_ops import DelayedCreatePartitions, DelayedDeleteTopics
from kafkasim.broker.zk import zk_data as Z
from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.alter_configs import AlterConfigsRequest, AlterConfigsResponse
from kafkasim.protocol.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsResponse
from kafkasim.protocol.messages.delete_records import DeleteRecordsRequest, DeleteRecordsResponse
from kafkasim.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from kafkasim.protocol.messages.describe_cluster import DescribeClusterRequest, DescribeClusterResponse
from kafkasim.protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResponse
from kafkasim.protocol.messages.describe_log_dirs import DescribeLogDirsRequest, DescribeLogDirsResponse
from kafkasim.protocol.messages.headers import RequestHeader
from kafkasim.protocol.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kafkasim.protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
from kafkasim.protocol.primitives import Message
from kafkasim.runtime.api import BadVersionError, NodeExistsError, NodeRuntime, NoNodeError, ZkClient

if TYPE_CHECKING:
    from kafkasim.broker.api_registry import ApiRegistry
    from kafkasim.broker.config import BrokerConfig
    from kafkasim.broker.metadata_cache import MetadataCache
    from kafkasim.broker.replica_manager import ReplicaManager
    from kafkasim.broker.topic_admin import TopicAdmin
    from kafkasim.broker.zk.kafka_zk_client import KafkaZkClient
    from kafkasim.storage.log import LogConfig

VERSIONS: dict[int, tuple[int, int]] = {
    A.DELETE_TOPICS: (0, 6),
    A.CREATE_PARTITIONS: (0, 3),
    A.DESCRIBE_CONFIGS: (0, 4),
    A.ALTER_CONFIGS: (0, 2),
    A.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    A.DELETE_RECORDS: (0, 2),
    A.DESCRIBE_CLUSTER: (0, 1),
    A.DESCRIBE_LOG_DIRS: (0, 4),
    A.OFFSET_FOR_LEADER_EPOCH: (0, 4),  # v0-v1: the same answer, without epochs in the request (apiv)
}

CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
CONFIG_BROKERS = "/config/brokers"
ZERO_UUID = bytes(16)
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
LATEST_OFFSET = -1                      # DeleteRecords: "up to the high watermark"
ENDPOINT_TYPE_BROKER = 1
CLUSTER_AUTHORIZED_OPERATIONS_ALL = 8096  # what Kafka answers without an authorizer
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def _dump(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def entity_config_json(config: dict[str, str]) -> bytes:
    return _dump({"version": 1, "config": dict(sorted(config.items()))})


def config_change_json(entity_path: str) -> bytes:
    return _dump({"version": 2, "entity_path": entity_path})


class AdminError(Exception):
    def __init__(self, error_code: int, message: str | None) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


@dataclass
class ConfigResource:
    type: int
    name: str

    def __str__(self) -> str:
        kind = {C.RESOURCE_TOPIC: "TOPIC", C.RESOURCE_BROKER: "BROKER"}.get(self.type, "UNKNOWN")
        return f"ConfigResource(type={kind}, name='{self.name}')"


class AdminManager:
    """The broker side of the admin APIs (Kafka's ZkAdminManager + ConfigHelper + the parts of
    KafkaController and ReplicaManager they drive)."""

    def __init__(self, config: BrokerConfig, zk: ZkClient, metadata_cache: MetadataCache, log_config: LogConfig,
                 bound_port: Callable[[], int]) -> None:
        """`log_config`: the broker's default log config (log.* in server.properties), the base
        of every topic's; `bound_port`: the listener's port once bound (the static `listeners`)."""
        self.config = config
        self.zk = zk
        self.metadata_cache = metadata_cache
        self.log_config = log_config
        self.bound_port = bound_port
        self.dynamic_default: dict[str, str] | None = None
        self.dynamic_broker: dict[str, str] = {}

    # ------------------------------------------------------------ ZooKeeper helpers
    async def _read_entity(self, path: str) -> dict[str, str]:
        try:
            data, _ = await self.zk.get(path)
        except NoNodeError:
            return {}
        if not data:
            return {}
        return {str(k): str(v) for k, v in (json.loads(data).get("config") or {}).items()}

    async def _write_entity(self, root: str, entity: str, config: dict[str, str]) -> None:
        """setOrCreateEntityConfigs, then the change notification."""
        path = f"/config/{root}/{entity}"
        data = entity_config_json(config)
        try:
            await self.zk.set(path, data)
        except NoNodeError:
            await self.zk.create(path, data, makepath=True)
        await self.zk.create(f"{CONFIG_CHANGES}/{CONFIG_CHANGE_PREFIX}", config_change_json(f"{root}/{entity}"),
                             sequential=True, makepath=True)

    async def topic_overrides(self, topic: str) -> dict[str, str]:
        return await self._read_entity(f"{Z.CONFIG_TOPICS}/{topic}")

    async def broker_layers(self) -> C.BrokerConfigLayers:
        if self.dynamic_default is None:
            self.dynamic_default = await self._read_entity(f"{CONFIG_BROKERS}/{C.DEFAULT_BROKER_ENTITY}")
            self.dynamic_broker = await self._read_entity(f"{CONFIG_BROKERS}/{self.config.broker_id}")
        cfg = self.config
        static = C.static_broker_configs(cfg, f"PLAINTEXT://{cfg.host}:{self.bound_port()}")
        return C.BrokerConfigLayers(static, dict(self.dynamic_default), dict(self.dynamic_broker))

    # ------------------------------------------------------------ live logs
    async def topic_log_config(self, topic: str, overrides: dict[str, str] | None = None) -> tuple[LogConfig, int]:
        """The topic's effective log config and min.insync.replicas (what the ReplicaManager
        applies to the topic's partitions)."""
        if overrides is None:
            overrides = await self.topic_overrides(topic)
        layers = await self.broker_layers()
        cfg = C.effective_log_config(self.log_config, overrides, layers)
        min_isr = C.topic_config_entries(overrides, layers, ["min.insync.replicas"])
        min_isr_value = int(min_isr[0].value or 1) if min_isr else 1
        return cfg, min_isr_value

    def is_controller(self) -> bool:
        return self.metadata_cache.controller_id == self.config.broker_id


# ================================================================ handlers
class AdminApis:
    def __init__(self, rt: NodeRuntime, config: BrokerConfig, manager: AdminManager, replica_manager: ReplicaManager,
                 metadata_cache: MetadataCache, kzk: KafkaZkClient, topic_admin: TopicAdmin) -> None:
        self.rt = rt
        self.config = config
        self.m = manager
        self.rm = replica_manager
        self.cache = metadata_cache
        self.kzk = kzk
        self.topics = topic_admin
        self._timeout_ms = 30000.0

    async def _apply_topic_config(self, topic: str, overrides: dict[str, str] | None = None) -> None:
        self.rm.apply_topic_config(topic, *await self.m.topic_log_config(topic, overrides))

    async def _apply_all_topic_configs(self) -> None:
        for topic in sorted(self.cache.topics):
            await self._apply_topic_config(topic)

    # ------------------------------------------------------------ DescribeCluster
    async def describe_cluster(self, header: RequestHeader, req: DescribeClusterRequest) -> Message:
        cache = self.cache
        B = DescribeClusterResponse.DescribeClusterBroker
        brokers = [B(broker_id=b.broker_id, host=b.host, port=b.port, rack=b.rack)
                   for b in sorted(cache.brokers.values(), key=lambda b: b.broker_id)]
        ops = CLUSTER_AUTHORIZED_OPERATIONS_ALL if req.include_cluster_authorized_operations \
            else AUTHORIZED_OPERATIONS_OMITTED
        version = header.request_api_version
        if version >= 1 and req.endpoint_type != ENDPOINT_TYPE_BROKER:
            return DescribeClusterResponse(throttle_time_ms=0, error_code=E.UNSUPPORTED_ENDPOINT_TYPE,
                                           error_message="The request was sent to an endpoint of type BROKER, "
                                           "but we wanted an endpoint of type CONTROLLER",
                                           endpoint_type=ENDPOINT_TYPE_BROKER, cluster_id=cache.cluster_id,
                                           controller_id=-1, brokers=[], cluster_authorized_operations=ops)
        kw: dict[str, Any] = {"endpoint_type": ENDPOINT_TYPE_BROKER} if version >= 1 else {}
        return DescribeClusterResponse(throttle_time_ms=0, error_code=E.NONE, error_message=None,
                                       cluster_id=cache.cluster_id, controller_id=cache.controller_id,
                                       brokers=brokers, cluster_authorized_operations=ops, **kw)

    # ------------------------------------------------------------ DeleteTopics
    async def delete_topics(self, header: RequestHeader, req: DeleteTopicsRequest) -> Message:
        version = header.request_api_version
        wanted: list[tuple[str | None, bytes]]
        if version >= 6:
            wanted = [(t.name, t.topic_id) for t in req.topics]
        else:
            wanted = [(name, ZERO_UUID) for name in req.topic_names]
        R = DeleteTopicsResponse.DeletableTopicResult
        results = []
        pending: list[tuple[Any, str]] = []
        for name, topic_id in wanted:
            error, resolved, tid = await self._delete_one(name, topic_id)
            kw: dict[str, Any] = {"topic_id": tid} if version >= 6 else {}
            if version >= 5:
                kw["error_message"] = None
            results.append(R(name=resolved, error_code=error, **kw))
            if error == E.NONE and resolved is not None:
                pending.append((results[-1], resolved))
        if pending and req.timeout_ms > 0:
            # DelayedDeleteTopics: done when the topics left this broker's metadata cache.
            cache = self.cache
            op = DelayedDeleteTopics(cache, [t for _, t in pending], req.timeout_ms)
            await self.topics.wait_for_topic_operation(op, req.timeout_ms)
            for r, t in pending:
                if cache.topic(t) is not None:
                    r.error_code = E.REQUEST_TIMED_OUT
        kw2: dict[str, Any] = {"throttle_time_ms": 0} if version >= 1 else {}
        return DeleteTopicsResponse(responses=results, **kw2)

    async def _delete_one(self, name: str | None, topic_id: bytes) -> tuple[int, str | None, bytes]:
        cache = self.cache
        if name is not None and topic_id != ZERO_UUID:
            return E.INVALID_REQUEST, name, topic_id  # "Topic name and topic ID can not both be specified."
        if name is None:
            if topic_id == ZERO_UUID:
                return E.TOPIC_AUTHORIZATION_FAILED, None, topic_id  # as Kafka answers a null name
            meta = next((t for t in cache.topics.values() if t.topic_id == topic_id), None)
            if meta is None:
                return E.UNKNOWN_TOPIC_ID, None, topic_id
            name = meta.name
        meta = cache.topic(name)
        if meta is None:
            return E.UNKNOWN_TOPIC_OR_PARTITION, name, topic_id
        tid = topic_id
        if not self.m.is_controller():
            return E.NOT_CONTROLLER, name, tid
        if name in INTERNAL_TOPICS:
            return E.INVALID_TOPIC_EXCEPTION, name, tid
        try:
            await self.m.zk.create(f"{Z.ADMIN_DELETE_TOPICS}/{name}", b"", makepath=True)
        except NodeExistsError:
            pass  # already marked
        self.rt.trace("topic_deletion_requested", topic=name)
        return E.NONE, name, tid

    # ------------------------------------------------------------ CreatePartitions
    async def create_partitions(self, header: RequestHeader, req: CreatePartitionsRequest) -> Message:
        R = CreatePartitionsResponse.CreatePartitionsTopicResult
        names = [t.name for t in req.topics]
        results = []
        for t in req.topics:
            if names.count(t.name) > 1:
                results.append(R(name=t.name, error_code=E.INVALID_REQUEST,
                                 error_message="Duplicate topic in request."))
                continue
            assignments = None if t.assignments is None else [list(a.broker_ids) for a in t.assignments]
            self._timeout_ms = float(req.timeout_ms)
            try:
                await self._create_partitions(t.name, t.count, assignments, req.validate_only)
                results.append(R(name=t.name, error_code=E.NONE, error_message=None))
            except AdminError as exc:
                results.append(R(name=t.name, error_code=exc.error_code, error_message=exc.message))
        return CreatePartitionsResponse(throttle_time_ms=0, results=results)

    async def _create_partitions(self, topic: str, count: int, assignments: list[list[int]] | None,
                                 validate_only: bool) -> None:
        if not self.m.is_controller():
            raise AdminError(E.NOT_CONTROLLER, "This is not the correct controller for this cluster.")
        current = await self.kzk.topic_assignment(topic)
        if current is None or self.cache.topic(topic) is None:
            raise AdminError(E.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic}' does not exist.")
        existing = len(current.partitions)
        if count == existing:
            raise AdminError(E.INVALID_PARTITIONS, f"Topic already has {existing} partitions.")
        if count < existing:
            raise AdminError(E.INVALID_PARTITIONS,
                             f"Topic currently has {existing} partitions, which is higher than the requested {count}.")
        new = self._new_assignment(current.partitions, count, assignments)
        if validate_only:
            return
        full = dict(current.partitions)
        full.update(new)
        _, stat = await self.m.zk.get(Z.topic_path(topic))
        try:
            await self.m.zk.set(Z.topic_path(topic), Z.topic_assignment_json(full, current.topic_id), stat.version)
        except BadVersionError as exc:
            raise AdminError(E.REASSIGNMENT_IN_PROGRESS, "The topic assignment changed concurrently.") from exc
        self.rt.trace("partitions_created", topic=topic, partitions=count)
        # DelayedCreatePartitions: the controller gives the new partitions leaders.
        cache = self.cache
        op = DelayedCreatePartitions(cache, [(topic, count)], self._timeout_ms)
        if not await self.topics.wait_for_topic_operation(op, self._timeout_ms):
            raise AdminError(E.REQUEST_TIMED_OUT, f"Timed out waiting for partitions of {topic} to be created.")

    def _new_assignment(self, current: dict[int, list[int]], count: int,
                        assignments: list[list[int]] | None) -> dict[int, list[int]]:
        existing = len(current)
        rf = len(current[min(current)]) if current else 1
        cache = self.cache
        alive = cache.alive_broker_ids() or [self.config.broker_id]
        adding = count - existing
        if assignments is None:
            # AdminZkClient.addPartitions: AdminUtils from the existing partition 0's first
            # replica's place in the broker list, numbering on from the existing partitions.
            brokers = [BrokerMetadata(b, cache.brokers[b].rack if b in cache.brokers else None) for b in alive]
            first = current[min(current)][0] if current else alive[0]
            start = max(0, next((i for i, b in enumerate(alive) if b >= first), 0))
            try:
                return assign_replicas_to_brokers(brokers, adding, rf, lambda n: 0, fixed_start_index=start,
                                                  start_partition_id=existing)
            except AssignmentError as exc:
                raise AdminError(exc.error_code, str(exc)) from exc
        if len(assignments) != adding:
            raise AdminError(E.INVALID_REPLICA_ASSIGNMENT, f"Increasing the number of partitions by {adding} but "
                             f"{len(assignments)} assignments provided.")
        unknown = sorted({b for a in assignments for b in a if b not in alive})
        if unknown:
            raise AdminError(E.INVALID_REPLICA_ASSIGNMENT,
                             f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.")
        bad = [(existing + i, len(a)) for i, a in enumerate(assignments) if len(a) != rf]
        if bad:
            raise AdminError(E.INVALID_REPLICA_ASSIGNMENT,
                             f"Inconsistent replication factor between partitions, partition 0 has {rf} while "
                             f"partitions [{', '.join(str(p) for p, _ in bad)}] have replication factors "
                             f"[{', '.join(str(n) for _, n in bad)}], respectively.")
        return {existing + i: list(a) for i, a in enumerate(assignments)}

    # ------------------------------------------------------------ DescribeConfigs
    async def describe_configs(self, header: RequestHeader, req: DescribeConfigsRequest) -> Message:
        version = header.request_api_version
        R = DescribeConfigsResponse.DescribeConfigsResult
        results = []
        for res in req.resources:
            keys = None if res.configuration_keys is None else list(res.configuration_keys)
            try:
                entries = await self._describe(res.resource_type, res.resource_name, keys)
            except AdminError as exc:
                results.append(R(error_code=exc.error_code, error_message=exc.message,
                                 resource_type=res.resource_type, resource_name=res.resource_name, configs=[]))
                continue
            synonyms = version >= 1 and req.include_synonyms
            results.append(R(error_code=E.NONE, error_message="", resource_type=res.resource_type,
                             resource_name=res.resource_name,
                             configs=[self._entry(e, version, synonyms) for e in entries]))
        return DescribeConfigsResponse(throttle_time_ms=0, results=results)

    async def _describe(self, rtype: int, name: str, keys: list[str] | None) -> list[C.ConfigEntry]:
        if rtype == C.RESOURCE_TOPIC:
            if name == "":
                raise AdminError(E.INVALID_TOPIC_EXCEPTION, "Topic name is invalid: the empty string is not allowed")
            if self.cache.topic(name) is None:
                raise AdminError(E.UNKNOWN_TOPIC_OR_PARTITION, "")
            return C.topic_config_entries(await self.m.topic_overrides(name), await self.m.broker_layers(), keys)
        if rtype == C.RESOURCE_BROKER:
            self._check_broker_name(name)
            return C.broker_config_entries(await self.m.broker_layers(), keys, dynamic_default_only=name == "")
        raise AdminError(E.INVALID_REQUEST, E.ERRORS[E.INVALID_REQUEST].message)

    def _check_broker_name(self, name: str) -> None:
        own = str(self.config.broker_id)
        if name not in ("", own):
            raise AdminError(E.INVALID_REQUEST,
                             f"Unexpected broker id, expected {own} or empty string, but received {name}")

    @staticmethod
    def _entry(e: C.ConfigEntry, version: int, with_synonyms: bool) -> Any:
        RR = DescribeConfigsResponse.DescribeConfigsResult.DescribeConfigsResourceResult
        kw: dict[str, Any] = {}
        if version >= 1:
            kw["config_source"] = e.source
            if with_synonyms:
                kw["synonyms"] = [RR.DescribeConfigsSynonym(name=n, value=v, source=src) for n, v, src in e.synonyms]
        if version >= 3:
            kw["config_type"] = e.type
            kw["documentation"] = None
        return RR(name=e.name, value=e.value, read_only=e.read_only, is_default=False, is_sensitive=False, **kw)

    # ------------------------------------------------------------ AlterConfigs (replace all)
    async def alter_configs(self, header: RequestHeader, req: AlterConfigsRequest) -> Message:
        R = AlterConfigsResponse.AlterConfigsResourceResponse
        out = []
        for res in req.resources:
            props = {c.name: c.value for c in res.configs if c.value is not None}
            code, msg = await self._alter(ConfigResource(res.resource_type, res.resource_name),
                                          _replace_with(props), req.validate_only)
            out.append(R(error_code=code, error_message=msg, resource_type=res.resource_type,
                         resource_name=res.resource_name))
        return AlterConfigsResponse(throttle_time_ms=0, responses=out)

    # ------------------------------------------------------------ IncrementalAlterConfigs
    async def incremental_alter_configs(self, header: RequestHeader, req: IncrementalAlterConfigsRequest) -> Message:
        R = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
        out = []
        for res in req.resources:
            resource = ConfigResource(res.resource_type, res.resource_name)
            ops = [(c.name, c.config_operation, c.value) for c in res.configs]
            code, msg = await self._alter(resource, self._incremental(resource, ops), req.validate_only)
            out.append(R(error_code=code, error_message=msg, resource_type=res.resource_type,
                         resource_name=res.resource_name))
        return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=out)

    @staticmethod
    def _incremental(resource: ConfigResource,
                     ops: list[tuple[str, int, str | None]]) -> Callable[[dict[str, str]], dict[str, str]]:
        def list_type(name: str) -> bool:
            if resource.type == C.RESOURCE_TOPIC:
                d = C.TOPIC_CONFIG_DEFS.get(name)
                return d is not None and d.type == C.LIST
            b = C.BROKER_CONFIG_DEFS.get(name)
            return b is not None and b.type == C.LIST

        def default_of(name: str) -> str | None:
            d = C.TOPIC_CONFIG_DEFS.get(name) if resource.type == C.RESOURCE_TOPIC else None
            return d.default if d is not None else None

        def apply(old: dict[str, str]) -> dict[str, str]:
            for name, _, _ in ops:
                if resource.type == C.RESOURCE_TOPIC and name not in C.TOPIC_CONFIG_DEFS:
                    raise AdminError(E.INVALID_CONFIG, f"Unknown topic config name: {name}")
            try:
                return C.apply_incremental(old, ops, list_type, default_of, E.INVALID_REQUEST, E.INVALID_CONFIG,
                                           E.UNKNOWN_SERVER_ERROR)
            except C.IncrementalAlterError as exc:
                raise AdminError(exc.error_code, exc.message) from exc
        return apply

    async def _alter(self, resource: ConfigResource, change: Callable[[dict[str, str]], dict[str, str]],
                     validate_only: bool) -> tuple[int, str | None]:
        try:
            if resource.type == C.RESOURCE_TOPIC:
                await self._alter_topic(resource, change, validate_only)
            elif resource.type == C.RESOURCE_BROKER:
                await self._alter_broker(resource, change, validate_only)
            else:
                raise AdminError(E.INVALID_REQUEST, f"AlterConfigs is only supported for topics and brokers, but "
                                 f"resource type is {resource.type}")
        except AdminError as exc:
            return exc.error_code, exc.message
        return E.NONE, None

    async def _alter_topic(self, resource: ConfigResource, change: Callable[[dict[str, str]], dict[str, str]],
                           validate_only: bool) -> None:
        topic = resource.name
        if self.cache.topic(topic) is None:
            raise AdminError(E.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic}' does not exist.")
        new = change(await self.m.topic_overrides(topic))
        try:
            C.validate_topic_overrides(new)
        except C.UnknownConfigError as exc:
            raise AdminError(E.INVALID_CONFIG, str(exc)) from exc
        except C.ConfigValueError as exc:
            raise AdminError(E.INVALID_CONFIG, f"Invalid config value for resource {resource}: {exc}") from exc
        if validate_only:
            return
        await self.m._write_entity("topics", topic, new)
        await self._apply_topic_config(topic, new)
        self.rt.trace("topic_config_changed", topic=topic, config=dict(sorted(new.items())))

    async def _alter_broker(self, resource: ConfigResource, change: Callable[[dict[str, str]], dict[str, str]],
                            validate_only: bool) -> None:
        self._check_broker_name(resource.name)
        await self.m.broker_layers()  # loads the dynamic layers once
        is_default = resource.name == ""
        old = dict(self.m.dynamic_default or {}) if is_default else dict(self.m.dynamic_broker)
        new = change(old)
        read_only = sorted(n for n in new if n in C.READ_ONLY_BROKER_CONFIGS and new.get(n) != old.get(n))
        if read_only:
            raise AdminError(E.INVALID_REQUEST, f"Cannot update these configs dynamically: Set({', '.join(read_only)})")
        try:
            for name, raw in new.items():
                C.validate_broker_value(name, raw)
        except C.ConfigValueError as exc:
            raise AdminError(E.INVALID_CONFIG, f"Invalid config value for resource {resource}: {exc}") from exc
        if validate_only:
            return
        entity = C.DEFAULT_BROKER_ENTITY if is_default else resource.name
        await self.m._write_entity("brokers", entity, new)
        if is_default:
            self.m.dynamic_default = new
        else:
            self.m.dynamic_broker = new
        await self._apply_all_topic_configs()
        self.rt.trace("broker_config_changed", entity=entity, config=dict(sorted(new.items())))

    # ------------------------------------------------------------ DeleteRecords
    async def delete_records(self, header: RequestHeader, req: DeleteRecordsRequest) -> Message:
        T = DeleteRecordsResponse.DeleteRecordsTopicResult
        P = T.DeleteRecordsPartitionResult
        topics = []
        for t in req.topics:
            cleanup = await self._cleanup_policy(t.name)
            parts = []
            for p in t.partitions:
                error, low = self._delete_records_one(t.name, p.partition_index, p.offset, cleanup)
                parts.append(P(partition_index=p.partition_index, low_watermark=low, error_code=error))
            topics.append(T(name=t.name, partitions=parts))
        return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)

    async def _cleanup_policy(self, topic: str) -> list[str]:
        if self.cache.topic(topic) is None:
            return []
        entries = C.topic_config_entries(await self.m.topic_overrides(topic), await self.m.broker_layers(),
                                         ["cleanup.policy"])
        return (entries[0].value or "").split(",") if entries else ["delete"]

    def _delete_records_one(self, topic: str, partition: int, offset: int, cleanup: list[str]) -> tuple[int, int]:
        part = self.rm.get_partition(topic, partition)
        if part is None:
            return E.UNKNOWN_TOPIC_OR_PARTITION, -1
        if not part.is_leader:
            return E.NOT_LEADER_OR_FOLLOWER, -1
        if "delete" not in cleanup:
            return E.POLICY_VIOLATION, -1
        target = part.high_watermark if offset == LATEST_OFFSET else offset
        if target < 0 or target > part.high_watermark:
            return E.OFFSET_OUT_OF_RANGE, -1
        low = part.log.delete_records(target)  # UnifiedLog.maybeIncrementLogStartOffset
        self.rt.trace("records_deleted", topic=topic, partition=partition, log_start_offset=low)
        return E.NONE, low

    # ------------------------------------------------------------ DescribeLogDirs
    async def describe_log_dirs(self, header: RequestHeader, req: DescribeLogDirsRequest) -> Message:
        version = header.request_api_version
        rm = self.rm
        wanted: dict[str, set[int]] | None = None
        if req.topics is not None:
            wanted = {}
            for t in req.topics:
                wanted.setdefault(t.topic, set()).update(t.partitions)
        R = DescribeLogDirsResponse.DescribeLogDirsResult
        T = R.DescribeLogDirsTopic
        by_topic: dict[str, list[Any]] = {}
        for (topic, index), part in sorted(rm.partitions.items()):
            if wanted is not None and index not in wanted.get(topic, set()):
                continue
            size = part.log.size_in_bytes
            by_topic.setdefault(topic, []).append(T.DescribeLogDirsPartition(
                partition_index=index, partition_size=size, offset_lag=0, is_future_key=False))
        topics = [T(name=name, partitions=parts) for name, parts in by_topic.items()]
        result = R(error_code=E.NONE, log_dir=self.config.log_dir, topics=topics)
        kw: dict[str, Any] = {"error_code": E.NONE} if version >= 3 else {}
        return DescribeLogDirsResponse(throttle_time_ms=0, results=[result], **kw)

    # ------------------------------------------------------------ OffsetForLeaderEpoch
    async def offset_for_leader_epoch(self, header: RequestHeader, req: OffsetForLeaderEpochRequest) -> Message:
        T = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
        P = T.EpochEndOffset
        topics = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                error, epoch, end = self._epoch_end_offset(t.topic, p.partition, p.current_leader_epoch,
                                                           p.leader_epoch)
                parts.append(P(error_code=error, partition=p.partition, leader_epoch=epoch, end_offset=end))
            topics.append(T(topic=t.topic, partitions=parts))
        return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)

    def _epoch_end_offset(self, topic: str, partition: int, current: int, requested: int) -> tuple[int, int, int]:
        part = self.rm.get_partition(topic, partition)
        if part is None:
            return E.UNKNOWN_TOPIC_OR_PARTITION, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if part.offline:
            return E.KAFKA_STORAGE_ERROR, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        return part.last_offset_for_leader_epoch(current, requested)


def _replace_with(props: dict[str, str]) -> Callable[[dict[str, str]], dict[str, str]]:
    """Legacy AlterConfigs: the request's set replaces the whole config."""
    return lambda _old: dict(props)


def register(apis: ApiRegistry, h: AdminApis) -> None:
    """Add the admin APIs to the broker's (one call from KafkaApis)."""
    handlers: dict[int, Callable[[RequestHeader, Any], Awaitable[Message | None]]] = {
        A.DELETE_TOPICS: h.delete_topics,
        A.CREATE_PARTITIONS: h.create_partitions,
        A.DESCRIBE_CONFIGS: h.describe_configs,
        A.ALTER_CONFIGS: h.alter_configs,
        A.INCREMENTAL_ALTER_CONFIGS: h.incremental_alter_configs,
        A.DELETE_RECORDS: h.delete_records,
        A.DESCRIBE_CLUSTER: h.describe_cluster,
        A.DESCRIBE_LOG_DIRS: h.describe_log_dirs,
        A.OFFSET_FOR_LEADER_EPOCH: h.offset_for_leader_epoch,
    }
    for key, handler in handlers.items():
        apis.register(key, *VERSIONS[key], handler)
