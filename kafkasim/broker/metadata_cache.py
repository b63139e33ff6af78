"""MetadataCache: what this broker believes about the cluster — live brokers, topics, partition
leaders, epochs, replicas and ISRs — as answered in Metadata responses."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from kafkasim.broker.zk_data import BrokerInfo


@dataclass
class PartitionMeta:
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]


@dataclass
class TopicMeta:
    name: str
    topic_id: bytes  # 16 bytes; all zero when unknown
    partitions: dict[int, PartitionMeta] = field(default_factory=dict)
    is_internal: bool = False


@dataclass
class MetadataCache:
    cluster_id: str = ""
    controller_id: int = -1
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    topics: dict[str, TopicMeta] = field(default_factory=dict)

    def topic(self, name: str) -> Optional[TopicMeta]:
        return self.topics.get(name)

    def alive_broker_ids(self) -> list[int]:
        return sorted(self.brokers)

    def update_topic(self, meta: TopicMeta) -> None:
        self.topics[meta.name] = meta
