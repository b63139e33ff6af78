"""The god's-eye transaction invariants on hand-built cluster views: each check fires on the
state it names and stays quiet on the healthy one; a transient state (a marker in flight) is
not reported before the bound."""

from __future__ import annotations

import pytest

from kafkasim.harness.txn_invariants import CoordinatorView, LeaderView, TxnInvariants

pytestmark = pytest.mark.unit


def leader(hw: int = 10, lso: int = 10, ongoing: tuple[tuple[int, int], ...] = ()) -> LeaderView:
    return LeaderView("broker-0", "events", 0, hw, lso, ongoing)


def coord(state: str, start: int = 0, pid: int = 7, timeout: int = 1000) -> CoordinatorView:
    return CoordinatorView("broker-1", "tx", pid, 0, state, frozenset({("events", 0)}), start, timeout)


def test_lso_above_high_watermark() -> None:
    inv = TxnInvariants(bound_ms=100)
    inv.check(0, [leader(hw=10, lso=8)], [coord("Ongoing")])
    assert [len(r.anomalies) for r in inv.results()] == [0, 0, 0]
    inv.check(1, [leader(hw=10, lso=11)], [coord("Ongoing")])
    inv.check(2, [leader(hw=10, lso=11)], [coord("Ongoing")])   # reported once
    assert [len(r.anomalies) for r in inv.results()] == [1, 0, 0]


def test_transaction_past_its_timeout() -> None:
    inv = TxnInvariants(bound_ms=100)
    inv.check(1050, [], [coord("Ongoing", start=0, timeout=1000)])   # within timeout + bound
    assert inv.results()[1].anomalies == []
    inv.check(1200, [], [coord("Ongoing", start=0, timeout=1000)])
    inv.check(1300, [], [coord("CompleteAbort", start=0, timeout=1000)])
    assert [a.detail["transactional_id"] for a in inv.results()[1].anomalies] == ["tx"]


def test_missing_marker_stuck_prepare_and_hanging_partition() -> None:
    inv = TxnInvariants(bound_ms=100)
    # a commit whose markers arrive within the bound: nothing
    inv.check(0, [leader(ongoing=((7, 5),))], [coord("PrepareCommit")])
    inv.check(50, [leader(ongoing=((7, 5),))], [coord("CompleteCommit")])
    inv.check(80, [leader()], [coord("CompleteCommit")])
    inv.check(500, [leader()], [coord("CompleteCommit")])
    assert inv.results()[2].anomalies == []
    # the coordinator is done but the partition still holds the transaction open: hanging
    inv.check(600, [leader(ongoing=((7, 9),))], [coord("CompleteCommit")])
    inv.check(650, [leader(ongoing=((7, 9),))], [coord("CompleteCommit")])
    assert inv.results()[2].anomalies == []
    inv.check(750, [leader(ongoing=((7, 9),))], [coord("CompleteCommit")])
    # a prepare that never completes
    inv.check(800, [leader()], [coord("PrepareAbort", start=700)])
    inv.check(950, [leader()], [coord("PrepareAbort", start=700)])
    kinds = [a.detail["what"][0] for a in inv.results()[2].anomalies]
    assert kinds == ["hanging", "txn"]


def test_no_checks_listed_without_transactions() -> None:
    inv = TxnInvariants()
    inv.check(0, [leader()], [])
    assert inv.results() == []
