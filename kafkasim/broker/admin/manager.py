"""The broker side of the admin APIs (Kafka's ZkAdminManager + ConfigHelper): the entity configs
in ZooKeeper (through zk.entity_config, AdminZkClient's half), the broker's config layers
(static, dynamic default, dynamic per broker) and the effective log config of a topic; plus the
error type and names every admin API module shares."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkasim.broker import config_helper as C
from kafkasim.broker.zk import zk_data as Z
from kafkasim.broker.zk.entity_config import EntityConfigStore
from kafkasim.runtime.api import ZkClient

if TYPE_CHECKING:
    from kafkasim.broker.config import BrokerConfig
    from kafkasim.broker.metadata_cache import MetadataCache
    from kafkasim.storage.log import LogConfig

CONFIG_BROKERS = "/config/brokers"
ZERO_UUID = bytes(16)
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
LATEST_OFFSET = -1                      # DeleteRecords: "up to the high watermark"
ENDPOINT_TYPE_BROKER = 1
ENDPOINT_TYPE_CONTROLLER = 2
CLUSTER_AUTHORIZED_OPERATIONS_ALL = 8096  # what Kafka answers without an authorizer
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


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
        self.entities = EntityConfigStore(zk)

    # ------------------------------------------------------------ ZooKeeper helpers
    async def _read_entity(self, path: str) -> dict[str, str]:
        root, _, name = path[len("/config/"):].partition("/")
        return await self.entities.fetch(root, name)

    async def write_entity(self, root: str, entity: str, config: dict[str, str]) -> None:
        """setOrCreateEntityConfigs, then the change notification."""
        await self.entities.change(root, entity, config)

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
