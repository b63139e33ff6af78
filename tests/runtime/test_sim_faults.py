"""Sim-only: the fault models the real world cannot show on demand — a partition expiring a
ZooKeeper session, and what a power loss leaves on a SimFileSystem."""

from __future__ import annotations

from typing import Any

import pytest
from runtime_worlds import Ctx, SimHarness

from kafkasim.runtime.api import WatchEvent

pytestmark = pytest.mark.unit

SESSION_MS = 3_000


def test_partition_from_zookeeper_expires_the_session() -> None:
    async def main(ctx: Ctx) -> dict[str, Any]:
        assert ctx.sim is not None
        observer = await ctx.rt.coordination.connect(SESSION_MS)
        broker = await ctx.node("broker").coordination.connect(SESSION_MS)
        states: list[str] = []
        broker.add_session_listener(lambda ev: states.append(ev.state))
        await broker.create("/brokers", makepath=True)
        await broker.create("/brokers/1", b"b1", ephemeral=True)
        gone = ctx.rt.future()

        def on_delete(ev: WatchEvent) -> None:
            gone.set_result((ev.type, ctx.rt.monotonic_ms()))

        await observer.exists("/brokers/1", watch=on_delete)
        cut_at = ctx.rt.monotonic_ms()
        ctx.sim.net.partition(["broker"], ["zookeeper"])
        await ctx.rt.sleep(SESSION_MS / 2)
        still_there = await observer.exists("/brokers/1") is not None  # before the timeout
        event, at = await gone
        ctx.sim.net.heal()
        await ctx.rt.sleep(2 * SESSION_MS)  # the broker's pinger gets through and learns
        return {"still_there_before_timeout": still_there, "event": event,
                "expired_after_timeout": at - cut_at > SESSION_MS,
                "expired_within_timeout_plus_tick": at - cut_at < SESSION_MS + 500,
                "ephemeral": await observer.exists("/brokers/1"), "states": states}

    assert SimHarness(seed=3).run(main) == {
        "still_there_before_timeout": True, "event": "deleted", "expired_after_timeout": True,
        "expired_within_timeout_plus_tick": True, "ephemeral": None,
        "states": ["suspended", "expired"]}


async def write_files(ctx: Ctx) -> dict[str, bytes]:
    """On node "disk": a durable base, unsynced appends, and an entry never made durable."""
    rt = ctx.node("disk")
    rt.fs.mkdir("d")
    await rt.fs.fsync_dir("")
    f = rt.fs.open("d/log")
    f.append(b"durable|")
    await f.fsync()
    await rt.fs.fsync_dir("d")
    for chunk in (b"one|", b"two|", b"three|"):
        f.append(chunk)
    g = rt.fs.open("d/new")  # data synced, directory entry not
    g.append(b"synced data, unsynced entry")
    await g.fsync()
    return {"log": f.read(0, 100), "new": g.read(0, 100)}


