"""ZooKeeperClient: the broker's ZooKeeper session, renewed when it expires (Kafka's
kafka.zookeeper.ZooKeeperClient).

The runtime hands out sessions (`Coordination.connect`); a session that expired is dead for
good. This wrapper is the ZkClient every broker component holds: it forwards each operation to
the current session and, when that session expires (a session event, or an operation failing
with SessionExpired), opens a new one — telling the registered state change handlers before
(`before_initializing_session`) and after (`after_initializing_session`), which is where the
controller resigns and the broker re-registers itself and re-runs the election. Watches set on
the old session are gone with it; handlers set them again by reading.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from kafkasim.runtime.api import (
    ConnectionLossError,
    NodeRuntime,
    SessionExpiredError,
    Watcher,
    WatchEvent,
    ZkClient,
    ZOp,
    ZStat,
)

T = TypeVar("T")
RECONNECT_BACKOFF_MS = 1000.0
CONNECTION_LOSS_RETRY_MS = 100.0  # between re-sends of an operation that met ConnectionLoss


@dataclass
class StateChangeHandler:
    name: str
    # Awaited before the new session is opened: Kafka's controller blocks there until its event
    # thread has begun the Expire event, so no event still running uses the new session.
    before_initializing_session: Callable[[], Awaitable[None]] | None = None
    after_initializing_session: Callable[[], Awaitable[None]] | None = None


class ZooKeeperClient(ZkClient):
    def __init__(self, rt: NodeRuntime, session_timeout_ms: int) -> None:
        self.rt = rt
        self.session_timeout_ms = session_timeout_ms
        self._session: ZkClient | None = None
        self.handlers: dict[str, StateChangeHandler] = {}
        self._reinitializing = False
        self._closed = False
        self.session_generation = 0  # bumped with every new session

    async def connect(self) -> None:
        self._session = await self.rt.coordination.connect(self.session_timeout_ms)
        self._session.add_session_listener(self._on_state)

    @property
    def session(self) -> ZkClient:
        assert self._session is not None, "ZooKeeper session not connected"
        return self._session

    @property
    def session_id(self) -> int:  # type: ignore[override]
        return self.session.session_id

    def register_state_change_handler(self, handler: StateChangeHandler) -> None:
        self.handlers[handler.name] = handler

    # ---------------------------------------------------------------- session renewal
    def _on_state(self, event: WatchEvent) -> None:
        if event.state == "expired" and not self._closed:
            self.rt.spawn(self.reinitialize(), name="zookeeper session renewal")

    async def reinitialize(self) -> None:
        """ZooKeeperClient.reinitialize: handlers first, then a new session (retrying while
        ZooKeeper is unreachable), then handlers again."""
        if self._reinitializing or self._closed:
            return
        self._reinitializing = True
        try:
            old = self._session
            self.rt.trace("zk_session_expired", session=old.session_id if old is not None else 0)
            for h in list(self.handlers.values()):
                if h.before_initializing_session is not None:
                    await h.before_initializing_session()
            while not self._closed:
                try:
                    await self.connect()
                    break
                except ConnectionLossError:
                    pass  # (no await in an except block: kafka_zk_client._get_or_none says why)
                await self.rt.sleep(RECONNECT_BACKOFF_MS)
            if old is not None:
                self.rt.spawn(_close_quietly(old), name="close expired zookeeper session")
            self.session_generation += 1
            self.rt.trace("zk_session_established", session=self.session_id)
            for h in list(self.handlers.values()):
                if h.after_initializing_session is not None:
                    await h.after_initializing_session()
        finally:
            self._reinitializing = False

    async def _call(self, op: Callable[[ZkClient], Awaitable[T]]) -> T:
        while True:
            session = self.session
            try:
                return await op(session)
            except SessionExpiredError:
                if session is self._session:
                    self.rt.spawn(self.reinitialize(), name="zookeeper session renewal")
                raise
            except ConnectionLossError:
                # KafkaZkClient.retryRequestsUntilConnected: wait and send it again (on the
                # current session); only the session's expiry or our own shutdown ends the wait.
                if self._closed:
                    raise
            await self.rt.sleep(CONNECTION_LOSS_RETRY_MS)

    # ---------------------------------------------------------------- ZkClient
    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
                     sequential: bool = False, makepath: bool = False) -> str:
        return await self._call(lambda s: s.create(path, data, ephemeral=ephemeral, sequential=sequential,
                                                   makepath=makepath))

    async def get(self, path: str, watch: Watcher | None = None) -> tuple[bytes, ZStat]:
        return await self._call(lambda s: s.get(path, watch))

    async def set(self, path: str, data: bytes, version: int = -1) -> ZStat:
        return await self._call(lambda s: s.set(path, data, version))

    async def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        await self._call(lambda s: s.delete(path, version, recursive))

    async def exists(self, path: str, watch: Watcher | None = None) -> ZStat | None:
        return await self._call(lambda s: s.exists(path, watch))

    async def get_children(self, path: str, watch: Watcher | None = None) -> list[str]:
        return await self._call(lambda s: s.get_children(path, watch))

    async def multi(self, ops: list[ZOp]) -> list[Any]:
        return await self._call(lambda s: s.multi(ops))

    def get_children_pipelined(self, path: str, watch: Watcher | None = None) -> Awaitable[list[str]]:
        """On the current session, not retried: a caller that meets ConnectionLoss or
        SessionExpired reads again with get_children."""
        return self.session.get_children_pipelined(path, watch)

    def add_session_listener(self, listener: Watcher) -> None:
        self.session.add_session_listener(listener)

    async def close(self) -> None:
        self._closed = True
        if self._session is not None:
            await self._session.close()


async def _close_quietly(session: ZkClient) -> None:
    try:
        await session.close()
    except Exception:  # the session is already gone; closing it is a courtesy
        pass
