"""GroupMetadata and MemberMetadata: one classic-protocol group's membership, its state machine
and its committed offsets — Kafka's kafka.coordinator.group.GroupMetadata / MemberMetadata,
pure state with no I/O and no awaits (the GroupCoordinator drives it; timers live there).

States and transitions (as Kafka's GroupState objects document them):

    Empty --join--> PreparingRebalance --all joined / rebalance timeout--> CompletingRebalance
    CompletingRebalance --leader's SyncGroup stored--> Stable
    Stable | CompletingRebalance --join of leader / changed metadata / leave / expiry--> PreparingRebalance
    PreparingRebalance --everyone left--> Empty
    any --unload / delete / expiry of an empty group--> Dead

Member iteration is insertion order (Kafka's HashMap order is arbitrary; ours must be
deterministic), so the first member to join is the first leader and a departed leader is
replaced by the oldest remaining member.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from kafkasim.protocol import errors as E
from kafkasim.protocol.errors import ProtocolError
from kafkasim.protocol.messages.consumer_protocol import ConsumerProtocolSubscription

CONSUMER_PROTOCOL_TYPE = "consumer"
MEMBER_ID_DELIMITER = "-"
UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1
NO_LEADER = ""
NO_PROTOCOL = ""


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


# Kafka's GroupState.validPreviousStates.
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.PREPARING_REBALANCE: frozenset({GroupState.STABLE, GroupState.COMPLETING_REBALANCE,
                                                GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
}


class IllegalStateError(Exception):
    """A transition Kafka's assertValidTransition refuses (a coordinator bug, never a client's)."""


@dataclass(frozen=True)
class TopicPartition:
    topic: str
    partition: int


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int          # -1 = none (RecordBatch.NO_PARTITION_LEADER_EPOCH)
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None = None  # only from OffsetCommit v2-v4 retention_time_ms


@dataclass(frozen=True)
class CommitRecordMetadataAndOffset:
    """An offset with the log offset of the batch that stored it: a later record always wins,
    whatever order commits were applied in."""

    appended_batch_offset: int | None
    offset_and_metadata: OffsetAndMetadata

    def older_than(self, that: CommitRecordMetadataAndOffset) -> bool:
        assert self.appended_batch_offset is not None and that.appended_batch_offset is not None
        return self.appended_batch_offset < that.appended_batch_offset


@dataclass(frozen=True)
class JoinMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinGroupResult:
    member_id: str
    error: int
    members: tuple[JoinMember, ...] = ()
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = NO_LEADER
    skip_assignment: bool = False


@dataclass(frozen=True)
class SyncGroupResult:
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


# producer id -> the transactional offsets it committed that await its transaction's marker
PendingTxnOffsets = dict[int, dict[TopicPartition, CommitRecordMetadataAndOffset]]
JoinCallback = Callable[[JoinGroupResult], None]
SyncCallback = Callable[[SyncGroupResult], None]


@dataclass(frozen=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupSummary:
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberSummary, ...]


@dataclass(frozen=True)
class GroupOverview:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"


@dataclass
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    supported_protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    awaiting_join_callback: JoinCallback | None = None
    awaiting_sync_callback: SyncCallback | None = None
    is_new: bool = False
    # Set when a heartbeat (or anything proving liveness) arrives; cleared when the next
    # session-timeout deadline is scheduled.
    heartbeat_satisfied: bool = False

    @property
    def is_static_member(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join_callback is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync_callback is not None

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.supported_protocols:
            if name == protocol:
                return data
        raise IllegalStateError(f"member {self.member_id} does not support protocol {protocol}")

    def has_satisfied_heartbeat(self) -> bool:
        if self.is_new:
            # New members can be expired while awaiting join, so this comes first.
            return self.heartbeat_satisfied
        if self.is_awaiting_join or self.is_awaiting_sync:
            # Members waiting on a rebalance satisfy their heartbeat by waiting.
            return True
        return self.heartbeat_satisfied

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return protocols == self.supported_protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among the candidates."""
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise IllegalStateError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def summary(self, protocol: str) -> MemberSummary:
        return MemberSummary(self.member_id, self.group_instance_id, self.client_id, self.client_host,
                             self.metadata(protocol), self.assignment)

    def summary_no_metadata(self) -> MemberSummary:
        return MemberSummary(self.member_id, self.group_instance_id, self.client_id, self.client_host, b"", b"")


