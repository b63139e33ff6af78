"""Config admin APIs, ZooKeeper mode, as a Kafka 3.9 broker answers them (checked against a real
3.9.1 broker with `realkafka`): DescribeConfigs 0-4, AlterConfigs 0-2, IncrementalAlterConfigs 0-1.

ZooKeeper writes (zk.entity_config, as AdminZkClient makes them):

  /config/topics/<t>                   {"version":1,"config":{...}} topic overrides
  /config/brokers/<id>|<default>       {"version":1,"config":{...}} dynamic broker configs
  /config/changes/config_change_<seq>  {"version":2,"entity_path":"topics/<t>"} (persistent
                                       sequential) after every config change, as Kafka notifies

Config changes reach the live logs at once (config_helper.effective_log_config: every field
LogConfig has; min.insync.replicas to the partitions); topic overrides are applied again
whenever a partition is created on this broker (apply_topic_config, the ReplicaManager's hook).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kafkasim.broker import config_helper as C
from kafkasim.broker.admin.manager import AdminError, AdminManager, ConfigResource
from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.alter_configs import AlterConfigsRequest, AlterConfigsResponse
from kafkasim.protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResponse
from kafkasim.protocol.messages.headers import RequestHeader
from kafkasim.protocol.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kafkasim.protocol.primitives import Message
from kafkasim.runtime.api import NodeRuntime

if TYPE_CHECKING:
    from kafkasim.broker.config import BrokerConfig
    from kafkasim.broker.metadata_cache import MetadataCache
    from kafkasim.broker.replica_manager import ReplicaManager

VERSIONS: dict[int, tuple[int, int]] = {
    A.DESCRIBE_CONFIGS: (0, 4),
    A.ALTER_CONFIGS: (0, 2),
    A.INCREMENTAL_ALTER_CONFIGS: (0, 1),
}


class ConfigApis:
    def __init__(self, rt: NodeRuntime, config: BrokerConfig, manager: AdminManager, replica_manager: ReplicaManager,
                 metadata_cache: MetadataCache) -> None:
        self.rt = rt
        self.config = config
        self.m = manager
        self.rm = replica_manager
        self.cache = metadata_cache

    def handlers(self) -> dict[int, Any]:
        return {A.DESCRIBE_CONFIGS: self.describe_configs, A.ALTER_CONFIGS: self.alter_configs,
                A.INCREMENTAL_ALTER_CONFIGS: self.incremental_alter_configs}

    async def _apply_topic_config(self, topic: str, overrides: dict[str, str] | None = None) -> None:
        self.rm.apply_topic_config(topic, *await self.m.topic_log_config(topic, overrides))

    async def _apply_all_topic_configs(self) -> None:
        for topic in sorted(self.cache.topics):
            await self._apply_topic_config(topic)

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
        except C.ConfigValueError as bad:  # its own name: mypyc types one name once
            raise AdminError(E.INVALID_CONFIG, f"Invalid config value for resource {resource}: {bad}") from bad
        if validate_only:
            return
        await self.m.write_entity("topics", topic, new)
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
        await self.m.write_entity("brokers", entity, new)
        if is_default:
            self.m.dynamic_default = new
        else:
            self.m.dynamic_broker = new
        await self._apply_all_topic_configs()
        self.rt.trace("broker_config_changed", entity=entity, config=dict(sorted(new.items())))

def _replace_with(props: dict[str, str]) -> Callable[[dict[str, str]], dict[str, str]]:
    """Legacy AlterConfigs: the request's set replaces the whole config."""
    return lambda _old: dict(props)
