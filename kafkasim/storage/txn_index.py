"""A segment's transaction index: the aborted transactions whose ABORT marker is in the segment,
byte for byte as Kafka writes them (org.apache.kafka.storage.internals.log.TransactionIndex and
AbortedTxn).

    <20-digit base offset>.txnindex   AbortedTxn entries back to back, 34 bytes each, big-endian

    offset  size  field
         0     2  version           int16   = 0
         2     8  producerId        int64
        10     8  firstOffset       int64   the transaction's first data offset (any segment)
        18     8  lastOffset        int64   the offset of its ABORT marker (in this segment)
        26     8  lastStableOffset  int64   the LSO once the marker was written: the first offset
                                            of the next ongoing transaction of another producer,
                                            else lastOffset + 1

Entries are appended in marker order, so lastOffset strictly increases. The file is created on
the first append only (Kafka: "the file is not created until we need it"); it is not
preallocated, so its length is always a whole number of entries unless a crash tore the last
one (a torn tail is not read: an entry is read only when 34 bytes are there).

A READ_COMMITTED fetch of [fetchOffset, upperBound) collects the entries with lastOffset >=
fetchOffset and firstOffset < upperBound, segment after segment, and stops in the first segment
holding an entry whose lastStableOffset >= upperBound (every transaction aborted later started
at or after that entry's LSO, so none can overlap the fetch).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from kafkasim.runtime.api import FileHandle, FileSystem
from kafkasim.storage.index import CorruptIndexError

TXN_INDEX_SUFFIX = ".txnindex"
ABORTED_TXN_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


class TxnIndexError(Exception):
    """An append that does not move the index forward, or an entry of an unknown version."""


@dataclass(init=False, unsafe_hash=True)
class AbortedTxn:
    producer_id: Final[int]
    first_offset: Final[int]
    last_offset: Final[int]
    last_stable_offset: Final[int]
    version: Final[int]

    # Written out (init=False; its defaults are the only ones) so that mypyc compiles it: a
    # dataclass-made __init__ runs interpreted.
    def __init__(self, producer_id: int, first_offset: int, last_offset: int, last_stable_offset: int,
                 version: int = ABORTED_TXN_VERSION) -> None:
        self.producer_id = producer_id
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.last_stable_offset = last_stable_offset
        self.version = version

    def encode(self) -> bytes:
        return _ENTRY.pack(self.version, self.producer_id, self.first_offset, self.last_offset,
                           self.last_stable_offset)

    @classmethod
    def decode(cls, data: bytes | memoryview, pos: int = 0) -> AbortedTxn:
        version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
        return cls(pid, first, last, lso, version)


class TransactionIndex:
    def __init__(self, fs: FileSystem, path: str, start_offset: int) -> None:
        self.fs, self.path, self.start_offset = fs, path, start_offset
        self._file: FileHandle | None = fs.open(path, create=False) if fs.exists(path) else None
        self._last_offset: int | None = None

    @property
    def exists(self) -> bool:
        return self._file is not None

    def _channel(self) -> FileHandle:
        if self._file is None:
            self._file = self.fs.open(self.path)
        return self._file

    # ---------------------------------------------------------------- writes
    def append(self, txn: AbortedTxn) -> None:
        if self._last_offset is not None and self._last_offset >= txn.last_offset:
            raise TxnIndexError(f"The last offset of appended transactions must increase sequentially, but "
                                f"{txn.last_offset} is not greater than current last offset {self._last_offset} "
                                f"of index {self.path}")
        self._last_offset = txn.last_offset
        f = self._channel()
        f.truncate(self._whole_size(f))  # a torn entry left by a crash goes before the new one
        f.append(txn.encode())

    def reset(self) -> None:
        """Remove every entry (before a segment's recovery rebuilds them)."""
        if self._file is not None:
            self._file.truncate(0)
        self._last_offset = None

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after `offset` (and every later one)."""
        last: int | None = None
        for i, txn in enumerate(self.all_aborted_txns()):
            if txn.last_offset >= offset:
                self._channel().truncate(i * ENTRY_SIZE)
                self._last_offset = last
                return
            last = txn.last_offset

    async def flush(self) -> None:
        if self._file is not None:
            await self._file.fsync()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
        self._file = None

    def delete_if_exists(self) -> None:
        self.close()
        if self.fs.exists(self.path):
            self.fs.unlink(self.path)

    def rename_to(self, path: str) -> None:
        try:
            if self.fs.exists(self.path):
                self.fs.rename(self.path, path)
        finally:
            self.path = path

    # ---------------------------------------------------------------- reads
    @staticmethod
    def _whole_size(f: FileHandle) -> int:
        size = f.size()
        return size - size % ENTRY_SIZE

    def all_aborted_txns(self) -> list[AbortedTxn]:
        if self._file is None:
            return []
        data = self._file.read(0, self._whole_size(self._file))
        out = []
        for pos in range(0, len(data), ENTRY_SIZE):
            txn = AbortedTxn.decode(data, pos)
            if txn.version > ABORTED_TXN_VERSION:
                raise TxnIndexError(f"Unexpected aborted transaction version {txn.version} in transaction index "
                                    f"{self.path}, current version is {ABORTED_TXN_VERSION}")
            out.append(txn)
        return out

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """(the aborted transactions overlapping [fetch_offset, upper_bound_offset), whether the
        search is complete — TransactionIndex.collectAbortedTxns)."""
        found = []
        for txn in self.all_aborted_txns():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return found, True
        return found, False

    def sanity_check(self) -> None:
        for txn in self.all_aborted_txns():
            if txn.last_offset < self.start_offset:
                raise CorruptIndexError(f"Last offset of aborted transaction {txn} in index {self.path} is less "
                                        f"than start offset {self.start_offset}")
