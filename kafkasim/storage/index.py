"""A segment's sparse indexes, byte for byte as Kafka writes them (AbstractIndex, OffsetIndex,
TimeIndex in org.apache.kafka.storage.internals.log).

    <base offset>.index      OffsetIndex entry, 8 bytes, big-endian
                               0  4  relative offset  int32   offset - base offset
                               4  4  position         int32   byte position in the .log
    <base offset>.timeindex  TimeIndex entry, 12 bytes, big-endian
                               0  8  timestamp        int64   max timestamp seen up to ...
                               8  4  relative offset  int32   ... this offset (a batch's last)

An offset index entry maps the last offset of an append to the position its first batch starts
at; a time index entry (T, O) says every record after offset O has a timestamp above T, with O
the last offset of the batch that reached T. Entries are added every ``index.interval.bytes`` of
appended data (sparse), both lists strictly increase in their key.

File life cycle (as Kafka's): a new index file is preallocated to ``segment.index.bytes``
rounded down to a whole entry (sparse zeros); entries are appended in place; on roll and close
it is trimmed to ``entries * entry size``; when a segment becomes active again it is resized
back to the maximum. An existing file is taken as valid: its entry count is its length over the
entry size (so a preallocated file left by a crash counts its zero slots — recovery rebuilds
such indexes, and ``sanity_check`` / ``verify_against_log`` catch the rest).

Kafka writes entries through an mmap; here they go to an in-memory copy at once and to the file
lazily (before any fsync, trim, resize or close) — the bytes on disk at every durable point are
Kafka's. Lookups binary-search the in-memory copy (Kafka's warm-section variant returns the same
slot for a sorted index and exists only to keep mmap pages hot).
"""

from __future__ import annotations

import struct
from typing import ClassVar

from kafkasim.runtime.api import FileHandle, FileSystem

NO_TIMESTAMP = -1
INT32_MAX = 0x7FFFFFFF


class CorruptIndexError(Exception):
    """CorruptIndexException: the index fails a sanity check and must be rebuilt."""


class IndexOffsetOverflowError(Exception):
    """An offset too far from the segment's base to fit a 4-byte relative offset."""


class InvalidOffsetError(Exception):
    """InvalidOffsetException: an index entry that does not move forward."""


