"""Property: any sequence of appends, flushes, rolls, DeleteRecords and retention on a simulated
disk, then a power loss in any crash mode, then recovery — the recovered log is a contiguous run
of what was appended (byte for byte: it never serves a byte that was not written), it holds
everything that was fsynced, its indexes agree with its data, and it takes new appends.

A second crash after more appends (recovery's own writes exposed to the crash model) must keep
the same promises."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kafkasim.records.batch import Record, build_batch, iter_batches
from kafkasim.runtime.sim.filesystem import CRASH_MODES
from kafkasim.runtime.sim.world import SimWorld
from kafkasim.storage.log import Log, LogConfig
from kafkasim.storage.log_manager import LogManager, LogManagerConfig
from kafkasim.storage.verify import check_log

pytestmark = pytest.mark.property

DIR = "logs/t-0"

op = st.one_of(
    st.tuples(st.just("append"), st.integers(1, 4), st.sampled_from([1, 30, 400, 3000]), st.integers(-50, 200)),
    st.tuples(st.just("flush")),
    st.tuples(st.just("roll")),
    st.tuples(st.just("sleep"), st.integers(1, 500)),
    st.tuples(st.just("delete_records"), st.floats(0, 1)),
    st.tuples(st.just("retention")),
)


@dataclass
class Model:
    """What was appended: offset -> the exact bytes of the batch starting there."""

    batches: dict[int, bytes] = field(default_factory=dict)
    durable_end: int = 0       # every offset below was fsynced (the log's recovery point)
    start: int = 0             # the log start offset before the crash
    end: int = 0               # the log end offset before the crash


def _run(world: SimWorld, coro: Any, limit_ms: float = 600_000) -> Any:
    """Drive `coro` on a separate "driver" node: the log's node can then lose power right after
    the last operation, before any background job of the log (a roll's flush) got to run."""
    if "driver" not in world.nodes:
        world.add_node("driver")
    task = world.nodes["driver"].runtime.spawn(coro, name="test")
    while not task.done():
        assert world.now_ms() < limit_ms, "storage test hung"
        world.run(world.now_ms() + 1000)
    assert world.failures == [], world.failures
    return task._done.result()  # type: ignore[attr-defined]


def _config(segment_bytes: int, interval: int) -> LogConfig:
    return LogConfig(segment_bytes=segment_bytes, index_interval_bytes=interval, segment_index_bytes=4096,
                     retention_ms=50_000, file_delete_delay_ms=1000)


async def _apply(log: Log, ops: list[tuple[Any, ...]], model: Model, counter: list[int]) -> None:
    rt = log.rt
    for o in ops:
        kind = o[0]
        if kind == "append":
            _, n, size, dt = o
            i = counter[0]
            counter[0] += 1
            ts = rt.now_ms() + dt
            buf = bytearray(build_batch([Record(ts + j, f"k{(i + j) % 5}".encode(), bytes([i % 251]) * size)
                                         for j in range(n)]))
            info = log.append_as_leader(buf, list(iter_batches(buf, validate=True)), leader_epoch=1)
            model.batches[info.first_offset] = bytes(buf)
        elif kind == "flush":
            await log.flush()
        elif kind == "roll":
            if log.active_segment.size:
                log.roll()
        elif kind == "sleep":
            await rt.sleep(o[1])
        elif kind == "delete_records":
            target = log.log_start_offset + int(o[1] * (log.high_watermark - log.log_start_offset))
            log.delete_records(target)
        elif kind == "retention":
            log.delete_old_segments()
    model.durable_end = max(model.durable_end, log.recovery_point)
    model.start, model.end = log.log_start_offset, log.log_end_offset


def _check(log: Log, model: Model) -> list[int]:
    problems = check_log(log)
    assert problems == [], problems
    served: list[int] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        assert data, f"nothing served at {offset} below the log end offset {log.log_end_offset}"
        for pos, h in iter_batches(data):
            assert model.batches.get(h.base_offset) == bytes(data[pos:pos + h.size_in_bytes]), \
                f"batch at {h.base_offset} is not what was appended there"
            served.append(h.base_offset)
            offset = h.last_offset + 1
    appended = sorted(model.batches)
    # A contiguous run of what was appended, from the batch holding the log start offset ...
    if served:
        i = appended.index(served[0])
        assert served == appended[i:i + len(served)]
        assert served[0] <= log.log_start_offset
    # ... to the log end offset, which covers everything fsynced and nothing never appended ...
    assert model.durable_end <= log.log_end_offset <= model.end
    # ... and the log start offset never moves past where the log had it.
    assert log.log_start_offset <= max(model.start, log.segments[0].base_offset)
    return served


# derandomize: CI explores a fixed set of 800 examples, so a run fails only on a change in behaviour. The
# random search found the resurrected-segment gap (fixed; pinned by the last test of this file); after the
# fix, 30,000 random examples found nothing more — drop `derandomize` (and raise max_examples) to search afresh.
@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@example(seed=0, ops=[("append", 1, 1, 0)] * 3, more=[("flush",), ("append", 2, 1, 0)], mode=None,
         segment_bytes=300, interval=0, full_recovery=False)  # inode-first with stale, valid-looking batches
@example(seed=2, ops=[("flush",)], more=[("append", 1, 1, 0), ("sleep", 1), ("delete_records", 1.0), ("flush",)],
         mode=None, segment_bytes=300, interval=0, full_recovery=False)  # two leader-epoch-checkpoint writes at once
@given(seed=st.integers(0, 2**32), ops=st.lists(op, min_size=1, max_size=40),
       more=st.lists(op, max_size=12), mode=st.sampled_from((None,) + CRASH_MODES),
       segment_bytes=st.sampled_from([300, 700, 2000, 1 << 20]), interval=st.sampled_from([0, 100, 4096]),
       full_recovery=st.booleans())
def test_crash_then_recovery_keeps_a_prefix_with_everything_fsynced(
        seed: int, ops: list[tuple[Any, ...]], more: list[tuple[Any, ...]], mode: Optional[str],
        segment_bytes: int, interval: int, full_recovery: bool) -> None:
    crash_and_recover_twice(seed, ops, more, mode, segment_bytes, interval, full_recovery)


# A fixed, busy history — batches across page boundaries, rolls with their flushes pending,
# retention — crashed in every mode under many seeds: every mode is exercised on every file.
BUSY = ([("append", 3, 400, 0), ("append", 1, 3000, 5), ("flush",), ("append", 2, 30, 10)] * 3
        + [("roll",), ("append", 4, 400, 0), ("append", 1, 1, 0), ("delete_records", 0.3), ("retention",),
           ("append", 2, 3000, 0)])


@pytest.mark.parametrize("mode", CRASH_MODES)
def test_every_crash_mode_on_a_busy_log(mode: str) -> None:
    for seed in range(12):
        for segment_bytes in (2500, 1 << 20):
            crash_and_recover_twice(seed, BUSY, [("append", 1, 400, 0), ("roll",), ("append", 2, 3000, 0)],
                                    mode, segment_bytes, 100, seed % 2 == 0)


def crash_and_recover_twice(seed: int, ops: list[tuple[Any, ...]], more: list[tuple[Any, ...]],
                            mode: Optional[str], segment_bytes: int, interval: int, full_recovery: bool) -> None:
    world = SimWorld(seed)
    node = world.add_node("b")
    node.disk.crash_modes = None if mode is None else (mode,)
    cfg = _config(segment_bytes, interval)
    model = Model()
    counter = [0]

    async def before() -> None:
        log = await Log.load(node.runtime, DIR, cfg)
        await node.runtime.fs.fsync_dir("")
        await node.runtime.fs.fsync_dir("logs")
        await _apply(log, ops, model, counter)
        node.crash("power")  # at once: whatever the log scheduled has not run

    _run(world, before())
    for round_ in range(2):
        rt = node.restart()
        # The recovery point a checkpoint could hold: 0 (never written) or the last flushed one.
        rp = 0 if full_recovery else model.durable_end

        async def after(rt: Any = rt, rp: int = rp, round_: int = round_) -> None:
            log = await Log.load(rt, DIR, cfg, recovery_point=rp)
            _check(log, model)
            # What was lost is gone for good: offsets from the log end on will be reassigned.
            model.batches = {o: b for o, b in model.batches.items() if o < log.log_end_offset}
            model.durable_end = log.recovery_point  # what this incarnation knows is durable
            await _apply(log, more if round_ == 0 else [("append", 1, 10, 0)], model, counter)
            _check(log, model)
            node.crash("power")

        _run(world, after())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), ops=st.lists(op, min_size=1, max_size=30))
