"""AclAuthorizer's decisions (AclAuthorizer.authorizeAction's rules), on a cache filled directly:
deny before allow, literal / prefixed / `*` patterns, implied operations, super users,
allow.everyone.if.no.acl.found, host and wildcard-principal matching, authorized operations."""

from __future__ import annotations

from typing import Any

import pytest

from kafkasim.broker.request_context import KafkaPrincipal, RequestContext
from kafkasim.broker.security.acl_types import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kafkasim.broker.security.authorizer import AclAuthorizer, AuthorizerConfig
from kafkasim.protocol.messages.headers import RequestHeader

pytestmark = pytest.mark.unit

OP, T = AclOperation, ResourceType
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED


class _Zk:
    def register_state_change_handler(self, handler: Any) -> None:
        pass


class _Rt:
    def trace(self, *args: Any, **kw: Any) -> None:
        pass


def authorizer(acls: dict[tuple[ResourceType, str, PatternType], list[tuple[str, str, AclOperation, Any]]],
               super_users: str = "", allow_everyone: bool = False) -> AclAuthorizer:
    a = AclAuthorizer(_Rt(), _Zk(), AuthorizerConfig.parse(super_users, allow_everyone))  # type: ignore[arg-type]
    for (rtype, name, kind), entries in acls.items():
        a.cache[ResourcePattern(rtype, name, kind)] = frozenset(AccessControlEntry(*e) for e in entries)
    return a


def ctx(principal: str, host: str = "10.0.0.1") -> RequestContext:
    header = RequestHeader(request_api_key=0, request_api_version=0, correlation_id=1, client_id="c")
    return RequestContext.of(header, principal=KafkaPrincipal.parse(principal), client_address=host)


def test_no_acl_means_denied_unless_everyone_is_allowed() -> None:
    assert not authorizer({}).authorize(ctx("User:alice"), OP.READ, T.TOPIC, "t")
    assert authorizer({}, allow_everyone=True).authorize(ctx("User:alice"), OP.READ, T.TOPIC, "t")
    # An ACL on the resource (for someone else) means it is no longer "no ACL found".
    a = authorizer({(T.TOPIC, "t", LIT): [("User:bob", "*", OP.READ, ALLOW)]}, allow_everyone=True)
    assert not a.authorize(ctx("User:alice"), OP.READ, T.TOPIC, "t")
    assert a.authorize(ctx("User:alice"), OP.READ, T.TOPIC, "other")


def test_deny_wins_over_allow_and_all_covers_every_operation() -> None:
    a = authorizer({(T.TOPIC, "t", LIT): [("User:alice", "*", OP.ALL, ALLOW)],
                    (T.TOPIC, "t", PRE): [("User:alice", "*", OP.WRITE, DENY)]})
    assert a.authorize(ctx("User:alice"), OP.READ, T.TOPIC, "t")
    assert not a.authorize(ctx("User:alice"), OP.WRITE, T.TOPIC, "t")
    assert not a.authorize(ctx("User:alice"), OP.WRITE, T.TOPIC, "tx")   # the prefix denies, nothing allows


def test_prefixed_wildcard_and_literal_patterns() -> None:
    a = authorizer({(T.TOPIC, "orders-", PRE): [("User:alice", "*", OP.READ, ALLOW)],
                    (T.TOPIC, "*", LIT): [("User:bob", "*", OP.WRITE, ALLOW)],
                    (T.GROUP, "g", LIT): [("User:*", "*", OP.READ, ALLOW)]})
    assert a.authorize(ctx("User:alice"), OP.READ, T.TOPIC, "orders-eu")
    assert not a.authorize(ctx("User:alice"), OP.READ, T.TOPIC, "order")
    assert a.authorize(ctx("User:bob"), OP.WRITE, T.TOPIC, "anything")
    assert a.authorize(ctx("User:carol"), OP.READ, T.GROUP, "g")        # User:* matches any principal
    assert not a.authorize(ctx("User:carol"), OP.READ, T.GROUP, "g2")
    assert not a.authorize(ctx("User:alice"), OP.READ, T.GROUP, "orders-eu")  # types do not mix


def test_implied_operations() -> None:
    a = authorizer({(T.TOPIC, "t", LIT): [("User:r", "*", OP.READ, ALLOW), ("User:w", "*", OP.WRITE, ALLOW),
                                          ("User:d", "*", OP.DELETE, ALLOW), ("User:a", "*", OP.ALTER, ALLOW),
                                          ("User:c", "*", OP.ALTER_CONFIGS, ALLOW),
                                          ("User:x", "*", OP.CREATE, ALLOW)]})
    for user in ("r", "w", "d", "a"):
        assert a.authorize(ctx(f"User:{user}"), OP.DESCRIBE, T.TOPIC, "t"), user
    assert not a.authorize(ctx("User:x"), OP.DESCRIBE, T.TOPIC, "t")      # CREATE implies nothing
    assert a.authorize(ctx("User:c"), OP.DESCRIBE_CONFIGS, T.TOPIC, "t")
    assert not a.authorize(ctx("User:c"), OP.DESCRIBE, T.TOPIC, "t")
    assert not a.authorize(ctx("User:r"), OP.WRITE, T.TOPIC, "t")           # implication goes one way
    # A DENY of DESCRIBE is not implied by a DENY of READ.
    b = authorizer({(T.TOPIC, "t", LIT): [("User:r", "*", OP.WRITE, ALLOW), ("User:r", "*", OP.READ, DENY)]})
    assert b.authorize(ctx("User:r"), OP.DESCRIBE, T.TOPIC, "t")


