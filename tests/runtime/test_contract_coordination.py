"""Contract: the ZooKeeper operations Kafka uses — the same bodies against SimZooKeeper, the
real world's embedded store, and a real ZooKeeper 3.8 through kazoo."""

from __future__ import annotations

import re
from typing import Any, Awaitable, Callable

import pytest
from runtime_worlds import Ctx, World

from kafkasim.runtime.api import (
    BadVersionError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    WatchEvent,
    ZkClient,
    ZOp,
)

pytestmark = pytest.mark.contract

SESSION_MS = 6_000
SETTLE_MS = 300  # long enough for a stray second watch delivery to show up


def with_client(body: Callable[[Ctx, ZkClient, str], Awaitable[Any]]) -> Callable[[Ctx], Awaitable[Any]]:
    """Run `body(ctx, client, root)` with a session and a fresh root znode; always clean up."""
    async def main(ctx: Ctx) -> Any:
        zk = await ctx.rt.coordination.connect(SESSION_MS)
        try:
            await zk.create(ctx.root, b"", makepath=True)
            return await body(ctx, zk, ctx.root)
        finally:
            try:
                await zk.delete(ctx.root, recursive=True)
            finally:
                await zk.close()
    return main


def test_create_get_set_with_version_cas(zk_world: World) -> None:
    async def body(ctx: Ctx, zk: ZkClient, root: str) -> list[Any]:
        p = await zk.create(f"{root}/n", b"v0")
        data, st = await zk.get(p)
        out: list[Any] = [p == f"{root}/n", data, st.version, st.data_length, st.ephemeral_owner]
        st1 = await zk.set(p, b"v1", version=0)
        out += [st1.version, st1.mzxid > st.mzxid]
        with pytest.raises(BadVersionError):
            await zk.set(p, b"stale", version=0)
        st2 = await zk.set(p, b"v2")  # -1: unconditional
        out += [st2.version, (await zk.get(p))[0]]
        with pytest.raises(BadVersionError):
            await zk.delete(p, version=0)
        await zk.delete(p, version=2)
        out.append(await zk.exists(p))
        return out

    assert zk_world.run(with_client(body)) == [True, b"v0", 0, 2, 0, 1, True, 2, b"v2", None]


def test_errors_exists_nonode_notempty(zk_world: World) -> None:
    async def body(ctx: Ctx, zk: ZkClient, root: str) -> str:
        await zk.create(f"{root}/a")
        with pytest.raises(NodeExistsError):
            await zk.create(f"{root}/a")
        with pytest.raises(NoNodeError):
            await zk.create(f"{root}/missing/child")  # parent missing, no makepath
        with pytest.raises(NoNodeError):
            await zk.get(f"{root}/missing")
        with pytest.raises(NoNodeError):
            await zk.set(f"{root}/missing", b"")
        with pytest.raises(NoNodeError):
            await zk.delete(f"{root}/missing")
        with pytest.raises(NoNodeError):
            await zk.get_children(f"{root}/missing")
        await zk.create(f"{root}/a/b")
        with pytest.raises(NotEmptyError):
            await zk.delete(f"{root}/a")
        return "ok"

    assert zk_world.run(with_client(body)) == "ok"


def test_makepath_and_recursive_delete(zk_world: World) -> None:
    async def body(ctx: Ctx, zk: ZkClient, root: str) -> list[Any]:
        await zk.create(f"{root}/x/y/z", b"deep", makepath=True)
        out: list[Any] = [(await zk.get(f"{root}/x/y/z"))[0], (await zk.exists(f"{root}/x")).num_children]  # type: ignore[union-attr]
        await zk.delete(f"{root}/x", recursive=True)
        out += [await zk.exists(f"{root}/x"), await zk.get_children(root)]
        return out

    assert zk_world.run(with_client(body)) == [b"deep", 1, None, []]


def test_children_sorted_and_sequential_names(zk_world: World) -> None:
    async def body(ctx: Ctx, zk: ZkClient, root: str) -> list[Any]:
        for name in ("c", "a", "b"):
            await zk.create(f"{root}/{name}")
        children = await zk.get_children(root)
        await zk.create(f"{root}/q")
        s1 = await zk.create(f"{root}/q/item-", b"", sequential=True)
        s2 = await zk.create(f"{root}/q/item-", b"", sequential=True)
        m1 = re.fullmatch(rf"{re.escape(root)}/q/item-(\d{{10}})", s1)
        m2 = re.fullmatch(rf"{re.escape(root)}/q/item-(\d{{10}})", s2)
        assert m1 and m2, (s1, s2)
        return [children, int(m1.group(1)), int(m2.group(1)) - int(m1.group(1))]

    # A fresh parent's counter starts at 0 (ZooKeeper's cversion) and steps by one.
    assert zk_world.run(with_client(body)) == [["a", "b", "c"], 0, 1]


def test_ephemerals_vanish_when_their_session_closes(zk_world: World) -> None:
    async def body(ctx: Ctx, zk: ZkClient, root: str) -> list[Any]:
        other = await ctx.node("broker").coordination.connect(SESSION_MS)
        p = await other.create(f"{root}/broker-1", b"id", ephemeral=True)
        st = await zk.exists(p)
        seen_owner = st is not None and st.ephemeral_owner == other.session_id != 0
        with pytest.raises(NoChildrenForEphemeralsError):
            await zk.create(f"{p}/child")
        await other.close()
        return [seen_owner, zk.session_id != other.session_id, await zk.exists(p)]

    assert zk_world.run(with_client(body)) == [True, True, None]


