"""The group APIs on the wire: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit, OffsetFetch, DescribeGroups, ListGroups, DeleteGroups, OffsetDelete — request
decoding and version-specific answers as Kafka 3.9's KafkaApis and GroupCoordinatorAdapter give
them, on top of the GroupCoordinator.

`register(apis)` creates the broker's GroupCoordinator, makes it listen to partition leadership
(leading an offsets partition = coordinating its groups) and registers the handlers.

Versions advertised: exactly a ZooKeeper-mode Kafka 3.9.1 broker's. Per version:
  OffsetCommit v0 / OffsetFetch v0   offsets in ZooKeeper, not in the group coordinator
                                     (zk_offsets.py), as Kafka 3.9 still keeps them;
  OffsetCommit v1                    the request's commit timestamp (-1: now);
  OffsetCommit v2-v4                 the request's retention time;
  OffsetCommit v9 / OffsetFetch v9   the KIP-848 member epoch / member id are carried but the
                                     classic coordinator reads them as v8 does (the generation);
  ListGroups v5                      the types filter: every group here is "classic".
  ConsumerGroupHeartbeat / ConsumerGroupDescribe (KIP-848's protocol) are advertised, as Kafka
  3.9 does, but the classic coordinator answers them UNSUPPORTED_VERSION (per group for
  Describe) — KafkaApis' reply when group.coordinator.rebalance.protocols lacks "consumer".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkasim.broker.group.coordinator import GroupCoordinator, LeaveMember
from kafkasim.broker.group.manager import GROUP_METADATA_TOPIC_NAME, PartitionData
from kafkasim.broker.group.metadata import JoinGroupResult, OffsetAndMetadata, SyncGroupResult, TopicPartition
from kafkasim.broker.group.offsets_v0 import OffsetsV0Api, commit_response
from kafkasim.broker.group.zk_offsets import ZkConsumerOffsets
from kafkasim.broker.purgatory import park
from kafkasim.broker.request_context import context_of
from kafkasim.broker.transaction.transaction_log import TRANSACTION_STATE_TOPIC_NAME
from kafkasim.broker.zk.kafka_zk_client import TopicError
from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
)
from kafkasim.protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from kafkasim.protocol.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
from kafkasim.protocol.messages.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from kafkasim.protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from kafkasim.protocol.messages.headers import RequestHeader
from kafkasim.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from kafkasim.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse
from kafkasim.protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse
from kafkasim.protocol.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from kafkasim.protocol.messages.offset_commit import OffsetCommitRequest
from kafkasim.protocol.messages.offset_delete import OffsetDeleteRequest, OffsetDeleteResponse
from kafkasim.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from kafkasim.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse
from kafkasim.protocol.primitives import Message

if TYPE_CHECKING:
    from kafkasim.broker.api_registry import ApiRegistry, CreateTopic, Handler
    from kafkasim.broker.config import BrokerConfig
    from kafkasim.broker.metadata_cache import MetadataCache, PartitionMeta
    from kafkasim.broker.transaction.coordinator import TransactionCoordinator
    from kafkasim.runtime.api import NodeRuntime

GROUP_VERSIONS: dict[int, tuple[int, int]] = {
    A.FIND_COORDINATOR: (0, 6),
    A.JOIN_GROUP: (0, 9),
    A.SYNC_GROUP: (0, 5),
    A.HEARTBEAT: (0, 4),
    A.LEAVE_GROUP: (0, 5),
    A.OFFSET_COMMIT: (0, 9),
    A.OFFSET_FETCH: (0, 9),
    A.DESCRIBE_GROUPS: (0, 5),
    A.LIST_GROUPS: (0, 5),
    A.DELETE_GROUPS: (0, 2),
    A.OFFSET_DELETE: (0, 0),
    A.CONSUMER_GROUP_HEARTBEAT: (0, 0),
    A.CONSUMER_GROUP_DESCRIBE: (0, 0),
}

COORDINATOR_TYPE_GROUP = 0
COORDINATOR_TYPE_TRANSACTION = 1
COORDINATOR_TYPE_SHARE = 2
DEFAULT_RETENTION_TIME = -1   # OffsetCommitRequest.DEFAULT_RETENTION_TIME
DEFAULT_TIMESTAMP = -1
NO_NODE = (-1, "", -1)        # Node.noNode()
# Without an authorizer Kafka reports every operation a group supports: READ, DELETE, DESCRIBE.
GROUP_AUTHORIZED_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
AUTHORIZED_OPERATIONS_OMITTED = -2147483648
CLASSIC_GROUP_TYPE = "classic"   # Group.GroupType.CLASSIC: the only kind the classic coordinator has


def register(apis: ApiRegistry, group_apis: GroupApis) -> None:
    """Add the group APIs to the broker's (one call from KafkaApis)."""
    handlers: dict[int, Handler] = {
        A.FIND_COORDINATOR: group_apis.handle_find_coordinator,
        A.JOIN_GROUP: group_apis.handle_join_group,
        A.SYNC_GROUP: group_apis.handle_sync_group,
        A.HEARTBEAT: group_apis.handle_heartbeat,
        A.LEAVE_GROUP: group_apis.handle_leave_group,
        A.OFFSET_COMMIT: group_apis.handle_offset_commit,
        A.OFFSET_FETCH: group_apis.handle_offset_fetch,
        A.DESCRIBE_GROUPS: group_apis.handle_describe_groups,
        A.LIST_GROUPS: group_apis.handle_list_groups,
        A.DELETE_GROUPS: group_apis.handle_delete_groups,
        A.OFFSET_DELETE: group_apis.handle_offset_delete,
        A.CONSUMER_GROUP_HEARTBEAT: group_apis.handle_consumer_group_heartbeat,
        A.CONSUMER_GROUP_DESCRIBE: group_apis.handle_consumer_group_describe,
    }
    for key, handler in handlers.items():
        apis.register(key, *GROUP_VERSIONS[key], handler)


