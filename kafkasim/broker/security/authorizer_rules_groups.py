"""The group and transaction APIs' authorization (see authorizer_rules.py): READ on the group
to join, sync, heartbeat, leave or commit; DESCRIBE on it to find its coordinator, describe it
or fetch its offsets; DELETE to delete it or its offsets; WRITE on a transactional id for every
transactional request; READ (commits) or WRITE (AddPartitionsToTxn) on each topic."""

from __future__ import annotations

from typing import Any, cast

from kafkasim.broker.security.authorizer_rules import (
    CLUSTER,
    GROUP,
    OMITTED,
    OP,
    TOPIC,
    TXN,
    Authz,
    Call,
    Rule,
    error_response,
)
from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnResponse
from kafkasim.protocol.messages.describe_groups import DescribeGroupsResponse
from kafkasim.protocol.messages.find_coordinator import FindCoordinatorResponse
from kafkasim.protocol.messages.headers import RequestHeader
from kafkasim.protocol.messages.join_group import JoinGroupResponse
from kafkasim.protocol.messages.offset_commit import OffsetCommitResponse
from kafkasim.protocol.messages.offset_fetch import OffsetFetchResponse
from kafkasim.protocol.messages.txn_offset_commit import TxnOffsetCommitResponse
from kafkasim.protocol.primitives import Message

GROUP_KEY, TXN_KEY = 0, 1


def _message(code: int) -> str:
    return E.ERRORS[code].message if code in E.ERRORS else ""


async def find_coordinator(a: Authz, header: RequestHeader, req: Any, call: Call) -> Message | None:
    rtype, code = (TXN, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED) if req.key_type == TXN_KEY \
        else (GROUP, E.GROUP_AUTHORIZATION_FAILED)
    if req.key_type not in (GROUP_KEY, TXN_KEY):
        return await call(req)
    if header.request_api_version < 4:
        if a.allowed(OP.DESCRIBE, rtype, req.key):
            return await call(req)
        return FindCoordinatorResponse(error_code=code, error_message=_message(code), node_id=-1, host="", port=-1)
    denied = a.denied(list(req.coordinator_keys), OP.DESCRIBE, rtype, str)
    if not denied:
        return await call(req)
    req.coordinator_keys = [k for k in req.coordinator_keys if k not in denied]
    resp = await call(req) if req.coordinator_keys else FindCoordinatorResponse(coordinators=[])
    assert isinstance(resp, FindCoordinatorResponse)
    C = FindCoordinatorResponse.Coordinator
    resp.coordinators.extend(C(key=k, node_id=-1, host="", port=-1, error_code=code, error_message=_message(code))
                             for k in denied)
    return resp


async def group_read(a: Authz, header: RequestHeader, req: Any, call: Call) -> Message | None:
    """JoinGroup, SyncGroup, Heartbeat, LeaveGroup: READ on the group, else the response class's
    defaults with GROUP_AUTHORIZATION_FAILED."""
    if a.allowed(OP.READ, GROUP, req.group_id):
        return await call(req)
    resp: Any = error_response(header, E.GROUP_AUTHORIZATION_FAILED)
    if isinstance(resp, JoinGroupResponse):
        resp.generation_id, resp.member_id, resp.leader = -1, req.member_id, ""
        resp.protocol_name = None if header.request_api_version >= 7 else ""
    if hasattr(resp, "assignment"):
        resp.assignment = b""
    return cast(Message, resp)


async def offset_commit(a: Authz, header: RequestHeader, req: Any, call: Call) -> Message | None:
    T = OffsetCommitResponse.OffsetCommitResponseTopic
    P = T.OffsetCommitResponsePartition
    if not a.allowed(OP.READ, GROUP, req.group_id):
        return OffsetCommitResponse(topics=[T(name=t.name, partitions=[
            P(partition_index=p.partition_index, error_code=E.GROUP_AUTHORIZATION_FAILED) for p in t.partitions])
            for t in req.topics])
    denied = a.denied(req.topics, OP.READ, TOPIC, lambda t: t.name)
    if not denied:
        return await call(req)
    req.topics = [t for t in req.topics if t not in denied]
    resp = await call(req) if req.topics else OffsetCommitResponse(topics=[])
    assert isinstance(resp, OffsetCommitResponse)
    resp.topics.extend(T(name=t.name, partitions=[
        P(partition_index=p.partition_index, error_code=E.TOPIC_AUTHORIZATION_FAILED) for p in t.partitions])
        for t in denied)
    return resp


