"""A third-party client's driver replies (real/clients/README.md) turned into the History the
checkers take (workload.py), so a client workload is checked exactly as kafkasim's own.

- produce: each value the command asked for is a Send; the reply's `acked` list gives its
  (partition, offset) and ok=True; a value not acked is ok=None (no definite answer: a client
  that reports a failure may still have written it, so it is neither acked nor known lost).
- consume (group member): each record is a Poll of that member. The driver does not report
  generations, so one is counted here: a new one when the assignment changes, after an error
  reply, or when a partition's reads go back (the member resumed from the group's committed
  offset after a rebalance the driver did not surface). Such a rewind is also an OffsetRead of
  the offset resumed from, sent when the consume was sent, so `committed-offset-regression`
  catches a rewind below a commit the broker had acknowledged. The reply's `committed` list is
  an acknowledged Commit (the driver commits synchronously before replying) — except for a
  driver whose hello says `"commit": "on-exit"` (kcat: it commits as its one-shot member exits
  and cannot tell whether the broker took it), whose commits have no definite answer (acked None).
- consume (assign mode, the final reader): Polls of the reader process.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kafkasim.harness.workload import Commit, History, OffsetRead, Poll, Send


def value_names(prefix: str, count: int) -> list[str]:
    return [f"{prefix}-{i}" for i in range(count)]


@dataclass
class DriverErrors:
    """Distinct error messages a driver reported, with how often (run.json's client errors)."""
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, messages: list[Any]) -> None:
        for m in messages:
            text = str(m)[:300]
            self.counts[text] = self.counts.get(text, 0) + 1

    def summary(self, limit: int = 20) -> list[dict[str, Any]]:
        top = sorted(self.counts.items(), key=lambda kv: -kv[1])[:limit]
        return [{"error": e, "times": n} for e, n in top]


def record_produce(h: History, process: str, values: list[str], invoke_ms: float, complete_ms: float,
                   reply: dict[str, Any]) -> int:
    """The sends of one produce command; returns how many were acked."""
    acked: dict[str, tuple[int, int]] = {}
    if reply.get("op") == "produced":
        for p, o, v in reply.get("acked", []):
            if v is not None:
                acked[str(v)] = (int(p), int(o))
    for v in values:
        s = Send(process, v, None, invoke_ms, complete_ms)
        if v in acked:
            s.ok, (s.partition, s.offset) = True, acked[v]
        h.sends.append(s)
    return len(acked)


@dataclass
class MemberTrack:
    """One group member's generation count and read positions (see the module docstring)."""
    group: str
    process: str
    commits_acknowledged: bool = True
    generation: int = 0
    assignment: list[int] | None = None
    next_offset: dict[int, int] = field(default_factory=dict)

    def new_generation(self) -> None:
        self.generation += 1
        self.next_offset.clear()

    def record(self, h: History, topic: str, sent_ms: float, at_ms: float, reply: dict[str, Any]) -> int:
        if reply.get("op") != "consumed":
            self.new_generation()
            return 0
        assignment = sorted(int(p) for p in reply.get("assignment", []))
        if assignment != self.assignment:
            self.assignment = assignment
            self.new_generation()
        records = [(int(p), int(o), str(v)) for p, o, v in reply.get("records", []) if v is not None]
        rewound = {p: o for p, o, _ in _firsts(records) if p in self.next_offset and o < self.next_offset[p]}
        if rewound:
            h.offset_reads.append(OffsetRead(self.group, self.process, sent_ms, at_ms, rewound))
            self.new_generation()
        for p, o, v in records:
            h.polls.append(Poll(self.process, at_ms, topic, p, o, v, self.process, self.generation, self.group))
            self.next_offset[p] = o + 1
        committed = {int(p): int(n) for p, n in reply.get("committed", [])}
        if committed:
            h.commits.append(Commit(self.group, self.process, self.process, self.generation, committed, sent_ms,
                                    at_ms, True if self.commits_acknowledged else None))
        return len(records)


def _firsts(records: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    seen: set[int] = set()
    out = []
    for r in records:
        if r[0] not in seen:
            seen.add(r[0])
            out.append(r)
    return out


def record_reads(h: History, process: str, topic: str, at_ms: float, reply: dict[str, Any]) -> int:
    """An assign-mode consume's records as Polls of `process`; how many."""
    if reply.get("op") != "consumed":
        return 0
    n = 0
    for p, o, v in reply.get("records", []):
        if v is not None:
            h.polls.append(Poll(process, at_ms, topic, int(p), int(o), str(v)))
            n += 1
    return n