def _message(code: int) -> str:
    """Kafka's Errors.message(): the exception's default message, or the name for NONE."""
    return "NONE" if code == E.NONE else E.ERRORS.get(code, E.ERRORS[E.UNKNOWN_SERVER_ERROR]).message


class GroupApis:
    def __init__(self, rt: NodeRuntime, config: BrokerConfig, metadata_cache: MetadataCache,
                 coordinator: GroupCoordinator, create_topic: CreateTopic,
                 txn_coordinator: TransactionCoordinator | None = None,
                 zk_offsets: ZkConsumerOffsets | None = None) -> None:
        """`zk_offsets`: where OffsetCommit/OffsetFetch v0 keep offsets (None: v0 answers
        COORDINATOR_NOT_AVAILABLE — a broker without ZooKeeper)."""
        self.rt = rt
        self.v0 = OffsetsV0Api(metadata_cache, config.offset_metadata_max_bytes, zk_offsets)
        self.config = config
        self.metadata_cache = metadata_cache
        self.coordinator = coordinator
        self.create_topic = create_topic
        self.txn_coordinator = txn_coordinator

    # ---------------------------------------------------------------- FindCoordinator
    async def handle_find_coordinator(self, header: RequestHeader, req: FindCoordinatorRequest) -> Message:
        version = header.request_api_version
        if version < 4:
            code, (node_id, host, port) = self._on_listener(
                header, await self._get_coordinator(req.key_type, req.key, version))
            return FindCoordinatorResponse(throttle_time_ms=0, error_code=code,
                                           error_message=_message(code) if version >= 1 else "",
                                           node_id=node_id, host=host, port=port)
        C = FindCoordinatorResponse.Coordinator
        coordinators = []
        for key in req.coordinator_keys:
            code, (node_id, host, port) = self._on_listener(header, await self._get_coordinator(req.key_type, key,
                                                                                                 version))
            coordinators.append(C(key=key, node_id=node_id, host=host, port=port, error_code=code,
                                  error_message=_message(code)))  # Kafka sends "NONE" too
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=coordinators)

    def _on_listener(self, header: RequestHeader, found: tuple[int, tuple[int, str, int]],
                     ) -> tuple[int, tuple[int, str, int]]:
        """The coordinator's endpoint on the listener the request came in on (Kafka's
        getAliveBrokerNode(id, listenerName))."""
        code, node = found
        broker = self.metadata_cache.brokers.get(node[0]) if code == E.NONE else None
        endpoint = broker.endpoint(context_of(header).listener_name) if broker is not None else None
        return (code, (node[0], *endpoint)) if endpoint is not None else found

    async def _get_coordinator(self, key_type: int, key: str, version: int) -> tuple[int, tuple[int, str, int]]:
        if key_type == COORDINATOR_TYPE_SHARE and version < 6:
            return E.INVALID_REQUEST, NO_NODE
        if key_type not in (COORDINATOR_TYPE_GROUP, COORDINATOR_TYPE_TRANSACTION, COORDINATOR_TYPE_SHARE):
            return E.INVALID_REQUEST, NO_NODE  # CoordinatorType.forId: "Unknown coordinator type"
        if key_type == COORDINATOR_TYPE_TRANSACTION and self.txn_coordinator is not None:
            return await self._get_txn_coordinator(self.txn_coordinator, key)
        if key_type != COORDINATOR_TYPE_GROUP:
            # No share coordinator on this broker: as Kafka answers while the coordinator's
            # internal topic is unavailable.
            return E.COORDINATOR_NOT_AVAILABLE, NO_NODE
        cache = self.metadata_cache
        meta = cache.topic(GROUP_METADATA_TOPIC_NAME)
        if meta is None:
            # First use: create the compacted internal topic, and answer "not available" as
            # Kafka does while the creation goes through; the client asks again.
            await self._create_offsets_topic()
            return E.COORDINATOR_NOT_AVAILABLE, NO_NODE
        return self._leader_of(meta.partitions.get(self.coordinator.partition_for(key)))

    async def _get_txn_coordinator(self, txn: TransactionCoordinator, key: str) -> tuple[int, tuple[int, str, int]]:
        """The leader of the id's `__transaction_state` partition, creating the topic on first use
        with the configs Kafka's TransactionStateManager sets."""
        meta = self.metadata_cache.topic(TRANSACTION_STATE_TOPIC_NAME)
        if meta is None:
            try:
                await self.create_topic(TRANSACTION_STATE_TOPIC_NAME, txn.config.transaction_state_log_num_partitions,
                                        txn.config.transaction_state_log_replication_factor, None,
                                        txn.transaction_topic_configs())
            except TopicError as exc:
                self.rt.trace("transaction_topic_create_failed", error=exc.error_code)
            return E.COORDINATOR_NOT_AVAILABLE, NO_NODE
        return self._leader_of(meta.partitions.get(txn.partition_for(key)))

    def _leader_of(self, pm: PartitionMeta | None) -> tuple[int, tuple[int, str, int]]:
        cache = self.metadata_cache
        broker = cache.brokers.get(pm.leader) if pm is not None and pm.leader >= 0 else None
        if broker is None:
            return E.COORDINATOR_NOT_AVAILABLE, NO_NODE
        return E.NONE, (broker.broker_id, broker.host, broker.port)

    async def _create_offsets_topic(self) -> None:
        cfg = self.config
        configs = {"cleanup.policy": "compact", "segment.bytes": str(cfg.offsets_topic_segment_bytes),
                   "compression.type": "producer"}
        try:
            await self.create_topic(GROUP_METADATA_TOPIC_NAME, cfg.offsets_topic_num_partitions,
                                           cfg.offsets_topic_replication_factor, None, configs)
        except TopicError as exc:
            # Already created by a concurrent request, or the cluster is too small for
            # offsets.topic.replication.factor: either way the answer stays "not available".
            self.rt.trace("offsets_topic_create_failed", error=exc.error_code)

    # ---------------------------------------------------------------- JoinGroup
    async def handle_join_group(self, header: RequestHeader, req: JoinGroupRequest) -> Message:
        version = header.request_api_version
        fut = self.rt.future()
        # v0 has no rebalance timeout: the session timeout stands in (JoinGroupRequest does this).
        rebalance_timeout_ms = req.session_timeout_ms if version == 0 else req.rebalance_timeout_ms
        await self.coordinator.handle_join_group(
            req.group_id, req.member_id, req.group_instance_id,
            require_known_member_id=version >= 4 and req.group_instance_id is None,
            support_skipping_assignment=version >= 9, client_id=header.client_id or "",
            client_host=client_host(header),
            rebalance_timeout_ms=rebalance_timeout_ms, session_timeout_ms=req.session_timeout_ms,
            protocol_type=req.protocol_type, protocols=[(p.name, bytes(p.metadata)) for p in req.protocols],
            callback=fut.set_result, reason=req.reason if version >= 8 else None)
        result: JoinGroupResult = await park(fut)   # a parked wait: not request time (quotas)
        return self._join_response(result, version)

    @staticmethod
    def _join_response(result: JoinGroupResult, version: int) -> Message:
        M = JoinGroupResponse.JoinGroupResponseMember
        members = [M(member_id=m.member_id, group_instance_id=m.group_instance_id if version >= 5 else None,
                     metadata=m.metadata) for m in result.members]
        protocol_name = result.protocol_name
        if version < 7 and protocol_name is None:
            protocol_name = ""   # not nullable before v7
        elif version >= 7 and protocol_name == "":
            protocol_name = None
        resp = JoinGroupResponse(throttle_time_ms=0, error_code=result.error, generation_id=result.generation_id,
                                 protocol_name=protocol_name, leader=result.leader_id, member_id=result.member_id,
                                 members=members)
        if version >= 7:
            resp.protocol_type = result.protocol_type
        if version >= 9:
            resp.skip_assignment = result.skip_assignment
        return resp

    # ---------------------------------------------------------------- SyncGroup
    async def handle_sync_group(self, header: RequestHeader, req: SyncGroupRequest) -> Message:
        version = header.request_api_version
        if version >= 5 and (req.protocol_type is None or req.protocol_name is None):
            # From v5 both are mandatory.
            return SyncGroupResponse(throttle_time_ms=0, error_code=E.INCONSISTENT_GROUP_PROTOCOL, assignment=b"")
        fut = self.rt.future()
        assignment = {a.member_id: bytes(a.assignment) for a in req.assignments}
        await self.coordinator.handle_sync_group(req.group_id, req.generation_id, req.member_id,
                                                 req.protocol_type if version >= 5 else None,
                                                 req.protocol_name if version >= 5 else None,
                                                 req.group_instance_id if version >= 3 else None, assignment,
                                                 fut.set_result)
        result: SyncGroupResult = await park(fut)
        resp = SyncGroupResponse(throttle_time_ms=0, error_code=result.error, assignment=result.assignment)
        if version >= 5:
            resp.protocol_type, resp.protocol_name = result.protocol_type, result.protocol_name
        return resp

    # ---------------------------------------------------------------- Heartbeat
    async def handle_heartbeat(self, header: RequestHeader, req: HeartbeatRequest) -> Message:
        instance = req.group_instance_id if header.request_api_version >= 3 else None
        code = self.coordinator.handle_heartbeat(req.group_id, req.member_id, instance, req.generation_id)
        return HeartbeatResponse(throttle_time_ms=0, error_code=code)

    # ---------------------------------------------------------------- LeaveGroup
    async def handle_leave_group(self, header: RequestHeader, req: LeaveGroupRequest) -> Message:
        version = header.request_api_version
        if version >= 3:
            members = [LeaveMember(m.member_id, m.group_instance_id, m.reason if version >= 5 else None)
                       for m in req.members]
        else:
            members = [LeaveMember(req.member_id, None)]
        result = self.coordinator.handle_leave_group(req.group_id, members)
        if version >= 3:
            R = LeaveGroupResponse.MemberResponse
            return LeaveGroupResponse(throttle_time_ms=0, error_code=result.top_level_error,
                                      members=[R(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                                 error_code=m.error) for m in result.member_responses])
        # Before v3 one member per request and no member-level errors: its error is the answer.
        code = result.top_level_error
        if code == E.NONE and result.member_responses:
            code = result.member_responses[0].error
        return LeaveGroupResponse(throttle_time_ms=0, error_code=code)

    # ---------------------------------------------------------------- OffsetCommit
    async def handle_offset_commit(self, header: RequestHeader, req: OffsetCommitRequest) -> Message:
        version = header.request_api_version
        if version == 0:
            return await self.v0.commit(req)
        now = self.rt.now_ms()
        retention = req.retention_time_ms if 2 <= version <= 4 else DEFAULT_RETENTION_TIME
        expire = None if retention == DEFAULT_RETENTION_TIME else now + retention
        errors: dict[TopicPartition, int] = {}
        offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        for t in req.topics:
            meta = self.metadata_cache.topic(t.name)
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                if meta is None or p.partition_index not in meta.partitions:
                    errors[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                epoch = p.committed_leader_epoch if version >= 6 else -1
                stamp = p.commit_timestamp if version == 1 and p.commit_timestamp != DEFAULT_TIMESTAMP else now
                offsets[tp] = OffsetAndMetadata(p.committed_offset, epoch, p.committed_metadata or "",
                                                stamp, expire)
        if offsets:
            instance = req.group_instance_id if version >= 7 else None
            errors.update(await self.coordinator.handle_commit_offsets(
                req.group_id, req.member_id, instance, req.generation_id_or_member_epoch, offsets))
        refused = [tp for tp in errors if tp not in offsets]
        return commit_response([*refused, *offsets], errors)

    # ---------------------------------------------------------------- OffsetFetch
    async def handle_offset_fetch(self, header: RequestHeader, req: OffsetFetchRequest) -> Message:
        version = header.request_api_version
        if version == 0:
            return await self.v0.fetch(req)
        require_stable = req.require_stable if version >= 7 else False
        if version >= 8:
            G = OffsetFetchResponse.OffsetFetchResponseGroup
            GT = G.OffsetFetchResponseTopics
            GP = GT.OffsetFetchResponsePartitions
            groups = []
            for g in req.groups:
                wanted = None if g.topics is None else [(t.name, list(t.partition_indexes)) for t in g.topics]
                code, by_topic = self._fetch_group(g.group_id, require_stable, wanted)
                groups.append(G(group_id=g.group_id, error_code=code, topics=[
                    GT(name=name, partitions=[GP(partition_index=i, committed_offset=d.offset,
                                                 committed_leader_epoch=d.leader_epoch, metadata=d.metadata,
                                                 error_code=d.error)
                                              for i, d in parts]) for name, parts in by_topic]))
            return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
        wanted = None if req.topics is None else [(t.name, list(t.partition_indexes)) for t in req.topics]
        code, by_topic = self._fetch_group(req.group_id, require_stable, wanted)
        T = OffsetFetchResponse.OffsetFetchResponseTopic
        P = T.OffsetFetchResponsePartition
        # Before v2 there is no top-level error: a group error leaves the answer empty (Kafka 3.9's
        # coordinator completes the group's future exceptionally; there are no partitions to carry it).
        epoch = (lambda d: d.leader_epoch) if version >= 5 else (lambda d: -1)
        topics = [T(name=name, partitions=[P(partition_index=i, committed_offset=d.offset,
                                             committed_leader_epoch=epoch(d), metadata=d.metadata, error_code=d.error)
                                           for i, d in parts])
                  for name, parts in by_topic]
        resp = OffsetFetchResponse(throttle_time_ms=0, topics=topics)
        if version >= 2:
            resp.error_code = code
        return resp

    def _fetch_group(self, group_id: str, require_stable: bool, wanted: list[tuple[str, list[int]]] | None
                     ) -> tuple[int, list[tuple[str, list[tuple[int, PartitionData]]]]]:
        """(group error, [(topic, [(partition, data)])]) in request order, or commit order for
        "all topics". The committed leader epoch is answered from v5 on, as Kafka does (clients
        then validate their positions with OffsetForLeaderEpoch, which is served from v0)."""
        tps = None if wanted is None else [TopicPartition(name, i) for name, parts in wanted for i in parts]
        code, data = self.coordinator.handle_fetch_offsets(group_id, require_stable, tps)
        if code != E.NONE:
            return code, []
        out: list[tuple[str, list[tuple[int, PartitionData]]]] = []
        index: dict[str, list[tuple[int, PartitionData]]] = {}
        for tp, d in data.items():
            if tp.topic not in index:
                index[tp.topic] = []
                out.append((tp.topic, index[tp.topic]))
            index[tp.topic].append((tp.partition, d))
        return E.NONE, out

    # ---------------------------------------------------------------- DescribeGroups / ListGroups
    async def handle_describe_groups(self, header: RequestHeader, req: DescribeGroupsRequest) -> Message:
        version = header.request_api_version
        G = DescribeGroupsResponse.DescribedGroup
        M = G.DescribedGroupMember
        groups = []
        for group_id in req.groups:
            code, summary = self.coordinator.handle_describe_group(group_id)
            members = [M(member_id=m.member_id, group_instance_id=m.group_instance_id if version >= 4 else None,
                         client_id=m.client_id, client_host=m.client_host, member_metadata=m.metadata,
                         member_assignment=m.assignment) for m in summary.members]
            ops = (GROUP_AUTHORIZED_OPERATIONS if version >= 3 and req.include_authorized_operations
                   and code == E.NONE else AUTHORIZED_OPERATIONS_OMITTED)
            groups.append(G(error_code=code, group_id=group_id, group_state=summary.state,
                            protocol_type=summary.protocol_type, protocol_data=summary.protocol, members=members,
                            authorized_operations=ops))
        return DescribeGroupsResponse(throttle_time_ms=0, groups=groups)

    async def handle_list_groups(self, header: RequestHeader, req: ListGroupsRequest) -> Message:
        version = header.request_api_version
        states = set(req.states_filter or []) if version >= 4 else set()
        types = {t.lower() for t in req.types_filter or []} if version >= 5 else set()
        code, overviews = self.coordinator.handle_list_groups(states)
        if types and CLASSIC_GROUP_TYPE not in types:
            overviews = []   # the classic coordinator has classic groups only
        L = ListGroupsResponse.ListedGroup
        groups = []
        for o in overviews:
            g = L(group_id=o.group_id, protocol_type=o.protocol_type)
            if version >= 4:
                g.group_state = o.state
            if version >= 5:
                g.group_type = CLASSIC_GROUP_TYPE
            groups.append(g)
        return ListGroupsResponse(throttle_time_ms=0, error_code=code, groups=groups)

    # ---------------------------------------------------------------- DeleteGroups / OffsetDelete
    async def handle_delete_groups(self, header: RequestHeader, req: DeleteGroupsRequest) -> Message:
        group_ids = list(dict.fromkeys(req.groups_names))
        results = await self.coordinator.handle_delete_groups(group_ids)
        R = DeleteGroupsResponse.DeletableGroupResult
        return DeleteGroupsResponse(throttle_time_ms=0,
                                    results=[R(group_id=g, error_code=code) for g, code in results.items()])

    async def handle_offset_delete(self, header: RequestHeader, req: OffsetDeleteRequest) -> Message:
        errors: dict[TopicPartition, int] = {}
        wanted: list[TopicPartition] = []
        for t in req.topics:
            meta = self.metadata_cache.topic(t.name)
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                if meta is None or p.partition_index not in meta.partitions:
                    errors[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    wanted.append(tp)
        code, results = await self.coordinator.handle_delete_offsets(req.group_id, wanted)
        errors.update(results)
        if code != E.NONE:
            return OffsetDeleteResponse(error_code=code, throttle_time_ms=0, topics=[])
        T = OffsetDeleteResponse.OffsetDeleteResponseTopic
        P = T.OffsetDeleteResponsePartition
        topics = [T(name=t.name, partitions=[P(partition_index=p.partition_index,
                                               error_code=errors[TopicPartition(t.name, p.partition_index)])
                                             for p in t.partitions]) for t in req.topics]
        return OffsetDeleteResponse(error_code=E.NONE, throttle_time_ms=0, topics=topics)

    # ---------------------------------------------------------------- KIP-848 (not enabled)
    async def handle_consumer_group_heartbeat(self, header: RequestHeader,
                                              req: ConsumerGroupHeartbeatRequest) -> Message:
        return ConsumerGroupHeartbeatResponse(throttle_time_ms=0, error_code=E.UNSUPPORTED_VERSION)

    async def handle_consumer_group_describe(self, header: RequestHeader,
                                             req: ConsumerGroupDescribeRequest) -> Message:
        G = ConsumerGroupDescribeResponse.DescribedGroup
        return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=[
            G(group_id=g, error_code=E.UNSUPPORTED_VERSION) for g in req.group_ids])


def client_host(header: RequestHeader) -> str:
    """The member's client_host as Kafka records it: `request.context.clientAddress.toString`, a
    Java InetAddress of an accepted socket, which prints as "/127.0.0.1" (no host name looked
    up). A request without a sender address (the broker's own, a unit test's) records ""."""
    address = context_of(header).client_address
    return f"/{address}" if address else ""
