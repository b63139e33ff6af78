"""Log compaction: the latest value per key stays, tombstones stay delete.retention.ms then go,
every batch keeps its last offset and the producer's sequence (empty batches allowed), untouched
batches are copied byte for byte, and the cleaner never cleans past what recovery trusts."""

from __future__ import annotations

from typing import Any, Optional

import pytest
from storage_helpers import keyed_batch, read_all, run_sim

from kafkasim.records.batch import decode_batch_records, iter_batches, read_header
from kafkasim.records.compression import CompressionType
from kafkasim.runtime.api import NodeRuntime
from kafkasim.storage.log import Log, LogConfig
from kafkasim.storage.log_manager import LogManager
from kafkasim.storage.verify import check_log

pytestmark = pytest.mark.unit

COMPACT = LogConfig(cleanup_policy="compact", segment_bytes=600, index_interval_bytes=100,
                    delete_retention_ms=10_000, segment_index_bytes=4096)


def _records(log: Log) -> list[tuple[int, Optional[bytes], Optional[bytes]]]:
    out = []
    for _, _, data in read_all(log, log.log_start_offset):
        out += [(r.offset, r.key, r.value) for r in decode_batch_records(data)]
    return out


def _batches(log: Log) -> list[tuple[int, int, int, int]]:
    return [(h.base_offset, h.last_offset, h.producer_id, h.base_sequence) for _, h, _ in read_all(log)]


async def _manager_with_log(rt: NodeRuntime, cfg: LogConfig) -> tuple[LogManager, Log]:
    manager = LogManager(rt, "logs", cfg)
    log = await manager.get_or_create_log("c", 0)
    return manager, log


async def _make_cleanable(manager: LogManager, log: Log) -> None:
    """Roll, flush and checkpoint the recovery point: everything appended becomes cleanable."""
    log.roll()
    await log.flush()
    await manager.checkpoint_recovery_offsets()


def test_latest_value_per_key_survives_and_batches_keep_their_offsets() -> None:
    async def body(rt: NodeRuntime, world: Any) -> Any:
        manager, log = await _manager_with_log(rt, COMPACT)
        for i in range(12):
            buf, hs = keyed_batch([(f"k{i % 3}".encode(), f"v{i}".encode()), (f"x{i}".encode(), b"once")], 1000 + i)
            log.append_as_leader(buf, hs, 1)
        buf, hs = keyed_batch([(None, b"no key")], 2000)
        log.append_as_leader(buf, hs, 1)
        before = _batches(log)
        await _make_cleanable(manager, log)
        result = await manager.clean_log(log)
        return before, _batches(log), _records(log), result, check_log(log), manager.cleaner_checkpoint

    before, after, records, result, problems, checkpoint = run_sim(body)
    assert problems == []
    latest = {f"k{j}".encode(): max(i for i in range(12) if i % 3 == j) for j in range(3)}
    kept_k = {(k, v) for _, k, v in records if k and k.startswith(b"k")}
    assert kept_k == {(k, f"v{i}".encode()) for k, i in latest.items()}
    assert {k for _, k, _ in records if k and k.startswith(b"x")} == {f"x{i}".encode() for i in range(12)}
    assert all(k is not None for _, k, _ in records)  # a record without a key is not kept
    # Batches keep (base offset, last offset): a subset of the originals, none renumbered.
    assert set(after) <= set(before) and len(after) == 12 and after == sorted(after)
    assert result.end_offset == 25 and checkpoint == {("c", 0): 25} and result.segments_cleaned >= 2


def test_untouched_batches_are_copied_byte_for_byte_and_filtered_ones_rebuilt() -> None:
    async def body(rt: NodeRuntime, world: Any) -> Any:
        manager, log = await _manager_with_log(rt, COMPACT)
        for i in range(6):
            buf, hs = keyed_batch([(b"a", f"a{i}".encode()), (f"u{i}".encode(), b"u")], 1000 + i,
                                  compression=CompressionType.GZIP if i == 2 else 0)
            log.append_as_leader(buf, hs, 1)
        buf, hs = keyed_batch([(b"z", b"only")], 1100)
        log.append_as_leader(buf, hs, 1)
        original = {o: data for o, _, data in read_all(log)}
        await _make_cleanable(manager, log)
        await manager.clean_log(log)
        return original, {o: data for o, _, data in read_all(log)}

    original, cleaned = run_sim(body)
    assert cleaned[12] == original[12]  # nothing to drop: the same bytes
    for base in (0, 2, 4, 6, 8):        # "a" superseded: rebuilt with the other record only
        h, o = read_header(cleaned[base]), read_header(original[base])
        assert (h.base_offset, h.last_offset_delta, h.compression_id) == (o.base_offset, o.last_offset_delta,
                                                                         o.compression_id)
        kept = [(r.offset, r.key) for r in decode_batch_records(cleaned[base])]
        assert kept == [(base + 1, f"u{base // 2}".encode())]
    assert [(r.offset, r.value) for r in decode_batch_records(cleaned[10])] == [(10, b"a5"), (11, b"u")]


