"""Coordination in the real world: a real ZooKeeper through kazoo, or an embedded in-process
store (the same ZkStore SimZooKeeper serves) for a single `kafkasim serve` without one.

kazoo runs its own threads; every result and watch is handed back to the asyncio loop with
call_soon_threadsafe, so code above the seam only ever runs on the loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kafkasim.runtime import api
from kafkasim.runtime import zkstore_log as L
from kafkasim.runtime.api import Coordination, NodeDead, Watcher, WatchEvent, ZkClient, ZOp, ZStat
from kafkasim.runtime.real.zk_durable import DEFAULT_SNAPSHOT_BYTES, ZkJournal, open_store
from kafkasim.runtime.zkstore import Firing, ZkStore
from kafkasim.runtime.zkstore_log import WalRecord

if TYPE_CHECKING:
    from kafkasim.runtime.real.world import RealNode


# ---------------------------------------------------------------- embedded store
class EmbeddedCoordination(Coordination):
    """In-process ZooKeeper semantics for one process (sessions end with close()). With a
    journal (`durable()`), every change is in the store's WAL and fsynced before the call that
    made it returns or its watches fire, and reads wait until nothing pending could be lost."""

    def __init__(self, store: ZkStore | None = None, journal: ZkJournal | None = None) -> None:
        self.store = store or ZkStore()
        self.journal = journal
        self.clients: dict[int, EmbeddedZkClient] = {}

    @classmethod
    def durable(cls, directory: str, snapshot_bytes: int = DEFAULT_SNAPSHOT_BYTES) -> EmbeddedCoordination:
        """The store kept in `directory`: what a previous process acknowledged, its sessions
        expired (blocking; call before serving)."""
        store, journal = open_store(directory, snapshot_bytes)
        return cls(store, journal)

    async def connect(self, session_timeout_ms: int) -> ZkClient:
        client = EmbeddedZkClient(self)
        self.clients[client.session_id] = client
        return client

    def deliver(self, firings: list[Firing]) -> None:
        loop = asyncio.get_running_loop()
        for f in firings:
            if f.session_id in self.clients:
                loop.call_soon(f.watcher, f.event)

    def log(self, rec: WalRecord) -> None:
        """Append a record without waiting (session bookkeeping that a crash may lose: a lost
        close is an expiry at the next open, a lost open a session that never made a change)."""
        if self.journal is not None:
            try:
                self.journal.append(rec)
            except OSError:
                pass  # the store has failed or is closed; its next open expires the session

    async def commit(self, rec: WalRecord, firings: list[Firing]) -> None:
        """Log a change the store has just applied (called in the same step, so records keep
        the store's order), wait until it is durable, then fire its watches."""
        if self.journal is not None:
            try:
                self.journal.append(rec)
                await self.journal.sync()
            except OSError as exc:
                raise api.ConnectionLossError(str(exc)) from exc
        self.deliver(firings)

    async def settled(self) -> None:
        if self.journal is not None:
            try:
                await self.journal.settle()
            except OSError as exc:
                raise api.ConnectionLossError(str(exc)) from exc

    def close(self) -> None:
        if self.journal is not None:
            self.journal.close()


class EmbeddedZkClient(ZkClient):
    def __init__(self, coord: EmbeddedCoordination) -> None:
        self._c = coord
        self.session_id = coord.store.open_session()
        coord.log(WalRecord(L.OPEN_SESSION, self.session_id))
        self._closed = False

    def _run(self, fn: Callable[[], Any]) -> Any:
        if self._closed:
            raise api.SessionExpiredError("session closed")
        return fn()

    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
                     sequential: bool = False, makepath: bool = False) -> str:
        p, firings = self._run(
            lambda: self._c.store.create(self.session_id, path, data, ephemeral, sequential, makepath))
        await self._c.commit(L.create_record(self.session_id, p, data, ephemeral, makepath), firings)
        return p  # type: ignore[no-any-return]

    async def get(self, path: str, watch: Watcher | None = None) -> tuple[bytes, ZStat]:
        await self._c.settled()
        return self._run(lambda: self._c.store.get(self.session_id, path, watch))  # type: ignore[no-any-return]

    async def set(self, path: str, data: bytes, version: int = -1) -> ZStat:
        st, firings = self._run(lambda: self._c.store.set(path, data, version))
        await self._c.commit(L.set_record(path, data, version), firings)
        return st  # type: ignore[no-any-return]

    async def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        firings = self._run(lambda: self._c.store.delete(path, version, recursive))
        await self._c.commit(L.delete_record(path, version, recursive), firings)

    async def exists(self, path: str, watch: Watcher | None = None) -> ZStat | None:
        await self._c.settled()
        return self._run(lambda: self._c.store.exists(self.session_id, path, watch))  # type: ignore[no-any-return]

    async def get_children(self, path: str, watch: Watcher | None = None) -> list[str]:
        await self._c.settled()
        return self._run(lambda: self._c.store.get_children(self.session_id, path, watch))  # type: ignore[no-any-return]

    async def multi(self, ops: list[ZOp]) -> list[Any]:
        results, firings = self._run(lambda: self._c.store.multi(self.session_id, ops))
        await self._c.commit(L.multi_record(self.session_id, ops, results), firings)
        return results  # type: ignore[no-any-return]

    def add_session_listener(self, listener: Watcher) -> None:
        pass  # an in-process session never disconnects or expires

    async def close(self) -> None:
        self.close_now()
        try:
            await self._c.settled()  # a graceful close waits for its record
        except api.ConnectionLossError:
            pass  # the store failed: the session ends anyway (expired at the next open)

    def close_now(self) -> None:
        if not self._closed:
            self._closed = True
            self._c.clients.pop(self.session_id, None)
            firings = self._c.store.close_session(self.session_id)
            # Not waited for: a close a crash loses is an expiry at the next open.
            self._c.log(WalRecord(L.CLOSE_SESSION, self.session_id))
            self._c.deliver(firings)


