"""The admin requests that wait for the controller's metadata to reach this broker (Kafka's
DelayedCreatePartitions and DelayedDeleteTopics, in ZkAdminManager's topic purgatory): watched
under a TopicKey per topic, checked when an UpdateMetadata is applied. Whoever waits reads the
per-topic outcome from the metadata cache afterwards; expired means REQUEST_TIMED_OUT for the
topics not there yet.
"""

from __future__ import annotations

from kafkasim.broker.metadata_cache import MetadataCache
from kafkasim.broker.purgatory import DelayedOperation, TopicKey


class DelayedCreatePartitions(DelayedOperation):
    """CreateTopics / CreatePartitions: done when every partition of each topic has a leader in
    this broker's metadata cache."""

    def __init__(self, cache: MetadataCache, partition_counts: list[tuple[str, int]], timeout_ms: float) -> None:
        super().__init__(timeout_ms)
        self.cache, self.partition_counts = cache, partition_counts

    def operation_keys(self) -> list[TopicKey]:
        return [TopicKey(topic) for topic, _ in self.partition_counts]

    def try_complete(self) -> bool:
        if all(self.cache.has_leaders(topic, n) for topic, n in self.partition_counts):
            return self.force_complete()
        return False


class DelayedDeleteTopics(DelayedOperation):
    """DeleteTopics: done when every topic left this broker's metadata cache."""

    def __init__(self, cache: MetadataCache, topics: list[str], timeout_ms: float) -> None:
        super().__init__(timeout_ms)
        self.cache, self.topics = cache, topics

    def operation_keys(self) -> list[TopicKey]:
        return [TopicKey(topic) for topic in self.topics]

    def try_complete(self) -> bool:
        if all(self.cache.topic(topic) is None for topic in self.topics):
            return self.force_complete()
        return False
