"""SimFileSystem: one node's disk, with what survives a crash decided by a seeded choice.

State per file: `durable` (bytes that survive any crash) and `data` (what reads see now), plus
the ordered list of operations since the last fsync (`pending`: writes and truncates). Per
directory entry: whether its existence (create / rename / unlink) has been made durable by an
fsync of the parent directory.

On crash each file with pending operations resolves, by the disk's RNG, to one of:
  keep_all   every pending operation reached the platter
  drop_all   none did (the file reverts to its durable bytes)
  prefix     the first k pending operations did (k uniform in 0..n)
and each directory change not yet made durable by fsync_dir survives or vanishes by a coin
flip. Every choice is reported through `on_event` (so it lands in the run's trace).
The torn-sector, reorder and inode-first modes are added on this same structure by the storage
work; the interface below does not change for them.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from kafkasim.runtime.api import FileHandle, FileSystem, NodeDead
from kafkasim.runtime.rng import SeededRng
from kafkasim.runtime.sim.kernel import Owner, SimKernel

CRASH_MODES = ("keep_all", "drop_all", "prefix")


def _norm(path: str) -> str:
    parts = [p for p in path.split("/") if p not in ("", ".")]
    return "/".join(parts)


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""


class SimFile:
    __slots__ = ("durable", "data", "pending")

    def __init__(self) -> None:
        self.durable = b""
        self.data = bytearray()
        self.pending: list[tuple[str, int, bytes]] = []  # ("w", pos, bytes) | ("t", size, b"")

    def write(self, pos: int, chunk: bytes) -> None:
        end = pos + len(chunk)
        if pos > len(self.data):
            self.data += bytes(pos - len(self.data))
        self.data[pos:end] = chunk
        self.pending.append(("w", pos, chunk))

    def truncate(self, size: int) -> None:
        if size < len(self.data):
            del self.data[size:]
        else:
            self.data += bytes(size - len(self.data))
        self.pending.append(("t", size, b""))

    def sync(self) -> None:
        self.durable = bytes(self.data)
        self.pending.clear()

    def resolve_crash(self, keep: int) -> None:
        """Keep the first `keep` pending operations, applied over the durable bytes."""
        buf = bytearray(self.durable)
        for kind, pos, chunk in self.pending[:keep]:
            if kind == "w":
                if pos > len(buf):
                    buf += bytes(pos - len(buf))
                buf[pos:pos + len(chunk)] = chunk
            elif pos < len(buf):
                del buf[pos:]
            else:
                buf += bytes(pos - len(buf))
        self.durable = bytes(buf)
        self.data = bytearray(buf)
        self.pending.clear()


class SimDisk:
    """The platter: outlives node incarnations."""

    def __init__(self, name: str, rng: SeededRng, kernel: SimKernel) -> None:
        self.name = name
        self.rng = rng
        self.kernel = kernel
        self.files: dict[str, SimFile] = {}
        self.dirs: set[str] = {""}
        # Directory entries as the platter knows them (what survives a crash for certain).
        self.durable_files: dict[str, SimFile] = {}
        self.durable_dirs: set[str] = {""}
        self.fsync_ms: tuple[float, float] = (0.2, 2.0)
        self.on_event: Callable[[str, dict[str, Any]], None] = lambda ev, f: None

    def crash(self) -> None:
        """Resolve everything not yet durable, as a power loss would."""
        for path in sorted(self.files):
            f = self.files[path]
            if not f.pending:
                continue
            mode = self.rng.choice(list(CRASH_MODES))
            n = len(f.pending)
            keep = {"keep_all": n, "drop_all": 0}.get(mode)
            if keep is None:
                keep = self.rng.randint(0, n)
            self.on_event("disk_crash_file", {"disk": self.name, "path": path, "mode": mode,
                                              "pending_ops": n, "kept_ops": keep})
            f.resolve_crash(keep)
        self._resolve_entries()

    def _resolve_entries(self) -> None:
        """Directory changes not fsynced survive or vanish, each by a coin flip."""
        files: dict[str, SimFile] = {}
        for path in sorted(set(self.files) | set(self.durable_files)):
            live, durable = self.files.get(path), self.durable_files.get(path)
            if live is durable:
                if live is not None:
                    files[path] = live
                continue
            survives = self.rng.random() < 0.5
            self.on_event("disk_crash_entry", {"disk": self.name, "path": path,
                                               "change": "create" if durable is None else ("unlink" if live is None else "replace"),
                                               "survives": survives})
            chosen = live if survives else durable
            if chosen is not None:
                files[path] = chosen
        self.files = files
        self.durable_files = dict(files)
        self.dirs = self.dirs | self.durable_dirs | {_parent(p) for p in files}
        self.durable_dirs = set(self.dirs)


class SimFileHandle(FileHandle):
    def __init__(self, fs: "SimFileSystem", path: str, f: SimFile) -> None:
        self.fs, self.path, self._f = fs, path, f
        self._closed = False

    def _live(self) -> SimFile:
        self.fs._check()
        if self._closed:
            raise ValueError(f"I/O on closed file {self.path}")
        return self._f

    def append(self, data: bytes | bytearray | memoryview) -> int:
        f = self._live()
        pos = len(f.data)
        f.write(pos, bytes(data))
        return pos

    def pwrite(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        self._live().write(pos, bytes(data))

    def read(self, pos: int, n: int) -> bytes:
        return bytes(self._live().data[pos:pos + n])

    def truncate(self, size: int) -> None:
        self._live().truncate(size)

    def size(self) -> int:
        return len(self._live().data)

    async def fsync(self) -> None:
        f = self._live()
        await self.fs._fsync_delay()
        self.fs._check()
        f.sync()

    def close(self) -> None:
        self._closed = True


class SimFileSystem(FileSystem):
    """A node incarnation's view of its SimDisk; refuses every call once the node is dead."""

    def __init__(self, disk: SimDisk, owner: Owner) -> None:
        self.disk = disk
        self.owner = owner

    def _check(self) -> None:
        if not self.owner.alive:
            raise NodeDead(self.owner.name)

    async def _fsync_delay(self) -> None:
        lo, hi = self.disk.fsync_ms
        await self.disk.kernel.sleep(lo + (hi - lo) * self.disk.rng.random())

    def open(self, path: str, create: bool = True) -> FileHandle:
        self._check()
        p = _norm(path)
        f: Optional[SimFile] = self.disk.files.get(p)
        if f is None:
            if not create:
                raise FileNotFoundError(2, "No such file", path)
            if _parent(p) not in self.disk.dirs:
                raise FileNotFoundError(2, "No such directory", _parent(p))
            f = self.disk.files[p] = SimFile()
        return SimFileHandle(self, p, f)

    def exists(self, path: str) -> bool:
        self._check()
        p = _norm(path)
        return p in self.disk.files or p in self.disk.dirs

    def listdir(self, path: str) -> list[str]:
        self._check()
        p = _norm(path)
        if p not in self.disk.dirs:
            raise FileNotFoundError(2, "No such directory", path)
        prefix = p + "/" if p else ""
        names = {q[len(prefix):].split("/", 1)[0] for q in list(self.disk.files) + list(self.disk.dirs)
                 if q.startswith(prefix) and q != p}
        return sorted(n for n in names if n)

    def mkdir(self, path: str) -> None:
        self._check()
        p = _norm(path)
        while p and p not in self.disk.dirs:
            if p in self.disk.files:
                raise FileExistsError(17, "File exists", p)
            self.disk.dirs.add(p)
            p = _parent(p)

    def rename(self, src: str, dst: str) -> None:
        self._check()
        s, d = _norm(src), _norm(dst)
        if s not in self.disk.files:
            raise FileNotFoundError(2, "No such file", src)
        if _parent(d) not in self.disk.dirs:
            raise FileNotFoundError(2, "No such directory", _parent(d))
        self.disk.files[d] = self.disk.files.pop(s)

    def unlink(self, path: str) -> None:
        self._check()
        p = _norm(path)
        if self.disk.files.pop(p, None) is None:
            raise FileNotFoundError(2, "No such file", path)

    def rmdir(self, path: str) -> None:
        self._check()
        p = _norm(path)
        if self.listdir(p):
            raise OSError(39, "Directory not empty", path)
        self.disk.dirs.discard(p)

    async def fsync_dir(self, path: str) -> None:
        self._check()
        d = _norm(path)
        await self._fsync_delay()
        self._check()
        disk = self.disk
        for p in sorted(set(disk.files) | set(disk.durable_files)):
            if _parent(p) != d:
                continue
            if p in disk.files:
                disk.durable_files[p] = disk.files[p]
            else:
                disk.durable_files.pop(p, None)
        disk.durable_dirs |= {q for q in disk.dirs if _parent(q) == d or q == d}
