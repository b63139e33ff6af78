"""Shared helpers for the storage tests: batches to append, running a body against a real or a
simulated node, and an independent reader of segment files."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path
from typing import Any, Awaitable, Callable, Optional

from kafkasim.records.batch import BatchHeader, Record, build_batch, iter_batches
from kafkasim.runtime.api import NodeRuntime
from kafkasim.runtime.real.world import RealNode
from kafkasim.storage.log import AppendInfo, Log

LOG_BODY = Callable[[NodeRuntime], Awaitable[Any]]


def batch(i: int, *, n: int = 1, ts: Optional[int] = None, key: Optional[bytes] = None,
          value_size: int = 20, producer_id: int = -1,
          base_sequence: int = -1) -> tuple[bytearray, list[tuple[int, BatchHeader]]]:
    """A validated single batch of n records: values name the batch, keys default to none."""
    t = 1000 + i if ts is None else ts
    records = [Record(t + j, key, (f"v{i}.{j}|".encode() * value_size)[:max(value_size, 1)]) for j in range(n)]
    buf = bytearray(build_batch(records, producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                                base_sequence=base_sequence))
    return buf, list(iter_batches(buf, validate=True))


def append(log: Log, i: int, epoch: int = 3, **kw: Any) -> AppendInfo:
    buf, headers = batch(i, **kw)
    return log.append_as_leader(buf, headers, leader_epoch=epoch)


def run_real(tmp: Path, body: LOG_BODY) -> Any:
    async def main() -> Any:
        node = RealNode("n", str(tmp))
        try:
            return await body(node)
        finally:
            node.kill()
    return asyncio.run(main())


def batches_of(data: bytes) -> list[tuple[int, int]]:
    return [(h.base_offset, h.last_offset) for _, h in iter_batches(data)]


def read_all(log: Log, start: int = 0) -> list[tuple[int, BatchHeader, bytes]]:
    """Every batch the log serves from `start` on, by repeated reads as a consumer would."""
    out: list[tuple[int, BatchHeader, bytes]] = []
    offset = start
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        if not data:
            break
        for pos, h in iter_batches(data):
            out.append((h.base_offset, h, bytes(data[pos:pos + h.size_in_bytes])))
            offset = h.last_offset + 1
    return out


def offset_index_entries(raw: bytes) -> list[tuple[int, int]]:
    return [struct.unpack_from(">ii", raw, i) for i in range(0, len(raw) - len(raw) % 8, 8)]


def time_index_entries(raw: bytes) -> list[tuple[int, int]]:
    return [struct.unpack_from(">qi", raw, i) for i in range(0, len(raw) - len(raw) % 12, 12)]


def run_sim(body: Callable[[NodeRuntime, Any], Awaitable[Any]], seed: int = 1, limit_ms: float = 10_000_000) -> Any:
    """Run `body(rt, world)` on a driver node of a fresh SimWorld; rt is node "b"'s runtime (the
    one whose disk the log lives on), so body may crash "b" and restart it."""
    from kafkasim.runtime.sim.world import SimWorld
    world = SimWorld(seed)
    node = world.add_node("b")
    driver = world.add_node("driver")
    task = driver.runtime.spawn(body(node.runtime, world), name="test")
    while not task.done():
        assert world.now_ms() < limit_ms, "sim storage test hung"
        world.run(world.now_ms() + 10_000)
    assert world.failures == [], world.failures
    return task._done.result()  # type: ignore[attr-defined]


def keyed_batch(records: list[tuple[Optional[bytes], Optional[bytes]]], ts: int, *, producer_id: int = -1,
                base_sequence: int = -1, compression: int = 0) -> tuple[bytearray, list[tuple[int, BatchHeader]]]:
    buf = bytearray(build_batch([Record(ts + j, k, v) for j, (k, v) in enumerate(records)],
                                producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                                base_sequence=base_sequence, compression=compression))
    return buf, list(iter_batches(buf, validate=True))
