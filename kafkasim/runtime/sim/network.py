"""SimNetwork: hosts and TCP-like streams between them, with latency and partitions.

Model. A stream is two directions; each direction is a FIFO of segments (data, FIN or RST)
with a delivery time drawn per segment from the latency model, never earlier than the previous
segment's (TCP keeps order). A single "pump" per direction delivers the head segment when its
time comes. If the path src->dst is blocked at that moment the pump retries after a
retransmission timeout (as TCP would), so a partition delays bytes rather than dropping them,
and healing the partition lets the backlog through in order. A connect across a blocked path
hangs until the caller's timeout; a connect to a host with no listener is refused after one
round trip.

Crash of a host: its listeners vanish; with `notify_peers` (a process kill: the OS is still up)
every stream of the host sends an RST after the data already queued; without it (power loss)
the data it had queued is lost with it, and peers hear nothing and must time out. A segment a
peer sends to a power-lost stream is retransmitted (every RETRANSMIT_MS) while the machine is
off; once it is back up (`host_restarted`), its TCP stack knows no such connection and answers
RST (RFC 793, "Reset Generation"), so the peer learns of the crash at its next send.

TLS is modelled, not computed: a listener served with TlsSettings accepts only clients that
connect with TlsSettings (either side alone: the "handshake" fails and both ends close, as a
plaintext client on an SSL port sees), marks the accepted stream `secure`, and hands it the
client's `sim_subject` as the certificate subject when it asks for client auth (`required`
without one fails the handshake).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from kafkasim.runtime.api import (
    ConnectionClosed,
    ConnectionRefused,
    ConnectionReset,
    FrameTooLarge,
    NodeDead,
    RuntimeTimeout,
    Server,
    Stream,
    StreamHandler,
    TlsSettings,
)
from kafkasim.runtime.rng import SeededRng
from kafkasim.runtime.sim.kernel import Owner, SimFuture, SimKernel

RETRANSMIT_MS = 200.0  # how often a stalled direction re-tries a blocked path
_DATA, _FIN, _RST = 0, 1, 2


class _Direction:
    """Segments in flight from one end to the other."""

    __slots__ = ("net", "src", "dst", "queue", "last_at", "pumping")

    def __init__(self, net: SimNetwork, src: SimStream, dst: SimStream) -> None:
        self.net, self.src, self.dst = net, src, dst
        self.queue: deque[tuple[float, int, bytes]] = deque()
        self.last_at = 0.0
        self.pumping = False

    def send(self, kind: int, data: bytes = b"") -> None:
        net = self.net
        now = net.kernel._now
        at = now + net.delay(self.src.local[0], self.dst.local[0])
        if at < self.last_at:
            at = self.last_at
        self.last_at = at
        self.queue.append((at, kind, data))
        if not self.pumping:
            self.pumping = True
            net.kernel.schedule(at - now, self._pump)

    def _pump(self, _ev: Any) -> None:
        net = self.net
        now = net.kernel._now
        # path_up is True whenever nothing is cut (most of a run): ask it only when something is.
        if net.blocked and not net.path_up(self.src.local[0], self.dst.local[0]):
            net.kernel.schedule(RETRANSMIT_MS, self._pump)
            return
        if self.dst._power_lost and self.queue and self.queue[0][0] <= now:
            self._to_power_lost(now)
            return
        delivered = False
        while self.queue and self.queue[0][0] <= now:
            _, kind, data = self.queue.popleft()
            delivered = self.dst._receive(kind, data) or delivered
        if delivered:
            # This runs as a queue entry of its own: the reader resumes here rather than in one
            # more entry at the same instant (after the loop, so it never sees a half-drained queue).
            w, self.dst._waiter = self.dst._waiter, None
            if w is not None:
                w._resolve_now(None)
        if self.queue:
            net.kernel.schedule(self.queue[0][0] - now, self._pump)
        else:
            self.pumping = False

    def _to_power_lost(self, now: float) -> None:
        """Segments due at a stream whose machine lost power: retransmitted while it is off,
        answered by RST once it is back (a sender that closed meanwhile gives up)."""
        net = self.net
        if self.src._closed or self.src._reset:
            self.queue.clear()
        elif self.dst.local[0] in net.down_hosts:
            net.kernel.schedule(RETRANSMIT_MS, self._pump)
            return
        else:
            self.queue.clear()
            assert self.dst._out is not None  # set for both ends at connect
            self.dst._out.send(_RST)  # from the machine's stack, back over the wire
        self.pumping = False


class SimStream(Stream):
    def __init__(self, net: SimNetwork, owner: Owner, local: tuple[str, int], peer: tuple[str, int]) -> None:
        self.net = net
        self.owner = owner
        self.local, self.peer = local, peer
        self._buf = bytearray()
        self._eof = False
        self._reset = False
        self._closed = False
        self._power_lost = False  # its machine lost power with it open (see _Direction._to_power_lost)
        self._waiter: SimFuture | None = None
        self._out: _Direction | None = None

    # -- receiving side (called by the peer's direction pump)
    def _receive(self, kind: int, data: bytes) -> bool:
        """Take a segment; True if a reader should be woken."""
        if self._reset or not self.owner.alive:
            return False
        if kind == _DATA:
            if not self._eof:
                self._buf += data
        elif kind == _FIN:
            self._eof = True
        else:
            self._reset = True
            self._buf.clear()
        return True

    def _wake(self) -> None:
        w, self._waiter = self._waiter, None
        if w is not None:
            w.set_result(None)

    def _check_alive(self) -> None:
        if not self.owner.alive:
            raise NodeDead(self.owner.name)

    # -- Stream API
    async def read_exactly(self, n: int) -> bytes:
        self._check_alive()
        while len(self._buf) < n:
            await self._more()
            self._check_alive()
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out

    def _more(self) -> SimFuture:
        """The future the next delivery resolves, for the caller to await (or raise if none can
        come); the caller checks its node after the wait. A plain call, not one more coroutine
        per wait: readers wait ~50k times a run."""
        if self._reset:
            raise ConnectionReset(f"{self.peer} reset the connection")
        if self._closed:
            raise ConnectionClosed("stream closed locally")
        if self._eof:
            raise ConnectionClosed(f"{self.peer} closed the connection")
        self._waiter = w = SimFuture(self.net.kernel)
        return w

    async def read_frame(self, max_bytes: int) -> bytes:
        # The same as read_exactly(4) then read_exactly(size), in one pass over the buffer: a
        # frame usually arrives whole, as the one write that sent it. (_check_alive inline.)
        owner = self.owner
        if not owner.alive:
            raise NodeDead(owner.name)
        buf = self._buf
        while len(buf) < 4:
            await self._more()
            if not owner.alive:
                raise NodeDead(owner.name)
        size = int.from_bytes(buf[:4], "big", signed=True)
        if size < 0 or size > max_bytes:
            del buf[:4]
            raise FrameTooLarge(f"frame of {size} bytes (limit {max_bytes})")
        end = 4 + size
        while len(buf) < end:
            await self._more()
            if not owner.alive:
                raise NodeDead(owner.name)
        out = memoryview(buf)[4:end].tobytes()  # one copy (a slice, then bytes of it, is two)
        del buf[:end]
        return out

    async def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self.owner.alive:  # _check_alive inline: one call less per write
            raise NodeDead(self.owner.name)
        if self._reset:
            raise ConnectionReset(f"{self.peer} reset the connection")
        if self._closed or self._out is None:
            raise ConnectionClosed("write on a closed stream")
        self._out.send(_DATA, bytes(data))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.net._forget(self)
        if self._out is not None and not self._reset:
            self._out.send(_FIN)
        self._wake()

    def is_closed(self) -> bool:
        return self._closed or self._reset

    def _crash(self, notify_peer: bool) -> None:
        if notify_peer and self._out is not None and not self._closed:
            self._out.send(_RST)
        elif not notify_peer and self._out is not None:
            # Power loss: what this machine had yet to get onto the wire (or to retransmit across
            # a partition) died with it; the peer sees the stream stop.
            self._out.queue.clear()
        self._power_lost = not notify_peer
        self._closed = True


class SimServer(Server):
    def __init__(self, net: SimNetwork, owner: Owner, host: str, port: int, handler: StreamHandler,
                 tls: TlsSettings | None = None) -> None:
        self.net, self.owner, self.host, self.port, self.handler = net, owner, host, port, handler
        self.tls = tls

    def close(self) -> None:
        self.net.listeners.pop((self.host, self.port), None)


class SimNetwork:
    def __init__(self, kernel: SimKernel, rng: SeededRng, latency_ms: tuple[float, float] = (0.1, 0.8)) -> None:
        self.kernel = kernel
        self.rng = rng
        self.latency_ms = latency_ms
        self.listeners: dict[tuple[str, int], SimServer] = {}
        # One-way cuts (src, dst) -> how many faults hold it: overlapping faults each undo only
        # their own cut, so the path comes back when the last one lifts.
        self.blocked: dict[tuple[str, str], int] = {}
        self.clog_ms: dict[tuple[str, str], float] = {}
        self.streams: dict[str, list[SimStream]] = {}
        self.down_hosts: set[str] = set()  # machines off after a power loss, until restarted
        self._ports: dict[str, int] = {}
        # The live world's advertised addresses: (host, port) a broker registers (127.0.0.1 and
        # the real port real clients use) -> the simulated node listening for it, so brokers
        # reach each other through the simulated network by the address Metadata gives out.
        # Empty in a simulated run.
        self.aliases: dict[tuple[str, int], str] = {}
        # The live world's client group: a real connection's node -> the node standing for every
        # real client ("client-7" -> "clients"), so a cut or clog made to the group (an isolate
        # of a broker cuts every node, the group's included) also holds for connections accepted
        # after it, and lifts with it. Empty in a simulated run.
        self.groups: dict[str, str] = {}
        self.on_event: Callable[[str, dict[str, Any]], None] = lambda ev, f: None

    # -- topology and faults
    def path_up(self, src: str, dst: str) -> bool:
        if (src, dst) in self.blocked:
            return False
        if self.groups:
            return (self.groups.get(src, src), self.groups.get(dst, dst)) not in self.blocked
        return True

    def delay(self, src: str, dst: str) -> float:
        lo, hi = self.latency_ms
        clog = self.clog_ms.get((src, dst), 0.0)
        if self.groups and not clog:
            clog = self.clog_ms.get((self.groups.get(src, src), self.groups.get(dst, dst)), 0.0)
        return lo + (hi - lo) * self.rng.random() + clog

    def block(self, src: str, dst: str) -> None:
        self.blocked[(src, dst)] = self.blocked.get((src, dst), 0) + 1

    def unblock(self, src: str, dst: str) -> None:
        n = self.blocked.get((src, dst), 0) - 1
        if n > 0:
            self.blocked[(src, dst)] = n
        else:
            self.blocked.pop((src, dst), None)

    def partition(self, side_a: list[str], side_b: list[str]) -> None:
        for a in side_a:
            for b in side_b:
                self.block(a, b)
                self.block(b, a)

    def unpartition(self, side_a: list[str], side_b: list[str]) -> None:
        """Lift one earlier partition(side_a, side_b)."""
        for a in side_a:
            for b in side_b:
                self.unblock(a, b)
                self.unblock(b, a)

    def unclog(self, src: str, dst: str) -> None:
        self.clog_ms.pop((src, dst), None)

    def heal(self) -> None:
        self.blocked.clear()
        self.clog_ms.clear()

    def clog(self, src: str, dst: str, extra_ms: float) -> None:
        self.clog_ms[(src, dst)] = extra_ms

    def host_crashed(self, host: str, notify_peers: bool) -> None:
        for key in [k for k in self.listeners if k[0] == host]:
            del self.listeners[key]
        for stream in self.streams.pop(host, []):
            stream._crash(notify_peers)
        if not notify_peers:
            self.down_hosts.add(host)

    def host_restarted(self, host: str) -> None:
        """The machine is up again: segments for its old connections now meet an RST."""
        self.down_hosts.discard(host)

    # -- sockets
    def _ephemeral_port(self, host: str) -> int:
        port = self._ports.get(host, 49152) + 1
        self._ports[host] = port
        return port

    def _forget(self, stream: SimStream) -> None:
        lst = self.streams.get(stream.local[0])
        if lst is not None and stream in lst:
            lst.remove(stream)

    def listen(self, owner: Owner, host: str, port: int, handler: StreamHandler,
               tls: TlsSettings | None = None) -> SimServer:
        if port == 0:
            port = self._ephemeral_port(host)
        if (host, port) in self.listeners:
            raise OSError(98, f"address in use: {host}:{port}")
        server = SimServer(self, owner, host, port, handler, tls)
        self.listeners[(host, port)] = server
        return server

    async def connect(self, owner: Owner, src_host: str, host: str, port: int, timeout_ms: float,
                      tls: TlsSettings | None = None) -> SimStream:
        if self.aliases:
            host = self.aliases.get((host, port), host)
        if not (self.path_up(src_host, host) and self.path_up(host, src_host)):
            await self.kernel.sleep(timeout_ms)
            raise RuntimeTimeout(f"connect to {host}:{port} timed out after {timeout_ms} ms")
        await self.kernel.sleep(self.delay(src_host, host))
        server = self.listeners.get((host, port))
        if server is None or not server.owner.alive:
            await self.kernel.sleep(self.delay(host, src_host))
            raise ConnectionRefused(f"connection refused: {host}:{port}")
        client = SimStream(self, owner, (src_host, self._ephemeral_port(src_host)), (host, port))
        accepted = SimStream(self, server.owner, (host, port), client.local)
        client._out = _Direction(self, client, accepted)
        accepted._out = _Direction(self, accepted, client)
        self.streams.setdefault(src_host, []).append(client)
        self.streams.setdefault(host, []).append(accepted)
        if not _tls_handshake(server.tls, tls, accepted):
            accepted.close()   # the client reads EOF, as after a failed TLS handshake
        else:
            self.kernel.spawn(server.owner, server.handler(accepted), name=f"conn {client.local[0]}:{client.local[1]}")
        await self.kernel.sleep(self.delay(host, src_host))
        client.secure = tls is not None
        return client


def _tls_handshake(server: TlsSettings | None, client: TlsSettings | None, accepted: SimStream) -> bool:
    """The simulated TLS handshake: both ends speak TLS or neither; client auth as configured."""
    if server is None or client is None:
        return server is None and client is None
    if server.client_auth == "required" and client.sim_subject is None:
        return False
    accepted.secure = True
    accepted.peer_subject = client.sim_subject if server.client_auth != "none" else None
    return True
