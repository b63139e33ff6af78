"""Hostile frames for `kafkasim serve`, and a client that sends them over real sockets.

Frame kinds (each a whole size-prefixed frame, or a byte stream for the framing cases):

  random      random bytes behind a correct size prefix
  mutated     a valid request of one (api key, version) — every field present in that version
              filled (one element per array, strings 'fz', a real record batch in `records`) —
              then bytes flipped, inserted, deleted, int16/int32 fields set to extremes, varints
              lengthened, unknown tagged fields added, lengths and counts changed
  values      a well-formed request of hostile values: integers at their type's extremes,
              odd strings, nulls, empty or repeated array elements
  records     a Produce request whose record batch was mutated after its CRC was fixed up, so
              the broker's batch parsing and decompression see the damage (or, 1 in 100, a
              sound batch of a few KiB that decompresses to 160 MiB)
  truncated   a valid frame cut short (its size prefix says so), or cut short on the wire and
              the connection closed by the sender
  oversized   a size prefix above socket.request.max.bytes, or negative
  version     a known api key at a version below or above the codec's range
  sasl        SaslHandshake then garbage where SaslAuthenticate belongs

Outcomes: 'answered' (a response frame came back), 'closed' (the broker closed the
connection), 'timeout' (neither within the read timeout — a request Kafka holds: acks=0 or a
long poll). Crashes are looked for by the test in the broker's stderr and trace.
"""

from __future__ import annotations

import functools
import random
import socket
import struct
from dataclasses import dataclass, field
from typing import Any

from kafkasim.protocol import api as A
from kafkasim.protocol.errors import ProtocolError
from kafkasim.protocol.framing import encode_request
from kafkasim.protocol.messages.headers import RequestHeader
from kafkasim.protocol.primitives import DEFAULT, in_range
from kafkasim.records import CompressionType, crc32c
from kafkasim.records.batch import Record, build_batch

KINDS = ("random", "mutated", "values", "records", "truncated", "oversized", "version", "sasl")
# How often each kind comes up: mostly mutated valid requests and hostile values, which reach
# the handlers.
WEIGHTS = (8, 35, 30, 10, 7, 3, 4, 3)
FUZZ_NAME = "fz"   # every string of a filled request: the fuzzer's names never meet the health topic's
_SIZE = struct.Struct(">i")
# The controller's requests to brokers change cluster state by design (a LeaderAndIsr or
# UpdateMetadata with a new controller epoch is obeyed); Kafka lets only principals with
# CLUSTER_ACTION send them, so without ACLs a mutated one that decodes is an order, not an
# attack. They get frames that fail to decode (a mutated one is a truncated one instead).
CLUSTER_ACTIONS = {A.LEADER_AND_ISR, A.STOP_REPLICA, A.UPDATE_METADATA, A.CONTROLLED_SHUTDOWN}
# Fields whose zero default would make the broker hold the request (acks=0: no answer at all).
_OVERRIDES: dict[str, Any] = {"acks": 1, "timeout_ms": 100, "max_wait_ms": 0, "rebalance_timeout_ms": 100}


def all_versions() -> list[tuple[int, int]]:
    """Every (api key, version) the codec knows, in key order."""
    return [(k, v) for k, info in sorted(A.API_BY_KEY.items()) for v in range(info.min_version, info.max_version + 1)]


def record_batch(rng: random.Random) -> bytes:
    codec = rng.choice(list(CompressionType))
    recs = [Record(timestamp_ms=1_700_000_000_000 + i, key=b"k%d" % i, value=rng.randbytes(8),
                   headers=(("h", b"v"),) if i % 2 else ()) for i in range(rng.randint(1, 4))]
    return build_batch(recs, compression=codec)


@functools.cache
def compression_bomb() -> bytes:
    """A sound zstd batch of a few KiB whose one record is 160 MiB of zeros."""
    return build_batch([Record(1_700_000_000_000, None, bytes(160 << 20))], compression=CompressionType.ZSTD)


def mutate_batch(batch: bytes, rng: random.Random) -> bytes:
    """Damage a v2 batch after its CRC field (offset 17..21) and fix the CRC up."""
    b = bytearray(batch)
    for _ in range(rng.randint(1, 4)):
        pos = rng.randrange(21, len(b)) if len(b) > 21 else 0
        op = rng.random()
        if op < 0.5:
            b[pos] ^= 1 << rng.randrange(8)
        elif op < 0.7:
            b[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 6)))
        elif op < 0.85:
            del b[pos:pos + rng.randint(1, 6)]
        else:
            b[pos] = rng.choice((0x00, 0x7F, 0x80, 0xFF))
    if len(b) >= 21:   # the CRC-32C covers attributes (offset 21) to the batch's end
        struct.pack_into(">I", b, 17, crc32c(bytes(b[21:])))
    return bytes(b)


