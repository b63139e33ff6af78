"""The history checkers find what they claim to find (and nothing on a clean history)."""

from __future__ import annotations

import pytest

from kafkasim.harness.checkers import check_all
from kafkasim.harness.workload import History, Poll, Send

pytestmark = pytest.mark.unit


def _clean(n: int = 5) -> History:
    h = History()
    for i in range(n):
        h.sends.append(Send("p", f"p-{i}", None, float(i), float(i) + 1, True, 0, i))
        h.polls.append(Poll("c", 10.0 + i, "t", 0, i, f"p-{i}"))
    return h


def _found(h: History) -> dict[str, int]:
    return {r.name: len(r.anomalies) for r in check_all(h) if r.anomalies}


def test_clean_history_has_no_anomalies() -> None:
    assert _found(_clean()) == {}


def test_lost_write_when_a_later_offset_was_read() -> None:
    h = _clean()
    del h.polls[2]
    found = _found(h)
    assert found["lost-write"] == 1 and "unseen" not in found and found["poll-skip"] == 1


def test_unseen_when_nothing_after_it_was_read() -> None:
    h = _clean()
    del h.polls[4]
    assert _found(h) == {"unseen": 1}


def test_reread_is_nonmonotonic_not_duplicate() -> None:
    h = _clean()
    h.polls.append(Poll("c", 20.0, "t", 0, 2, "p-2"))  # the consumer went back to offset 2
    assert _found(h) == {"nonmonotonic-poll": 1}


def test_reorder_of_one_producers_sends() -> None:
    h = _clean()
    h.sends[1].offset, h.sends[2].offset = 2, 1
    found = _found(h)
    assert found["reorder"] == 1


def test_a_retried_duplicate_is_not_an_inconsistent_offset() -> None:
    h = _clean()
    h.polls.append(Poll("c", 20.0, "t", 0, 5, "p-2"))  # p-2 also written again at offset 5
    found = _found(h)
    assert found.get("duplicate") == 1 and "inconsistent-offsets" not in found


def test_an_overwritten_acked_offset_is_inconsistent() -> None:
    h = _clean()
    h.polls[3] = Poll("c", 13.0, "t", 0, 3, "other")  # offset 3 was acked as p-3
    assert _found(h)["inconsistent-offsets"] == 1