def test_tombstones_stay_delete_retention_ms_then_go() -> None:
    async def body(rt: NodeRuntime, world: Any) -> Any:
        manager, log = await _manager_with_log(rt, COMPACT)
        for i, (k, v) in enumerate([(b"a", b"1"), (b"b", b"1"), (b"a", None), (b"c", b"1")]):
            buf, hs = keyed_batch([(k, v)], 1000 + i)
            log.append_as_leader(buf, hs, 1)
        await _make_cleanable(manager, log)
        await manager.clean_log(log)
        first = _records(log)
        horizon = read_header(next(d for o, _, d in read_all(log) if o == 2)).delete_horizon_ms
        await rt.sleep(5_000)
        await manager.clean_log(log)  # before the horizon: still there
        second = _records(log)
        await rt.sleep(6_000)
        for i in range(2):            # new data so there is a dirty section again
            buf, hs = keyed_batch([(b"d", f"{i}".encode())], 1100 + i)
            log.append_as_leader(buf, hs, 1)
        await _make_cleanable(manager, log)
        manager.cleaner_checkpoint.clear()
        await manager.clean_log(log)
        return first, second, _records(log), horizon, rt.now_ms()

    first, second, third, horizon, now = run_sim(body)
    assert first == [(1, b"b", b"1"), (2, b"a", None), (3, b"c", b"1")]
    assert horizon is not None and horizon <= now
    assert second == first
    assert third == [(1, b"b", b"1"), (3, b"c", b"1"), (5, b"d", b"1")]  # the tombstone went, and d's first value


def _append_with_state(log: Log, buf: bytearray, origin: str = "CLIENT") -> None:
    """Append as a Partition does: through the producer state (analyze, append, on_append)."""
    from kafkasim.storage.producer_state import AppendOrigin
    hs = list(iter_batches(buf))
    psm = log.producer_state_manager
    assert psm.analyze_append(hs, log.log_end_offset, AppendOrigin[origin], buf) is None
    psm.on_append(log.append_as_leader(buf, hs, 1))


@pytest.mark.parametrize("expired", [False, True])
def test_a_producers_last_batch_stays_as_an_empty_batch(expired: bool) -> None:
    """Only for a producer the producer state still has (Kafka's lastRecordsOfActiveProducers):
    once it expired, all its batches may go."""
    async def body(rt: NodeRuntime, world: Any) -> Any:
        manager, log = await _manager_with_log(rt, COMPACT)
        seq = 0
        for i in range(3):  # producer 7: three batches of key "p", each superseded by a later write
            buf, hs = keyed_batch([(b"p", f"{i}".encode()), (b"p", f"{i}b".encode())], 1000 + i,
                                  producer_id=7, base_sequence=seq)
            seq += 2
            _append_with_state(log, bytearray(buf))
        buf, hs = keyed_batch([(b"p", b"final")], 1100)  # a non-idempotent write supersedes them all
        _append_with_state(log, bytearray(buf))
        if expired:
            assert log.producer_state_manager.remove_expired_producers(10**9, 1000) == [7]
        await _make_cleanable(manager, log)
        await manager.clean_log(log)
        return [(h.base_offset, h.last_offset, h.producer_id, h.base_sequence, h.records_count)
                for _, h, _ in read_all(log)], check_log(log)

    batches, problems = run_sim(body)
    assert problems == []
    if expired:
        assert batches == [(6, 6, -1, -1, 1)]
    else:  # the last batch of producer 7 stays, empty, with its offsets and sequence; the others go
        assert batches == [(4, 5, 7, 4, 0), (6, 6, -1, -1, 1)]


