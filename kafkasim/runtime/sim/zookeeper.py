"""SimZooKeeper: the ZkStore served from a host of SimNetwork ("zookeeper" by default).

Every operation is a request from the client's host to the ZooKeeper host and a reply back,
each taking the network's latency; if either direction is blocked the operation fails with
ConnectionLoss after the session's connection timeout (a third of the session timeout, as
ZooKeeper clients use). A session stays alive while its pings (every third of the timeout) keep
reaching the server; the server expires a session it has not heard from within the timeout:
its ephemeral znodes go and watchers fire. The client learns of the expiry when it next gets
through, and tells its session listeners (Kafka re-registers the broker then).

A read pipelined behind the session's next request (get_children_pipelined: a real client sends
it on the same connection without waiting) is run at the server right after that request and
answered with it: it draws no network delay of its own, so adding one moves no other event.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafkasim.runtime.api import (
    ConnectionLossError,
    Coordination,
    NodeDead,
    SessionExpiredError,
    Watcher,
    WatchEvent,
    ZkClient,
    ZOp,
    ZStat,
)
from kafkasim.runtime.sim.kernel import Owner, SimFuture, SimKernel
from kafkasim.runtime.sim.network import SimNetwork
from kafkasim.runtime.zkstore import Firing, ZkStore


class SimZooKeeperServer:
    def __init__(self, kernel: SimKernel, net: SimNetwork, host: str = "zookeeper") -> None:
        self.kernel, self.net, self.host = kernel, net, host
        self.store = ZkStore()
        self.last_heard: dict[int, float] = {}
        self.timeouts: dict[int, float] = {}
        self.clients: dict[int, SimZkClient] = {}
        self.expired: set[int] = set()
        self.on_event: Callable[[str, dict[str, Any]], None] = lambda ev, f: None
        self._tick()

    def _tick(self) -> None:
        """Expire sessions not heard from within their timeout; runs every 100 ms of sim time."""
        now = self.kernel.now()
        for sid in sorted(self.last_heard):
            if now - self.last_heard[sid] > self.timeouts[sid]:
                self.expire(sid)
        self.kernel.schedule(100.0, lambda _e: self._tick())

    def expire(self, sid: int) -> None:
        if sid in self.expired or sid not in self.last_heard:
            return
        self.expired.add(sid)
        del self.last_heard[sid]
        self.on_event("zk_session_expired", {"session": sid})
        self.deliver(self.store.close_session(sid))

    def expire_host(self, host: str) -> list[int]:
        """Expire every open session of the clients on `host` now (as Kafka's tests expire a
        broker's session); the sessions expired, in id order."""
        sids = [sid for sid, c in sorted(self.clients.items()) if c.host == host and not c._closed
                and sid not in self.expired]
        for sid in sids:
            self.expire(sid)
        return sids

    def deliver(self, firings: list[Firing]) -> None:
        for f in firings:
            client = self.clients.get(f.session_id)
            if client is not None:
                client._deliver_watch(f.watcher, f.event)


class SimZkClient(ZkClient):
    def __init__(self, server: SimZooKeeperServer, owner: Owner, host: str, session_timeout_ms: int) -> None:
        self.server, self.owner, self.host = server, owner, host
        self.timeout_ms = float(session_timeout_ms)
        self.session_id = server.store.open_session()
        server.last_heard[self.session_id] = server.kernel.now()
        server.timeouts[self.session_id] = self.timeout_ms
        server.clients[self.session_id] = self
        self._listeners: list[Watcher] = []
        # Reads pipelined behind the next request (get_children_pipelined): run at the server
        # right after it, answered with it.
        self._riders: list[tuple[Callable[[], Any], SimFuture]] = []
        self._closed = False
        self._state = "connected"
        server.kernel.spawn(owner, self._pinger(), name=f"zk-ping {self.session_id}")

    # -- transport
    def _check(self) -> None:
        if not self.owner.alive:
            raise NodeDead(self.owner.name)
        if self._closed:
            raise SessionExpiredError("session closed")
        if self._state == "expired":
            # ZooKeeper's ClientCnxn: a handle whose session expired is CLOSED and fails every
            # later operation with SESSIONEXPIRED at once, reachable or not (not CONNECTIONLOSS).
            raise SessionExpiredError(f"session {self.session_id:#x} expired")

    def _path_up(self) -> bool:
        net, zk = self.server.net, self.server.host
        return net.path_up(self.host, zk) and net.path_up(zk, self.host)

    async def _rpc(self, fn: Callable[[], Any]) -> Any:
        self._check()
        kernel, net, zk = self.server.kernel, self.server.net, self.server.host
        if not self._path_up():
            await kernel.sleep(self.timeout_ms / 3)
            self._check()
            raise ConnectionLossError(f"zookeeper unreachable from {self.host}")
        riders, self._riders = self._riders, []
        await kernel.sleep(net.delay(self.host, zk))
        if self.session_id in self.server.expired:
            self._set_state("expired")
            _answer_riders([(r, None, SessionExpiredError(f"session {self.session_id:#x} expired"))
                            for r in riders])
            raise SessionExpiredError(f"session {self.session_id:#x} expired")
        self.server.last_heard[self.session_id] = kernel.now()
        try:
            result, failure = fn(), None
        except Exception as exc:
            result, failure = None, exc
        answers = [(r, *_attempt(r[0])) for r in riders]
        await kernel.sleep(net.delay(zk, self.host))
        _answer_riders(answers)
        self._check()
        if failure is not None:
            raise failure
        return result

    async def _pinger(self) -> None:
        kernel = self.server.kernel
        while not self._closed:
            await kernel.sleep(self.timeout_ms / 3)
            if self._closed or self.session_id in self.server.expired and self._state == "expired":
                return
            if not self._path_up():
                self._set_state("suspended")
                continue
            try:
                await self._rpc(lambda: None)
                self._set_state("connected")
            except SessionExpiredError:
                return
            except ConnectionLossError:
                self._set_state("suspended")

    def _set_state(self, state: str) -> None:
        if state == self._state:
            return
        self._state = state
        for listener in list(self._listeners):
            self._call(listener, WatchEvent("session", "", state))

    def _call(self, watcher: Watcher, event: WatchEvent) -> None:
        if not self.owner.alive or self._closed:
            return
        if self.owner.hold_if_paused(lambda: self._call(watcher, event)):
            return
        prev, self.server.kernel.current = self.server.kernel.current, self.owner
        try:
            watcher(event)
        except Exception as exc:
            self.server.kernel._record_failure(self.owner.name, "zk watcher", exc)
        finally:
            self.server.kernel.current = prev

    def _deliver_watch(self, watcher: Watcher, event: WatchEvent) -> None:
        kernel, net = self.server.kernel, self.server.net

        def attempt(_ev: Any) -> None:
            if self._closed or not self.owner.alive:
                return
            if not self._path_up():
                kernel.schedule(100.0, attempt)
                return
            self._call(watcher, event)

        kernel.schedule(net.delay(self.server.host, self.host), attempt)

    # -- ZkClient API
    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
                     sequential: bool = False, makepath: bool = False) -> str:
        def op() -> str:
            p, firings = self.server.store.create(self.session_id, path, data, ephemeral, sequential, makepath)
            self.server.deliver(firings)
            return p
        return await self._rpc(op)  # type: ignore[no-any-return]

    async def get(self, path: str, watch: Watcher | None = None) -> tuple[bytes, ZStat]:
        return await self._rpc(lambda: self.server.store.get(self.session_id, path, watch))  # type: ignore[no-any-return]

    async def set(self, path: str, data: bytes, version: int = -1) -> ZStat:
        def op() -> ZStat:
            st, firings = self.server.store.set(path, data, version)
            self.server.deliver(firings)
            return st
        return await self._rpc(op)  # type: ignore[no-any-return]

    async def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        await self._rpc(lambda: self.server.deliver(self.server.store.delete(path, version, recursive)))

    async def exists(self, path: str, watch: Watcher | None = None) -> ZStat | None:
        return await self._rpc(lambda: self.server.store.exists(self.session_id, path, watch))  # type: ignore[no-any-return]

    async def get_children(self, path: str, watch: Watcher | None = None) -> list[str]:
        return await self._rpc(lambda: self.server.store.get_children(self.session_id, path, watch))  # type: ignore[no-any-return]

    def get_children_pipelined(self, path: str, watch: Watcher | None = None) -> SimFuture:
        """Rides on the session's next request (a ping at the latest): no delay of its own."""
        answer = self.server.kernel.future()
        if self._closed:
            answer.set_exception(SessionExpiredError("session closed"))
        else:
            self._riders.append((lambda: self.server.store.get_children(self.session_id, path, watch), answer))
        return answer

    async def multi(self, ops: list[ZOp]) -> list[Any]:
        def op() -> list[Any]:
            results, firings = self.server.store.multi(self.session_id, ops)
            self.server.deliver(firings)
            return results
        return await self._rpc(op)  # type: ignore[no-any-return]

    def add_session_listener(self, listener: Watcher) -> None:
        self._listeners.append(listener)

    async def close(self) -> None:
        if self._closed:
            return
        riders, self._riders = self._riders, []
        _answer_riders([(r, None, SessionExpiredError("session closed")) for r in riders])
        try:
            await self._rpc(lambda: self.server.deliver(self.server.store.close_session(self.session_id)))
        finally:
            self._closed = True
            self.server.last_heard.pop(self.session_id, None)
            self.server.clients.pop(self.session_id, None)


def _attempt(fn: Callable[[], Any]) -> tuple[Any, Exception | None]:
    try:
        return fn(), None
    except Exception as exc:
        return None, exc


def _answer_riders(answers: list[tuple[tuple[Callable[[], Any], SimFuture], Any, Exception | None]]) -> None:
    for (_, answer), result, failure in answers:
        if failure is not None:
            answer.set_exception(failure)
        else:
            answer.set_result(result)


class SimCoordination(Coordination):
    def __init__(self, server: SimZooKeeperServer, owner: Owner, host: str) -> None:
        self.server, self.owner, self.host = server, owner, host

    async def connect(self, session_timeout_ms: int) -> ZkClient:
        if not self.owner.alive:
            raise NodeDead(self.owner.name)
        net, zk = self.server.net, self.server.host
        if not (net.path_up(self.host, zk) and net.path_up(zk, self.host)):
            await self.server.kernel.sleep(session_timeout_ms / 3)
            raise ConnectionLossError(f"zookeeper unreachable from {self.host}")
        await self.server.kernel.sleep(net.delay(self.host, zk) + net.delay(zk, self.host))
        return SimZkClient(self.server, self.owner, self.host, session_timeout_ms)
