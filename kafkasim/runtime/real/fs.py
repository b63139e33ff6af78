"""OS files under a node's data directory. Writes go straight to the OS (pwrite); fsync and
directory fsync run in a worker thread so a slow disk does not stall the event loop.

Injected disk faults (the fault control plane's `kind = "disk"`, the knobs SimDisk has that a
real disk can be made to show): `eio_rate` — a write, truncate or fsync fails with EIO with this
probability (nothing written); `enospc` — writes fail with ENOSPC once `free_bytes` more bytes
have been written; `slow_fsync_ms` — each fsync (file or directory) takes that much longer.
"""

from __future__ import annotations

import asyncio
import errno
import os
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kafkasim.runtime.api import FileHandle, FileSystem

if TYPE_CHECKING:
    from kafkasim.runtime.real.world import RealNode


@dataclass
class DiskFaults:
    """The knobs of one node's injected disk faults; all off by default."""

    eio_rate: float = 0.0
    enospc: bool = False
    free_bytes: int = 0
    slow_fsync_ms: float = 0.0
    injected: int = 0      # how many operations a fault has failed or slowed
    rng: random.Random = field(default_factory=random.Random)

    def clear(self) -> None:
        self.eio_rate, self.enospc, self.free_bytes, self.slow_fsync_ms = 0.0, False, 0, 0.0

    def check_write(self, path: str, n: int) -> None:
        if self.eio_rate > 0 and self.rng.random() < self.eio_rate:
            self.injected += 1
            raise OSError(errno.EIO, "Input/output error (injected)", path)
        if self.enospc:
            if n > self.free_bytes:
                self.injected += 1
                raise OSError(errno.ENOSPC, "No space left on device (injected)", path)
            self.free_bytes -= n

    async def before_fsync(self, path: str) -> None:
        if self.slow_fsync_ms > 0:
            self.injected += 1
            await asyncio.sleep(self.slow_fsync_ms / 1000)
        if self.eio_rate > 0 and self.rng.random() < self.eio_rate:
            self.injected += 1
            raise OSError(errno.EIO, "Input/output error (injected)", path)


class RealFileHandle(FileHandle):
    def __init__(self, fs: RealFileSystem, path: str, fd: int) -> None:
        self._fs, self.path, self._fd = fs, path, fd
        self._fileobj: Any = None
        self._size = os.fstat(fd).st_size

    def fileno(self) -> int:
        return self._fd

    def fileobj(self) -> Any:
        """A binary file object over the same descriptor (not owning it), for loop.sendfile."""
        if self._fileobj is None:
            self._fileobj = open(self._fd, "rb", buffering=0, closefd=False)
        return self._fileobj

    def append(self, data: bytes | bytearray | memoryview) -> int:
        self._fs._node.check()
        self._fs.faults.check_write(self.path, len(data))
        pos = self._size
        self._write_all(pos, data)
        return pos

    def pwrite(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        self._fs._node.check()
        self._fs.faults.check_write(self.path, len(data))
        self._write_all(pos, data)

    def _write_all(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        while view:
            n = os.pwrite(self._fd, view, pos)
            view, pos = view[n:], pos + n
        self._size = max(self._size, pos)

    def read(self, pos: int, n: int) -> bytes:
        self._fs._node.check()
        return os.pread(self._fd, n, pos)

    def truncate(self, size: int) -> None:
        self._fs._node.check()
        self._fs.faults.check_write(self.path, 0)
        os.ftruncate(self._fd, size)
        self._size = size

    def size(self) -> int:
        return self._size

    async def fsync(self) -> None:
        self._fs._node.check()
        await self._fs.faults.before_fsync(self.path)
        await asyncio.get_running_loop().run_in_executor(None, os.fsync, self._fd)
        self._fs._node.check()

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            self._fs._open.discard(self)


class RealFileSystem(FileSystem):
    def __init__(self, root: str, node: RealNode) -> None:
        self._root = os.path.abspath(root)
        self._node = node
        self._open: set[RealFileHandle] = set()
        self.faults = DiskFaults()
        os.makedirs(self._root, exist_ok=True)

    def _p(self, path: str) -> str:
        full = os.path.normpath(os.path.join(self._root, path.lstrip("/")))
        if full != self._root and not full.startswith(self._root + os.sep):
            raise PermissionError(f"path escapes the node's disk: {path}")
        return full

    def open(self, path: str, create: bool = True) -> FileHandle:
        self._node.check()
        flags = os.O_RDWR | (os.O_CREAT if create else 0)
        fh = RealFileHandle(self, path, os.open(self._p(path), flags, 0o644))
        self._open.add(fh)
        return fh

    def exists(self, path: str) -> bool:
        self._node.check()
        return os.path.exists(self._p(path))

    def listdir(self, path: str) -> list[str]:
        self._node.check()
        return sorted(os.listdir(self._p(path)))

    def mkdir(self, path: str) -> None:
        self._node.check()
        os.makedirs(self._p(path), exist_ok=True)

    def rename(self, src: str, dst: str) -> None:
        self._node.check()
        os.replace(self._p(src), self._p(dst))

    def unlink(self, path: str) -> None:
        self._node.check()
        os.unlink(self._p(path))

    def rmdir(self, path: str) -> None:
        self._node.check()
        os.rmdir(self._p(path))

    async def fsync_dir(self, path: str) -> None:
        self._node.check()
        await self.faults.before_fsync(path)
        full = self._p(path)

        def sync() -> None:
            fd = os.open(full, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

        await asyncio.get_running_loop().run_in_executor(None, sync)

    def store_of(self, path: str) -> tuple[str, int, int]:
        """Java's File.getAbsolutePath and FileStore.getTotalSpace / getUsableSpace (statvfs:
        f_blocks and f_bavail in f_frsize units)."""
        self._node.check()
        full = self._p(path)
        st = os.statvfs(full)
        return full, st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize

    def kill(self) -> None:
        for fh in list(self._open):
            fh.close()
