"""The seam: the only interface broker, storage, client and harness code uses for time, tasks,
network, files, coordination and randomness.

Two implementations exist: `kafkasim.runtime.sim` (a virtual clock over a heap of timed
callbacks, deterministic, fault-injecting) and `kafkasim.runtime.real` (asyncio, OS sockets and
files, kazoo). Code above the seam is written once as `async def` coroutines against the
classes below and never learns which world it is in.

A `NodeRuntime` belongs to one node (a broker process, a client process). Every task it spawns,
every connection and open file it holds belongs to that node: a crash kills them all at once and
any later call through a dead node's runtime raises `NodeDead` (no cleanup after kill -9).

Units: milliseconds everywhere (`*_ms`), as Kafka's configs are.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")

# One cancellation type for both worlds: asyncio's, so `except Cancelled` means the same thing
# whichever scheduler threw it. (Only runtime/ may import asyncio; others import this name.)
Cancelled = asyncio.CancelledError


class NodeDead(Exception):
    """A call into the runtime of a node that has crashed or been stopped."""


class RuntimeTimeout(Exception):
    """A runtime wait (connect, wait_for) ran out of time."""


class InvariantViolation(AssertionError):
    """`NodeRuntime.invariant` failed in the simulated world; `what` names the invariant."""

    def __init__(self, what: str) -> None:
        super().__init__(f"invariant violated: {what}")
        self.what = what


# ---------------------------------------------------------------- network errors
class NetworkError(OSError):
    """Base of every network failure seen by code above the seam."""


class ConnectionRefused(NetworkError):
    """Nobody listens on that address (or the fault model refused the connect)."""


class ConnectionClosed(NetworkError):
    """The peer closed the stream cleanly (EOF) or this side closed it."""


class ConnectionReset(ConnectionClosed):
    """The stream was torn down abruptly: peer crash, RST, partition timeout."""


class FrameTooLarge(NetworkError):
    """A size-prefixed frame announced more bytes than the reader allows."""


# ---------------------------------------------------------------- coordination errors
class CoordinationError(Exception):
    """Base of the ZooKeeper-operation errors (named after ZooKeeper's KeeperException codes)."""


class NoNodeError(CoordinationError):
    pass


class NodeExistsError(CoordinationError):
    pass


class BadVersionError(CoordinationError):
    pass


class NotEmptyError(CoordinationError):
    pass


class NoChildrenForEphemeralsError(CoordinationError):
    pass


class SessionExpiredError(CoordinationError):
    pass


class ConnectionLossError(CoordinationError):
    pass


# ---------------------------------------------------------------- time and tasks
class Future(abc.ABC, Generic[T]):
    """A one-shot result: set once, awaited by any number of tasks of the same world."""

    @abc.abstractmethod
    def set_result(self, value: T) -> None: ...

    @abc.abstractmethod
    def set_exception(self, exc: BaseException) -> None: ...

    @abc.abstractmethod
    def done(self) -> bool: ...

    @abc.abstractmethod
    def result(self) -> T:
        """The value (raises the exception) of a done future."""

    @abc.abstractmethod
    def __await__(self) -> Any: ...


class Timer(abc.ABC):
    @abc.abstractmethod
    def cancel(self) -> None: ...


class Task(abc.ABC):
    name: str

    @abc.abstractmethod
    def cancel(self) -> None:
        """Raise `Cancelled` inside the task at its current await."""

    @abc.abstractmethod
    def done(self) -> bool: ...

    @abc.abstractmethod
    def __await__(self) -> Any:
        """Wait for the task; returns its result or raises its exception."""


# ---------------------------------------------------------------- network
@dataclass(frozen=True)
class TlsSettings:
    """One end's TLS material, PEM only (Kafka's ssl.keystore.type=PEM / ssl.truststore.type=PEM).
    The real world builds an ssl.SSLContext from it; the simulated world reads none of it (no
    crypto there): a TLS listener only marks its streams, refuses a peer that does not speak TLS,
    and takes `sim_subject` as the subject of the certificate a client presents."""

    keystore_location: str | None = None      # a PEM file with the private key and the certificate chain
    certificate_chain: str | None = None      # or the chain and the key as PEM text
    private_key: str | None = None
    key_password: str | None = None
    truststore_location: str | None = None    # PEM file of trusted certificates
    truststore_certificates: str | None = None  # or PEM text
    client_auth: str = "none"                 # a server's: none, requested, required
    check_hostname: bool = False              # a client's: verify the server's name (endpoint identification)
    sim_subject: str | None = None            # the simulated world: the DN of this end's certificate


class Stream(abc.ABC):
    """An ordered, reliable byte stream (TCP-like) owned by one node. On a TLS listener the
    accepted stream is `secure`, and `peer_subject` is the RFC 2253 subject of the certificate
    the client presented (None: none presented)."""

    local: tuple[str, int]
    peer: tuple[str, int]
    secure: bool = False
    peer_subject: str | None = None

    @abc.abstractmethod
    async def read_exactly(self, n: int) -> bytes:
        """Exactly n bytes; raises ConnectionClosed/ConnectionReset if the stream ends first."""

    @abc.abstractmethod
    async def read_frame(self, max_bytes: int) -> bytes:
        """One Kafka frame: an int32 big-endian size, then that many bytes (returned without
        the size). Raises FrameTooLarge (and the caller should close) when size > max_bytes or
        negative."""

    @abc.abstractmethod
    async def write(self, data: bytes | bytearray | memoryview) -> None:
        """Queue the bytes for the peer; returns once the local buffer accepted them."""

    async def sendfile(self, fh: FileHandle, offset: int, count: int) -> None:
        """Send `count` bytes of an open data file from `offset` (Kafka's FileRecords.writeTo):
        zero-copy os.sendfile in the real world; read + write where that is all there is."""
        data = fh.read(offset, count)
        if len(data) != count:
            self.close()
            raise ConnectionReset(f"file truncated during sendfile: {len(data)} of {count} bytes at {offset}")
        await self.write(data)

    @abc.abstractmethod
    def close(self) -> None:
        """Close both directions; the peer reads EOF. Idempotent."""

    @abc.abstractmethod
    def is_closed(self) -> bool: ...


class Server(abc.ABC):
    host: str
    port: int

    @abc.abstractmethod
    def close(self) -> None:
        """Stop accepting; existing streams stay open."""


StreamHandler = Callable[[Stream], Coroutine[Any, Any, None]]


class Network(abc.ABC):
    @abc.abstractmethod
    async def serve(self, host: str, port: int, handler: StreamHandler, tls: TlsSettings | None = None) -> Server:
        """Listen on host:port (port 0 = any free port); each accepted stream runs
        `handler(stream)` as a task of this node. With `tls`, a stream is handed over only after
        its TLS handshake (one that fails closes the connection, as a broker's SSL listener)."""

    @abc.abstractmethod
    async def connect(self, host: str, port: int, timeout_ms: float, tls: TlsSettings | None = None) -> Stream: ...


# ---------------------------------------------------------------- filesystem
class FileHandle(abc.ABC):
    """An open data file. Writes are visible to reads at once but durable only after fsync."""

    path: str

    @abc.abstractmethod
    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Write at the end; returns the position the data starts at."""

    @abc.abstractmethod
    def pwrite(self, pos: int, data: bytes | bytearray | memoryview) -> None: ...

    @abc.abstractmethod
    def read(self, pos: int, n: int) -> bytes:
        """Up to n bytes from pos (fewer at end of file)."""

    @abc.abstractmethod
    def truncate(self, size: int) -> None: ...

    @abc.abstractmethod
    def size(self) -> int: ...

    @abc.abstractmethod
    async def fsync(self) -> None: ...

    @abc.abstractmethod
    def close(self) -> None: ...


class FileSystem(abc.ABC):
    """One node's disk. Paths are '/'-separated and relative to the disk's root."""

    @abc.abstractmethod
    def open(self, path: str, create: bool = True) -> FileHandle:
        """Open for read/write (created empty when missing and `create`)."""

    @abc.abstractmethod
    def exists(self, path: str) -> bool: ...

    @abc.abstractmethod
    def listdir(self, path: str) -> list[str]:
        """Entry names, sorted (never in hash or inode order)."""

    @abc.abstractmethod
    def mkdir(self, path: str) -> None:
        """Create the directory and its parents; no error when it exists."""

    @abc.abstractmethod
    def rename(self, src: str, dst: str) -> None:
        """Atomic replace of dst (a file; or a directory, onto a name not in use), durable only
        after fsync_dir of the parent."""

    @abc.abstractmethod
    def unlink(self, path: str) -> None: ...

    @abc.abstractmethod
    def rmdir(self, path: str) -> None: ...

    @abc.abstractmethod
    async def fsync_dir(self, path: str) -> None: ...

    def store_of(self, path: str) -> tuple[str, int, int]:
        """(the directory's absolute path, its file store's total and usable bytes), which Kafka
        reports for a log dir (DescribeLogDirs). A disk without such numbers — the simulation's —
        answers the path as given and -1, -1."""
        return path, -1, -1


# ---------------------------------------------------------------- coordination (ZooKeeper)
@dataclass(frozen=True)
class ZStat:
    """The subset of ZooKeeper's Stat that Kafka reads."""

    czxid: int
    mzxid: int
    version: int
    cversion: int
    ephemeral_owner: int
    num_children: int
    data_length: int


@dataclass(frozen=True)
class WatchEvent:
    type: str  # "created" | "deleted" | "changed" | "child" | "session"
    path: str
    state: str = ""  # for "session": "connected" | "suspended" | "expired" | "closed"


Watcher = Callable[[WatchEvent], None]


@dataclass(frozen=True)
class ZOp:
    """One operation of a `multi` transaction."""

    kind: str  # "create" | "set" | "delete" | "check"
    path: str
    data: bytes = b""
    version: int = -1
    ephemeral: bool = False
    sequential: bool = False


class ZkClient(abc.ABC):
    """A ZooKeeper session (kazoo semantics, async). Watches are one-shot and are delivered as
    plain callbacks on the node's scheduler; a watcher must not block (spawn a task instead)."""

    session_id: int

    @abc.abstractmethod
    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
                     sequential: bool = False, makepath: bool = False) -> str: ...

    @abc.abstractmethod
    async def get(self, path: str, watch: Watcher | None = None) -> tuple[bytes, ZStat]: ...

    @abc.abstractmethod
    async def set(self, path: str, data: bytes, version: int = -1) -> ZStat: ...

    @abc.abstractmethod
    async def delete(self, path: str, version: int = -1, recursive: bool = False) -> None: ...

    @abc.abstractmethod
    async def exists(self, path: str, watch: Watcher | None = None) -> ZStat | None: ...

    @abc.abstractmethod
    async def get_children(self, path: str, watch: Watcher | None = None) -> list[str]:
        """Child names, sorted."""

    @abc.abstractmethod
    async def multi(self, ops: list[ZOp]) -> list[Any]:
        """All or nothing; raises the first failing op's error."""

    def get_children_pipelined(self, path: str, watch: Watcher | None = None) -> Awaitable[list[str]]:
        """A getChildren queued now (the call does not wait) and answered with this session's
        next request: ZooKeeper answers a connection's requests in order, so a read pipelined
        behind another request costs no round trip of its own (Kafka's ZooKeeperClient sends
        its requests asynchronously on one connection). A world that charges requests one by
        one (the simulated one) rides it on the next request; here it is simply sent when
        awaited."""
        return self.get_children(path, watch)

    @abc.abstractmethod
    def add_session_listener(self, listener: Watcher) -> None: ...

    @abc.abstractmethod
    async def close(self) -> None: ...


