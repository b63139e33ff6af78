"""The embedded coordination store's files: recovery at open, the write-ahead log, snapshots.
The byte layout and the directory are documented in `kafkasim/runtime/zkstore_log.py`.

Durability: a change is acknowledged (its ZkClient call returns, its watches fire) only once its
WAL record and every record before it are fsynced. Appends go to the file at once, in the
order the store applied them; `sync()` is a group commit (one fsync covers every record
appended before it started, and callers queued behind it find their record already durable).

Snapshots (at open, and when the WAL grows past `snapshot_bytes`) switch appends to a new WAL
generation at the same instant the state is encoded, fsync the old generation, create the new
one durably, then write `snapshot.tmp`, fsync it, rename it to `snapshot` and fsync the
directory; older generations are deleted last. At every point a crash leaves a chain
(a snapshot, then every WAL generation from its `next_gen` on) that replays to the acknowledged
state: replay stops at the first torn record, which was never acknowledged.

Opening expires every session of the previous process (their ephemeral znodes go, as
ZooKeeper expires a dead session) and snapshots the result, so a restart reads one snapshot.
"""

from __future__ import annotations

import asyncio
import os
import time

from kafkasim.runtime.zkstore import ZkStore
from kafkasim.runtime.zkstore_log import (
    WAL_MAGIC,
    WalRecord,
    ZkStoreCorruptError,
    apply,
    decode_snapshot,
    decode_wal,
    encode_record,
    encode_snapshot,
)

SNAPSHOT, SNAPSHOT_TMP, WAL_PREFIX = "snapshot", "snapshot.tmp", "wal."
DEFAULT_SNAPSHOT_BYTES = 4 << 20


def wal_name(gen: int) -> str:
    return f"{WAL_PREFIX}{gen:020d}"


class ZkJournal:
    """The WAL and snapshots of one ZkStore in one directory. Build it with `open_store`."""

    def __init__(self, directory: str, store: ZkStore, gen: int, snapshot_bytes: int) -> None:
        self.directory, self.store, self.gen = directory, store, gen
        self.snapshot_bytes = snapshot_bytes
        self._fd = _open_append(self._path(wal_name(gen)))
        self._size = os.fstat(self._fd).st_size
        self._appended = 0  # records appended, ever (this process)
        self._durable = 0   # of those, how many are known fsynced
        self._lock: asyncio.Lock | None = None
        self.failed: BaseException | None = None
        self.snapshots = 0
        self.open_ms = 0.0  # how long recovery took (open_store sets it; serve traces it)
        self.replayed = 0   # WAL records replayed onto the snapshot at open

    def _path(self, name: str) -> str:
        return os.path.join(self.directory, name)

    # ---------------------------------------------------------------- writing
    def append(self, rec: WalRecord) -> None:
        """Write one record now (not yet durable: `sync()` makes it so)."""
        self._check()
        frame = encode_record(rec)
        try:
            _write_all(self._fd, frame)
        except OSError as exc:
            self.failed = exc
            raise
        self._size += len(frame)
        self._appended += 1

    def pending(self) -> bool:
        return self._durable < self._appended

    async def sync(self) -> None:
        """Return once every record appended before this call is durable."""
        target = self._appended
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            self._check()
            if self._durable >= target:
                return
            upto = self._appended
            await self._fsync(self._fd)
            self._durable = max(self._durable, upto)
            if self._size >= self.snapshot_bytes:
                await self._snapshot()

    async def settle(self) -> None:
        """Return once nothing appended is waiting for its fsync (readers call this, so nobody
        sees a change that a crash could still take back; after a failure nothing is read)."""
        self._check()
        while self.pending():
            await self.sync()

    async def _fsync(self, fd: int) -> None:
        try:
            await asyncio.get_running_loop().run_in_executor(None, _fdatasync, fd)
        except OSError as exc:
            self.failed = exc
            raise

    def _check(self) -> None:
        if self._fd < 0:
            raise OSError(f"the coordination store in {self.directory} is closed")
        if self.failed is not None:
            raise OSError(f"the coordination store cannot write {self.directory}: {self.failed}")

    # ---------------------------------------------------------------- snapshots
    async def _snapshot(self) -> None:
        """Called with the lock held. The encode and the switch happen in one step, so the
        snapshot holds exactly the records of the generations before the new one."""
        old_fd = self._fd
        self.gen += 1
        image = encode_snapshot(self.store, self.gen)
        self._fd, self._size = _create_wal(self._path(wal_name(self.gen))), len(WAL_MAGIC)
        upto = self._appended
        await self._fsync(old_fd)
        os.close(old_fd)
        await self._fsync(self._fd)
        await asyncio.get_running_loop().run_in_executor(None, _fsync_dir, self.directory)
        self._durable = max(self._durable, upto)
        await asyncio.get_running_loop().run_in_executor(None, write_snapshot, self.directory, image)
        _remove_wals_before(self.directory, self.gen)
        self.snapshots += 1

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


