"""power-loss-default-flush-swarm seed 804 (scenarios/regressions/power-loss-default-flush-swarm-
seed-804.toml): a Reelect event queued for the old ZooKeeper session ran in the new session before
the Expire queued behind it, won /controller there, ran a failover, and Expire then resigned it;
the /controller znode (the new session's) stayed, so the next election found this broker already
controller and it claimed to lead with no context (STALE_BROKER_EPOCH to every AlterPartition),
for good. Kafka's beforeInitializingSession clears the queue and puts Expire (clearAndPut), and
the new session waits until Expire is being processed (awaitProcessing)."""

from __future__ import annotations

import io
from types import SimpleNamespace
from typing import Any

import pytest

from kafkasim.broker.config import BrokerConfig
from kafkasim.broker.controller.kafka_controller import KafkaController
from kafkasim.broker.zk import zk_data as Z
from kafkasim.broker.zk.zookeeper_client import ZooKeeperClient
from kafkasim.runtime.sim.world import SimWorld

pytestmark = pytest.mark.sim


def _run_until(world: SimWorld, limit_ms: float) -> None:
    while world.now_ms() < limit_ms:
        world.run(world.now_ms() + 100.0)


def test_an_event_queued_for_the_old_session_does_not_run_after_it_expired() -> None:
    world = SimWorld(3, trace_out=io.StringIO())
    rt = world.add_node("broker-1").runtime
    other = world.add_node("broker-0").runtime
    state: dict[str, Any] = {}

    async def setup() -> None:
        # broker-0 is the controller; broker-1's controller starts and finds it.
        zk0 = ZooKeeperClient(other, 6000)
        await zk0.connect()
        await zk0.create(Z.CONTROLLER, Z.controller_json(0, 0), ephemeral=True)
        for path in Z.PERSISTENT_PATHS:
            await zk0.create(path, makepath=True)
        zk1 = ZooKeeperClient(rt, 6000)
        await zk1.connect()
        controller = KafkaController(rt, BrokerConfig.from_properties({"broker.id": 1}), zk1,
                                     SimpleNamespace(controller_id=-1), _no_op)  # type: ignore[arg-type]
        controller.startup()
        state.update(zk0=zk0, zk1=zk1, controller=controller)

    rt.spawn(setup(), name="setup")
    _run_until(world, 1000.0)
    controller: KafkaController = state["controller"]
    assert controller.active_controller_id == 0

    async def busy() -> None:  # the event thread is busy past the new session's start
        await rt.sleep(2000)

    controller.event_manager.put("Busy", busy)
    other.spawn(state["zk0"].delete(Z.CONTROLLER), name="broker-0 resigns")  # queues Reelect
    _run_until(world, 1200.0)
    world.zookeeper.expire(state["zk1"].session_id)   # queues Expire (and, later, re-registration)
    _run_until(world, 10_000.0)
    # The old code: Reelect ran in the new session, Expire resigned it, the re-election found the
    # broker's own znode: active, with no channel manager (no failover) -- stuck for good.
    assert controller.is_active and controller.channel_manager is not None


async def _no_op() -> None:
    return None
