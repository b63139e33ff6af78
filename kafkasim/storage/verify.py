"""Does a log's data agree with itself and with its indexes? A god's-eye check for tests and
checkers (never on the broker's path): every segment is whole valid batches (length, magic,
CRC-32C), offsets only increase and stay inside their segment, every offset index entry points at
the start of a batch that holds or precedes its offset and lookups find every batch, every time
index entry is the running maximum timestamp at a batch's last offset, and the log's offsets
(start, end, recovery point) are consistent with the segments."""

from __future__ import annotations

from kafkasim.records.batch import validate_batch
from kafkasim.records.errors import CorruptRecordError
from kafkasim.storage.log import Log, index_problem
from kafkasim.storage.segment import LogSegment


def check_log(log: Log) -> list[str]:
    problems: list[str] = []
    segs = log.segments
    if not segs:
        return ["no segments"]
    prev_next = -1
    for i, seg in enumerate(segs):
        next_base = segs[i + 1].base_offset if i + 1 < len(segs) else None
        where = f"segment {seg.base_offset}"
        if next_base is not None and next_base <= seg.base_offset:
            problems.append(f"{where}: next segment base {next_base} not above it")
        batches = list(seg.batches(0))
        covered = sum(b.size for b in batches)
        if covered != seg.size:
            problems.append(f"{where}: {seg.size - covered} bytes after the last whole batch")
        for b in batches:
            data = seg.log.read(b.position, b.size)
            try:
                validate_batch(data)
            except CorruptRecordError as exc:
                problems.append(f"{where}: batch at {b.position}: {exc}")
            if b.base_offset < seg.base_offset or (next_base is not None and b.last_offset >= next_base):
                problems.append(f"{where}: batch {b.base_offset}..{b.last_offset} outside the segment")
            if b.base_offset <= prev_next - 1 or b.last_offset < b.base_offset:
                problems.append(f"{where}: batch {b.base_offset}..{b.last_offset} does not move forward")
            prev_next = b.last_offset + 1
        problem = index_problem(seg, next_base)
        if problem:
            problems.append(f"{where}: {problem}")
        problems += [f"{where}: {p}" for p in _index_agreement(seg, batches)]
    end = segs[-1].read_next_offset()
    if log.log_end_offset != end:
        problems.append(f"log end offset {log.log_end_offset} but the last segment ends at {end}")
    if not segs[0].base_offset <= log.log_start_offset <= log.log_end_offset:
        problems.append(f"log start offset {log.log_start_offset} outside "
                        f"[{segs[0].base_offset}, {log.log_end_offset}]")
    if log.recovery_point > log.log_end_offset:
        problems.append(f"recovery point {log.recovery_point} beyond the log end offset {log.log_end_offset}")
    return problems


def _index_agreement(seg: LogSegment, batches: list) -> list[str]:  # type: ignore[type-arg]
    out: list[str] = []
    starts = {b.position: b for b in batches}
    for off, pos in seg.offset_index.all_entries():
        b = starts.get(pos)
        if b is None:
            out.append(f"offset index entry ({off}, {pos}) is not at a batch start")
        elif b.base_offset > off:
            out.append(f"offset index entry ({off}, {pos}) points past its offset (batch {b.base_offset})")
    for b in batches:
        found = seg.translate_offset(b.last_offset)
        if found is None or found.position != b.position:
            out.append(f"lookup of offset {b.last_offset} does not find its batch at {b.position}")
    running, max_at = -1, {}
    for b in batches:
        running = max(running, b.max_timestamp)
        max_at[b.last_offset] = running
    for ts, off in seg.time_index.all_entries():
        if off not in max_at:
            out.append(f"time index entry ({ts}, {off}) is not at a batch's last offset")
        elif max_at[off] != ts:
            out.append(f"time index entry ({ts}, {off}) but the max timestamp there is {max_at[off]}")
    return out
