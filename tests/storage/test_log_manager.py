"""LogManager on the simulated runtime: loading a log dir, the jobs on the runtime's clock
(flush.ms flusher, retention, checkpoints), the clean-shutdown marker, a log dir going offline
on an I/O error — and the broker using it."""

from __future__ import annotations

import errno
from typing import Any

import pytest
from storage_helpers import append, read_all, run_sim

from kafkasim.runtime.api import NodeRuntime
from kafkasim.storage.checkpoints import CLEAN_SHUTDOWN_FILE
from kafkasim.storage.log import KafkaStorageError, LogConfig
from kafkasim.storage.log_manager import DuplicateLogDirError, LogManager, LogManagerConfig

pytestmark = pytest.mark.unit

FAST = LogManagerConfig(initial_task_delay_ms=100, retention_check_interval_ms=1000,
                        flush_offset_checkpoint_interval_ms=1000, flush_start_offset_checkpoint_interval_ms=1000,
                        high_watermark_checkpoint_interval_ms=1000, cleaner_backoff_ms=1000)


def _read(rt: NodeRuntime, path: str) -> bytes:
    f = rt.fs.open(path, create=False)
    return f.read(0, f.size())


def test_clean_shutdown_writes_checkpoints_and_marker_and_restart_skips_recovery() -> None:
    async def body(rt: NodeRuntime, world: Any) -> Any:
        m = LogManager(rt, "kafka-logs", LogConfig(segment_bytes=500), FAST)
        log = await m.get_or_create_log("t", 0, topic_id=bytes(range(16)))
        other = await m.get_or_create_log("u", 3)
        for i in range(10):
            append(log, i, ts=rt.now_ms())
        append(other, 0, ts=rt.now_ms())
        log.delete_records(4)
        await m.shutdown()
        files = {n: _read(rt, f"kafka-logs/{n}") for n in rt.fs.listdir("kafka-logs")
                 if n.endswith("checkpoint") or n.startswith(".")}
        meta = _read(rt, "kafka-logs/t-0/partition.metadata")
        # (A power loss now could take the marker's directory entry: Kafka does not fsync the
        # directory for it, and the cost is only a recovery. The process just exits here.)
        world.nodes["b"].crash("kill")
        rt2 = world.nodes["b"].restart()
        m2 = LogManager(rt2, "kafka-logs", LogConfig(segment_bytes=500), FAST)
        await m2.startup()
        log2 = m2.get_log("t", 0)
        assert log2 is not None
        state = (m2.had_clean_shutdown, rt2.fs.exists(f"kafka-logs/{CLEAN_SHUTDOWN_FILE}"), log2.recovery_point,
                 log2.log_start_offset, [o for o, _, _ in read_all(log2, log2.log_start_offset)], log2.topic_id)
        return files, meta, state

    files, meta, state = run_sim(body)
    assert files[CLEAN_SHUTDOWN_FILE] == b'{"version":0,"brokerEpoch":-1}'
    assert files["recovery-point-offset-checkpoint"] == b"0\n2\nt 0 10\nu 3 1\n"
    assert files["log-start-offset-checkpoint"] == b"0\n1\nt 0 4\n"
    assert files["replication-offset-checkpoint"] == b"0\n2\nt 0 10\nu 3 1\n"
    assert files["cleaner-offset-checkpoint"] == b"0\n0\n"
    assert meta == b"version: 0\ntopic_id: AAECAwQFBgcICQoLDA0ODw"
    assert state == (True, False, 10, 4, list(range(4, 10)), bytes(range(16)))


def test_unclean_restart_recovers_from_the_checkpointed_recovery_point() -> None:
    async def body(rt: NodeRuntime, world: Any) -> Any:
        m = LogManager(rt, "kafka-logs", LogConfig(segment_bytes=400), FAST)
        await m.startup()
        log = await m.get_or_create_log("t", 0)
        for i in range(12):
            append(log, i)
        await log.flush()
        await m.checkpoint_recovery_offsets()
        checkpointed = log.recovery_point
        for i in range(12, 15):
            append(log, i)
        world.nodes["b"].crash("kill")  # the process dies: page cache (and the tail) survive
        rt2 = world.nodes["b"].restart()
        m2 = LogManager(rt2, "kafka-logs", LogConfig(segment_bytes=400), FAST)
        await m2.startup()
        log2 = m2.get_log("t", 0)
        assert log2 is not None
        return checkpointed, m2.had_clean_shutdown, log2.log_end_offset, log2.recovery_point

    checkpointed, clean, leo, rp = run_sim(body)
    assert (checkpointed, clean, leo, rp) == (12, False, 15, 12)


