"""ACLs in the simulated world: a scenario's `[[acls]]`, their changes during the run, and the
check that no read or write the ACLs forbade ever succeeded.

    [cluster.config]
    "authorizer.class.name" = "kafka.security.authorizer.AclAuthorizer"

    [[acls]]
    principal = "User:ANONYMOUS"   # default; workload clients speak PLAINTEXT, so this is who they are
    host = "consumer-0"            # the client's address: its node name (producer-N, consumer-N); default "*"
    resource_type = "topic"        # topic | group | cluster | transactional_id
    name = "orders"                # "*" for every resource of the type; "kafka-cluster" for the cluster
    pattern = "literal"            # literal | prefixed
    operation = "read"             # read, write, create, delete, alter, describe, cluster_action,
                                   # describe_configs, alter_configs, idempotent_write, all
    permission = "allow"           # allow | deny
    from_ms = 0                    # 0: written to ZooKeeper before the workload starts (as
                                   # kafka-acls --authorizer-properties does); later: CreateAcls then
    until_ms = 20000               # optional: DeleteAcls then (the ACL change during the run)

The brokers, the harness's admin node and the liveness probe are trusted: each host gets ALL on
every resource type (the scenario's ACLs are about the workload's clients).

The check (`acl`): a produce acknowledged to, or a record polled by, a client is a violation when
the ACLs every broker held at any moment of the request's life — from its send (a poll: its
answer's time minus the consumer's request timeout) to its answer — all forbade it. The brokers'
ACL caches are read back from the trace (`acls_changed`, `acl_cache_started`), so an ACL change a
broker has not heard of yet (its notification not yet delivered) is judged by what it knew.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kafkasim.broker.security.acl_types import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kafkasim.broker.security.authorizer import AclAuthorizer, AuthorizerConfig, decide
from kafkasim.broker.zk.zookeeper_client import ZooKeeperClient
from kafkasim.client.cluster import ClientCluster
from kafkasim.harness.acl_scenario import ANONYMOUS, AclSpec
from kafkasim.harness.checkers import Anomaly, CheckResult
from kafkasim.protocol.messages.create_acls import CreateAclsRequest
from kafkasim.protocol.messages.delete_acls import DeleteAclsRequest
from kafkasim.runtime.api import NetworkError, NodeRuntime, RuntimeTimeout


def trusted_bindings(hosts: list[str]) -> list[AclBinding]:
    """ALL on every resource type for the brokers and the harness's own clients."""
    out = []
    for host in hosts:
        entry = AccessControlEntry(ANONYMOUS, host, AclOperation.ALL, AclPermissionType.ALLOW)
        for rtype, name in ((ResourceType.CLUSTER, "kafka-cluster"), (ResourceType.TOPIC, "*"),
                            (ResourceType.GROUP, "*"), (ResourceType.TRANSACTIONAL_ID, "*")):
            out.append(AclBinding(ResourcePattern(rtype, name, PatternType.LITERAL), entry))
    return out


async def seed_acls(rt: NodeRuntime, specs: list[AclSpec], trusted_hosts: list[str]) -> None:
    """The ACLs in force from the start, written to ZooKeeper as AclAuthorizer writes them
    (what `kafka-acls --authorizer-properties zookeeper.connect=...` does)."""
    zk = ZooKeeperClient(rt, 30000)
    await zk.connect()
    writer = AclAuthorizer(rt, zk, AuthorizerConfig(frozenset(), False))
    await writer.store.create_paths()
    await writer.create_acls([*trusted_bindings(trusted_hosts), *(s.binding for s in specs if s.from_ms == 0)])
    await zk.close()


async def run_acl_changes(rt: NodeRuntime, bootstrap: str, specs: list[AclSpec]) -> None:
    """The later grants (CreateAcls) and revocations (DeleteAcls), in time order, from the
    trusted admin host; each retried until a broker answers."""
    events = sorted([(s.from_ms, 0, i) for i, s in enumerate(specs) if s.from_ms > 0]
                    + [(s.until_ms, 1, i) for i, s in enumerate(specs) if s.until_ms is not None])
    cluster = ClientCluster(rt, bootstrap, "acl-admin")
    for at_ms, kind, i in events:
        await rt.sleep(max(0.0, at_ms - rt.monotonic_ms()))
        b = specs[i].binding
        body: Any = CreateAclsRequest(creations=[_creation(b)]) if kind == 0 else \
            DeleteAclsRequest(filters=[_exact_filter(b)])
        for _ in range(100):
            try:
                conn = await cluster.any_connection()
                await conn.send(body, 1, 5000)   # v1: the first with pattern types
                break
            except (NetworkError, RuntimeTimeout, KeyError):
                await rt.sleep(200)
        rt.trace("acl_change", action="create" if kind == 0 else "delete", acl=_describe(b))
    cluster.close()


