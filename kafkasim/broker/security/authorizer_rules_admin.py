"""The admin and inter-broker APIs' authorization (see authorizer_rules.py): CREATE on the
cluster or the topic to create it, DELETE/ALTER on a topic to delete it, its records or add
partitions, DESCRIBE_CONFIGS/ALTER_CONFIGS on a topic or the cluster for configs, ALTER or
DESCRIBE on the cluster for the cluster-wide admin APIs, CLUSTER_ACTION for what brokers send
each other."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from kafkasim.broker.security.acl_types import ResourceType
from kafkasim.broker.security.authorizer_rules import OP, TOPIC, Authz, Call, Rule, error_response
from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.alter_client_quotas import AlterClientQuotasResponse
from kafkasim.protocol.messages.alter_replica_log_dirs import AlterReplicaLogDirsResponse
from kafkasim.protocol.messages.alter_user_scram_credentials import AlterUserScramCredentialsResponse
from kafkasim.protocol.messages.create_partitions import CreatePartitionsResponse
from kafkasim.protocol.messages.create_topics import CreateTopicsResponse
from kafkasim.protocol.messages.delete_records import DeleteRecordsResponse
from kafkasim.protocol.messages.delete_topics import DeleteTopicsResponse
from kafkasim.protocol.messages.describe_client_quotas import DescribeClientQuotasResponse
from kafkasim.protocol.messages.elect_leaders import ElectLeadersResponse
from kafkasim.protocol.messages.headers import RequestHeader
from kafkasim.protocol.messages.write_txn_markers import WriteTxnMarkersResponse
from kafkasim.protocol.primitives import Message

TOPIC_RESOURCE, BROKER_RESOURCE, BROKER_LOGGER = 2, 4, 8
ZERO_UUID = bytes(16)


async def create_topics(a: Authz, header: RequestHeader, req: Any, call: Call) -> Message | None:
    if a.cluster(OP.CREATE):
        return await call(req)
    denied = a.denied(req.topics, OP.CREATE, TOPIC, lambda t: t.name)
    if not denied:
        return await call(req)
    req.topics = [t for t in req.topics if t not in denied]
    resp = await call(req) if req.topics else CreateTopicsResponse(topics=[])
    assert isinstance(resp, CreateTopicsResponse)
    R = CreateTopicsResponse.CreatableTopicResult
    resp.topics.extend(R(name=t.name, topic_id=ZERO_UUID, error_code=E.TOPIC_AUTHORIZATION_FAILED,
                         error_message="Authorization failed.", num_partitions=-1, replication_factor=-1,
                         configs=[]) for t in denied)
    return resp


async def delete_topics(a: Authz, header: RequestHeader, req: Any, call: Call) -> Message | None:
    names = header.request_api_version < 6
    items = list(req.topic_names) if names else list(req.topics)
    denied = [i for i in items if (n := (i if names else i.name)) is not None
              and not a.allowed(OP.DELETE, TOPIC, n)]
    if not denied:
        return await call(req)
    if names:
        req.topic_names = [t for t in req.topic_names if t not in denied]
    else:
        req.topics = [t for t in req.topics if t not in denied]
    resp = await call(req) if len(denied) < len(items) else DeleteTopicsResponse(responses=[])
    assert isinstance(resp, DeleteTopicsResponse)
    R = DeleteTopicsResponse.DeletableTopicResult
    resp.responses.extend(R(name=i if names else i.name, topic_id=ZERO_UUID if names else i.topic_id,
                            error_code=E.TOPIC_AUTHORIZATION_FAILED, error_message=None) for i in denied)
    return resp


async def create_partitions(a: Authz, header: RequestHeader, req: Any, call: Call) -> Message | None:
    denied = a.denied(req.topics, OP.ALTER, TOPIC, lambda t: t.name)
    if not denied:
        return await call(req)
    req.topics = [t for t in req.topics if t not in denied]
    resp = await call(req) if req.topics else CreatePartitionsResponse(results=[])
    assert isinstance(resp, CreatePartitionsResponse)
    R = CreatePartitionsResponse.CreatePartitionsTopicResult
    resp.results.extend(R(name=t.name, error_code=E.TOPIC_AUTHORIZATION_FAILED,
                          error_message="The topic authorization is failed.") for t in denied)
    return resp


async def delete_records(a: Authz, header: RequestHeader, req: Any, call: Call) -> Message | None:
    denied = a.denied(req.topics, OP.DELETE, TOPIC, lambda t: t.name)
    if not denied:
        return await call(req)
    req.topics = [t for t in req.topics if t not in denied]
    resp = await call(req) if req.topics else DeleteRecordsResponse(topics=[])
    assert isinstance(resp, DeleteRecordsResponse)
    T = DeleteRecordsResponse.DeleteRecordsTopicResult
    resp.topics.extend(T(name=t.name, partitions=[T.DeleteRecordsPartitionResult(
        partition_index=p.partition_index, low_watermark=-1, error_code=E.TOPIC_AUTHORIZATION_FAILED)
        for p in t.partitions]) for t in denied)
    return resp


def _config_allowed(a: Authz, op: OP, r: Any) -> int:
    """E.NONE, or the error of a config resource the principal may not describe/alter."""
    if r.resource_type == TOPIC_RESOURCE:
        return E.NONE if a.allowed(op, TOPIC, r.resource_name) else E.TOPIC_AUTHORIZATION_FAILED
    if r.resource_type in (BROKER_RESOURCE, BROKER_LOGGER):
        return E.NONE if a.cluster(op) else E.CLUSTER_AUTHORIZATION_FAILED
    return E.NONE


async def configs(a: Authz, header: RequestHeader, req: Any, call: Call) -> Message | None:
    """DescribeConfigs (DESCRIBE_CONFIGS), AlterConfigs and IncrementalAlterConfigs
    (ALTER_CONFIGS), per resource."""
    describe = header.request_api_key == A.DESCRIBE_CONFIGS
    op = OP.DESCRIBE_CONFIGS if describe else OP.ALTER_CONFIGS
    codes = [(r, _config_allowed(a, op, r)) for r in req.resources]
    denied = [(r, c) for r, c in codes if c != E.NONE]
    if not denied:
        return await call(req)
    req.resources = [r for r, c in codes if c == E.NONE]
    resp = await call(req) if req.resources else A.api_info(header.request_api_key).response()
    assert resp is not None
    if describe:
        R = type(resp).DescribeConfigsResult  # type: ignore[attr-defined]
        resp.results.extend(R(error_code=c, error_message=None, resource_type=r.resource_type,  # type: ignore[attr-defined]
                              resource_name=r.resource_name, configs=[]) for r, c in denied)
    else:
        R = type(resp).AlterConfigsResourceResponse  # type: ignore[attr-defined]
        resp.responses.extend(R(error_code=c, error_message=None, resource_type=r.resource_type,  # type: ignore[attr-defined]
                                resource_name=r.resource_name) for r, c in denied)
    return resp


def cluster_wide(op: OP) -> Rule:
    """An API Kafka denies as a whole without `op` on the cluster: the response's defaults with
    CLUSTER_AUTHORIZATION_FAILED as its top-level error."""
    async def rule(a: Authz, header: RequestHeader, req: Any, call: Call) -> Message | None:
        if a.cluster(op):
            return await call(req)
        return error_response(header, E.CLUSTER_AUTHORIZATION_FAILED)
    return rule


def per_item_cluster(op: OP, build: Callable[[Any, int], Message]) -> Rule:
    """An API Kafka answers item by item with CLUSTER_AUTHORIZATION_FAILED without `op` on the
    cluster (AlterReplicaLogDirs, AlterClientQuotas, AlterUserScramCredentials, WriteTxnMarkers)."""
    async def rule(a: Authz, header: RequestHeader, req: Any, call: Call) -> Message | None:
        if a.cluster(op):
            return await call(req)
        return build(req, E.CLUSTER_AUTHORIZATION_FAILED)
    return rule


def _replica_log_dirs(req: Any, code: int) -> Message:
    R = AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult
    return AlterReplicaLogDirsResponse(results=[R(topic_name=t.name, partitions=[
        R.AlterReplicaLogDirPartitionResult(partition_index=p, error_code=code) for p in t.partitions])
        for d in req.dirs for t in d.topics])


def _client_quotas(req: Any, code: int) -> Message:
    R = AlterClientQuotasResponse.EntryData
    return AlterClientQuotasResponse(entries=[R(error_code=code, error_message=None, entity=[
        R.EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity])
        for entry in req.entries])


def _scram(req: Any, code: int) -> Message:
    R = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
    users = dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions])
    return AlterUserScramCredentialsResponse(results=[R(user=u, error_code=code, error_message=None) for u in users])


def _txn_markers(req: Any, code: int) -> Message:
    R = WriteTxnMarkersResponse.WritableTxnMarkerResult
    T = R.WritableTxnMarkerTopicResult
    return WriteTxnMarkersResponse(markers=[R(producer_id=m.producer_id, topics=[T(name=t.name, partitions=[
        T.WritableTxnMarkerPartitionResult(partition_index=p, error_code=code) for p in t.partition_indexes])
        for t in m.topics]) for m in req.markers])


async def elect_leaders(a: Authz, header: RequestHeader, req: Any, call: Call) -> Message | None:
    """ALTER on the cluster, else every named partition CLUSTER_AUTHORIZATION_FAILED (and the
    top-level error from v1)."""
    if a.cluster(OP.ALTER):
        return await call(req)
    resp: Any = error_response(header, E.CLUSTER_AUTHORIZATION_FAILED)
    R = ElectLeadersResponse.ReplicaElectionResult
    resp.replica_election_results = [R(topic=t.topic, partition_result=[R.PartitionResult(
        partition_id=p, error_code=E.CLUSTER_AUTHORIZATION_FAILED, error_message=None) for p in t.partitions])
        for t in req.topic_partitions or []]
    return cast(Message, resp)


async def describe_cluster(a: Authz, header: RequestHeader, req: Any, call: Call) -> Message | None:
    """Nothing denied; the cluster's authorized operations, when asked, are the authorizer's."""
    resp: Any = await call(req)
    if resp is not None and resp.error_code == E.NONE and req.include_cluster_authorized_operations:
        resp.cluster_authorized_operations = a.operations(ResourceType.CLUSTER, "kafka-cluster") \
            if a.cluster(OP.DESCRIBE) else 0
    return cast(Message | None, resp)


async def describe_client_quotas(a: Authz, header: RequestHeader, req: Any, call: Call) -> Message | None:
    if a.cluster(OP.DESCRIBE_CONFIGS):
        return await call(req)
    return DescribeClientQuotasResponse(error_code=E.CLUSTER_AUTHORIZATION_FAILED, error_message=None, entries=None)


RULES: dict[int, Rule] = {
    A.CREATE_TOPICS: create_topics,
    A.DELETE_TOPICS: delete_topics,
    A.CREATE_PARTITIONS: create_partitions,
    A.DELETE_RECORDS: delete_records,
    A.DESCRIBE_CONFIGS: configs,
    A.ALTER_CONFIGS: configs,
    A.INCREMENTAL_ALTER_CONFIGS: configs,
    # What brokers send each other.
    A.LEADER_AND_ISR: cluster_wide(OP.CLUSTER_ACTION),
    A.STOP_REPLICA: cluster_wide(OP.CLUSTER_ACTION),
    A.UPDATE_METADATA: cluster_wide(OP.CLUSTER_ACTION),
    A.CONTROLLED_SHUTDOWN: cluster_wide(OP.CLUSTER_ACTION),
    # Cluster-wide admin.
    A.ALTER_PARTITION_REASSIGNMENTS: cluster_wide(OP.ALTER),
    A.LIST_PARTITION_REASSIGNMENTS: cluster_wide(OP.DESCRIBE),
    A.ELECT_LEADERS: elect_leaders,
    A.DESCRIBE_USER_SCRAM_CREDENTIALS: cluster_wide(OP.DESCRIBE),
    A.UPDATE_FEATURES: cluster_wide(OP.ALTER),
    A.DESCRIBE_LOG_DIRS: cluster_wide(OP.DESCRIBE),
    A.DESCRIBE_CLIENT_QUOTAS: describe_client_quotas,
    A.DESCRIBE_CLUSTER: describe_cluster,
    A.ALTER_REPLICA_LOG_DIRS: per_item_cluster(OP.ALTER, _replica_log_dirs),
    A.ALTER_CLIENT_QUOTAS: per_item_cluster(OP.ALTER_CONFIGS, _client_quotas),
    A.ALTER_USER_SCRAM_CREDENTIALS: per_item_cluster(OP.ALTER, _scram),
    A.WRITE_TXN_MARKERS: per_item_cluster(OP.CLUSTER_ACTION, _txn_markers),
}
__all__ = ["RULES"]
