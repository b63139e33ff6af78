"""DelayedOperationPurgatory in simulated time: an operation completes on the event that makes
its condition true, expires at its timeout, may be watched under several keys, and completes
once whatever happens after; the awaited form wakes its task on events and expires at the
deadline."""

from __future__ import annotations

from typing import Any

import pytest

from kafkasim.broker.purgatory import DelayedOperation, DelayedOperationPurgatory, TopicKey, TopicPartitionOperationKey
from kafkasim.runtime.api import NodeRuntime
from kafkasim.runtime.sim.world import SimWorld

pytestmark = pytest.mark.sim

A, B = TopicPartitionOperationKey("t", 0), TopicPartitionOperationKey("t", 1)


class Counted(DelayedOperation):
    """Done once `state["ready"]` is true; records what ran, when."""

    def __init__(self, rt: NodeRuntime, state: dict[str, Any], timeout_ms: float, name: str = "op") -> None:
        super().__init__(timeout_ms)
        self.rt, self.state, self.name = rt, state, name
        self.events: list[tuple[str, float]] = []
        self.checks = 0

    def try_complete(self) -> bool:
        self.checks += 1
        return self.force_complete() if self.state.get("ready") else False

    def on_complete(self) -> None:
        self.events.append(("complete", self.rt.monotonic_ms()))

    def on_expiration(self) -> None:
        self.events.append(("expired", self.rt.monotonic_ms()))


def _run(body: Any, until_ms: float = 10_000) -> None:
    world = SimWorld(1)
    rt = world.add_node("n").runtime
    task = rt.spawn(body(rt))
    world.run(until_ms)
    assert task.done() and world.failures == [], world.failures


def test_completes_on_the_event_and_not_again() -> None:
    out: dict[str, Any] = {}

    async def body(rt: NodeRuntime) -> None:
        purgatory, state = DelayedOperationPurgatory(rt, "test"), {}
        op = Counted(rt, state, 1000)
        assert not purgatory.try_complete_else_watch(op, [A])
        await rt.sleep(10)
        assert purgatory.check_and_complete(A) == 0  # condition false: still watched
        state["ready"] = True
        await rt.sleep(10)
        assert purgatory.check_and_complete(A) == 1
        assert purgatory.check_and_complete(A) == 0 and purgatory.num_watched() == 0
        assert not op.force_complete()
        await rt.sleep(2000)  # the cancelled timeout does not expire it
        out["events"] = op.events

    _run(body)
    assert out["events"] == [("complete", 20.0)]


def test_completes_at_once_when_the_condition_already_holds() -> None:
    async def body(rt: NodeRuntime) -> None:
        purgatory = DelayedOperationPurgatory(rt, "test")
        op = Counted(rt, {"ready": True}, 1000)
        assert purgatory.try_complete_else_watch(op, [A])
        assert purgatory.num_watched() == 0 and op.events == [("complete", 0.0)]

    _run(body)


def test_expires_at_its_timeout() -> None:
    out: dict[str, Any] = {}

    async def body(rt: NodeRuntime) -> None:
        purgatory = DelayedOperationPurgatory(rt, "test")
        op = Counted(rt, {}, 300)
        purgatory.try_complete_else_watch(op, [A])
        await rt.sleep(1000)
        out["events"], out["watched"] = op.events, purgatory.num_watched()

    _run(body)
    assert out["events"] == [("complete", 300.0), ("expired", 300.0)]  # Kafka's run: onComplete, then onExpiration
    assert out["watched"] == 0


def test_watched_under_several_keys_completes_once_from_either() -> None:
    async def body(rt: NodeRuntime) -> None:
        purgatory, state = DelayedOperationPurgatory(rt, "test"), {}
        op = Counted(rt, state, 1000)
        purgatory.try_complete_else_watch(op, [A, B])
        assert purgatory.num_watched() == 2
        state["ready"] = True
        assert purgatory.check_and_complete(B) == 1
        assert purgatory.num_watched() == 0  # gone from A's watchers too
        assert purgatory.check_and_complete(A) == 0
        assert op.events == [("complete", 0.0)]

    _run(body)


def test_check_and_complete_all_goes_in_watch_order() -> None:
    async def body(rt: NodeRuntime) -> None:
        purgatory, state = DelayedOperationPurgatory(rt, "test"), {}
        order: list[str] = []
        ops = [Counted(rt, state, 1000, name) for name in ("first", "second", "third")]
        for op, keys in zip(ops, ([TopicKey("y")], [TopicKey("x"), TopicKey("y")], [TopicKey("x")]), strict=True):
            purgatory.try_complete_else_watch(op, keys)
            op.on_complete = lambda op=op: order.append(op.name)  # type: ignore[method-assign]
        state["ready"] = True
        assert purgatory.check_and_complete_all() == 3
        assert order == ["first", "second", "third"]

    _run(body)


def test_cancel_all_drops_watchers_without_running_them() -> None:
    out: dict[str, Any] = {}

    async def body(rt: NodeRuntime) -> None:
        purgatory = DelayedOperationPurgatory(rt, "test")
        op = Counted(rt, {}, 100)
        purgatory.try_complete_else_watch(op, [A])
        purgatory.cancel_all()
        await rt.sleep(500)
        out["events"], out["watched"] = op.events, purgatory.num_watched()

    _run(body)
    assert out == {"events": [], "watched": 0}


def test_await_completion_wakes_on_events_and_completes() -> None:
    out: dict[str, Any] = {}

    async def body(rt: NodeRuntime) -> None:
        purgatory, state = DelayedOperationPurgatory(rt, "test"), {}
        op = Counted(rt, state, 1000)

        async def events() -> None:
            await rt.sleep(100)
            purgatory.check_and_complete(A)  # a wake-up whose check fails: waits on
            await rt.sleep(100)
            state["ready"] = True
            purgatory.check_and_complete(B)

        rt.spawn(events())
        out["completed"] = await purgatory.await_completion(op, [A, B], rt.monotonic_ms() + 1000)
        out["at"], out["events"], out["checks"] = rt.monotonic_ms(), op.events, op.checks
        out["watched"] = purgatory.num_watched()

    _run(body)
    assert out["completed"] and out["at"] == 200.0 and out["events"] == [("complete", 200.0)]
    assert out["checks"] == 3 and out["watched"] == 0  # at the start and after each wake-up


def test_await_completion_expires_at_the_deadline() -> None:
    out: dict[str, Any] = {}

    async def body(rt: NodeRuntime) -> None:
        purgatory = DelayedOperationPurgatory(rt, "test")
        op = Counted(rt, {}, 250)
        out["completed"] = await purgatory.await_completion(op, [A], rt.monotonic_ms() + 250)
        out["events"], out["watched"] = op.events, purgatory.num_watched()

    _run(body)
    assert out == {"completed": False, "events": [("complete", 250.0), ("expired", 250.0)], "watched": 0}
