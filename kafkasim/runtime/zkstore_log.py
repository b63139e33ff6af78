"""The embedded coordination store on disk: a write-ahead log of znode operations and a
snapshot, as bytes. Pure (no I/O): `runtime/real/zk_durable.py` writes and reads the files.

Like ZooKeeper's own dataDir (a fuzzy snapshot plus txn logs replayed onto it), the store is
the last snapshot with every later WAL record replayed, in order, onto a ZkStore. The store's
semantics are deterministic (no clock, no randomness), so replaying the same successful
operations onto the same state gives the same znodes, zxids, versions, cversions and sequential
names. Records carry resolved values (a sequential create's final path), so a replay never
depends on anything but the record. Failed operations change nothing and are not logged.

Directory (`<log-dir>/zookeeper/` for `kafkasim serve`):

    snapshot                 the last complete snapshot (written as snapshot.tmp, fsynced,
                             renamed, the directory fsynced: a crash leaves the old or the new)
    snapshot.tmp             a snapshot a crash interrupted: removed at open
    wal.<gen:020d>           WAL generation `gen`; the snapshot names the first generation
                             not in it (`next_gen`); recovery replays every generation >= it

All integers big-endian. `str` = u16 byte length + UTF-8; `bytes` = i32 length + bytes.

WAL file:
    magic    8 bytes  b"KZKWAL01"
    record*  frames, each:
        length   u32     length of `body`
        crc      u32     zlib CRC-32 of the 4 length bytes followed by `body`
        body     length bytes:
            kind     u8   1 OPEN_SESSION, 2 CLOSE_SESSION, 3 CREATE, 4 SET, 5 DELETE, 6 MULTI
            sid      i64  the session (OPEN/CLOSE_SESSION, CREATE, MULTI; 0 otherwise)
            then by kind:
              OPEN_SESSION, CLOSE_SESSION: nothing
              CREATE:  op     (see below; kind 1)
              SET:     op     (kind 2)
              DELETE:  op     (kind 3; flag bit 2 = recursive)
              MULTI:   count u16, then `count` ops
        op:  kind u8 (1 create, 2 set, 3 delete, 4 check), flags u8 (bit 0 ephemeral,
             bit 1 makepath, bit 2 recursive), version i32, path str, data bytes
    A record is acknowledged only once it and every record before it are fsynced, so after a
    crash the first frame that is short or fails its CRC (a torn tail) and everything after it
    were never acknowledged: recovery drops them and truncates the file there.

Snapshot file:
    magic         8 bytes  b"KZKSNP01"
    next_gen      u64      first WAL generation not contained in this snapshot
    zxid          i64
    next_session  i64      the last session id handed out (new sessions continue after it)
    count         u32      znodes other than "/", then `count` of:
        path str, czxid i64, mzxid i64, version i32, cversion i32, ephemeral_owner i64, data bytes
    root_cversion i32      the cversion of "/"
    crc           u32      zlib CRC-32 of every byte before it
    Znodes are written sorted by path, so a parent always comes before its children.
    Watches are not persisted (as ZooKeeper: they belong to sessions of the dead process).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from kafkasim.runtime.api import ZOp
from kafkasim.runtime.zkstore import ZkStore, ZNode

WAL_MAGIC = b"KZKWAL01"
SNAPSHOT_MAGIC = b"KZKSNP01"
OPEN_SESSION, CLOSE_SESSION, CREATE, SET, DELETE, MULTI = 1, 2, 3, 4, 5, 6
_OP_KINDS = {"create": 1, "set": 2, "delete": 3, "check": 4}
_OP_NAMES = {v: k for k, v in _OP_KINDS.items()}
_EPHEMERAL, _MAKEPATH, _RECURSIVE = 1, 2, 4
_FRAME = struct.Struct(">II")
_HEAD = struct.Struct(">Bq")
_OP = struct.Struct(">BBi")
_NODE = struct.Struct(">qqiiq")


class ZkStoreCorruptError(Exception):
    """The store's files are not what this module writes (not a torn tail: that is dropped)."""


@dataclass(frozen=True)
class LoggedOp:
    """One op as logged: a create's path is final (sequential resolved)."""

    kind: str  # "create" | "set" | "delete" | "check"
    path: str
    data: bytes = b""
    version: int = -1
    ephemeral: bool = False
    makepath: bool = False
    recursive: bool = False


@dataclass(frozen=True)
class WalRecord:
    kind: int
    sid: int = 0
    ops: tuple[LoggedOp, ...] = field(default_factory=tuple)


