"""corrupt-offset-delivered: what a one-bit flip of a batch's base offset explains, and only that."""

from __future__ import annotations

import pytest

from kafkasim.harness.checkers import check_all
from kafkasim.harness.corruption import attribute_offset_flips
from kafkasim.harness.workload import History, Poll, Send

pytestmark = pytest.mark.unit

FLIPPED = {("t", 0)}


def _history(n: int = 8) -> History:
    h = History()
    for i in range(n):
        h.sends.append(Send("p", f"p-{i}", None, float(i), float(i) + 1, True, 0, i))
    return h


def _read(h: History, offsets_values: list[tuple[int, str]]) -> None:
    for i, (off, value) in enumerate(offsets_values):
        h.polls.append(Poll("c", 10.0 + i, "t", 0, off, value))


def _log(h: History) -> dict[int, str]:
    return {s.offset: s.value for s in h.sends}


def _found(h: History, flipped: set[tuple[str, int]] = FLIPPED,
           holes: set[tuple[str, int, int]] | None = None) -> dict[str, int]:
    log = _log(h)
    results = attribute_offset_flips(h, check_all(h), flipped, lambda t, p, o: log.get(o), holes)
    return {r.name: len(r.anomalies) for r in results if r.anomalies}


def test_a_record_delivered_one_bit_up_explains_the_skip_and_the_reset() -> None:
    h = _history()
    # offset 3's batch came back as 3 + 2^32: the consumer jumped, went out of range, reset to 0
    _read(h, [(0, "p-0"), (1, "p-1"), (2, "p-2"), (3 + 2**32, "p-3"), (0, "p-0"), (1, "p-1"), (2, "p-2"),
              (4, "p-4"), (5, "p-5"), (6, "p-6"), (7, "p-7")])
    before = {r.name: len(r.anomalies) for r in check_all(h) if r.anomalies}
    assert before["poll-skip"] >= 1 and before["nonmonotonic-poll"] >= 1
    found = _found(h)
    assert found.get("corrupt-offset-delivered") == 1
    assert "poll-skip" not in found and "nonmonotonic-poll" not in found and "lost-write" not in found


def test_skipped_records_of_a_misplaced_batch_explain_the_lost_write() -> None:
    h = _history()
    _read(h, [(0, "p-0"), (1, "p-1"), (4, "p-4"), (5, "p-5"), (6, "p-6"), (7, "p-7")])
    h.misplaced += [Poll("c", 11.5, "t", 0, 2 ^ 32, "p-2"), Poll("c", 11.5, "t", 0, 3 ^ 32, "p-3")]
    assert _found(h) == {"corrupt-offset-delivered": 2}


def test_nothing_is_excused_without_a_bit_flip_on_the_partition() -> None:
    h = _history()
    _read(h, [(0, "p-0"), (1, "p-1"), (4, "p-4"), (5, "p-5"), (6, "p-6"), (7, "p-7")])
    h.misplaced += [Poll("c", 11.5, "t", 0, 2 ^ 32, "p-2")]
    found = _found(h, flipped=set())
    assert found["lost-write"] == 2 and "corrupt-offset-delivered" not in found


def test_a_loss_no_flip_explains_stays_a_loss() -> None:
    h = _history()
    _read(h, [(0, "p-0"), (1, "p-1"), (4, "p-4"), (5, "p-5"), (6, "p-6"), (7, "p-7")])
    h.misplaced += [Poll("c", 11.5, "t", 0, 2 ^ 32, "p-2")]  # explains p-2, not p-3
    found = _found(h)
    assert found["lost-write"] == 1 and found["corrupt-offset-delivered"] == 1


def test_a_retry_duplicate_one_bit_away_is_not_a_flip() -> None:
    h = _history()
    _read(h, [(i, f"p-{i}") for i in range(8)])
    # p-4 written again by a retry and acknowledged at 5 (4 ^ 5 is one bit); the log holds it at 4
    h.sends.append(Send("p", "p-4", None, 9.0, 10.0, True, 0, 5))
    log = {**_log(h), 4: "p-4"}
    results = attribute_offset_flips(h, check_all(h), FLIPPED, lambda t, p, o: log.get(o))
    assert not [r for r in results if r.name == "corrupt-offset-delivered" and r.anomalies]


def test_a_hole_explains_only_a_skip_across_it() -> None:
    h = _history()
    _read(h, [(0, "p-0"), (1, "p-1"), (2, "p-2"), (4, "p-4"), (5, "p-5"), (6, "p-6"), (7, "p-7"), (3, "p-3")])
    assert _found(h, holes={("t", 0, 3)}) == {"nonmonotonic-poll": 1, "corrupt-offset-delivered": 1}
    assert "poll-skip" in _found(h, holes={("t", 0, 6)})