def plain_protocol_set(protocols: list[tuple[str, bytes]]) -> set[str]:
    return {name for name, _ in protocols}


def subscribed_topics_of(metadata: bytes) -> set[str] | None:
    """Topics of a consumer-protocol Subscription, parsed as v0 (the prefix of every version,
    as Kafka does so it needs no knowledge of later versions); None if it does not parse."""
    if len(metadata) < 2 or int.from_bytes(metadata[:2], "big", signed=True) < 0:
        return None
    try:
        sub, _ = ConsumerProtocolSubscription.read(memoryview(metadata), 2, 0)
    except (ProtocolError, ValueError, IndexError, UnicodeDecodeError):
        return None
    return set(sub.topics)


class GroupMetadata:
    def __init__(self, group_id: str, initial_state: GroupState, now_ms: int) -> None:
        self.group_id = group_id
        self.state = initial_state
        self.current_state_timestamp: int | None = now_ms
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.static_members: dict[str, str] = {}      # group.instance.id -> member.id
        self.pending_members: dict[str, None] = {}    # insertion-ordered set
        self.pending_sync_members: dict[str, None] = {}
        self.num_members_awaiting_join = 0
        self.supported_protocols: dict[str, int] = {}
        self.offsets: dict[TopicPartition, CommitRecordMetadataAndOffset] = {}
        self.pending_offset_commits: dict[TopicPartition, OffsetAndMetadata] = {}
        # TxnOffsetCommit: per producer id, offsets written but not visible until the commit
        # marker reaches __consumer_offsets (kafkasim.broker.group.txn_offsets).
        self.pending_transactional_offset_commits: PendingTxnOffsets = {}
        self.subscribed_topics: set[str] | None = None
        self.new_member_added = False

    # ---------------------------------------------------------------- basics
    def is_state(self, state: GroupState) -> bool:
        return self.state == state

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    @property
    def size(self) -> int:
        return len(self.members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    @property
    def leader_or_none(self) -> str | None:
        return self.leader_id

    def current_state_timestamp_or_default(self) -> int:
        return -1 if self.current_state_timestamp is None else self.current_state_timestamp

    @property
    def is_consumer_group(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalStateError(f"Group {self.group_id} should be in one of "
                                    f"{sorted(str(s) for s in VALID_PREVIOUS_STATES[state])} before moving "
                                    f"to {state}, but it is {self.state}")
        self.state = state
        self.current_state_timestamp = now_ms

    # ---------------------------------------------------------------- membership
    def add(self, member: MemberMetadata, callback: JoinCallback | None = None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise IllegalStateError(f"static member {member.group_instance_id} is already in {self.group_id}")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._inc_supported_protocols(member)
        member.awaiting_join_callback = callback
        if member.is_awaiting_join:
            self.num_members_awaiting_join += 1
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._dec_supported_protocols(member)
            if member.is_awaiting_join:
                self.num_members_awaiting_join -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.pop(member_id, None)
        self.pending_sync_members.pop(member_id, None)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick the first member that did; False if the
        group has no leader or nobody rejoined."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].is_awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.is_awaiting_join:
                self.leader_id = member_id
                return True
        return False

    def replace_static_member(self, group_instance_id: str, old_member_id: str, new_member_id: str) -> MemberMetadata:
        member = self.members.pop(old_member_id, None)
        if member is None:
            raise IllegalStateError(f"cannot replace non-existing member id {old_member_id}")
        # Fence a duplicate instance still waiting on a join or sync answer.
        self.maybe_invoke_join_callback(member, JoinGroupResult(old_member_id, E.FENCED_INSTANCE_ID))
        self.maybe_invoke_sync_callback(member, SyncGroupResult(E.FENCED_INSTANCE_ID))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        return member

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def add_pending_member(self, member_id: str) -> None:
        if self.has(member_id):
            raise IllegalStateError(f"pending member {member_id} is already a member of {self.group_id}")
        self.pending_members[member_id] = None

    def add_pending_sync_member(self, member_id: str) -> None:
        if not self.has(member_id):
            raise IllegalStateError(f"pending sync for {member_id}, not a member of {self.group_id}")
        self.pending_sync_members[member_id] = None

    def remove_pending_sync_member(self, member_id: str) -> None:
        if not self.has(member_id):
            raise IllegalStateError(f"pending sync removal for {member_id}, not a member of {self.group_id}")
        self.pending_sync_members.pop(member_id, None)

    def has_received_sync_from_all_members(self) -> bool:
        return not self.pending_sync_members

    def clear_pending_sync_members(self) -> None:
        self.pending_sync_members.clear()

    def current_static_member_id(self, group_instance_id: str) -> str | None:
        return self.static_members.get(group_instance_id)

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_members_awaiting_join and not self.pending_members

    @property
    def num_awaiting(self) -> int:
        return self.num_members_awaiting_join

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def update_member(self, member: MemberMetadata, protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
                      session_timeout_ms: int, callback: JoinCallback | None) -> None:
        self._dec_supported_protocols(member)
        member.supported_protocols = protocols
        self._inc_supported_protocols(member)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if callback is not None and not member.is_awaiting_join:
            self.num_members_awaiting_join += 1
        elif callback is None and member.is_awaiting_join:
            self.num_members_awaiting_join -= 1
        member.awaiting_join_callback = callback

    def maybe_invoke_join_callback(self, member: MemberMetadata, result: JoinGroupResult) -> None:
        callback = member.awaiting_join_callback
        if callback is not None:
            member.awaiting_join_callback = None
            self.num_members_awaiting_join -= 1
            callback(result)

    def maybe_invoke_sync_callback(self, member: MemberMetadata, result: SyncGroupResult) -> bool:
        callback = member.awaiting_sync_callback
        if callback is None:
            return False
        member.awaiting_sync_callback = None
        callback(result)
        return True

    # ---------------------------------------------------------------- protocol selection
    def _inc_supported_protocols(self, member: MemberMetadata) -> None:
        for name, _ in member.supported_protocols:
            self.supported_protocols[name] = self.supported_protocols.get(name, 0) + 1

    def _dec_supported_protocols(self, member: MemberMetadata) -> None:
        for name, _ in member.supported_protocols:
            self.supported_protocols[name] = self.supported_protocols.get(name, 0) - 1

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {name for name, count in self.supported_protocols.items() if count == n}

    def select_protocol(self) -> str:
        """Every member votes for its most preferred protocol that all members support; the most
        votes win. Ties go to the protocol voted first (the oldest member's choice) — Kafka breaks
        them by hash order, which is arbitrary, so any deterministic rule is as faithful."""
        if not self.members:
            raise IllegalStateError("cannot select protocol for empty group")
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        best = max(votes.values())
        return next(name for name, count in votes.items() if count == best)

    def supports_protocols(self, member_protocol_type: str, member_protocols: set[str]) -> bool:
        if self.is_state(GroupState.EMPTY):
            return bool(member_protocol_type) and bool(member_protocols)
        return (self.protocol_type == member_protocol_type
                and any(self.supported_protocols.get(p, 0) == len(self.members) for p in member_protocols))

    def compute_subscribed_topics(self) -> set[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            parsed = subscribed_topics_of(member.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics |= parsed
        return topics

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return True if self.subscribed_topics is None else topic in self.subscribed_topics

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now_ms)
        self.clear_pending_sync_members()

    def current_member_metadata(self) -> tuple[JoinMember, ...]:
        if self.state in (GroupState.DEAD, GroupState.PREPARING_REBALANCE) or self.protocol_name is None:
            raise IllegalStateError(f"cannot obtain member metadata for group in state {self.state}")
        return tuple(JoinMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                     for m in self.members.values())

    def summary(self) -> GroupSummary:
        if self.is_state(GroupState.STABLE):
            protocol = self.protocol_name
            if protocol is None:
                raise IllegalStateError("invalid null group protocol for stable group")
            return GroupSummary(str(self.state), self.protocol_type or "", protocol,
                                tuple(m.summary(protocol) for m in self.members.values()))
        return GroupSummary(str(self.state), self.protocol_type or "", NO_PROTOCOL,
                            tuple(m.summary_no_metadata() for m in self.members.values()))

    def overview(self) -> GroupOverview:
        return GroupOverview(self.group_id, self.protocol_type or "", str(self.state))

    # ---------------------------------------------------------------- offsets
    def initialize_offsets(self, offsets: dict[TopicPartition, CommitRecordMetadataAndOffset],
                           pending_txn_offsets: PendingTxnOffsets | None = None) -> None:
        """GroupMetadata.initializeOffsets: the committed offsets a load found, and the
        transactional ones still waiting for their transaction's marker (by producer id)."""
        self.offsets.update(offsets)
        for producer_id, pending in (pending_txn_offsets or {}).items():
            self.pending_transactional_offset_commits.setdefault(producer_id, {}).update(pending)

    def prepare_offset_commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        self.pending_offset_commits.update(offsets)

    def on_offset_commit_append(self, tp: TopicPartition, committed: CommitRecordMetadataAndOffset) -> None:
        if tp in self.pending_offset_commits:
            current = self.offsets.get(tp)
            if current is None or current.older_than(committed):
                self.offsets[tp] = committed
        if self.pending_offset_commits.get(tp) == committed.offset_and_metadata:
            del self.pending_offset_commits[tp]

    def fail_pending_offset_write(self, tp: TopicPartition, offset: OffsetAndMetadata) -> None:
        if self.pending_offset_commits.get(tp) == offset:
            del self.pending_offset_commits[tp]

    def has_pending_offset_commits_for(self, tp: TopicPartition) -> bool:
        return tp in self.pending_offset_commits or any(
            tp in pending for pending in self.pending_transactional_offset_commits.values())

    def remove_all_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return self.remove_offsets(list(self.offsets))

    def remove_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata]:
        removed: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp in tps:
            self.pending_offset_commits.pop(tp, None)
            entry = self.offsets.pop(tp, None)
            if entry is not None:
                removed[tp] = entry.offset_and_metadata
        return removed

    def remove_expired_offsets(self, now_ms: int, retention_ms: int) -> dict[TopicPartition, OffsetAndMetadata]:
        """Kafka's GroupMetadata.removeExpiredOffsets: an Empty group's offsets expire
        `retention_ms` after it became empty; a Stable consumer group's offsets of topics it no
        longer subscribes to expire `retention_ms` after their commit; a group with no protocol
        (offset storage only) expires each offset by its commit time."""
        def expired(base: Callable[[CommitRecordMetadataAndOffset], int],
                    subscribed: frozenset[str] = frozenset()) -> dict[TopicPartition, OffsetAndMetadata]:
            out: dict[TopicPartition, OffsetAndMetadata] = {}
            for tp, entry in self.offsets.items():
                if tp.topic in subscribed or tp in self.pending_offset_commits:
                    continue
                om = entry.offset_and_metadata
                if om.expire_timestamp_ms is None:
                    if now_ms - base(entry) >= retention_ms:
                        out[tp] = om
                elif now_ms >= om.expire_timestamp_ms:
                    out[tp] = om
            return out

        if self.protocol_type is not None and self.is_state(GroupState.EMPTY):
            state_ts = self.current_state_timestamp
            result = expired(lambda e: state_ts if state_ts is not None else e.offset_and_metadata.commit_timestamp_ms)
        elif (self.protocol_type == CONSUMER_PROTOCOL_TYPE and self.subscribed_topics is not None
              and self.is_state(GroupState.STABLE)):
            result = expired(lambda e: e.offset_and_metadata.commit_timestamp_ms, frozenset(self.subscribed_topics))
        elif self.protocol_type is None:
            result = expired(lambda e: e.offset_and_metadata.commit_timestamp_ms)
        else:
            result = {}
        for tp in result:
            del self.offsets[tp]
        return result

    def offset(self, tp: TopicPartition) -> OffsetAndMetadata | None:
        entry = self.offsets.get(tp)
        return None if entry is None else entry.offset_and_metadata

    def all_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return {tp: e.offset_and_metadata for tp, e in self.offsets.items()}

    def has_offsets(self) -> bool:
        return (bool(self.offsets) or bool(self.pending_offset_commits)
                or bool(self.pending_transactional_offset_commits))

    @classmethod
    def load_group(cls, group_id: str, initial_state: GroupState, generation_id: int, protocol_type: str,
                   protocol_name: str | None, leader_id: str | None, current_state_timestamp: int | None,
                   members: list[MemberMetadata], now_ms: int) -> GroupMetadata:
        group = cls(group_id, initial_state, now_ms)
        group.generation_id = generation_id
        group.protocol_type = protocol_type or None
        group.protocol_name = protocol_name
        group.leader_id = leader_id
        group.current_state_timestamp = current_state_timestamp
        for member in members:
            group.add(member, None)
        group.subscribed_topics = group.compute_subscribed_topics()
        return group

    def __repr__(self) -> str:
        return (f"GroupMetadata(groupId={self.group_id}, generation={self.generation_id}, "
                f"protocolType={self.protocol_type}, currentState={self.state}, members={list(self.members)})")
