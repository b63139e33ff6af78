"""Transactions on the log (UnifiedLog + ProducerStateManager + TransactionIndex): the last stable
offset, the markers' checks, the .txnindex a marker writes, READ_COMMITTED reads, snapshots with
ongoing transactions, truncation and crash recovery rebuilding the producer state and the txn
index."""

from __future__ import annotations

from typing import Any

import pytest
from storage_helpers import run_sim

from kafkasim.protocol import errors as E
from kafkasim.records.batch import Record, build_batch, iter_batches
from kafkasim.records.control import end_txn_marker_batch
from kafkasim.runtime.api import NodeRuntime
from kafkasim.storage.log import Log, LogConfig
from kafkasim.storage.producer_state import AppendOrigin, ProducerStateError, decode_snapshot, snapshot_name
from kafkasim.storage.txn_index import AbortedTxn

pytestmark = pytest.mark.unit

DIR = "logs/t-0"
CONFIG = LogConfig(segment_bytes=1 << 20, file_delete_delay_ms=10, retention_ms=-1)
A, B, C = 1000, 2000, 3000


class Producers:
    """Appends as Partition.append_records_to_leader does: producer-state checks, then the log."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.seq: dict[int, int] = {}

    def data(self, pid: int, n: int = 1, *, txn: bool = True, epoch: int = 0) -> int:
        seq = self.seq.get(pid, 0)
        self.seq[pid] = seq + n
        buf = bytearray(build_batch([Record(1000 + i, None, b"v") for i in range(n)], producer_id=pid,
                                    producer_epoch=epoch, base_sequence=seq, is_transactional=txn))
        return self._append(buf, AppendOrigin.CLIENT)

    def plain(self) -> int:
        return self._append(bytearray(build_batch([Record(1000, None, b"p")])), AppendOrigin.CLIENT)

    def marker(self, pid: int, committed: bool, *, epoch: int = 0, coordinator_epoch: int = 0) -> int:
        buf = bytearray(end_txn_marker_batch(pid, epoch, coordinator_epoch, committed, 2000))
        return self._append(buf, AppendOrigin.COORDINATOR)

    def _append(self, buf: bytearray, origin: AppendOrigin) -> int:
        headers = list(iter_batches(buf, validate=True))
        psm = self.log.producer_state_manager
        assert psm.analyze_append(headers, self.log.log_end_offset, origin, buf) is None
        info = self.log.append_as_leader(buf, headers, leader_epoch=0)
        psm.on_append(info)
        return info.first_offset


def _txnindex(rt: NodeRuntime, base: int = 0) -> bytes:
    path = f"{DIR}/{base:020d}.txnindex"
    if not rt.fs.exists(path):
        return b""
    f = rt.fs.open(path, create=False)
    try:
        return f.read(0, f.size())
    finally:
        f.close()


def test_the_lso_waits_for_the_marker_to_be_below_the_high_watermark() -> None:
    async def body(rt: NodeRuntime, world: Any) -> list[int]:
        log = await Log.load(rt, DIR, CONFIG)
        p = Producers(log)
        seen = []
        p.plain()                      # 0
        p.data(A, 2)                   # 1-2: A's transaction starts at 1
        p.plain()                      # 3
        log.update_high_watermark(4)
        seen.append(log.last_stable_offset)           # 1
        marker = p.marker(A, True)     # 4
        log.update_high_watermark(marker)
        seen.append(log.last_stable_offset)           # still 1: the marker is not replicated
        log.update_high_watermark(marker + 1)
        seen.append(log.last_stable_offset)           # 5: the high watermark
        return seen

    assert run_sim(body) == [1, 1, 5]


def test_an_abort_writes_kafkas_txnindex_entry_with_the_lso_of_the_other_producers() -> None:
    async def body(rt: NodeRuntime, world: Any) -> tuple[Any, ...]:
        log = await Log.load(rt, DIR, CONFIG)
        p = Producers(log)
        p.data(A, 2)                   # 0-1
        p.data(B)                      # 2: B's transaction is ongoing when A aborts
        a_abort = p.marker(A, False)   # 3
        p.data(C)                      # 4
        c_abort = p.marker(C, False)   # 5: B (2) still ongoing
        b_commit = p.marker(B, True)   # 6: commits are not indexed
        log.update_high_watermark(log.log_end_offset)
        return (a_abort, c_abort, b_commit, _txnindex(rt), log.last_stable_offset,
                log.collect_aborted_transactions(0, log.log_end_offset))

    a_abort, c_abort, b_commit, raw, lso, aborted = run_sim(body)
    assert (a_abort, c_abort, b_commit) == (3, 5, 6)
    assert raw == AbortedTxn(A, 0, 3, 2).encode() + AbortedTxn(C, 4, 5, 2).encode()
    assert raw[:34] == bytes.fromhex("0000" "00000000000003e8" "0000000000000000" "0000000000000003"
                                     "0000000000000002")
    assert lso == 7
    assert aborted == [AbortedTxn(A, 0, 3, 2), AbortedTxn(C, 4, 5, 2)]


def test_markers_are_checked_against_the_producer_and_coordinator_epochs() -> None:
    async def body(rt: NodeRuntime, world: Any) -> dict[str, int]:
        log = await Log.load(rt, DIR, CONFIG)
        p = Producers(log)
        codes: dict[str, int] = {}

        def attempt(name: str, fn: Any) -> None:
            try:
                fn()
                codes[name] = E.NONE
            except ProducerStateError as exc:
                codes[name] = exc.error_code
        p.data(A, epoch=1)
        attempt("old_epoch", lambda: p.marker(A, True, epoch=0, coordinator_epoch=5))
        attempt("commit", lambda: p.marker(A, True, epoch=1, coordinator_epoch=5))
        p.data(A, epoch=1)
        attempt("zombie_coordinator", lambda: p.marker(A, False, epoch=1, coordinator_epoch=4))
        attempt("plain_in_txn", lambda: p.data(A, txn=False, epoch=1))
        attempt("bumped_abort", lambda: p.marker(A, False, epoch=2, coordinator_epoch=5))
        attempt("no_txn_marker", lambda: p.marker(B, True, epoch=0, coordinator_epoch=0))
        codes["epoch_after"] = log.producer_state_manager.producers[A].producer_epoch
        codes["ongoing"] = len(log.producer_state_manager.ongoing_txns)
        return codes

    assert run_sim(body) == {
        "old_epoch": E.INVALID_PRODUCER_EPOCH, "commit": E.NONE,
        "zombie_coordinator": E.TRANSACTION_COORDINATOR_FENCED, "plain_in_txn": E.INVALID_TXN_STATE,
        "bumped_abort": E.NONE, "no_txn_marker": E.NONE, "epoch_after": 2, "ongoing": 0}


def test_a_read_committed_read_stops_at_the_lso_and_names_the_aborted_transactions() -> None:
    async def body(rt: NodeRuntime, world: Any) -> tuple[Any, ...]:
        log = await Log.load(rt, DIR, CONFIG)
        p = Producers(log)
        p.data(A, 2)                   # 0-1 aborted
        p.marker(A, False)             # 2
        p.plain()                      # 3
        p.data(B)                      # 4: ongoing
        p.plain()                      # 5
        log.update_high_watermark(log.log_end_offset)
        records, aborted = log.read_committed(0, 1 << 20, log.last_stable_offset)
        offsets = [h.base_offset for _, h in iter_batches(bytes(records))]
        at_lso = log.read_committed(4, 1 << 20, log.last_stable_offset)
        past_abort = log.read_committed(3, 1 << 20, log.last_stable_offset)
        return log.last_stable_offset, offsets, aborted, len(at_lso[0]), at_lso[1], past_abort[1]

    lso, offsets, aborted, at_lso_bytes, at_lso_aborted, past_abort = run_sim(body)
    assert lso == 4 and offsets == [0, 2, 3]
    assert aborted == [AbortedTxn(A, 0, 2, 3)]
    assert at_lso_bytes == 0 and at_lso_aborted == []
    assert past_abort == []          # the aborted transaction ends before offset 3


def test_snapshots_keep_ongoing_transactions_and_a_reload_restores_the_lso() -> None:
    async def body(rt: NodeRuntime, world: Any) -> tuple[Any, ...]:
        log = await Log.load(rt, DIR, CONFIG)
        p = Producers(log)
        p.data(A, 2)                   # 0-1 ongoing
        p.data(B)                      # 2
        p.marker(B, True, coordinator_epoch=3)  # 3
        log.roll()
        p.plain()                      # 4: the roll's snapshot at 4 is taken on this append
        entries = {e.producer_id: e for e in decode_snapshot(_read(rt, f"{DIR}/{snapshot_name(4)}"))}
        log.close()
        again = await Log.load(rt, DIR, CONFIG)
        again.update_high_watermark(again.log_end_offset)
        psm = again.producer_state_manager
        return entries, again.last_stable_offset, sorted(psm.ongoing_txns), psm.loaded_snapshot_offset

    entries, lso, ongoing, loaded_from = run_sim(body)
    assert entries[A].current_txn_first_offset == 0 and entries[A].coordinator_epoch == -1
    assert entries[B].current_txn_first_offset == -1 and entries[B].coordinator_epoch == 3
    # A reopened from a snapshot, not the log: close() wrote one at the log end offset (UnifiedLog.close)
    assert lso == 0 and ongoing == [0] and loaded_from == 5


def _read(rt: NodeRuntime, path: str) -> bytes:
    f = rt.fs.open(path, create=False)
    try:
        return f.read(0, f.size())
    finally:
        f.close()


def test_truncation_cuts_the_txnindex_and_reopens_the_transaction() -> None:
    async def body(rt: NodeRuntime, world: Any) -> tuple[Any, ...]:
        log = await Log.load(rt, DIR, CONFIG)
        p = Producers(log)
        p.data(A)                      # 0
        p.marker(A, False)             # 1
        p.data(B)                      # 2
        p.marker(B, False)             # 3
        before = _txnindex(rt)
        await log.truncate_to(3)
        log.update_high_watermark(3)
        return before, _txnindex(rt), log.last_stable_offset, sorted(log.producer_state_manager.ongoing_txns)

    before, after, lso, ongoing = run_sim(body)
    assert len(before) == 68
    assert after == AbortedTxn(A, 0, 1, 2).encode()
    assert lso == 2 and ongoing == [2]


@pytest.mark.parametrize("lose_index", [False, True])
def test_recovery_rebuilds_the_txnindex_and_the_producer_state(lose_index: bool) -> None:
    """Everything flushed, then a power loss: recovery from offset 0 resets every segment's txn
    index and replays the producer state to rebuild it (a txn index the crash lost too)."""
    config = LogConfig(segment_bytes=300, file_delete_delay_ms=10, retention_ms=-1)

    async def body(rt: NodeRuntime, world: Any) -> tuple[Any, ...]:
        log = await Log.load(rt, DIR, config)
        await rt.fs.fsync_dir("")
        await rt.fs.fsync_dir("logs")
        p = Producers(log)
        p.data(A, 2)
        p.data(B)
        p.marker(A, False)
        for _ in range(3):
            p.plain()
        p.data(C)
        p.marker(B, False)
        p.data(A)
        p.marker(C, True)
        await log.flush()
        bases = [s.base_offset for s in log.segments]
        before = {b: _txnindex(rt, b) for b in bases}
        if lose_index:
            for b in bases:
                if before[b]:
                    rt.fs.unlink(f"{DIR}/{b:020d}.txnindex")
            await rt.fs.fsync_dir(DIR)
        world.nodes["b"].crash("power")
        rt2 = world.nodes["b"].restart()
        again = await Log.load(rt2, DIR, config, recovery_point=0)
        again.update_high_watermark(again.log_end_offset)
        after = {b: _txnindex(rt2, b) for b in bases}
        psm = again.producer_state_manager
        return (before, after, again.last_stable_offset, sorted(psm.ongoing_txns),
                again.collect_aborted_transactions(0, again.log_end_offset), len(bases))

    before, after, lso, ongoing, aborted, n_segments = run_sim(body)
    assert n_segments > 1 and sum(1 for raw in before.values() if raw) >= 2  # entries in two segments
    assert after == before
    assert [(t.producer_id, t.first_offset) for t in aborted] == [(A, 0), (B, 2)]
    assert ongoing == [aborted[-1].last_offset + 1] and lso == ongoing[0]  # A's second transaction
