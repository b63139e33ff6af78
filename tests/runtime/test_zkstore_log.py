"""The coordination store's WAL and snapshot bytes (kafkasim/runtime/zkstore_log.py): replaying
the WAL of a random sequence of znode operations rebuilds the store exactly (znodes, versions,
cversions, zxid, session ids); a WAL cut anywhere inside its last record replays to the state
before that record; a snapshot round-trips; damage that is not a torn tail is reported, never
replayed."""

from __future__ import annotations

import struct
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from kafkasim.runtime import zkstore_log as L
from kafkasim.runtime.zkstore import ZkStore

sys.path.insert(0, str(Path(__file__).parent))
from zk_ops import OPS, apply_to_store, state  # noqa: E402

pytestmark = pytest.mark.property
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None)


def run_ops(ops: list[tuple[Any, ...]]) -> tuple[bytes, list[int], list[bytes]]:
    """(WAL bytes, the end offset of each record, the store's state after each record)."""
    store, sessions = ZkStore(), []
    wal, ends, states = bytearray(L.WAL_MAGIC), [], [state(store)]
    for op in ops:
        rec = apply_to_store(store, sessions, op)
        if rec is not None:
            wal += L.encode_record(rec)
            ends.append(len(wal))
            states.append(state(store))
    return bytes(wal), ends, states


def replay(wal: bytes, base: ZkStore | None = None) -> tuple[ZkStore, int]:
    store = base or ZkStore()
    records, valid = L.decode_wal(wal)
    for rec in records:
        L.apply(store, rec)
    return store, valid


@SETTINGS
@given(OPS)
def test_replaying_the_wal_rebuilds_the_store(ops: list[tuple[Any, ...]]) -> None:
    wal, ends, states = run_ops(ops)
    store, valid = replay(wal)
    assert valid == len(wal)
    assert state(store) == states[-1]


@SETTINGS
@given(OPS)
def test_a_wal_cut_inside_its_last_record_replays_the_acknowledged_prefix(ops: list[tuple[Any, ...]]) -> None:
    wal, ends, states = run_ops(ops)
    if not ends:
        return
    start = ends[-2] if len(ends) > 1 else len(L.WAL_MAGIC)
    for cut in range(start, ends[-1]):  # every byte offset of the last record
        store, valid = replay(wal[:cut])
        assert valid == start, cut
        assert state(store) == states[-2], cut


@SETTINGS
@given(OPS)
def test_a_snapshot_midway_plus_the_rest_of_the_wal_is_the_whole(ops: list[tuple[Any, ...]]) -> None:
    store, sessions = ZkStore(), []
    half = len(ops) // 2
    for op in ops[:half]:
        apply_to_store(store, sessions, op)
    image = L.encode_snapshot(store, 3)
    rest = bytearray(L.WAL_MAGIC)
    for op in ops[half:]:
        rec = apply_to_store(store, sessions, op)
        if rec is not None:
            rest += L.encode_record(rec)
    restored, next_gen = L.decode_snapshot(image)
    assert next_gen == 3
    replayed, _ = replay(bytes(rest), restored)
    assert state(replayed) == state(store)
    # Sessions continue after every id handed out before the snapshot.
    assert replayed.open_session() == store.open_session()


def test_a_flipped_bit_in_the_last_record_drops_only_that_record() -> None:
    ops = [("open",), ("create", "/a", b"x", False, False, False, 0), ("set", "/a", b"y", -1), ("set", "/a", b"z", -1)]
    wal, ends, states = run_ops(ops)
    for pos in range(ends[-2], ends[-1]):
        damaged = bytearray(wal)
        damaged[pos] ^= 0x10
        store, valid = replay(bytes(damaged))
        assert valid == ends[-2] and state(store) == states[-2], pos


def test_a_sequential_create_is_logged_at_its_final_path() -> None:
    store, sessions = ZkStore(), [ZkStore().open_session()]
    apply_to_store(store, sessions, ("create", "/e", b"", False, False, False, 0))
    rec = apply_to_store(store, sessions, ("create", "/e/f", b"", False, True, False, 0))
    assert rec is not None and rec.ops[0].path == "/e/f0000000000"
    again, _ = replay(L.WAL_MAGIC + L.encode_record(L.WalRecord(L.OPEN_SESSION, sessions[0]))
                      + L.encode_record(L.create_record(sessions[0], "/e", b"", False, False)) + L.encode_record(rec))
    assert again.get(0, "/e", None)[1].cversion == 1
    assert again.get_children(0, "/e", None) == ["f0000000000"]


def test_zeroed_or_short_wal_files_are_empty_and_foreign_ones_are_refused() -> None:
    assert L.decode_wal(b"") == ([], 0)
    assert L.decode_wal(L.WAL_MAGIC[:5]) == ([], 0)
    assert L.decode_wal(bytes(4096)) == ([], 0)  # created, blocks never written
    with pytest.raises(L.ZkStoreCorruptError):
        L.decode_wal(b"PK\x03\x04 not a wal at all")


def test_a_damaged_snapshot_is_reported_not_loaded() -> None:
    store = ZkStore()
    store.create(store.open_session(), "/a", b"data", False, False, False)
    image = L.encode_snapshot(store, 1)
    assert state(L.decode_snapshot(image)[0]) == state(store)
    damaged = bytearray(image)
    damaged[len(L.SNAPSHOT_MAGIC) + 30] ^= 1
    with pytest.raises(L.ZkStoreCorruptError, match="CRC"):
        L.decode_snapshot(bytes(damaged))
    with pytest.raises(L.ZkStoreCorruptError):
        L.decode_snapshot(image[:-7])
    # A well-formed CRC over nonsense: still a clear error, not a traceback.
    body = L.SNAPSHOT_MAGIC + b"\xff" * 40
    with pytest.raises(L.ZkStoreCorruptError):
        L.decode_snapshot(body + struct.pack(">I", zlib.crc32(body)))