class NodeEmbeddedCoordination(Coordination):
    """One node's view of a shared embedded store: remembers the node's sessions so that
    killing the node ends them (its ephemerals go), as a real ZooKeeper would on expiry."""

    def __init__(self, shared: EmbeddedCoordination) -> None:
        self.shared = shared
        self._sessions: list[EmbeddedZkClient] = []

    async def connect(self, session_timeout_ms: int) -> ZkClient:
        client = await self.shared.connect(session_timeout_ms)
        assert isinstance(client, EmbeddedZkClient)
        self._sessions.append(client)
        return client

    def kill(self) -> None:
        for client in self._sessions:
            client.close_now()
        self._sessions.clear()


# ---------------------------------------------------------------- kazoo
def _map_error(exc: BaseException) -> BaseException:
    from kazoo import exceptions as ke

    table: list[tuple[type[BaseException], type[BaseException]]] = [
        (ke.NoNodeError, api.NoNodeError), (ke.NodeExistsError, api.NodeExistsError),
        (ke.BadVersionError, api.BadVersionError), (ke.NotEmptyError, api.NotEmptyError),
        (ke.NoChildrenForEphemeralsError, api.NoChildrenForEphemeralsError),
        (ke.SessionExpiredError, api.SessionExpiredError), (ke.ConnectionLoss, api.ConnectionLossError),
        (ke.ConnectionClosedError, api.ConnectionLossError),
    ]
    for src, dst in table:
        if isinstance(exc, src):
            return dst(str(exc))
    return exc


def _stat(s: Any) -> ZStat:
    return ZStat(s.czxid, s.mzxid, s.version, s.cversion, s.ephemeralOwner, s.numChildren, s.dataLength)


_EVENT_TYPES = {"CREATED": "created", "DELETED": "deleted", "CHANGED": "changed", "CHILD": "child"}
_STATES = {"CONNECTED": "connected", "SUSPENDED": "suspended", "LOST": "expired"}


class KazooCoordination(Coordination):
    def __init__(self, hosts: str, node: RealNode) -> None:
        self.hosts, self._node = hosts, node
        self._clients: list[Any] = []

    def kill(self) -> None:
        """The node died: end its sessions so ZooKeeper drops its ephemerals. (A real kill -9
        leaves them until the session times out; ending them at once is within that bound.)
        kazoo's stop() blocks, so it runs on a worker thread and nobody waits for it."""
        clients, self._clients = self._clients, []

        def stop() -> None:
            for client in clients:
                try:
                    client.stop()
                    client.close()
                except Exception:  # the node is dead; nothing is left to report to
                    pass

        if clients:
            asyncio.get_running_loop().run_in_executor(None, stop)

    async def connect(self, session_timeout_ms: int) -> ZkClient:
        from kazoo.client import KazooClient

        self._node.check()
        client = KazooClient(hosts=self.hosts, timeout=session_timeout_ms / 1000.0)
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(None, lambda: client.start(timeout=max(5.0, session_timeout_ms / 1000.0)))
        except Exception as exc:
            client.close()
            raise api.ConnectionLossError(f"cannot reach ZooKeeper at {self.hosts}: {exc}") from exc
        self._clients.append(client)
        return KazooZkClient(client, loop, self._node)


