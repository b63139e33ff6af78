"""Kafka's ACL vocabulary (org.apache.kafka.common.acl / .resource): the enums with their wire
codes and the names ZooKeeper stores, resource patterns, access control entries, bindings, and
the filters DescribeAcls and DeleteAcls match with (AclBindingFilter.matches).

Wire codes (ResourceType, AclOperation, AclPermissionType, PatternType):
  ResourceType       UNKNOWN 0, ANY 1, TOPIC 2, GROUP 3, CLUSTER 4, TRANSACTIONAL_ID 5,
                     DELEGATION_TOKEN 6, USER 7
  AclOperation       UNKNOWN 0, ANY 1, ALL 2, READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7,
                     DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11,
                     IDEMPOTENT_WRITE 12, CREATE_TOKENS 13, DESCRIBE_TOKENS 14
  AclPermissionType  UNKNOWN 0, ANY 1, DENY 2, ALLOW 3
  PatternType        UNKNOWN 0, ANY 1, MATCH 2, LITERAL 3, PREFIXED 4
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


CLUSTER_NAME = "kafka-cluster"
WILDCARD_RESOURCE = "*"
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"

# SecurityUtils.resourceTypeName / operationName / permissionTypeName: the CamelCase names
# ZooKeeper's ACL znodes hold ("Topic", "DescribeConfigs", "Allow").
RESOURCE_TYPE_NAMES = {ResourceType.TOPIC: "Topic", ResourceType.GROUP: "Group", ResourceType.CLUSTER: "Cluster",
                       ResourceType.TRANSACTIONAL_ID: "TransactionalId",
                       ResourceType.DELEGATION_TOKEN: "DelegationToken", ResourceType.USER: "User"}
OPERATION_NAMES = {AclOperation.ALL: "All", AclOperation.READ: "Read", AclOperation.WRITE: "Write",
                   AclOperation.CREATE: "Create", AclOperation.DELETE: "Delete", AclOperation.ALTER: "Alter",
                   AclOperation.DESCRIBE: "Describe", AclOperation.CLUSTER_ACTION: "ClusterAction",
                   AclOperation.DESCRIBE_CONFIGS: "DescribeConfigs", AclOperation.ALTER_CONFIGS: "AlterConfigs",
                   AclOperation.IDEMPOTENT_WRITE: "IdempotentWrite", AclOperation.CREATE_TOKENS: "CreateTokens",
                   AclOperation.DESCRIBE_TOKENS: "DescribeTokens"}
PERMISSION_NAMES = {AclPermissionType.ALLOW: "Allow", AclPermissionType.DENY: "Deny"}

_O = AclOperation
# AclEntry.supportedOperations: what each resource type's authorized-operations bit field covers.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (_O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER, _O.DESCRIBE_CONFIGS,
                         _O.ALTER_CONFIGS),
    ResourceType.GROUP: (_O.READ, _O.DESCRIBE, _O.DELETE),
    ResourceType.CLUSTER: (_O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS, _O.IDEMPOTENT_WRITE,
                           _O.ALTER, _O.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (_O.DESCRIBE, _O.WRITE),
    ResourceType.DELEGATION_TOKEN: (_O.DESCRIBE,),
    ResourceType.USER: (_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS),
}
# AclAuthorizer.allowAclExists: an allowed READ, WRITE, DELETE or ALTER implies DESCRIBE, an
# allowed ALTER_CONFIGS implies DESCRIBE_CONFIGS.
IMPLIED_BY: dict[AclOperation, tuple[AclOperation, ...]] = {
    _O.DESCRIBE: (_O.DESCRIBE, _O.READ, _O.WRITE, _O.DELETE, _O.ALTER),
    _O.DESCRIBE_CONFIGS: (_O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS),
}


@dataclass(frozen=True, order=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL


@dataclass(frozen=True, order=True)
class AccessControlEntry:
    principal: str          # "User:alice", "User:*"
    host: str               # "*" or an address
    operation: AclOperation
    permission_type: AclPermissionType


@dataclass(frozen=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True)
class AclBindingFilter:
    """None for a name, principal or host matches any; ANY for an enum matches any."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    def matches(self, b: AclBinding) -> bool:
        return self.matches_pattern(b.pattern) and self.matches_entry(b.entry)

    def matches_pattern(self, p: ResourcePattern) -> bool:
        """ResourcePatternFilter.matches: MATCH finds the patterns that would apply to the named
        resource (itself, the `*` wildcard, prefixes of it); ANY, a pattern of that exact name."""
        if self.resource_type != ResourceType.ANY and self.resource_type != p.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != p.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, PatternType.LITERAL, PatternType.PREFIXED):
            return self.name == p.name
        if p.pattern_type == PatternType.LITERAL:   # MATCH
            return self.name == p.name or p.name == WILDCARD_RESOURCE
        return p.pattern_type == PatternType.PREFIXED and self.name.startswith(p.name)

    def matches_entry(self, e: AccessControlEntry) -> bool:
        return ((self.principal is None or self.principal == e.principal)
                and (self.host is None or self.host == e.host)
                and (self.operation == AclOperation.ANY or self.operation == e.operation)
                and (self.permission_type == AclPermissionType.ANY or self.permission_type == e.permission_type))


def enum_or_unknown(cls: type[IntEnum], code: int) -> IntEnum:
    """fromCode: an unknown code is UNKNOWN (0), as Kafka's enums read them."""
    try:
        return cls(code)
    except ValueError:
        return cls(0)