async def txn_offset_commit(a: Authz, header: RequestHeader, req: Any, call: Call) -> Message | None:
    T = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
    P = T.TxnOffsetCommitResponsePartition
    code = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED if not a.allowed(OP.WRITE, TXN, req.transactional_id) else \
        E.GROUP_AUTHORIZATION_FAILED if not a.allowed(OP.READ, GROUP, req.group_id) else E.NONE
    if code != E.NONE:
        return TxnOffsetCommitResponse(topics=[T(name=t.name, partitions=[
            P(partition_index=p.partition_index, error_code=code) for p in t.partitions]) for t in req.topics])
    denied = a.denied(req.topics, OP.READ, TOPIC, lambda t: t.name)
    if not denied:
        return await call(req)
    req.topics = [t for t in req.topics if t not in denied]
    resp = await call(req) if req.topics else TxnOffsetCommitResponse(topics=[])
    assert isinstance(resp, TxnOffsetCommitResponse)
    resp.topics.extend(T(name=t.name, partitions=[
        P(partition_index=p.partition_index, error_code=E.TOPIC_AUTHORIZATION_FAILED) for p in t.partitions])
        for t in denied)
    return resp


async def offset_fetch(a: Authz, header: RequestHeader, req: Any, call: Call) -> Message | None:
    """DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED: top-level before v8, the group's
    from v8); named topics the principal may not DESCRIBE are TOPIC_AUTHORIZATION_FAILED, and
    left out of an all-topics answer."""
    version = header.request_api_version
    if version >= 8:
        return await _offset_fetch_groups(a, req, call)
    if not a.allowed(OP.DESCRIBE, GROUP, req.group_id):
        T = OffsetFetchResponse.OffsetFetchResponseTopic
        topics = [] if version >= 2 or req.topics is None else [T(name=t.name, partitions=[
            T.OffsetFetchResponsePartition(partition_index=i, committed_offset=-1, committed_leader_epoch=-1,
                                           metadata="", error_code=E.GROUP_AUTHORIZATION_FAILED)
            for i in t.partition_indexes]) for t in req.topics]
        return OffsetFetchResponse(topics=topics, error_code=E.GROUP_AUTHORIZATION_FAILED)
    denied = [] if req.topics is None else a.denied(req.topics, OP.DESCRIBE, TOPIC, lambda t: t.name)
    req.topics = None if req.topics is None else [t for t in req.topics if t not in denied]
    resp = await call(req)
    assert isinstance(resp, OffsetFetchResponse)
    resp.topics = [t for t in resp.topics if a.allowed(OP.DESCRIBE, TOPIC, t.name)]
    T = OffsetFetchResponse.OffsetFetchResponseTopic
    resp.topics.extend(T(name=t.name, partitions=[T.OffsetFetchResponsePartition(
        partition_index=i, committed_offset=-1, committed_leader_epoch=-1, metadata="",
        error_code=E.TOPIC_AUTHORIZATION_FAILED) for i in t.partition_indexes]) for t in denied)
    return resp


async def _offset_fetch_groups(a: Authz, req: Any, call: Call) -> Message | None:
    G = OffsetFetchResponse.OffsetFetchResponseGroup
    denied_groups = [g for g in req.groups if not a.allowed(OP.DESCRIBE, GROUP, g.group_id)]
    denied_topics: dict[str, list[Any]] = {}
    for g in req.groups:
        if g not in denied_groups and g.topics is not None:
            denied_topics[g.group_id] = a.denied(g.topics, OP.DESCRIBE, TOPIC, lambda t: t.name)
            g.topics = [t for t in g.topics if t not in denied_topics[g.group_id]]
    req.groups = [g for g in req.groups if g not in denied_groups]
    resp = await call(req) if req.groups else OffsetFetchResponse(groups=[])
    assert isinstance(resp, OffsetFetchResponse)
    GT = G.OffsetFetchResponseTopics
    for g in resp.groups:
        g.topics = [t for t in g.topics if a.allowed(OP.DESCRIBE, TOPIC, t.name)]
        g.topics.extend(GT(name=t.name, partitions=[GT.OffsetFetchResponsePartitions(
            partition_index=i, committed_offset=-1, committed_leader_epoch=-1, metadata="",
            error_code=E.TOPIC_AUTHORIZATION_FAILED) for i in t.partition_indexes])
            for t in denied_topics.get(g.group_id, []))
    resp.groups.extend(G(group_id=g.group_id, error_code=E.GROUP_AUTHORIZATION_FAILED, topics=[])
                       for g in denied_groups)
    return resp