def test_the_cleaner_stops_at_the_checkpointed_recovery_point() -> None:
    async def body(rt: NodeRuntime, world: Any) -> Any:
        manager, log = await _manager_with_log(rt, COMPACT)
        for i in range(10):
            buf, hs = keyed_batch([(b"k", f"{i}".encode())], 1000 + i)
            log.append_as_leader(buf, hs, 1)
        log.roll()
        await log.flush()  # everything flushed, but no recovery-point checkpoint written yet
        nothing = await manager.clean_log(log)
        await manager.checkpoint_recovery_offsets()
        something = await manager.clean_log(log)
        return nothing.segments_cleaned, something.segments_cleaned, [o for o, _, _ in read_all(log)]

    nothing, something, offsets = run_sim(body)
    assert nothing == 0 and something > 0 and offsets == [9]


def test_min_cleanable_dirty_ratio_picks_the_filthiest_log() -> None:
    async def body(rt: NodeRuntime, world: Any) -> Any:
        manager = LogManager(rt, "logs", COMPACT)
        a = await manager.get_or_create_log("a", 0)
        b = await manager.get_or_create_log("b", 0, config=LogConfig(cleanup_policy="delete"))
        for i in range(10):
            for log in (a, b):
                buf, hs = keyed_batch([(b"k", f"{i}".encode() * 20)], 1000 + i)
                log.append_as_leader(buf, hs, 1)
        for log in (a, b):
            log.roll()
            await log.flush()
        await manager.checkpoint_recovery_offsets()
        result = await manager.clean_filthiest_log()
        again = await manager.clean_filthiest_log()  # all clean now: nothing above the ratio
        return result is not None and result.segments_cleaned, again, len(read_all(a)), len(read_all(b))

    cleaned, again, a_batches, b_batches = run_sim(body)
    assert cleaned and again is None and a_batches == 1 and b_batches == 10


def test_a_crash_during_the_swap_is_finished_at_load() -> None:
    """Power loss at every point of replace_segments: the next load serves either the old
    segments or the cleaned one — the same latest values either way."""
    outcomes: set[int] = set()
    for seed in range(30):
        async def body(rt: NodeRuntime, world: Any, seed: int = seed) -> Any:
            manager, log = await _manager_with_log(rt, COMPACT)
            await rt.fs.fsync_dir("logs")
            for i in range(12):
                buf, hs = keyed_batch([(f"k{i % 4}".encode(), f"{i}".encode())], 1000 + i)
                log.append_as_leader(buf, hs, 1)
            await _make_cleanable(manager, log)
            clean = rt.spawn(manager.clean_log(log))
            await rt.sleep(seed * 0.7)  # the clean's fsyncs take 0.2-2 ms each: crash at every stage
            world.nodes["b"].crash("power")
            del clean
            rt2 = world.nodes["b"].restart()
            log2 = await Log.load(rt2, "logs/c-0", COMPACT, recovery_point=log.checkpointed_recovery_point)
            latest = {}
            for off, k, v in _records(log2):
                latest[k] = (off, v)
            return check_log(log2), latest, len(read_all(log2))

        problems, latest, batches = run_sim(body, seed=seed)
        assert problems == []
        assert latest == {f"k{j}".encode(): (8 + j, f"{8 + j}".encode()) for j in range(4)}
        outcomes.add(batches)
    assert {4, 12} <= outcomes  # fully cleaned and not cleaned at all were both seen (and maybe half)


def test_batches_survive_read_back_with_valid_crc_after_cleaning() -> None:
    async def body(rt: NodeRuntime, world: Any) -> Any:
        manager, log = await _manager_with_log(rt, COMPACT)
        for i in range(8):
            buf, hs = keyed_batch([(b"a", b"x" * 50), (f"b{i}".encode(), None)], 1000 + i,
                                  compression=CompressionType.LZ4 if i % 2 else CompressionType.ZSTD)
            log.append_as_leader(buf, hs, 1)
        await _make_cleanable(manager, log)
        await manager.clean_log(log)
        return [list(iter_batches(d, validate=True)) for _, _, d in read_all(log)], check_log(log)

    validated, problems = run_sim(body)
    assert problems == [] and all(len(v) == 1 for v in validated)