def test_data_watch_fires_once_on_set(zk_world: World) -> None:
    async def body(ctx: Ctx, zk: ZkClient, root: str) -> list[Any]:
        rt, events, first = ctx.rt, [], ctx.rt.future()

        def watcher(ev: WatchEvent) -> None:
            events.append((ev.type, ev.path))
            first.set_result(None)

        await zk.create(f"{root}/w", b"0")
        await zk.get(f"{root}/w", watch=watcher)
        await zk.set(f"{root}/w", b"1")
        assert await rt.wait_first([first], 5_000) == 0, "watch never fired"
        await zk.set(f"{root}/w", b"2")  # one-shot: no second event without re-arming
        await rt.sleep(SETTLE_MS)
        return events

    got = zk_world.run(with_client(body))
    assert len(got) == 1 and got[0][0] == "changed" and got[0][1].endswith("/w")


def test_exists_watch_fires_on_create_and_child_watch_on_new_child(zk_world: World) -> None:
    async def body(ctx: Ctx, zk: ZkClient, root: str) -> list[Any]:
        rt, events, both = ctx.rt, [], [ctx.rt.future(), ctx.rt.future()]

        def on_data(ev: WatchEvent) -> None:
            events.append(("data", ev.type, ev.path == f"{root}/later"))
            both[0].set_result(None)

        def on_child(ev: WatchEvent) -> None:
            events.append(("child", ev.type, ev.path == root))
            both[1].set_result(None)

        assert await zk.exists(f"{root}/later", watch=on_data) is None
        assert await zk.get_children(root, watch=on_child) == []
        await zk.create(f"{root}/later")
        for f in both:
            assert await rt.wait_first([f], 5_000) == 0, f"watches so far: {events}"
        await zk.create(f"{root}/another")  # the child watch was one-shot too
        await rt.sleep(SETTLE_MS)
        return sorted(events)

    assert zk_world.run(with_client(body)) == [("child", "child", True), ("data", "created", True)]


def test_a_pipelined_get_children_answers_with_a_watch(zk_world: World) -> None:
    """get_children_pipelined: queued now, answered once a later request of the session went
    (the simulated world rides it on that request; the others send it when awaited) — the
    children as of then, and a child watch that fires once."""
    async def body(ctx: Ctx, zk: ZkClient, root: str) -> list[Any]:
        rt, events, fired = ctx.rt, [], ctx.rt.future()
        await zk.create(f"{root}/a")

        def on_child(ev: WatchEvent) -> None:
            events.append((ev.type, ev.path == root))
            fired.set_result(None)

        reading = zk.get_children_pipelined(root, on_child)
        await zk.create(f"{root}/b")
        children = sorted(await reading)
        await zk.create(f"{root}/c")
        assert await rt.wait_first([fired], 5_000) == 0
        await zk.create(f"{root}/d")   # one-shot
        await rt.sleep(SETTLE_MS)
        return [children, events]

    assert zk_world.run(with_client(body)) == [["a", "b"], [("child", True)]]


def test_multi_is_all_or_nothing(zk_world: World) -> None:
    async def body(ctx: Ctx, zk: ZkClient, root: str) -> list[Any]:
        await zk.create(f"{root}/taken", b"t")
        with pytest.raises(NodeExistsError):
            await zk.multi([ZOp("create", f"{root}/new", b"n"), ZOp("set", f"{root}/taken", b"x"),
                            ZOp("create", f"{root}/taken")])
        rolled_back = [await zk.exists(f"{root}/new"), (await zk.get(f"{root}/taken"))[0]]
        with pytest.raises(BadVersionError):
            await zk.multi([ZOp("check", f"{root}/taken", version=7), ZOp("create", f"{root}/new")])
        results = await zk.multi([ZOp("check", f"{root}/taken", version=0),
                                  ZOp("create", f"{root}/new", b"n"),
                                  ZOp("set", f"{root}/taken", b"y", version=0),
                                  ZOp("delete", f"{root}/new")])
        after = [await zk.exists(f"{root}/new"), (await zk.get(f"{root}/taken"))[0]]
        shape = [results[0] is True, results[1] == f"{root}/new", results[2].version, results[3] is True]
        return [rolled_back, after, shape]

    assert zk_world.run(with_client(body)) == [[None, b"t"], [None, b"y"], [True, True, 1, True]]


def test_a_killed_nodes_ephemerals_vanish_within_the_session_timeout(zk_world: World) -> None:
    """kill -9 of a broker must free its /brokers/ids entry (that is how the controller learns
    of the death): at once or by session expiry, but within the session timeout + slack."""
    async def body(ctx: Ctx, zk: ZkClient, root: str) -> list[Any]:
        broker = await ctx.node("broker").coordination.connect(SESSION_MS)
        p = await broker.create(f"{root}/broker-1", b"b1", ephemeral=True)
        gone = ctx.rt.future()
        await zk.exists(p, watch=lambda ev: gone.set_result(ev.type))
        ctx.kill("broker")
        idx = await ctx.rt.wait_first([gone], SESSION_MS + 2_000)
        return [idx, gone.result() if idx == 0 else None, await zk.exists(p)]

    assert zk_world.run(with_client(body)) == [0, "deleted", None]
