"""Differential conformance of ACLs: Kafka 3.9.1 and kafkasim, each started with the
AclAuthorizer (`authorizer.class.name=kafka.security.authorizer.AclAuthorizer`) and
`allow.everyone.if.no.acl.found=true` — so User:ANONYMOUS (every PLAINTEXT client) may do what no
ACL speaks of, and the ACLs the steps create decide the rest — are played the same steps:
CreateAcls / DescribeAcls / DeleteAcls at every version with Kafka's validation errors, then
the authorization errors of Produce, Fetch, ListOffsets, Metadata, JoinGroup, FindCoordinator
and InitProducerId on resources those ACLs deny.

Normalised as the library's cases are (tests/conformance/normalize.py: throttle, uuids, ports,
cluster id) except that error messages are compared exactly, and the lists Kafka builds from hash
sets (the resources and ACLs of DescribeAcls, the matching ACLs of DeleteAcls) are sorted.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kafkasim.protocol.messages.create_acls import CreateAclsRequest as C
from kafkasim.protocol.messages.create_topics import CreateTopicsRequest
from kafkasim.protocol.messages.delete_acls import DeleteAclsRequest as X
from kafkasim.protocol.messages.describe_cluster import DescribeClusterRequest
from kafkasim.protocol.messages.describe_acls import DescribeAclsRequest as D
from kafkasim.protocol.messages.fetch import FetchRequest
from kafkasim.protocol.messages.find_coordinator import FindCoordinatorRequest
from kafkasim.protocol.messages.init_producer_id import InitProducerIdRequest
from kafkasim.protocol.messages.join_group import JoinGroupRequest
from kafkasim.protocol.messages.list_offsets import ListOffsetsRequest
from kafkasim.protocol.messages.metadata import MetadataRequest
from kafkasim.protocol.messages.produce import ProduceRequest
from kafkasim.records.batch import Record, build_batch
from tests.conformance.conftest import KAFKA_ONLY_CONFIGS, SHARED_CONFIGS, kafka_launcher, require_real_kafka
from tests.conformance.normalize import Numbering, normalise, tree_of
from tests.conformance.wire import Closed, Connection

pytestmark = pytest.mark.real

ACL_CONFIGS = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
               "allow.everyone.if.no.acl.found": "true"}
ANON = "User:ANONYMOUS"
TOPICS = ("acl-w", "acl-r", "acl-d", "acl-impl", "acl-ok")


def creation(name: str, principal: str = "User:alice", op: int = 3, perm: int = 3, rtype: int = 2,
             pattern: int = 3, host: str = "*") -> Any:
    return C.AclCreation(resource_type=rtype, resource_name=name, resource_pattern_type=pattern,
                         principal=principal, host=host, operation=op, permission_type=perm)


def flt(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = dict(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                                principal_filter=None, host_filter=None, operation=1, permission_type=1)
    return {**base, **kw}


def _sorted_acls(tree: Any) -> Any:
    """DescribeAcls' resources and DeleteAcls' matching ACLs come from hash sets in Kafka."""
    if isinstance(tree, dict):
        for key in ("resources", "acls", "matching_acls"):
            if isinstance(tree.get(key), list):
                tree[key] = sorted((_sorted_acls(v) for v in tree[key]), key=repr)
        for key in ("filter_results",):
            if isinstance(tree.get(key), list):
                tree[key] = [_sorted_acls(v) for v in tree[key]]
    return tree


def _errors(tree: Any) -> Any:
    """Only the error codes (and names) of a data-path answer: offsets and timestamps differ."""
    if isinstance(tree, dict):
        keep = {k: _errors(v) for k, v in tree.items()
                if k in ("name", "topic", "partition_index", "index", "error_code", "responses", "topics",
                         "partitions", "partition_responses", "topic_authorized_operations", "coordinators",
                         "key")}
        return keep
    if isinstance(tree, list):
        return sorted((_errors(v) for v in tree), key=repr)
    return tree


Step = tuple[str, Callable[[], Any], int, Callable[[Any], Any]]


def _produce(topic: str) -> Any:
    PD = ProduceRequest.TopicProduceData.PartitionProduceData
    return ProduceRequest(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            PD(index=0, records=build_batch([Record(0, None, b"v")]))])])


def _fetch(topic: str) -> Any:
    FT = FetchRequest.FetchTopic
    return FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                        topics=[FT(topic=topic, partitions=[FT.FetchPartition(partition=0, fetch_offset=0,
                                                                              partition_max_bytes=1 << 20)])])


def _list_offsets(topic: str) -> Any:
    T = ListOffsetsRequest.ListOffsetsTopic
    return ListOffsetsRequest(replica_id=-1, topics=[T(name=topic, partitions=[
        T.ListOffsetsPartition(partition_index=0, timestamp=-1)])])


def _metadata(*topics: str) -> Any:
    T = MetadataRequest.MetadataRequestTopic
    return MetadataRequest(topics=[T(name=t) for t in topics], allow_auto_topic_creation=False,
                           include_topic_authorized_operations=True)


def _cluster_ops(tree: Any) -> Any:
    return tree["cluster_authorized_operations"], tree.get("error_code")


def _all_acl_topics(tree: Any) -> Any:
    return sorted(t["name"] for t in tree["topics"] if t["name"].startswith("acl-"))


def steps() -> list[Step]:
    same: Callable[[Any], Any] = _sorted_acls
    CT = CreateTopicsRequest.CreatableTopic
    return [
        ("describe-empty-v0", lambda: D(**flt(pattern_type_filter=3)), 0, same),
        ("describe-empty-v3", lambda: D(**flt()), 3, same),
        ("describe-cluster-ops-open", lambda: DescribeClusterRequest(include_cluster_authorized_operations=True), 1,
         _cluster_ops),
        ("create-topics", lambda: CreateTopicsRequest(topics=[
            CT(name=t, num_partitions=1, replication_factor=1) for t in TOPICS], timeout_ms=10000), 4, _errors),
        ("create-v1", lambda: C(creations=[
            creation("orders"), creation("orders", op=4), creation("ord", "User:bob", op=8, perm=2, pattern=4,
                                                                  host="10.0.0.1"),
            creation("*", "User:*", op=2, rtype=3), creation("x", rtype=4), creation(""), creation("a/b"),
            creation("u", rtype=7, op=13),
            creation("acl-w", ANON, op=4, perm=2), creation("acl-r", ANON, op=3, perm=2),
            creation("acl-d", ANON, op=8, perm=2), creation("acl-impl", ANON, op=3),
            creation("acl-g", ANON, op=3, perm=2, rtype=3), creation("acl-tx", ANON, op=4, perm=2, rtype=5)]),
         1, same),
        ("create-bad-principal-v2", lambda: C(creations=[creation("y"), creation("y", "alice")]), 2, same),
        ("create-any-type-v3", lambda: C(creations=[creation("y", rtype=1)]), 3, same),
        ("create-v0", lambda: C(creations=[creation("v0", "User:carol")]), 0, same),
        ("describe-all-v1", lambda: D(**flt()), 1, same),
        ("describe-all-v2", lambda: D(**flt()), 2, same),
        ("describe-literal-v0", lambda: D(**flt(pattern_type_filter=3)), 0, same),
        ("describe-match-orders", lambda: D(**flt(resource_type_filter=2, resource_name_filter="orders",
                                                   pattern_type_filter=2)), 1, same),
        ("describe-prefixed", lambda: D(**flt(resource_type_filter=2, pattern_type_filter=4)), 1, same),
        ("describe-principal", lambda: D(**flt(principal_filter="User:alice")), 1, same),
        ("describe-deny-host", lambda: D(**flt(permission_type=2, host_filter="10.0.0.1")), 1, same),
        ("describe-unknown-enum", lambda: D(**flt(operation=0)), 1, same),
        ("produce-denied", lambda: _produce("acl-w"), 9, _errors),
        ("produce-implied-not-write", lambda: _produce("acl-impl"), 9, _errors),
        ("produce-open", lambda: _produce("acl-ok"), 9, _errors),
        ("fetch-denied", lambda: _fetch("acl-r"), 11, _errors),
        ("fetch-allowed", lambda: _fetch("acl-impl"), 11, _errors),
        ("list-offsets-denied", lambda: _list_offsets("acl-d"), 5, _errors),
        ("metadata-named", lambda: _metadata("acl-w", "acl-r", "acl-d", "acl-impl", "acl-ok"), 9, _errors),
        ("metadata-all", lambda: MetadataRequest(topics=None, allow_auto_topic_creation=False), 9,
         _all_acl_topics),
        ("join-group-denied", lambda: JoinGroupRequest(group_id="acl-g", session_timeout_ms=10000,
                                                       rebalance_timeout_ms=10000, member_id="",
                                                       protocol_type="consumer", protocols=[]), 5, _errors),
        ("find-coordinator-denied", lambda: FindCoordinatorRequest(key="acl-g", key_type=0), 3, _errors),
        ("init-producer-id-denied", lambda: InitProducerIdRequest(transactional_id="acl-tx",
                                                                  transaction_timeout_ms=60000), 4, _errors),
        ("delete-orders", lambda: X(filters=[X.DeleteAclsFilter(**flt(resource_type_filter=2,
                                                                      resource_name_filter="orders",
                                                                      pattern_type_filter=3))]), 1, same),
        ("delete-twice", lambda: X(filters=[
            X.DeleteAclsFilter(**flt(principal_filter="User:bob")),
            X.DeleteAclsFilter(**flt(principal_filter="User:bob"))]), 2, same),
        ("delete-unknown-enum", lambda: X(filters=[X.DeleteAclsFilter(**flt(permission_type=0))]), 3, same),
        ("describe-after-delete", lambda: D(**flt()), 3, same),
        # An ACL on the cluster for someone else: ANONYMOUS may no longer administer ACLs.
        ("create-cluster-acl", lambda: C(creations=[creation("kafka-cluster", "User:ops", op=9, rtype=4)]), 3, same),
        ("describe-denied", lambda: D(**flt()), 3, same),
        ("create-denied", lambda: C(creations=[creation("z"), creation("z", "alice")]), 3, same),
        ("delete-denied", lambda: X(filters=[X.DeleteAclsFilter(**flt())]), 3, same),
        ("describe-cluster-ops-closed", lambda: DescribeClusterRequest(include_cluster_authorized_operations=True),
         1, _cluster_ops),
        ("metadata-cluster-ops-closed", lambda: MetadataRequest(topics=[], include_cluster_authorized_operations=True),
         10, _cluster_ops),
    ]


def play(port: int) -> dict[str, Any]:
    conn = Connection("127.0.0.1", port)
    out: dict[str, Any] = {}
    for name, build, version, project in steps():
        try:
            resp = conn.send(build(), version)
            out[name] = project(normalise(tree_of(resp, version), Numbering()))
        except Closed:
            out[name] = "connection closed"
            conn.close()
    conn.close()
    return out


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, Any]]]:
    launcher = require_real_kafka()
    real = launcher.up(tmp_path_factory.mktemp("acl-real-kafka"), 1,
                       {**SHARED_CONFIGS, **KAFKA_ONLY_CONFIGS, **ACL_CONFIGS})
    try:
        sim = kafka_launcher().cluster_launcher().up(tmp_path_factory.mktemp("acl-kafkasim"), 1,
                                                     {**SHARED_CONFIGS, **ACL_CONFIGS})
        try:
            results: dict[str, dict[str, Any]] = {}
            threads = [threading.Thread(target=lambda k=k, p=p: results.__setitem__(k, play(p)))
                       for k, p in (("real", real.brokers[0].port), ("sim", sim.brokers[0].port))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            yield results
        finally:
            sim.down()
    finally:
        real.down()


@pytest.mark.parametrize("name", [s[0] for s in steps()])
def test_step(both: dict[str, dict[str, Any]], name: str) -> None:
    assert both["sim"][name] == both["real"][name]