def test_the_flusher_honours_flush_ms_on_the_runtime_clock() -> None:
    async def body(rt: NodeRuntime, world: Any) -> Any:
        m = LogManager(rt, "kafka-logs", LogConfig(flush_ms=5000), FAST)
        log = await m.get_or_create_log("t", 0)
        append(log, 0, ts=rt.now_ms())
        points = []
        for _ in range(8):
            await rt.sleep(1000)
            points.append(log.recovery_point)
        return points

    points = run_sim(body)
    assert points[0] == 0 and points[-1] == 1 and 3 <= points.index(1) <= 6


def test_retention_and_checkpoint_jobs_run_periodically() -> None:
    async def body(rt: NodeRuntime, world: Any) -> Any:
        m = LogManager(rt, "kafka-logs", LogConfig(segment_bytes=300, retention_ms=2000), FAST)
        log = await m.get_or_create_log("t", 0)
        for i in range(10):
            append(log, i, ts=rt.now_ms())
        segments = len(log.segments)
        await rt.sleep(5000)
        after = [s.base_offset for s in log.segments]
        ckpt = _read(rt, "kafka-logs/recovery-point-offset-checkpoint")
        await rt.sleep(70_000)  # file.delete.delay.ms later the .deleted files are gone
        return segments, after, log.log_start_offset, ckpt, sorted(rt.fs.listdir("kafka-logs/t-0"))

    segments, after, start, ckpt, names = run_sim(body)
    assert segments > 2 and after == [10] and start == 10
    assert ckpt == b"0\n1\nt 0 10\n"  # the roll's flush moved the recovery point
    assert not [n for n in names if n.endswith(".deleted")]


def test_an_fsync_error_takes_the_log_dir_offline() -> None:
    async def body(rt: NodeRuntime, world: Any) -> Any:
        m = LogManager(rt, "kafka-logs", LogConfig(), FAST)
        log = await m.get_or_create_log("t", 0)
        other = await m.get_or_create_log("u", 0)
        append(log, 0)
        world.nodes["b"].disk.fail_next_fsync()
        with pytest.raises(KafkaStorageError):
            await log.flush()
        errors = []
        for call in (lambda: append(log, 1), lambda: other.read(0, 10), lambda: append(other, 0)):
            try:
                call()
            except KafkaStorageError as exc:
                errors.append(type(exc.__cause__).__name__ if exc.__cause__ else "offline")
        await m.shutdown()
        return m.offline, errors, rt.fs.exists(f"kafka-logs/{CLEAN_SHUTDOWN_FILE}")

    offline, errors, marker = run_sim(body)
    assert offline and errors == ["offline", "offline", "offline"] and not marker


def test_enospc_on_append_is_a_storage_error_and_recovery_cuts_the_partial_batch() -> None:
    async def body(rt: NodeRuntime, world: Any) -> Any:
        m = LogManager(rt, "kafka-logs", LogConfig(), FAST)
        log = await m.get_or_create_log("t", 0)
        append(log, 0)
        await log.flush()
        disk = world.nodes["b"].disk
        disk.capacity_bytes = sum(len(f.data) for f in disk.files.values()) + 30
        with pytest.raises(KafkaStorageError) as exc:
            append(log, 1)
        world.nodes["b"].crash("kill")
        disk.capacity_bytes = None
        rt2 = world.nodes["b"].restart()
        m2 = LogManager(rt2, "kafka-logs", LogConfig(), FAST)
        await m2.startup()
        log2 = m2.get_log("t", 0)
        assert log2 is not None
        return exc.value.__cause__.errno, log2.log_end_offset, log2.recovery_truncations  # type: ignore[union-attr]

    err, leo, truncations = run_sim(body)
    assert err == errno.ENOSPC and leo == 1
    assert truncations[0]["dropped_bytes"] == 30 and truncations[0]["reason"] == "partial batch"


