"""The admin APIs (kafkasim.broker.admin), composed and registered with KafkaApis in one call.

Advertised exactly as Kafka 3.9.1 in ZooKeeper mode advertises them
(/work/tools/kafka-3.9.1-zk-apiversions.json), except OffsetForLeaderEpoch, which starts at 2:

  topics      DeleteTopics 0-6, CreatePartitions 0-3, DeleteRecords 0-2, DescribeCluster 0-1,
              OffsetForLeaderEpoch 2-4                                      admin/topic_apis.py
  configs     DescribeConfigs 0-4, AlterConfigs 0-2, IncrementalAlterConfigs 0-1
                                                                           admin/config_apis.py
  log dirs    DescribeLogDirs 0-4, AlterReplicaLogDirs 0-2                 admin/log_dir_apis.py
  quotas      DescribeClientQuotas 0-1, AlterClientQuotas 0-1              admin/quota_apis.py
  SCRAM       DescribeUserScramCredentials 0, AlterUserScramCredentials 0  admin/scram_apis.py
  tokens      Create/Renew/Expire/DescribeDelegationToken 0-3/0-2/0-2/0-3  admin/delegation_token_apis.py
  features    UpdateFeatures 0-1                                           admin/feature_apis.py

(ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments are the
controller's: kafkasim.broker.controller_apis.)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from kafkasim.broker.admin import (
    config_apis,
    delegation_token_apis,
    feature_apis,
    log_dir_apis,
    quota_apis,
    scram_apis,
    topic_apis,
)
from kafkasim.broker.admin.config_apis import ConfigApis
from kafkasim.broker.admin.delegation_token_apis import DelegationTokenApis
from kafkasim.broker.admin.feature_apis import FeatureApis
from kafkasim.broker.admin.log_dir_apis import LogDirApis
from kafkasim.broker.admin.manager import AdminManager
from kafkasim.broker.admin.quota_apis import QuotaApis
from kafkasim.broker.admin.scram_apis import ScramApis
from kafkasim.broker.admin.topic_apis import TopicApis
from kafkasim.protocol.messages.headers import RequestHeader
from kafkasim.protocol.primitives import Message
from kafkasim.runtime.api import NodeRuntime

if TYPE_CHECKING:
    from kafkasim.broker.api_registry import ApiRegistry
    from kafkasim.broker.config import BrokerConfig
    from kafkasim.broker.metadata_cache import MetadataCache
    from kafkasim.broker.replica_manager import ReplicaManager
    from kafkasim.broker.topic_admin import TopicAdmin
    from kafkasim.broker.zk.kafka_zk_client import KafkaZkClient

__all__ = ["VERSIONS", "AdminApis", "AdminManager", "register"]

VERSIONS: dict[int, tuple[int, int]] = {
    **topic_apis.VERSIONS, **config_apis.VERSIONS, **log_dir_apis.VERSIONS, **quota_apis.VERSIONS,
    **scram_apis.VERSIONS, **delegation_token_apis.VERSIONS, **feature_apis.VERSIONS,
}


class AdminApis:
    """Every admin API family, built with what each uses."""

    def __init__(self, rt: NodeRuntime, config: BrokerConfig, manager: AdminManager, replica_manager: ReplicaManager,
                 metadata_cache: MetadataCache, kzk: KafkaZkClient, topic_admin: TopicAdmin) -> None:
        self.topics = TopicApis(rt, config, manager, replica_manager, metadata_cache, kzk, topic_admin)
        self.configs = ConfigApis(rt, config, manager, replica_manager, metadata_cache)
        self.log_dirs = LogDirApis(rt, replica_manager, metadata_cache)
        self.quotas = QuotaApis(rt, manager.entities)
        self.scram = ScramApis(rt, manager.entities)
        self.tokens = DelegationTokenApis()
        self.features = FeatureApis(manager.is_controller)

    def handlers(self) -> dict[int, Callable[[RequestHeader, Any], Awaitable[Message | None]]]:
        out: dict[int, Callable[[RequestHeader, Any], Awaitable[Message | None]]] = {}
        for family in (self.topics, self.configs, self.log_dirs, self.quotas, self.scram, self.tokens, self.features):
            out.update(family.handlers())
        return out


def register(apis: ApiRegistry, h: AdminApis) -> None:
    """Add the admin APIs to the broker's (one call from KafkaApis)."""
    for key, handler in h.handlers().items():
        apis.register(key, *VERSIONS[key], handler)
