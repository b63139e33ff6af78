"""The first partition log: Kafka's segment layout, reads of whole batches, and recovery that
truncates at the first invalid byte (zeros, garbage, half batches)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kafkasim.broker.partition import validate_produce_records
from kafkasim.records.batch import Record, build_batch, iter_batches
from kafkasim.runtime.real.world import RealNode
from kafkasim.storage.log import Log, LogConfig, segment_name

CFG = LogConfig()


def _append(log: Log, n: int, tag: str) -> None:
    for i in range(n):
        v = validate_produce_records(build_batch([Record(1000 + i, None, f"{tag}{i}".encode())]), CFG)
        log.append_as_leader(v.buf, v.headers, leader_epoch=3)


def _with_log(tmp: Path, body) -> object:  # type: ignore[no-untyped-def]
    async def main() -> object:
        node = RealNode("n", str(tmp))
        try:
            return body(node)
        finally:
            node.kill()
    return asyncio.run(main())


def test_append_read_and_layout(tmp_path: Path) -> None:
    def body(node: RealNode) -> None:
        log = Log.open(node.fs, "t-0", CFG)
        _append(log, 5, "v")
        assert log.log_end_offset == 5
        data = log.read(2, 1 << 20)
        offsets = [h.base_offset for _, h in iter_batches(data)]
        assert offsets == [2, 3, 4]
        assert [h.partition_leader_epoch for _, h in iter_batches(data)] == [3, 3, 3]
        one = log.read(0, 1)  # smaller than one batch: the first batch still comes back whole
        assert [h.base_offset for _, h in iter_batches(one)] == [0]
        assert [h.base_offset for _, h in iter_batches(log.read(1, 1 << 20, max_offset=3))] == [1, 2]
        log.close()
    _with_log(tmp_path, body)
    assert (tmp_path / "t-0" / segment_name(0)).exists() and segment_name(0) == "00000000000000000000.log"


def test_recovery_truncates_zeros_garbage_and_half_batches(tmp_path: Path) -> None:
    seg = tmp_path / "t-0" / segment_name(0)
    for tail in (b"\x00" * 4096, b"\xde\xad\xbe\xef" * 300, None):
        def body(node: RealNode) -> None:
            log = Log.open(node.fs, "t-0", CFG)
            _append(log, 3, "x")
            log.close()
        (tmp_path / "t-0").mkdir(exist_ok=True)
        for f in (tmp_path / "t-0").iterdir():
            f.unlink()
        _with_log(tmp_path, body)
        good = seg.read_bytes()
        if tail is None:
            tail = build_batch([Record(5, None, b"half" * 50)])[:40]  # a torn final batch
        seg.write_bytes(good + tail)

        def reopen(node: RealNode) -> tuple[int, list[dict[str, object]]]:
            log = Log.open(node.fs, "t-0", CFG)
            try:
                return log.log_end_offset, log.recovery_truncations
            finally:
                log.close()
        leo, truncations = _with_log(tmp_path, reopen)  # type: ignore[misc]
        assert leo == 3
        assert truncations and truncations[0]["valid_bytes"] == len(good)
        assert seg.read_bytes() == good


def test_recovery_drops_a_batch_with_a_flipped_bit(tmp_path: Path) -> None:
    def body(node: RealNode) -> None:
        log = Log.open(node.fs, "t-0", CFG)
        _append(log, 4, "y")
        log.close()
    _with_log(tmp_path, body)
    seg = tmp_path / "t-0" / segment_name(0)
    data = bytearray(seg.read_bytes())
    positions = [p for p, _ in iter_batches(bytes(data))]
    data[positions[2] + 64] ^= 0x01  # inside the third batch's CRC-covered records
    seg.write_bytes(bytes(data))

    def reopen(node: RealNode) -> int:
        log = Log.open(node.fs, "t-0", CFG)
        try:
            return log.log_end_offset
        finally:
            log.close()
    assert _with_log(tmp_path, reopen) == 2
    assert seg.stat().st_size == positions[2]
