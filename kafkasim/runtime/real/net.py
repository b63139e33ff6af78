"""Real TCP streams on asyncio. Errors are translated into the seam's network exceptions so code
above the seam handles one vocabulary in both worlds."""

from __future__ import annotations

import asyncio
import socket
import struct
from typing import TYPE_CHECKING, Any

from kafkasim.runtime.api import (
    ConnectionClosed,
    ConnectionRefused,
    ConnectionReset,
    FileHandle,
    FrameTooLarge,
    Network,
    NodeDead,
    RuntimeTimeout,
    Server,
    Stream,
    StreamHandler,
)

if TYPE_CHECKING:
    from kafkasim.runtime.real.world import RealNode

_SIZE = struct.Struct(">i")


class RealStream(Stream):
    def __init__(self, node: RealNode, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._node, self._r, self._w = node, reader, writer
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.local = tuple(writer.get_extra_info("sockname")[:2])
        self.peer = tuple(writer.get_extra_info("peername")[:2])
        self._closed = False

    async def read_exactly(self, n: int) -> bytes:
        self._node.check()
        try:
            return await self._r.readexactly(n)
        except asyncio.IncompleteReadError as exc:
            raise ConnectionClosed(f"{self.peer} closed the connection") from exc
        except (ConnectionResetError, BrokenPipeError) as exc:
            raise ConnectionReset(str(exc)) from exc

    async def read_frame(self, max_bytes: int) -> bytes:
        (size,) = _SIZE.unpack(await self.read_exactly(4))
        if size < 0 or size > max_bytes:
            raise FrameTooLarge(f"frame of {size} bytes (limit {max_bytes})")
        return await self.read_exactly(size)

    async def write(self, data: bytes | bytearray | memoryview) -> None:
        self._node.check()
        if self._closed or self._w.is_closing():
            raise ConnectionClosed("write on a closed stream")
        try:
            self._w.write(data)
            await self._w.drain()
        except (ConnectionResetError, BrokenPipeError) as exc:
            raise ConnectionReset(str(exc)) from exc

    async def sendfile(self, fh: FileHandle, offset: int, count: int) -> None:
        """os.sendfile from the page cache straight to the socket (asyncio falls back to
        read + write only where the transport cannot)."""
        self._node.check()
        if self._closed or self._w.is_closing():
            raise ConnectionClosed("sendfile on a closed stream")
        fileobj = getattr(fh, "fileobj", None)
        if fileobj is None:
            await super().sendfile(fh, offset, count)
            return
        try:
            sent = await asyncio.get_running_loop().sendfile(self._w.transport, fileobj(), offset, count)
        except (ConnectionResetError, BrokenPipeError, ValueError, OSError) as exc:
            self.close()
            raise ConnectionReset(f"sendfile failed: {exc}") from exc
        if sent != count:  # the segment shrank under us: the frame would lie about its size
            self.close()
            raise ConnectionReset(f"file truncated during sendfile: {sent} of {count} bytes at {offset}")

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._w.close()

    def is_closed(self) -> bool:
        return self._closed or self._w.is_closing()


class RealServer(Server):
    def __init__(self, server: asyncio.base_events.Server, host: str, port: int) -> None:
        self._s, self.host, self.port = server, host, port

    def close(self) -> None:
        self._s.close()


class RealNetwork(Network):
    def __init__(self, node: RealNode) -> None:
        self._node = node
        self._servers: list[RealServer] = []
        self._streams: set[RealStream] = set()

    async def serve(self, host: str, port: int, handler: StreamHandler) -> Server:
        self._node.check()

        async def on_accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            if not self._node.alive():
                writer.close()
                return
            stream = RealStream(self._node, reader, writer)
            self._streams.add(stream)
            task = self._node.spawn(handler(stream), name=f"conn {stream.peer}")
            try:
                await task
            except BaseException:
                pass  # the node records its tasks' failures
            finally:
                self._streams.discard(stream)
                stream.close()

        srv = await asyncio.start_server(on_accept, host, port, reuse_address=True, limit=1 << 20)
        bound = srv.sockets[0].getsockname()
        server = RealServer(srv, bound[0], bound[1])
        self._servers.append(server)
        return server

    async def connect(self, host: str, port: int, timeout_ms: float) -> Stream:
        self._node.check()
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port, limit=1 << 20),
                                                    timeout_ms / 1000.0)
        except TimeoutError as exc:
            raise RuntimeTimeout(f"connect to {host}:{port} timed out after {timeout_ms} ms") from exc
        except ConnectionRefusedError as exc:
            raise ConnectionRefused(f"connection refused: {host}:{port}") from exc
        except OSError as exc:
            raise ConnectionRefused(f"connect to {host}:{port} failed: {exc}") from exc
        if not self._node.alive():
            writer.close()
            raise NodeDead(self._node.node)
        stream = RealStream(self._node, reader, writer)
        self._streams.add(stream)
        return stream

    def kill(self) -> None:
        for s in self._servers:
            s.close()
        for st in list(self._streams):
            st.close()
        self._streams.clear()


__all__: list[Any] = ["RealNetwork", "RealStream", "RealServer"]
