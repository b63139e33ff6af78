"""Transaction marker batches (kafkasim/records/control.py): the bytes Kafka's
MemoryRecords.withEndTransactionMarker writes, read back by the parser."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkasim.records.batch import (
    Record,
    build_batch,
    build_empty_batch,
    decode_batch_records,
    validate_batch,
)
from kafkasim.records.control import EndTxnMarker, end_txn_marker_batch, parse_end_txn_marker_batch
from kafkasim.records.errors import CorruptRecordError

pytestmark = pytest.mark.unit

_HEADER = struct.Struct(">qiibIhiqqqhii")


def test_a_commit_marker_has_kafkas_header_and_record() -> None:
    buf = end_txn_marker_batch(producer_id=4000, producer_epoch=3, coordinator_epoch=17, committed=True,
                               timestamp_ms=1_700_000_000_123, partition_leader_epoch=5)
    assert len(buf) == 78
    (base, length, ple, magic, _crc, attrs, lod, base_ts, max_ts, pid, epoch, base_seq,
     count) = _HEADER.unpack_from(buf, 0)
    assert (base, length, ple, magic) == (0, 78 - 12, 5, 2)
    assert attrs == 0x30                      # transactional | control, no codec, CreateTime
    assert (lod, base_ts, max_ts) == (0, 1_700_000_000_123, 1_700_000_000_123)
    assert (pid, epoch, base_seq, count) == (4000, 3, -1, 1)
    validate_batch(buf)                       # the CRC-32C covers [21, end)
    # The record: length 16, attributes 0, deltas 0, key (0, COMMIT=1), value (0, 17), no headers.
    assert buf[61:] == bytes([0x20, 0, 0, 0, 0x08]) + b"\x00\x00\x00\x01" + bytes([0x0C]) + \
        b"\x00\x00\x00\x00\x00\x11" + b"\x00"
    [rec] = decode_batch_records(buf)
    assert rec.key == b"\x00\x00\x00\x01" and rec.value == b"\x00\x00\x00\x00\x00\x11"


def test_an_abort_marker_differs_only_in_its_type_and_crc() -> None:
    commit = end_txn_marker_batch(1, 0, 0, True, 10)
    abort = end_txn_marker_batch(1, 0, 0, False, 10)
    diff = [i for i in range(len(commit)) if commit[i] != abort[i]]
    assert diff and all(17 <= i < 21 or i == 69 for i in diff)  # CRC bytes and the key's type byte
    assert abort[66:70] == b"\x00\x00\x00\x00"


@given(pid=st.integers(0, 2**63 - 1), epoch=st.integers(0, 32767), coord=st.integers(0, 2**31 - 1),
       committed=st.booleans(), ts=st.integers(0, 2**50), ple=st.integers(-1, 2**31 - 1))
def test_the_parser_reads_back_what_the_builder_wrote(pid: int, epoch: int, coord: int, committed: bool, ts: int,
                                                      ple: int) -> None:
    buf = end_txn_marker_batch(pid, epoch, coord, committed, ts, partition_leader_epoch=ple)
    assert parse_end_txn_marker_batch(buf) == EndTxnMarker(pid, epoch, coord, committed, ts, 0)


def test_an_emptied_control_batch_carries_no_marker() -> None:
    # What the cleaner leaves of a marker whose transaction is gone: no record at all.
    empty = build_empty_batch(base_offset=9, last_offset=9, timestamp_ms=5, producer_id=1, producer_epoch=0,
                              is_transactional=True, is_control=True)
    assert parse_end_txn_marker_batch(empty) is None


def test_data_batches_and_malformed_markers_are_refused() -> None:
    data = build_batch([Record(1, b"k", b"v")])
    with pytest.raises(CorruptRecordError):
        parse_end_txn_marker_batch(data)
    short_value = build_batch([Record(1, b"\x00\x00\x00\x00", b"\x00")], is_transactional=True, is_control=True,
                              producer_id=1, producer_epoch=0)
    with pytest.raises(CorruptRecordError):
        parse_end_txn_marker_batch(short_value)
    # Another control type (a KRaft LEADER_CHANGE record) is not an end-transaction marker.
    leader_change = build_batch([Record(1, b"\x00\x00\x00\x02", b"")], is_control=True)
    assert parse_end_txn_marker_batch(leader_change) is None