async def describe_groups(a: Authz, header: RequestHeader, req: Any, call: Call) -> Message | None:
    D = DescribeGroupsResponse.DescribedGroup
    denied = a.denied(list(req.groups), OP.DESCRIBE, GROUP, str)
    req.groups = [g for g in req.groups if g not in denied]
    resp = await call(req) if req.groups else DescribeGroupsResponse(groups=[])
    assert isinstance(resp, DescribeGroupsResponse)
    include = header.request_api_version >= 3 and req.include_authorized_operations
    for g in resp.groups:
        g.authorized_operations = a.operations(GROUP, g.group_id) if include else OMITTED
    resp.groups.extend(D(error_code=E.GROUP_AUTHORIZATION_FAILED, group_id=g, group_state="", protocol_type="",
                         protocol_data="", members=[], authorized_operations=OMITTED) for g in denied)
    return resp


async def list_groups(a: Authz, header: RequestHeader, req: Any, call: Call) -> Message | None:
    """DESCRIBE on the cluster lists every group; without it, those the principal may DESCRIBE."""
    resp = await call(req)
    if resp is not None and not a.cluster(OP.DESCRIBE):
        resp.groups = [g for g in resp.groups if a.allowed(OP.DESCRIBE, GROUP, g.group_id)]  # type: ignore[attr-defined]
    return resp


async def delete_groups(a: Authz, header: RequestHeader, req: Any, call: Call) -> Message | None:
    from kafkasim.protocol.messages.delete_groups import DeleteGroupsResponse
    denied = a.denied(list(req.groups_names), OP.DELETE, GROUP, str)
    req.groups_names = [g for g in req.groups_names if g not in denied]
    resp = await call(req) if req.groups_names else DeleteGroupsResponse(results=[])
    assert isinstance(resp, DeleteGroupsResponse)
    R = DeleteGroupsResponse.DeletableGroupResult
    resp.results.extend(R(group_id=g, error_code=E.GROUP_AUTHORIZATION_FAILED) for g in denied)
    return resp


async def offset_delete(a: Authz, header: RequestHeader, req: Any, call: Call) -> Message | None:
    from kafkasim.protocol.messages.offset_delete import OffsetDeleteResponse
    if not a.allowed(OP.DELETE, GROUP, req.group_id):
        return OffsetDeleteResponse(error_code=E.GROUP_AUTHORIZATION_FAILED, topics=[])
    denied = a.denied(req.topics, OP.READ, TOPIC, lambda t: t.name)
    req.topics = [t for t in req.topics if t not in denied]
    resp = await call(req)
    assert isinstance(resp, OffsetDeleteResponse)
    T = OffsetDeleteResponse.OffsetDeleteResponseTopic
    resp.topics.extend(T(name=t.name, partitions=[T.OffsetDeleteResponsePartition(
        partition_index=p.partition_index, error_code=E.TOPIC_AUTHORIZATION_FAILED) for p in t.partitions])
        for t in denied)
    return resp


async def init_producer_id(a: Authz, header: RequestHeader, req: Any, call: Call) -> Message | None:
    """WRITE on the transactional id; without one, IDEMPOTENT_WRITE on the cluster or WRITE on
    some topic (authorizeByResourceType)."""
    from kafkasim.protocol.messages.init_producer_id import InitProducerIdResponse
    if req.transactional_id is not None:
        ok, code = a.allowed(OP.WRITE, TXN, req.transactional_id), E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    else:
        ok = a.cluster(OP.IDEMPOTENT_WRITE) or a.authorizer.authorize_by_resource_type(a.ctx, OP.WRITE, TOPIC)
        code = E.CLUSTER_AUTHORIZATION_FAILED
    if ok:
        return await call(req)
    return InitProducerIdResponse(error_code=code, producer_id=-1, producer_epoch=-1)


