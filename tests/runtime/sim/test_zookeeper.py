"""SimZooKeeper's pipelined reads: a get_children_pipelined rides on the session's next request
and costs the simulated network nothing — the same delays drawn, the same answer times — which
is what lets the broker's quota manager read its znodes without moving a quota-less run's
schedule."""

from __future__ import annotations

from typing import Any

import pytest

from kafkasim.runtime.api import SessionExpiredError
from kafkasim.runtime.sim.world import SimWorld

pytestmark = pytest.mark.sim


def _run(pipelined: bool) -> dict[str, Any]:
    world = SimWorld(5)
    rt = world.add_node("n").runtime
    out: dict[str, Any] = {}

    async def main() -> None:
        zk = await rt.coordination.connect(6_000)
        await zk.create("/r/a", makepath=True)
        reading = zk.get_children_pipelined("/r") if pipelined else None
        await zk.create("/r/b")                     # the request it rides on
        out["created_at"] = rt.monotonic_ms()
        out["children"] = await reading if reading is not None else None
        out["answered_at"] = rt.monotonic_ms()
        await zk.get("/r/a")
        out["next_at"] = rt.monotonic_ms()
        out["next_draw"] = world.net.rng.random()   # the network's stream: no draw more or less
        await zk.close()
        closed = zk.get_children_pipelined("/r")
        try:
            await closed
        except SessionExpiredError:
            out["after_close"] = "expired"

    rt.spawn(main())
    world.run(10_000)
    return out


def test_a_pipelined_read_rides_on_the_next_request_at_no_cost() -> None:
    plain, piped = _run(False), _run(True)
    assert piped["children"] == ["a", "b"]                  # read at the server after the create
    assert piped["answered_at"] == piped["created_at"]      # answered with it
    for key in ("created_at", "next_at", "next_draw"):
        assert piped[key] == plain[key], key
    assert piped["after_close"] == plain["after_close"] == "expired"


def test_a_session_known_expired_fails_every_later_operation_at_once_even_cut_off() -> None:
    """ZooKeeper's ClientCnxn answers SESSIONEXPIRED to any operation on a handle whose session
    expired, reachable or not; before, a partition made it ConnectionLoss after timeout/3, which
    ZooKeeperClient retries until the partition heals (holding up its session renewal, which
    waits for the controller's running event to end on the old session)."""
    world = SimWorld(5)
    rt = world.add_node("n").runtime
    out: dict[str, Any] = {}

    async def main() -> None:
        zk = await rt.coordination.connect(6_000)
        world.zookeeper.expire(zk.session_id)
        try:
            await zk.get("/")
        except SessionExpiredError:
            out["first"] = "expired"
        world.net.partition(["n"], ["zookeeper"])
        t0 = rt.monotonic_ms()
        try:
            await zk.get("/")
        except SessionExpiredError:
            out["cut off"] = ("expired", rt.monotonic_ms() - t0)
        except Exception as exc:
            out["cut off"] = (type(exc).__name__, rt.monotonic_ms() - t0)

    rt.spawn(main())
    world.run(10_000)
    assert out == {"first": "expired", "cut off": ("expired", 0.0)}