# ---------------------------------------------------------------- encoding
def _str(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">H", len(b)) + b


def _bytes(b: bytes) -> bytes:
    return struct.pack(">i", len(b)) + b


def _op(op: LoggedOp) -> bytes:
    flags = (_EPHEMERAL if op.ephemeral else 0) | (_MAKEPATH if op.makepath else 0) | (
        _RECURSIVE if op.recursive else 0)
    return _OP.pack(_OP_KINDS[op.kind], flags, op.version) + _str(op.path) + _bytes(op.data)


def encode_record(rec: WalRecord) -> bytes:
    """One framed WAL record (length, CRC, body)."""
    body = _HEAD.pack(rec.kind, rec.sid)
    if rec.kind in (CREATE, SET, DELETE):
        body += _op(rec.ops[0])
    elif rec.kind == MULTI:
        body += struct.pack(">H", len(rec.ops)) + b"".join(_op(o) for o in rec.ops)
    length = struct.pack(">I", len(body))
    return length + struct.pack(">I", zlib.crc32(length + body)) + body


def encode_snapshot(store: ZkStore, next_gen: int) -> bytes:
    nodes = sorted(((p, n) for p, n in store.nodes.items() if p != "/"), key=lambda pn: pn[0])
    out = [SNAPSHOT_MAGIC, struct.pack(">Qqq", next_gen, store.zxid, store.last_session_id),
           struct.pack(">I", len(nodes))]
    for path, n in nodes:
        out += [_str(path), _NODE.pack(n.czxid, n.mzxid, n.version, n.cversion, n.ephemeral_owner), _bytes(n.data)]
    out.append(struct.pack(">i", store.nodes["/"].cversion))
    body = b"".join(out)
    return body + struct.pack(">I", zlib.crc32(body))


# ---------------------------------------------------------------- decoding
class _Reader:
    def __init__(self, buf: bytes, pos: int = 0) -> None:
        self.buf, self.pos = buf, pos

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise ZkStoreCorruptError(f"record ends early at byte {self.pos}")
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return b

    def unpack(self, st: struct.Struct) -> tuple[int, ...]:
        return st.unpack(self.take(st.size))

    def str(self) -> str:
        (n,) = struct.unpack(">H", self.take(2))
        return self.take(n).decode()

    def bytes(self) -> bytes:
        (n,) = struct.unpack(">i", self.take(4))
        return self.take(n)

    def op(self) -> LoggedOp:
        kind, flags, version = self.unpack(_OP)
        if kind not in _OP_NAMES:
            raise ZkStoreCorruptError(f"unknown op kind {kind}")
        return LoggedOp(_OP_NAMES[kind], self.str(), self.bytes(), version, bool(flags & _EPHEMERAL),
                        bool(flags & _MAKEPATH), bool(flags & _RECURSIVE))


def _decode_body(body: bytes) -> WalRecord:
    r = _Reader(body)
    kind, sid = r.unpack(_HEAD)
    if kind in (CREATE, SET, DELETE):
        ops: tuple[LoggedOp, ...] = (r.op(),)
    elif kind == MULTI:
        (count,) = struct.unpack(">H", r.take(2))
        ops = tuple(r.op() for _ in range(count))
    elif kind in (OPEN_SESSION, CLOSE_SESSION):
        ops = ()
    else:
        raise ZkStoreCorruptError(f"unknown record kind {kind}")
    if r.pos != len(body):
        raise ZkStoreCorruptError("record has trailing bytes")
    return WalRecord(kind, sid, ops)


def decode_wal(buf: bytes) -> tuple[list[WalRecord], int]:
    """The records of a WAL file's valid prefix and that prefix's length in bytes. A file too
    short for its magic (a crash while creating it), or all zeros, is empty; a short frame or a
    CRC mismatch ends the valid prefix (a torn tail). A wrong magic is ZkStoreCorruptError."""
    if len(buf) < len(WAL_MAGIC) or not any(buf[:len(WAL_MAGIC)]):
        # Shorter than the magic, or zeros where it should be (a filesystem may show a file
        # created just before the crash with its unsynced blocks zeroed): created, never used.
        if WAL_MAGIC.startswith(buf) or not any(buf):
            return [], 0
        raise ZkStoreCorruptError("not a kafkasim coordination-store WAL (bad magic)")
    if buf[:len(WAL_MAGIC)] != WAL_MAGIC:
        raise ZkStoreCorruptError("not a kafkasim coordination-store WAL (bad magic)")
    records: list[WalRecord] = []
    valid_end = len(WAL_MAGIC)
    for rec, end in _scan(buf):
        records.append(rec)
        valid_end = end
    return records, valid_end


