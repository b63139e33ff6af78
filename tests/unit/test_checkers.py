"""The history checkers find what they claim to find (and nothing on a clean history)."""

from __future__ import annotations

from kafkasim.harness.checkers import check_all
from kafkasim.harness.workload import History, Poll, Send


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


def test_duplicate_and_nonmonotonic_poll() -> None:
    h = _clean()
    h.polls.append(Poll("c", 20.0, "t", 0, 5, "p-1"))
    found = _found(h)
    assert found["duplicate"] == 1 and found["inconsistent-offsets"] == 1


def test_reorder_of_one_producers_sends() -> None:
    h = _clean()
    h.sends[1].offset, h.sends[2].offset = 2, 1
    found = _found(h)
    assert found["reorder"] == 1
