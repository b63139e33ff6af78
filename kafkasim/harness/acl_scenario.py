"""A scenario's `[[acls]]` tables (see acl_world.py for the keys and what the run does with
them): parsed and checked before anything runs, a mistake naming its key."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kafkasim.broker.request_context import KafkaPrincipal
from kafkasim.broker.security.acl_types import (
    OPERATION_NAMES,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kafkasim.broker.security.authorizer import AUTHORIZER_CLASS

RESOURCE_TYPES = {"topic": ResourceType.TOPIC, "group": ResourceType.GROUP, "cluster": ResourceType.CLUSTER,
                  "transactional_id": ResourceType.TRANSACTIONAL_ID}
OPERATIONS = {name.lower(): op for op, name in OPERATION_NAMES.items()} | {
    "cluster_action": AclOperation.CLUSTER_ACTION, "describe_configs": AclOperation.DESCRIBE_CONFIGS,
    "alter_configs": AclOperation.ALTER_CONFIGS, "idempotent_write": AclOperation.IDEMPOTENT_WRITE}
PATTERNS = {"literal": PatternType.LITERAL, "prefixed": PatternType.PREFIXED}
PERMISSIONS = {"allow": AclPermissionType.ALLOW, "deny": AclPermissionType.DENY}
KEYS = {"principal", "host", "resource_type", "name", "pattern", "operation", "permission", "from_ms", "until_ms"}
ANONYMOUS = "User:ANONYMOUS"


@dataclass(frozen=True)
class AclSpec:
    binding: AclBinding
    from_ms: float = 0.0
    until_ms: float | None = None

    def describe(self) -> dict[str, Any]:
        """The `[[acls]]` table this spec parses from (shrink's dump writes it back)."""
        b = self.binding
        out: dict[str, Any] = {
            "principal": b.entry.principal, "host": b.entry.host,
            "resource_type": _name_of(RESOURCE_TYPES, b.pattern.resource_type), "name": b.pattern.name,
            "pattern": _name_of(PATTERNS, b.pattern.pattern_type),
            "operation": _name_of(OPERATIONS, b.entry.operation),
            "permission": _name_of(PERMISSIONS, b.entry.permission_type), "from_ms": self.from_ms}
        if self.until_ms is not None:
            out["until_ms"] = self.until_ms
        return out


def _name_of(table: dict[str, Any], value: Any) -> str:
    return next(k for k, v in table.items() if v == value)


class AclSpecError(ValueError):
    pass


def parse_acls(raw: Any, broker_config: dict[str, Any]) -> list[AclSpec]:
    """`[[acls]]` tables -> specs; a mistake is an AclSpecError naming the key."""
    if not isinstance(raw, list):
        raise AclSpecError("key 'acls': expected an array of tables [[acls]]")
    if raw and broker_config.get("authorizer.class.name") != AUTHORIZER_CLASS:
        raise AclSpecError(f"key 'acls': needs \"authorizer.class.name\" = \"{AUTHORIZER_CLASS}\" under "
                           "[cluster.config] (without an authorizer no ACL is enforced)")
    return [_spec(i, t) for i, t in enumerate(raw)]


def _choice(i: int, t: dict[str, Any], key: str, table: dict[str, Any], default: str | None = None) -> Any:
    value = t.get(key, default)
    if not isinstance(value, str) or value.lower() not in table:
        raise AclSpecError(f"key 'acls[{i}].{key}': expected one of {sorted(table)}, got {value!r}")
    return table[value.lower()]


def _spec(i: int, t: Any) -> AclSpec:
    if not isinstance(t, dict):
        raise AclSpecError(f"key 'acls[{i}]': expected a table")
    unknown = sorted(set(t) - KEYS)
    if unknown:
        raise AclSpecError(f"key 'acls[{i}].{unknown[0]}': unknown key (known: {sorted(KEYS)})")
    principal, host, name = t.get("principal", ANONYMOUS), t.get("host", "*"), t.get("name")
    for key, value in (("principal", principal), ("host", host), ("name", name)):
        if not isinstance(value, str) or not value:
            raise AclSpecError(f"key 'acls[{i}].{key}': expected a non-empty string, got {value!r}")
    try:
        KafkaPrincipal.parse(principal)
    except ValueError:
        raise AclSpecError(f"key 'acls[{i}].principal': expected TYPE:NAME (User:alice), got {principal!r}") \
            from None
    rtype = _choice(i, t, "resource_type", RESOURCE_TYPES)
    if rtype == ResourceType.CLUSTER and name != "kafka-cluster":
        raise AclSpecError(f"key 'acls[{i}].name': the cluster is named 'kafka-cluster', got {name!r}")
    from_ms, until_ms = t.get("from_ms", 0), t.get("until_ms")
    if not isinstance(from_ms, (int, float)) or from_ms < 0:
        raise AclSpecError(f"key 'acls[{i}].from_ms': expected a time >= 0 in milliseconds, got {from_ms!r}")
    if until_ms is not None and (not isinstance(until_ms, (int, float)) or until_ms <= from_ms):
        raise AclSpecError(f"key 'acls[{i}].until_ms': expected a time after from_ms, got {until_ms!r}")
    entry = AccessControlEntry(principal, host, _choice(i, t, "operation", OPERATIONS),
                               _choice(i, t, "permission", PERMISSIONS))
    pattern = ResourcePattern(rtype, str(name), _choice(i, t, "pattern", PATTERNS, "literal"))
    return AclSpec(AclBinding(pattern, entry), float(from_ms), None if until_ms is None else float(until_ms))
