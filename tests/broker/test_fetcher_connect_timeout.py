"""Issue 18 (nemesis-mixed seed 25): a follower's fetcher that starts connecting to its leader
across a network partition gives up after socket.connection.setup.timeout.ms (10 s, Kafka's
BrokerBlockingSender NetworkClient), not replica.socket.timeout.ms (30 s) — otherwise every
partition the thread serves (one that must truncate included) waits long after the heal."""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest

from kafkasim.broker.config import ReplicationConfig
from kafkasim.broker.replica_fetcher import ReplicaFetcherThread
from kafkasim.broker.zk.zk_data import BrokerInfo
from kafkasim.runtime.api import RuntimeTimeout
from kafkasim.runtime.sim.world import SimWorld

pytestmark = pytest.mark.sim


def test_the_fetcher_connect_times_out_after_the_connection_setup_timeout() -> None:
    world = SimWorld(3, trace_out=io.StringIO())
    follower = world.add_node("broker-0").runtime
    world.add_node("broker-1")
    rm = SimpleNamespace(rt=follower, replication=ReplicationConfig(), broker_id=0, inter_broker_security=None)
    thread = ReplicaFetcherThread(SimpleNamespace(rm=rm), BrokerInfo(1, "broker-1", 9092, None))  # type: ignore[arg-type]
    world.net.partition(["broker-0"], ["broker-1"])
    outcome: list[float] = []

    async def main() -> None:
        t0 = follower.monotonic_ms()
        try:
            await thread._ensure_connected()
        except RuntimeTimeout:
            outcome.append(follower.monotonic_ms() - t0)

    task = follower.spawn(main(), name="main")
    while not task.done() and world.now_ms() < 60_000:
        world.run(world.now_ms() + 500.0)
    assert outcome == [10_000.0]
