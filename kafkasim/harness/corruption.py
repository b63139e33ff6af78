"""What a flipped bit in a batch's base offset does to a consumer, told apart from broker bugs.

A record batch's CRC-32C covers `attributes` to the end of the batch; the 21 bytes before it —
base offset, batch length, partition leader epoch, magic, the CRC itself — are not covered
(DefaultRecordBatch). A bit that flips in the base offset, on a disk read or at rest, gives a
batch that every check Kafka has accepts: the broker serves it as it reads it, and Kafka's
consumer, which checks CRCs (check.crcs), takes the offsets from the header. The consumer then
delivers the records at offsets one bit away from where they were written (and its position
jumps there: on to OFFSET_OUT_OF_RANGE and its reset policy, or past records it never reads), or,
when the flipped offsets lie below its position, skips them silently. Kafka behaves so; it is
corruption that propagated, not a broker that lost or reordered anything.

corrupt-offset-delivered: on a partition whose log a disk flipped bits in, a record a consumer
got at offset X (or skipped, in a batch whose offsets lay wholly below its position) whose value
was acknowledged at offset Y, X != Y, X xor Y a single bit. The anomalies it causes in the
history checks are taken out of them and listed with it:
  - lost-write / unseen of that value (it was read, or skipped, at the wrong offset);
  - inconsistent-offsets at X or naming that value;
  - poll-skip / nonmonotonic-poll of that consumer and partition into or out of X, or across Y.
A hole a flipped base offset left in a follower's log that later leads (see godseye.py,
corrupt-offset-propagated) is skipped by consumers of that leader: a poll-skip across it is
explained too (listed with "offset_seen": -1).
Nothing else is excused: a value read at an offset more than one bit from its acknowledged one,
a lost write with no such record, a skip that crosses no such offset are reported as before.
Without a bit flip on the partition every check stands as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafkasim.harness.checkers import Anomaly, CheckResult
from kafkasim.harness.workload import History

KIND = "corrupt-offset-delivered"


@dataclass
class _Flip:
    process: str
    partition: int
    value: str
    acked_offset: int
    seen_offset: int
    skipped: bool
    explains: list[str] = field(default_factory=list)


def _one_bit_apart(a: int, b: int) -> bool:
    x = (a ^ b) & 0xFFFFFFFFFFFFFFFF
    return x != 0 and x & (x - 1) == 0


# (topic, partition, offset) -> the workload value the partition's leader holds there, or None
ValueAt = Callable[[str, int, int], "str | None"]


def _flips(h: History, flipped: set[tuple[str, int]], value_at: ValueAt) -> list[_Flip]:
    """Records seen one bit from where their value was acknowledged. A skipped record came in a
    batch the consumer found wholly below its position — corrupt offsets by themselves; a
    delivered one counts only if the log does not hold that value at the offset it was seen at
    (a producer's retry writes one value at two offsets, and those can be one bit apart too)."""
    acked = {s.value: s.offset for s in h.acked() if s.offset >= 0}
    out: list[_Flip] = []
    for polls, skipped in ((h.polls, False), (h.misplaced, True)):
        for p in polls:
            y = acked.get(p.value)
            if (p.topic, p.partition) not in flipped or y is None or not _one_bit_apart(p.offset, y):
                continue
            if skipped or value_at(p.topic, p.partition, p.offset) != p.value:
                out.append(_Flip(p.process, p.partition, p.value, y, p.offset, skipped))
    return out


def _hole_flips(h: History, holes: set[tuple[str, int, int]]) -> list[_Flip]:
    """A hole in a log (see BitFlipWatch.holes): a consumer reading that log skips it. One
    entry per hole and consumer, with the value acknowledged there if any."""
    acked = {(s.partition, s.offset): s.value for s in h.acked()}
    readers = sorted({(p.process, p.topic, p.partition) for p in h.polls})
    return [_Flip(proc, part, acked.get((part, off), ""), off, -1, True)
            for topic, part, off in sorted(holes) for proc, t, p in readers if (t, p) == (topic, part)]


def attribute_offset_flips(h: History, results: list[CheckResult], flipped: set[tuple[str, int]],
                           value_at: ValueAt, holes: set[tuple[str, int, int]] | None = None) -> list[CheckResult]:
    """`results` with the anomalies a flipped base offset explains moved into one
    corrupt-offset-delivered anomaly per record; `flipped`: the (topic, partition)s whose log
    some disk flipped bits in; `holes`: where a follower log got a hole from a flipped base
    offset (its consumers skip the offset: poll-skip across it is explained, nothing else)."""
    flips = _flips(h, flipped, value_at) + _hole_flips(h, holes or set())
    out = CheckResult(KIND)
    if not flips:
        return [*results, out]
    kept: list[CheckResult] = []
    for r in results:
        remaining = []
        for a in r.anomalies:
            f = _explaining(a, flips)
            if f is None:
                remaining.append(a)
            else:
                f.explains.append(a.kind)
        kept.append(CheckResult(r.name, remaining))
    for f in flips:
        if f.seen_offset < 0 and not f.explains:
            continue  # a hole no consumer stumbled over
        out.anomalies.append(Anomaly(KIND, {
            "process": f.process, "partition": f.partition, "value": f.value, "acked_offset": f.acked_offset,
            "offset_seen": f.seen_offset,
            "bit": (f.acked_offset ^ f.seen_offset).bit_length() - 1 if f.seen_offset >= 0 else None,
            "skipped": f.skipped, "explains": sorted(set(f.explains))}))
    return [*kept, out]


def _explaining(a: Anomaly, flips: list[_Flip]) -> _Flip | None:
    d: dict[str, Any] = a.detail
    for f in flips:
        if _explains(a.kind, d, f):
            return f
    return None


def _explains(kind: str, d: dict[str, Any], f: _Flip) -> bool:
    if f.seen_offset < 0:  # a hole: it explains only skipping it
        if kind != "poll-skip" or (d.get("process"), d.get("partition")) != (f.process, f.partition):
            return False
        return bool(d.get("previous_offset", -1) < f.acked_offset < d.get("offset", -1))
    if kind in ("lost-write", "unseen"):
        return bool(d.get("value") == f.value)
    if kind == "inconsistent-offsets":
        values = set(d.get("values", [])) | set(d.get("read_there", [])) | {d.get("value")}
        at = d.get("offset"), d.get("partition")
        return f.value in values or at == (f.seen_offset, f.partition)
    if kind in ("poll-skip", "nonmonotonic-poll"):
        if d.get("process") != f.process or d.get("partition") != f.partition:
            return False
        prev, cur = d.get("previous_offset", -1), d.get("offset", -1)
        lo, hi = min(prev, cur), max(prev, cur)
        return f.seen_offset in (prev, cur) or lo < f.acked_offset < hi
    return False

