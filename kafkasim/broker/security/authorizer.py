"""AclAuthorizer: Kafka's ZooKeeper-mode authorizer (kafka.security.authorizer.AclAuthorizer).

Every broker keeps all ACLs in memory, loaded from ZooKeeper at startup and refreshed from the
change notifications (kafkasim.broker.zk.acl_store). A decision, as AclAuthorizer.authorizeAction:

  - a super user (`super.users`, ';'-separated principals) may do anything;
  - the ACLs that apply to a resource are its literal pattern's, the `*` wildcard's of its
    type, and every prefixed pattern its name starts with;
  - none apply: `allow.everyone.if.no.acl.found` decides (false by default: denied);
  - a DENY for the operation (or ALL) by the principal (or User:*) from the host (or *) wins;
  - else an ALLOW decides, where an allowed READ/WRITE/DELETE/ALTER implies DESCRIBE and an
    allowed ALTER_CONFIGS implies DESCRIBE_CONFIGS.

Create and delete write ZooKeeper first (a conditional write, retried when another broker got
there first), then the local cache, then the change notification for the others.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kafkasim.broker.request_context import RequestContext
from kafkasim.broker.security.acl_types import (
    IMPLIED_BY,
    OPERATION_NAMES,
    PERMISSION_NAMES,
    RESOURCE_TYPE_NAMES,
    SUPPORTED_OPERATIONS,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kafkasim.broker.zk import acl_store as S
from kafkasim.broker.zk.zookeeper_client import ZooKeeperClient
from kafkasim.runtime.api import NodeRuntime

_TYPE_OF_ZK = {v: k for k, v in RESOURCE_TYPE_NAMES.items()}
_OP_OF_NAME = {v: k for k, v in OPERATION_NAMES.items()}
_PERM_OF_NAME = {v: k for k, v in PERMISSION_NAMES.items()}
AUTHORIZER_CLASS = "kafka.security.authorizer.AclAuthorizer"


@dataclass(frozen=True)
class AuthorizerConfig:
    super_users: frozenset[str]
    allow_everyone_if_no_acl_found: bool

    @staticmethod
    def parse(super_users: str | None, allow_everyone: bool) -> AuthorizerConfig:
        users = frozenset(u.strip() for u in (super_users or "").split(";") if u.strip())
        return AuthorizerConfig(users, allow_everyone)


class AclAuthorizer:
    def __init__(self, rt: NodeRuntime, zk: ZooKeeperClient, config: AuthorizerConfig) -> None:
        self.rt, self.zk, self.config = rt, zk, config
        self.store = S.ZkAclStore(zk)
        self.cache: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        self.listeners = [S.ChangeNotificationListener(rt, zk, path, S.CHANGE_PREFIX, self._on_change)
                          for path in (S.LITERAL_CHANGES, S.EXTENDED_CHANGES)]

    async def start(self) -> None:
        """AclAuthorizer.configure + start: the paths, every ACL, then the notifications."""
        await self.store.create_paths()
        self.rt.trace("acl_cache_started")   # a fresh, empty cache (the simulated world's checker reads it)
        for stored, acls in (await self.store.read_all()).items():
            pattern = _pattern(stored)
            if pattern is not None:
                self._update(pattern, acls)
        for listener in self.listeners:
            await listener.process()

    # ---------------------------------------------------------------- decisions
    def authorize(self, ctx: RequestContext, op: AclOperation, rtype: ResourceType, name: str) -> bool:
        return decide(self.cache, self.config, str(ctx.principal), ctx.client_address, op, rtype, name)

    def authorized_operations(self, ctx: RequestContext, rtype: ResourceType, name: str) -> int:
        """The bit field of Metadata's and DescribeGroups' *_authorized_operations."""
        bits = 0
        for op in SUPPORTED_OPERATIONS[rtype]:
            if self.authorize(ctx, op, rtype, name):
                bits |= 1 << int(op)
        return bits

    def authorize_by_resource_type(self, ctx: RequestContext, op: AclOperation, rtype: ResourceType) -> bool:
        """Authorizer.authorizeByResourceType (InitProducerId without a transactional id): may
        the principal do `op` on *some* resource of the type? An ALLOW on a pattern that no DENY
        on a literal `*` or on a covering prefix cancels."""
        principal = str(ctx.principal)
        if principal in self.config.super_users:
            return True
        patterns = {p: e for p, e in self.cache.items() if p.resource_type == rtype}
        if not patterns:
            return self.config.allow_everyone_if_no_acl_found
        host = ctx.client_address
        denied = [p for p, e in patterns.items() if _exists([e], (op,), principal, host, AclPermissionType.DENY)]
        if any(p.name == WILDCARD_RESOURCE and p.pattern_type == PatternType.LITERAL for p in denied):
            return False
        for p, e in patterns.items():
            if not _exists([e], IMPLIED_BY.get(op, (op,)), principal, host, AclPermissionType.ALLOW):
                continue
            if not any(d.pattern_type == PatternType.PREFIXED and p.name.startswith(d.name) for d in denied):
                return True
        return False

    # ---------------------------------------------------------------- admin
    def acls(self, flt: AclBindingFilter) -> list[AclBinding]:
        return sorted(AclBinding(p, e) for p, entries in self.cache.items() if flt.matches_pattern(p)
                      for e in entries if flt.matches_entry(e))

    async def create_acls(self, bindings: Iterable[AclBinding]) -> None:
        by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for b in bindings:
            by_pattern.setdefault(b.pattern, set()).add(b.entry)
        for pattern, entries in sorted(by_pattern.items()):
            await self._modify(pattern, add=frozenset(entries))

    async def delete_acls(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        """Per filter, the bindings it deleted (AclAuthorizer.deleteAcls): a binding several
        filters match is the first one's."""
        matched: list[list[AclBinding]] = []
        seen: set[AclBinding] = set()
        for f in filters:
            matched.append([b for b in self.acls(f) if b not in seen])
            seen.update(matched[-1])
        by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for bindings in matched:
            for b in bindings:
                by_pattern.setdefault(b.pattern, set()).add(b.entry)
        for pattern, entries in sorted(by_pattern.items()):
            await self._modify(pattern, remove=frozenset(entries))
        return matched

    async def _modify(self, pattern: ResourcePattern, add: frozenset[AccessControlEntry] = frozenset(),
                      remove: frozenset[AccessControlEntry] = frozenset()) -> None:
        stored = _stored(pattern)
        while True:
            acls, version = await self.store.read(stored)
            old = frozenset(e for a in acls if (e := _entry(a)) is not None)
            new = (old - remove) | add
            if new == old:
                self._update(pattern, acls)
                return
            new_acls = [_stored_acl(e) for e in sorted(new)]
            if await self.store.conditional_write(stored, new_acls, version):
                self._update(pattern, new_acls)
                await self.store.notify(stored)
                return

    # ---------------------------------------------------------------- the cache
    async def _on_change(self, data: bytes) -> None:
        for path in (S.LITERAL_CHANGES, S.EXTENDED_CHANGES):
            stored = S.parse_change(path, data)
            if stored is not None:
                pattern = _pattern(stored)
                if pattern is not None:
                    acls, _ = await self.store.read(stored)
                    self._update(pattern, acls)
                return

    def _update(self, pattern: ResourcePattern, acls: list[S.StoredAcl]) -> None:
        entries = frozenset(e for a in acls if (e := _entry(a)) is not None)
        if self.cache.get(pattern, frozenset()) == entries:
            return
        if entries:
            self.cache[pattern] = entries
        else:
            self.cache.pop(pattern, None)
        self.rt.trace("acls_changed", resource_type=int(pattern.resource_type), name=pattern.name,
                      pattern_type=int(pattern.pattern_type),
                      acls=[[e.principal, e.host, int(e.operation), int(e.permission_type)] for e in sorted(entries)])