def test_closed_logs_leave_the_checkpoints() -> None:
    async def body(rt: NodeRuntime, world: Any) -> Any:
        m = LogManager(rt, "kafka-logs", LogConfig(), FAST)
        a = await m.get_or_create_log("a", 0)
        await m.get_or_create_log("b", 0)
        a.close()  # what topic deletion does
        await m.checkpoint_recovery_offsets()
        return _read(rt, "kafka-logs/recovery-point-offset-checkpoint")

    assert run_sim(body) == b"0\n1\nb 0 0\n"


def test_log_manager_config_from_server_properties() -> None:
    c = LogManagerConfig.from_properties({"log.retention.check.interval.ms": "1000", "log.cleaner.enable": "false",
                                          "replica.high.watermark.checkpoint.interval.ms": 7, "unknown.x": 1})
    assert c.retention_check_interval_ms == 1000 and not c.cleaner_enable
    assert c.high_watermark_checkpoint_interval_ms == 7


def test_a_restart_does_not_pin_the_high_watermark_to_the_checkpoint() -> None:
    """The checkpointed high watermark is the replication layer's to apply; the log keeps
    reporting its end offset, so DeleteRecords and retention keep working after a restart."""
    async def body(rt: NodeRuntime, world: Any) -> Any:
        m = LogManager(rt, "kafka-logs", LogConfig(), FAST)
        log = await m.get_or_create_log("t", 0)
        append(log, 0, ts=rt.now_ms())
        await m.shutdown()
        world.nodes["b"].crash("kill")
        rt2 = world.nodes["b"].restart()
        m2 = LogManager(rt2, "kafka-logs", LogConfig(), FAST)
        log2 = await m2.get_or_create_log("t", 0)
        for i in range(1, 4):
            append(log2, i, ts=rt2.now_ms())
        return m2.high_watermark_checkpoint, log2.high_watermark, log2.delete_records(3)

    assert run_sim(body) == ({("t", 0): 1}, 4, 3)


# ---------------------------------------------------------------- several log dirs
def test_new_logs_go_to_the_dir_with_fewest_logs_and_checkpoints_stay_per_dir() -> None:
    async def body(rt: NodeRuntime, world: Any) -> Any:
        m = LogManager(rt, "d1,d2,d3", LogConfig(), FAST)
        placed = {}
        for topic, p in [("a", 0), ("a", 1), ("a", 2), ("b", 0)]:
            log = await m.get_or_create_log(topic, p)
            placed[(topic, p)] = m.dir_of(log)
        await m.async_delete("a", 1)                 # d2 empties: the next log goes there
        placed[("c", 0)] = m.dir_of(await m.get_or_create_log("c", 0))
        await m.shutdown()
        files = {d: _read(rt, f"{d}/recovery-point-offset-checkpoint") for d in ("d1", "d2", "d3")}
        markers = [rt.fs.exists(f"{d}/{CLEAN_SHUTDOWN_FILE}") for d in ("d1", "d2", "d3")]
        world.nodes["b"].crash("kill")
        rt2 = world.nodes["b"].restart()
        m2 = LogManager(rt2, "d1,d2,d3", LogConfig(), FAST)
        await m2.startup()
        reloaded = {tp: m2.dir_of(log) for tp, log in m2.live_logs()}
        return placed, files, markers, reloaded, m2.had_clean_shutdown

    placed, files, markers, reloaded, clean = run_sim(body)
    assert placed == {("a", 0): "d1", ("a", 1): "d2", ("a", 2): "d3", ("b", 0): "d1", ("c", 0): "d2"}
    assert files == {"d1": b"0\n2\na 0 0\nb 0 0\n", "d2": b"0\n1\nc 0 0\n", "d3": b"0\n1\na 2 0\n"}
    assert markers == [True, True, True] and clean
    assert reloaded == {("a", 0): "d1", ("a", 2): "d3", ("b", 0): "d1", ("c", 0): "d2"}


def test_a_partition_in_two_dirs_stops_the_startup() -> None:
    async def body(rt: NodeRuntime, world: Any) -> Any:
        m = LogManager(rt, "d1,d2", LogConfig(), FAST)
        await m.get_or_create_log("t", 0)
        await m.shutdown()
        rt.fs.mkdir("d2/t-0")
        m2 = LogManager(rt, "d1,d2", LogConfig(), FAST)
        try:
            await m2.startup()
        except DuplicateLogDirError as exc:
            return str(exc)
        return None

    msg = run_sim(body)
    assert msg is not None and msg.startswith("Duplicate log directories for t-0 are found in both d1/t-0 and d2/t-0.")
