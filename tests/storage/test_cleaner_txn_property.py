"""Property: compaction under transactions. Any sequence of transactional writes by two producers
(committed, aborted — some aborts bumping the epoch, as InitProducerId's do — or left open),
plain writes, rolls, cleans and time passing: after every clean a read_committed consumer (Kafka's
client algorithm over the log and its txn indexes, up to the last stable offset) sees no aborted
record, only records that were written, and the latest committed value of every key; and the
producer state rebuilt from the cleaned log alone (snapshots deleted) equals the live one — the
batches holding each producer's last sequence and epoch survived."""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkasim.records.batch import (
    ControlRecordType,
    Record,
    build_batch,
    decode_batch_records,
    iter_batches,
    parse_control_key,
)
from kafkasim.records.control import end_txn_marker_batch
from kafkasim.runtime.sim.world import SimWorld
from kafkasim.storage.log import Log, LogConfig
from kafkasim.storage.log_manager import LogManager, LogManagerConfig
from kafkasim.storage.producer_state import AppendOrigin
from kafkasim.storage.verify import check_log

pytestmark = pytest.mark.property

KEYS = [b"a", b"b", b"c"]
PIDS = [1, 2]
value = st.one_of(st.none(), st.binary(min_size=1, max_size=8))
op = st.one_of(
    st.tuples(st.just("txn"), st.sampled_from(PIDS), st.sampled_from(KEYS), value),
    st.tuples(st.just("end"), st.sampled_from(PIDS), st.booleans(), st.booleans()),
    st.tuples(st.just("plain"), st.sampled_from(KEYS), value),
    st.tuples(st.just("roll")),
    st.tuples(st.just("clean")),
    st.tuples(st.just("sleep"), st.integers(1, 8_000)),
)
CFG = LogConfig(cleanup_policy="compact", segment_bytes=400, index_interval_bytes=100, segment_index_bytes=4096,
                delete_retention_ms=5_000, min_cleanable_dirty_ratio=0.0)
MANAGER = LogManagerConfig(initial_task_delay_ms=10**9)  # the test drives every job itself


@dataclass
class Model:
    records: dict[int, tuple[bytes, bytes | None, int | None]] = field(default_factory=dict)  # -> txn id
    outcome: dict[int, str] = field(default_factory=dict)      # txn id -> open / committed / aborted
    epoch: dict[int, int] = field(default_factory=dict)
    seq: dict[int, int] = field(default_factory=dict)
    open_txn: dict[int, int] = field(default_factory=dict)     # producer -> its open txn id

    def visible(self, offset: int) -> bool:
        txn = self.records[offset][2]
        return txn is None or self.outcome[txn] == "committed"


def _append(log: Log, buf: bytearray, origin: AppendOrigin) -> int:
    hs = list(iter_batches(buf))
    psm = log.producer_state_manager
    assert psm.analyze_append(hs, log.log_end_offset, origin, buf) is None
    info = log.append_as_leader(buf, hs, 1)
    psm.on_append(info)
    log.update_high_watermark(log.log_end_offset)
    return info.first_offset


def _write(log: Log, o: tuple[Any, ...], m: Model) -> None:
    now = int(log.rt.now_ms())
    if o[0] == "plain":
        off = _append(log, bytearray(build_batch([Record(now, o[1], o[2])])), AppendOrigin.CLIENT)
        m.records[off] = (o[1], o[2], None)
    elif o[0] == "txn":
        pid = o[1]
        txn = m.open_txn.setdefault(pid, len(m.outcome))
        m.outcome[txn] = "open"
        epoch, seq = m.epoch.setdefault(pid, 0), m.seq.get(pid, 0)
        m.seq[pid] = seq + 1
        off = _append(log, bytearray(build_batch([Record(now, o[2], o[3])], producer_id=pid, producer_epoch=epoch,
                                                 base_sequence=seq, is_transactional=True)), AppendOrigin.CLIENT)
        m.records[off] = (o[2], o[3], txn)
    elif o[1] in m.open_txn:  # end: the coordinator's marker (an abort may bump the epoch)
        _, pid, commit, bump = o
        bump = bump and not commit
        if bump:
            m.epoch[pid] += 1
            m.seq[pid] = 0
        _append(log, bytearray(end_txn_marker_batch(pid, m.epoch[pid], 0, commit, now)), AppendOrigin.COORDINATOR)
        m.outcome[m.open_txn.pop(pid)] = "committed" if commit else "aborted"


