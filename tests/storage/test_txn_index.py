"""The transaction index (kafkasim/storage/txn_index.py): Kafka's 34-byte AbortedTxn entries,
the increasing-last-offset rule, truncation, and collectAbortedTxns' stop rule."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from storage_helpers import run_sim

from kafkasim.runtime.api import NodeRuntime
from kafkasim.storage.index import CorruptIndexError
from kafkasim.storage.txn_index import ENTRY_SIZE, AbortedTxn, TransactionIndex, TxnIndexError

pytestmark = pytest.mark.unit

PATH = "d/00000000000000000100.txnindex"


def _raw(rt: NodeRuntime, path: str = PATH) -> bytes:
    f = rt.fs.open(path, create=False)
    try:
        return f.read(0, f.size())
    finally:
        f.close()


def test_an_entry_is_kafkas_34_bytes() -> None:
    txn = AbortedTxn(producer_id=0x0102030405060708, first_offset=100, last_offset=0x1FF, last_stable_offset=-1)
    raw = txn.encode()
    assert ENTRY_SIZE == 34 and len(raw) == 34
    assert raw == (b"\x00\x00" + bytes(range(1, 9)) + (100).to_bytes(8, "big") + (0x1FF).to_bytes(8, "big")
                   + b"\xff" * 8)
    assert AbortedTxn.decode(raw) == txn


def test_the_file_appears_with_the_first_entry_and_holds_them_back_to_back() -> None:
    async def body(rt: NodeRuntime, world: Any) -> tuple[Any, ...]:
        rt.fs.mkdir("d")
        idx = TransactionIndex(rt.fs, PATH, 100)
        existed = rt.fs.exists(PATH)
        idx.append(AbortedTxn(7, 90, 101, 102))
        idx.append(AbortedTxn(8, 95, 105, 95))
        with pytest.raises(TxnIndexError):
            idx.append(AbortedTxn(9, 96, 105, 106))  # the last offset must increase
        raw = _raw(rt)
        idx.close()
        reopened = TransactionIndex(rt.fs, PATH, 100).all_aborted_txns()
        return existed, raw, reopened

    existed, raw, reopened = run_sim(body)
    assert not existed
    assert raw == struct.pack(">hqqqq", 0, 7, 90, 101, 102) + struct.pack(">hqqqq", 0, 8, 95, 105, 95)
    assert reopened == [AbortedTxn(7, 90, 101, 102), AbortedTxn(8, 95, 105, 95)]


def test_truncate_to_drops_the_entries_whose_marker_is_at_or_after_the_offset() -> None:
    async def body(rt: NodeRuntime, world: Any) -> tuple[Any, ...]:
        rt.fs.mkdir("d")
        idx = TransactionIndex(rt.fs, PATH, 100)
        for last in (101, 104, 108):
            idx.append(AbortedTxn(last, 100, last, last + 1))
        idx.truncate_to(105)
        after = idx.all_aborted_txns()
        idx.append(AbortedTxn(1, 105, 106, 107))  # the last offset is the kept entry's again
        return after, len(_raw(rt)), [t.last_offset for t in idx.all_aborted_txns()]

    after, size, lasts = run_sim(body)
    assert [t.last_offset for t in after] == [101, 104]
    assert size == 3 * ENTRY_SIZE and lasts == [101, 104, 106]


def test_collect_stops_at_the_first_entry_whose_lso_reaches_the_upper_bound() -> None:
    async def body(rt: NodeRuntime, world: Any) -> tuple[Any, ...]:
        rt.fs.mkdir("d")
        idx = TransactionIndex(rt.fs, PATH, 100)
        idx.append(AbortedTxn(1, 100, 103, 100))   # LSO held by another transaction at 100
        idx.append(AbortedTxn(2, 100, 110, 111))
        idx.append(AbortedTxn(3, 112, 120, 121))
        return (idx.collect_aborted_txns(104, 115), idx.collect_aborted_txns(100, 130),
                idx.collect_aborted_txns(111, 112))

    mid, whole, gap = run_sim(body)
    assert [t.producer_id for t in mid[0]] == [2, 3] and mid[1] is True      # 121 >= 115: complete
    assert [t.producer_id for t in whole[0]] == [1, 2, 3] and whole[1] is False  # may go on next segment
    assert gap == ([], True)  # nothing overlaps [111, 112); the third entry (LSO 121) ends the search


def test_a_torn_tail_is_not_read_and_is_overwritten_by_the_next_entry() -> None:
    async def body(rt: NodeRuntime, world: Any) -> tuple[Any, ...]:
        rt.fs.mkdir("d")
        f = rt.fs.open(PATH)
        f.append(AbortedTxn(1, 100, 101, 102).encode() + b"\x00\x00\x00")
        f.close()
        idx = TransactionIndex(rt.fs, PATH, 100)
        before = idx.all_aborted_txns()
        idx.append(AbortedTxn(2, 100, 102, 103))
        return before, _raw(rt)

    before, raw = run_sim(body)
    assert before == [AbortedTxn(1, 100, 101, 102)]
    assert raw == AbortedTxn(1, 100, 101, 102).encode() + AbortedTxn(2, 100, 102, 103).encode()


def test_sanity_check_refuses_an_entry_below_the_segment() -> None:
    async def body(rt: NodeRuntime, world: Any) -> None:
        rt.fs.mkdir("d")
        idx = TransactionIndex(rt.fs, PATH, 100)
        idx.append(AbortedTxn(1, 90, 100, 101))
        idx.sanity_check()
        bad = TransactionIndex(rt.fs, "d/00000000000000000200.txnindex", 200)
        bad.append(AbortedTxn(1, 90, 150, 151))
        with pytest.raises(CorruptIndexError):
            bad.sanity_check()

    run_sim(body)