async def txn_write(a: Authz, header: RequestHeader, req: Any, call: Call) -> Message | None:
    """EndTxn, AddOffsetsToTxn (which also needs READ on the group)."""
    if not a.allowed(OP.WRITE, TXN, req.transactional_id):
        code = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif header.request_api_key == A.ADD_OFFSETS_TO_TXN and not a.allowed(OP.READ, GROUP, req.group_id):
        code = E.GROUP_AUTHORIZATION_FAILED
    else:
        return await call(req)
    return error_response(header, code)


async def add_partitions_to_txn(a: Authz, header: RequestHeader, req: Any, call: Call) -> Message | None:
    """v0-3 (clients): WRITE on the id (else every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    WRITE on each topic (a denied topic TOPIC_AUTHORIZATION_FAILED, the others
    OPERATION_NOT_ATTEMPTED); v4+ (brokers verifying): CLUSTER_ACTION."""
    R = AddPartitionsToTxnResponse
    if header.request_api_version >= 4:
        if a.cluster(OP.CLUSTER_ACTION):
            return await call(req)
        return R(error_code=E.CLUSTER_AUTHORIZATION_FAILED, results_by_transaction=[])
    topics = req.v3_and_below_topics
    if not a.allowed(OP.WRITE, TXN, req.v3_and_below_transactional_id):
        denied, rest = list(topics), []
        code = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    else:
        denied = a.denied(topics, OP.WRITE, TOPIC, lambda t: t.name)
        rest, code = [t for t in topics if t not in denied], E.TOPIC_AUTHORIZATION_FAILED
        if not denied:
            return await call(req)
    TR = R.AddPartitionsToTxnTopicResult
    PR = R.AddPartitionsToTxnPartitionResult
    return R(results_by_topic_v3_and_below=[
        TR(name=t.name, results_by_partition=[PR(partition_index=p, partition_error_code=c) for p in t.partitions])
        for group, c in ((denied, code), (rest, E.OPERATION_NOT_ATTEMPTED)) for t in group])


async def describe_transactions(a: Authz, header: RequestHeader, req: Any, call: Call) -> Message | None:
    from kafkasim.protocol.messages.describe_transactions import DescribeTransactionsResponse as R
    denied = a.denied(list(req.transactional_ids), OP.DESCRIBE, TXN, str)
    if not denied:
        return await call(req)
    req.transactional_ids = [t for t in req.transactional_ids if t not in denied]
    resp = await call(req) if req.transactional_ids else R(transaction_states=[])
    assert isinstance(resp, R)
    resp.transaction_states.extend(R.TransactionState(
        error_code=E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, transactional_id=t, transaction_state="",
        transaction_timeout_ms=0, transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1, topics=[])
        for t in denied)
    return resp


async def list_transactions(a: Authz, header: RequestHeader, req: Any, call: Call) -> Message | None:
    """Only the transactional ids the principal may DESCRIBE are listed."""
    resp: Any = await call(req)
    if resp is not None:
        resp.transaction_states = [t for t in resp.transaction_states
                                   if a.allowed(OP.DESCRIBE, TXN, t.transactional_id)]
    return cast(Message | None, resp)


RULES: dict[int, Rule] = {
    A.FIND_COORDINATOR: find_coordinator,
    A.JOIN_GROUP: group_read,
    A.SYNC_GROUP: group_read,
    A.HEARTBEAT: group_read,
    A.LEAVE_GROUP: group_read,
    A.OFFSET_COMMIT: offset_commit,
    A.OFFSET_FETCH: offset_fetch,
    A.DESCRIBE_GROUPS: describe_groups,
    A.LIST_GROUPS: list_groups,
    A.DELETE_GROUPS: delete_groups,
    A.OFFSET_DELETE: offset_delete,
    A.TXN_OFFSET_COMMIT: txn_offset_commit,
    A.INIT_PRODUCER_ID: init_producer_id,
    A.END_TXN: txn_write,
    A.ADD_OFFSETS_TO_TXN: txn_write,
    A.ADD_PARTITIONS_TO_TXN: add_partitions_to_txn,
    A.DESCRIBE_TRANSACTIONS: describe_transactions,
    A.LIST_TRANSACTIONS: list_transactions,
}
__all__ = ["CLUSTER", "RULES"]
