"""Appends to a kafkasim log until killed (tests/storage/test_real_crash.py kills it with
SIGKILL). Batch i holds records "<i>.<j>"; every 50 appends it flushes and prints the recovery
point, so the test knows what must survive.

    python log_writer.py DATA_DIR
"""

from __future__ import annotations

import asyncio
import sys

from kafkasim.records.batch import Record, build_batch, iter_batches
from kafkasim.runtime.real.world import RealNode
from kafkasim.storage.log import LogConfig
from kafkasim.storage.log_manager import LogManager, LogManagerConfig


def batch(i: int) -> bytearray:
    return bytearray(build_batch([Record(1_700_000_000_000 + i, f"k{i}".encode(), f"{i}.{j}".encode() * 20)
                                  for j in range(1 + i % 4)]))


async def main(root: str) -> None:
    node = RealNode("writer", root)
    manager = LogManager(node, "kafka-logs", LogConfig(segment_bytes=16 * 1024, index_interval_bytes=1024),
                         LogManagerConfig(initial_task_delay_ms=10**9))
    log = await manager.get_or_create_log("t", 0)
    i = 0
    print("ready", flush=True)
    while True:
        buf = batch(i)
        log.append_as_leader(buf, list(iter_batches(buf, validate=True)), 1)
        i += 1
        if i % 50 == 0:
            await log.flush()
            await manager.checkpoint_recovery_offsets()
            print("flushed", log.recovery_point, flush=True)
        if i % 10 == 0:
            await asyncio.sleep(0)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
