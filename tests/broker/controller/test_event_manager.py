"""ControllerEventManager.clear_and_put, Kafka's clearAndPut as beforeInitializingSession uses it:
every queued event is preempted (never processed; an API request's asker gets
ControllerMovedError, as Kafka's preempt answers NOT_CONTROLLER) and `started` completes when
the new event begins processing."""

from __future__ import annotations

import io
from typing import Any

import pytest

from kafkasim.broker.controller.event_manager import ControllerEventManager, ControllerMovedError
from kafkasim.runtime.sim.world import SimWorld

pytestmark = pytest.mark.sim


def test_clear_and_put_preempts_the_queue_and_reports_when_processing_starts() -> None:
    world = SimWorld(1, trace_out=io.StringIO())
    rt = world.add_node("broker-0").runtime
    ran: list[str] = []
    seen: dict[str, Any] = {}

    async def on_error(ev: Any, exc: Exception) -> None:
        ran.append(f"error {ev.name}")

    manager = ControllerEventManager(rt, on_error)
    manager.start()

    def event(name: str, ms: float) -> Any:
        async def body() -> None:
            ran.append(name)
            await rt.sleep(ms)
        return body

    async def ask() -> None:
        try:
            await manager.put_and_wait("AlterPartition", event("AlterPartition", 0))
        except ControllerMovedError:
            seen["asker"] = "moved"

    async def main() -> None:
        manager.put("Busy", event("Busy", 500))
        await rt.sleep(1)                 # Busy is running
        manager.put("Reelect", event("Reelect", 0))
        rt.spawn(ask(), name="ask")
        await rt.sleep(1)
        ev = manager.clear_and_put("Expire", event("Expire", 0))
        assert ev.started is not None
        await ev.started
        seen["started_at"] = rt.monotonic_ms()

    rt.spawn(main(), name="main")
    world.run(2000.0)
    assert ran == ["Busy", "Expire"]
    assert seen["asker"] == "moved"
    assert seen["started_at"] >= 500.0   # not before Busy finished


def test_clear_and_put_on_a_stopped_manager_does_not_block() -> None:
    world = SimWorld(1, trace_out=io.StringIO())
    rt = world.add_node("broker-0").runtime

    async def on_error(ev: Any, exc: Exception) -> None:
        return None

    async def body() -> None:
        return None

    manager = ControllerEventManager(rt, on_error)
    manager.stop()   # the controller shut down; a session expiry after that must not hang
    ev = manager.clear_and_put("Expire", body)
    waited: list[float] = []

    async def waiter() -> None:
        await manager.await_processing(ev)
        waited.append(world.now_ms())

    rt.spawn(waiter(), name="session renewal")
    world.run(100.0)
    assert waited == [0.0]
