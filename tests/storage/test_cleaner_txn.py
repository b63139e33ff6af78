"""Compaction's transaction rules (Kafka 3.9's CleanedTransactionMetadata and the cleaner's
checkBatchRetention): aborted records go, a marker goes once its transaction has no data left
and its delete horizon has passed (the txn index entry with it), the batch holding an active
producer's last record stays, and nothing at or above the first unstable offset is cleaned."""

from __future__ import annotations

from typing import Any

import pytest
from storage_helpers import read_all, run_sim

from kafkasim.records.batch import Record, build_batch, iter_batches
from kafkasim.records.control import end_txn_marker_batch
from kafkasim.runtime.api import NodeRuntime
from kafkasim.storage.log import Log, LogConfig
from kafkasim.storage.log_manager import LogManager
from kafkasim.storage.producer_state import AppendOrigin
from kafkasim.storage.verify import check_log

pytestmark = pytest.mark.unit

RETENTION = 10_000
COMPACT = LogConfig(cleanup_policy="compact", segment_bytes=100_000, index_interval_bytes=100,
                    delete_retention_ms=RETENTION, segment_index_bytes=4096)


class Writer:
    """Appends as a Partition does (through the producer state), tracking sequences."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.seq: dict[int, int] = {}

    def _append(self, buf: bytearray, origin: AppendOrigin) -> None:
        hs = list(iter_batches(buf))
        psm = self.log.producer_state_manager
        assert psm.analyze_append(hs, self.log.log_end_offset, origin, buf) is None
        psm.on_append(self.log.append_as_leader(buf, hs, 1))
        self.log.update_high_watermark(self.log.log_end_offset)

    def plain(self, key: bytes, value: bytes | None) -> None:
        self._append(bytearray(build_batch([Record(1000, key, value)])), AppendOrigin.CLIENT)

    def txn(self, pid: int, key: bytes, value: bytes, epoch: int = 0) -> None:
        seq = self.seq.get(pid, 0)
        self.seq[pid] = seq + 1
        self._append(bytearray(build_batch([Record(1000, key, value)], producer_id=pid, producer_epoch=epoch,
                                           base_sequence=seq, is_transactional=True)), AppendOrigin.CLIENT)

    def marker(self, pid: int, committed: bool, epoch: int = 0) -> None:
        self._append(bytearray(end_txn_marker_batch(pid, epoch, 0, committed, 1000)), AppendOrigin.COORDINATOR)


def _batches(log: Log) -> list[tuple[int, int, bool, int, bool]]:
    """(base offset, producer id, control, records, delete horizon set) of every batch."""
    return [(h.base_offset, h.producer_id, h.is_control, h.records_count, h.delete_horizon_ms is not None)
            for _, h, _ in read_all(log, log.log_start_offset)]


async def _clean(rt: NodeRuntime, manager: LogManager, log: Log, w: Writer, filler: bytes) -> None:
    """New dirty data (so the cleaner has something to map), rolled, flushed, cleaned from scratch."""
    w.plain(b"filler", filler)
    log.roll()
    await log.flush()
    await manager.checkpoint_recovery_offsets()
    manager.cleaner_checkpoint.clear()
    await manager.clean_log(log)


def test_markers_go_once_their_transaction_is_empty_and_the_horizon_passed() -> None:
    async def body(rt: NodeRuntime, world: Any) -> Any:
        manager = LogManager(rt, "logs", COMPACT)
        log = await manager.get_or_create_log("c", 0)
        w = Writer(log)
        w.txn(9, b"a", b"t1")          # 0  committed, superseded by offset 4
        w.marker(9, True)              # 1  COMMIT
        w.txn(10, b"b", b"x")          # 2  aborted
        w.marker(10, False)            # 3  ABORT
        w.plain(b"a", b"later")        # 4
        w.txn(9, b"c", b"t2")          # 5  producer 9's last data batch
        w.marker(9, True)              # 6
        w.txn(10, b"d", b"t3")         # 7  producer 10's last data batch
        w.marker(10, True)             # 8
        rounds = []
        for i, wait in enumerate((0, 0, RETENTION // 2, RETENTION)):
            await rt.sleep(wait)
            await _clean(rt, manager, log, w, f"{i}".encode())
            rounds.append((_batches(log), [t.last_offset for s in log.segments for t in s.txn_index.all_aborted_txns()],
                           check_log(log)))
        return rounds

    rounds = run_sim(body)
    for _, _, problems in rounds:
        assert problems == []
    tail = [(5, 9, False, 1, False), (6, 9, True, 1, False), (7, 10, False, 1, False), (8, 10, True, 1, False)]
    # Round 1: the superseded and the aborted records go; both markers stay, since this clean still
    # saw batches of their transactions; the ABORT marker's txn index entry is kept.
    batches, index, _ = rounds[0]
    assert batches[:3] == [(1, 9, True, 1, False), (3, 10, True, 1, False), (4, -1, False, 1, False)]
    assert batches[3:7] == tail and index == [3]
    # Round 2: no data left for either: each marker gets a delete horizon; the ABORT's index entry goes.
    batches, index, _ = rounds[1]
    assert batches[:3] == [(1, 9, True, 1, True), (3, 10, True, 1, True), (4, -1, False, 1, False)]
    assert batches[3:7] == tail and index == []
    # Round 3, before the horizon: unchanged. Round 4, past it: both markers are gone.
    assert rounds[2][0][:2] == rounds[1][0][:2]
    batches, index, _ = rounds[3]
    assert batches[:5] == [(4, -1, False, 1, False)] + tail and index == []


def test_a_marker_holding_the_producers_epoch_stays_empty() -> None:
    """A producer whose epoch was bumped by its ABORT marker has no data batch in its state: the
    marker is its last record (the epoch fences zombies), so it stays — emptied past its horizon."""
    async def body(rt: NodeRuntime, world: Any) -> Any:
        manager = LogManager(rt, "logs", COMPACT)
        log = await manager.get_or_create_log("c", 0)
        w = Writer(log)
        w.txn(9, b"a", b"x")           # 0  aborted
        w.marker(9, False, epoch=1)    # 1  ABORT at the bumped epoch (InitProducerId aborting it)
        assert log.producer_state_manager.producers[9].last_data_offset == -1
        for i, wait in enumerate((0, 0, RETENTION)):
            await rt.sleep(wait)
            await _clean(rt, manager, log, w, f"{i}".encode())
        return _batches(log)[:1], log.producer_state_manager.producers[9].producer_epoch, check_log(log)

    batches, epoch, problems = run_sim(body)
    assert problems == [] and epoch == 1
    assert batches == [(1, 9, True, 0, False)]


def test_nothing_at_or_above_the_first_unstable_offset_is_cleaned() -> None:
    """An open transaction holds the cleaner back: an aborted transaction after it keeps its
    records and marker until the open one is decided."""
    async def body(rt: NodeRuntime, world: Any) -> Any:
        manager = LogManager(rt, "logs", COMPACT)
        log = await manager.get_or_create_log("c", 0)
        w = Writer(log)
        w.plain(b"k", b"old")          # 0  superseded by 5
        w.txn(9, b"open", b"o")        # 1  open transaction
        w.txn(10, b"b", b"x")          # 2  aborted
        w.marker(10, False)            # 3  ABORT
        await _clean(rt, manager, log, w, b"1")  # 4 filler
        before = (_batches(log), log.last_stable_offset)
        w.plain(b"k", b"new")          # 5
        w.marker(9, True)              # 6  the open transaction commits
        await _clean(rt, manager, log, w, b"2")  # 7 filler
        return before, _batches(log), check_log(log)

    (during, lso), after, problems = run_sim(body)
    assert problems == [] and lso == 1
    assert during[:4] == [(0, -1, False, 1, False), (1, 9, False, 1, False), (2, 10, False, 1, False),
                          (3, 10, True, 1, False)]
    # Once decided: the superseded value and the aborted records go (producer 10's only batch stays,
    # empty, for its sequence); the ABORT marker stays, its transaction having been seen this clean.
    assert after[:3] == [(1, 9, False, 1, False), (2, 10, False, 0, False), (3, 10, True, 1, False)]