def test_clean_shutdown_then_power_loss_skips_recovery_safely(seed: int, ops: list[tuple[Any, ...]]) -> None:
    """After a clean shutdown everything is flushed: a power loss afterwards may only undo the
    close's unsynced index trims, which the index checks catch."""
    world = SimWorld(seed)
    node = world.add_node("b")
    cfg = _config(700, 100)
    model = Model()

    async def before() -> None:
        log = await Log.load(node.runtime, DIR, cfg)
        await node.runtime.fs.fsync_dir("")
        await node.runtime.fs.fsync_dir("logs")
        await _apply(log, ops, model, [0])
        await log.flush(force_flush_active_segment=True)
        model.durable_end = log.recovery_point
        log.close()

    _run(world, before())
    node.crash("power")
    rt = node.restart()

    async def after() -> None:
        log = await Log.load(rt, DIR, cfg, recovery_point=model.durable_end, had_clean_shutdown=True)
        assert log.log_end_offset == model.end
        _check(log, model)

    _run(world, after())


# ---------------------------------------------------------------- deleting a log (LogManager.async_delete)
DELETE_DELAY_MS = 5


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), ops=st.lists(op, min_size=1, max_size=20),
       mode=st.sampled_from((None,) + CRASH_MODES), crash_after_ms=st.floats(0, DELETE_DELAY_MS + 3),
       segment_bytes=st.sampled_from([300, 700, 1 << 20]))
