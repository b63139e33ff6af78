"""The SimFileSystem crash model and its faults without a crash: every mode keeps what was
fsynced, resolves the rest exactly as traced, and the fault-control API fires when asked."""

from __future__ import annotations

import errno
from typing import Any

import pytest
from runtime_worlds import Ctx, SimHarness

from kafkasim.runtime.sim.filesystem import PAGE_BYTES, SECTOR_BYTES, SimDisk

pytestmark = pytest.mark.unit


def _disk(ctx: Ctx, name: str = "disk") -> SimDisk:
    assert ctx.sim is not None
    ctx.node(name)
    return ctx.sim.nodes[name].disk


def _crash_and_read(ctx: Ctx, path: str, name: str = "disk") -> bytes | None:
    assert ctx.sim is not None
    ctx.sim.nodes[name].crash("power")
    rt = ctx.sim.nodes[name].restart()
    if not rt.fs.exists(path):
        return None
    f = rt.fs.open(path, create=False)
    return f.read(0, f.size())


async def _durable_base(ctx: Ctx, body: bytes) -> Any:
    rt = ctx.node("disk")
    rt.fs.mkdir("d")
    await rt.fs.fsync_dir("")
    f = rt.fs.open("d/f")
    f.append(body)
    await f.fsync()
    await rt.fs.fsync_dir("d")
    return f


def _modes_for(body: bytes, ops: Any, seeds: range) -> dict[str, list[tuple[dict[str, Any], bytes | None, bytes]]]:
    """Run the same unsynced operations under many seeds; group (event, after-crash, live) by mode."""
    out: dict[str, list[tuple[dict[str, Any], bytes | None, bytes]]] = {}
    for seed in seeds:
        h = SimHarness(seed=seed)

        async def main(ctx: Ctx) -> tuple[bytes | None, bytes]:
            f = await _durable_base(ctx, body)
            ops(f)
            live = f.read(0, f.size())
            return _crash_and_read(ctx, "d/f"), live

        got, live = h.run(main)
        [ev] = [e for e in h.trace_events("disk_crash_file") if e["path"] == "d/f"]
        out.setdefault(ev["mode"], []).append((ev, got, live))
    return out


def _big_appends(f: Any) -> None:
    for i in range(4):
        f.append(bytes([0x41 + i]) * 3000)


def test_every_mode_keeps_the_durable_prefix_and_matches_its_trace() -> None:
    base = b"D" * 1000
    by_mode = _modes_for(base, _big_appends, range(60))
    assert set(by_mode) == {"keep_all", "drop_all", "prefix", "torn_sector", "torn_page", "reorder", "inode_first"}
    writes = [(1000 + 3000 * i, bytes([0x41 + i]) * 3000) for i in range(4)]
    for mode, runs in by_mode.items():
        for ev, got, live in runs:
            assert got is not None and got[:1000] == base, mode
            assert ev["size"] == len(got)
            if mode in ("keep_all", "drop_all", "prefix"):
                assert got == base + b"".join(w for _, w in writes[:ev["kept_ops"]])
            elif mode in ("torn_sector", "torn_page"):
                unit = SECTOR_BYTES if mode == "torn_sector" else PAGE_BYTES
                j, cut = ev["torn_op"], ev["torn_at"]
                pos, w = writes[j]
                assert ev["granularity"] == unit and cut % unit == 0 or cut == pos
                assert pos <= cut < pos + len(w)
                assert got == base + b"".join(x for _, x in writes[:j]) + w[:cut - pos]
            elif mode == "reorder":
                assert ev["size"] in (len(base), len(live))
                for p in range(0, len(got), PAGE_BYTES):  # each page: all new or all old
                    page = got[p:p + PAGE_BYTES]
                    new = (live + bytes(PAGE_BYTES))[p:p + len(page)]
                    old = (base + bytes(len(live)))[p:p + len(page)]
                    assert page in (new, old), (p, ev)
            elif mode == "inode_first":
                before = base + b"".join(w for _, w in writes[:ev["kept_ops"]])
                assert len(got) == len(live) and got.startswith(before)
                if ev["fill"] == "zeros":
                    assert got[len(before):] == bytes(len(got) - len(before))


def test_torn_writes_cut_at_sector_and_page_boundaries_inside_the_write() -> None:
    by_mode = _modes_for(b"x" * 100, lambda f: f.append(b"y" * 20000), range(80))
    cuts = {m: {ev["torn_at"] for ev, _, _ in by_mode.get(m, [])} for m in ("torn_sector", "torn_page")}
    assert cuts["torn_sector"] and all(c % 512 == 0 and 100 < c < 20100 for c in cuts["torn_sector"])
    assert cuts["torn_page"] and all(c % 4096 == 0 and 100 < c < 20100 for c in cuts["torn_page"])


