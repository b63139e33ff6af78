"""power-loss-fsync-swarm seed 575 (BUGGIFY): a controller event still running when the broker's
ZooKeeper session expired went on in the new session. Kafka 3.9's controller handler
(KafkaController.startup's StateChangeHandler) does `eventManager.clearAndPut(Expire)` and
`awaitProcessing()` in beforeInitializingSession, so the new session opens only once the event
thread has begun Expire: an event in progress ends on the expired session, and queued events of
the old session are dropped (API requests answered NOT_CONTROLLER)."""

from __future__ import annotations

import io
from typing import Any

import pytest

from kafkasim.broker.config import BrokerConfig
from kafkasim.broker.controller.event_manager import ControllerMovedError
from kafkasim.broker.controller.kafka_controller import KafkaController
from kafkasim.broker.metadata_cache import MetadataCache
from kafkasim.broker.zk.zookeeper_client import ZooKeeperClient
from kafkasim.runtime.api import SessionExpiredError
from kafkasim.runtime.sim.world import SimWorld

pytestmark = pytest.mark.sim


def _run(world: SimWorld, rt: Any, coro: Any, limit_ms: float = 60_000.0) -> Any:
    task = rt.spawn(coro, name="main")
    while not task.done() and world.now_ms() < limit_ms:
        world.run(world.now_ms() + 100.0)
    assert task.done(), "still running"
    return task._done.result()


def test_an_event_running_at_session_expiry_never_uses_the_new_session() -> None:
    world = SimWorld(3, trace_out=io.StringIO())
    rt = world.add_node("broker-1").runtime
    seen: dict[str, Any] = {"order": []}

    async def noop_register() -> None:
        seen["order"].append("register")

    async def main() -> dict[str, Any]:
        zk = ZooKeeperClient(rt, 6000)
        await zk.connect()
        old_session = zk.session_id
        controller = KafkaController(rt, BrokerConfig(broker_id=1), zk, MetadataCache(), noop_register)
        original_expire = controller._process_expire

        async def expire() -> None:
            seen["order"].append("expire")
            await original_expire()
        controller._process_expire = expire  # type: ignore[method-assign]
        controller.startup()

        async def in_progress() -> None:  # an election, say, waiting on ZooKeeper when the session ends
            await rt.sleep(2000.0)
            try:
                await zk.create("/probe", b"", ephemeral=True)
                seen["probe"] = "created"
            except SessionExpiredError:
                seen["probe"] = "session expired"
            seen["order"].append("in-progress ended")

        async def queued() -> None:
            seen["order"].append("queued ran")

        async def ask() -> None:  # an API request (AlterPartition, say) queued behind it
            try:
                await controller.event_manager.put_and_wait("Queued", queued)
                seen["queued answer"] = "processed"
            except ControllerMovedError:
                seen["queued answer"] = "NOT_CONTROLLER"

        controller.event_manager.put("InProgress", in_progress)
        await rt.sleep(100.0)
        rt.spawn(ask(), name="api request")
        await rt.sleep(10.0)
        world.zookeeper.expire_host("broker-1")
        await rt.sleep(5000.0)
        seen["new session"] = zk.session_id != old_session
        seen["probe exists"] = await zk.exists("/probe") is not None
        return seen

    out = _run(world, rt, main())
    assert out["new session"]
    assert out["probe"] == "session expired", "the running event reached the new session"
    assert not out["probe exists"]
    # the running event ends, then Expire, then the new session's RegisterBrokerAndReelect
    assert out["order"] == ["in-progress ended", "expire", "register"]
    assert out["queued answer"] == "NOT_CONTROLLER"  # dropped with the old session