def _creation(b: AclBinding) -> Any:
    return CreateAclsRequest.AclCreation(
        resource_type=int(b.pattern.resource_type), resource_name=b.pattern.name,
        resource_pattern_type=int(b.pattern.pattern_type), principal=b.entry.principal, host=b.entry.host,
        operation=int(b.entry.operation), permission_type=int(b.entry.permission_type))


def _exact_filter(b: AclBinding) -> Any:
    return DeleteAclsRequest.DeleteAclsFilter(
        resource_type_filter=int(b.pattern.resource_type), resource_name_filter=b.pattern.name,
        pattern_type_filter=int(b.pattern.pattern_type), principal_filter=b.entry.principal,
        host_filter=b.entry.host, operation=int(b.entry.operation), permission_type=int(b.entry.permission_type))


def _describe(b: AclBinding) -> str:
    e, p = b.entry, b.pattern
    return (f"{e.permission_type.name} {e.principal}@{e.host} {e.operation.name} "
            f"{p.resource_type.name}:{p.pattern_type.name}:{p.name}")


# ---------------------------------------------------------------- the check
@dataclass
class _CacheHistory:
    """One broker's ACL cache over time, rebuilt from its trace events."""

    states: list[tuple[float, dict[ResourcePattern, frozenset[AccessControlEntry]]]]

    def during(self, start: float, end: float) -> list[dict[ResourcePattern, frozenset[AccessControlEntry]]]:
        """Every state in force at some moment of [start, end]."""
        out = []
        for i, (t, state) in enumerate(self.states):
            nxt = self.states[i + 1][0] if i + 1 < len(self.states) else float("inf")
            if t <= end and nxt >= start:
                out.append(state)
        return out


def broker_acl_histories(trace_path: str) -> dict[str, _CacheHistory]:
    out: dict[str, _CacheHistory] = {}
    with open(trace_path) as f:
        for line in f:
            if '"acl' not in line:
                continue
            ev = json.loads(line)
            kind, node, t = ev.get("ev"), ev.get("node"), float(ev.get("t", 0.0))
            if kind == "acl_cache_started":
                out.setdefault(node, _CacheHistory([])).states.append((t, {}))
            elif kind == "acls_changed" and node in out:   # a broker's (not a harness writer's)
                hist = out[node]
                state = dict(hist.states[-1][1])
                pattern = ResourcePattern(ResourceType(ev["resource_type"]), ev["name"],
                                          PatternType(ev["pattern_type"]))
                entries = frozenset(AccessControlEntry(p, h, AclOperation(o), AclPermissionType(m))
                                    for p, h, o, m in ev["acls"])
                if entries:
                    state[pattern] = entries
                else:
                    state.pop(pattern, None)
                hist.states.append((t, state))
    return out


def _allowed_somewhere(histories: dict[str, _CacheHistory], config: AuthorizerConfig, host: str,
                       op: AclOperation, topic: str, start: float, end: float) -> bool:
    return any(decide(state, config, ANONYMOUS, host, op, ResourceType.TOPIC, topic)
               for hist in histories.values() for state in hist.during(start, end))


def check_acls(trace_path: str, history: Any, topic: str, broker_config: dict[str, Any],
               poll_window_ms: float) -> CheckResult:
    """`acl`: acknowledged writes and polled records the brokers' ACLs forbade throughout."""
    histories = broker_acl_histories(trace_path)
    config = AuthorizerConfig.parse(broker_config.get("super.users"),
                                    str(broker_config.get("allow.everyone.if.no.acl.found", "false")).lower()
                                    == "true")
    anomalies = []
    for s in history.sends:
        if s.ok and not _allowed_somewhere(histories, config, s.process, AclOperation.WRITE, topic,
                                           s.invoke_ms, s.complete_ms):
            anomalies.append(Anomaly("acl-forbidden-write", {"process": s.process, "value": s.value,
                                                             "invoke_ms": s.invoke_ms, "complete_ms": s.complete_ms}))
    for p in history.polls:
        if not _allowed_somewhere(histories, config, p.process, AclOperation.READ, p.topic,
                                  p.at_ms - poll_window_ms, p.at_ms):
            anomalies.append(Anomaly("acl-forbidden-read", {"process": p.process, "topic": p.topic,
                                                            "partition": p.partition, "offset": p.offset,
                                                            "at_ms": p.at_ms}))
    return CheckResult("acl", anomalies)


# ---------------------------------------------------------------- the run's hooks
async def seed_then(rt: NodeRuntime, specs: list[AclSpec], trusted_hosts: list[str], then: Any) -> Any:
    """Seed the ACLs, then run `then` (the admin's topic creation, which needs them)."""
    await seed_acls(rt, specs, trusted_hosts)
    return await then


def acl_results(specs: list[AclSpec], broker_config: dict[str, Any], topic: str, history: Any, trace_out: Any,
                poll_window_ms: float) -> list[CheckResult]:
    """The `acl` check of a scenario with [[acls]] (none without)."""
    if not specs:
        return []
    trace_out.flush()
    return [check_acls(trace_out.name, history, topic, broker_config, poll_window_ms)]