def test_dropped_truncate_keeps_the_old_tail_beyond_new_writes() -> None:
    def ops(f: Any) -> None:
        f.truncate(50)            # recovery cutting a bad tail ...
        f.append(b"N" * 10)       # ... then new appends at the cut
    by_mode = _modes_for(b"o" * 100, ops, range(80))
    runs = by_mode["dropped_truncate"]
    outcomes = {got for _, got, _ in runs}
    assert outcomes <= {b"o" * 50 + b"N" * 10, b"o" * 50 + b"N" * 10 + b"o" * 40}
    assert b"o" * 50 + b"N" * 10 + b"o" * 40 in outcomes  # the truncate was lost, the write was not
    assert all(ev["dropped_truncates"] in (0, 1) for ev, _, _ in runs)


def test_inode_first_fills_zeros_garbage_and_stale_bytes() -> None:
    by_mode = _modes_for(b"0123456789" * 100, _big_appends, range(150))
    fills = {ev["fill"] for ev, _, _ in by_mode["inode_first"]}
    assert fills == {"zeros", "garbage", "stale"}
    for ev, got, live in by_mode["inode_first"]:
        assert got is not None and len(got) == len(live) and ev["size"] == len(live)


def test_unsynced_directory_changes_vanish_or_survive_as_traced() -> None:
    seen: set[tuple[bool, bool]] = set()
    for seed in range(40):
        h = SimHarness(seed=seed)

        async def main(ctx: Ctx) -> dict[str, Any]:
            rt = ctx.node("disk")
            rt.fs.mkdir("d")
            await rt.fs.fsync_dir("")
            f = rt.fs.open("d/ckpt.tmp")
            f.append(b"new")
            await f.fsync()
            rt.fs.rename("d/ckpt.tmp", "d/ckpt")  # no fsync_dir("d")
            rt.fs.mkdir("e/sub")                   # two new directories, never made durable
            g = rt.fs.open("e/sub/x")
            g.append(b"x")
            await g.fsync()
            await rt.fs.fsync_dir("e/sub")          # x's entry is durable, e and e/sub are not
            assert ctx.sim is not None
            ctx.sim.nodes["disk"].crash("power")
            rt2 = ctx.sim.nodes["disk"].restart()
            return {n: rt2.fs.exists(n) for n in ("d/ckpt", "d/ckpt.tmp", "e", "e/sub", "e/sub/x")}

        out = h.run(main)
        evs = [(e["change"], e["path"], e["survives"]) for e in h.trace_events("disk_crash_entry")]
        # The journal in order; a prefix of it survives (metadata is committed in order).
        assert [(c, p) for c, p, _ in evs] == [("create", "d/ckpt.tmp"), ("rename", "d/ckpt"),
                                               ("mkdir", "e"), ("mkdir", "e/sub")]
        kept = sum(s for _, _, s in evs)
        assert [s for _, _, s in evs] == [i < kept for i in range(4)]
        # The rename carries the inode: the file is at exactly one of its names or, if neither
        # survived, gone (its create never became durable).
        assert out["d/ckpt"] == (kept >= 2)
        assert out["d/ckpt.tmp"] == (kept == 1)
        assert out["e"] == (kept >= 3) and out["e/sub"] == (kept >= 4)
        assert out["e/sub/x"] == out["e/sub"]  # durable in e/sub, but gone with its directory
        seen.add(kept)
    assert seen == {0, 1, 2, 3, 4}


def test_process_kill_keeps_unsynced_data_and_entries() -> None:
    async def main(ctx: Ctx) -> Any:
        rt = ctx.node("disk")
        rt.fs.mkdir("d")
        f = rt.fs.open("d/f")
        f.append(b"page cache")
        ctx.kill("disk")
        assert ctx.sim is not None
        rt2 = ctx.sim.nodes["disk"].restart()
        return rt2.fs.open("d/f", create=False).read(0, 100)

    assert SimHarness().run(main) == b"page cache"


# ---------------------------------------------------------------- faults without a crash
def test_eio_on_write_writes_nothing_and_is_traced() -> None:
    h = SimHarness()

    async def main(ctx: Ctx) -> Any:
        disk = _disk(ctx)
        f = ctx.node("disk").fs.open("f")
        f.append(b"ok")
        disk.fail_next_write()
        with pytest.raises(OSError) as exc:
            f.append(b"lost")
        f.append(b"|again")
        return exc.value.errno, f.read(0, 100)

    assert h.run(main) == (errno.EIO, b"ok|again")
    assert [(e["op"], e["fault"]) for e in h.trace_events("disk_fault")] == [("write", "eio")]


