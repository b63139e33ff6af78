"""ControllerContext: the controller's in-memory picture of the cluster (Kafka's
kafka.controller.ControllerContext), rebuilt from ZooKeeper on every failover.

Also the value types the controller passes around: LeaderAndIsr (a partition state znode plus
its zkVersion, the "partition epoch"), ReplicaAssignment (replicas plus the adding/removing sets
of a reassignment), and the partition and replica states of the two state machines.

Every collection that requests are built from is iterated sorted, so a run's requests (and its
trace) do not depend on hash order.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields, replace

from kafkasim.broker.zk.zk_data import BrokerInfo

TopicPartition = tuple[str, int]
NO_LEADER = -1                  # LeaderAndIsr.NoLeader
LEADER_DURING_DELETE = -2       # LeaderAndIsr.LeaderDuringDelete: UpdateMetadata of a topic being deleted
NO_EPOCH = -1
EPOCH_DURING_DELETE = -2        # LeaderAndIsr.EpochDuringDelete: StopReplica of a deleted partition
INITIAL_CONTROLLER_EPOCH = 0
INITIAL_CONTROLLER_EPOCH_ZK_VERSION = 0


@dataclass(frozen=True)
class LeaderAndIsr:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    leader_recovery_state: int = 0   # 0 RECOVERED, 1 RECOVERING (KIP-704, after an unclean election)
    partition_epoch: int = 0         # the state znode's zkVersion

    def new_leader(self, leader: int) -> LeaderAndIsr:
        return self.new_leader_and_isr(leader, self.isr)

    def new_leader_and_isr(self, leader: int, isr: tuple[int, ...]) -> LeaderAndIsr:
        """A new leader and/or ISR: the leader epoch always moves on (the state change fences
        the old leader's requests)."""
        return replace(self, leader=leader, leader_epoch=self.leader_epoch + 1, isr=tuple(isr))

    def new_recovering_leader_and_isr(self, leader: int, isr: tuple[int, ...]) -> LeaderAndIsr:
        return replace(self.new_leader_and_isr(leader, isr), leader_recovery_state=1)

    def with_partition_epoch(self, epoch: int) -> LeaderAndIsr:
        return replace(self, partition_epoch=epoch)

    def equals_allow_stale_partition_epoch(self, other: LeaderAndIsr) -> bool:
        return (self.leader, self.leader_epoch, self.isr, self.leader_recovery_state) == \
            (other.leader, other.leader_epoch, other.isr, other.leader_recovery_state)


@dataclass(frozen=True)
class LeaderIsrAndControllerEpoch:
    leader_and_isr: LeaderAndIsr
    controller_epoch: int


@dataclass(frozen=True)
class ReplicaAssignment:
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """The replicas once the reassignment completes (replicas minus removing)."""
        return tuple(r for r in self.replicas if r not in self.removing_replicas)

    @property
    def original_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding_replicas)

    def remove_replica(self, replica: int) -> ReplicaAssignment:
        return ReplicaAssignment(tuple(r for r in self.replicas if r != replica),
                                 tuple(r for r in self.adding_replicas if r != replica),
                                 tuple(r for r in self.removing_replicas if r != replica))

    @staticmethod
    def from_target(original: tuple[int, ...], target: tuple[int, ...]) -> ReplicaAssignment:
        """ReplicaAssignment.fromOldAndNewReplicas: RS = TRS + (ORS - TRS), AR = TRS - ORS,
        RR = ORS - TRS."""
        full = tuple(target) + tuple(r for r in original if r not in target)
        return ReplicaAssignment(full, tuple(r for r in target if r not in original),
                                 tuple(r for r in original if r not in target))


class PartitionState(enum.Enum):
    NON_EXISTENT = "NonExistentPartition"
    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"


VALID_PREVIOUS_PARTITION_STATES: dict[PartitionState, frozenset[PartitionState]] = {
    PartitionState.NEW: frozenset({PartitionState.NON_EXISTENT}),
    PartitionState.ONLINE: frozenset({PartitionState.NEW, PartitionState.ONLINE, PartitionState.OFFLINE}),
    PartitionState.OFFLINE: frozenset({PartitionState.NEW, PartitionState.ONLINE, PartitionState.OFFLINE}),
    PartitionState.NON_EXISTENT: frozenset({PartitionState.OFFLINE}),
}


class ReplicaState(enum.Enum):
    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"
    NON_EXISTENT = "NonExistentReplica"


_RS = ReplicaState
VALID_PREVIOUS_REPLICA_STATES: dict[ReplicaState, frozenset[ReplicaState]] = {
    _RS.NEW: frozenset({_RS.NON_EXISTENT}),
    _RS.ONLINE: frozenset({_RS.NEW, _RS.ONLINE, _RS.OFFLINE, _RS.DELETION_INELIGIBLE}),
    _RS.OFFLINE: frozenset({_RS.NEW, _RS.ONLINE, _RS.OFFLINE, _RS.DELETION_INELIGIBLE}),
    _RS.DELETION_STARTED: frozenset({_RS.OFFLINE}),
    _RS.DELETION_SUCCESSFUL: frozenset({_RS.DELETION_STARTED}),
    _RS.DELETION_INELIGIBLE: frozenset({_RS.OFFLINE, _RS.DELETION_STARTED}),
    _RS.NON_EXISTENT: frozenset({_RS.DELETION_SUCCESSFUL}),
}

PartitionAndReplica = tuple[TopicPartition, int]


