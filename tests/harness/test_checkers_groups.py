"""The consumer-group checkers (two-owners, committed-offset-regression, per-generation poll
order) on hand-built histories: each must flag its anomaly and stay quiet on the legal case."""

from __future__ import annotations

import pytest

from kafkasim.harness.checkers import check_committed_regression, check_polls, check_two_owners
from kafkasim.harness.workload import Assignment, Commit, History, OffsetRead, Poll

pytestmark = pytest.mark.unit


def _assign(h: History, member: str, gen: int, parts: list[int], at: float = 0.0) -> None:
    h.assignments.append(Assignment("g", member.split("-")[0], member, gen, parts, at))


def _poll(h: History, member: str, gen: int, part: int, offset: int, at: float) -> None:
    h.polls.append(Poll(member.split("-")[0], at, "t", part, offset, f"v{offset}", member, gen, "g"))


def _commit(h: History, member: str, gen: int, offsets: dict[int, int], invoke: float, complete: float,
            acked: bool | None = True) -> None:
    h.commits.append(Commit("g", member.split("-")[0], member, gen, offsets, invoke, complete, acked))


def test_two_owners_from_assignment_in_one_generation() -> None:
    h = History()
    _assign(h, "a-1", 3, [0, 1])
    _assign(h, "b-1", 3, [1, 2])
    found = check_two_owners(h).anomalies
    assert len(found) == 1
    d = found[0].detail
    assert (d["source"], d["generation"], d["partition"]) == ("assignment", 3, 1)
    assert [m["member"] for m in d["members"]] == ["a-1", "b-1"]


def test_partition_moving_between_generations_is_not_two_owners() -> None:
    h = History()
    _assign(h, "a-1", 3, [0, 1])
    _assign(h, "b-1", 4, [1])
    _poll(h, "a-1", 3, 1, 0, 1.0)   # a fenced-out member still polls under its old generation
    _poll(h, "b-1", 4, 1, 0, 2.0)
    assert check_two_owners(h).anomalies == []


def test_two_owners_from_polls() -> None:
    h = History()
    _poll(h, "a-1", 5, 0, 10, 1.0)
    _poll(h, "b-1", 5, 0, 11, 2.0)
    found = check_two_owners(h).anomalies
    assert [(a.detail["source"], a.detail["partition"]) for a in found] == [("poll", 0)]


def test_acked_commit_below_an_earlier_acked_commit_is_a_regression() -> None:
    h = History()
    _commit(h, "a-1", 1, {0: 50}, 10.0, 11.0)
    _commit(h, "b-1", 2, {0: 20}, 30.0, 31.0)   # invoked after the 50 was acknowledged
    found = check_committed_regression(h).anomalies
    assert len(found) == 1
    d = found[0].detail
    assert d["earlier"]["offset"] == 50 and d["later"]["offset"] == 20 and d["later"]["member"] == "b-1"


def test_refused_unanswered_and_concurrent_commits_are_not_regressions() -> None:
    h = History()
    _commit(h, "a-1", 1, {0: 50}, 10.0, 20.0)
    _commit(h, "b-1", 2, {0: 20}, 15.0, 16.0)   # concurrent with the 50: no real-time order
    _commit(h, "a-1", 1, {0: 10}, 30.0, 31.0, acked=False)  # refused (ILLEGAL_GENERATION)
    _commit(h, "a-1", 1, {0: 5}, 40.0, 41.0, acked=None)    # no answer
    _commit(h, "b-1", 2, {0: 60}, 50.0, 51.0)
    h.offset_reads.append(OffsetRead("g", "b", 60.0, 61.0, {0: 60}))
    assert check_committed_regression(h).anomalies == []


def test_offset_fetch_below_an_acked_commit_is_a_regression() -> None:
    h = History()
    _commit(h, "a-1", 1, {0: 50, 1: 7}, 10.0, 11.0)
    h.offset_reads.append(OffsetRead("g", "b", 5.0, 6.0, {0: -1, 1: -1}))   # before the commit: fine
    h.offset_reads.append(OffsetRead("g", "b", 20.0, 21.0, {0: 40, 1: 7}))  # partition 0 went back
    found = check_committed_regression(h).anomalies
    assert [(a.detail["partition"], a.detail["read"]["offset"]) for a in found] == [(0, 40)]


def test_poll_order_is_checked_per_member_and_generation() -> None:
    h = History()
    for off in range(5):
        _poll(h, "a-1", 1, 0, off, float(off))
    for off in range(3, 8):   # the new owner restarts at the committed offset 3: a normal re-read
        _poll(h, "b-1", 2, 0, off, 10.0 + off)
    assert check_polls(h, "nonmonotonic-poll").anomalies == []
    assert check_polls(h, "poll-skip").anomalies == []
    _poll(h, "b-1", 2, 0, 5, 30.0)   # within its own generation b goes back: flagged
    _poll(h, "b-1", 2, 0, 9, 31.0)   # and skips 6..8
    assert [a.detail["offset"] for a in check_polls(h, "nonmonotonic-poll").anomalies] == [5]
    assert [a.detail["offset"] for a in check_polls(h, "poll-skip").anomalies] == [9]


def test_a_new_assignment_in_the_same_generation_restarts_the_poll_order() -> None:
    """coordinator-failover-commits seed 99 (BUGGIFY): a member rejoining a Stable group with
    unchanged metadata gets its generation back (Kafka's GroupCoordinator does so) and, having
    revoked everything (eager), restarts at the committed offset: a re-read after the second
    assignment is not nonmonotonic. Without a new assignment the same re-read is flagged."""
    h = History()
    h.assignments.append(Assignment("g", "a", "a-1", 4, [0], 0.0))
    for off in (208, 209):
        _poll(h, "a-1", 4, 0, off, float(off))
    h.assignments.append(Assignment("g", "a", "a-1", 4, [0], 300.0))
    _poll(h, "a-1", 4, 0, 209, 301.0)   # the commit of 210 never landed: 209 again
    _poll(h, "a-1", 4, 0, 210, 302.0)
    assert check_polls(h, "nonmonotonic-poll").anomalies == []
    assert check_polls(h, "poll-skip").anomalies == []
    _poll(h, "a-1", 4, 0, 209, 303.0)   # within that assignment it goes back: flagged
    assert [a.detail["offset"] for a in check_polls(h, "nonmonotonic-poll").anomalies] == [209]