def read_committed(log: Log) -> list[tuple[int, bytes, bytes | None]]:
    """Kafka's consumer (CompletedFetch) over [log start, LSO) with the log's aborted transactions."""
    lso = log.last_stable_offset
    pending = [(t.first_offset, i, t.producer_id) for i, t in
               enumerate(log.collect_aborted_transactions(log.log_start_offset, lso))]
    heapq.heapify(pending)
    aborted: set[int] = set()
    out = []
    offset = log.log_start_offset
    while offset < lso:
        data = bytes(log.read(offset, 1 << 20, max_offset=lso))
        if not data:
            break
        for pos, h in iter_batches(data):
            offset = h.last_offset + 1
            recs = decode_batch_records(data, pos)
            if h.has_producer_id:
                while pending and pending[0][0] <= h.last_offset:
                    aborted.add(heapq.heappop(pending)[2])
                if h.is_control and recs and parse_control_key(recs[0].key)[1] == ControlRecordType.ABORT:
                    aborted.discard(h.producer_id)
                elif h.is_transactional and h.producer_id in aborted:
                    continue
            if not h.is_control:
                out += [(r.offset, r.key, r.value) for r in recs if r.offset < lso]
    return out


def _check(log: Log, m: Model) -> None:
    assert check_log(log) == []
    seen = read_committed(log)
    for off, key, val in seen:
        assert m.records.get(off) is not None and m.records[off][:2] == (key, val), f"{off} never written"
        assert m.visible(off), f"read_committed served {off} of an aborted transaction"
    lso = log.last_stable_offset
    for key in KEYS:
        mine = [o for o in m.records if m.records[o][0] == key and o < lso and m.visible(o)]
        if mine and m.records[max(mine)][1] is not None:
            assert any(o == max(mine) for o, _, _ in seen), f"the latest committed value of {key!r} is gone"


def _state(log: Log) -> dict[int, tuple[int, int, int]]:
    return {pid: (e.producer_epoch, e.last_seq, e.current_txn_first_offset)
            for pid, e in sorted(log.producer_state_manager.producers.items())}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), ops=st.lists(op, min_size=1, max_size=40))
def test_compaction_keeps_read_committed_and_the_producer_state(seed: int, ops: list[tuple[Any, ...]]) -> None:
    world = SimWorld(seed)
    node = world.add_node("b")
    world.add_node("driver")
    m = Model()

    async def body() -> None:
        manager = LogManager(node.runtime, "logs", CFG, MANAGER)
        log = await manager.get_or_create_log("c", 0)
        for o in ops + [("roll",), ("clean",)]:
            if o[0] == "roll":
                if log.active_segment.size:
                    log.roll()
                    await log.flush()
                    await manager.checkpoint_recovery_offsets()
            elif o[0] == "clean":
                await manager.clean_log(log)
                _check(log, m)
            elif o[0] == "sleep":
                await node.runtime.sleep(o[1])
            else:
                _write(log, o, m)
        live = _state(log)
        await manager.shutdown()
        for name in node.runtime.fs.listdir(log.dir):
            if name.endswith(".snapshot"):
                node.runtime.fs.unlink(f"{log.dir}/{name}")
        manager = LogManager(node.runtime, "logs", CFG, MANAGER)
        await manager.startup()
        again = manager.get_log("c", 0)
        assert again is not None and _state(again) == live

    task = world.nodes["driver"].runtime.spawn(body(), name="test")
    while not task.done():
        assert world.now_ms() < 10**8
        world.run(world.now_ms() + 10_000)
    assert world.failures == [], world.failures
    task._done.result()  # type: ignore[attr-defined]
