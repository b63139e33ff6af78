"""FileRecords: record batches that live in segment files, handed to the network as file regions
so a fetch response can go from the page cache to the socket with os.sendfile (Kafka's
FileRecords.writeTo / the sendfile path of its network layer), without passing through Python.

A FileRecords is bytes-like enough for the protocol codec: it has a length (the codec writes the
records length prefix from it) and is appended to the response's parts as-is; the socket server
sends its regions with Stream.sendfile. `bytes(fr)` reads it (for the simulated world's clients,
tests and anything that must look inside)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from kafkasim.runtime.api import FileHandle


@dataclass(init=False, unsafe_hash=True)
class FileRegion:
    fh: Final[FileHandle]
    position: Final[int]
    size: Final[int]

    # Written out (init=False; its defaults are the only ones) so that mypyc compiles it: a
    # dataclass-made __init__ runs interpreted.
    def __init__(self, fh: FileHandle, position: int, size: int) -> None:
        self.fh = fh
        self.position = position
        self.size = size


class FileRecords:
    __slots__ = ("regions", "_size")

    def __init__(self, regions: list[FileRegion]) -> None:
        if not regions:  # a caught-up fetch's read, once per partition per fetch: skip the walks
            self.regions, self._size = [], 0
            return
        self.regions = [r for r in regions if r.size > 0]
        self._size = sum(r.size for r in self.regions)

    def __len__(self) -> int:
        return self._size

    def __bytes__(self) -> bytes:
        return b"".join(r.fh.read(r.position, r.size) for r in self.regions)

    def __bool__(self) -> bool:
        return self._size > 0
