"""LiveBridge: real TCP connections on 127.0.0.1 as endpoints of the simulated network.

Each broker of the live world gets one real listening socket on 127.0.0.1 (its real port). The
broker itself listens in the simulated network on its node at that same port number and
registers 127.0.0.1:<real port> in ZooKeeper, so Metadata and FindCoordinator hand real clients
real addresses; the simulated network maps that address back to the broker's node
(SimNetwork.aliases), so brokers reach each other by it too.

A real connection accepted on broker B's port becomes a node of its own, `client-<n>`, which
opens a simulated stream to B. Two tasks on that node carry the bytes:

    real socket --recv--> inbox --uplink task: stream.write--> simulated network --> broker B
    real socket <--send-- outbox <--downlink task: read_frame-- simulated network <-- broker B

so the simulated network's latency, partitions, clogs and one-way blocks act on a client's link
as on any other (`isolate broker-1` cuts it from client-3; `partition [[client-3], [broker-0]]`
stalls its bytes, which TCP-like retransmission delivers once healed). Every client node is a
member of the node `clients` (SimNetwork.groups): `partition [["clients"], ["broker-0"]]` cuts
every real client from broker-0, including connections made while it holds. Endings map both ways:
the real client's FIN is the stream's FIN; the broker's FIN closes the real socket after what
was sent; a reset (a killed broker) resets the real socket (SO_LINGER 0); a power loss sends
nothing, and the real client must time out, as on a real network. A connect the simulated
network refuses or times out (retried as SYNs are, for 30 s) resets the real connection: the
real client's own connect has already succeeded (the bridge accepted it), so it sees a
connection that answers nothing and then resets, where a real partition would show a connect
that hangs.
"""

from __future__ import annotations

import selectors
import socket
import struct
from typing import Any

from kafkasim.runtime.api import ConnectionReset, NetworkError, NodeDead, RuntimeTimeout, Stream
from kafkasim.runtime.live.pacing import LiveLoop
from kafkasim.runtime.sim.node_runtime import SimNodeRuntime
from kafkasim.runtime.sim.world import SimWorld

HOST = "127.0.0.1"
CLIENTS = "clients"
CONNECT_TIMEOUT_MS = 30_000.0
SYN_RETRY_MS = 1_000.0
MAX_FRAME = 1 << 30
RECV_BYTES = 1 << 18


