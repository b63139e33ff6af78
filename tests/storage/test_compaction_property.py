"""Property: compaction and power loss together. Any sequence of keyed appends (values and
tombstones, idempotent producers among them), flushes, rolls, recovery-point checkpoints, cleans
and time passing, then a power loss in any crash mode and a LogManager restart: the log's data
and indexes agree, every batch served is one that was appended (same offsets, producer and
sequence) holding a subset of its records, the latest fsynced value of every key is still there,
and a key whose tombstone is gone never comes back with an older value."""

from __future__ import annotations

from typing import Any, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkasim.records.batch import Record, build_batch, decode_batch_records, iter_batches
from kafkasim.runtime.sim.filesystem import CRASH_MODES
from kafkasim.runtime.sim.world import SimWorld
from kafkasim.storage.log import Log, LogConfig
from kafkasim.storage.log_manager import LogManager, LogManagerConfig
from kafkasim.storage.verify import check_log

pytestmark = pytest.mark.property

KEYS = [b"a", b"b", b"c", b"d"]
record = st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.binary(min_size=1, max_size=30)))
op = st.one_of(
    st.tuples(st.just("append"), st.lists(record, min_size=1, max_size=4), st.booleans()),
    st.tuples(st.just("flush")),
    st.tuples(st.just("roll")),
    st.tuples(st.just("checkpoint")),
    st.tuples(st.just("clean")),
    st.tuples(st.just("sleep"), st.integers(1, 8_000)),
)
CFG = LogConfig(cleanup_policy="compact", segment_bytes=500, index_interval_bytes=100, segment_index_bytes=4096,
                delete_retention_ms=5_000, min_cleanable_dirty_ratio=0.0)
MANAGER = LogManagerConfig(initial_task_delay_ms=10**9)  # the test drives every job itself


class Model:
    def __init__(self) -> None:
        self.records: dict[int, tuple[bytes, Optional[bytes]]] = {}     # offset -> (key, value)
        self.batches: dict[int, tuple[int, int, int]] = {}              # base -> (last, producer, sequence)
        self.durable_end = 0
        self.sequence = 0


def _run(world: SimWorld, coro: Any) -> Any:
    task = world.nodes["driver"].runtime.spawn(coro, name="test")
    while not task.done():
        assert world.now_ms() < 10**8
        world.run(world.now_ms() + 10_000)
    assert world.failures == [], world.failures
    return task._done.result()  # type: ignore[attr-defined]


async def _apply(manager: LogManager, log: Log, ops: list[tuple[Any, ...]], model: Model) -> None:
    rt = log.rt
    for o in ops:
        if o[0] == "append":
            _, recs, idempotent = o
            pid = 42 if idempotent else -1
            buf = bytearray(build_batch([Record(rt.now_ms(), k, v) for k, v in recs], producer_id=pid,
                                        producer_epoch=0 if idempotent else -1,
                                        base_sequence=model.sequence if idempotent else -1))
            if idempotent:
                model.sequence += len(recs)
            info = log.append_as_leader(buf, list(iter_batches(buf, validate=True)), 1)
            for j, (k, v) in enumerate(recs):
                model.records[info.first_offset + j] = (k, v)
            first_sequence = model.sequence - len(recs) if idempotent else -1
            model.batches[info.first_offset] = (info.last_offset, pid, first_sequence)
        elif o[0] == "flush":
            await log.flush()
        elif o[0] == "roll":
            if log.active_segment.size:
                log.roll()
        elif o[0] == "checkpoint":
            await manager.checkpoint_recovery_offsets()
        elif o[0] == "clean":
            await manager.clean_log(log)
        else:
            await rt.sleep(o[1])
    model.durable_end = max(model.durable_end, log.recovery_point)


def _check(log: Log, model: Model) -> None:
    assert check_log(log) == []
    served: dict[bytes, list[tuple[int, Optional[bytes]]]] = {}
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        assert data
        for pos, h in iter_batches(data):
            assert model.batches.get(h.base_offset) == (h.last_offset, h.producer_id, h.base_sequence)
            for r in decode_batch_records(data, pos):
                assert model.records.get(r.offset) == (r.key, r.value), f"record {r.offset} was never appended"
                assert r.key is not None
                served.setdefault(r.key, []).append((r.offset, r.value))
            offset = h.last_offset + 1
    for key in KEYS:
        durable = [o for o, (k, _) in model.records.items() if k == key and o < model.durable_end]
        if not durable:
            continue
        last = max(durable)
        mine = served.get(key, [])
        if model.records[last][1] is not None:
            assert any(o >= last for o, _ in mine), f"the latest fsynced value of {key!r} (offset {last}) is gone"
        elif not any(o >= last for o, _ in mine):
            assert mine == [], f"{key!r} came back after its tombstone at {last} was removed: {mine}"


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), ops=st.lists(op, min_size=1, max_size=35),
       mode=st.sampled_from((None,) + CRASH_MODES))
def test_compaction_and_power_loss(seed: int, ops: list[tuple[Any, ...]], mode: Optional[str]) -> None:
    world = SimWorld(seed)
    node = world.add_node("b")
    world.add_node("driver")
    node.disk.crash_modes = None if mode is None else (mode,)
    model = Model()

    async def before() -> None:
        manager = LogManager(node.runtime, "logs", CFG, MANAGER)
        log = await manager.get_or_create_log("c", 0)
        await _apply(manager, log, ops, model)
        node.crash("power")

    _run(world, before())
    rt = node.restart()

    async def after() -> None:
        manager = LogManager(rt, "logs", CFG, MANAGER)
        await manager.startup()
        log = manager.get_log("c", 0)
        if log is None:  # the partition directory itself was never made durable
            assert model.durable_end == 0
            return
        _check(log, model)
        model.records = {o: r for o, r in model.records.items() if o < log.log_end_offset}
        model.batches = {o: b for o, b in model.batches.items() if o < log.log_end_offset}
        await _apply(manager, log, [("append", [(b"a", b"again")], False), ("roll",), ("flush",), ("checkpoint",),
                                    ("clean",)], model)
        _check(log, model)
        await manager.shutdown()

    _run(world, after())