class Coordination(abc.ABC):
    @abc.abstractmethod
    async def connect(self, session_timeout_ms: int) -> ZkClient: ...


# ---------------------------------------------------------------- rng
class Rng(abc.ABC):
    """A named, seeded random stream (the only randomness code above the seam may use)."""

    @abc.abstractmethod
    def random(self) -> float: ...

    @abc.abstractmethod
    def randint(self, a: int, b: int) -> int:
        """Inclusive on both ends."""

    @abc.abstractmethod
    def choice(self, seq: list[T]) -> T: ...

    @abc.abstractmethod
    def randbytes(self, n: int) -> bytes: ...

    @abc.abstractmethod
    def expovariate(self, rate: float) -> float: ...

    @abc.abstractmethod
    def shuffle(self, seq: list[Any]) -> None: ...


# ---------------------------------------------------------------- the node runtime
class NodeRuntime(abc.ABC):
    """Everything one node may do to the outside world."""

    node: str  # the node's name (its host name in the simulated world)
    host: str  # the address other nodes use to reach it
    net: Network
    fs: FileSystem
    coordination: Coordination
    # The seeded bugs of the world this node lives in (runtime/seeded_bugs.py): set by the world.
    seeded_bugs: frozenset[str] = frozenset()

    def seeded_bug(self, name: str) -> bool:
        """Whether seeded bug `name` is on in this node's world (a set lookup: hooks sit on hot
        paths)."""
        return name in self.seeded_bugs

    def buggify(self, name: str) -> bool:
        """BUGGIFY (runtime/buggify.py): whether this pass through point `name` takes its rare but
        legal path. The simulated world answers from the run's seeded BUGGIFY stream (and traces
        each firing); the real world (this default) always answers no."""
        return False

    @abc.abstractmethod
    def invariant(self, cond: bool, what: str) -> None:
        """A broker/storage invariant checked at the point of change; `what` names it. The
        simulated world fails the run (raises InvariantViolation, and the run reports `what`);
        the real world traces the violation and goes on. When `cond` holds this draws no random
        number and traces nothing, so it never changes a trace."""

    @abc.abstractmethod
    def now_ms(self) -> int:
        """Wall-clock milliseconds since the epoch (virtual in the simulation)."""

    @abc.abstractmethod
    def monotonic_ms(self) -> float:
        """Fractional milliseconds for measuring intervals."""

    @abc.abstractmethod
    async def sleep(self, ms: float) -> None: ...

    @abc.abstractmethod
    def call_later(self, ms: float, fn: Callable[[], None]) -> Timer: ...

    @abc.abstractmethod
    def future(self) -> Future[Any]: ...

    @abc.abstractmethod
    def spawn(self, coro: Coroutine[Any, Any, T], name: str = "") -> Task: ...

    @abc.abstractmethod
    async def wait_first(self, futures: Iterable[Future[Any] | Task], timeout_ms: float | None) -> int | None:
        """Wait until one of the futures/tasks is done or the timeout passes. Returns the index
        of the first done one (lowest index when several are), or None on timeout."""

    @abc.abstractmethod
    def rng(self, name: str) -> Rng: ...

    @abc.abstractmethod
    def trace(self, ev: str, **fields: Any) -> None:
        """Record an event in the run's trace (a no-op sink in the real world unless configured).
        Field values must be JSON-serialisable and deterministic."""

    @abc.abstractmethod
    def alive(self) -> bool: ...

    async def wait_for(self, aw: Awaitable[T], timeout_ms: float) -> T:
        """Run `aw` as a task and return its result, or cancel it and raise RuntimeTimeout."""
        # A coroutine runs as the task itself: wrapped in _as_coro, every one of its steps (a
        # client request's, one per wait_for) would pass through one more, interpreted, frame.
        task = self.spawn(aw if isinstance(aw, Coroutine) else _as_coro(aw), name="wait_for")
        idx = await self.wait_first([task], timeout_ms)
        if idx is None:
            task.cancel()
            raise RuntimeTimeout(f"timed out after {timeout_ms} ms")
        return await task  # type: ignore[no-any-return]


async def _as_coro(aw: Awaitable[T]) -> T:
    return await aw
