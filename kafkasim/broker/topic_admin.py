"""TopicAdmin: creating a topic and waiting for topics to appear or vanish in this broker's
metadata — the parts of Kafka's ZkAdminManager (createTopics, with AdminZkClient and
AdminUtils.assignReplicasToBrokers) and of its topic purgatory (DelayedCreatePartitions,
DelayedDeleteTopics) that Metadata auto-creation, CreateTopics, CreatePartitions, DeleteTopics
and the group coordinator's offsets topic share.
"""

from __future__ import annotations

from kafkasim.broker.admin_utils import AssignmentError, BrokerMetadata, assign_replicas_to_brokers
from kafkasim.broker.config import BrokerConfig
from kafkasim.broker.config_helper import ConfigValueError, UnknownConfigError, validate_topic_overrides
from kafkasim.broker.delayed_topic_ops import DelayedCreatePartitions, DelayedDeleteTopics
from kafkasim.broker.metadata_cache import MetadataCache
from kafkasim.broker.purgatory import DelayedOperationPurgatory
from kafkasim.broker.zk import zk_data as Z
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
        """create() without the topic id: (partitions, replication factor)."""
        n, rf, _ = await self.create(name, num_partitions, replication_factor, assignment, configs, validate_only)
        return n, rf

    async def create(self, name: str, num_partitions: int, replication_factor: int,
                     assignment: dict[int, list[int]] | None, configs: dict[str, str],
                     validate_only: bool = False) -> tuple[int, int, bytes]:
        """Validate and create a topic: its config and assignment znodes (Kafka's
        AdminZkClient.createTopicWithAssignment); the controller, watching /brokers/topics,
        gives its partitions leaders. Returns (partitions, replication factor, topic id — the
        one written to /brokers/topics/<name>, which ZkAdminManager.populateIds reads back;
        zeros when validate_only). The checks come in ZkAdminManager.createTopics' order:
        exists, both counts and an assignment, then AdminZkClient.validateTopicCreate (name,
        assignment shape, LogConfig.validate)."""
        if self.metadata_cache.topic(name) is not None:
            raise TopicError(E.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if assignment is None:
            n = self.config.num_partitions if num_partitions == -1 else num_partitions
            rf = self.config.default_replication_factor if replication_factor == -1 else replication_factor
            assignment = self._assign_replicas(n, rf)
        elif num_partitions != -1 or replication_factor != -1:
            raise TopicError(E.INVALID_REQUEST, "Both numPartitions or replicationFactor and replicasAssignments "
                             "were set. Both cannot be used at the same time.")
        validate_topic_create(name, assignment, configs)
        rf = len(next(iter(assignment.values())))
        if validate_only:
            return len(assignment), rf, bytes(16)
        created = await self.kzk.create_topic(name, assignment, configs)
        self.rt.trace("topic_created", topic=name, partitions=len(assignment), replication_factor=rf,
                      assignment={str(p): r for p, r in sorted(assignment.items())})
        return len(assignment), rf, Z.uuid_from_str(created.topic_id)

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


def validate_topic_create(name: str, assignment: dict[int, list[int]], configs: dict[str, str]) -> None:
    """AdminZkClient.validateTopicCreate (ZooKeeper mode): the name, the assignment's shape, then
    LogConfig.validate — an unknown or invalid config is INVALID_CONFIG (ZkAdminManager turns
    ConfigDef's ConfigException into InvalidConfigurationException with the same message)."""
    validate_topic_name(name)
    if len({len(r) for r in assignment.values()}) != 1:
        raise TopicError(E.INVALID_REPLICA_ASSIGNMENT, "All partitions should have the same number of replicas")
    if any(len(r) != len(set(r)) for r in assignment.values()):
        raise TopicError(E.INVALID_REPLICA_ASSIGNMENT, "Duplicate replica assignment found: "
                         f"{scala_map(assignment)}")
    n = len(assignment)
    if sum(p for p in assignment if p >= 0) != n * (n - 1) // 2:
        raise TopicError(E.INVALID_REPLICA_ASSIGNMENT, "partitions should be a consecutive 0-based integer sequence")
    try:
        validate_topic_overrides(configs)
    except (UnknownConfigError, ConfigValueError) as exc:
        raise TopicError(E.INVALID_CONFIG, str(exc)) from exc


def scala_map(assignment: dict[int, list[int]]) -> str:
    """The toString of ZkAdminManager's mutable.HashMap[Int, Seq[Int]] (built from the request's
    Java lists: ArrayBuffers; small int keys iterate in order)."""
    return "HashMap(" + ", ".join(f"{p} -> ArrayBuffer({', '.join(map(str, r))})"
                                  for p, r in sorted(assignment.items())) + ")"