def test_power_loss_during_a_delete_leaves_the_whole_log_or_nothing(
        seed: int, ops: list[tuple[Any, ...]], mode: str | None, crash_after_ms: float, segment_bytes: int) -> None:
    """A power loss at any point of deleting a log (the rename of its dir, its fsync, the removal
    of the files file.delete.delay.ms later) in any crash mode: after a restart the log is either
    all there (everything it had fsynced, from its first offset) or gone, never a half log —
    and a `-delete` dir left behind is removed, never loaded."""
    world = SimWorld(seed)
    node = world.add_node("b")
    node.disk.crash_modes = None if mode is None else (mode,)
    cfg = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=100, segment_index_bytes=4096,
                    retention_ms=50_000, file_delete_delay_ms=DELETE_DELAY_MS)
    jobs_off = LogManagerConfig(initial_task_delay_ms=10**9, cleaner_enable=False)
    model = Model()

    async def before() -> None:
        manager = LogManager(node.runtime, "logs", cfg, jobs_off)
        await manager.startup()
        log = await manager.get_or_create_log("t", 0)
        await _apply(log, ops, model, [0])
        node.runtime.spawn(manager.async_delete("t", 0), name="delete")
        await world.nodes["driver"].runtime.sleep(crash_after_ms)
        node.crash("power")

    _run(world, before())
    rt = node.restart()

    async def after() -> None:
        manager = LogManager(rt, "logs", cfg, jobs_off)
        await manager.startup()
        assert [tp for tp in manager.logs] in ([], [("t", 0)])
        log = manager.get_log("t", 0)
        if log is not None:
            _check(log, model)
            assert log.log_start_offset <= model.start, "the log lost its first segments"
            return
        await rt.sleep(DELETE_DELAY_MS + 1)
        assert [n for n in rt.fs.listdir("logs") if n.startswith("t-0")] == []

    _run(world, after())


def test_a_segment_resurrected_below_the_recovery_point_leaves_no_gap() -> None:
    """Found by the property test above in CI: retention renames segment 0 (whose offset 1 was
    never fsynced) `.deleted`; the roll's flush then moves the recovery point to 2 without syncing
    anything. Unless the flush makes the deletion durable, a power loss brings segment 0 back
    without offset 1, trusted below the recovery point, and the log serves 0 then 2."""
    crash_and_recover_twice(0, [("append", 1, 1, 0)],
                            [("append", 1, 1, 0), ("append", 1, 400, 0), ("roll",), ("delete_records", 0.75),
                             ("retention",), ("sleep", 1)], None, 300, 0, False)