class KazooZkClient(ZkClient):
    def __init__(self, client: Any, loop: asyncio.AbstractEventLoop, node: RealNode) -> None:
        self._k, self._loop, self._node = client, loop, node
        self.session_id = client.client_id[0] if client.client_id else 0

    async def _call(self, async_result: Any) -> Any:
        fut: asyncio.Future[Any] = self._loop.create_future()

        def done(ar: Any) -> None:
            try:
                value, exc = ar.get_nowait(), None
            except Exception as e:
                value, exc = None, _map_error(e)
            self._loop.call_soon_threadsafe(_settle, fut, value, exc)

        async_result.rawlink(done)
        result = await fut
        self._node.check()
        return result

    def _watch(self, watcher: Watcher | None) -> Callable[[Any], None] | None:
        if watcher is None:
            return None
        node = self._node

        def fire(ev: Any) -> None:
            event = WatchEvent(_EVENT_TYPES.get(ev.type, str(ev.type).lower()), ev.path)
            self._loop.call_soon_threadsafe(lambda: watcher(event) if node.alive() else None)

        return fire

    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
                     sequential: bool = False, makepath: bool = False) -> str:
        created: str = await self._call(self._k.create_async(path, data, ephemeral=ephemeral, sequence=sequential,
                                                             makepath=makepath))
        return created

    async def get(self, path: str, watch: Watcher | None = None) -> tuple[bytes, ZStat]:
        data, st = await self._call(self._k.get_async(path, watch=self._watch(watch)))
        return data, _stat(st)

    async def set(self, path: str, data: bytes, version: int = -1) -> ZStat:
        return _stat(await self._call(self._k.set_async(path, data, version)))

    async def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        if not recursive:
            await self._call(self._k.delete_async(path, version))
            return
        try:
            await self._loop.run_in_executor(None, lambda: self._k.delete(path, version, recursive=True))
        except Exception as exc:
            raise _map_error(exc) from exc

    async def exists(self, path: str, watch: Watcher | None = None) -> ZStat | None:
        st = await self._call(self._k.exists_async(path, watch=self._watch(watch)))
        return None if st is None else _stat(st)

    async def get_children(self, path: str, watch: Watcher | None = None) -> list[str]:
        return sorted(await self._call(self._k.get_children_async(path, watch=self._watch(watch))))

    async def multi(self, ops: list[ZOp]) -> list[Any]:
        from kazoo.exceptions import RolledBackError

        t = self._k.transaction()
        for op in ops:
            if op.kind == "create":
                t.create(op.path, op.data, ephemeral=op.ephemeral, sequence=op.sequential)
            elif op.kind == "set":
                t.set_data(op.path, op.data, op.version)
            elif op.kind == "delete":
                t.delete(op.path, op.version)
            elif op.kind == "check":
                t.check(op.path, op.version)
            else:
                raise ValueError(f"unknown multi op {op.kind!r}")
        results = await self._call(t.commit_async())
        for r in results:
            if isinstance(r, BaseException) and not isinstance(r, RolledBackError):
                raise _map_error(r)
        return [(_stat(r) if hasattr(r, "mzxid") else r) for r in results]

    def add_session_listener(self, listener: Watcher) -> None:
        node = self._node

        def on_state(state: Any) -> None:
            event = WatchEvent("session", "", _STATES.get(str(state), str(state).lower()))
            self._loop.call_soon_threadsafe(lambda: listener(event) if node.alive() else None)

        self._k.add_listener(on_state)

    async def close(self) -> None:
        def stop() -> None:
            self._k.stop()
            self._k.close()

        await self._loop.run_in_executor(None, stop)


def _settle(fut: asyncio.Future[Any], value: Any, exc: BaseException | None) -> None:
    if fut.done():
        return
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(value)


__all__ = ["EmbeddedCoordination", "NodeEmbeddedCoordination", "KazooCoordination", "NodeDead"]
