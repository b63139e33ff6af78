"""CreateAcls / DescribeAcls / DeleteAcls in the simulated world, over the wire: the answers
are those Kafka 3.9.1 (ZooKeeper mode, AclAuthorizer, super.users=User:ANONYMOUS) gave to the
same requests, and the znodes are laid out as `realkafka zk DIR get PATH` showed them:

  /kafka-acl/Topic/orders        {"acls":[{"principal":"User:alice","permissionType":"Allow",
                                  "host":"*","operation":"Write"},...],"version":1}
  /kafka-acl-extended/prefixed/Topic/ord
  /kafka-acl-changes/acl_changes_0000000000            TOPIC:orders
  /kafka-acl-extended-changes/acl_changes_0000000000   {"version":1,"resourceType":"TOPIC",
                                                        "name":"ord","patternType":"PREFIXED"}
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from kafkasim.broker.config import BrokerConfig
from kafkasim.broker.server import KafkaServer
from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.create_acls import CreateAclsRequest as C
from kafkasim.protocol.messages.delete_acls import DeleteAclsRequest as X
from kafkasim.protocol.messages.describe_acls import DescribeAclsRequest as D
from kafkasim.runtime.api import NodeRuntime, NoNodeError
from kafkasim.runtime.sim.world import SimWorld
from tests.broker.test_idempotence import _connect, _run

pytestmark = pytest.mark.sim

AUTH = {"authorizer_class_name": "kafka.security.authorizer.AclAuthorizer", "super_users": "User:ANONYMOUS"}


def creation(name: str, principal: str = "User:alice", op: int = 3, perm: int = 3, rtype: int = 2,
             pattern: int = 3, host: str = "*") -> Any:
    return C.AclCreation(resource_type=rtype, resource_name=name, resource_pattern_type=pattern,
                         principal=principal, host=host, operation=op, permission_type=perm)


def any_filter(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = dict(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                                principal_filter=None, host_filter=None, operation=1, permission_type=1)
    base.update(kw)
    return base


async def znode(servers: dict[str, Any], path: str) -> bytes | None:
    try:
        data, _ = await servers["broker"].zk.get(path)
    except NoNodeError:
        return None
    return bytes(data)


def test_acls_are_created_stored_described_and_deleted_as_kafka_does() -> None:
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        w = await _connect(rt)
        out: dict[str, Any] = {}
        r = await w.call(A.CREATE_ACLS, 1, C(creations=[creation("orders"), creation("orders", op=4)]))
        out["create"] = [(x.error_code, x.error_message) for x in r.results]
        r = await w.call(A.CREATE_ACLS, 1, C(creations=[
            creation("ord", "User:bob", op=8, perm=2, pattern=4, host="10.0.0.1"),
            creation("*", "User:*", op=2, rtype=3), creation("x", rtype=4), creation(""), creation("a/b")]))
        out["create2"] = [(x.error_code, x.error_message) for x in r.results]
        r = await w.call(A.CREATE_ACLS, 2, C(creations=[creation("orders"), creation("y", "alice")]))
        out["bad_principal"] = [(x.error_code, x.error_message) for x in r.results]
        for path in ("/kafka-acl/Topic/orders", "/kafka-acl-extended/prefixed/Topic/ord", "/kafka-acl/Group/*",
                     "/kafka-acl-changes/acl_changes_0000000000", "/kafka-acl-changes/acl_changes_0000000001",
                     "/kafka-acl-extended-changes/acl_changes_0000000000", "/kafka-acl/Topic/y"):
            out[path] = await znode(servers, path)
        r = await w.call(A.DESCRIBE_ACLS, 1, D(resource_type_filter=2, resource_name_filter="orders",
                                                pattern_type_filter=2, principal_filter=None, host_filter=None,
                                                operation=1, permission_type=1))
        out["match"] = sorted((x.resource_name, x.pattern_type, sorted((a.principal, a.host, a.operation,
                                                                        a.permission_type) for a in x.acls))
                              for x in r.resources)
        r = await w.call(A.DELETE_ACLS, 1, X(filters=[X.DeleteAclsFilter(**any_filter(
            resource_type_filter=2, resource_name_filter="orders", pattern_type_filter=3))]))
        out["deleted"] = sorted((m.resource_name, m.operation) for m in r.filter_results[0].matching_acls)
        out["gone"] = await znode(servers, "/kafka-acl/Topic/orders")
        r = await w.call(A.DESCRIBE_ACLS, 1, D(**any_filter()))
        out["left"] = sorted((x.resource_type, x.resource_name, x.pattern_type) for x in r.resources)
        return out

    out = _run(body, **AUTH)
    assert out["create"] == [(0, ""), (0, "")]
    assert out["create2"] == [(0, ""), (0, ""), (42, "The only valid name for the CLUSTER resource is kafka-cluster"),
                              (42, "Invalid empty resource name"), (42, "Failed to create ACL")]
    assert out["bad_principal"] == [(-1, None), (-1, None)]   # the whole request, as Kafka
    doc = json.loads(out["/kafka-acl/Topic/orders"])
    assert list(doc) == ["acls", "version"] and doc["version"] == 1
    assert sorted(map(json.dumps, doc["acls"])) == sorted(map(json.dumps, [
        {"principal": "User:alice", "permissionType": "Allow", "host": "*", "operation": "Write"},
        {"principal": "User:alice", "permissionType": "Allow", "host": "*", "operation": "Read"}]))
    assert out["/kafka-acl-extended/prefixed/Topic/ord"] == (
        b'{"acls":[{"principal":"User:bob","permissionType":"Deny","host":"10.0.0.1","operation":"Describe"}],'
        b'"version":1}')
    assert out["/kafka-acl/Group/*"] == (
        b'{"acls":[{"principal":"User:*","permissionType":"Allow","host":"*","operation":"All"}],"version":1}')
    assert out["/kafka-acl-changes/acl_changes_0000000000"] == b"TOPIC:orders"
    assert out["/kafka-acl-changes/acl_changes_0000000001"] == b"GROUP:*"
    assert out["/kafka-acl-extended-changes/acl_changes_0000000000"] == \
        b'{"version":1,"resourceType":"TOPIC","name":"ord","patternType":"PREFIXED"}'
    assert out["/kafka-acl/Topic/y"] is None
    # MATCH: the literal pattern and the prefixes that cover the name (the `*` is a group's).
    assert out["match"] == [("ord", 4, [("User:bob", "10.0.0.1", 8, 2)]),
                            ("orders", 3, [("User:alice", "*", 3, 3), ("User:alice", "*", 4, 3)])]
    assert out["deleted"] == [("orders", 3), ("orders", 4)]
    assert out["gone"] is None          # its last ACL gone, the znode goes too
    assert out["left"] == [(2, "ord", 4), (3, "*", 3)]


def test_without_an_authorizer_the_acl_apis_answer_security_disabled() -> None:
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        w = await _connect(rt)
        c = await w.call(A.CREATE_ACLS, 3, C(creations=[creation("t")]))
        d = await w.call(A.DESCRIBE_ACLS, 3, D(**any_filter()))
        x = await w.call(A.DELETE_ACLS, 3, X(filters=[X.DeleteAclsFilter(**any_filter())]))
        return ([(r.error_code, r.error_message) for r in c.results], (d.error_code, d.error_message),
                [(r.error_code, r.error_message) for r in x.filter_results])

    c, d, x = _run(body)
    assert c == [(E.SECURITY_DISABLED, "No Authorizer is configured.")]
    assert d == (E.SECURITY_DISABLED, "No Authorizer is configured.")
    assert x == [(E.SECURITY_DISABLED, "No Authorizer is configured.")]


def test_an_unknown_enum_closes_the_connection_as_kafka_does() -> None:
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        w = await _connect(rt)
        try:
            await w.call(A.DESCRIBE_ACLS, 1, D(**any_filter(operation=0)))
        except (ConnectionError, OSError) as exc:
            return type(exc).__name__
        return "answered"

    assert _run(body, **AUTH) != "answered"


def test_another_broker_learns_an_acl_from_the_change_notification() -> None:
    world = SimWorld(5)
    servers = []
    for i in range(2):
        node = world.add_node(f"broker-{i}")
        s = KafkaServer(node.runtime, BrokerConfig(host=f"broker-{i}", port=9092, log_dir="logs", broker_id=i,
                                                   zookeeper_session_timeout_ms=4000, **AUTH))
        servers.append(s)
        node.runtime.spawn(s.startup())
    client = world.add_node("client")
    seen: list[Any] = []

    async def main() -> None:
        await client.runtime.sleep(3000)
        w = await _connect(client.runtime)   # broker-0
        await w.call(A.CREATE_ACLS, 1, C(creations=[creation("orders", "User:carol", op=4)]))
        await client.runtime.sleep(500)
        seen.append(sorted(str(p.name) for p in servers[1].authorizer.cache))
        await w.call(A.DELETE_ACLS, 1, X(filters=[X.DeleteAclsFilter(**any_filter())]))
        await client.runtime.sleep(500)
        seen.append(sorted(str(p.name) for p in servers[1].authorizer.cache))

    task = client.runtime.spawn(main())
    world.run(30_000)
    assert task.done()
    assert seen == [["orders"], []]
