"""The transactional checkers on hand-built histories: for each, one history with the anomaly
(found, naming the transaction) and one without (nothing found)."""

from __future__ import annotations

import pytest

from kafkasim.harness.txn_checkers import (
    check_aborted_read,
    check_eos,
    check_g1c,
    check_lost_committed,
    check_torn,
    check_uncommitted_read,
    cycle_counts,
    strongly_connected,
)
from kafkasim.harness.workload import History, Poll, Txn, TxnWrite

pytestmark = pytest.mark.unit

T = "events"


def txn(tid: str, outcome: str, writes: list[tuple[int, int, str]], end_ms: float = 10.0, intent: str = "commit",
        reads: list[tuple[str, int, int, str]] | None = None) -> Txn:
    t = Txn(tid, tid.split("/")[0], "x", 1, 0, 0.0, intent=intent, end_invoke_ms=end_ms, outcome=outcome)
    t.writes = [TxnWrite(T, p, o, v) for p, o, v in writes]
    t.reads = [TxnWrite(tp, p, o, v) for tp, p, o, v in reads or []]
    return t


def read(process: str, p: int, o: int, v: str, at: float = 100.0, topic: str = T) -> Poll:
    return Poll(process, at, topic, p, o, v)


def test_aborted_read() -> None:
    h = History(txns=[txn("a/0", "aborted", [(0, 0, "a-0")], intent="abort"), txn("a/1", "committed", [(0, 2, "a-1")])])
    h.txn_polls = [read("c", 0, 2, "a-1")]
    assert check_aborted_read(h).anomalies == []
    h.txn_polls.append(read("c", 0, 0, "a-0"))
    found = check_aborted_read(h).anomalies
    assert [a.detail["txns"] for a in found] == [["a/0"]]


def test_uncommitted_read_before_the_commit_was_asked() -> None:
    h = History(txns=[txn("a/0", "committed", [(0, 0, "a-0")], end_ms=50.0)])
    h.txn_polls = [read("c", 0, 0, "a-0", at=60.0)]
    assert check_uncommitted_read(h).anomalies == []
    h.txn_polls = [read("c", 0, 0, "a-0", at=40.0)]
    assert [a.detail["value"] for a in check_uncommitted_read(h).anomalies] == ["a-0"]
    # unknown outcome, commit never sent (the producer died mid-transaction): never readable
    h = History(txns=[txn("b/0", "unknown", [(1, 0, "b-0")], end_ms=-1.0)], txn_polls=[read("c", 1, 0, "b-0")])
    assert len(check_uncommitted_read(h).anomalies) == 1


def test_torn_transaction() -> None:
    t = txn("a/0", "committed", [(0, 0, "a-0"), (1, 0, "a-1")])
    later = txn("b/0", "committed", [(0, 2, "b-0"), (1, 2, "b-1")])
    whole = History(txns=[t, later], txn_polls=[read("c", 0, 0, "a-0"), read("c", 1, 0, "a-1"),
                                                read("c", 0, 2, "b-0"), read("c", 1, 2, "b-1")])
    assert check_torn(whole).anomalies == []
    # c read past both of a/0's offsets but only got one of its records
    torn = History(txns=[t, later], txn_polls=[read("c", 0, 0, "a-0"), read("c", 0, 2, "b-0"), read("c", 1, 2, "b-1")])
    found = check_torn(torn).anomalies
    assert [(a.detail["txn"], a.detail["missing"]) for a in found] == [("a/0", [[1, 0, "a-1"]])]
    # not past partition 1 yet: not torn (maybe just not read yet)
    early = History(txns=[t, later], txn_polls=[read("c", 0, 0, "a-0"), read("c", 0, 2, "b-0")])
    assert check_torn(early).anomalies == []


def test_lost_and_unseen_committed_write() -> None:
    h = History(txns=[txn("a/0", "committed", [(0, 0, "a-0")]), txn("b/0", "committed", [(0, 2, "b-0")]),
                      txn("d/0", "aborted", [(0, 4, "d-0")], intent="abort")])
    h.txn_polls = [read("c", 0, 0, "a-0"), read("c", 0, 2, "b-0")]
    assert check_lost_committed(h, "lost-committed-write").anomalies == []
    assert check_lost_committed(h, "unseen-committed").anomalies == []
    h.txn_polls = [read("c", 0, 2, "b-0")]
    assert [a.detail["value"] for a in check_lost_committed(h, "lost-committed-write").anomalies] == ["a-0"]
    h.txn_polls = [read("c", 0, 0, "a-0")]
    assert check_lost_committed(h, "lost-committed-write").anomalies == []   # nothing read past b-0
    assert [a.detail["value"] for a in check_lost_committed(h, "unseen-committed").anomalies] == ["b-0"]


def _pipeline(copy_reads: list[Poll], final: dict[str, int]) -> History:
    src = txn("p/0", "committed", [(0, 0, "p-0"), (0, 1, "p-1")])
    cp = txn("copier-0/0", "committed", [], reads=[(T, 0, 0, "p-0"), (T, 0, 1, "p-1")])
    cp.writes = [TxnWrite("out", 0, 0, "copy:p-0"), TxnWrite("out", 0, 1, "copy:p-1")]
    return History(txns=[src, cp], txn_polls=copy_reads, final_offsets=final)


def test_exactly_once_pipeline() -> None:
    good = _pipeline([read("c", 0, 0, "copy:p-0", topic="out"), read("c", 0, 1, "copy:p-1", topic="out")],
                     {f"{T}-0": 2})
    assert [len(r.anomalies) for r in check_eos(good)] == [0, 0, 0]
    dup = _pipeline([read("c", 0, 0, "copy:p-0", topic="out"), read("c", 0, 1, "copy:p-1", topic="out"),
                     read("c", 0, 2, "copy:p-1", topic="out")], {f"{T}-0": 2})
    assert [len(r.anomalies) for r in check_eos(dup)] == [1, 0, 0]
    # p-1 copied but the committed offset says it was not consumed: offsets and output apart
    apart = _pipeline([read("c", 0, 0, "copy:p-0", topic="out"), read("c", 0, 1, "copy:p-1", topic="out")],
                      {f"{T}-0": 1})
    assert [len(r.anomalies) for r in check_eos(apart)] == [0, 0, 1]
    missing = _pipeline([read("c", 0, 0, "copy:p-0", topic="out")], {f"{T}-0": 2})
    assert [len(r.anomalies) for r in check_eos(missing)] == [0, 1, 1]


def test_g1c_wr_cycle() -> None:
    a = txn("a/0", "committed", [(0, 0, "a-0")], reads=[(T, 1, 0, "b-0")])
    b = txn("b/0", "committed", [(1, 0, "b-0")], reads=[(T, 0, 0, "a-0")])
    assert [an.detail["txns"] for an in check_g1c(History(txns=[a, b])).anomalies] == [["a/0", "b/0"]]
    b.reads = []
    assert check_g1c(History(txns=[a, b])).anomalies == []


def test_g0_is_counted_not_failed() -> None:
    # a before b on partition 0, b before a on partition 1: Kafka allows it (no write isolation)
    a = txn("a/0", "committed", [(0, 0, "a-0"), (1, 1, "a-1")])
    b = txn("b/0", "committed", [(0, 1, "b-0"), (1, 0, "b-1")])
    assert cycle_counts(History(txns=[a, b]))["g0"] == 1
    assert check_g1c(History(txns=[a, b])).anomalies == []
    assert strongly_connected({"x": {"y"}, "y": {"z"}}) == []
