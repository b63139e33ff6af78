"""The partition log on real files: Kafka's layout, appends and reads of whole batches, rolls,
flush and the recovery point, lookups by timestamp, log start offset, retention, truncation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from storage_helpers import append, batch, batches_of, read_all, run_real

from kafkasim.records.batch import iter_batches
from kafkasim.runtime.api import NodeRuntime
from kafkasim.storage.log import Log, LogConfig, OffsetOutOfRangeError, index_problem
from kafkasim.storage.segment import log_file_name

pytestmark = pytest.mark.unit

SMALL = LogConfig(segment_bytes=1000, index_interval_bytes=150, segment_index_bytes=4096)


def test_append_read_and_layout(tmp_path: Path) -> None:
    async def body(node: NodeRuntime) -> None:
        log = await Log.load(node, "t-0", LogConfig())
        await log.maybe_assign_epoch_start_offset(3, 0)  # as the broker does on becoming leader
        infos = [append(log, i) for i in range(5)]
        assert [(i.first_offset, i.last_offset) for i in infos] == [(n, n) for n in range(5)]
        assert log.log_end_offset == 5
        data = log.read(2, 1 << 20)
        assert batches_of(data) == [(2, 2), (3, 3), (4, 4)]
        assert [h.partition_leader_epoch for _, h in iter_batches(data)] == [3, 3, 3]
        one = log.read(0, 1)  # smaller than one batch: the first batch still comes back whole
        assert batches_of(one) == [(0, 0)]
        assert log.read(0, 1, min_one_message=False) == b""
        assert batches_of(log.read(1, 1 << 20, max_offset=3)) == [(1, 1), (2, 2)]
        assert log.read(5, 100) == b"" and log.read(3, 100, max_offset=3) == b""
        log.close()
    run_real(tmp_path, body)
    names = sorted(p.name for p in (tmp_path / "t-0").iterdir())
    assert names == ["00000000000000000000.index", "00000000000000000000.log", "00000000000000000000.timeindex",
                     "leader-epoch-checkpoint"]
    assert log_file_name(0) == "00000000000000000000.log"
    assert (tmp_path / "t-0" / "leader-epoch-checkpoint").read_bytes() == b"0\n1\n3 0\n"


def test_multi_batch_appends_with_several_records(tmp_path: Path) -> None:
    async def body(node: NodeRuntime) -> Any:
        log = await Log.load(node, "t-0", LogConfig())
        infos = [append(log, i, n=3) for i in range(4)]
        return [(i.first_offset, i.last_offset, i.record_count) for i in infos], batches_of(log.read(4, 1 << 20))

    infos, read = run_real(tmp_path, body)
    assert infos == [(0, 2, 3), (3, 5, 3), (6, 8, 3), (9, 11, 3)]
    assert read == [(3, 5), (6, 8), (9, 11)]  # the batch holding offset 4 comes back whole


def test_rolls_on_segment_bytes_and_reads_one_segment_at_a_time(tmp_path: Path) -> None:
    async def body(node: NodeRuntime) -> Any:
        log = await Log.load(node, "t-0", SMALL)
        for i in range(30):
            append(log, i)
        bases = [s.base_offset for s in log.segments]
        sizes = [s.size for s in log.segments]
        data = log.read(bases[1] - 1, 1 << 20)  # the last batch of segment 0: that segment only
        everything = [o for o, _, _ in read_all(log)]
        problems = [index_problem(s, None) for s in log.segments[:-1]]
        await log.flush()
        log.close()
        return bases, sizes, batches_of(data), everything, problems

    bases, sizes, read, everything, problems = run_real(tmp_path, body)
    assert len(bases) >= 3 and bases[0] == 0
    assert all(s <= 1000 for s in sizes)
    assert read == [(bases[1] - 1, bases[1] - 1)]
    assert everything == list(range(30))
    assert problems == [""] * (len(bases) - 1)


def test_sparse_offset_index_every_index_interval_bytes(tmp_path: Path) -> None:
    async def body(node: NodeRuntime) -> Any:
        log = await Log.load(node, "t-0", LogConfig(index_interval_bytes=250))
        sizes = []
        for i in range(12):
            buf_len = len(append(log, i, value_size=60).__repr__())  # noqa: F841 (append only)
            sizes.append(log.active_segment.size)
        entries = log.active_segment.offset_index.all_entries()
        times = log.active_segment.time_index.all_entries()
        return sizes, entries, times

    sizes, entries, times = run_real(tmp_path, body)
    positions = [0] + sizes[:-1]
    # Kafka's rule: an entry before an append once more than index.interval.bytes were appended
    # since the last one; it maps the append's last offset to where it starts.
    expected, since = [], 0
    for i, pos in enumerate(positions):
        if since > 250:
            expected.append((i, pos))
            since = 0
        since += sizes[i] - pos
    assert entries == expected and len(entries) >= 3
    assert times == [(1000 + o, o) for o, _ in expected]


def test_roll_on_segment_ms_from_the_first_batch_timestamp(tmp_path: Path) -> None:
    async def body(node: NodeRuntime) -> Any:
        log = await Log.load(node, "t-0", LogConfig(segment_ms=100))
        append(log, 0, ts=5000)
        append(log, 1, ts=5050)
        append(log, 2, ts=5101)  # more than segment.ms after the segment's first batch
        append(log, 3, ts=5150)
        return [s.base_offset for s in log.segments]

    assert run_real(tmp_path, body) == [0, 2]


def test_flush_moves_the_recovery_point_and_needs_flush_counts_offsets(tmp_path: Path) -> None:
    async def body(node: NodeRuntime) -> Any:
        log = await Log.load(node, "t-0", LogConfig(flush_messages=3))
        out = []
        for i in range(4):
            append(log, i)
            out.append(log.needs_flush())
        await log.flush()
        out += [log.recovery_point, log.needs_flush(), log.unflushed_messages]
        return out

    assert run_real(tmp_path, body) == [False, False, True, True, 4, False, 0]


def test_offset_for_timestamp_finds_the_record_via_the_time_index(tmp_path: Path) -> None:
    async def body(node: NodeRuntime) -> Any:
        log = await Log.load(node, "t-0", LogConfig(segment_bytes=600, index_interval_bytes=100))
        for i in range(20):
            append(log, i, n=2, ts=10_000 + 10 * i)  # records at 10000+10i and +1
        return [log.offset_for_timestamp(t) for t in (0, 10_000, 10_001, 10_002, 10_095, 10_191, 10_192)], \
            log.max_timestamp_and_offset(), len(log.segments)

    found, max_ts, segments = run_real(tmp_path, body)
    assert segments > 1
    assert found == [(0, 10_000), (0, 10_000), (1, 10_001), (2, 10_010), (20, 10_100), (39, 10_191), None]
    assert max_ts == (10_191, 39)


def test_delete_records_then_retention_removes_whole_segments(tmp_path: Path) -> None:
    async def body(node: NodeRuntime) -> Any:
        log = await Log.load(node, "t-0", SMALL)
        for i in range(30):
            append(log, i, ts=node.now_ms())
        bases = [s.base_offset for s in log.segments]
        with pytest.raises(OffsetOutOfRangeError):
            log.delete_records(31)
        start = log.delete_records(bases[1] + 1)
        assert log.read(0, 100)  # still physically there until retention runs
        deleted = log.delete_old_segments()
        names = sorted(n for n in node.fs.listdir("t-0") if n.endswith(".deleted"))
        return start, deleted, [s.base_offset for s in log.segments], bases, names

    start, deleted, after, bases, names = run_real(tmp_path, body)
    assert deleted == 1 and after == bases[1:] and start == bases[1] + 1
    assert names == [f"{bases[0]:020d}.index.deleted", f"{bases[0]:020d}.log.deleted",
                     f"{bases[0]:020d}.timeindex.deleted"]


def test_retention_by_time_then_by_size(tmp_path: Path) -> None:
    async def body(node: NodeRuntime) -> Any:
        now = node.now_ms()
        log = await Log.load(node, "t-0", LogConfig(segment_bytes=1000, retention_ms=1_000_000))
        for i in range(40):
            append(log, i, ts=now - 10_000_000 if i < 20 else now)
        old = [s.base_offset for s in log.segments if s.max_timestamp_so_far < now]
        by_time = log.delete_old_segments()
        after_time = log.segments[0].base_offset
        log.config = LogConfig(segment_bytes=1000, retention_bytes=1500)
        size_before = log.size_in_bytes
        by_size = log.delete_old_segments()
        return old, by_time, after_time, size_before, by_size, log.size_in_bytes, log.log_start_offset

    old, by_time, after_time, size_before, by_size, size_after, start = run_real(tmp_path, body)
    assert by_time == len(old) >= 1 and after_time > old[-1]  # exactly the all-old segments
    assert by_size >= 1 and 1500 - 1000 <= size_after < size_before and start > after_time


def test_retention_keeps_one_segment_by_rolling_first(tmp_path: Path) -> None:
    async def body(node: NodeRuntime) -> Any:
        log = await Log.load(node, "t-0", LogConfig(retention_ms=10))
        for i in range(3):
            append(log, i, ts=1)
        n = log.delete_old_segments()
        return n, [s.base_offset for s in log.segments], log.log_start_offset, log.log_end_offset

    assert run_real(tmp_path, body) == (1, [3], 3, 3)


def test_truncate_to_drops_the_tail_and_later_segments(tmp_path: Path) -> None:
    async def body(node: NodeRuntime) -> Any:
        log = await Log.load(node, "t-0", SMALL)
        for i in range(30):
            append(log, i)
        await log.flush()
        await log.truncate_to(12)
        after = [o for o, _, _ in read_all(log)]
        problems = [index_problem(s, None) for s in log.segments]
        append(log, 99)
        return after, log.log_end_offset, log.recovery_point, problems

    after, leo, rp, problems = run_real(tmp_path, body)
    assert after == list(range(12)) and leo == 13 and rp == 12 and set(problems) == {""}


def test_truncate_to_lowers_the_high_watermark_to_the_new_end(tmp_path: Path) -> None:
    """UnifiedLog.truncateTo: a high watermark above the truncation target becomes the new log
    end. power-loss-default-flush-swarm seed 126: a follower at HW 83 cut to 82 kept 83, and once
    it led and appended, its high watermark read 83 with its whole ISR at 82."""
    async def body(node: NodeRuntime) -> Any:
        log = await Log.load(node, "t-0", SMALL)
        for i in range(6):
            append(log, i)
        log.update_high_watermark(5)
        await log.truncate_to(4)
        after_truncate = log.high_watermark
        append(log, 98)
        append(log, 99)
        return after_truncate, log.high_watermark, log.log_end_offset

    assert run_real(tmp_path, body) == (4, 4, 6)


def test_truncate_to_at_the_log_end_still_drops_an_epoch_that_starts_there(tmp_path: Path) -> None:
    """power-loss-default-flush-swarm seed 210: a replica that became leader of epoch 2 at its
    log end and appended nothing keeps (2, end) in its epoch cache; no other replica knows epoch
    2, so fetching with it as last_fetched_epoch is answered "diverged" at every fetch unless the
    no-op truncation drops it (UnifiedLog.truncateTo cuts the cache at the log end even when
    there is nothing to truncate)."""
    async def body(node: NodeRuntime) -> Any:
        log = await Log.load(node, "t-0", SMALL)
        for i in range(3):
            append(log, i, epoch=0)
        await log.maybe_assign_epoch_start_offset(2, log.log_end_offset)
        before = list(log.leader_epoch_cache.entries)
        truncated = await log.truncate_to(3)
        after = list(log.leader_epoch_cache.entries)
        log.close()
        return before, truncated, after, log.log_end_offset

    before, truncated, after, leo = run_real(tmp_path, body)
    assert before == [(0, 0), (2, 3)]
    assert (truncated, after, leo) == (False, [(0, 0)], 3)


def test_a_follower_append_assigns_every_batch_epoch_as_kafka(tmp_path: Path) -> None:
    """Issue 18 (bit-rot seed 24): a batch whose partition leader epoch was bit-flipped on the
    leader's disk (a field the CRC does not cover) reaches the follower's epoch cache, as in
    Kafka; the next batch of the real epoch then takes it out again (UnifiedLog.append assigns
    every batch's epoch; assign drops the entries it contradicts) instead of the inflated
    epoch sticking and steering the next OffsetForLeaderEpoch truncation."""
    from kafkasim.records.batch import PARTITION_LEADER_EPOCH_OFFSET

    async def body(node: NodeRuntime) -> None:
        log = await Log.load(node, "t-0", LogConfig())
        for offset, epoch in [(0, 0), (1, 8192), (2, 0)]:
            buf, headers = batch(offset)
            buf[0:8] = offset.to_bytes(8, "big")
            buf[PARTITION_LEADER_EPOCH_OFFSET:PARTITION_LEADER_EPOCH_OFFSET + 4] = epoch.to_bytes(4, "big")
            headers = list(iter_batches(buf, validate=True))  # the CRC still holds
            log.append_as_follower(bytes(buf), headers)
            if epoch == 8192:
                assert log.leader_epoch_cache.entries == [(0, 0), (8192, 1)]
        assert log.leader_epoch_cache.entries == [(0, 2)]
        log.close()
    run_real(tmp_path, body)


def test_becoming_leader_assigns_its_epoch_even_below_a_flipped_one(tmp_path: Path) -> None:
    """bit-rot seed 13 (stop 8): a follower took a batch whose epoch bit flipped (2**27) into its
    epoch cache, then became leader of epoch 1. Kafka's makeLeader calls the cache's plain assign
    (UnifiedLog.maybeAssignEpochStartOffset), which drops the contradicting higher entry; kafkasim
    assigned only an epoch above the latest, kept (2**27, 1) and answered every follower's
    last_fetched_epoch 1 with epoch 0's end: followers truncated and refetched for good."""
    from kafkasim.records.batch import PARTITION_LEADER_EPOCH_OFFSET

    async def body(node: NodeRuntime) -> Any:
        log = await Log.load(node, "t-0", LogConfig())
        for offset, epoch in [(0, 0), (1, 1 << 27)]:
            buf, _ = batch(offset)
            buf[0:8] = offset.to_bytes(8, "big")
            buf[PARTITION_LEADER_EPOCH_OFFSET:PARTITION_LEADER_EPOCH_OFFSET + 4] = epoch.to_bytes(4, "big")
            log.append_as_follower(bytes(buf), list(iter_batches(buf, validate=True)))
        flipped = list(log.leader_epoch_cache.entries)
        await log.maybe_assign_epoch_start_offset(1, log.log_end_offset)
        entries = list(log.leader_epoch_cache.entries)
        log.close()
        return flipped, entries, log.leader_epoch_cache.end_offset_for(1, 2)

    flipped, entries, end = run_real(tmp_path, body)
    assert flipped == [(0, 0), (1 << 27, 1)]
    assert entries == [(0, 0), (1, 2)]
    assert end == (1, 2)  # a follower fetching with epoch 1 at 2 is not diverged
