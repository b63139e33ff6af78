"""ACL znodes and their change notifications, as Kafka's AclAuthorizer keeps them in ZooKeeper
(ZkAclStore, ZkAclChangeStore; layout checked against Kafka 3.9.1 with `realkafka zk`):

  /kafka-acl/<ResourceType>/<name>                        literal patterns (name may be `*`)
  /kafka-acl-extended/prefixed/<ResourceType>/<prefix>    prefixed patterns
    data: {"acls":[{"principal":"User:alice","permissionType":"Allow","host":"*",
                    "operation":"Read"}, ...],"version":1}
    ResourceType as SecurityUtils.resourceTypeName ("Topic", "TransactionalId"); a pattern whose
    last ACL goes is deleted; the <ResourceType> parents are created at startup.
  /kafka-acl-changes/acl_changes_<10-digit seq>           "TOPIC:orders" (ResourceType's enum
                                                          name, ':', the literal name)
  /kafka-acl-extended-changes/acl_changes_<seq>           {"version":1,"resourceType":"TOPIC",
                                                          "name":"ord","patternType":"PREFIXED"}
    persistent sequential, written after every change; each broker re-reads the pattern named.

This module is bytes and paths (and the reads and conditional writes that use them); the cache
and the semantics are the authorizer's (kafkasim.broker.security.authorizer).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from kafkasim.broker.zk.zookeeper_client import StateChangeHandler, ZooKeeperClient
from kafkasim.runtime.api import (
    BadVersionError,
    CoordinationError,
    NetworkError,
    NodeExistsError,
    NodeRuntime,
    NoNodeError,
    NotEmptyError,
    RuntimeTimeout,
    WatchEvent,
    ZkClient,
)

LITERAL_ROOT = "/kafka-acl"
PREFIXED_ROOT = "/kafka-acl-extended/prefixed"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
# ZooKeeper's resource type names, in the order Kafka creates the parents.
RESOURCE_TYPES = ("Cluster", "DelegationToken", "Group", "Topic", "TransactionalId", "User")
ENUM_NAMES = {"Cluster": "CLUSTER", "DelegationToken": "DELEGATION_TOKEN", "Group": "GROUP", "Topic": "TOPIC",
              "TransactionalId": "TRANSACTIONAL_ID", "User": "USER"}
ZK_NAMES = {v: k for k, v in ENUM_NAMES.items()}
LITERAL, PREFIXED = "LITERAL", "PREFIXED"

# One stored ACL: (principal, permissionType, host, operation) with Kafka's names.
StoredAcl = tuple[str, str, str, str]
# A pattern as stored: (ZooKeeper resource type name, name, LITERAL | PREFIXED).
StoredPattern = tuple[str, str, str]


def _dump(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def resource_path(pattern: StoredPattern) -> str:
    rtype, name, kind = pattern
    return f"{LITERAL_ROOT if kind == LITERAL else PREFIXED_ROOT}/{rtype}/{name}"


def acls_json(acls: list[StoredAcl]) -> bytes:
    return _dump({"acls": [{"principal": p, "permissionType": perm, "host": h, "operation": op}
                           for p, perm, h, op in acls], "version": 1})


def parse_acls(data: bytes) -> list[StoredAcl]:
    if not data:
        return []
    doc = json.loads(data)
    return [(str(a["principal"]), str(a["permissionType"]), str(a["host"]), str(a["operation"]))
            for a in doc.get("acls") or []]


def change_path_and_data(pattern: StoredPattern) -> tuple[str, bytes]:
    rtype, name, kind = pattern
    if kind == LITERAL:
        return LITERAL_CHANGES, f"{ENUM_NAMES[rtype]}:{name}".encode()
    return EXTENDED_CHANGES, _dump({"version": 1, "resourceType": ENUM_NAMES[rtype], "name": name,
                                    "patternType": kind})


def parse_change(path: str, data: bytes) -> StoredPattern | None:
    """The pattern a notification names (None: not one this broker can read)."""
    try:
        if path == LITERAL_CHANGES:
            enum_name, _, name = data.decode().partition(":")
            return ZK_NAMES[enum_name], name, LITERAL
        doc = json.loads(data)
        return ZK_NAMES[doc["resourceType"]], str(doc["name"]), str(doc["patternType"])
    except (KeyError, ValueError, UnicodeDecodeError):
        return None


class ZkAclStore:
    """Reads and conditional writes of the ACL znodes (KafkaZkClient's ACL half)."""

    def __init__(self, zk: ZkClient) -> None:
        self.zk = zk

    async def create_paths(self) -> None:
        """KafkaZkClient.createAclPaths: every parent, both change paths."""
        paths = [f"{root}/{t}" for root in (LITERAL_ROOT, PREFIXED_ROOT) for t in RESOURCE_TYPES]
        for path in [*paths, LITERAL_CHANGES, EXTENDED_CHANGES]:
            try:
                await self.zk.create(path, b"", makepath=True)
            except NodeExistsError:
                pass

    async def children(self, path: str) -> list[str]:
        try:
            return sorted(await self.zk.get_children(path))
        except NoNodeError:
            return []

    async def read_all(self) -> dict[StoredPattern, list[StoredAcl]]:
        out: dict[StoredPattern, list[StoredAcl]] = {}
        for root, kind in ((LITERAL_ROOT, LITERAL), (PREFIXED_ROOT, PREFIXED)):
            for rtype in RESOURCE_TYPES:
                for name in await self.children(f"{root}/{rtype}"):
                    acls, _ = await self.read((rtype, name, kind))
                    if acls:
                        out[(rtype, name, kind)] = acls
        return out

    async def read(self, pattern: StoredPattern) -> tuple[list[StoredAcl], int]:
        """The pattern's ACLs and the znode's version (-1: no znode)."""
        try:
            data, stat = await self.zk.get(resource_path(pattern))
        except NoNodeError:
            return [], -1
        return parse_acls(data), stat.version

    async def conditional_write(self, pattern: StoredPattern, acls: list[StoredAcl], version: int) -> bool:
        """Write (create when version is -1, delete when acls is empty) if the znode is still
        at `version`; False when another writer got there first (the caller re-reads)."""
        path = resource_path(pattern)
        try:
            if not acls:
                if version >= 0:
                    await self.zk.delete(path, version)
            elif version < 0:
                await self.zk.create(path, acls_json(acls), makepath=True)
            else:
                await self.zk.set(path, acls_json(acls), version)
        except (BadVersionError, NodeExistsError, NoNodeError, NotEmptyError):
            return False
        return True

    async def notify(self, pattern: StoredPattern) -> None:
        path, data = change_path_and_data(pattern)
        await self.zk.create(f"{path}/{CHANGE_PREFIX}", data, sequential=True, makepath=True)


class ChangeNotificationListener:
    """Kafka's ZkNodeChangeNotificationListener: watch a sequential-notification path, hand each
    notification newer than the last one processed to `on_change` (its data), in order. Watches
    are one-shot: every read sets the next. After a new ZooKeeper session the path is read
    again, as the watch went with the old one."""

    def __init__(self, rt: NodeRuntime, zk: ZooKeeperClient, path: str, prefix: str,
                 on_change: Callable[[bytes], Awaitable[None]]) -> None:
        self.rt, self.zk, self.path, self.prefix, self.on_change = rt, zk, path, prefix, on_change
        self.last_seq = -1
        self._running = False
        self._again = False
        zk.register_state_change_handler(StateChangeHandler(f"change-notification:{path}",
                                                            after_initializing_session=self.after_new_session))

    async def after_new_session(self) -> None:
        await self.process()

    def _watch(self, event: WatchEvent) -> None:
        if event.type != "session":
            self.rt.spawn(self.process(), name=f"change notifications {self.path}")

    async def process(self, children: list[str] | None = None) -> None:
        """`children`: the path's children as a read the caller made (with this listener's
        watch) already returned them; None: read them."""
        if self._running:   # one pass at a time; a change during a pass asks for another
            self._again = True
            return
        self._running = True
        try:
            self._again = True
            while self._again:
                self._again = False
                await self._process_once(children)
                children = None
        except (NetworkError, CoordinationError, RuntimeTimeout):
            pass   # ZooKeeper unreachable: the session handler reads again once it is back
        finally:
            self._running = False

    async def _process_once(self, children: list[str] | None) -> None:
        if children is None:
            try:
                children = await self.zk.get_children(self.path, self._watch)
            except NoNodeError:
                return
        for child in sorted(children):
            if not child.startswith(self.prefix) or not child[len(self.prefix):].isdigit():
                continue
            seq = int(child[len(self.prefix):])
            if seq <= self.last_seq:
                continue
            try:
                data, _ = await self.zk.get(f"{self.path}/{child}")
            except NoNodeError:
                data = b""
            if data:
                await self.on_change(data)
            self.last_seq = seq