def test_cleaned_gaps_never_look_like_lost_tails_to_recovery() -> None:
    """Why the cleaner stops at the checkpointed recovery point: a cleaned segment can end
    before the next one begins (its last batches were superseded). Recovery starts at the
    checkpointed recovery point and reads such a gap as a lost unflushed tail — so cleaning
    past it would make recovery delete good, fsynced segments."""
    async def body(rt: NodeRuntime, world: Any) -> Any:
        manager, log = await _manager_with_log(rt, COMPACT)
        await manager.checkpoint_recovery_offsets()  # recovery point 0 on disk
        for i in range(12):
            buf, hs = keyed_batch([(f"k{i % 2}".encode(), f"{i}".encode() * 40)], 1000 + i)
            log.append_as_leader(buf, hs, 1)
        log.roll()
        await log.flush()  # all fsynced, but the checkpoint still says 0
        await manager.clean_log(log)
        world.nodes["b"].crash("power")
        rt2 = world.nodes["b"].restart()
        manager2 = LogManager(rt2, "logs", COMPACT)
        await manager2.startup()
        log2 = manager2.get_log("c", 0)
        assert log2 is not None
        return _records(log2)[-2:]

    assert run_sim(body) == [(10, b"k0", b"10" * 40), (11, b"k1", b"11" * 40)]


def test_aborted_transactions_are_removed_and_never_shadow_committed_values() -> None:
    """An aborted transaction's value for a key does not enter the offset map (the committed one
    before it survives), its records go, its producer's last batch stays empty for the sequence,
    the marker stays, and the cleaned segment keeps the txn index entry."""
    from kafkasim.records.batch import Record, build_batch
    from kafkasim.records.control import end_txn_marker_batch
    from kafkasim.storage.producer_state import AppendOrigin

    def txn(value: bytes, seq: int) -> bytearray:
        return bytearray(build_batch([Record(1000, b"k", value)], producer_id=9, producer_epoch=0,
                                     base_sequence=seq, is_transactional=True))

    async def body(rt: NodeRuntime, world: Any) -> Any:
        manager, log = await _manager_with_log(rt, COMPACT)
        psm = log.producer_state_manager
        for buf, origin in ((bytearray(keyed_batch([(b"k", b"committed")], 1000)[0]), AppendOrigin.CLIENT),
                            (txn(b"aborted", 0), AppendOrigin.CLIENT),
                            (bytearray(end_txn_marker_batch(9, 0, 0, False, 1001)), AppendOrigin.COORDINATOR)):
            hs = list(iter_batches(buf))
            assert psm.analyze_append(hs, log.log_end_offset, origin, buf) is None
            psm.on_append(log.append_as_leader(buf, hs, 1))
        log.update_high_watermark(log.log_end_offset)
        index_before = log.segments[0].txn_index.all_aborted_txns()
        await _make_cleanable(manager, log)
        await manager.clean_log(log)
        batches = [(h.base_offset, h.records_count, h.is_control) for _, h, _ in read_all(log)]
        return (index_before, log.segments[0].txn_index.all_aborted_txns(), _records(log), batches,
                check_log(log))

    index_before, index_after, records, batches, problems = run_sim(body)
    assert problems == []
    assert [(r[0], r[2]) for r in records if r[1] == b"k"] == [(0, b"committed")], (records, batches)
    assert batches == [(0, 1, False), (1, 0, False), (2, 1, True)]
    assert index_after == index_before and len(index_before) == 1


def test_the_snapshots_of_segments_merged_away_are_deleted() -> None:
    """UnifiedLog.replaceSegments deletes the producer snapshots of the segments a clean replaced
    (as real Kafka 3.9.1 leaves a compacted partition: one snapshot, at the active segment)."""
    async def body(rt: NodeRuntime, world: Any) -> Any:
        manager, log = await _manager_with_log(rt, COMPACT)
        for i in range(4):  # four segments, a snapshot at each roll
            buf, _ = keyed_batch([(b"k", f"{i}".encode())], 1000 + i, producer_id=7, base_sequence=i)
            _append_with_state(log, buf)
            log.roll()
        before = log.producer_state_manager.snapshot_offsets()
        await _make_cleanable(manager, log)
        await manager.clean_log(log)
        await rt.sleep(log.config.file_delete_delay_ms + 1000)
        return before, [s.base_offset for s in log.segments], log.producer_state_manager.snapshot_offsets()

    before, bases, after = run_sim(body)
    assert before == [1, 2, 3] and bases == [0, 4]
    assert after == []  # 1-3 were the snapshots of segments merged into segment 0
