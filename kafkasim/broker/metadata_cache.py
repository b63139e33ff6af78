"""MetadataCache: what this broker believes about the cluster — live brokers, the controller,
topics, partition leaders, epochs, replicas, ISRs, offline replicas — as answered in Metadata
responses. The controller keeps it current with UpdateMetadata (Kafka's ZkMetadataCache); a
partition sent with leader LeaderDuringDelete (-2) is a topic being deleted and leaves the cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kafkasim.broker.zk.zk_data import BrokerInfo

LEADER_DURING_DELETE = -2
ZERO_UUID = bytes(16)


@dataclass
class PartitionMeta:
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int] = field(default_factory=list)
    zk_version: int = 0


@dataclass
class TopicMeta:
    name: str
    topic_id: bytes  # 16 bytes; all zero when unknown
    partitions: dict[int, PartitionMeta] = field(default_factory=dict)
    is_internal: bool = False


INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


@dataclass
class MetadataCache:
    cluster_id: str = ""
    controller_id: int = -1
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    topics: dict[str, TopicMeta] = field(default_factory=dict)

    def topic(self, name: str) -> TopicMeta | None:
        return self.topics.get(name)

    def alive_broker_ids(self) -> list[int]:
        return sorted(self.brokers)

    def update_topic(self, meta: TopicMeta) -> None:
        self.topics[meta.name] = meta

    def update_metadata(self, controller_id: int, live_brokers: list[BrokerInfo],
                        partitions: list[tuple[str, bytes, int, Any]]) -> list[tuple[str, int]]:
        """UpdateMetadata: replace the live brokers, apply the partition states
        (topic, topic id, partition, state with leader/leader_epoch/isr/replicas/offline_replicas/
        zk_version); returns the partitions deleted (leader -2)."""
        self.controller_id = controller_id
        self.brokers = {b.broker_id: b for b in sorted(live_brokers, key=lambda b: b.broker_id)}
        deleted: list[tuple[str, int]] = []
        for topic, topic_id, index, st in partitions:
            if st.leader == LEADER_DURING_DELETE:
                meta = self.topics.get(topic)
                if meta is not None:
                    meta.partitions.pop(index, None)
                    if not meta.partitions:
                        del self.topics[topic]
                deleted.append((topic, index))
                continue
            meta = self.topics.get(topic)
            if meta is None:
                meta = self.topics[topic] = TopicMeta(topic, topic_id, is_internal=topic in INTERNAL_TOPICS)
            elif topic_id != ZERO_UUID:
                meta.topic_id = topic_id
            meta.partitions[index] = PartitionMeta(st.leader, st.leader_epoch, list(st.replicas), list(st.isr),
                                                   list(st.offline_replicas), st.zk_version)
        return deleted

    def has_leaders(self, topic: str, partitions: int) -> bool:
        """DelayedCreatePartitions: every partition of the new topic has a leader here."""
        meta = self.topics.get(topic)
        return meta is not None and all(p in meta.partitions and meta.partitions[p].leader >= 0
                                        for p in range(partitions))
