"""The ZooKeeper data model: znodes, versions, ephemeral owners, sequential names, one-shot
watches, multi. Pure state machine, no I/O and no time: SimZooKeeper serves it over
SimNetwork, and the real world's embedded store (`kafkasim serve` without `--zookeeper`) serves
it in process and keeps it on disk (a WAL of its operations replayed onto a snapshot:
zkstore_log.py has the bytes, real/zk_durable.py the files). Semantics follow ZooKeeper 3.8 as kazoo exposes them:

- create fails with NodeExists / NoNode (missing parent, unless makepath) /
  NoChildrenForEphemerals; sequential names append the parent's cversion as %010d;
- set / delete with version -1 are unconditional, otherwise BadVersion on mismatch;
- delete of a node with children is NotEmpty (recursive delete removes the subtree);
- watches are one-shot: a data watch (set by get or exists) fires on changed / deleted /
  created; a child watch (set by get_children) fires on "child" when the children change, and
  on "deleted" when the node goes;
- closing or expiring a session deletes its ephemeral znodes (firing watches) and drops the
  watches it registered.
Operations return the watch firings they caused as a list of `Firing`s; the caller delivers
them to the watchers' sessions, each in its own way (latency, network path).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kafkasim.runtime.api import (
    BadVersionError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    Watcher,
    WatchEvent,
    ZOp,
    ZStat,
)


@dataclass
class ZNode:
    data: bytes
    czxid: int
    mzxid: int
    version: int = 0
    cversion: int = 0
    ephemeral_owner: int = 0
    children: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class Firing:
    session_id: int
    watcher: Watcher
    event: WatchEvent


def _parent(path: str) -> str:
    p = path.rsplit("/", 1)[0]
    return p or "/"


def _copy_node(n: ZNode) -> ZNode:
    return ZNode(n.data, n.czxid, n.mzxid, n.version, n.cversion, n.ephemeral_owner, set(n.children))


def _check_path(path: str) -> None:
    if not path.startswith("/") or (path != "/" and path.endswith("/")) or "//" in path:
        raise ValueError(f"invalid znode path {path!r}")


class ZkStore:
    def __init__(self) -> None:
        self.nodes: dict[str, ZNode] = {"/": ZNode(b"", 0, 0)}
        self.zxid = 0
        self.sessions: dict[int, set[str]] = {}  # session id -> its ephemeral paths
        self._next_session = 0x100
        self._data_watches: dict[str, list[tuple[int, Watcher]]] = {}
        self._child_watches: dict[str, list[tuple[int, Watcher]]] = {}

    # -- restoring from disk (runtime/zkstore_log.py)
    @property
    def last_session_id(self) -> int:
        return self._next_session

    def restore_session_counter(self, last: int) -> None:
        """Session ids continue after every id a previous process handed out."""
        self._next_session = max(self._next_session, last)

    def restore_node(self, path: str, node: ZNode) -> None:
        """Put back a snapshotted znode; its parent must be restored first (KeyError if not)."""
        _check_path(path)
        self.nodes[_parent(path)].children.add(path.rsplit("/", 1)[1])
        self.nodes[path] = node
        if node.ephemeral_owner:
            self.sessions.setdefault(node.ephemeral_owner, set()).add(path)
            self.restore_session_counter(node.ephemeral_owner)

    # -- sessions
    def open_session(self) -> int:
        self._next_session += 1
        self.sessions[self._next_session] = set()
        return self._next_session

    def close_session(self, sid: int) -> list[Firing]:
        firings: list[Firing] = []
        for path in sorted(self.sessions.pop(sid, set()), reverse=True):
            if path in self.nodes:
                firings += self._remove(path)
        for table in (self._data_watches, self._child_watches):
            for path in list(table):
                table[path] = [w for w in table[path] if w[0] != sid]
                if not table[path]:
                    del table[path]
        return [f for f in firings if f.session_id != sid]

    # -- reads
    def stat(self, path: str) -> ZStat:
        n = self.nodes[path]
        return ZStat(n.czxid, n.mzxid, n.version, n.cversion, n.ephemeral_owner, len(n.children), len(n.data))

    def get(self, sid: int, path: str, watch: Watcher | None) -> tuple[bytes, ZStat]:
        if path not in self.nodes:
            raise NoNodeError(path)
        if watch is not None:
            self._add_watch(self._data_watches, path, sid, watch)
        return self.nodes[path].data, self.stat(path)

    def exists(self, sid: int, path: str, watch: Watcher | None) -> ZStat | None:
        _check_path(path)
        if watch is not None:
            self._add_watch(self._data_watches, path, sid, watch)
        return self.stat(path) if path in self.nodes else None

    def get_children(self, sid: int, path: str, watch: Watcher | None) -> list[str]:
        if path not in self.nodes:
            raise NoNodeError(path)
        if watch is not None:
            self._add_watch(self._child_watches, path, sid, watch)
        return sorted(self.nodes[path].children)

    @staticmethod
    def _add_watch(table: dict[str, list[tuple[int, Watcher]]], path: str, sid: int, watch: Watcher) -> None:
        """One registration per (session, watcher, path, kind), as ZooKeeper keeps its watches
        in sets: setting the same watch again before it fires does not make it fire twice."""
        entries = table.setdefault(path, [])
        if (sid, watch) not in entries:
            entries.append((sid, watch))

    # -- writes
    def create(self, sid: int, path: str, data: bytes, ephemeral: bool, sequential: bool,
               makepath: bool) -> tuple[str, list[Firing]]:
        _check_path(path)
        parent = _parent(path)
        firings: list[Firing] = []
        if parent not in self.nodes:
            if not makepath:
                raise NoNodeError(parent)
            if parent != "/":
                firings += self.create(sid, parent, b"", False, False, True)[1]
        pnode = self.nodes[parent]
        if pnode.ephemeral_owner:
            raise NoChildrenForEphemeralsError(parent)
        if sequential:
            path = f"{path}{pnode.cversion:010d}"
        if path in self.nodes:
            raise NodeExistsError(path)
        self.zxid += 1
        self.nodes[path] = ZNode(bytes(data), self.zxid, self.zxid, ephemeral_owner=sid if ephemeral else 0)
        if ephemeral:
            self.sessions.setdefault(sid, set()).add(path)
        pnode.children.add(path.rsplit("/", 1)[1])
        pnode.cversion += 1
        firings += self._fire(self._data_watches, path, "created")
        firings += self._fire(self._child_watches, parent, "child")
        return path, firings

    def set(self, path: str, data: bytes, version: int) -> tuple[ZStat, list[Firing]]:
        n = self.nodes.get(path)
        if n is None:
            raise NoNodeError(path)
        if version != -1 and version != n.version:
            raise BadVersionError(f"{path}: version {version} != {n.version}")
        self.zxid += 1
        n.data, n.mzxid, n.version = bytes(data), self.zxid, n.version + 1
        return self.stat(path), self._fire(self._data_watches, path, "changed")

    def delete(self, path: str, version: int, recursive: bool) -> list[Firing]:
        n = self.nodes.get(path)
        if n is None or path == "/":
            raise NoNodeError(path)
        if version != -1 and version != n.version:
            raise BadVersionError(f"{path}: version {version} != {n.version}")
        if n.children and not recursive:
            raise NotEmptyError(path)
        return self._remove(path)

    def _remove(self, path: str) -> list[Firing]:
        firings: list[Firing] = []
        n = self.nodes[path]
        for child in sorted(n.children):
            firings += self._remove(f"{path.rstrip('/')}/{child}")
        del self.nodes[path]
        if n.ephemeral_owner:
            self.sessions.get(n.ephemeral_owner, set()).discard(path)
        parent = _parent(path)
        pnode = self.nodes[parent]
        pnode.children.discard(path.rsplit("/", 1)[1])
        pnode.cversion += 1
        self.zxid += 1
        firings += self._fire(self._data_watches, path, "deleted")
        firings += self._fire(self._child_watches, path, "deleted")
        firings += self._fire(self._child_watches, parent, "child")
        return firings

    def multi(self, sid: int, ops: list[ZOp]) -> tuple[list[Any], list[Firing]]:
        """All or nothing: apply on the live state, roll back from a snapshot on failure."""
        # What deepcopy made, built directly (a ZNode's bytes are immutable, its children set is
        # not): deepcopy's generic walk of the whole tree was ~4% of a run with ISR churn.
        saved = ({path: _copy_node(n) for path, n in self.nodes.items()}, self.zxid,
                 {sid: set(paths) for sid, paths in self.sessions.items()},
                 {k: list(v) for k, v in self._data_watches.items()},
                 {k: list(v) for k, v in self._child_watches.items()})
        results: list[Any] = []
        firings: list[Firing] = []
        try:
            for op in ops:
                if op.kind == "create":
                    p, f = self.create(sid, op.path, op.data, op.ephemeral, op.sequential, False)
                    results.append(p)
                elif op.kind == "set":
                    st, f = self.set(op.path, op.data, op.version)
                    results.append(st)
                elif op.kind == "delete":
                    f = self.delete(op.path, op.version, False)
                    results.append(True)
                elif op.kind == "check":
                    n = self.nodes.get(op.path)
                    if n is None:
                        raise NoNodeError(op.path)
                    if op.version != -1 and n.version != op.version:
                        raise BadVersionError(op.path)
                    f = []
                    results.append(True)
                else:
                    raise ValueError(f"unknown multi op {op.kind!r}")
                firings += f
        except Exception:
            self.nodes, self.zxid, self.sessions, self._data_watches, self._child_watches = saved
            raise
        return results, firings

    @staticmethod
    def _fire(table: dict[str, list[tuple[int, Watcher]]], path: str, kind: str) -> list[Firing]:
        watchers = table.pop(path, [])
        return [Firing(sid, w, WatchEvent(kind, path)) for sid, w in watchers]
