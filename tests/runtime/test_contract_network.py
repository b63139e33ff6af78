"""Contract: streams, framing and connection failures — identical in both worlds."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from runtime_worlds import Ctx, World

from kafkasim.runtime.api import ConnectionClosed, ConnectionRefused, FrameTooLarge, NodeRuntime, Server, Stream

pytestmark = pytest.mark.contract

MAX_FRAME = 1 << 16
TIMEOUT_MS = 2_000


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


async def echo_server(rt: NodeRuntime, errors: list[str]) -> Server:
    """Echo each frame back; on a bad frame record the error and close that one connection."""
    async def handle(s: Stream) -> None:
        try:
            while True:
                await s.write(frame(await s.read_frame(MAX_FRAME)))
        except FrameTooLarge as exc:
            errors.append(f"FrameTooLarge: {exc}")
        except ConnectionClosed:
            errors.append("closed")
        finally:
            s.close()
    return await rt.net.serve(rt.host, 0, handle)


def test_serve_connect_and_frames_round_trip_in_order(world: World) -> None:
    async def main(ctx: Ctx) -> list[Any]:
        srv_rt = ctx.node("server")
        server = await echo_server(srv_rt, [])
        assert server.port > 0  # port 0 means "any free port", and the server says which
        c = await ctx.rt.net.connect(srv_rt.host, server.port, TIMEOUT_MS)
        payloads = [bytes([i % 251]) * (i * 37 % 3000) for i in range(200)]
        for p in payloads:  # pipelined: all written before any is read
            await c.write(frame(p))
        got = [await c.read_frame(MAX_FRAME) for _ in payloads]
        ok = got == payloads
        c.close()
        return [ok, c.is_closed(), c.peer[1] == server.port]

    assert world.run(main) == [True, True, True]


def test_read_exactly_spans_and_splits_writes(world: World) -> None:
    async def main(ctx: Ctx) -> list[bytes]:
        srv_rt, got = ctx.node("server"), ctx.rt.future()

        async def handle(s: Stream) -> None:
            got.set_result([await s.read_exactly(5), await s.read_exactly(2)])

        server = await srv_rt.net.serve(srv_rt.host, 0, handle)
        c = await ctx.rt.net.connect(srv_rt.host, server.port, TIMEOUT_MS)
        await c.write(b"abc")
        await c.write(memoryview(b"defg"))
        return await got  # type: ignore[no-any-return]

    assert world.run(main) == [b"abcde", b"fg"]


@pytest.mark.parametrize("size", [MAX_FRAME + 1, -1])
def test_oversized_or_negative_frame_raises_frame_too_large(world: World, size: int) -> None:
    async def main(ctx: Ctx) -> list[Any]:
        srv_rt, errors = ctx.node("server"), []
        server = await echo_server(srv_rt, errors)
        c = await ctx.rt.net.connect(srv_rt.host, server.port, TIMEOUT_MS)
        await c.write(struct.pack(">i", size) + b"x" * 16)
        with pytest.raises(ConnectionClosed):  # the server closes that connection
            await c.read_exactly(1)
        # ...and keeps serving everyone else.
        c2 = await ctx.rt.net.connect(srv_rt.host, server.port, TIMEOUT_MS)
        await c2.write(frame(b"still here"))
        return [errors[0].split(":")[0], await c2.read_frame(MAX_FRAME)]

    assert world.run(main) == ["FrameTooLarge", b"still here"]


def test_peer_close_is_connection_closed_after_buffered_data(world: World) -> None:
    async def main(ctx: Ctx) -> list[Any]:
        srv_rt = ctx.node("server")

        async def handle(s: Stream) -> None:
            await s.write(b"bye")
            s.close()

        server = await srv_rt.net.serve(srv_rt.host, 0, handle)
        c = await ctx.rt.net.connect(srv_rt.host, server.port, TIMEOUT_MS)
        data = await c.read_exactly(3)  # data sent before the FIN is still delivered
        with pytest.raises(ConnectionClosed):
            await c.read_exactly(1)
        return [data]

    assert world.run(main) == [b"bye"]


def test_connect_to_a_closed_port_is_refused(world: World) -> None:
    async def main(ctx: Ctx) -> str:
        srv_rt = ctx.node("server")
        server = await echo_server(srv_rt, [])
        port = server.port
        server.close()  # nobody listens there any more
        try:
            await ctx.rt.net.connect(srv_rt.host, port, TIMEOUT_MS)
        except ConnectionRefused:
            return "refused"
        return "connected"

    assert world.run(main) == "refused"


def test_server_close_keeps_existing_streams(world: World) -> None:
    async def main(ctx: Ctx) -> bytes:
        srv_rt = ctx.node("server")
        server = await echo_server(srv_rt, [])
        c = await ctx.rt.net.connect(srv_rt.host, server.port, TIMEOUT_MS)
        server.close()
        await c.write(frame(b"ping"))
        return await c.read_frame(MAX_FRAME)

    assert world.run(main) == b"ping"


def test_killing_the_server_node_breaks_client_reads(world: World) -> None:
    async def main(ctx: Ctx) -> list[Any]:
        srv_rt = ctx.node("server")
        server = await echo_server(srv_rt, [])
        c = await ctx.rt.net.connect(srv_rt.host, server.port, TIMEOUT_MS)
        await c.write(frame(b"1"))
        first = await c.read_frame(MAX_FRAME)
        reader = ctx.rt.spawn(c.read_exactly(4))  # blocked in a read when the peer dies
        await ctx.rt.sleep(5)
        ctx.kill("server")
        idx = await ctx.rt.wait_first([reader], TIMEOUT_MS)
        outcome = "hung"
        if idx == 0:
            try:
                await reader
                outcome = "read data"
            except ConnectionClosed:  # ConnectionReset is a ConnectionClosed
                outcome = "closed"
        refused = False
        try:
            await ctx.rt.net.connect(srv_rt.host, server.port, TIMEOUT_MS)
        except ConnectionRefused:
            refused = True
        return [first, outcome, refused]

    assert world.run(main) == [b"1", "closed", True]


def test_sendfile_sends_a_file_region_between_writes(world: World) -> None:
    """Stream.sendfile (os.sendfile in the real world) interleaves in order with write()."""
    async def main(ctx: Ctx) -> bytes:
        srv_rt, got = ctx.node("server"), ctx.rt.future()
        fh = srv_rt.fs.open("segment.log")
        fh.append(bytes(range(256)) * 64)  # 16 KiB of known bytes

        async def handle(s: Stream) -> None:
            await s.read_exactly(1)
            await s.write(b"<")
            await s.sendfile(fh, 1000, 5000)
            await s.write(b">")
            s.close()

        server = await srv_rt.net.serve(srv_rt.host, 0, handle)
        c = await ctx.rt.net.connect(srv_rt.host, server.port, TIMEOUT_MS)
        await c.write(b"?")
        got.set_result(await c.read_exactly(5002))
        return got.result()

    data = world.run(main)
    assert data == b"<" + (bytes(range(256)) * 64)[1000:6000] + b">"