def test_hosts_and_super_users() -> None:
    a = authorizer({(T.TOPIC, "t", LIT): [("User:alice", "10.0.0.1", OP.READ, ALLOW),
                                          ("User:alice", "10.0.0.9", OP.ALL, DENY)]},
                   super_users="User:admin; User:ops")
    assert a.authorize(ctx("User:alice", "10.0.0.1"), OP.READ, T.TOPIC, "t")
    assert not a.authorize(ctx("User:alice", "10.0.0.2"), OP.READ, T.TOPIC, "t")
    assert not a.authorize(ctx("User:alice", "10.0.0.9"), OP.READ, T.TOPIC, "t")
    assert a.authorize(ctx("User:ops"), OP.CLUSTER_ACTION, T.CLUSTER, "kafka-cluster")
    assert a.authorize(ctx("User:admin"), OP.WRITE, T.TOPIC, "t")


def test_authorized_operations_bit_field() -> None:
    a = authorizer({(T.TOPIC, "t", LIT): [("User:alice", "*", OP.READ, ALLOW),
                                          ("User:alice", "*", OP.ALTER_CONFIGS, ALLOW)]})
    bits = a.authorized_operations(ctx("User:alice"), T.TOPIC, "t")
    assert bits == (1 << OP.READ) | (1 << OP.DESCRIBE) | (1 << OP.DESCRIBE_CONFIGS) | (1 << OP.ALTER_CONFIGS)
    assert authorizer({}, super_users="User:s").authorized_operations(ctx("User:s"), T.TOPIC, "t") == 3576
    assert authorizer({}, super_users="User:s").authorized_operations(ctx("User:s"), T.CLUSTER, "kafka-cluster") \
        == 8096


def test_authorize_by_resource_type() -> None:
    a = authorizer({(T.TOPIC, "logs-", PRE): [("User:alice", "*", OP.WRITE, ALLOW)]})
    assert a.authorize_by_resource_type(ctx("User:alice"), OP.WRITE, T.TOPIC)
    assert not a.authorize_by_resource_type(ctx("User:bob"), OP.WRITE, T.TOPIC)
    b = authorizer({(T.TOPIC, "logs-", PRE): [("User:alice", "*", OP.WRITE, ALLOW)],
                    (T.TOPIC, "*", LIT): [("User:alice", "*", OP.WRITE, DENY)]})
    assert not b.authorize_by_resource_type(ctx("User:alice"), OP.WRITE, T.TOPIC)
    c = authorizer({(T.TOPIC, "logs-a", LIT): [("User:alice", "*", OP.WRITE, ALLOW)],
                    (T.TOPIC, "logs-", PRE): [("User:alice", "*", OP.WRITE, DENY)]})
    assert not c.authorize_by_resource_type(ctx("User:alice"), OP.WRITE, T.TOPIC)


def test_filters_match_as_kafka_acl_binding_filter() -> None:
    a = authorizer({(T.TOPIC, "orders", LIT): [("User:alice", "*", OP.READ, ALLOW)],
                    (T.TOPIC, "ord", PRE): [("User:bob", "h", OP.DESCRIBE, DENY)],
                    (T.TOPIC, "*", LIT): [("User:carol", "*", OP.WRITE, ALLOW)],
                    (T.GROUP, "orders", LIT): [("User:alice", "*", OP.READ, ALLOW)]})

    def names(rtype: ResourceType, name: str | None, kind: PatternType, principal: str | None = None) -> list[str]:
        flt = AclBindingFilter(rtype, name, kind, principal, None, OP.ANY, AclPermissionType.ANY)
        return [f"{b.pattern.resource_type.name}:{b.pattern.name}:{b.pattern.pattern_type.name}" for b in a.acls(flt)]

    assert names(T.TOPIC, "orders", PatternType.MATCH) == ["TOPIC:*:LITERAL", "TOPIC:ord:PREFIXED",
                                                           "TOPIC:orders:LITERAL"]
    assert names(T.ANY, "orders", PatternType.ANY) == ["TOPIC:orders:LITERAL", "GROUP:orders:LITERAL"]
    assert names(T.TOPIC, "ord", PRE) == ["TOPIC:ord:PREFIXED"]
    assert names(T.TOPIC, "ord", LIT) == []
    assert names(T.ANY, None, PatternType.ANY, "User:alice") == ["TOPIC:orders:LITERAL", "GROUP:orders:LITERAL"]
    assert isinstance(a.acls(AclBindingFilter(T.ANY, None, PatternType.ANY, None, None, OP.ANY,
                                              AclPermissionType.ANY))[0], AclBinding)
