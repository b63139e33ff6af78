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
  markers). For a group member the sequence is one member id's reads in ONE assignment (its
  ownership period, from a SyncGroup answer to the next): a rebalance restarts the partition at
  the group's committed offset, so across assignments, and across members, re-reads are normal
  at-least-once consumption. A member that rejoins a Stable group with unchanged metadata gets
  the SAME generation back (GroupCoordinator.doCurrentMemberJoinGroup) after an eager consumer
  revoked everything, and restarts at the committed offset too (coordinator-failover-commits
  seed 99 with BUGGIFY: its commit of 210 never landed, so it read 209 again in generation 4).
- two-owners: within one group and generation, two member ids assigned the same partition
  (from the SyncGroup assignments), or two member ids whose fetches in that generation returned
  records of the same partition (from the polls; a member fenced out keeps polling under its
  OLD generation, which is not this).
- committed-offset-regression: for one group and partition, only commits the broker
  acknowledged (OffsetCommit answered NONE) count, ordered in real time:
    (a) a commit invoked after another one was acknowledged carries a lower offset — the
        group's committed position was moved backwards by an acknowledged commit;
    (b) an OffsetFetch sent after a commit was acknowledged answers a lower offset (or none) —
        an acknowledged commit was lost or overwritten by an older one.
  (A commit without an answer, or refused — ILLEGAL_GENERATION after a rebalance — is ignored.)

Per group, not per member: lost-write, unseen, duplicate and inconsistent-offsets take the
reads of all members together (a value read by any member was consumed; one value at two
offsets is a duplicate whoever read it; the same offset read again after a rebalance is not).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

from kafkasim.harness.workload import Commit, History


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
            check_polls(h, "poll-skip"), check_two_owners(h), check_committed_regression(h)]


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
    last: dict[tuple[str, str, str, int, int, int], int] = {}
    # (process, member, generation) -> the times it was assigned partitions in that generation
    assigned: dict[tuple[str, str, int], list[float]] = {}
    for a in h.assignments:
        assigned.setdefault((a.process, a.member_id, a.generation), []).append(a.at_ms)
    for p in h.polls:
        period = bisect_right(assigned.get((p.process, p.member_id, p.generation), []), p.at_ms)
        key = (p.process, p.group, p.member_id, p.generation, period, p.partition)
        prev = last.get(key)
        if prev is not None:
            delta = p.offset - prev
            if (kind == "nonmonotonic-poll" and delta < 1) or (kind == "poll-skip" and delta > 1):
                detail: dict[str, Any] = {"process": p.process, "partition": p.partition, "previous_offset": prev,
                                          "offset": p.offset, "at_ms": p.at_ms}
                if p.group:
                    detail.update(group=p.group, member=p.member_id, generation=p.generation)
                out.anomalies.append(Anomaly(kind, detail))
        last[key] = p.offset
    return out


def check_two_owners(h: History) -> CheckResult:
    out = CheckResult("two-owners")
    assigned: dict[tuple[str, int, int], dict[str, tuple[str, float]]] = {}
    for a in h.assignments:
        for part in a.partitions:
            assigned.setdefault((a.group, a.generation, part), {}).setdefault(a.member_id, (a.process, a.at_ms))
    polled: dict[tuple[str, int, int], dict[str, tuple[str, float]]] = {}
    for p in h.polls:
        if p.group:
            polled.setdefault((p.group, p.generation, p.partition), {}).setdefault(p.member_id, (p.process, p.at_ms))
    for source, owners in (("assignment", assigned), ("poll", polled)):
        for (group, gen, part), members in sorted(owners.items()):
            if len(members) > 1:
                out.anomalies.append(Anomaly("two-owners", {
                    "source": source, "group": group, "generation": gen, "partition": part,
                    "members": [{"member": m, "process": proc, "first_at_ms": at}
                                for m, (proc, at) in sorted(members.items())]}))
    return out


def _commit_detail(c: Commit, part: int) -> dict[str, Any]:
    return {"process": c.process, "member": c.member_id, "generation": c.generation, "offset": c.offsets[part],
            "invoked_at_ms": c.invoke_ms, "acked_at_ms": c.complete_ms}


def check_committed_regression(h: History) -> CheckResult:
    out = CheckResult("committed-offset-regression")
    acked: dict[tuple[str, int], list[Commit]] = {}
    for c in h.commits:
        if c.acked:
            for part in c.offsets:
                acked.setdefault((c.group, part), []).append(c)
    for (group, part), commits in sorted(acked.items()):
        by_ack = sorted(commits, key=lambda c: c.complete_ms)
        # (a) in invocation order, against the highest offset acknowledged before each invocation
        best: Commit | None = None
        i = 0
        for c in sorted(commits, key=lambda c: c.invoke_ms):
            while i < len(by_ack) and by_ack[i].complete_ms <= c.invoke_ms:
                if best is None or by_ack[i].offsets[part] > best.offsets[part]:
                    best = by_ack[i]
                i += 1
            if best is not None and c.offsets[part] < best.offsets[part]:
                out.anomalies.append(Anomaly("committed-offset-regression", {
                    "rule": "acked commit below an earlier acked commit", "group": group, "partition": part,
                    "earlier": _commit_detail(best, part), "later": _commit_detail(c, part)}))
        # (b) each read-back against the highest offset acknowledged before it was sent
        for r in h.offset_reads:
            if r.group != group or part not in r.offsets:
                continue
            before = [c for c in by_ack if c.complete_ms <= r.sent_ms]
            top = max(before, key=lambda c: c.offsets[part], default=None)
            if top is not None and r.offsets[part] < top.offsets[part]:
                out.anomalies.append(Anomaly("committed-offset-regression", {
                    "rule": "OffsetFetch below an acked commit", "group": group, "partition": part,
                    "read": {"process": r.process, "sent_at_ms": r.sent_ms, "offset": r.offsets[part]},
                    "acked": _commit_detail(top, part)}))
    return out
