"""History checkers (definitions after ../shared/reference/anomalies.md §5), over the sends and
polls of a run. Each returns the anomalies it found; each anomaly names the values, partitions,
offsets and times involved.

- lost-write: an acknowledged send whose (partition, offset) some poll passed — a later offset
  of that partition was read — but that no poll returned.
- unseen: an acknowledged send no poll returned at all (after the final polls).
- duplicate: one value read at two or more distinct offsets.
- inconsistent-offsets: one (partition, offset) read with two values, or an acknowledged
  (partition, offset) that reads back as a different value (the acked write was overwritten).
- reorder: within one producer and partition, acknowledged sends whose offsets are not in send
  order.
- nonmonotonic-poll / poll-skip: one consumer's successive reads of a partition whose offsets
  do not increase by exactly one (the log here has no gaps: no compaction or transaction
  markers).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kafkasim.harness.workload import History


@dataclass
class Anomaly:
    kind: str
    detail: dict[str, Any]


@dataclass
class CheckResult:
    name: str
    anomalies: list[Anomaly] = field(default_factory=list)


def check_all(h: History) -> list[CheckResult]:
    return [check_lost_and_unseen(h, "lost-write"), check_lost_and_unseen(h, "unseen"), check_duplicates(h),
            check_inconsistent(h), check_reorder(h), check_polls(h, "nonmonotonic-poll"),
            check_polls(h, "poll-skip")]


def check_lost_and_unseen(h: History, kind: str) -> CheckResult:
    read = {p.value for p in h.polls}
    max_read: dict[int, int] = {}
    for p in h.polls:
        max_read[p.partition] = max(max_read.get(p.partition, -1), p.offset)
    out = CheckResult(kind)
    for s in h.acked():
        if s.value in read:
            continue
        passed = s.offset >= 0 and s.offset < max_read.get(s.partition, -1)
        if (kind == "lost-write") == passed:
            out.anomalies.append(Anomaly(kind, {"value": s.value, "partition": s.partition, "offset": s.offset,
                                                "acked_at_ms": s.complete_ms,
                                                "max_offset_read": max_read.get(s.partition, -1)}))
    return out


def check_duplicates(h: History) -> CheckResult:
    offsets: dict[str, set[tuple[int, int]]] = {}
    for p in h.polls:
        offsets.setdefault(p.value, set()).add((p.partition, p.offset))
    out = CheckResult("duplicate")
    for value, where in offsets.items():
        if len(where) > 1:
            out.anomalies.append(Anomaly("duplicate", {"value": value, "at": sorted(where)}))
    return out


def check_inconsistent(h: History) -> CheckResult:
    out = CheckResult("inconsistent-offsets")
    at: dict[tuple[int, int], set[str]] = {}
    for p in h.polls:
        at.setdefault((p.partition, p.offset), set()).add(p.value)
    for (part, off), values in sorted(at.items()):
        if len(values) > 1:
            out.anomalies.append(Anomaly("inconsistent-offsets", {"partition": part, "offset": off,
                                                                  "values": sorted(values)}))
    # An acknowledged offset that reads back as another value: the acked write was overwritten.
    # (The same value ALSO read at another offset is a duplicate — a retried batch — not this.)
    for s in h.acked():
        if s.offset < 0:
            continue
        others = at.get((s.partition, s.offset), set()) - {s.value}
        if others:
            out.anomalies.append(Anomaly("inconsistent-offsets", {
                "value": s.value, "acked": [s.partition, s.offset], "read_there": sorted(others)}))
    return out


def check_reorder(h: History) -> CheckResult:
    out = CheckResult("reorder")
    last: dict[tuple[str, int], tuple[int, str]] = {}
    for s in h.sends:  # in invocation order
        if not s.ok or s.offset < 0:
            continue
        key = (s.process, s.partition)
        prev = last.get(key)
        if prev is not None and s.offset <= prev[0]:
            out.anomalies.append(Anomaly("reorder", {"partition": s.partition, "earlier": prev[1],
                                                     "earlier_offset": prev[0], "later": s.value,
                                                     "later_offset": s.offset}))
        last[key] = (s.offset, s.value)
    return out


def check_polls(h: History, kind: str) -> CheckResult:
    out = CheckResult(kind)
    last: dict[tuple[str, int], int] = {}
    for p in h.polls:
        key = (p.process, p.partition)
        prev = last.get(key)
        if prev is not None:
            delta = p.offset - prev
            if (kind == "nonmonotonic-poll" and delta < 1) or (kind == "poll-skip" and delta > 1):
                out.anomalies.append(Anomaly(kind, {"process": p.process, "partition": p.partition,
                                                    "previous_offset": prev, "offset": p.offset, "at_ms": p.at_ms}))
        last[key] = p.offset
    return out