def test_failed_fsync_drops_the_dirty_pages() -> None:
    h = SimHarness()

    async def main(ctx: Ctx) -> Any:
        disk = _disk(ctx)
        f = ctx.node("disk").fs.open("f")
        f.append(b"synced|")
        await f.fsync()
        f.append(b"dirty")
        disk.fail_next_fsync()
        with pytest.raises(OSError) as exc:
            await f.fsync()
        after_error = f.read(0, 100)
        await f.fsync()  # the next fsync "succeeds" but the data is gone for good
        assert ctx.sim is not None
        ctx.sim.nodes["disk"].crash("power")
        rt = ctx.sim.nodes["disk"].restart()
        return exc.value.errno, after_error, rt.fs.open("f", create=False).read(0, 100)

    assert h.run(main) == (errno.EIO, b"synced|", b"synced|")
    [ev] = h.trace_events("disk_fault")
    assert (ev["op"], ev["fault"], ev["dropped_ops"]) == ("fsync", "eio", 1)


def test_eio_rates_fire_from_the_disk_rng_deterministically() -> None:
    def run(seed: int) -> list[bool]:
        async def main(ctx: Ctx) -> list[bool]:
            _disk(ctx).faults.eio_rate = 0.3
            f = ctx.node("disk").fs.open("f")
            out = []
            for _ in range(40):
                try:
                    f.append(b"x")
                    out.append(True)
                except OSError:
                    out.append(False)
            return out
        return SimHarness(seed=seed).run(main)  # type: ignore[no-any-return]

    a = run(1)
    assert a == run(1) and a != run(2)
    assert 0 < a.count(False) < 40


def test_enospc_stores_what_fits_then_fails() -> None:
    async def main(ctx: Ctx) -> Any:
        disk = _disk(ctx)
        disk.capacity_bytes = 100
        f = ctx.node("disk").fs.open("f")
        f.append(b"a" * 60)
        with pytest.raises(OSError) as exc:
            f.append(b"b" * 60)
        return exc.value.errno, f.size(), f.read(0, 200)[-5:]

    assert SimHarness().run(main) == (errno.ENOSPC, 100, b"bbbbb")


def test_read_bitflips_change_one_bit_of_the_returned_bytes_only() -> None:
    h = SimHarness()

    async def main(ctx: Ctx) -> Any:
        disk = _disk(ctx)
        f = ctx.node("disk").fs.open("f")
        f.append(bytes(64))
        disk.read_bitflip_rate = 1.0
        flipped = f.read(0, 64)
        disk.read_bitflip_rate = 0.0
        return flipped, f.read(0, 64)

    flipped, clean = h.run(main)
    assert clean == bytes(64)
    assert sum(bin(b).count("1") for b in flipped) == 1
    [ev] = h.trace_events("disk_fault")
    assert ev["fault"] == "bitflip" and flipped[ev["pos"]] == 1 << ev["bit"]


def test_corrupt_flips_a_stored_bit_durably() -> None:
    async def main(ctx: Ctx) -> Any:
        disk = _disk(ctx)
        f = ctx.node("disk").fs.open("f")
        f.append(b"\x00\x00")
        await f.fsync()
        await ctx.node("disk").fs.fsync_dir("")
        disk.corrupt("f", 1, 3)
        assert ctx.sim is not None
        ctx.sim.nodes["disk"].crash("power")
        rt = ctx.sim.nodes["disk"].restart()
        return rt.fs.open("f", create=False).read(0, 2)

    assert SimHarness().run(main) == b"\x00\x08"


def test_slow_fsync_takes_the_configured_virtual_time() -> None:
    async def main(ctx: Ctx) -> float:
        _disk(ctx).fsync_ms = (500.0, 500.0)
        rt = ctx.node("disk")
        f = rt.fs.open("f")
        f.append(b"x")
        t0 = rt.monotonic_ms()
        await f.fsync()
        return rt.monotonic_ms() - t0

    assert SimHarness().run(main) == pytest.approx(500.0)


def test_preallocation_is_sparse_and_reads_zeros() -> None:
    async def main(ctx: Ctx) -> Any:
        f = ctx.node("disk").fs.open("idx")
        f.truncate(10 * 1024 * 1024)
        f.pwrite(16, b"\x01")
        return f.size(), f.read(0, 24), len(_disk(ctx).files["idx"].data)

    size, head, materialized = SimHarness().run(main)
    assert size == 10 * 1024 * 1024 and head == bytes(16) + b"\x01" + bytes(7) and materialized == 17
