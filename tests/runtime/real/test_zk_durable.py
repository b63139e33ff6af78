"""The embedded coordination store on real files (kafkasim/runtime/real/zk_durable.py): random
znode operations through EmbeddedZkClient, a crash (the process abandons the store) at any
point — including a WAL cut at every byte offset of its last record and a crash on either side
of the snapshot's rename — and the reopened store holds exactly the acknowledged changes, with
the dead process's sessions expired as ZooKeeper expires them."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from kafkasim.runtime import api
from kafkasim.runtime import zkstore_log as L
from kafkasim.runtime.real import zk_durable as D
from kafkasim.runtime.real.zk import EmbeddedCoordination
from kafkasim.runtime.zkstore import ZkStore

sys.path.insert(0, str(Path(__file__).parents[1]))
from zk_ops import OPS, apply_to_client, expired, state  # noqa: E402

pytestmark = pytest.mark.property
SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), database=None)


class Crash(OSError):
    """The process dies here (raised from a file step; the store is abandoned, not closed)."""


async def drive(coord: EmbeddedCoordination, ops: list[tuple[Any, ...]]) -> tuple[list[bytes], bool]:
    """Run ops until one crashes; the state after each acknowledged change, and whether an op
    was in flight at the crash (its change may or may not survive)."""
    clients: list[Any] = []
    states = [state(coord.store)]
    for op in ops:
        try:
            if await apply_to_client(clients, lambda: coord.connect(30_000), op):
                states.append(state(coord.store))
        except api.ConnectionLossError as exc:
            assert isinstance(exc.__cause__, Crash)
            states.append(state(coord.store))
            return states, True
    return states, False


def reopen(directory: Path) -> bytes:
    store, journal = D.open_store(str(directory))
    journal.close()
    return state(store)


def wal_files(directory: Path) -> list[Path]:
    return sorted(directory.glob(f"{D.WAL_PREFIX}*"))


def record_ends(buf: bytes) -> list[int]:
    ends, pos = [], len(L.WAL_MAGIC)
    while pos + 8 <= len(buf):
        pos += 8 + int.from_bytes(buf[pos:pos + 4], "big")
        ends.append(pos)
    return ends


# ---------------------------------------------------------------- crash after any op
CUT_EXAMPLES: list[int] = []


@SETTINGS
@given(OPS)
def test_reopen_after_a_crash_holds_every_acknowledged_change(tmp_path_factory: Any, ops: list[Any]) -> None:
    base = tmp_path_factory.mktemp("zk")
    coord = EmbeddedCoordination.durable(str(base / "zk"), snapshot_bytes=400)  # snapshots often
    states, _ = asyncio.run(drive(coord, ops))
    assert coord.journal is not None
    coord.journal.close()  # kill -9: nothing flushed or closed beyond what was acknowledged
    shutil.copytree(base / "zk", base / "whole")
    assert reopen(base / "whole") == expired(states[-1])

    # The current WAL cut at every byte offset of its last record: that record was never
    # acknowledged (its fsync had not returned), everything before it was.
    wal = wal_files(base / "zk")[-1]
    buf = wal.read_bytes()
    ends = record_ends(buf)
    if len(ends) < 1 or len(states) < 2:
        return  # a snapshot took the last record; covered by the examples where none did
    CUT_EXAMPLES.append(len(ends))
    start = ends[-2] if len(ends) > 1 else len(L.WAL_MAGIC)
    for cut in range(start, ends[-1]):
        crashed = base / f"cut{cut}"
        shutil.copytree(base / "zk", crashed)
        (crashed / wal.name).write_bytes(buf[:cut])
        assert reopen(crashed) == expired(states[-2]), cut
        if cut == (start + ends[-1]) // 2:  # recovery is itself crash-safe: opening again changes nothing
            assert reopen(crashed) == expired(states[-2])


def test_the_cut_property_ran_on_nonempty_wals() -> None:
    # Runs after the property above (file order): the cuts were not all skipped.
    assert len(CUT_EXAMPLES) >= 3, CUT_EXAMPLES


# ---------------------------------------------------------------- crash around a snapshot
def _half_snapshot(directory: str, image: bytes) -> None:
    Path(directory, D.SNAPSHOT_TMP).write_bytes(image[: len(image) // 2])
    raise Crash("killed while writing snapshot.tmp")


def _renamed_then_crash(directory: str, image: bytes) -> None:
    real_write_snapshot(directory, image)
    raise Crash("killed after the rename, before the old WAL went")


def _zeroed_new_wal(path: str, sync: bool = False) -> int:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    if not sync:  # the new generation, created during a snapshot: its magic never reached disk
        os.write(fd, bytes(len(L.WAL_MAGIC)))
        raise Crash("killed before the new WAL was synced")
    os.write(fd, L.WAL_MAGIC)
    return fd


real_write_snapshot = D.write_snapshot
CRASHES: dict[str, tuple[str, Callable[..., Any]]] = {
    "half-written snapshot.tmp": ("write_snapshot", _half_snapshot),
    "snapshot renamed, old WAL kept": ("write_snapshot", _renamed_then_crash),
    "new WAL zeroed": ("_create_wal", _zeroed_new_wal),
}


@pytest.mark.parametrize("crash", sorted(CRASHES))
def test_a_crash_on_either_side_of_the_snapshot_rename_loses_nothing_acknowledged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, crash: str) -> None:
    ops = [("open",)] + [("create", f"/a{i}", b"v" * 40, False, False, False, 0) for i in range(40)]
    coord = EmbeddedCoordination.durable(str(tmp_path / "zk"), snapshot_bytes=1000)
    name, fake = CRASHES[crash]
    monkeypatch.setattr(D, name, fake)
    states, in_flight = asyncio.run(drive(coord, ops))
    monkeypatch.undo()
    assert in_flight, "the crash never happened: no snapshot was taken"
    assert coord.journal is not None
    coord.journal.close()
    got = reopen(tmp_path / "zk")
    # The crashing op had been fsynced (a snapshot follows the fsync) but never acknowledged.
    assert got in (expired(states[-2]), expired(states[-1]))
    assert not (tmp_path / "zk" / D.SNAPSHOT_TMP).exists()
    # The store keeps working after the recovery: a new change survives another restart.
    again = EmbeddedCoordination.durable(str(tmp_path / "zk"))

    async def more() -> None:
        client = await again.connect(30_000)
        await client.create("/after", b"x")

    asyncio.run(more())
    assert again.journal is not None
    again.journal.close()
    store, journal = D.open_store(str(tmp_path / "zk"))
    journal.close()
    assert store.get(0, "/after", None)[0] == b"x"


# ---------------------------------------------------------------- what a restart keeps
def test_restart_expires_ephemerals_and_continues_counters(tmp_path: Path) -> None:
    coord = EmbeddedCoordination.durable(str(tmp_path / "zk"))

    async def first() -> tuple[int, int, list[str]]:
        c = await coord.connect(30_000)
        await c.create("/brokers/ids/0", b"{}", ephemeral=True, makepath=True)
        await c.create("/controller", b"{}", ephemeral=True)
        await c.create("/brokers/topics/t", b"{}", makepath=True)
        seq = [await c.create("/isr_change_notification/isr_change_", b"", sequential=True, makepath=True)
               for _ in range(2)]
        await c.set("/brokers/topics/t", b"{v2}")
        return c.session_id, (await c.exists("/brokers/ids")).cversion, seq  # type: ignore[union-attr]

    old_sid, ids_cversion, seq = asyncio.run(first())
    zxid = coord.store.zxid
    assert coord.journal is not None
    coord.journal.close()  # kill -9

    again = EmbeddedCoordination.durable(str(tmp_path / "zk"))
    st = again.store
    assert "/brokers/ids/0" not in st.nodes and "/controller" not in st.nodes  # expired
    assert st.stat("/brokers/ids").cversion == ids_cversion + 1  # the expiry is a child change
    assert st.zxid > zxid
    assert st.get(0, "/brokers/topics/t", None)[0] == b"{v2}" and st.stat("/brokers/topics/t").version == 1

    async def second() -> tuple[int, str]:
        c = await again.connect(30_000)
        return c.session_id, await c.create("/isr_change_notification/isr_change_", b"", sequential=True)

    sid, created = asyncio.run(second())
    assert sid > old_sid
    assert seq == ["/isr_change_notification/isr_change_0000000000", "/isr_change_notification/isr_change_0000000001"]
    assert created == "/isr_change_notification/isr_change_0000000002"


def test_a_change_is_on_disk_before_it_is_acknowledged(tmp_path: Path) -> None:
    """Each acknowledged create is readable by a reopen of a copy taken right after it returns."""
    coord = EmbeddedCoordination.durable(str(tmp_path / "zk"))

    async def go() -> None:
        c = await coord.connect(30_000)
        for i in range(5):
            await c.create(f"/n{i}", bytes([i]))
            shutil.copytree(tmp_path / "zk", tmp_path / f"copy{i}")
            store, journal = D.open_store(str(tmp_path / f"copy{i}"))
            journal.close()
            assert sorted(p for p in store.nodes if p.startswith("/n")) == [f"/n{j}" for j in range(i + 1)]

    asyncio.run(go())


def test_damage_that_is_not_a_torn_tail_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    coord = EmbeddedCoordination.durable(str(tmp_path / "zk"))
    assert coord.journal is not None
    coord.journal.close()
    snap = tmp_path / "zk" / D.SNAPSHOT
    snap.write_bytes(snap.read_bytes()[:-1] + b"\x00")
    with pytest.raises(L.ZkStoreCorruptError, match="CRC"):
        D.open_store(str(tmp_path / "zk"))


def test_a_fresh_directory_opens_empty(tmp_path: Path) -> None:
    store, journal = D.open_store(str(tmp_path / "new" / "zk"))
    journal.close()
    assert state(store) == state(ZkStore())
    assert sorted(p.name for p in (tmp_path / "new" / "zk").iterdir()) == [D.SNAPSHOT, D.wal_name(0)]


def test_a_failed_fsync_fails_the_change_and_every_later_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As a ZooKeeper server whose disk fails: the change is not acknowledged, and nothing after
    it is served (a read could otherwise see a change that was never made durable)."""
    coord = EmbeddedCoordination.durable(str(tmp_path / "zk"))

    def eio(fd: int) -> None:
        raise OSError(5, "Input/output error")

    async def go() -> None:
        c = await coord.connect(30_000)
        await c.create("/kept", b"1")
        monkeypatch.setattr(D, "_fdatasync", eio)
        with pytest.raises(api.ConnectionLossError, match="Input/output error"):
            await c.create("/lost", b"2")
        with pytest.raises(api.ConnectionLossError):
            await c.get("/kept")
        with pytest.raises(api.ConnectionLossError):
            await c.set("/kept", b"3")
        await c.close()  # closing a session of a failed store does not raise

    asyncio.run(go())
    monkeypatch.undo()
    assert coord.journal is not None
    coord.journal.close()
    store, journal = D.open_store(str(tmp_path / "zk"))
    journal.close()
    assert store.get(0, "/kept", None)[0] == b"1"
