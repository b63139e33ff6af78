"""BrokerConnection's ApiVersions exchange has request.timeout.ms, as any request in Kafka's
NetworkClient: a broker that accepted the connection and then lost power (crash-swarm seeds
power-loss-fsync-swarm 304 and 321, power-loss-default-flush-swarm 307, 314 and 331 once a
rebooted machine answers with an RST) answers nothing, and the client must give up, close the
connection and try again rather than wait for good."""

from __future__ import annotations

import io
from typing import Any

import pytest

from kafkasim.client.connection import BrokerConnection
from kafkasim.runtime.api import NetworkError, RuntimeTimeout, Stream
from kafkasim.runtime.sim.world import SimWorld

pytestmark = pytest.mark.unit


async def _silent(stream: Stream) -> None:
    try:
        while True:
            await stream.read_frame(1 << 20)  # takes the ApiVersions request, answers nothing
    except NetworkError:
        stream.close()


def test_an_unanswered_api_versions_times_out_and_closes_the_connection() -> None:
    world = SimWorld(2, trace_out=io.StringIO())
    broker = world.add_node("broker-0").runtime
    client = world.add_node("client").runtime
    broker.spawn(broker.net.serve("broker-0", 9092, _silent), name="listen")
    out: dict[str, Any] = {}

    async def main() -> None:
        conn = BrokerConnection(client, "broker-0", 9092, "c")
        t0 = client.monotonic_ms()
        try:
            await conn.connect(1000.0)
            out["r"] = "connected"
        except RuntimeTimeout:
            out["r"] = "timeout"
        out["after_ms"] = client.monotonic_ms() - t0
        out["closed"] = conn.closed

    task = client.spawn(main(), name="main")
    world.run(60_000.0)
    assert task.done(), "the connect never returned"
    assert out["r"] == "timeout" and out["closed"]
    assert 1000.0 <= out["after_ms"] < 1010.0
