"""SimNetwork after a power loss (power-loss-fsync-swarm seeds 312 and 674, BUGGIFY): a peer's
connection to a machine that lost power hears nothing while the machine is off, and an RST at
its first send once the machine is back up (the rebooted TCP stack knows no such connection,
RFC 793 "Reset Generation"), as the live bridge already does for a real client
(tests/runtime/live/test_bridge.py). Before, the bytes vanished for good and the client waited
out request.timeout.ms (30 s) on a broker that had been up for seconds."""

from __future__ import annotations

import io
from typing import Any

import pytest

from kafkasim.runtime.api import ConnectionReset, NetworkError, RuntimeTimeout, Stream
from kafkasim.runtime.sim.world import SimWorld

pytestmark = pytest.mark.unit


def _frame(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


async def _echo(stream: Stream) -> None:
    try:
        while True:
            await stream.write(_frame(b"echo:" + await stream.read_frame(1024)))
    except NetworkError:
        stream.close()


def _outcome(world: SimWorld, rt: Any, stream: Stream, within_ms: float) -> str:
    """What one request on `stream` meets within `within_ms` of simulated time."""
    result: dict[str, str] = {}

    async def ask() -> None:
        await stream.write(_frame(b"x"))
        try:
            result["r"] = (await rt.wait_for(stream.read_frame(1024), within_ms)).decode()
        except RuntimeTimeout:
            result["r"] = "timeout"
        except ConnectionReset:
            result["r"] = "reset"

    task = rt.spawn(ask(), name="ask")
    world.run(world.now_ms() + within_ms + 50.0)
    assert task.done()
    return result["r"]


def _setup() -> tuple[SimWorld, Any, Stream]:
    world = SimWorld(5, trace_out=io.StringIO())
    server = world.add_node("srv")
    client = world.add_node("cli").runtime
    server.runtime.spawn(server.runtime.net.serve("srv", 9092, _echo), name="listen")
    world.run(10.0)
    box: dict[str, Stream] = {}

    async def connect() -> None:
        box["s"] = await client.net.connect("srv", 9092, 1000.0)
    client.spawn(connect(), name="connect")
    world.run(world.now_ms() + 50.0)
    return world, client, box["s"]


def test_a_power_lost_peer_is_silent_while_off_and_resets_once_back_up() -> None:
    world, client, stream = _setup()
    assert _outcome(world, client, stream, 500.0) == "echo:x"
    world.nodes["srv"].crash("power")
    assert _outcome(world, client, stream, 2000.0) == "timeout"  # off: nothing, no RST
    world.nodes["srv"].restart()
    assert _outcome(world, client, stream, 2000.0) == "reset"  # before the fix: timeout


def test_bytes_sent_while_the_peer_is_off_meet_the_reset_when_it_comes_back() -> None:
    world, client, stream = _setup()
    world.nodes["srv"].crash("power")
    result: dict[str, str] = {}

    async def ask() -> None:  # one request, sent while off, its answer awaited across the reboot
        await stream.write(_frame(b"x"))
        try:
            await stream.read_frame(1024)
            result["r"] = "answer"
        except ConnectionReset:
            result["r"] = f"reset at {client.monotonic_ms():.0f}"

    client.spawn(ask(), name="ask")
    restart_at = world.now_ms() + 3000.0
    world.run(restart_at)
    assert result == {}
    world.nodes["srv"].restart()
    world.run(restart_at + 1000.0)
    assert result["r"].startswith("reset at ")
    assert float(result["r"].split()[-1]) <= restart_at + 210.0  # the next retransmission after it
