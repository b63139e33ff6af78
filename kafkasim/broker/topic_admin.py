"""TopicAdmin: creating a topic and waiting for topics to appear or vanish in this broker's
metadata — the parts of Kafka's ZkAdminManager (createTopics, with AdminZkClient and
AdminUtils.assignReplicasToBrokers) and of its topic purgatory (DelayedCreatePartitions,
DelayedDeleteTopics) that Metadata auto-creation, CreateTopics, CreatePartitions, DeleteTopics
and the group coordinator's offsets topic share.
"""

from __future__ import annotations

from kafkasim.broker.admin_utils import AssignmentError, BrokerMetadata, assign_replicas_to_brokers
from kafkasim.broker.config import BrokerConfig
from kafkasim.broker.delayed_topic_ops import DelayedCreatePartitions, DelayedDeleteTopics
from kafkasim.broker.metadata_cache import MetadataCache
from kafkasim.broker.purgatory import DelayedOperationPurgatory
from kafkasim.broker.zk.kafka_zk_client import KafkaZkClient, TopicError, validate_topic_name
from kafkasim.protocol import errors as E
from kafkasim.runtime.api import NodeRuntime


class TopicAdmin:
    def __init__(self, rt: NodeRuntime, config: BrokerConfig, kzk: KafkaZkClient, metadata_cache: MetadataCache,
                 topic_purgatory: DelayedOperationPurgatory) -> None:
        self.rt = rt
        self.config = config
        self.kzk = kzk
        self.metadata_cache = metadata_cache
        self.topic_purgatory = topic_purgatory

    # ---------------------------------------------------------------- topics
    async def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                           assignment: dict[int, list[int]] | None, configs: dict[str, str],
                           validate_only: bool = False) -> tuple[int, int]:
        """Validate and create a topic: its config and assignment znodes (Kafka's
        AdminZkClient.createTopicWithAssignment); the controller, watching /brokers/topics,
        gives its partitions leaders. Returns (partitions, replication factor)."""
        validate_topic_name(name)
        if self.metadata_cache.topic(name) is not None:
            raise TopicError(E.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if assignment is None:
            n = self.config.num_partitions if num_partitions == -1 else num_partitions
            rf = self.config.default_replication_factor if replication_factor == -1 else replication_factor
            assignment = self._assign_replicas(n, rf)
        elif num_partitions != -1 or replication_factor != -1:
            raise TopicError(E.INVALID_REQUEST,
                             "Both numPartitions or replicationFactor and replicasAssignment were set.")
        rf = len(next(iter(assignment.values())))
        if validate_only:
            return len(assignment), rf
        await self.kzk.create_topic(name, assignment, configs)
        self.rt.trace("topic_created", topic=name, partitions=len(assignment), replication_factor=rf,
                      assignment={str(p): r for p, r in sorted(assignment.items())})
        return len(assignment), rf

    def _assign_replicas(self, partitions: int, rf: int) -> dict[int, list[int]]:
        """AdminUtils.assignReplicasToBrokers over the live brokers, sorted by id (Kafka
        iterates its metadata cache's LongMap, a hash order; with the random start index the
        spread is the same)."""
        brokers = [BrokerMetadata(b.broker_id, b.rack) for _, b in sorted(self.metadata_cache.brokers.items())]
        rng = self.rt.rng("replica-assignment")
        try:
            return assign_replicas_to_brokers(brokers, partitions, rf, lambda n: rng.randint(0, n - 1))
        except AssignmentError as exc:
            raise TopicError(exc.error_code, str(exc)) from exc

    # ---------------------------------------------------------------- metadata events
    def on_metadata_updated(self) -> None:
        """UpdateMetadata applied: check the requests waiting for topics to appear or vanish
        (Kafka's DelayedCreatePartitions / DelayedDeleteTopics) — every one of them, in the
        order they began to wait."""
        self.topic_purgatory.check_and_complete_all()

    async def wait_for_topic_operation(self, op: DelayedCreatePartitions | DelayedDeleteTopics,
                                       timeout_ms: float) -> bool:
        """Wait until op completes (True) or timeout_ms passes (False)."""
        deadline = self.rt.monotonic_ms() + max(0.0, timeout_ms)
        return await self.topic_purgatory.await_completion(op, op.operation_keys(), deadline)