def expected_after_crash(durable: bytes, pending: list[bytes], ev: dict[str, Any], got: bytes) -> bool:
    """Does `got` match what the traced crash decision says survives of d/log? (An independent
    model of each mode for this small file: every write is inside sector 0 and page 0.)"""
    live = durable + b"".join(pending)
    mode = ev["mode"]
    if mode in ("keep_all", "drop_all", "prefix"):
        kept = {"keep_all": len(pending), "drop_all": 0}.get(mode, ev["kept_ops"])
        return ev["kept_ops"] == kept and got == durable + b"".join(pending[:kept])
    if mode in ("torn_sector", "torn_page"):
        # No sector/page boundary falls inside a write of a few bytes: the torn write keeps nothing.
        before = durable + b"".join(pending[:ev["torn_op"]])
        return ev["torn_at"] == len(before) and got == before
    if mode == "reorder":
        page = live if ev["pages_kept"] else durable
        return ev["pages_dirty"] == 1 and got == (page + bytes(len(live)))[:ev["size"]]
    if mode == "inode_first":
        # The new size is durable; past what the kept operations wrote, the blocks hold junk.
        before = durable + b"".join(pending[:ev["kept_ops"]])
        tail = got[len(before):]
        # Stale blocks held the file's durable bytes once; page-cache bytes never reached one.
        stale = (durable * (len(tail) // len(durable) + 1))[:len(tail)]
        junk_ok = {"zeros": tail == bytes(len(tail)), "stale": tail == stale,
                   "garbage": len(tail) == ev["filled_bytes"]}[ev["fill"]]
        return len(got) == len(live) and got.startswith(before) and junk_ok
    return False


@pytest.mark.parametrize("seed", range(24))
def test_power_loss_keeps_fsynced_data_and_resolves_the_rest_as_traced(seed: int) -> None:
    harness = SimHarness(seed=seed)

    async def main(ctx: Ctx) -> dict[str, Any]:
        before = await write_files(ctx)
        assert ctx.sim is not None
        ctx.sim.nodes["disk"].crash("power")
        rt = ctx.sim.nodes["disk"].restart()
        log = rt.fs.open("d/log", create=False).read(0, 100)
        new = rt.fs.open("d/new", create=False).read(0, 100) if rt.fs.exists("d/new") else None
        return {"before": before, "log": log, "new": new}

    out = harness.run(main)
    [file_ev] = [e for e in harness.trace_events("disk_crash_file") if e["path"] == "d/log"]
    entry_evs = {e["path"]: e for e in harness.trace_events("disk_crash_entry")}
    assert out["before"]["log"] == b"durable|one|two|three|"
    pending = [b"one|", b"two|", b"three|"]
    assert file_ev["pending_ops"] == 3
    # fsynced bytes always survive; of the rest exactly what the traced decision says does.
    assert out["log"].startswith(b"durable|")
    assert expected_after_crash(b"durable|", pending, file_ev, out["log"]), (file_ev, out["log"])
    assert file_ev["size"] == len(out["log"])
    assert "d/log" not in entry_evs  # its entry was made durable by fsync_dir("d")
    survives = entry_evs["d/new"]["survives"]
    assert out["new"] == (b"synced data, unsynced entry" if survives else None)


def test_power_loss_modes_all_occur_across_seeds() -> None:
    """The parametrized test above is only meaningful if the seeds exercise every mode that
    applies to appends (the storage work grew the crash model from keep_all/drop_all/prefix to
    torn writes, reordered write-back and inode-first; dropped truncates need a truncate and
    are covered in tests/storage/test_sim_crash_model.py)."""
    modes: set[str] = set()
    entries: set[bool] = set()
    for seed in range(24):
        h = SimHarness(seed=seed)

        async def main(ctx: Ctx) -> None:
            await write_files(ctx)
            assert ctx.sim is not None
            ctx.sim.nodes["disk"].crash("power")

        h.run(main)
        modes |= {e["mode"] for e in h.trace_events("disk_crash_file")}
        entries |= {e["survives"] for e in h.trace_events("disk_crash_entry")}
    assert modes == {"keep_all", "drop_all", "prefix", "torn_sector", "torn_page", "reorder", "inode_first"}
    assert entries == {True, False}


def test_process_kill_keeps_the_page_cache() -> None:
    async def main(ctx: Ctx) -> dict[str, Any]:
        before = await write_files(ctx)
        assert ctx.sim is not None
        ctx.kill("disk")  # kill -9: the OS survives, so unsynced writes and entries do too
        rt = ctx.sim.nodes["disk"].restart()
        return {"same": before == {"log": rt.fs.open("d/log", create=False).read(0, 100),
                                   "new": rt.fs.open("d/new", create=False).read(0, 100)}}

    h = SimHarness()
    assert h.run(main) == {"same": True}
    assert h.trace_events("disk_crash_file") == [] and h.trace_events("disk_crash_entry") == []


def test_same_seed_same_trace_hash() -> None:
    """Determinism of the harness itself: a sim run is a pure function of its seed."""
    def run(seed: int) -> str:
        h = SimHarness(seed=seed)

        async def main(ctx: Ctx) -> None:
            await write_files(ctx)
            assert ctx.sim is not None
            ctx.sim.nodes["disk"].crash("power")
            ctx.sim.nodes["disk"].restart()

        h.run(main)
        assert h.last is not None
        return h.last.trace.hexdigest()

    assert run(5) == run(5)
    assert run(5) != run(6)


def test_a_stale_fill_holds_only_bytes_that_reached_the_platter() -> None:
    """inode_first with a stale fill: the blocks past what the kept writes wrote hold bytes the
    file once held durably, never bytes still in the page cache (txn-coordinator-failover seed
    275: copies of the file's own unsynced future batches made its recovered log skip offsets)."""
    stale_runs = 0
    for seed in range(60):
        harness = SimHarness(seed=seed)

        async def main(ctx: Ctx) -> bytes:
            await write_files(ctx)
            assert ctx.sim is not None
            ctx.sim.nodes["disk"].disk.crash_modes = ("inode_first",)
            ctx.sim.nodes["disk"].crash("power")
            rt = ctx.sim.nodes["disk"].restart()
            return rt.fs.open("d/log", create=False).read(0, 100)

        got = harness.run(main)
        [ev] = [e for e in harness.trace_events("disk_crash_file") if e["path"] == "d/log"]
        if ev["fill"] != "stale" or not ev["filled_bytes"]:
            continue
        stale_runs += 1
        tail = got[len(got) - ev["filled_bytes"]:]
        assert set(tail) <= set(b"durable|") and b"three" not in tail, (seed, got)
    assert stale_runs > 0, "no seed drew a stale fill: the test checked nothing"
