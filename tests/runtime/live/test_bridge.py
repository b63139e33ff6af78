"""LiveBridge: a real TCP connection on 127.0.0.1 enters the simulated network as a client node —
bytes go both ways with the network's latency, the network's faults act on the client's link
(those made to the `clients` group too, for connections accepted later), and a broker's kill
resets the real connection."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from kafkasim.runtime.api import NetworkError, Stream
from kafkasim.runtime.live.bridge import CLIENTS
from kafkasim.runtime.live.world import live_world
from kafkasim.runtime.sim.world import SimWorld

pytestmark = pytest.mark.real


def frame(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def read_frame(sock: socket.socket) -> bytes:
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            raise ConnectionError("closed")
        head += chunk
    size, body = int.from_bytes(head, "big"), b""
    while len(body) < size:
        body += sock.recv(size - len(body))
    return body


class Echo:
    """A simulated server node answering each frame with b'echo:' + it."""

    def __init__(self) -> None:
        self.world, self.loop, self.bridge = live_world(seed=5, trace_out=None)
        node = self.world.add_node("srv")
        self.port = self.bridge.bind("srv")
        rt = node.runtime

        async def handle(stream: Stream) -> None:
            try:
                while True:
                    await stream.write(frame(b"echo:" + await stream.read_frame(1 << 20)))
            except NetworkError:
                stream.close()

        async def serve() -> None:
            await rt.net.serve("0.0.0.0", self.port, handle)
        rt.spawn(serve())
        self.loop.start_thread()

    def connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        return sock

    def call(self, fn):  # type: ignore[no-untyped-def]
        return self.loop.call(fn)


@pytest.fixture
def echo() -> Iterator[Echo]:
    e = Echo()
    try:
        yield e
    finally:
        e.loop.stop()
        e.bridge.close()
        e.loop.close()


def world_of(e: Echo) -> SimWorld:
    return e.world


def test_bytes_cross_the_simulated_network_both_ways(echo: Echo) -> None:
    sock = echo.connect()
    sock.sendall(frame(b"a") + frame(b"b" * 100_000))
    assert read_frame(sock) == b"echo:a"
    assert read_frame(sock) == b"echo:" + b"b" * 100_000
    assert echo.call(lambda: sorted(echo.bridge.conns)) == ["client-1"]
    sock.close()
    assert echo.loop.wait_for(lambda: not echo.bridge.conns, 5)  # the real FIN closed it in the world


def test_a_partition_of_the_clients_group_holds_bytes_until_healed(echo: Echo) -> None:
    net = echo.world.net
    echo.call(lambda: net.partition([CLIENTS], ["srv"]))  # before this client even connects
    sock = echo.connect()
    sock.settimeout(0.8)
    sock.sendall(frame(b"held"))
    with pytest.raises(socket.timeout):
        read_frame(sock)
    echo.call(lambda: net.unpartition([CLIENTS], ["srv"]))
    sock.settimeout(5)
    assert read_frame(sock) == b"echo:held"  # retransmitted once the path came back
    sock.close()


def test_a_killed_server_resets_the_real_connection(echo: Echo) -> None:
    sock = echo.connect()
    sock.sendall(frame(b"x"))
    assert read_frame(sock) == b"echo:x"
    t0 = time.monotonic()
    echo.call(lambda: echo.world.nodes["srv"].crash("kill"))
    with pytest.raises((ConnectionResetError, ConnectionError)):
        read_frame(sock)
    assert time.monotonic() - t0 < 15  # at once, not after a timeout (loose: the machine may be shared)
    sock.close()


def test_a_powered_off_server_is_silent_until_it_restarts_then_resets(echo: Echo) -> None:
    sock = echo.connect()
    sock.sendall(frame(b"x"))
    assert read_frame(sock) == b"echo:x"
    echo.call(lambda: echo.world.nodes["srv"].crash("power"))
    sock.settimeout(0.8)
    sock.sendall(frame(b"lost"))  # the machine is off: no answer, no reset
    with pytest.raises(socket.timeout):
        read_frame(sock)
    echo.call(lambda: echo.world.nodes["srv"].restart())
    sock.settimeout(5)
    sock.sendall(frame(b"after"))  # the rebooted host knows nothing of this connection: RST
    with pytest.raises((ConnectionResetError, ConnectionError)):
        read_frame(sock)
    sock.close()
