"""Recovery after an unclean shutdown, on real files the test damages by hand: zeros, garbage and
half batches at the tail, a flipped bit, stale bytes of the segment itself, stale index entries,
lost tails before a later segment — each detected, cut at the first invalid byte, traced."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any, Optional

import pytest
from storage_helpers import append, read_all, run_real

from kafkasim.records.batch import Record, build_batch, iter_batches
from kafkasim.runtime.api import NodeRuntime
from kafkasim.storage.log import Log, LogConfig, index_problem

pytestmark = pytest.mark.unit

CFG = LogConfig(index_interval_bytes=200)
SEG = "t-0/00000000000000000000"


def _write(tmp: Path, n: int, cfg: LogConfig = CFG, flush: bool = True) -> None:
    async def body(node: NodeRuntime) -> None:
        log = await Log.load(node, "t-0", cfg)
        for i in range(n):
            append(log, i)
        if flush:
            await log.flush()
        log.close()
    run_real(tmp, body)


def _reopen(tmp: Path, cfg: LogConfig = CFG, recovery_point: int = 0,
            clean: bool = False) -> tuple[int, list[dict[str, Any]], list[int], list[str]]:
    async def body(node: NodeRuntime) -> Any:
        log = await Log.load(node, "t-0", cfg, recovery_point=recovery_point, had_clean_shutdown=clean)
        try:
            served = [o for o, _, _ in read_all(log)]
            problems = [index_problem(s, None) for s in log.segments]
            return log.log_end_offset, log.recovery_truncations, served, problems
        finally:
            log.close()
    return run_real(tmp, body)  # type: ignore[no-any-return]


@pytest.mark.parametrize("tail", ["zeros", "garbage", "half batch", "stale copy"])
def test_recovery_truncates_a_bad_tail(tmp_path: Path, tail: str) -> None:
    _write(tmp_path, 6)
    seg = tmp_path / f"{SEG}.log"
    good = seg.read_bytes()
    junk = {"zeros": b"\x00" * 4096, "garbage": b"\xde\xad\xbe\xef" * 300,
            "half batch": build_batch([Record(5, None, b"half" * 50)])[:40],
            "stale copy": good[:200]}[tail]  # well-formed batches, but offsets that go backwards
    seg.write_bytes(good + junk)
    leo, truncations, served, problems = _reopen(tmp_path)
    assert leo == 6 and served == list(range(6)) and set(problems) == {""}
    assert truncations == [{"segment": 0, "valid_bytes": len(good), "dropped_bytes": len(junk),
                            "reason": {"zeros": "bad_magic", "garbage": "bad_magic",
                                       "half batch": "partial batch",
                                       "stale copy": "offset went backwards"}[tail]}]
    assert seg.read_bytes() == good


def test_recovery_drops_a_batch_with_a_flipped_bit_and_everything_after(tmp_path: Path) -> None:
    _write(tmp_path, 4)
    seg = tmp_path / f"{SEG}.log"
    data = bytearray(seg.read_bytes())
    positions = [p for p, _ in iter_batches(bytes(data))]
    data[positions[2] + 64] ^= 0x01  # inside the third batch's CRC-covered records
    seg.write_bytes(bytes(data))
    leo, truncations, served, _ = _reopen(tmp_path)
    assert leo == 2 and served == [0, 1] and truncations[0]["reason"] == "crc_mismatch"
    assert seg.stat().st_size == positions[2]


def test_zeros_in_the_middle_cut_the_log_there(tmp_path: Path) -> None:
    """A reordered write-back: a later batch reached the disk, an earlier one did not."""
    _write(tmp_path, 5)
    seg = tmp_path / f"{SEG}.log"
    data = bytearray(seg.read_bytes())
    positions = [(p, h.size_in_bytes) for p, h in iter_batches(bytes(data))]
    p, n = positions[2]
    data[p:p + n] = bytes(n)
    seg.write_bytes(bytes(data))
    leo, truncations, served, _ = _reopen(tmp_path)
    assert (leo, served) == (2, [0, 1]) and truncations[0]["valid_bytes"] == p


def test_a_torn_segment_deletes_the_later_ones(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=700, index_interval_bytes=200)
    _write(tmp_path, 20, cfg)
    logs = sorted((tmp_path / "t-0").glob("*.log"))
    assert len(logs) >= 3
    first = logs[0].read_bytes()
    logs[0].write_bytes(first[:-30])  # tear the last batch of the first segment
    leo, truncations, served, _ = _reopen(tmp_path, cfg)
    assert [t.get("deleted", 0) for t in truncations] == [0] + [1] * (len(logs) - 1)
    assert served == list(range(leo)) and sorted((tmp_path / "t-0").glob("*.log")) == logs[:1]


def test_a_lost_tail_before_a_later_segment_deletes_the_later_ones(tmp_path: Path) -> None:
    """The first segment lost whole unflushed batches (no torn bytes) but the next segment's
    file survived: serving it would skip offsets, so recovery ends the log at the hole."""
    cfg = LogConfig(segment_bytes=700, index_interval_bytes=200)
    _write(tmp_path, 20, cfg)
    logs = sorted((tmp_path / "t-0").glob("*.log"))
    data = logs[0].read_bytes()
    cut = [p for p, _ in iter_batches(data)][-1]
    logs[0].write_bytes(data[:cut])
    leo, truncations, served, _ = _reopen(tmp_path, cfg)
    assert served == list(range(leo)) and leo < int(logs[1].name.split(".")[0])
    assert truncations[0]["deleted"] == 1 and truncations[0]["reason"].startswith("gap")


def test_recovery_starts_at_the_recovery_point_segment(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=700, index_interval_bytes=200)
    _write(tmp_path, 20, cfg)
    logs = sorted((tmp_path / "t-0").glob("*.log"))
    # Garbage in a segment below the recovery point is not looked at (its indexes are fine);
    # the same garbage in the recovered segment is cut.
    second_base = int(logs[1].name.split(".")[0])
    last_base = int(logs[-1].name.split(".")[0])
    logs[-1].write_bytes(logs[-1].read_bytes() + b"\xff" * 100)
    leo, truncations, served, _ = _reopen(tmp_path, cfg, recovery_point=last_base)
    assert leo == 20 and served == list(range(20))
    assert [t["segment"] for t in truncations] == [last_base] and second_base < last_base


def test_clean_shutdown_skips_recovery(tmp_path: Path) -> None:
    _write(tmp_path, 5)
    seg = tmp_path / f"{SEG}.log"
    seg.write_bytes(seg.read_bytes() + b"\x00" * 100)
    leo, truncations, _, _ = _reopen(tmp_path, clean=True)
    assert truncations == [] and seg.stat().st_size > 0  # not even looked at


@pytest.mark.parametrize("damage", ["entry beyond the log", "zero tail", "missing index", "time entry past data"])
def test_bad_indexes_below_the_recovery_point_are_rebuilt(tmp_path: Path, damage: str) -> None:
    cfg = LogConfig(segment_bytes=1500, index_interval_bytes=150)
    _write(tmp_path, 30, cfg)
    base = tmp_path / "t-0" / "00000000000000000000"
    good_index = Path(f"{base}.index").read_bytes()
    if damage == "entry beyond the log":
        Path(f"{base}.index").write_bytes(good_index + struct.pack(">ii", 40, 999_999))
    elif damage == "zero tail":
        Path(f"{base}.index").write_bytes(good_index + bytes(800))  # an untrimmed, preallocated file
    elif damage == "missing index":
        Path(f"{base}.index").unlink()
    else:
        Path(f"{base}.timeindex").write_bytes(Path(f"{base}.timeindex").read_bytes() + struct.pack(">qi", 99_999, 500))
    leo, truncations, served, problems = _reopen(tmp_path, cfg, recovery_point=30)
    assert leo == 30 and served == list(range(30)) and set(problems) == {""}
    assert [t["segment"] for t in truncations] == [0] and truncations[0]["reason"].startswith("index rebuilt")
    assert Path(f"{base}.index").read_bytes() == good_index


def test_orphan_index_files_and_stray_temp_files_are_removed(tmp_path: Path) -> None:
    _write(tmp_path, 3)
    d = tmp_path / "t-0"
    for name in ("00000000000000000099.index", "00000000000000000099.timeindex", "00000000000000000050.log.deleted",
                 "00000000000000000050.log.cleaned", "00000000000000000003.snapshot"):
        (d / name).write_bytes(b"x")
    leo, _, served, _ = _reopen(tmp_path)
    left = sorted(p.name for p in d.iterdir())
    assert leo == 3 and served == [0, 1, 2]
    assert "00000000000000000003.snapshot" in left  # producer state is not the log's business
    assert not [n for n in left if n.startswith("0000000000000000009") or n.startswith("00000000000000000050")]


def test_an_interrupted_swap_is_completed(tmp_path: Path) -> None:
    """A crash after the cleaned segment became .swap: the .swap wins at the next load."""
    cfg = LogConfig(segment_bytes=700, index_interval_bytes=200)
    _write(tmp_path, 20, cfg)
    d = tmp_path / "t-0"
    logs = sorted(d.glob("*.log"))
    base0 = logs[0].name.split(".")[0]
    # Pretend the cleaner rewrote segment 0 keeping only its first two batches.
    data = logs[0].read_bytes()
    keep = [p for p, _ in iter_batches(data)][2]
    (d / f"{base0}.log.swap").write_bytes(data[:keep])
    leo, truncations, served, problems = _reopen(tmp_path, cfg, recovery_point=20)
    assert leo == 20 and set(problems) == {""}
    assert served[:2] == [0, 1] and served[2] == int(logs[1].name.split(".")[0])
    assert not list(d.glob("*.swap")) and truncations[0]["reason"] == "completed an interrupted swap"


def test_recovery_is_durable_before_new_appends(tmp_path: Path) -> None:
    """Beyond Kafka: the cut is fsynced, so a later crash cannot bring the junk back. Here we
    just see the truncation reached the file and the next appends follow the good data."""
    _write(tmp_path, 3)
    seg = tmp_path / f"{SEG}.log"
    good = seg.read_bytes()
    seg.write_bytes(good + b"\x00" * 50)

    async def body(node: NodeRuntime) -> Optional[list[int]]:
        log = await Log.load(node, "t-0", CFG)
        append(log, 3)
        await log.flush()
        out = [o for o, _, _ in read_all(log)]
        log.close()
        return out
    assert run_real(tmp_path, body) == [0, 1, 2, 3]
    assert seg.read_bytes().startswith(good) and len(seg.read_bytes()) > len(good)