Cache = dict[ResourcePattern, frozenset[AccessControlEntry]]


def decide(cache: Cache, config: AuthorizerConfig, principal: str, host: str, op: AclOperation,
           rtype: ResourceType, name: str) -> bool:
    """AclAuthorizer.authorizeAction on a cache (also the simulated world's checker's judge)."""
    if principal in config.super_users:
        return True
    acls = _matching(cache, rtype, name)
    if not acls:
        return config.allow_everyone_if_no_acl_found
    if _exists(acls, (op,), principal, host, AclPermissionType.DENY):
        return False
    return _exists(acls, IMPLIED_BY.get(op, (op,)), principal, host, AclPermissionType.ALLOW)


def _matching(cache: Cache, rtype: ResourceType, name: str) -> list[frozenset[AccessControlEntry]]:
    """The literal pattern's ACLs, the type's `*` wildcard's, and every prefix's of the name."""
    out = []
    for pattern, entries in cache.items():
        if pattern.resource_type != rtype:
            continue
        if pattern.pattern_type == PatternType.LITERAL:
            if pattern.name == name or pattern.name == WILDCARD_RESOURCE:
                out.append(entries)
        elif name.startswith(pattern.name):
            out.append(entries)
    return out


def _exists(acls: list[frozenset[AccessControlEntry]], ops: tuple[AclOperation, ...], principal: str, host: str,
            permission: AclPermissionType) -> bool:
    """AclAuthorizer.matchingAclExists for any of `ops`."""
    for entries in acls:
        for e in entries:
            if (e.permission_type == permission and (e.operation in ops or e.operation == AclOperation.ALL)
                    and (e.principal == principal or e.principal == WILDCARD_PRINCIPAL)
                    and (e.host == host or e.host == WILDCARD_HOST)):
                return True
    return False


def _pattern(stored: S.StoredPattern) -> ResourcePattern | None:
    rtype = _TYPE_OF_ZK.get(stored[0])
    kind = PatternType.LITERAL if stored[2] == S.LITERAL else PatternType.PREFIXED if stored[2] == S.PREFIXED \
        else None
    return None if rtype is None or kind is None else ResourcePattern(rtype, stored[1], kind)


def _stored(p: ResourcePattern) -> S.StoredPattern:
    return RESOURCE_TYPE_NAMES[p.resource_type], p.name, S.LITERAL if p.pattern_type == PatternType.LITERAL \
        else S.PREFIXED


def _entry(a: S.StoredAcl) -> AccessControlEntry | None:
    principal, perm, host, op = a
    operation, permission = _OP_OF_NAME.get(op), _PERM_OF_NAME.get(perm)
    if operation is None or permission is None:
        return None
    return AccessControlEntry(principal, host, operation, permission)


def _stored_acl(e: AccessControlEntry) -> S.StoredAcl:
    return e.principal, PERMISSION_NAMES[e.permission_type], e.host, OPERATION_NAMES[e.operation]
