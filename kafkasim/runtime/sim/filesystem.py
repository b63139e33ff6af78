"""SimFileSystem: one node's disk, with what survives a crash decided by a seeded choice.

State per file (`SimFile`): the bytes reads see now (`data`, `size`), the bytes that survive any
crash (`durable`, `durable_size`), and the ordered operations since the last fsync (`pending`:
writes and truncates). Files are sparse: bytes past `len(data)` up to `size` read as zeros, so
preallocating a 10 MiB index costs nothing.

Directory entries are a journal: every create / unlink / rename / mkdir / rmdir is durable only
once its parent directory is fsynced (`fsync_dir`); until then it sits in `SimDisk.journal`.
Renaming a directory moves everything under it in one entry (atomic, as rename(2) is); making it
durable commits the pending entries inside the directory first (they are in its inode).

Power loss (`SimDisk.crash`) resolves each file with pending operations by one seeded choice:

  keep_all          every pending operation reached the platter
  drop_all          none did (the file is its durable bytes)
  prefix            the first k pending operations did (k uniform in 0..n)
  torn_sector       the first j did, write j+1 is cut at a 512 B sector boundary, the rest lost
  torn_page         the same at a 4 KiB page boundary
  reorder           write-back in any order: the size is the old or the new one, and each 4 KiB
                    page touched by a pending write independently holds its new or its old bytes
  inode_first       the first k operations did, and the new size is durable but the blocks past
                    the old end are not: they read as zeros, garbage, or stale bytes of the file
                    (bytes it held durably: what the page cache never wrote is on no block)
                    (the case Kafka's recovery exists for: a valid-looking tail of junk)
  dropped_truncate  every write did, each pending truncate was dropped with probability 1/2

then a prefix of the journalled directory changes survives (k uniform in 0..n: metadata lands
in order, as a journalling file system commits it) and the rest vanish; entries under a
directory whose creation vanished vanish with it. fsynced bytes and fsynced
entries always survive. Every choice is reported through `on_event` (so it lands in the run's
trace): "disk_crash_file" and "disk_crash_entry".

Faults without a crash, switchable per disk by the harness (`SimDisk.faults`, a `DiskFaults`):

  eio_write_rate / fail_next_write()   a write or truncate fails with EIO; nothing is written
  eio_fsync_rate / fail_next_fsync()   an fsync fails with EIO and, as Linux does, the file's
                                       dirty pages are gone: reads see the durable bytes again
  capacity_bytes                       ENOSPC: a write stores what fits, then fails
  read_bitflip_rate                    a read returns one flipped bit (the platter is intact)
  fsync_ms (on SimDisk)                fsync latency range; raise it for a slow disk
  crash_modes (on SimDisk)             restrict a power loss to some crash modes
  corrupt(path, pos, bit)              flip a stored bit (latent corruption) — harness use

Every fault that fires is reported as "disk_fault". All randomness is the disk's seeded stream.
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Optional

from kafkasim.runtime.api import FileHandle, FileSystem, NodeDead
from kafkasim.runtime.rng import SeededRng
from kafkasim.runtime.sim.kernel import Owner, SimKernel

DEFAULT_FSYNC_MS = (0.2, 2.0)  # fsync latency range of a healthy disk
SECTOR_BYTES = 512
PAGE_BYTES = 4096
CRASH_MODES = ("keep_all", "drop_all", "prefix", "torn_sector", "torn_page", "reorder",
               "inode_first", "dropped_truncate")
INODE_FIRST_FILLS = ("zeros", "garbage", "stale")

# A pending operation: ("w", position, bytes) or ("t", new size, b"").
Op = tuple[str, int, bytes]
# A journalled directory change: (kind, path, file, source path for renames).
EntryOp = tuple[str, str, Optional["SimFile"], str]


def _norm(path: str) -> str:
    parts = [p for p in path.split("/") if p not in ("", ".")]
    return "/".join(parts)


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""


def _under(path: str, d: str) -> bool:
    return path.startswith(d + "/")


def _moved(path: str, src: str, dst: str) -> str:
    """`path` after renaming the directory `src` to `dst`."""
    if path == src:
        return dst
    return dst + path[len(src):] if _under(path, src) else path


def apply_ops(buf: bytearray, size: int, ops: Iterable[Op]) -> int:
    """Apply operations in order to a sparse buffer (bytes past len(buf) up to size are zeros);
    returns the new size. `buf` is modified in place."""
    for kind, pos, chunk in ops:
        if kind == "w":
            if pos > len(buf):
                buf += bytes(pos - len(buf))
            buf[pos:pos + len(chunk)] = chunk
            size = max(size, pos + len(chunk))
        else:
            if pos < len(buf):
                del buf[pos:]
            size = pos
    return size


class SimFile:
    __slots__ = ("data", "size", "durable", "durable_size", "pending")

    def __init__(self) -> None:
        self.data = bytearray()
        self.size = 0
        self.durable = bytearray()
        self.durable_size = 0
        self.pending: list[Op] = []

    def read(self, pos: int, n: int) -> bytes:
        end = min(pos + n, self.size)
        if end <= pos:
            return b""
        # One copy through a view (a bytearray slice is a copy, and bytes() of it another): the
        # log walks segments in 64 KiB reads.
        out = memoryview(self.data)[pos:end].tobytes()
        if len(out) < end - pos:
            out += bytes(end - pos - len(out))
        return out

    def write(self, pos: int, chunk: bytes) -> None:
        end = pos + len(chunk)
        have = len(self.data)
        if pos == have:
            self.data += chunk
        else:
            if pos > have:
                self.data += bytes(pos - have)
            self.data[pos:end] = chunk
        if end > self.size:
            self.size = end
        self.pending.append(("w", pos, chunk))

    def truncate(self, size: int) -> None:
        if size < len(self.data):
            del self.data[size:]
        self.size = size
        self.pending.append(("t", size, b""))

    def sync(self) -> None:
        self.durable_size = apply_ops(self.durable, self.durable_size, self.pending)
        self.pending.clear()

    def drop_dirty(self) -> None:
        """Forget every unsynced operation (a failed fsync): reads see the durable bytes."""
        self.data = bytearray(self.durable)
        self.size = self.durable_size
        self.pending.clear()

    def settle(self, buf: bytearray, size: int) -> None:
        """After a crash: this is now both what reads see and what is durable."""
        if len(buf) > size:
            del buf[size:]
        self.durable, self.durable_size = buf, size
        self.data, self.size = bytearray(buf), size
        self.pending.clear()


@dataclass
class DiskFaults:
    """Faults a disk shows without a crash; the harness switches them per disk."""

    eio_write_rate: float = 0.0
    eio_fsync_rate: float = 0.0
    read_bitflip_rate: float = 0.0
    capacity_bytes: int | None = None
    fail_next_writes: int = 0
    fail_next_fsyncs: int = 0

    @property
    def eio_rate(self) -> float:
        return max(self.eio_write_rate, self.eio_fsync_rate)

    @eio_rate.setter
    def eio_rate(self, rate: float) -> None:
        self.eio_write_rate = self.eio_fsync_rate = rate


class SimDisk:
    """The platter: outlives node incarnations."""

    def __init__(self, name: str, rng: SeededRng, kernel: SimKernel) -> None:
        self.name = name
        self.rng = rng
        self.kernel = kernel
        self.files: dict[str, SimFile] = {}
        self.dirs: set[str] = {""}
        # Directory entries as the platter knows them, and the changes not yet made durable.
        self.durable_files: dict[str, SimFile] = {}
        self.durable_dirs: set[str] = {""}
        self.journal: list[EntryOp] = []
        self.fsync_ms: tuple[float, float] = DEFAULT_FSYNC_MS
        self.faults = DiskFaults()
        # Restrict a power loss to these crash modes (None: all); a harness / test knob.
        self.crash_modes: tuple[str, ...] | None = None
        self.on_event: Callable[[str, dict[str, Any]], None] = lambda ev, f: None

    # ---------------------------------------------------------------- fault control
    @property
    def capacity_bytes(self) -> int | None:
        return self.faults.capacity_bytes

    @capacity_bytes.setter
    def capacity_bytes(self, value: int | None) -> None:
        self.faults.capacity_bytes = value

    @property
    def read_bitflip_rate(self) -> float:
        return self.faults.read_bitflip_rate

    @read_bitflip_rate.setter
    def read_bitflip_rate(self, rate: float) -> None:
        self.faults.read_bitflip_rate = rate

    def used_bytes(self) -> int:
        """Materialized bytes of every file (a file reachable under two names counts once)."""
        return sum(len(g.data) for g in {id(g): g for g in self.files.values()}.values())

    def clear_faults(self) -> None:
        """A healthy disk again: no EIO, no capacity limit, no bit flips, normal fsync latency."""
        self.faults = DiskFaults()
        self.fsync_ms = DEFAULT_FSYNC_MS
        self.on_event("disk_faults_cleared", {"disk": self.name})

    def corrupt_random(self, rng: SeededRng, bits: int, suffix: str = ".log") -> None:
        """Latent corruption: flip `bits` stored bits at random places of the files named
        *suffix (chosen in path order from `rng`, so the choice is a function of the seed)."""
        paths = sorted(p for p, f in self.files.items() if p.endswith(suffix) and f.size > 0)
        for _ in range(bits if paths else 0):
            path = rng.choice(paths)
            self.corrupt(path, rng.randint(0, self.files[path].size - 1), rng.randint(0, 7))

    def fail_next_write(self, n: int = 1) -> None:
        self.faults.fail_next_writes += n

    def fail_next_fsync(self, n: int = 1) -> None:
        self.faults.fail_next_fsyncs += n

    def corrupt(self, path: str, pos: int, bit: int = 0) -> None:
        """Flip one stored bit, durably: latent corruption a later read will see."""
        f = self.files[_norm(path)]
        for buf, size in ((f.data, f.size), (f.durable, f.durable_size)):
            if pos < size:
                if pos >= len(buf):
                    buf += bytes(pos + 1 - len(buf))
                buf[pos] ^= 1 << bit
        self._fault(path, "corrupt", "bitflip", pos=pos, bit=bit)

    def _fault(self, path: str, op: str, fault: str, **extra: Any) -> None:
        ev = {"disk": self.name, "path": path, "op": op, "fault": fault}
        ev.update(extra)
        self.on_event("disk_fault", ev)

    def _fires(self, rate: float) -> bool:
        return rate > 0 and self.rng.random() < rate

    def check_write(self, path: str, op: str) -> None:
        """EIO before a write or truncate, if the harness asked for one."""
        fl = self.faults
        if fl.fail_next_writes > 0 or self._fires(fl.eio_write_rate):
            fl.fail_next_writes = max(0, fl.fail_next_writes - 1)
            self._fault(path, op, "eio")
            raise OSError(errno.EIO, "Input/output error (simulated)", path)

    def space_for(self, path: str, f: SimFile, pos: int, n: int) -> int:
        """How many of n bytes written at pos fit under capacity_bytes (materialized bytes)."""
        cap = self.faults.capacity_bytes
        if cap is None:
            return n
        used = self.used_bytes()
        growth = max(0, pos + n - len(f.data))
        free = cap - used
        if growth <= free:
            return n
        fits = max(0, min(n, len(f.data) + max(0, free) - pos))
        self._fault(path, "write", "enospc", requested=n, written=fits)
        return fits

    def check_fsync(self, path: str, f: SimFile | None) -> None:
        fl = self.faults
        if fl.fail_next_fsyncs > 0 or self._fires(fl.eio_fsync_rate):
            fl.fail_next_fsyncs = max(0, fl.fail_next_fsyncs - 1)
            dropped = 0
            if f is not None:
                dropped = len(f.pending)
                f.drop_dirty()
            self._fault(path, "fsync", "eio", dropped_ops=dropped)
            raise OSError(errno.EIO, "Input/output error (simulated)", path)

    def maybe_flip(self, path: str, pos: int, data: bytes) -> bytes:
        if not data or not self._fires(self.faults.read_bitflip_rate):
            return data
        i = self.rng.randint(0, len(data) - 1)
        bit = self.rng.randint(0, 7)
        out = bytearray(data)
        out[i] ^= 1 << bit
        self._fault(path, "read", "bitflip", pos=pos + i, bit=bit)
        return bytes(out)

    # ---------------------------------------------------------------- directory journal
    def log_entry(self, kind: str, path: str, f: SimFile | None = None, src: str = "") -> None:
        self.journal.append((kind, path, f, src))

    def make_entries_durable(self, d: str) -> None:
        keep: list[EntryOp] = []
        for op in self.journal:
            kind, path, f, src = op
            if _parent(path) == d or (kind == "rename" and _parent(src) == d):
                if kind == "rename" and f is None:  # a directory: its own pending entries first
                    inside = [e for e in keep if _under(e[1], src) or _under(e[3], src)]
                    for e in inside:
                        self._apply_entry(e)
                    keep = [e for e in keep if not any(e is i for i in inside)]
                self._apply_entry(op)
            else:
                keep.append(op)
        self.journal = keep

    def _apply_entry(self, op: EntryOp) -> None:
        kind, path, f, src = op
        if kind == "create" and f is not None:
            self.durable_files[path] = f
        elif kind == "unlink":
            self.durable_files.pop(path, None)
        elif kind == "rename" and f is not None:
            if self.durable_files.get(src) is f:
                del self.durable_files[src]
            self.durable_files[path] = f
        elif kind == "rename":  # a directory and everything under it
            if src in self.durable_dirs:
                self.durable_dirs = {_moved(p, src, path) for p in self.durable_dirs}
                self.durable_files = {_moved(p, src, path): g for p, g in self.durable_files.items()}
        elif kind == "mkdir":
            self.durable_dirs.add(path)
        elif kind == "rmdir":
            self.durable_dirs.discard(path)

    # ---------------------------------------------------------------- power loss
    def crash(self) -> None:
        """Resolve everything not yet durable, as a power loss would."""
        seen: dict[int, tuple[str, SimFile]] = {}
        names = sorted(set(self.files) | set(self.durable_files))
        for path in names:
            for f in (self.files.get(path), self.durable_files.get(path)):
                if f is not None and id(f) not in seen:
                    seen[id(f)] = (path, f)
        for _op in self.journal:
            if _op[2] is not None and id(_op[2]) not in seen:
                seen[id(_op[2])] = (_op[1], _op[2])
        for path, f in sorted(seen.values(), key=lambda pf: pf[0]):
            if f.pending:
                self._resolve_file(path, f)
        self._resolve_entries()

    def _resolve_file(self, path: str, f: SimFile) -> None:
        ops = f.pending
        n = len(ops)
        writes = [i for i, op in enumerate(ops) if op[0] == "w" and op[2]]
        modes = ["keep_all", "drop_all", "prefix"]
        if writes:
            modes += ["torn_sector", "torn_page", "reorder", "inode_first"]
        if any(op[0] == "t" for op in ops):
            modes.append("dropped_truncate")
        if self.crash_modes is not None:
            modes = [m for m in modes if m in self.crash_modes] or ["drop_all"]
        mode = self.rng.choice(modes)
        ev: dict[str, Any] = {"disk": self.name, "path": path, "mode": mode, "pending_ops": n}
        buf = bytearray(f.durable)
        size = f.durable_size
        if mode == "keep_all":
            size = apply_ops(buf, size, ops)
            ev["kept_ops"] = n
        elif mode == "drop_all":
            ev["kept_ops"] = 0
        elif mode == "prefix":
            k = self.rng.randint(0, n)
            size = apply_ops(buf, size, ops[:k])
            ev["kept_ops"] = k
        elif mode in ("torn_sector", "torn_page"):
            size = self._torn(buf, size, ops, writes, SECTOR_BYTES if mode == "torn_sector" else PAGE_BYTES, ev)
        elif mode == "reorder":
            buf, size = self._reorder(f, ev)
        elif mode == "inode_first":
            size = self._inode_first(buf, size, f, ev)
        else:
            kept = [op for op in ops if op[0] == "w" or self.rng.random() < 0.5]
            ev["kept_ops"] = len(kept)
            ev["dropped_truncates"] = n - len(kept)
            size = apply_ops(buf, size, kept)
        ev["size"] = size
        self.on_event("disk_crash_file", ev)
        f.settle(buf, size)

    def _torn(self, buf: bytearray, size: int, ops: list[Op], writes: list[int], unit: int,
              ev: dict[str, Any]) -> int:
        j = self.rng.choice(writes)
        size = apply_ops(buf, size, ops[:j])
        _k, pos, chunk = ops[j]
        first = (pos // unit + 1) * unit  # aligned boundaries strictly inside the write
        count = max(0, (pos + len(chunk) - 1 - first) // unit + 1) if first < pos + len(chunk) else 0
        cut = first + unit * self.rng.randint(0, count - 1) if count else pos
        if cut > pos:
            size = apply_ops(buf, size, [("w", pos, chunk[:cut - pos])])
        ev.update(kept_ops=j, torn_op=j, torn_at=cut, granularity=unit)
        return size

    def _reorder(self, f: SimFile, ev: dict[str, Any]) -> tuple[bytearray, int]:
        size = f.size if self.rng.random() < 0.5 else f.durable_size
        pages = sorted({p for kind, pos, chunk in f.pending if kind == "w" and chunk
                        for p in range(pos // PAGE_BYTES, (pos + len(chunk) - 1) // PAGE_BYTES + 1)})
        out = bytearray(f.durable[:size])
        kept = 0
        for p in pages:
            if self.rng.random() >= 0.5:
                continue
            kept += 1
            lo, hi = p * PAGE_BYTES, min((p + 1) * PAGE_BYTES, size)
            if lo >= hi:
                continue
            page = f.read(lo, hi - lo)  # the new bytes (zeros past the new size)
            if len(out) < hi:
                out += bytes(hi - len(out))
            out[lo:hi] = page + bytes(hi - lo - len(page))
        ev.update(pages_dirty=len(pages), pages_kept=kept)
        return out, size

    def _inode_first(self, buf: bytearray, size: int, f: SimFile, ev: dict[str, Any]) -> int:
        k = self.rng.randint(0, len(f.pending))
        size = apply_ops(buf, size, f.pending[:k])
        fill = self.rng.choice(list(INODE_FIRST_FILLS))
        new_size = f.size
        if new_size <= size:
            if len(buf) > new_size:
                del buf[new_size:]
            ev.update(kept_ops=k, fill=fill, filled_bytes=0)
            return new_size
        n = new_size - size
        if len(buf) < size:
            buf += bytes(size - len(buf))
        if fill == "garbage":
            buf += self.rng.randbytes(n)
        elif fill == "stale":
            # Blocks that once held this file's own earlier bytes: well-formed but out of place.
            # Earlier means durable: bytes still only in the page cache never reached a block
            # (copying them made valid batches of the file's future, e.g. a whole later run of
            # offsets, appear right after the kept prefix: txn-coordinator-failover seed 275).
            src = bytes(f.durable[:f.durable_size]) or b"\x00"
            start = self.rng.randint(0, max(0, len(src) - 1)) // SECTOR_BYTES * SECTOR_BYTES
            src = src[start:] + src[:start]
            buf += (src * (n // len(src) + 1))[:n]
        ev.update(kept_ops=k, fill=fill, filled_bytes=n)
        return new_size

    def _resolve_entries(self) -> None:
        """Of the journalled directory changes a prefix survives (metadata reaches the platter in
        order, as a journalling file system commits it): k uniform in 0..n, the rest vanish."""
        keep = self.rng.randint(0, len(self.journal)) if self.journal else 0
        for i, op in enumerate(self.journal):
            kind, path, _f, src = op
            survives = i < keep
            ev: dict[str, Any] = {"disk": self.name, "path": path, "change": kind, "survives": survives}
            if kind == "rename":
                ev["src"] = src
            self.on_event("disk_crash_entry", ev)
            if survives:
                self._apply_entry(op)
        self.journal = []
        dirs = {""}
        for d in sorted(self.durable_dirs, key=lambda p: p.count("/")):
            if d and _parent(d) in dirs:
                dirs.add(d)
        self.durable_dirs = dirs
        self.durable_files = {p: f for p, f in sorted(self.durable_files.items()) if _parent(p) in dirs}
        self.files = dict(self.durable_files)
        self.dirs = set(dirs)


class SimFileHandle(FileHandle):
    def __init__(self, fs: SimFileSystem, path: str, f: SimFile) -> None:
        self.fs, self.path, self._f = fs, path, f
        self._closed = False

    def _live(self) -> SimFile:
        self.fs._check()
        if self._closed:
            raise ValueError(f"I/O on closed file {self.path}")
        return self._f

    def _write(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        f = self._live()
        disk = self.fs.disk
        disk.check_write(self.path, "write")
        chunk = bytes(data)
        fits = disk.space_for(self.path, f, pos, len(chunk))
        if fits < len(chunk):
            if fits > 0:
                f.write(pos, chunk[:fits])
            raise OSError(errno.ENOSPC, "No space left on device (simulated)", self.path)
        if len(chunk) > 1 and self.fs.buggify("simfs.write.split"):
            # The kernel may write a large write(2) out in pieces: a power loss can keep the first.
            f.write(pos, chunk[:len(chunk) // 2])
            pos, chunk = pos + len(chunk) // 2, chunk[len(chunk) // 2:]
        f.write(pos, chunk)

    def append(self, data: bytes | bytearray | memoryview) -> int:
        pos = self._live().size
        self._write(pos, data)
        return pos

    def pwrite(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        self._write(pos, data)

    def read(self, pos: int, n: int) -> bytes:
        # _live() and maybe_flip's rate test inlined: the log reads ~10 times per fetch.
        if self._closed or not self.fs.owner.alive:
            self._live()  # raises as it would have
        data = self._f.read(pos, n)
        disk = self.fs.disk
        if not data or not disk.faults.read_bitflip_rate > 0:
            return data  # no bit flip possible: maybe_flip would return it without a draw
        return disk.maybe_flip(self.path, pos, data)

    def truncate(self, size: int) -> None:
        f = self._live()
        self.fs.disk.check_write(self.path, "truncate")
        f.truncate(size)

    def size(self) -> int:
        if self._closed or not self.fs.owner.alive:
            self._live()  # raises as it would have
        return self._f.size

    async def fsync(self) -> None:
        f = self._live()
        await self.fs._fsync_delay()
        self.fs._check()
        self.fs.disk.check_fsync(self.path, f)
        f.sync()

    def close(self) -> None:
        self._closed = True


class SimFileSystem(FileSystem):
    """A node incarnation's view of its SimDisk; refuses every call once the node is dead."""

    def __init__(self, disk: SimDisk, owner: Owner, buggify: Callable[[str], bool] = lambda name: False) -> None:
        self.disk = disk
        self.owner = owner
        self.buggify = buggify  # the node runtime's BUGGIFY (runtime/buggify.py)

    def _check(self) -> None:
        if not self.owner.alive:
            raise NodeDead(self.owner.name)

    async def _fsync_delay(self) -> None:
        lo, hi = self.disk.fsync_ms
        await self.disk.kernel.sleep(lo + (hi - lo) * self.disk.rng.random())
        if self.buggify("simfs.fsync.slow"):  # a device's cache flush stalls now and then (tens of ms)
            await self.disk.kernel.sleep(20 + 10 * hi)

    def open(self, path: str, create: bool = True) -> FileHandle:
        self._check()
        p = _norm(path)
        f: SimFile | None = self.disk.files.get(p)
        if f is None:
            if not create:
                raise FileNotFoundError(2, "No such file", path)
            if _parent(p) not in self.disk.dirs:
                raise FileNotFoundError(2, "No such directory", _parent(p))
            f = self.disk.files[p] = SimFile()
            self.disk.log_entry("create", p, f)
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
        created: list[str] = []
        while p and p not in self.disk.dirs:
            if p in self.disk.files:
                raise FileExistsError(17, "File exists", p)
            created.append(p)
            p = _parent(p)
        for d in reversed(created):
            self.disk.dirs.add(d)
            self.disk.log_entry("mkdir", d)

    def rename(self, src: str, dst: str) -> None:
        self._check()
        s, d = _norm(src), _norm(dst)
        if s in self.disk.dirs and s:
            self._rename_dir(s, d)
            return
        if s not in self.disk.files:
            raise FileNotFoundError(2, "No such file", src)
        if _parent(d) not in self.disk.dirs:
            raise FileNotFoundError(2, "No such directory", _parent(d))
        f = self.disk.files.pop(s)
        self.disk.files[d] = f
        self.disk.log_entry("rename", d, f, s)

    def _rename_dir(self, s: str, d: str) -> None:
        if d in self.disk.dirs or d in self.disk.files:
            raise FileExistsError(17, "File exists", d)
        if _parent(d) not in self.disk.dirs:
            raise FileNotFoundError(2, "No such directory", _parent(d))
        self.disk.dirs = {_moved(p, s, d) for p in self.disk.dirs}
        self.disk.files = {_moved(p, s, d): f for p, f in self.disk.files.items()}
        self.disk.log_entry("rename", d, None, s)

    def unlink(self, path: str) -> None:
        self._check()
        p = _norm(path)
        f = self.disk.files.pop(p, None)
        if f is None:
            raise FileNotFoundError(2, "No such file", path)
        self.disk.log_entry("unlink", p, f)

    def rmdir(self, path: str) -> None:
        self._check()
        p = _norm(path)
        if self.listdir(p):
            raise OSError(39, "Directory not empty", path)
        self.disk.dirs.discard(p)
        self.disk.log_entry("rmdir", p)

    async def fsync_dir(self, path: str) -> None:
        self._check()
        d = _norm(path)
        if d not in self.disk.dirs:
            raise FileNotFoundError(2, "No such directory", path)
        await self._fsync_delay()
        self._check()
        self.disk.check_fsync(d, None)
        self.disk.make_entries_durable(d)
