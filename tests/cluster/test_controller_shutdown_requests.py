"""A request waiting in the controller's event queue when the controller shuts down gets
Kafka's answer (the event is preempted with ControllerMovedException: the API says
NOT_CONTROLLER / STALE_CONTROLLER_EPOCH and the client retries elsewhere) instead of killing
the connection's task with an unhandled error — seen when `kafkasim cluster down` stopped a
controller while another broker's controlled shutdown was queued."""

from __future__ import annotations

from typing import Any

import pytest

from kafkasim.broker.controller.event_manager import ControllerEventManager, ControllerMovedError
from kafkasim.broker.controller_apis import _ask
from kafkasim.runtime.sim.world import SimWorld

pytestmark = pytest.mark.sim


async def _never(_ev: Any, _exc: Exception) -> None:
    raise AssertionError("no event may run: the manager was never started")


def test_a_queued_request_is_answered_when_the_controller_stops() -> None:
    world = SimWorld(1)
    rt = world.add_node("broker-0").runtime
    manager = ControllerEventManager(rt, _never)  # not started: events stay queued
    answers: list[Any] = []
    raw_errors: list[BaseException] = []

    async def body() -> str:
        return "processed"

    async def asker() -> None:
        answers.append(await _ask(manager.put_and_wait("ControlledShutdown", body)))

    async def raw_asker() -> None:
        try:
            await manager.put_and_wait("AlterPartitionReceived", body)
        except ControllerMovedError as exc:
            raw_errors.append(exc)

    rt.spawn(asker(), name="asker")
    rt.spawn(raw_asker(), name="raw asker")
    world.run(10)
    assert answers == [] and len(manager.queue) == 2
    manager.stop()
    world.run(20)
    assert answers == [None]
    assert len(raw_errors) == 1 and "AlterPartitionReceived" in str(raw_errors[0])
    assert world.failures == []
