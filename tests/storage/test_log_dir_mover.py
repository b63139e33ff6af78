"""Moving a replica between log dirs through a -future log (AlterReplicaLogDirs), on the
simulated runtime: the data moves whole, appends made during the move arrive, the old dir goes
to -delete, and a crash mid-move leaves what Kafka's would."""

from __future__ import annotations

from typing import Any

import pytest
from storage_helpers import append, read_all, run_sim

from kafkasim.runtime.api import NodeRuntime
from kafkasim.storage.log import Log, LogConfig
from kafkasim.storage.log_dir_mover import ALTER_LOG_DIRS_DELAY_MS
from kafkasim.storage.log_manager import LogManager, LogManagerConfig

pytestmark = pytest.mark.unit

FAST = LogManagerConfig(initial_task_delay_ms=100)


def partition_dirs(rt: NodeRuntime, log_dir: str) -> list[str]:
    return sorted(n for n in rt.fs.listdir(log_dir) if n.startswith("t-0"))


def test_a_move_copies_everything_and_catches_up_with_appends() -> None:
    async def body(rt: NodeRuntime, world: Any) -> Any:
        m = LogManager(rt, "d1,d2", LogConfig(segment_bytes=300, file_delete_delay_ms=5000), FAST)
        log = await m.get_or_create_log("t", 0, topic_id=bytes(range(16)))
        for i in range(12):
            append(log, i, ts=rt.now_ms())
        log.update_high_watermark(12)
        swapped: list[Log] = []
        await m.mover.start_move(("t", 0), "d2", swapped.append)
        fut = m.mover.future(("t", 0))
        assert fut is not None and fut.dir.startswith("d2/t-0.") and fut.dir.endswith("-future")
        during = partition_dirs(rt, "d2")
        append(log, 12, ts=rt.now_ms())              # before the copy
        await rt.sleep(ALTER_LOG_DIRS_DELAY_MS + 0.5)
        caught_up = m.get_log("t", 0) is log         # copied, not swapped yet: the swap catches up
        for i in range(13, 15):
            current = m.get_log("t", 0)
            assert current is not None
            append(current, i, ts=rt.now_ms())
        await rt.sleep(1000)
        new = m.get_log("t", 0)
        left = partition_dirs(rt, "d1")
        await rt.sleep(6000)
        return during, swapped, new, log, left, partition_dirs(rt, "d1"), m.mover.future(("t", 0)), caught_up

    during, swapped, new, old, left, later, fut, caught_up = run_sim(body)
    assert caught_up
    assert len(during) == 1 and during[0].endswith("-future")
    assert swapped == [new] and new is not old and old.closed
    assert new.dir == "d2/t-0" and new.topic_id == bytes(range(16))
    assert [o for o, _, _ in read_all(new)] == list(range(15)) and new.high_watermark >= 12
    assert len(left) == 1 and left[0].startswith("t-0.") and left[0].endswith("-delete")
    assert later == [] and fut is None           # the old dir removed file.delete.delay.ms later


def test_moving_to_the_dir_it_is_in_does_nothing_and_a_deleted_log_abandons_the_move() -> None:
    async def body(rt: NodeRuntime, world: Any) -> Any:
        m = LogManager(rt, "d1,d2", LogConfig(file_delete_delay_ms=10), FAST)
        await m.get_or_create_log("t", 0)
        await m.mover.start_move(("t", 0), "d1", lambda _: None)
        same = m.mover.future(("t", 0))
        await m.mover.start_move(("t", 0), "d2", lambda _: None)
        await m.async_delete("t", 0)
        await rt.sleep(ALTER_LOG_DIRS_DELAY_MS + 100)
        return same, m.mover.future(("t", 0)), partition_dirs(rt, "d1"), partition_dirs(rt, "d2")

    same, fut, d1, d2 = run_sim(body)
    assert same is None and fut is None
    assert d1 == [] and d2 == []


def test_a_crash_before_the_swap_leaves_the_replica_where_it_was() -> None:
    async def body(rt: NodeRuntime, world: Any) -> Any:
        m = LogManager(rt, "d1,d2", LogConfig(), FAST)
        log = await m.get_or_create_log("t", 0)
        for i in range(3):
            append(log, i, ts=rt.now_ms())
        await log.flush()
        await m.mover.start_move(("t", 0), "d2", lambda _: None)
        world.nodes["b"].crash("kill")
        rt2 = world.nodes["b"].restart()
        m2 = LogManager(rt2, "d1,d2", LogConfig(file_delete_delay_ms=10), FAST)
        await m2.startup()
        reloaded = m2.get_log("t", 0)
        await rt2.sleep(1000)
        return m2.dir_of(reloaded) if reloaded else None, reloaded.log_end_offset if reloaded else -1, \
            partition_dirs(rt2, "d2")

    where, leo, d2 = run_sim(body)
    assert (where, leo, d2) == ("d1", 3, [])      # the partial future log deleted at startup