def round_down_to_exact_multiple(number: int, factor: int) -> int:
    return factor * (number // factor)


class AbstractIndex:
    ENTRY_SIZE: ClassVar[int] = 0
    _ENTRY: ClassVar[struct.Struct]

    def __init__(self, fs: FileSystem, path: str, base_offset: int, max_index_size: int) -> None:
        self.fs, self.path, self.base_offset = fs, path, base_offset
        self.max_index_size = max_index_size
        newly_created = not fs.exists(path)
        self.file: FileHandle = fs.open(path)
        if newly_created:
            if max_index_size < self.ENTRY_SIZE:
                raise ValueError(f"Invalid max index size: {max_index_size}")
            self.file.truncate(round_down_to_exact_multiple(max_index_size, self.ENTRY_SIZE))
        self.length = self.file.size()
        self.max_entries = self.length // self.ENTRY_SIZE
        self._entries = 0 if newly_created else self.length // self.ENTRY_SIZE
        # In-memory copy of the first `_entries` entries (None until first needed) and the
        # first entry not yet written to the file.
        self._buf: bytearray | None = bytearray() if newly_created else None
        self._unwritten = self._entries

    # ---------------------------------------------------------------- contents
    @property
    def entries(self) -> int:
        return self._entries

    def _data(self) -> bytearray:
        if self._buf is None:
            n = self._entries * self.ENTRY_SIZE
            raw = self.file.read(0, n)
            self._buf = bytearray(raw) + bytearray(n - len(raw))
        return self._buf

    def _raw_entry(self, n: int) -> tuple[int, int]:
        if self._buf is None and n == self._entries - 1:  # the last entry, without loading all
            raw = self.file.read(n * self.ENTRY_SIZE, self.ENTRY_SIZE)
            raw += bytes(self.ENTRY_SIZE - len(raw))
            return self._ENTRY.unpack(raw)
        return self._ENTRY.unpack_from(self._data(), n * self.ENTRY_SIZE)

    def is_full(self) -> bool:
        return self._entries >= self.max_entries

    def size_in_bytes(self) -> int:
        return self._entries * self.ENTRY_SIZE

    def relative_offset(self, offset: int) -> int:
        rel = offset - self.base_offset
        if rel < 0 or rel > INT32_MAX:
            raise IndexOffsetOverflowError(f"Integer overflow for offset: {offset} ({self.path})")
        return rel

    def _append_raw(self, *fields: int) -> None:
        self._data().extend(self._ENTRY.pack(*fields))
        self._entries += 1

    def load_entries(self, fields: list[int]) -> None:
        """Append many entries at once, given flat as stored (relative offsets): how recovery
        rebuilds an index. The caller guarantees they increase."""
        count = len(fields) // 2
        if not count:
            return
        if self._entries + count > self.max_entries:  # never refuse a rebuild: grow the file
            self.resize((self._entries + count + 1) * self.ENTRY_SIZE)
        fmt = self._ENTRY.format.lstrip(">")
        self._data().extend(struct.pack(">" + fmt * count, *fields))
        self._entries += count
        self._after_load()

    def _after_load(self) -> None:
        pass

    def _truncate_to_entries(self, n: int) -> None:
        if n == 0 and self._buf is None:
            self._buf = bytearray()  # dropping everything: no need to read it first
        data = self._data()
        del data[n * self.ENTRY_SIZE:]
        self._entries = n
        self._unwritten = min(self._unwritten, n)

    def _largest_lower_bound_slot(self, target: int, field: int) -> int:
        """The slot of the largest entry whose `field` (0 = key, 1 = value) is <= target, or -1."""
        lo, hi = 0, self._entries - 1
        if hi < 0 or self._raw_entry(0)[field] > target:
            return -1
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if self._raw_entry(mid)[field] > target:
                hi = mid - 1
            else:
                lo = mid
        return lo

    def all_entries(self) -> list[tuple[int, int]]:
        """Every entry as stored (relative offsets made absolute), for checks and tests."""
        data = self._data()
        return [self._absolute(*self._ENTRY.unpack_from(data, i * self.ENTRY_SIZE)) for i in range(self._entries)]

    def _absolute(self, a: int, b: int) -> tuple[int, int]:
        raise NotImplementedError

    # ---------------------------------------------------------------- the file
    def write_pending(self) -> None:
        """Put entries written only in memory into the file (Kafka's mmap has them already)."""
        if self._unwritten < self._entries:
            start = self._unwritten * self.ENTRY_SIZE
            self.file.pwrite(start, bytes(self._data()[start:self._entries * self.ENTRY_SIZE]))
            self._unwritten = self._entries

    def resize(self, new_size: int) -> bool:
        """AbstractIndex.resize: set the file length (rounded down to whole entries)."""
        rounded = round_down_to_exact_multiple(new_size, self.ENTRY_SIZE)
        if rounded == self.length:
            return False
        rounded = max(rounded, self._entries * self.ENTRY_SIZE)
        self.write_pending()
        self.file.truncate(rounded)
        self.length = rounded
        self.max_entries = rounded // self.ENTRY_SIZE
        return True

    def trim_to_valid_size(self) -> None:
        self.resize(self.ENTRY_SIZE * self._entries)

    def reset(self) -> None:
        """Remove every entry and resize to the maximum (before a rebuild)."""
        self.truncate()
        self.resize(self.max_index_size)

    def truncate(self) -> None:
        self._truncate_to_entries(0)
        self._buf = bytearray()

    async def fsync(self) -> None:
        self.write_pending()
        await self.file.fsync()

    def close(self) -> None:
        self.trim_to_valid_size()
        self.close_handler()

    def close_handler(self) -> None:
        self.file.close()

    def delete_if_exists(self) -> None:
        self.close_handler()
        if self.fs.exists(self.path):
            self.fs.unlink(self.path)

    def rename_to(self, path: str) -> None:
        self.write_pending()
        self.fs.rename(self.path, path)
        self.path = path

    def sanity_check(self) -> None:
        raise NotImplementedError


class OffsetIndex(AbstractIndex):
    ENTRY_SIZE = 8
    _ENTRY = struct.Struct(">ii")

    def __init__(self, fs: FileSystem, path: str, base_offset: int, max_index_size: int) -> None:
        super().__init__(fs, path, base_offset, max_index_size)
        self.last_offset = self._last_entry()[0]

    def _absolute(self, rel: int, pos: int) -> tuple[int, int]:
        return self.base_offset + rel, pos

    def _after_load(self) -> None:
        self.last_offset = self._last_entry()[0]

    def _last_entry(self) -> tuple[int, int]:
        if self._entries == 0:
            return self.base_offset, 0
        return self._absolute(*self._raw_entry(self._entries - 1))

    def entry(self, n: int) -> tuple[int, int]:
        if n >= self._entries:
            raise IndexError(f"Attempt to fetch the {n}th entry from index {self.path}, which has size {self._entries}")
        return self._absolute(*self._raw_entry(n))

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """(offset, position) of the largest entry <= target, or (base offset, 0)."""
        slot = self._largest_lower_bound_slot(target_offset - self.base_offset, 0)
        if slot == -1:
            return self.base_offset, 0
        return self._absolute(*self._raw_entry(slot))

    def append(self, offset: int, position: int) -> None:
        if self.is_full():
            raise IndexError(f"Attempt to append to a full index (size = {self._entries}).")
        if self._entries != 0 and offset <= self.last_offset:
            raise InvalidOffsetError(f"Attempt to append an offset {offset} to position {self._entries} no larger "
                                     f"than the last offset appended ({self.last_offset}) to {self.path}")
        self._append_raw(self.relative_offset(offset), position)
        self.last_offset = offset

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with an offset >= `offset`."""
        slot = self._largest_lower_bound_slot(offset - self.base_offset, 0)
        if slot < 0:
            n = 0
        elif self._raw_entry(slot)[0] == offset - self.base_offset:
            n = slot
        else:
            n = slot + 1
        self._truncate_to_entries(n)
        self.last_offset = self._last_entry()[0]

    def truncate(self) -> None:
        super().truncate()
        self.last_offset = self.base_offset

    def sanity_check(self) -> None:
        """OffsetIndex.sanityCheck (Kafka's exact two checks)."""
        if self._entries != 0 and self.last_offset < self.base_offset:
            raise CorruptIndexError(f"Corrupt index found, index file {self.path} has non-zero size but the last "
                                    f"offset is {self.last_offset} which is less than the base offset "
                                    f"{self.base_offset}")
        if self.length % self.ENTRY_SIZE != 0:
            raise CorruptIndexError(f"Index file {self.path} is corrupt, found {self.length} bytes which is neither "
                                    f"positive nor a multiple of {self.ENTRY_SIZE}")


class TimeIndex(AbstractIndex):
    ENTRY_SIZE = 12
    _ENTRY = struct.Struct(">qi")

    def __init__(self, fs: FileSystem, path: str, base_offset: int, max_index_size: int) -> None:
        super().__init__(fs, path, base_offset, max_index_size)
        self.last_entry = self._last_entry_from_file()

    def _absolute(self, ts: int, rel: int) -> tuple[int, int]:
        return ts, self.base_offset + rel

    def _after_load(self) -> None:
        self.last_entry = self._last_entry_from_file()

    def _last_entry_from_file(self) -> tuple[int, int]:
        if self._entries == 0:
            return NO_TIMESTAMP, self.base_offset
        return self._absolute(*self._raw_entry(self._entries - 1))

    def is_full(self) -> bool:
        # The last slot is reserved for the entry appended when the segment rolls or closes.
        return self._entries >= self.max_entries - 1

    def entry(self, n: int) -> tuple[int, int]:
        if n >= self._entries:
            raise IndexError(f"Attempt to fetch the {n}th entry from time index {self.path} "
                             f"which has size {self._entries}")
        return self._absolute(*self._raw_entry(n))

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the largest entry with timestamp <= target, or (-1, base)."""
        slot = self._largest_lower_bound_slot(target_timestamp, 0)
        if slot == -1:
            return NO_TIMESTAMP, self.base_offset
        return self._absolute(*self._raw_entry(slot))

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append (timestamp, offset) if the timestamp moves forward (TimeIndex.maybeAppend)."""
        if not skip_full_check and self.is_full():
            raise IndexError(f"Attempt to append to a full time index (size = {self._entries}).")
        last_ts, last_off = self.last_entry
        if self._entries != 0 and offset < last_off:
            raise InvalidOffsetError(f"Attempt to append an offset ({offset}) to slot {self._entries} no larger than "
                                     f"the last offset appended ({last_off}) to {self.path}")
        if self._entries != 0 and timestamp < last_ts:
            raise ValueError(f"Attempt to append a timestamp ({timestamp}) to slot {self._entries} no larger than "
                             f"the last timestamp appended ({last_ts}) to {self.path}")
        if timestamp > last_ts:
            if self._entries >= self.max_entries:  # only when skipping the full check
                self.resize(self.length + self.ENTRY_SIZE)
            self._append_raw(timestamp, self.relative_offset(offset))
            self.last_entry = (timestamp, offset)

    def truncate_to(self, offset: int) -> None:
        slot = self._largest_lower_bound_slot(offset - self.base_offset, 1)
        if slot < 0:
            n = 0
        elif self._raw_entry(slot)[1] == offset - self.base_offset:
            n = slot
        else:
            n = slot + 1
        self._truncate_to_entries(n)
        self.last_entry = self._last_entry_from_file()

    def truncate(self) -> None:
        super().truncate()
        self.last_entry = (NO_TIMESTAMP, self.base_offset)

    def sanity_check(self) -> None:
        """TimeIndex.sanityCheck (Kafka's exact three checks)."""
        last_ts, last_off = self.last_entry
        if self._entries != 0 and last_ts < self._raw_entry(0)[0]:
            raise CorruptIndexError(f"Corrupt time index found, time index file ({self.path}) has non-zero size but "
                                    f"the last timestamp is {last_ts} which is less than the first timestamp "
                                    f"{self._raw_entry(0)[0]}")
        if self._entries != 0 and last_off < self.base_offset:
            raise CorruptIndexError(f"Corrupt time index found, time index file ({self.path}) has non-zero size but "
                                    f"the last offset is {last_off} which is less than the first offset "
                                    f"{self.base_offset}")
        if self.length % self.ENTRY_SIZE != 0:
            raise CorruptIndexError(f"Time index file {self.path} is corrupt, found {self.length} bytes which is "
                                    f"neither positive nor a multiple of {self.ENTRY_SIZE}")
