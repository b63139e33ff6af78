"""A truncation while a flush waits on its fsyncs (issue 18, bit-rot seed 66): the flush must not
set the recovery point to its stale offset above the truncated log end — Kafka's UnifiedLog.flush
would (markFlushed after localLog.flush with nothing in between), so a later crash could skip
recovering the tail written after the truncation."""

from __future__ import annotations

from typing import Any

import pytest
from storage_helpers import append, run_sim

from kafkasim.runtime.api import NodeRuntime
from kafkasim.storage.log import Log, LogConfig

pytestmark = pytest.mark.sim


def test_a_truncation_during_a_flush_caps_the_recovery_point() -> None:
    async def body(rt: NodeRuntime, world: Any) -> Any:
        log = await Log.load(rt, "t-0", LogConfig(segment_bytes=1000))
        for i in range(30):
            append(log, i)
        flushing = rt.spawn(log.flush(), name="flush")
        await rt.sleep(0)           # the flush has begun and waits on its first fsync
        started = not flushing.done()
        await log.truncate_to(12)
        for i in range(12, 20):     # new records at offsets the flush never synced
            append(log, i)
        await flushing
        return started, log.recovery_point, log.log_end_offset

    started, recovery_point, log_end = run_sim(body)
    assert started, "the flush finished before the truncation: the test would test nothing"
    assert recovery_point <= 12 and log_end == 20
