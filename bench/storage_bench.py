"""Storage throughput against the disk itself, measured in one run on the same directory:

  append    Log.append_as_leader of validated batches (offset/epoch stamping, roll checks, the
            .log write, sparse index entries) vs raw sequential os.write of the same bytes, one
            write per batch — both into the page cache, then each fsynced once
  recovery  Log.load with recovery point 0 (read every segment, check length/magic/CRC-32C of
            every batch, rebuild both indexes) vs raw sequential os.pread of the same files in
            the same 4 MiB chunks — cold (the files' pages dropped from the page cache with
            posix_fadvise(DONTNEED) first: what recovery after a power loss reads) and warm
            (still cached: the CPU-bound case, after a process kill)

Prints MB/s for each and the ratios (target: >= 0.5 of raw). Each measurement runs --repeats
times, interleaved; the best of each is reported.

    python bench/storage_bench.py [--mib 256] [--batch-bytes 16384] [--repeats 4] [--dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from kafkasim.records.batch import Record, build_batch, iter_batches
from kafkasim.runtime.real.world import RealNode
from kafkasim.storage.log import Log, LogConfig
from kafkasim.storage.segment import RECOVERY_CHUNK_BYTES

MIB = 1024 * 1024


@dataclass
class Result:
    raw_write: float = 0.0
    raw_write_fsync: float = 0.0
    append: float = 0.0
    append_fsync: float = 0.0
    raw_read: float = 0.0
    recovery: float = 0.0
    raw_read_cold: float = 0.0
    recovery_cold: float = 0.0


def make_batches(batch_bytes: int, kinds: int = 8) -> list[tuple[bytearray, list[Any]]]:
    """A few distinct batches of about batch_bytes, 100-byte records (Kafka's batch.size)."""
    out = []
    for k in range(kinds):
        n = max(1, batch_bytes // 120)
        records = [Record(1_700_000_000_000 + k * 1000 + j, f"key-{k}-{j}".encode(), bytes([k + j & 0xFF]) * 100)
                   for j in range(n)]
        buf = bytearray(build_batch(records))
        out.append((buf, list(iter_batches(buf, validate=True))))
    return out


def raw_write(path: str, batches: list[tuple[bytearray, list[Any]]], count: int) -> tuple[float, float]:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        start = time.perf_counter()
        for i in range(count):
            os.write(fd, batches[i % len(batches)][0])
        written = time.perf_counter()
        os.fsync(fd)
        synced = time.perf_counter()
    finally:
        os.close(fd)
    return written - start, synced - start


def drop_cache(paths: list[str]) -> None:
    """Evict the files' (clean, fsynced) pages from the page cache — these files only."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def raw_read(paths: list[str]) -> float:
    start = time.perf_counter()
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            pos = 0
            while True:
                chunk = os.pread(fd, RECOVERY_CHUNK_BYTES, pos)
                if not chunk:
                    break
                pos += len(chunk)
        finally:
            os.close(fd)
    return time.perf_counter() - start


async def log_append(root: str, batches: list[tuple[bytearray, list[Any]]], count: int,
                     cfg: LogConfig) -> tuple[float, float]:
    node = RealNode("bench", root)
    log = await Log.load(node, "bench-0", cfg)
    start = time.perf_counter()
    for i in range(count):
        buf, headers = batches[i % len(batches)]
        log.append_as_leader(buf, headers, 1)
    written = time.perf_counter()
    await log.flush()
    synced = time.perf_counter()
    log.close()
    node.kill()
    return written - start, synced - start


async def log_recover(root: str, cfg: LogConfig) -> tuple[float, int]:
    node = RealNode("bench", root)
    start = time.perf_counter()
    log = await Log.load(node, "bench-0", cfg, recovery_point=0)
    took = time.perf_counter() - start
    end = log.log_end_offset
    log.close()
    node.kill()
    return took, end


def measure(name: str, logs: list[str], work: str, cfg: LogConfig) -> float:
    """Seconds for one raw read or recovery, cold (pages dropped first) or warm (read first)."""
    if name.startswith("cold"):
        drop_cache(logs)
    else:
        raw_read(logs)
    if name.endswith("raw"):
        return raw_read(logs)
    return asyncio.run(log_recover(work, cfg))[0]


def run(mib: int, batch_bytes: int, repeats: int, base: str) -> None:
    batches = make_batches(batch_bytes)
    size = len(batches[0][0])
    count = mib * MIB // size
    total = count * size
    cfg = LogConfig()  # Kafka's defaults: 1 GiB segments, index.interval.bytes 4096
    best = Result()
    for r in range(repeats):
        work = tempfile.mkdtemp(prefix="kafkasim-storage-bench-", dir=base)
        try:
            w, ws = raw_write(os.path.join(work, "raw.bin"), batches, count)
            a, as_ = asyncio.run(log_append(work, batches, count, cfg))
            logs = sorted(os.path.join(work, "bench-0", n) for n in os.listdir(os.path.join(work, "bench-0"))
                          if n.endswith(".log"))
            assert sum(os.path.getsize(p) for p in logs) == total
            # Alternate which of each pair goes first: the machine's noise hits both alike.
            got: dict[str, float] = {}
            for pair in (("cold_raw", "cold_rec"), ("warm_raw", "warm_rec")):
                for name in pair if r % 2 == 0 else pair[::-1]:
                    got[name] = measure(name, logs, work, cfg)
            rdc, recc, rd, rec = got["cold_raw"], got["cold_rec"], got["warm_raw"], got["warm_rec"]
            mbs = lambda t: total / MIB / t  # noqa: E731
            best.raw_write = max(best.raw_write, mbs(w))
            best.raw_write_fsync = max(best.raw_write_fsync, mbs(ws))
            best.append, best.append_fsync = max(best.append, mbs(a)), max(best.append_fsync, mbs(as_))
            best.raw_read, best.recovery = max(best.raw_read, mbs(rd)), max(best.recovery, mbs(rec))
            best.raw_read_cold = max(best.raw_read_cold, mbs(rdc))
            best.recovery_cold = max(best.recovery_cold, mbs(recc))
            print(f"run {r + 1}/{repeats}: write raw {mbs(w):6.0f} append {mbs(a):6.0f} | cold read raw "
                  f"{mbs(rdc):6.0f} recovery {mbs(recc):6.0f} | warm read raw {mbs(rd):6.0f} recovery "
                  f"{mbs(rec):6.0f} MB/s", flush=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    print()
    print(f"{total / MIB:.0f} MiB in {count} batches of {size} bytes ({batches[0][1][0][1].records_count} records "
          f"each), best of {repeats}, directory {base or tempfile.gettempdir()}")
    print(f"append    {best.append:8.0f} MB/s   raw sequential write {best.raw_write:8.0f} MB/s   "
          f"ratio {best.append / best.raw_write:.2f}")
    print(f"  + fsync {best.append_fsync:8.0f} MB/s   raw write + fsync    {best.raw_write_fsync:8.0f} MB/s   "
          f"ratio {best.append_fsync / best.raw_write_fsync:.2f}")
    print(f"recovery  {best.recovery_cold:8.0f} MB/s   raw sequential read  {best.raw_read_cold:8.0f} MB/s   "
          f"ratio {best.recovery_cold / best.raw_read_cold:.2f}   (cold page cache)")
    print(f"  warm    {best.recovery:8.0f} MB/s   raw sequential read  {best.raw_read:8.0f} MB/s   "
          f"ratio {best.recovery / best.raw_read:.2f}   (cached: CRC-32C + Python per batch)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, default=256, help="data appended per run (MiB)")
    ap.add_argument("--batch-bytes", type=int, default=16384, help="approximate batch size (Kafka's batch.size)")
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--dir", default=None, help="where to write (default: the system temp dir)")
    a = ap.parse_args()
    run(a.mib, a.batch_bytes, a.repeats, a.dir)


if __name__ == "__main__":
    main()
