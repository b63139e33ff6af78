"""Issue 18 (nemesis-mixed seed 42): a ZooKeeper operation that meets ConnectionLoss is sent
again until ZooKeeper is reachable, as KafkaZkClient.retryRequestsUntilConnected does; callers
(the controller's failover, triggerControllerMove's deleteController) never see the error."""

from __future__ import annotations

import io

import pytest

from kafkasim.broker.zk.zookeeper_client import ZooKeeperClient
from kafkasim.runtime.api import ConnectionLossError
from kafkasim.runtime.sim.world import SimWorld

pytestmark = pytest.mark.sim


def _run(world: SimWorld, rt, coro, limit_ms: float = 60_000.0):  # type: ignore[no-untyped-def]
    task = rt.spawn(coro, name="main")
    while not task.done() and world.now_ms() < limit_ms:
        world.run(world.now_ms() + 100.0)
    assert task.done(), "still running"
    return task._done.result()


def test_an_operation_waits_out_a_partition_from_zookeeper_shorter_than_the_session() -> None:
    world = SimWorld(7, trace_out=io.StringIO())
    rt = world.add_node("broker-1").runtime

    async def main() -> tuple[float, bytes]:
        zk = ZooKeeperClient(rt, 6000)
        await zk.connect()
        await zk.create("/controller", b"1", ephemeral=True)
        world.net.partition(["broker-1"], ["zookeeper"])
        rt.call_later(4000.0, world.net.heal)
        t0 = rt.monotonic_ms()
        await zk.delete("/controller")  # before the fix: ConnectionLossError after 2 s
        waited = rt.monotonic_ms() - t0
        try:
            await zk.get("/controller")
        except Exception as exc:  # NoNode: the delete went through
            assert not isinstance(exc, ConnectionLossError)
            return waited, b""
        return waited, b"still there"

    waited, left = _run(world, rt, main())
    assert left == b""
    assert waited >= 4000.0