def fill(cls: Any, version: int, rng: random.Random, records: bytes) -> Any:
    """An instance of a generated struct class with every field of `version` given a value."""
    kwargs: dict[str, Any] = {}
    for spec in cls.SPEC:
        if not in_range(spec.versions, version):
            continue
        kwargs[spec.attr] = _value(spec, version, rng, records)
    return cls(**kwargs)


def _value(spec: Any, version: int, rng: random.Random, records: bytes) -> Any:
    t = spec.type
    if spec.attr in _OVERRIDES and t.startswith("int"):
        return _OVERRIDES[spec.attr]
    if t.startswith("[]"):
        if spec.struct is not None:
            return [fill(spec.struct, version, rng, records)]
        return [_scalar(t[2:], spec.default, rng, records)]
    if spec.struct is not None:
        return fill(spec.struct, version, rng, records)
    return _scalar(t, spec.default, rng, records)


def _scalar(t: str, default: Any, rng: random.Random, records: bytes) -> Any:
    if t == "string":
        return FUZZ_NAME
    if t == "bytes":
        return b"fz"
    if t == "records":
        return records
    if t == "uuid":
        return bytes(16) if rng.random() < 0.5 else rng.randbytes(16)
    if t == "bool":
        return bool(default) if default is not DEFAULT else False
    if t == "float64":
        return 0.0
    return default if isinstance(default, int) and not isinstance(default, bool) else 0


_INT_RANGES = {"int8": (-2**7, 2**7 - 1), "int16": (-2**15, 2**15 - 1), "int32": (-2**31, 2**31 - 1),
               "int64": (-2**63, 2**63 - 1), "uint16": (0, 2**16 - 1), "uint32": (0, 2**32 - 1)}
_STRINGS = ("fz", "", "fz.x", "__consumer_offsets", "..", "\u00e9\u00e8\U0001f600", "a" * 300, "fz" * 130, "*",
            "fz/../x", "0", "-1", "\x00")


def hostile_fill(cls: Any, version: int, rng: random.Random, records: bytes, depth: int = 0) -> Any:
    """Like fill(), but every field a value a hostile client might send: integers at their
    type's extremes or small and negative, odd strings, nulls where the version allows them,
    arrays of 0 to 3 elements (duplicates included)."""
    kwargs: dict[str, Any] = {}
    for spec in cls.SPEC:
        if in_range(spec.versions, version):
            kwargs[spec.attr] = _hostile_value(spec, version, rng, records, depth)
    return cls(**kwargs)


def _hostile_value(spec: Any, version: int, rng: random.Random, records: bytes, depth: int) -> Any:
    t = spec.type
    if in_range(spec.nullable_versions, version) and rng.random() < 0.15:
        return None
    if spec.attr in _OVERRIDES and t.startswith("int") and rng.random() < 0.8:
        return _OVERRIDES[spec.attr]
    if t.startswith("[]"):
        n = rng.choice((0, 1, 1, 2, 3)) if depth < 3 else 0
        if spec.struct is not None:
            one = hostile_fill(spec.struct, version, rng, records, depth + 1)
            return [one if rng.random() < 0.3 else hostile_fill(spec.struct, version, rng, records, depth + 1)
                    for _ in range(n)]
        return [_hostile_scalar(t[2:], rng, records) for _ in range(n)]
    if spec.struct is not None:
        return hostile_fill(spec.struct, version, rng, records, depth + 1)
    return _hostile_scalar(t, rng, records)


def _hostile_scalar(t: str, rng: random.Random, records: bytes) -> Any:
    if t in _INT_RANGES:
        lo, hi = _INT_RANGES[t]
        return rng.choice((lo, hi, 0, 1, -1 if lo < 0 else 2, rng.randint(lo, hi), rng.randint(max(lo, -3), 3)))
    if t == "string":
        return rng.choice(_STRINGS)
    if t == "bytes":
        return rng.randbytes(rng.randint(0, 24))
    if t == "records":
        return rng.choice((records, b"", rng.randbytes(rng.randint(1, 70)), mutate_batch(records, rng)))
    if t == "uuid":
        return rng.choice((bytes(16), b"\xff" * 16, rng.randbytes(16)))
    if t == "bool":
        return rng.random() < 0.5
    if t == "float64":
        return rng.choice((0.0, -1.0, 1e308, float("nan"), float("inf")))
    return 0