def _scan(buf: bytes) -> Iterator[tuple[WalRecord, int]]:
    pos = len(WAL_MAGIC)
    while pos + _FRAME.size <= len(buf):
        length, crc = _FRAME.unpack_from(buf, pos)
        end = pos + _FRAME.size + length
        if end > len(buf) or zlib.crc32(buf[pos:pos + 4] + buf[pos + _FRAME.size:end]) != crc:
            return
        try:
            rec = _decode_body(buf[pos + _FRAME.size:end])
        except (ZkStoreCorruptError, ValueError, struct.error):
            return  # a CRC collision on garbage: as torn
        yield rec, end
        pos = end


def decode_snapshot(buf: bytes) -> tuple[ZkStore, int]:
    """The store a snapshot holds and its next_gen. Snapshots are renamed into place only once
    complete and fsynced, so any damage here is corruption, never a torn write."""
    if len(buf) < len(SNAPSHOT_MAGIC) + 4 or buf[:len(SNAPSHOT_MAGIC)] != SNAPSHOT_MAGIC:
        raise ZkStoreCorruptError("not a kafkasim coordination-store snapshot (bad magic)")
    if zlib.crc32(buf[:-4]) != struct.unpack(">I", buf[-4:])[0]:
        raise ZkStoreCorruptError("coordination-store snapshot fails its CRC")
    try:
        r = _Reader(buf[:-4], len(SNAPSHOT_MAGIC))
        next_gen, zxid, last_session = r.unpack(struct.Struct(">Qqq"))
        (count,) = struct.unpack(">I", r.take(4))
        store = ZkStore()
        for _ in range(count):
            path = r.str()
            czxid, mzxid, version, cversion, owner = r.unpack(_NODE)
            store.restore_node(path, ZNode(r.bytes(), czxid, mzxid, version, cversion, owner))
        (store.nodes["/"].cversion,) = struct.unpack(">i", r.take(4))
        if r.pos != len(buf) - 4:
            raise ZkStoreCorruptError("snapshot has trailing bytes")
    except (KeyError, ValueError, struct.error) as exc:
        raise ZkStoreCorruptError(f"coordination-store snapshot is malformed: {exc}") from exc
    store.zxid = zxid
    store.restore_session_counter(last_session)
    return store, next_gen


# ---------------------------------------------------------------- replay
def apply(store: ZkStore, rec: WalRecord) -> None:
    """Replay one record onto `store` (no watches exist during recovery, so nothing fires)."""
    if rec.kind == OPEN_SESSION:
        store.restore_session_counter(rec.sid)
        store.sessions.setdefault(rec.sid, set())
    elif rec.kind == CLOSE_SESSION:
        store.close_session(rec.sid)
    elif rec.kind == MULTI:
        store.multi(rec.sid, [ZOp(o.kind, o.path, o.data, o.version, o.ephemeral) for o in rec.ops])
    else:
        _apply_op(store, rec.sid, rec.ops[0])


def _apply_op(store: ZkStore, sid: int, op: LoggedOp) -> None:
    if op.kind == "create":
        store.create(sid, op.path, op.data, op.ephemeral, False, op.makepath)
    elif op.kind == "set":
        store.set(op.path, op.data, op.version)
    else:
        store.delete(op.path, op.version, op.recursive)


# ---------------------------------------------------------------- what a live op logs
def create_record(sid: int, created: str, data: bytes, ephemeral: bool, makepath: bool) -> WalRecord:
    return WalRecord(CREATE, sid, (LoggedOp("create", created, data, -1, ephemeral, makepath),))


def set_record(path: str, data: bytes, version: int) -> WalRecord:
    return WalRecord(SET, 0, (LoggedOp("set", path, data, version),))


def delete_record(path: str, version: int, recursive: bool) -> WalRecord:
    return WalRecord(DELETE, 0, (LoggedOp("delete", path, b"", version, recursive=recursive),))


def multi_record(sid: int, ops: list[ZOp], results: list[object]) -> WalRecord:
    """A committed multi, each create at the path it got (results[i] for a create)."""
    logged = tuple(LoggedOp(o.kind, str(results[i]) if o.kind == "create" else o.path, o.data, o.version,
                            o.ephemeral) for i, o in enumerate(ops))
    return WalRecord(MULTI, sid, logged)
