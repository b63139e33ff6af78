"""The log owns its producer state (Kafka's UnifiedLog.producerStateManager): rebuilt at load,
reloaded by a truncation, and its snapshots go with the segments retention deletes."""

from __future__ import annotations

from typing import Any

import pytest
from storage_helpers import batch, run_sim

from kafkasim.runtime.api import NodeRuntime
from kafkasim.storage.log import Log, LogConfig
from kafkasim.storage.producer_state import snapshot_name

pytestmark = pytest.mark.unit

PID = 7
CONFIG = LogConfig(segment_bytes=200, file_delete_delay_ms=10, retention_ms=-1)  # two batches per segment


def produce(log: Log, seq: int) -> None:
    """An idempotent batch appended as Partition.append_records_to_leader does."""
    # Timestamped now: a producer whose last batch is producer.id.expiration.ms old is not reloaded.
    buf, headers = batch(seq, producer_id=PID, base_sequence=seq, ts=int(log.rt.now_ms()))
    psm = log.producer_state_manager
    assert psm.analyze_append(headers, log.log_end_offset) is None
    psm.on_append(log.append_as_leader(buf, headers, leader_epoch=0))


def test_truncation_reloads_the_producer_state_and_drops_later_snapshots() -> None:
    async def body(rt: NodeRuntime, world: Any) -> tuple[Any, ...]:
        log = await Log.load(rt, "logs/t-0", CONFIG)
        for seq in range(6):
            produce(log, seq)
        before = log.producer_state_manager.snapshot_offsets()
        await log.truncate_to(3)
        psm = log.producer_state_manager
        after = psm.snapshot_offsets()
        last_seq = psm.producers[PID].last_seq
        log.close()
        again = await Log.load(rt, "logs/t-0", CONFIG)
        return before, after, last_seq, again.producer_state_manager.producers[PID].last_seq

    before, after, last_seq, reloaded = run_sim(body)
    assert before == [2, 4]          # taken when the log rolled, at each new segment's base
    assert after == [2, 3]           # 4 is beyond the log now; the reload snapshots at the end
    assert last_seq == reloaded == 2


def test_retention_deletes_the_snapshots_of_the_segments_it_deletes() -> None:
    async def body(rt: NodeRuntime, world: Any) -> tuple[Any, ...]:
        log = await Log.load(rt, "logs/t-0", CONFIG)
        for seq in range(6):
            produce(log, seq)
        log.delete_records(4)
        log.delete_old_segments()
        marked = f"{snapshot_name(2)}.deleted" in rt.fs.listdir("logs/t-0")
        await rt.sleep(20)
        return marked, log.producer_state_manager.snapshot_offsets(), \
            [n for n in rt.fs.listdir("logs/t-0") if n.endswith(".deleted")]

    marked, snapshots, leftovers = run_sim(body)
    assert marked and snapshots == [4] and leftovers == []