def hostile_request(key: int, version: int, rng: random.Random, correlation_id: int) -> bytes:
    """A well-formed request of hostile values (valid_request() when they cannot be encoded)."""
    info = A.API_BY_KEY[key]
    try:
        body = hostile_fill(info.request, version, rng, record_batch(rng))
        header = RequestHeader(request_api_key=key, request_api_version=version, correlation_id=correlation_id,
                               client_id=rng.choice(("fuzz", None, "", "\u00e9" * 50)))
        return encode_request(header, body)
    except ProtocolError:
        return valid_request(key, version, rng, correlation_id)


def valid_request(key: int, version: int, rng: random.Random, correlation_id: int,
                  records: bytes | None = None) -> bytes:
    info = A.API_BY_KEY[key]
    body = fill(info.request, version, rng, records if records is not None else record_batch(rng))
    if key == A.PRODUCE and rng.random() < 0.9:
        body.transactional_id = None   # a transactional id is refused before the records are read
    if info.is_flexible(version) and rng.random() < 0.2:
        body._unknown_tagged_fields = [(rng.randrange(0, 200), rng.randbytes(rng.randint(0, 8)))]
    header = RequestHeader(request_api_key=key, request_api_version=version, correlation_id=correlation_id,
                           client_id=rng.choice(("fuzz", None, "")))
    return encode_request(header, body)


def mutate_frame(frame: bytes, rng: random.Random) -> bytes:
    """Damage a size-prefixed frame's body (past the 4-byte size) and re-prefix it."""
    b = bytearray(frame[4:])
    for _ in range(rng.randint(1, 4)):
        if not b:
            b.extend(rng.randbytes(4))
        pos = rng.randrange(len(b))
        _mutate_at(b, pos, rng)
    return _SIZE.pack(len(b)) + bytes(b)


def _mutate_at(b: bytearray, pos: int, rng: random.Random) -> None:
    op = rng.randrange(8)
    if op == 0:
        b[pos] ^= 1 << rng.randrange(8)
    elif op == 1:
        b[pos:pos] = rng.randbytes(rng.randint(1, 8))
    elif op == 2:
        del b[pos:pos + rng.randint(1, 8)]
    elif op == 3:   # an int16 length/count to an extreme
        b[pos:pos + 2] = struct.pack(">h", rng.choice((-1, -2, 0, 0x7FFF, -0x8000, 1)))
    elif op == 4:   # an int32 length/count/value to an extreme
        b[pos:pos + 4] = struct.pack(">i", rng.choice((-1, -2, 0, 0x7FFFFFFF, -0x80000000, 1 << 20)))
    elif op == 5:   # a varint made long, or never-ending
        b[pos:pos + 1] = bytes([0x80 | rng.randrange(128)] * rng.randint(1, 6)) + bytes([rng.randrange(128)])
    elif op == 6:   # an int64 field to an extreme
        b[pos:pos + 8] = struct.pack(">q", rng.choice((-1, 0x7FFFFFFFFFFFFFFF, -0x8000000000000000)))
    else:
        b[pos] = rng.choice((0x00, 0x01, 0x7F, 0x80, 0xFF))


@dataclass
class Case:
    """One hostile input: the bytes to send, and whether the sender closes after them."""

    kind: str
    key: int
    data: bytes
    close_after: bool = False
    steps: list[bytes] = field(default_factory=list)   # sasl: frames sent in order on one connection