# ---------------------------------------------------------------- opening (recovery)
def open_store(directory: str, snapshot_bytes: int = DEFAULT_SNAPSHOT_BYTES) -> tuple[ZkStore, ZkJournal]:
    """Recover the store in `directory` (created if missing), expire the previous process's
    sessions, and snapshot the result. ZkStoreCorruptError if a file is not a torn write but
    damage (a bad snapshot, a WAL with a foreign magic, a record that does not replay)."""
    started = time.monotonic()
    directory = os.path.abspath(directory)
    if not os.path.isdir(directory):
        os.makedirs(directory)
        _fsync_dir(os.path.dirname(directory))
    if os.path.exists(os.path.join(directory, SNAPSHOT_TMP)):
        os.unlink(os.path.join(directory, SNAPSHOT_TMP))  # a snapshot a crash interrupted
    store, next_gen = _read_snapshot(directory)
    last_gen, replayed = _replay_wals(directory, store, next_gen)
    for sid in sorted(store.sessions):
        store.close_session(sid)  # a dead process's sessions: expired, ephemerals deleted
    gen = last_gen + 1
    os.close(_create_wal(os.path.join(directory, wal_name(gen)), sync=True))
    _fsync_dir(directory)
    write_snapshot(directory, encode_snapshot(store, gen))
    _remove_wals_before(directory, gen)
    _fsync_dir(directory)
    journal = ZkJournal(directory, store, gen, snapshot_bytes)
    journal.open_ms, journal.replayed = (time.monotonic() - started) * 1000.0, replayed
    return store, journal


def _read_snapshot(directory: str) -> tuple[ZkStore, int]:
    path = os.path.join(directory, SNAPSHOT)
    if not os.path.exists(path):
        return ZkStore(), 0
    return decode_snapshot(_read(path))


def _replay_wals(directory: str, store: ZkStore, next_gen: int) -> tuple[int, int]:
    """Replay generations next_gen, next_gen+1, ... onto `store`; the last one replayed and how
    many records were. The first torn record ends the replay: its file is cut there, later
    generations deleted."""
    gens = sorted(g for g in _wal_gens(directory) if g >= next_gen)
    last, replayed = next_gen - 1, 0
    for i, gen in enumerate(gens):
        if gen != last + 1:
            raise ZkStoreCorruptError(f"{directory}: WAL generation {last + 1} is missing (found {gen})")
        path = os.path.join(directory, wal_name(gen))
        buf = _read(path)
        records, valid = decode_wal(buf)
        for n, rec in enumerate(records):
            try:
                apply(store, rec)
            except Exception as exc:
                raise ZkStoreCorruptError(f"{path}: record {n} does not replay: {type(exc).__name__}: {exc}") from exc
        last, replayed = gen, replayed + len(records)
        if valid < len(buf):
            _truncate(path, valid)
            for later in gens[i + 1:]:
                os.unlink(os.path.join(directory, wal_name(later)))
            break
    return last, replayed


def _wal_gens(directory: str) -> list[int]:
    out = []
    for name in os.listdir(directory):
        if name.startswith(WAL_PREFIX) and name[len(WAL_PREFIX):].isdigit():
            out.append(int(name[len(WAL_PREFIX):]))
    return out


def _remove_wals_before(directory: str, gen: int) -> None:
    for g in _wal_gens(directory):
        if g < gen:
            os.unlink(os.path.join(directory, wal_name(g)))


# ---------------------------------------------------------------- file primitives
def write_snapshot(directory: str, image: bytes) -> None:
    """snapshot.tmp, fsync, rename over snapshot, fsync the directory (blocking)."""
    tmp = os.path.join(directory, SNAPSHOT_TMP)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        _write_all(fd, image)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, os.path.join(directory, SNAPSHOT))
    _fsync_dir(directory)


def _create_wal(path: str, sync: bool = False) -> int:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    _write_all(fd, WAL_MAGIC)
    if sync:
        os.fsync(fd)
    return fd


def _open_append(path: str) -> int:
    return os.open(path, os.O_WRONLY | os.O_APPEND)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _read(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _truncate(path: str, size: int) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
    finally:
        os.close(fd)


def _fdatasync(fd: int) -> None:
    getattr(os, "fdatasync", os.fsync)(fd)


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