class LiveBridge:
    def __init__(self, loop: LiveLoop, world: SimWorld) -> None:
        self.loop, self.world = loop, world
        self.ports: dict[str, int] = {}            # broker node -> its real port
        self.conns: dict[str, BridgedConnection] = {}  # client node -> its connection (open ones)
        self._listeners: list[socket.socket] = []
        self._n = 0
        # Every real connection's node is a member of this one (SimNetwork.groups): a fault
        # naming "clients" acts on all of them, those accepted later included.
        world.add_node(CLIENTS)

    def bind(self, node: str, port: int = 0) -> int:
        """A real listener for broker `node` (port 0: any free one); returns the real port, the
        one the broker must listen on in the simulated network and advertise."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            sock.close()
            raise
        sock.listen(128)
        sock.setblocking(False)
        real_port = int(sock.getsockname()[1])
        self.ports[node] = real_port
        self.world.net.aliases[(HOST, real_port)] = node
        self._listeners.append(sock)
        self.loop.register(sock, selectors.EVENT_READ, lambda _m: self._accept(sock, real_port))
        return real_port

    def _accept(self, listener: socket.socket, port: int) -> None:
        try:
            sock, addr = listener.accept()
        except (BlockingIOError, OSError):
            return
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._n += 1
        name = f"client-{self._n}"
        node = self.world.add_node(name)
        self.world.net.groups[name] = CLIENTS
        conn = BridgedConnection(self, sock, name, port)
        conn.peer = f"{addr[0]}:{addr[1]}"
        self.conns[name] = conn
        self.world.emit("bridge", "client_connect", {"client": name, "peer": f"{addr[0]}:{addr[1]}",
                                                     "broker": self.world.net.aliases[(HOST, port)]})
        node.runtime.spawn(conn.uplink(node.runtime), name="bridge uplink")

    def describe_clients(self) -> dict[str, dict[str, Any]]:
        """Open connections: client node -> its real peer address and the broker it reached."""
        return {name: {"peer": c.peer, "broker": self.world.net.aliases[(HOST, c.port)],
                       "bytes_in": c.bytes_in, "bytes_out": c.bytes_out}
                for name, c in sorted(self.conns.items())}

    def forget(self, conn: BridgedConnection, how: str) -> None:
        if self.conns.pop(conn.name, None) is not None:
            self.world.emit("bridge", "client_close", {"client": conn.name, "how": how})

    def close(self) -> None:
        for conn in list(self.conns.values()):
            conn.abort("shutdown")
        for sock in self._listeners:
            self.loop.unregister(sock)
            sock.close()
        self._listeners.clear()


class BridgedConnection:
    """One real client connection and its simulated stream (see the module docstring)."""

    def __init__(self, bridge: LiveBridge, sock: socket.socket, name: str, port: int) -> None:
        self.bridge, self.sock, self.name, self.port = bridge, sock, name, port
        self.inbox = bytearray()   # from the real client, not yet written into the simulation
        self.outbox = bytearray()  # from the broker, not yet sent to the real client
        self.eof = False           # the real client sent FIN
        self.closing = False       # close the real socket once the outbox is sent
        self.closed = False
        self._waiter: Any = None   # the uplink's SimFuture while it waits for bytes
        self.bytes_in = self.bytes_out = 0
        self.peer = ""             # the real client's host:port
        bridge.loop.register(sock, selectors.EVENT_READ, self._on_io)

    # ------------------------------------------------------------ real side (loop thread)
    def _on_io(self, mask: int) -> None:
        if mask & selectors.EVENT_READ:
            self._read()
        if mask & selectors.EVENT_WRITE and not self.closed:
            self._flush()

    def _read(self) -> None:
        try:
            data = self.sock.recv(RECV_BYTES)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            self.inbox += data
            self.bytes_in += len(data)
        else:
            self.eof = True
            self._interest()
        self._wake()

    def _wake(self) -> None:
        w, self._waiter = self._waiter, None
        if w is not None:
            w.set_result(None)

    def _interest(self) -> None:
        if self.closed:
            return
        events = (0 if self.eof else selectors.EVENT_READ) | (selectors.EVENT_WRITE if self.outbox else 0)
        if events:
            self.bridge.loop.modify(self.sock, events, self._on_io)
        else:
            self.bridge.loop.unregister(self.sock)

    def _flush(self) -> None:
        try:
            while self.outbox:
                n = self.sock.send(self.outbox)
                del self.outbox[:n]
        except BlockingIOError:
            pass
        except OSError:
            self.abort("send failed")
            return
        if not self.outbox and self.closing:
            self._finish("closed by broker", reset=False)
            return
        self._interest()

    def abort(self, how: str) -> None:
        self._finish(how, reset=True)

    def _finish(self, how: str, reset: bool) -> None:
        if self.closed:
            return
        self.closed = True
        self.bridge.loop.unregister(self.sock)
        if reset:  # an RST, as the real client would see from a reset or refused connection
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()
        self.bridge.forget(self, how)
        self._wake()

    # ------------------------------------------------------------ simulated side (tasks on the client node)
    async def uplink(self, rt: SimNodeRuntime) -> None:
        stream: Stream | None = None
        try:
            stream = await self._connect(rt)
            broker = self.bridge.world.nodes[self.bridge.world.net.aliases[(HOST, self.port)]]
            incarnation = broker.incarnation
            rt.spawn(self.downlink(stream), name="bridge downlink")
            while not self.closed:
                if self.inbox and broker.alive and broker.incarnation != incarnation:
                    # The broker lost power and came back: its new incarnation knows nothing of
                    # this connection and answers the client's next bytes with an RST, as a
                    # rebooted host's TCP stack does (while it is down they vanish, as now).
                    self.abort("reset by the restarted broker")
                    return
                if self.inbox:
                    data = bytes(self.inbox)
                    self.inbox.clear()
                    await stream.write(data)
                elif self.eof:
                    stream.close()  # the real client's FIN, after everything it sent
                    return
                else:
                    self._waiter = rt.future()
                    await self._waiter
        except (NetworkError, RuntimeTimeout) as exc:
            self.abort(f"simulated connect or write failed: {type(exc).__name__}")
        finally:
            if not rt.alive():
                self.abort("client node crashed")  # a fault crashed this client's node
            elif self.closed and stream is not None and not stream.is_closed():
                stream.close()  # the real side went away: the broker sees the connection close

    async def _connect(self, rt: SimNodeRuntime) -> Stream:
        """Connect as TCP does across a path that may be cut: the SYN is retransmitted after 1 s,
        then 2 s, 4 s, ... (Linux's backoff) until CONNECT_TIMEOUT_MS, so a connection made
        while a partition holds goes through soon after it heals."""
        wait, spent = SYN_RETRY_MS, 0.0
        while True:
            try:
                return await rt.net.connect(HOST, self.port, min(wait, CONNECT_TIMEOUT_MS - spent))
            except RuntimeTimeout:
                spent += wait
                wait *= 2
                if spent >= CONNECT_TIMEOUT_MS or self.closed:
                    raise

    async def downlink(self, stream: Stream) -> None:
        try:
            while not self.closed:
                frame = await stream.read_frame(MAX_FRAME)
                self.outbox += len(frame).to_bytes(4, "big") + frame
                self.bytes_out += len(frame) + 4
                self._flush()
        except ConnectionReset:
            self.abort("reset by broker")
        except NetworkError:  # the broker closed: send what is left, then close
            self.closing = True
            self._flush()
        except NodeDead:
            self.abort("client node crashed")
        finally:
            if not self.closed and not self.closing:
                self.abort("client node crashed")