@dataclass
class ControllerContext:
    epoch: int = INITIAL_CONTROLLER_EPOCH
    epoch_zk_version: int = INITIAL_CONTROLLER_EPOCH_ZK_VERSION
    live_brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    live_broker_epochs: dict[int, int] = field(default_factory=dict)
    shutting_down_broker_ids: set[int] = field(default_factory=set)
    all_topics: set[str] = field(default_factory=set)
    topic_ids: dict[str, str] = field(default_factory=dict)
    assignments: dict[str, dict[int, ReplicaAssignment]] = field(default_factory=dict)
    leadership: dict[TopicPartition, LeaderIsrAndControllerEpoch] = field(default_factory=dict)
    partition_states: dict[TopicPartition, PartitionState] = field(default_factory=dict)
    replica_states: dict[PartitionAndReplica, ReplicaState] = field(default_factory=dict)
    replicas_on_offline_dirs: dict[int, set[TopicPartition]] = field(default_factory=dict)
    topics_to_be_deleted: set[str] = field(default_factory=set)
    topics_with_deletion_started: set[str] = field(default_factory=set)
    topics_ineligible_for_deletion: set[str] = field(default_factory=set)
    partitions_being_reassigned: set[TopicPartition] = field(default_factory=set)

    # ---------------------------------------------------------------- brokers
    @property
    def live_broker_ids(self) -> list[int]:
        """Live and not shutting down."""
        return sorted(b for b in self.live_brokers if b not in self.shutting_down_broker_ids)

    @property
    def live_or_shutting_down_broker_ids(self) -> list[int]:
        return sorted(self.live_brokers)

    def add_live_brokers(self, brokers: dict[int, tuple[BrokerInfo, int]]) -> None:
        for bid, (info, epoch) in sorted(brokers.items()):
            self.live_brokers[bid] = info
            self.live_broker_epochs[bid] = epoch

    def remove_live_brokers(self, ids: list[int]) -> None:
        for bid in ids:
            self.live_brokers.pop(bid, None)
            self.live_broker_epochs.pop(bid, None)

    def is_replica_online(self, broker_id: int, tp: TopicPartition, include_shutting_down: bool = False) -> bool:
        on_offline_dir = tp in self.replicas_on_offline_dirs.get(broker_id, set())
        live = broker_id in self.live_brokers and (include_shutting_down or
                                                   broker_id not in self.shutting_down_broker_ids)
        return live and not on_offline_dir

    # ---------------------------------------------------------------- assignments
    def all_partitions(self) -> list[TopicPartition]:
        return sorted((t, p) for t, parts in self.assignments.items() for p in parts)

    def partitions_for_topic(self, topic: str) -> list[TopicPartition]:
        return sorted((topic, p) for p in self.assignments.get(topic, {}))

    def full_assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        return self.assignments.get(tp[0], {}).get(tp[1], ReplicaAssignment(()))

    def replica_assignment(self, tp: TopicPartition) -> tuple[int, ...]:
        return self.full_assignment(tp).replicas

    def update_assignment(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        self.assignments.setdefault(tp[0], {})[tp[1]] = assignment

    def partitions_on_broker(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp in self.all_partitions() if broker_id in self.replica_assignment(tp)]

    def replicas_on_brokers(self, broker_ids: set[int]) -> list[PartitionAndReplica]:
        return [(tp, r) for tp in self.all_partitions() for r in self.replica_assignment(tp) if r in broker_ids]

    def replicas_for_partitions(self, tps: list[TopicPartition]) -> list[PartitionAndReplica]:
        return [(tp, r) for tp in sorted(tps) for r in self.replica_assignment(tp)]

    def replicas_for_topic(self, topic: str) -> list[PartitionAndReplica]:
        return self.replicas_for_partitions(self.partitions_for_topic(topic))

    def remove_topic(self, topic: str) -> None:
        for tp in self.partitions_for_topic(topic):
            self.leadership.pop(tp, None)
            self.partition_states.pop(tp, None)
            for r in self.replica_assignment(tp):
                self.replica_states.pop((tp, r), None)
            self.partitions_being_reassigned.discard(tp)
        self.assignments.pop(topic, None)
        self.all_topics.discard(topic)
        self.topic_ids.pop(topic, None)

    # ---------------------------------------------------------------- leadership
    def leader_and_isr(self, tp: TopicPartition) -> LeaderAndIsr | None:
        info = self.leadership.get(tp)
        return None if info is None else info.leader_and_isr

    def partitions_with_offline_leader(self) -> list[TopicPartition]:
        out = []
        for tp in self.all_partitions():
            lai = self.leader_and_isr(tp)
            if lai is None or self.is_topic_queued_for_deletion(tp[0]):
                continue
            if not self.is_replica_online(lai.leader, tp):
                out.append(tp)
        return out

    def partitions_with_leaders(self) -> list[TopicPartition]:
        return [tp for tp in self.all_partitions() if tp in self.leadership]

    # ---------------------------------------------------------------- states
    def partition_state(self, tp: TopicPartition) -> PartitionState:
        return self.partition_states.get(tp, PartitionState.NON_EXISTENT)

    def replica_state(self, replica: PartitionAndReplica) -> ReplicaState:
        return self.replica_states.get(replica, ReplicaState.NON_EXISTENT)

    def partitions_in_states(self, states: set[PartitionState]) -> list[TopicPartition]:
        return [tp for tp in self.all_partitions() if self.partition_state(tp) in states]

    def is_topic_queued_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_be_deleted

    def reset(self) -> None:
        """onControllerResignation: forget everything (the next controller rebuilds from ZK)."""
        fresh = ControllerContext()
        for f in fields(self):  # field by field: a compiled (native) instance has no __dict__
            setattr(self, f.name, getattr(fresh, f.name))
