"""GroupCoordinator: group membership and offset management for the classic protocol —
Kafka's kafka.coordinator.group.GroupCoordinator (3.9), handler for handler and error for error.

Each broker coordinates the groups whose `__consumer_offsets` partition it leads
(`partition = abs(javaHash(groupId)) % partitions`). Membership: JoinGroup parks until every
known member rejoined (or the rebalance timeout), the first member is the leader and gets
everyone's subscription, the leader's SyncGroup carries the assignment that every member's
SyncGroup returns; heartbeats keep members alive (session timeout) and learn of rebalances
(REBALANCE_IN_PROGRESS). Static members (group.instance.id, JoinGroup v5+) rejoin under a new
member id without a rebalance and fence their predecessor (FENCED_INSTANCE_ID).

The JoinGroup/SyncGroup answers are callbacks, as in Kafka: a handler passes a callback that
resolves its response future, and the coordinator invokes it whenever the group gets there.
Timers are delayed operations (kafkasim.broker.group.delayed) in the generic purgatory
(kafkasim.broker.purgatory). Methods that write to the log are `async` and re-check the group
after the append, as Kafka's append callbacks do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkasim.broker.group import delayed as D
from kafkasim.broker.group.manager import GROUP_METADATA_TOPIC_NAME, GroupMetadataManager, PartitionData
from kafkasim.broker.group.metadata import (
    UNKNOWN_MEMBER_ID,
    GroupMetadata,
    GroupOverview,
    GroupState,
    GroupSummary,
    JoinCallback,
    JoinGroupResult,
    MemberMetadata,
    OffsetAndMetadata,
    SyncCallback,
    SyncGroupResult,
    TopicPartition,
    plain_protocol_set,
)
from kafkasim.broker.group.txn_offsets import handle_txn_completion
from kafkasim.broker.purgatory import DelayedOperationPurgatory, GroupJoinKey, GroupSyncKey, MemberKey
from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E

if TYPE_CHECKING:
    from kafkasim.broker.config import BrokerConfig
    from kafkasim.broker.metadata_cache import MetadataCache
    from kafkasim.broker.replica_manager import ReplicaManager
    from kafkasim.runtime.api import NodeRuntime

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # GroupCoordinator.NewMemberJoinTimeoutMs
EMPTY_GROUP = GroupSummary("", "", "", ())
DEAD_GROUP = GroupSummary(str(GroupState.DEAD), "", "", ())

Protocols = list[tuple[str, bytes]]


@dataclass(frozen=True)
class LeaveMember:
    member_id: str
    group_instance_id: str | None
    reason: str | None = None


@dataclass(frozen=True)
class LeaveMemberResponse:
    member_id: str
    group_instance_id: str | None
    error: int


@dataclass(frozen=True)
class LeaveGroupResult:
    top_level_error: int
    member_responses: tuple[LeaveMemberResponse, ...]


class GroupCoordinator:
    def __init__(self, rt: NodeRuntime, config: BrokerConfig, replica_manager: ReplicaManager,
                 metadata_cache: MetadataCache) -> None:
        self.rt = rt
        self.config = config
        self.broker_id = config.broker_id
        self.group_manager = GroupMetadataManager(rt, config, replica_manager, metadata_cache)
        self.heartbeat_purgatory = DelayedOperationPurgatory(rt, "Heartbeat")
        self.rebalance_purgatory = DelayedOperationPurgatory(rt, "Rebalance")
        self.is_active = True
        self._expiration_started = False

    # ---------------------------------------------------------------- helpers
    def _now(self) -> int:
        return self.rt.now_ms()

    def _trace(self, ev: str, group: GroupMetadata, **fields: object) -> None:
        self.rt.trace(ev, group=group.group_id, generation=group.generation_id, state=str(group.state), **fields)

    def partition_for(self, group_id: str) -> int:
        return self.group_manager.partition_for(group_id)

    @staticmethod
    def _is_valid_group_id(group_id: str | None, api_key: int) -> bool:
        if api_key in (A.OFFSET_COMMIT, A.OFFSET_FETCH, A.DESCRIBE_GROUPS, A.DELETE_GROUPS):
            # For backwards compatibility these accept the empty group id.
            return group_id is not None
        return bool(group_id)

    def validate_group_status(self, group_id: str | None, api_key: int) -> int | None:
        """Valid id, active coordinator, partition loaded and owned here — or the error."""
        if not self._is_valid_group_id(group_id, api_key):
            return E.INVALID_GROUP_ID
        assert group_id is not None
        if not self.is_active:
            return E.COORDINATOR_NOT_AVAILABLE
        if self.group_manager.is_group_loading(group_id):
            return E.COORDINATOR_LOAD_IN_PROGRESS
        if not self.group_manager.is_group_local(group_id):
            return E.NOT_COORDINATOR
        return None

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        max_size = self.config.group_max_size
        if group.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_state(GroupState.PREPARING_REBALANCE):
            return (group.has(member_id) and group.get(member_id).is_awaiting_join) or group.num_awaiting < max_size
        return group.has(member_id) or group.size < max_size

    # ---------------------------------------------------------------- JoinGroup
    async def handle_join_group(self, group_id: str, member_id: str, group_instance_id: str | None,
                                require_known_member_id: bool, support_skipping_assignment: bool, client_id: str,
                                client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
                                protocol_type: str, protocols: Protocols, callback: JoinCallback,
                                reason: str | None = None) -> None:
        error = self.validate_group_status(group_id, A.JOIN_GROUP)
        if error is not None:
            callback(JoinGroupResult(member_id, error))
            return
        if not (self.config.group_min_session_timeout_ms <= session_timeout_ms
                <= self.config.group_max_session_timeout_ms):
            callback(JoinGroupResult(member_id, E.INVALID_SESSION_TIMEOUT))
            return
        is_unknown_member = member_id == UNKNOWN_MEMBER_ID
        # A group is created only by an unknown member; a known member id for a missing group
        # is UNKNOWN_MEMBER_ID.
        group = self.group_manager.get_or_maybe_create_group(group_id, is_unknown_member)
        if group is None:
            callback(JoinGroupResult(member_id, E.UNKNOWN_MEMBER_ID))
            return
        join_reason = reason or "not provided"
        if not self._accept_joining_member(group, member_id):
            group.remove(member_id)
            callback(JoinGroupResult(UNKNOWN_MEMBER_ID, E.GROUP_MAX_SIZE_REACHED))
        elif is_unknown_member:
            await self._do_new_member_join_group(group, group_instance_id, require_known_member_id,
                                                 support_skipping_assignment, client_id, client_host,
                                                 rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols,
                                                 callback, join_reason)
        else:
            self._do_current_member_join_group(group, member_id, group_instance_id, client_id, client_host,
                                               rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols,
                                               callback, join_reason)
        if group.is_state(GroupState.PREPARING_REBALANCE):
            self.rebalance_purgatory.check_and_complete(GroupJoinKey(group.group_id))

    def _generate_member_id(self, client_id: str, group_instance_id: str | None) -> str:
        # Kafka appends UUID.randomUUID(); ours comes from the node's seeded stream.
        raw = self.rt.rng("group-member-id").randbytes(16)
        h = raw.hex()
        uuid = f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[raw[8] & 3]}{h[17:20]}-{h[20:32]}"
        return f"{group_instance_id if group_instance_id is not None else client_id}-{uuid}"

    async def _do_new_member_join_group(self, group: GroupMetadata, group_instance_id: str | None,
                                        require_known_member_id: bool, support_skipping_assignment: bool,
                                        client_id: str, client_host: str, rebalance_timeout_ms: int,
                                        session_timeout_ms: int, protocol_type: str, protocols: Protocols,
                                        callback: JoinCallback, reason: str) -> None:
        if group.is_state(GroupState.DEAD):
            # Just removed (migrated or deleted): let the member find the coordinator again.
            callback(JoinGroupResult(UNKNOWN_MEMBER_ID, E.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(protocol_type, plain_protocol_set(protocols)):
            callback(JoinGroupResult(UNKNOWN_MEMBER_ID, E.INCONSISTENT_GROUP_PROTOCOL))
            return
        new_member_id = self._generate_member_id(client_id, group_instance_id)
        if group_instance_id is not None:
            old_member_id = group.current_static_member_id(group_instance_id)
            if old_member_id is not None:
                await self._update_static_member_and_rebalance(
                    group, old_member_id, new_member_id, group_instance_id, protocols, rebalance_timeout_ms,
                    session_timeout_ms, callback, reason, support_skipping_assignment)
            else:
                self._add_member_and_rebalance(rebalance_timeout_ms, session_timeout_ms, new_member_id,
                                               group_instance_id, client_id, client_host, protocol_type, protocols,
                                               group, callback, reason)
        elif require_known_member_id:
            # JoinGroup v4+: hand out the id and have the member rejoin with it, so a client that
            # never gets this answer does not leave a phantom member behind.
            group.add_pending_member(new_member_id)
            self._add_pending_member_expiration(group, new_member_id, session_timeout_ms)
            callback(JoinGroupResult(new_member_id, E.MEMBER_ID_REQUIRED))
        else:
            self._add_member_and_rebalance(rebalance_timeout_ms, session_timeout_ms, new_member_id, None, client_id,
                                           client_host, protocol_type, protocols, group, callback, reason)

    def _validate_current_member(self, group: GroupMetadata, member_id: str,
                                 group_instance_id: str | None) -> int | None:
        """The instance id (if any) maps to this member id, and the member exists."""
        if group_instance_id is not None:
            current = group.current_static_member_id(group_instance_id)
            if current is None:
                return E.UNKNOWN_MEMBER_ID
            if current != member_id:
                return E.FENCED_INSTANCE_ID
            return None
        if not group.has(member_id):
            return E.UNKNOWN_MEMBER_ID
        return None

    def _current_generation_result(self, group: GroupMetadata, member_id: str, with_members: bool) -> JoinGroupResult:
        return JoinGroupResult(member_id=member_id, error=E.NONE,
                               members=group.current_member_metadata() if with_members else (),
                               generation_id=group.generation_id, protocol_type=group.protocol_type,
                               protocol_name=group.protocol_name, leader_id=group.leader_id or "")

    def _do_current_member_join_group(self, group: GroupMetadata, member_id: str, group_instance_id: str | None,
                                      client_id: str, client_host: str, rebalance_timeout_ms: int,
                                      session_timeout_ms: int, protocol_type: str, protocols: Protocols,
                                      callback: JoinCallback, reason: str) -> None:
        if group.is_state(GroupState.DEAD):
            callback(JoinGroupResult(member_id, E.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(protocol_type, plain_protocol_set(protocols)):
            callback(JoinGroupResult(member_id, E.INCONSISTENT_GROUP_PROTOCOL))
            return
        if group.is_pending_member(member_id):
            # The second JoinGroup of the MEMBER_ID_REQUIRED dance (pending members are dynamic).
            if group_instance_id is not None:
                callback(JoinGroupResult(member_id, E.UNKNOWN_SERVER_ERROR))
                return
            self._add_member_and_rebalance(rebalance_timeout_ms, session_timeout_ms, member_id, None, client_id,
                                           client_host, protocol_type, protocols, group, callback, reason)
            return
        error = self._validate_current_member(group, member_id, group_instance_id)
        if error is not None:
            callback(JoinGroupResult(member_id, error))
            return
        member = group.get(member_id) if group.has(member_id) else None
        state = group.state
        if member is None or state in (GroupState.EMPTY, GroupState.DEAD):
            # Unexpected state: let the member reset its generation and rejoin.
            callback(JoinGroupResult(member_id, E.UNKNOWN_MEMBER_ID))
        elif state == GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms, session_timeout_ms,
                                              f"member {member_id} joining during {state}; reason: {reason}",
                                              callback)
        elif state == GroupState.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # Same metadata (it probably missed the JoinGroup answer): this generation again.
                callback(self._current_generation_result(group, member_id, group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms, session_timeout_ms,
                                                  f"updating metadata of {member_id}; reason: {reason}", callback)
        elif group.is_leader(member_id) or not member.matches(protocols):
            # Stable: the leader rejoining forces a rebalance (it may have seen metadata change),
            # as does a follower with new metadata.
            self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms, session_timeout_ms,
                                              f"member {member_id} rejoining stable group; reason: {reason}", callback)
        else:
            callback(self._current_generation_result(group, member_id, False))

    # ---------------------------------------------------------------- SyncGroup
    async def handle_sync_group(self, group_id: str, generation: int, member_id: str, protocol_type: str | None,
                                protocol_name: str | None, group_instance_id: str | None,
                                group_assignment: dict[str, bytes], callback: SyncCallback) -> None:
        error = self.validate_group_status(group_id, A.SYNC_GROUP)
        if error == E.COORDINATOR_LOAD_IN_PROGRESS:
            # The rebalance state was lost with the load; old clients do not expect this error,
            # so they are told to rejoin instead.
            callback(SyncGroupResult(E.REBALANCE_IN_PROGRESS))
            return
        if error is not None:
            callback(SyncGroupResult(error))
            return
        group = self.group_manager.get_group(group_id)
        if group is None:
            callback(SyncGroupResult(E.UNKNOWN_MEMBER_ID))
            return
        await self._do_sync_group(group, generation, member_id, protocol_type, protocol_name, group_instance_id,
                                  group_assignment, callback)

    def _validate_sync_group(self, group: GroupMetadata, generation_id: int, member_id: str,
                             protocol_type: str | None, protocol_name: str | None,
                             group_instance_id: str | None) -> int | None:
        if group.is_state(GroupState.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        error = self._validate_current_member(group, member_id, group_instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
        if protocol_type is not None and group.protocol_type != protocol_type:
            return E.INCONSISTENT_GROUP_PROTOCOL
        if protocol_name is not None and group.protocol_name != protocol_name:
            return E.INCONSISTENT_GROUP_PROTOCOL
        return None

    async def _do_sync_group(self, group: GroupMetadata, generation_id: int, member_id: str,
                             protocol_type: str | None, protocol_name: str | None,
                             group_instance_id: str | None, group_assignment: dict[str, bytes],
                             callback: SyncCallback) -> None:
        error = self._validate_sync_group(group, generation_id, member_id, protocol_type, protocol_name,
                                          group_instance_id)
        if error is not None:
            callback(SyncGroupResult(error))
            return
        if group.is_state(GroupState.EMPTY):
            callback(SyncGroupResult(E.UNKNOWN_MEMBER_ID))
        elif group.is_state(GroupState.PREPARING_REBALANCE):
            callback(SyncGroupResult(E.REBALANCE_IN_PROGRESS))
        elif group.is_state(GroupState.COMPLETING_REBALANCE):
            group.get(member_id).awaiting_sync_callback = callback
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                # Members the leader left out get an empty assignment.
                assignment = {m: group_assignment.get(m, b"") for m in group.members}
                self._trace("group_assignment_received", group, leader=member_id,
                            missing=[m for m in group.members if m not in group_assignment])
                code = await self.group_manager.store_group(group, assignment)
                # Someone may have joined (or left) while the record was appended: only the same
                # generation still completing its rebalance may become Stable with it.
                if group.is_state(GroupState.COMPLETING_REBALANCE) and generation_id == group.generation_id:
                    if code != E.NONE:
                        self._reset_and_propagate_assignment_error(group, code)
                        self._maybe_prepare_rebalance(group, f"error {code} storing the assignment")
                    else:
                        self._set_and_propagate_assignment(group, assignment)
                        group.transition_to(GroupState.STABLE, self._now())
                        self._trace("group_stable", group, members=list(group.members))
        elif group.is_state(GroupState.STABLE):
            self._remove_pending_sync_member(group, member_id)
            member = group.get(member_id)
            callback(SyncGroupResult(E.NONE, group.protocol_type, group.protocol_name, member.assignment))
            self._complete_and_schedule_next_heartbeat_expiration(group, member)

    # ---------------------------------------------------------------- LeaveGroup
    def handle_leave_group(self, group_id: str, leaving_members: list[LeaveMember]) -> LeaveGroupResult:
        error = self.validate_group_status(group_id, A.LEAVE_GROUP)
        if error is not None:
            return LeaveGroupResult(error, ())
        group = self.group_manager.get_group(group_id)
        if group is None:
            return LeaveGroupResult(E.NONE, tuple(LeaveMemberResponse(m.member_id, m.group_instance_id,
                                                                      E.UNKNOWN_MEMBER_ID) for m in leaving_members))
        if group.is_state(GroupState.DEAD):
            return LeaveGroupResult(E.COORDINATOR_NOT_AVAILABLE, ())
        responses = []
        for leaving in leaving_members:
            responses.append(LeaveMemberResponse(leaving.member_id, leaving.group_instance_id,
                                                 self._leave_one(group, leaving)))
        return LeaveGroupResult(E.NONE, tuple(responses))

    def _leave_one(self, group: GroupMetadata, leaving: LeaveMember) -> int:
        if leaving.member_id == UNKNOWN_MEMBER_ID:
            # Administrative removal by group.instance.id alone.
            current = (group.current_static_member_id(leaving.group_instance_id)
                       if leaving.group_instance_id is not None else None)
            if current is None:
                return E.UNKNOWN_MEMBER_ID
            self._remove_current_member_from_group(group, current, leaving.reason)
            return E.NONE
        if group.is_pending_member(leaving.member_id):
            self._remove_pending_member_and_update_group(group, leaving.member_id)
            self.heartbeat_purgatory.check_and_complete(MemberKey(group.group_id, leaving.member_id))
            return E.NONE
        error = self._validate_current_member(group, leaving.member_id, leaving.group_instance_id)
        if error is not None:
            return error
        self._remove_current_member_from_group(group, leaving.member_id, leaving.reason)
        return E.NONE

    def _remove_current_member_from_group(self, group: GroupMetadata, member_id: str, reason: str | None) -> None:
        member = group.get(member_id)
        self._trace("group_member_left", group, member=member_id, reason=reason or "not provided")
        self._remove_member_and_update_group(group, member, f"member {member_id} left (LeaveGroup)")
        self._remove_heartbeat_for_leaving_member(group, member_id)

    # ---------------------------------------------------------------- DeleteGroups / OffsetDelete
    async def handle_delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        errors: dict[str, int] = {}
        eligible: list[GroupMetadata] = []
        for group_id in group_ids:
            error = self.validate_group_status(group_id, A.DELETE_GROUPS)
            if error is not None:
                errors[group_id] = error
                continue
            group = self.group_manager.get_group(group_id)
            if group is None or group.is_state(GroupState.DEAD):
                errors[group_id] = (E.GROUP_ID_NOT_FOUND if self.group_manager.group_not_exists(group_id)
                                    else E.NOT_COORDINATOR)
            elif group.is_state(GroupState.EMPTY):
                group.transition_to(GroupState.DEAD, self._now())
                eligible.append(group)
            else:
                errors[group_id] = E.NON_EMPTY_GROUP
        if eligible:
            await self.group_manager.cleanup_group_metadata(eligible, lambda g: g.remove_all_offsets())
            for group in eligible:
                errors[group.group_id] = E.NONE
                self.rt.trace("group_deleted", group=group.group_id)
        return {g: errors[g] for g in group_ids if g in errors}

    async def handle_delete_offsets(self, group_id: str,
                                    partitions: list[TopicPartition]) -> tuple[int, dict[TopicPartition, int]]:
        error = self.validate_group_status(group_id, A.OFFSET_DELETE)
        if error is not None:
            return error, {}
        group = self.group_manager.get_group(group_id)
        if group is None or group.is_state(GroupState.DEAD):
            return (E.GROUP_ID_NOT_FOUND if self.group_manager.group_not_exists(group_id) else E.NOT_COORDINATOR), {}
        partition_errors: dict[TopicPartition, int] = {}
        if group.is_state(GroupState.EMPTY):
            eligible = list(partitions)
        elif group.is_consumer_group:
            eligible = [tp for tp in partitions if not group.is_subscribed_to_topic(tp.topic)]
            partition_errors = {tp: E.GROUP_SUBSCRIBED_TO_TOPIC for tp in partitions
                                if group.is_subscribed_to_topic(tp.topic)}
        else:
            return E.NON_EMPTY_GROUP, {}
        if eligible:
            await self.group_manager.cleanup_group_metadata([group], lambda g: g.remove_offsets(eligible))
            partition_errors.update({tp: E.NONE for tp in eligible})
        return E.NONE, {tp: partition_errors[tp] for tp in partitions if tp in partition_errors}

    # ---------------------------------------------------------------- Heartbeat
    def handle_heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                         generation_id: int) -> int:
        error = self.validate_group_status(group_id, A.HEARTBEAT)
        if error is not None:
            # While the group is loading, answer blindly: the member learns its fate after.
            return E.NONE if error == E.COORDINATOR_LOAD_IN_PROGRESS else error
        group = self.group_manager.get_group(group_id)
        if group is None:
            return E.UNKNOWN_MEMBER_ID
        if group.is_state(GroupState.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        error = self._validate_current_member(group, member_id, group_instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
        if group.is_state(GroupState.EMPTY):
            return E.UNKNOWN_MEMBER_ID
        self._complete_and_schedule_next_heartbeat_expiration(group, group.get(member_id))
        if group.is_state(GroupState.PREPARING_REBALANCE):
            return E.REBALANCE_IN_PROGRESS
        # CompletingRebalance (members may heartbeat after their JoinGroup answer) and Stable.
        return E.NONE

    # ---------------------------------------------------------------- OffsetCommit / OffsetFetch
    async def handle_commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None,
                                    generation_id: int,
                                    offsets: dict[TopicPartition, OffsetAndMetadata]) -> dict[TopicPartition, int]:
        error = self.validate_group_status(group_id, A.OFFSET_COMMIT)
        if error is not None:
            return {tp: error for tp in offsets}
        group = self.group_manager.get_group(group_id)
        if group is None:
            if generation_id >= 0:
                # A commit from a generation of a group we do not know: reject it.
                return {tp: E.ILLEGAL_GENERATION for tp in offsets}
            # Not using group management (assign() consumers, admin tools): allow the commit.
            group = self.group_manager.add_group(GroupMetadata(group_id, GroupState.EMPTY, self._now()))
        return await self._do_commit_offsets(group, member_id, group_instance_id, generation_id, offsets)

    def _validate_offset_commit(self, group: GroupMetadata, generation_id: int, member_id: str,
                                group_instance_id: str | None) -> int | None:
        if group.is_state(GroupState.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.is_state(GroupState.EMPTY):
            # Admin client or a consumer without group management: fine while the group is empty.
            return None
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
            error = self._validate_current_member(group, member_id, group_instance_id)
            if error is not None:
                return error
            if generation_id != group.generation_id:
                return E.ILLEGAL_GENERATION
            return None
        if not group.is_state(GroupState.EMPTY):
            return E.UNKNOWN_MEMBER_ID  # only members may commit to a non-empty group
        return None

    async def _do_commit_offsets(self, group: GroupMetadata, member_id: str, group_instance_id: str | None,
                                 generation_id: int,
                                 offsets: dict[TopicPartition, OffsetAndMetadata]) -> dict[TopicPartition, int]:
        error = self._validate_offset_commit(group, generation_id, member_id, group_instance_id)
        if error is not None:
            return {tp: error for tp in offsets}
        if group.is_state(GroupState.EMPTY):
            return await self.group_manager.store_offsets(group, member_id, offsets)
        if group.state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE):
            # Commits are allowed while preparing a rebalance: the heartbeat tells the member.
            self._complete_and_schedule_next_heartbeat_expiration(group, group.get(member_id))
            return await self.group_manager.store_offsets(group, member_id, offsets)
        # CompletingRebalance: the member has its new generation but no assignment yet.
        return {tp: E.REBALANCE_IN_PROGRESS for tp in offsets}

    def handle_fetch_offsets(self, group_id: str, require_stable: bool, partitions: list[TopicPartition] | None
                             ) -> tuple[int, dict[TopicPartition, PartitionData]]:
        error = self.validate_group_status(group_id, A.OFFSET_FETCH)
        if error is not None:
            return error, {}
        # Whatever the group's state: it may use Kafka for offsets without group management.
        return E.NONE, self.group_manager.get_offsets(group_id, require_stable, partitions)

    # ---------------------------------------------------------------- ListGroups / DescribeGroups
    def handle_list_groups(self, states: set[str]) -> tuple[int, list[GroupOverview]]:
        if not self.is_active:
            return E.COORDINATOR_NOT_AVAILABLE, []
        error = E.COORDINATOR_LOAD_IN_PROGRESS if self.group_manager.is_loading else E.NONE
        wanted = {s.lower() for s in states}
        groups = [g.overview() for g in self.group_manager.current_groups()
                  if not wanted or str(g.state).lower() in wanted]
        return error, groups

    def handle_describe_group(self, group_id: str) -> tuple[int, GroupSummary]:
        error = self.validate_group_status(group_id, A.DESCRIBE_GROUPS)
        if error is not None:
            return error, EMPTY_GROUP
        group = self.group_manager.get_group(group_id)
        if group is None:
            return E.NONE, DEAD_GROUP
        return E.NONE, group.summary()

    async def on_partitions_deleted(self, partitions: list[TopicPartition]) -> int:
        """Topic deletion: drop every group's offsets of these partitions, with tombstones
        (Kafka's GroupCoordinator.onPartitionsDeleted, called when the replicas are deleted).
        Returns how many offsets were removed."""
        removed = await self.group_manager.cleanup_group_metadata(self.group_manager.current_groups(),
                                                                  lambda g: g.remove_offsets(partitions))
        self.rt.trace("group_offsets_of_deleted_partitions", partitions=len(partitions), removed=removed)
        return removed

    # ---------------------------------------------------------------- election / resignation
    def on_election(self, offset_topic_partition: int, coordinator_epoch: int) -> None:
        """This broker now leads `__consumer_offsets-<partition>`: load its groups."""
        self._start_offset_expiration()
        self.group_manager.schedule_load_group_and_offsets(offset_topic_partition, coordinator_epoch,
                                                           self._on_group_loaded)

    def on_resignation(self, offset_topic_partition: int, coordinator_epoch: int | None) -> None:
        self.group_manager.remove_groups_for_partition(offset_topic_partition, coordinator_epoch,
                                                       self._on_group_unloaded)

    def on_transaction_completed(self, producer_id: int, offsets_partitions: list[int], committed: bool) -> None:
        """A transaction marker landed on these `__consumer_offsets` partitions (WriteTxnMarkers)."""
        handle_txn_completion(self.group_manager, producer_id, offsets_partitions, committed)

    def on_leadership_change(self, topic: str, partition: int, leader_epoch: int) -> None:
        """ReplicaManager listener: leadership of an offsets partition means coordinatorship."""
        if topic == GROUP_METADATA_TOPIC_NAME:
            self.on_election(partition, leader_epoch)

    def _on_group_loaded(self, group: GroupMetadata) -> None:
        if group.size > self.config.group_max_size:
            self._prepare_rebalance(group, "freshly-loaded group is over capacity")
        for member in list(group.members.values()):
            self._complete_and_schedule_next_heartbeat_expiration(group, member)
        self._trace("group_loaded", group, members=list(group.members), offsets=len(group.offsets))

    def _on_group_unloaded(self, group: GroupMetadata) -> None:
        previous = group.state
        group.transition_to(GroupState.DEAD, self._now())
        if previous == GroupState.PREPARING_REBALANCE:
            for member in list(group.members.values()):
                group.maybe_invoke_join_callback(member, JoinGroupResult(member.member_id, E.NOT_COORDINATOR))
            self.rebalance_purgatory.check_and_complete(GroupJoinKey(group.group_id))
        elif previous in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            for member in list(group.members.values()):
                group.maybe_invoke_sync_callback(member, SyncGroupResult(E.NOT_COORDINATOR))
                self.heartbeat_purgatory.check_and_complete(MemberKey(group.group_id, member.member_id))
        self._remove_sync_expiration(group)

    def _start_offset_expiration(self) -> None:
        """The periodic offset-retention task (offsets.retention.check.interval.ms)."""
        if self._expiration_started:
            return
        self._expiration_started = True
        interval = self.config.offsets_retention_check_interval_ms

        def tick() -> None:
            if self.is_active:
                self.rt.spawn(self.group_manager.cleanup_expired_offsets(), name="delete-expired-group-metadata")
                self.rt.call_later(interval, tick)

        self.rt.call_later(interval, tick)

    def shutdown(self) -> None:
        self.is_active = False
        self.group_manager.shutdown()
        self.heartbeat_purgatory.cancel_all()
        self.rebalance_purgatory.cancel_all()

    # ---------------------------------------------------------------- assignment propagation
    def _set_and_propagate_assignment(self, group: GroupMetadata, assignment: dict[str, bytes]) -> None:
        for member in group.members.values():
            member.assignment = assignment[member.member_id]
        self._propagate_assignment(group, E.NONE)

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error: int) -> None:
        protocol_type, protocol_name = ((group.protocol_type, group.protocol_name) if error == E.NONE
                                        else (None, None))
        for member in list(group.members.values()):
            if group.maybe_invoke_sync_callback(member, SyncGroupResult(error, protocol_type, protocol_name,
                                                                        member.assignment)):
                # Reset the session timeout after the assignment went out: an expiration that
                # fired while the member waited was ignored and scheduled nothing.
                self._complete_and_schedule_next_heartbeat_expiration(group, member)

    # ---------------------------------------------------------------- heartbeats (purgatory)
    def _complete_and_schedule_next_heartbeat_expiration(self, group: GroupMetadata, member: MemberMetadata) -> None:
        self._complete_and_schedule_next_expiration(group, member, member.session_timeout_ms)

    def _complete_and_schedule_next_expiration(self, group: GroupMetadata, member: MemberMetadata,
                                               timeout_ms: int) -> None:
        key = MemberKey(group.group_id, member.member_id)
        member.heartbeat_satisfied = True
        self.heartbeat_purgatory.check_and_complete(key)
        member.heartbeat_satisfied = False
        self.heartbeat_purgatory.try_complete_else_watch(
            D.DelayedHeartbeat(self, group, member.member_id, False, timeout_ms), [key])

    def _add_pending_member_expiration(self, group: GroupMetadata, member_id: str, timeout_ms: int) -> None:
        self.heartbeat_purgatory.try_complete_else_watch(D.DelayedHeartbeat(self, group, member_id, True, timeout_ms),
                                                         [MemberKey(group.group_id, member_id)])

    def _remove_heartbeat_for_leaving_member(self, group: GroupMetadata, member_id: str) -> None:
        self.heartbeat_purgatory.check_and_complete(MemberKey(group.group_id, member_id))

    def try_complete_heartbeat(self, group: GroupMetadata, member_id: str, is_pending: bool,
                               force_complete: D.ForceComplete) -> bool:
        if group.is_state(GroupState.DEAD):
            return force_complete()
        if is_pending:
            return force_complete() if group.has(member_id) else False
        if not group.has(member_id) or group.get(member_id).has_satisfied_heartbeat():
            return force_complete()
        return False

    def on_expire_heartbeat(self, group: GroupMetadata, member_id: str, is_pending: bool) -> None:
        if group.is_state(GroupState.DEAD):
            return
        if is_pending:
            self._trace("group_pending_member_expired", group, member=member_id)
            self._remove_pending_member_and_update_group(group, member_id)
            return
        if not group.has(member_id):
            return
        member = group.get(member_id)
        if not member.has_satisfied_heartbeat():
            self._trace("group_member_expired", group, member=member_id)
            self._remove_member_and_update_group(group, member, f"member {member_id} session expired")

    # ---------------------------------------------------------------- membership changes
    def _add_member_and_rebalance(self, rebalance_timeout_ms: int, session_timeout_ms: int, member_id: str,
                                  group_instance_id: str | None, client_id: str, client_host: str,
                                  protocol_type: str, protocols: Protocols, group: GroupMetadata,
                                  callback: JoinCallback, reason: str) -> None:
        member = MemberMetadata(member_id, group_instance_id, client_id, client_host, rebalance_timeout_ms,
                                session_timeout_ms, protocol_type, list(protocols))
        member.is_new = True
        # A member arriving during the initial delay extends it (InitialDelayedJoin).
        if group.is_state(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, callback)
        self._trace("group_member_added", group, member=member_id, instance=group_instance_id)
        # A new member cannot heartbeat (no id yet) and its socket is muted while it waits, so
        # its JoinGroup times out on its own (NewMemberJoinTimeoutMs) if the client went away.
        self._complete_and_schedule_next_expiration(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"adding new member {member_id}; reason: {reason}")

    async def _update_static_member_and_rebalance(self, group: GroupMetadata, old_member_id: str,
                                                  new_member_id: str, group_instance_id: str, protocols: Protocols,
                                                  rebalance_timeout_ms: int, session_timeout_ms: int,
                                                  callback: JoinCallback, reason: str,
                                                  support_skipping_assignment: bool) -> None:
        current_leader = group.leader_id or ""
        member = group.replace_static_member(group_instance_id, old_member_id, new_member_id)
        # The old id's heartbeat expires harmlessly (no such member any more).
        self._complete_and_schedule_next_heartbeat_expiration(group, member)
        old_rebalance_timeout, old_session_timeout = member.rebalance_timeout_ms, member.session_timeout_ms
        old_protocols = member.supported_protocols
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, callback)
        self._trace("group_static_member_rejoined", group, instance=group_instance_id, old_member=old_member_id,
                    member=new_member_id)
        state = group.state
        if state == GroupState.STABLE:
            # Same protocol for the next generation: persist the new member id and hand back the
            # current assignment without a rebalance.
            if group.protocol_name == group.select_protocol():
                assignment = {m.member_id: m.assignment for m in group.members.values()}
                code = await self.group_manager.store_group(group, assignment)
                if code != E.NONE:
                    # Revert, so the previous instance stays the member.
                    group.update_member(member, old_protocols, old_rebalance_timeout, old_session_timeout, None)
                    old = group.replace_static_member(group_instance_id, new_member_id, old_member_id)
                    self._complete_and_schedule_next_heartbeat_expiration(group, old)
                    callback(JoinGroupResult(member_id=UNKNOWN_MEMBER_ID, error=code,
                                             generation_id=group.generation_id, protocol_type=group.protocol_type,
                                             protocol_name=group.protocol_name, leader_id=current_leader))
                elif support_skipping_assignment:
                    # JoinGroup v9: the leader learns it leads but must not run the assignor.
                    is_leader = group.is_leader(new_member_id)
                    group.maybe_invoke_join_callback(member, JoinGroupResult(
                        member_id=new_member_id, error=E.NONE,
                        members=group.current_member_metadata() if is_leader else (),
                        generation_id=group.generation_id, protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name, leader_id=group.leader_id or "",
                        skip_assignment=is_leader))
                else:
                    # Before v9 the old leader id is returned, so a rejoining leader does not
                    # think it leads and run a pointless assignment.
                    group.maybe_invoke_join_callback(member, JoinGroupResult(
                        member_id=new_member_id, error=E.NONE, generation_id=group.generation_id,
                        protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                        leader_id=current_leader))
            else:
                self._maybe_prepare_rebalance(group, f"static member {group_instance_id} changed protocol")
        elif state == GroupState.COMPLETING_REBALANCE:
            # The leader may already have the old member id: rebalance again.
            self._prepare_rebalance(group, f"static member {group_instance_id} rejoined during sync")
        # PreparingRebalance: the rebalance under way includes it. (Empty/Dead cannot have a
        # known static member.)

    def _update_member_and_rebalance(self, group: GroupMetadata, member: MemberMetadata, protocols: Protocols,
                                     rebalance_timeout_ms: int, session_timeout_ms: int, reason: str,
                                     callback: JoinCallback) -> None:
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, callback)
        self._maybe_prepare_rebalance(group, reason)

    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        # Members waiting on SyncGroup are told to rejoin.
        if group.is_state(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, E.REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        delay = self.config.group_initial_rebalance_delay_ms
        op: D.DelayedJoin
        if group.is_state(GroupState.EMPTY):
            op = D.InitialDelayedJoin(self, self.rebalance_purgatory, group, delay, delay,
                                      max(group.rebalance_timeout_ms() - delay, 0))
        else:
            op = D.DelayedJoin(self, group, group.rebalance_timeout_ms())
        group.transition_to(GroupState.PREPARING_REBALANCE, self._now())
        self._trace("group_preparing_rebalance", group, reason=reason,
                    offsets_partition=self.partition_for(group.group_id))
        self.rebalance_purgatory.try_complete_else_watch(op, [GroupJoinKey(group.group_id)])

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata, reason: str) -> None:
        # A new member may time out while its JoinGroup waits: answer it before removing it.
        group.maybe_invoke_join_callback(member, JoinGroupResult(UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, reason)
        elif group.is_state(GroupState.PREPARING_REBALANCE):
            self.rebalance_purgatory.check_and_complete(GroupJoinKey(group.group_id))

    def _remove_pending_member_and_update_group(self, group: GroupMetadata, member_id: str) -> None:
        group.remove(member_id)
        if group.is_state(GroupState.PREPARING_REBALANCE):
            self.rebalance_purgatory.check_and_complete(GroupJoinKey(group.group_id))

    # ---------------------------------------------------------------- DelayedJoin
    def try_complete_join(self, group: GroupMetadata, force_complete: D.ForceComplete) -> bool:
        return force_complete() if group.has_all_members_joined() else False

    def on_complete_join(self, group: GroupMetadata) -> None:
        for failed in [m for m in group.not_yet_rejoined_members() if not m.is_static_member]:
            # Dynamic members that did not rejoin in time are out.
            group.remove(failed.member_id)
            self._remove_heartbeat_for_leaving_member(group, failed.member_id)
            self._trace("group_member_not_rejoined", group, member=failed.member_id)
        if group.is_state(GroupState.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined (only static members remain): wait another rebalance timeout
            # while their sessions time out.
            self.rebalance_purgatory.try_complete_else_watch(D.DelayedJoin(self, group, group.rebalance_timeout_ms()),
                                                             [GroupJoinKey(group.group_id)])
            return
        group.init_next_generation(self._now())
        if group.is_state(GroupState.EMPTY):
            self._trace("group_empty", group)
            self.rt.spawn(self._store_empty_group(group), name=f"store empty group {group.group_id}")
            return
        self._trace("group_completing_rebalance", group, leader=group.leader_id, protocol=group.protocol_name,
                    members=list(group.members))
        for member in list(group.members.values()):
            result = self._current_generation_result(group, member.member_id, group.is_leader(member.member_id))
            group.maybe_invoke_join_callback(member, result)
            self._complete_and_schedule_next_heartbeat_expiration(group, member)
            member.is_new = False
            group.add_pending_sync_member(member.member_id)
        self._schedule_pending_sync(group)

    async def _store_empty_group(self, group: GroupMetadata) -> None:
        # A failure only means the previous generation is what a reload would find; its members
        # then time out, so Kafka just warns.
        await self.group_manager.store_group(group, {})

    # ---------------------------------------------------------------- DelayedSync
    def _remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
        group.remove_pending_sync_member(member_id)
        self.rebalance_purgatory.check_and_complete(GroupSyncKey(group.group_id))

    def _remove_sync_expiration(self, group: GroupMetadata) -> None:
        group.clear_pending_sync_members()
        self.rebalance_purgatory.check_and_complete(GroupSyncKey(group.group_id))

    def _schedule_pending_sync(self, group: GroupMetadata) -> None:
        self.rebalance_purgatory.try_complete_else_watch(
            D.DelayedSync(self, group, group.generation_id, group.rebalance_timeout_ms()),
            [GroupSyncKey(group.group_id)])

    def try_complete_pending_sync(self, group: GroupMetadata, generation_id: int,
                                  force_complete: D.ForceComplete) -> bool:
        if generation_id != group.generation_id:
            return force_complete()
        if group.state in (GroupState.DEAD, GroupState.EMPTY, GroupState.PREPARING_REBALANCE):
            return force_complete()
        return force_complete() if group.has_received_sync_from_all_members() else False

    def on_expire_pending_sync(self, group: GroupMetadata, generation_id: int) -> None:
        if generation_id != group.generation_id:
            return
        if group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE) \
                and not group.has_received_sync_from_all_members():
            missing = list(group.pending_sync_members)
            for member_id in missing:
                group.remove(member_id)
                self._remove_heartbeat_for_leaving_member(group, member_id)
            self._prepare_rebalance(group, f"removing {missing} on pending sync request expiration")