def make_case(kind: str, key: int, version: int, rng: random.Random, corr: int, max_bytes: int) -> Case:
    if kind == "random":
        body = rng.randbytes(rng.randint(0, 300))
        if rng.random() < 0.5 and len(body) >= 4 and key not in CLUSTER_ACTIONS:  # a known api key up front
            body = struct.pack(">hh", key, version) + body[4:]
        return Case(kind, key, _SIZE.pack(len(body)) + body)
    if kind == "values" and key not in CLUSTER_ACTIONS:
        return Case(kind, key, hostile_request(key, version, rng, corr))
    if kind == "mutated" and key not in CLUSTER_ACTIONS:
        return Case(kind, key, mutate_frame(valid_request(key, version, rng, corr), rng))
    if kind == "records":
        v = rng.randint(3, A.API_BY_KEY[A.PRODUCE].max_version)
        batch = compression_bomb() if rng.random() < 0.01 else mutate_batch(record_batch(rng), rng)
        return Case(kind, A.PRODUCE, valid_request(A.PRODUCE, v, rng, corr, batch))
    if kind in ("truncated", "mutated", "values"):   # a strict prefix of a valid frame never decodes
        frame = valid_request(key, version, rng, corr)
        cut = rng.randrange(4, max(5, len(frame)))
        if rng.random() < 0.5:
            return Case(kind, key, frame[:cut], close_after=True)   # short on the wire, then EOF
        return Case(kind, key, _SIZE.pack(cut - 4) + frame[4:cut])  # a consistent but short frame
    if kind == "oversized":
        size = rng.choice((max_bytes + 1, max_bytes + rng.randint(2, 1 << 20), 0x7FFFFFFF, -1, -0x80000000,
                           -rng.randint(2, 1 << 30)))
        return Case(kind, key, _SIZE.pack(size) + rng.randbytes(rng.randint(0, 64)))
    if kind == "version":
        info = A.API_BY_KEY[key]
        bad = rng.choice((info.max_version + 1, info.max_version + rng.randint(2, 300), -1, -rng.randint(2, 300),
                          info.min_version - 1))
        frame = bytearray(valid_request(key, version, rng, corr))
        struct.pack_into(">h", frame, 6, bad)
        return Case(kind, key, bytes(frame))
    return sasl_case(rng, corr)


def sasl_case(rng: random.Random, corr: int) -> Case:
    """SaslHandshake (v0 or v1, mechanism PLAIN), then garbage where the token belongs: raw
    bytes (what a v0 handshake's client sends) or a SaslAuthenticate with a mangled frame."""
    hv = rng.randint(0, 1)
    handshake = valid_request(A.SASL_HANDSHAKE, hv, rng, corr)
    handshake = _replace_name(handshake, b"PLAIN")
    if rng.random() < 0.5:
        garbage = rng.randbytes(rng.randint(1, 200))
        garbage = _SIZE.pack(len(garbage)) + garbage
    else:
        garbage = mutate_frame(valid_request(A.SASL_AUTHENTICATE, rng.randint(0, 2), rng, corr + 1), rng)
    return Case("sasl", A.SASL_HANDSHAKE, b"", steps=[handshake, garbage])


def _replace_name(frame: bytes, mechanism: bytes) -> bytes:
    """The filled SaslHandshake's mechanism is 'fz' (int16 length 2): make it a real one."""
    body = frame[4:].replace(b"\x00\x02fz", struct.pack(">h", len(mechanism)) + mechanism, 1)
    return _SIZE.pack(len(body)) + body


# ------------------------------------------------------------------------------- sending


def named_key(data: bytes) -> int:
    """The api key a frame's header names (-1 when too short to name one)."""
    return int.from_bytes(data[4:6], "big", signed=True) if len(data) >= 6 else -1


def read_frame(sock: socket.socket) -> bytes | None:
    """One response frame, or None when the broker closed the connection."""
    head = _recv_exactly(sock, 4)
    if head is None:
        return None
    (size,) = _SIZE.unpack(head)
    return _recv_exactly(sock, size)


def _recv_exactly(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        try:
            chunk = sock.recv(n - len(buf))
        except (ConnectionResetError, BrokenPipeError):
            return None
        if not chunk:
            return None
        buf.extend(chunk)
    return bytes(buf)


class Sender:
    """One connection at a time to the broker; a new one after the broker closes it."""

    def __init__(self, port: int, timeout_s: float) -> None:
        self.port, self.timeout_s = port, timeout_s
        self.sock: socket.socket | None = None

    def _conn(self) -> socket.socket:
        if self.sock is None:
            self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
            self.sock.settimeout(self.timeout_s)
        return self.sock

    def drop(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def exchange(self, data: bytes, close_after: bool = False,
                 timeout_s: float | None = None) -> tuple[str, bytes | None]:
        """Send `data`; -> ('answered', frame) / ('closed', None) / ('timeout', None)."""
        sock = self._conn()
        sock.settimeout(timeout_s or self.timeout_s)
        try:
            sock.sendall(data)
            if close_after:
                sock.shutdown(socket.SHUT_WR)
            reply = read_frame(sock)
        except TimeoutError:
            self.drop()
            return "timeout", None
        except (ConnectionResetError, BrokenPipeError):
            self.drop()
            return "closed", None
        if reply is None or close_after:
            self.drop()
            return ("closed", None) if reply is None else ("answered", reply)
        return "answered", reply
