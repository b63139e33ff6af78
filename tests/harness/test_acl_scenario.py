"""`[[acls]]` in a scenario: parsed into Kafka's bindings, mistakes refused naming the key."""

from __future__ import annotations

import pytest

from kafkasim.broker.security.acl_types import AclOperation, AclPermissionType, PatternType, ResourceType
from kafkasim.harness.scenario import ScenarioError, scenario_from_text

pytestmark = pytest.mark.unit

BASE = """
[scenario]
name = "acl-parse"
[cluster]
brokers = 1
[cluster.config]
"authorizer.class.name" = "kafka.security.authorizer.AclAuthorizer"
[[topics]]
name = "orders"
"""


def acl(**kw: object) -> str:
    fields = {"host": "consumer-0", "resource_type": "topic", "name": "orders", "operation": "read",
              "permission": "allow", **kw}
    return "[[acls]]\n" + "".join(f"{k} = {v!r}\n".replace("'", '"') for k, v in fields.items())


def test_acls_parse_into_bindings() -> None:
    s = scenario_from_text("a.toml", BASE + acl(until_ms=10000) + acl(name="ord", pattern="prefixed",
                                                                       operation="all", permission="deny",
                                                                       from_ms=5000))
    first, second = s.acls
    assert first.binding.entry.principal == "User:ANONYMOUS" and first.binding.entry.host == "consumer-0"
    assert (first.binding.pattern.resource_type, first.binding.pattern.pattern_type) == \
        (ResourceType.TOPIC, PatternType.LITERAL)
    assert (first.from_ms, first.until_ms) == (0.0, 10000.0)
    assert (second.binding.entry.operation, second.binding.entry.permission_type) == \
        (AclOperation.ALL, AclPermissionType.DENY)
    assert second.binding.pattern.pattern_type == PatternType.PREFIXED and second.from_ms == 5000.0


@pytest.mark.parametrize("extra, message", [
    (acl(operation="reed"), "key 'acls[0].operation': expected one of"),
    (acl(resource_type="cluster"), "key 'acls[0].name': the cluster is named 'kafka-cluster'"),
    (acl(principal="alice"), "key 'acls[0].principal': expected TYPE:NAME"),
    (acl(until_ms=0), "key 'acls[0].until_ms': expected a time after from_ms"),
    (acl(colour="red"), "key 'acls[0].colour': unknown key"),
])
def test_mistakes_are_refused_naming_the_key(extra: str, message: str) -> None:
    with pytest.raises(ScenarioError, match=message.replace("[", r"\[").replace("]", r"\]")):
        scenario_from_text("a.toml", BASE + extra)


def test_acls_need_the_authorizer() -> None:
    with pytest.raises(ScenarioError, match="needs \"authorizer.class.name\""):
        scenario_from_text("a.toml", BASE.replace('"authorizer.class.name" = '
                                                  '"kafka.security.authorizer.AclAuthorizer"', "") + acl())
