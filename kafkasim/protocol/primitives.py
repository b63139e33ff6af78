"""Kafka wire primitives and the runtime support of the generated message classes.

Byte layouts (all integers big-endian, as Kafka's ``ByteBuffer`` writes them):

    int8 / int16 / int32 / int64   two's complement, 1 / 2 / 4 / 8 bytes
    uint16 / uint32                unsigned, 2 / 4 bytes
    float64                        IEEE-754 double, 8 bytes
    bool                           1 byte; 0 = false, anything else reads as true, writes 1
    uuid                           16 raw bytes (most significant long first). In kafkasim a
                                   uuid value is ALWAYS a 16-byte ``bytes`` object (not
                                   ``uuid.UUID``): cheap to compare and hash on the hot path.
                                   ``ZERO_UUID`` is Kafka's ``Uuid.ZERO_UUID``.
    unsigned varint                7 bits per byte, least significant group first, high bit =
                                   "more bytes follow"; at most 5 bytes for a 32-bit value
    varint / varlong               zigzag ((n << 1) ^ (n >> 31|63)) then unsigned varint; used by
                                   record batches, not by the JSON-defined messages

  Classic (non-flexible) encodings:
    string          int16 length N, then N bytes of UTF-8; N = -1 means null
    bytes           int32 length N, then N bytes; N = -1 means null
    records         same as bytes (int32 length, -1 = null); kept opaque
    array           int32 count N, then N elements; N = -1 means null

  Compact encodings (flexible versions, KIP-482):
    compact string  unsigned varint N+1, then N bytes of UTF-8; 0 means null
    compact bytes   unsigned varint N+1, then N bytes; 0 means null
    compact records same as compact bytes
    compact array   unsigned varint N+1, then N elements; 0 means null

  Struct-valued fields (non-array) are written inline; a nullable struct is preceded by an int8
  marker: -1 = null, 1 = present.

  Tagged-field section (closes every struct in a flexible version):
    unsigned varint count, then per field: unsigned varint tag, unsigned varint size, size bytes
    of the value (itself compact-encoded). Tags are written in ascending order. A known tagged
    field is written only when it differs from its default. Unknown tags are kept raw as
    ``(tag, bytes)`` in ``_unknown_tagged_fields`` and re-emitted, never an error.

Strings longer than 0x7fff bytes are refused both ways (Kafka does the same, even for compact
strings). Invalid UTF-8 decodes with U+FFFD replacement, as Java's ``new String(.., UTF_8)`` does.
Array/bytes lengths larger than the bytes that remain are refused before allocating, as Kafka's
generated readers do ("Tried to read N elements, but only M bytes remain").
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, NamedTuple

from kafkasim.protocol.errors import ProtocolError, UnsupportedVersionError

Append = Callable[[Any], Any]

ZERO_UUID = bytes(16)
MAX_STRING_BYTES = 0x7FFF

S_INT8 = struct.Struct(">b")
S_INT16 = struct.Struct(">h")
S_INT32 = struct.Struct(">i")
S_INT64 = struct.Struct(">q")
S_UINT16 = struct.Struct(">H")
S_UINT32 = struct.Struct(">I")
S_FLOAT64 = struct.Struct(">d")

_pack_i16 = S_INT16.pack
_pack_i32 = S_INT32.pack
_unpack_i16 = S_INT16.unpack_from
_unpack_i32 = S_INT32.unpack_from

# Single-byte unsigned varints are by far the most common (short strings, small arrays, empty
# tagged sections), so they come from a table instead of being built.
_UV1 = tuple(bytes((i,)) for i in range(128))

NULL_I16 = b"\xff\xff"
NULL_I32 = b"\xff\xff\xff\xff"
NULL_COMPACT = b"\x00"
EMPTY_TAGS = b"\x00"


class _Default:
    """Sentinel for keyword arguments whose default is a fresh mutable value ([] or a struct)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT: Any = _Default()


# --------------------------------------------------------------------------- varints


def uvarint(n: int) -> bytes:
    """Unsigned varint of a non-negative int (< 2**32, as Kafka's are 32-bit)."""
    if n < 0x80:
        if n < 0:
            raise ProtocolError(f"negative unsigned varint {n}")
        return _UV1[n]
    if n > 0xFFFFFFFF:
        raise ProtocolError(f"unsigned varint {n} exceeds 32 bits")
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def read_uvarint(b: memoryview, p: int) -> tuple[int, int]:
    """Read an unsigned varint at p -> (value, new position). At most 5 bytes, like Kafka."""
    x = b[p]
    if x < 0x80:
        return x, p + 1
    value = x & 0x7F
    shift = 7
    p += 1
    while True:
        x = b[p]
        p += 1
        value |= (x & 0x7F) << shift
        if x < 0x80:
            return value, p
        shift += 7
        if shift > 28:
            raise ProtocolError("unsigned varint is longer than 5 bytes")


def zigzag_varint(n: int) -> bytes:
    """Signed 32-bit varint (zigzag), the record format's length encoding."""
    return uvarint(((n << 1) ^ (n >> 31)) & 0xFFFFFFFF)


def read_zigzag_varint(b: memoryview, p: int) -> tuple[int, int]:
    u, p = read_uvarint(b, p)
    return (u >> 1) ^ -(u & 1), p


def zigzag_varlong(n: int) -> bytes:
    """Signed 64-bit varint (zigzag); up to 10 bytes."""
    u = ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def read_zigzag_varlong(b: memoryview, p: int) -> tuple[int, int]:
    u = 0
    shift = 0
    while True:
        x = b[p]
        p += 1
        u |= (x & 0x7F) << shift
        if x < 0x80:
            break
        shift += 7
        if shift > 63:
            raise ProtocolError("varlong is longer than 10 bytes")
    return (u >> 1) ^ -(u & 1), p


# --------------------------------------------------------------------------- readers
# Every reader takes (buffer, position) and returns (value, new position). Lengths are checked
# against the buffer because memoryview slicing silently truncates instead of failing.


def _need(b: memoryview, p: int, n: int) -> int:
    e = p + n
    if e > len(b):
        raise ProtocolError(f"need {n} bytes at offset {p}, only {len(b) - p} remain")
    return e


def _str_len(n: int) -> None:
    if n > MAX_STRING_BYTES:
        raise ProtocolError(f"string length {n} exceeds {MAX_STRING_BYTES}")


def r_str_n(b: memoryview, p: int) -> tuple[str | None, int]:
    """Classic nullable string."""
    (n,) = _unpack_i16(b, p)
    p += 2
    if n < 0:
        return None, p
    e = _need(b, p, n)
    return str(b[p:e], "utf-8", "replace"), e


def r_str(b: memoryview, p: int) -> tuple[str, int]:
    (n,) = _unpack_i16(b, p)
    p += 2
    if n < 0:
        raise ProtocolError("non-nullable string field was serialized as null")
    e = _need(b, p, n)
    return str(b[p:e], "utf-8", "replace"), e


def r_cstr_n(b: memoryview, p: int) -> tuple[str | None, int]:
    """Compact nullable string."""
    n = b[p]
    if n < 0x80:
        p += 1
    else:
        n, p = read_uvarint(b, p)
    if n == 0:
        return None, p
    n -= 1
    _str_len(n)
    e = _need(b, p, n)
    return str(b[p:e], "utf-8", "replace"), e


def r_cstr(b: memoryview, p: int) -> tuple[str, int]:
    n = b[p]
    if n < 0x80:
        p += 1
    else:
        n, p = read_uvarint(b, p)
    if n == 0:
        raise ProtocolError("non-nullable string field was serialized as null")
    n -= 1
    _str_len(n)
    e = _need(b, p, n)
    return str(b[p:e], "utf-8", "replace"), e


def r_bytes_n(b: memoryview, p: int) -> tuple[bytes | None, int]:
    (n,) = _unpack_i32(b, p)
    p += 4
    if n < 0:
        return None, p
    e = _need(b, p, n)
    return bytes(b[p:e]), e


def r_bytes(b: memoryview, p: int) -> tuple[bytes, int]:
    v, p = r_bytes_n(b, p)
    if v is None:
        raise ProtocolError("non-nullable bytes field was serialized as null")
    return v, p


def r_cbytes_n(b: memoryview, p: int) -> tuple[bytes | None, int]:
    n, p = read_uvarint(b, p)
    if n == 0:
        return None, p
    e = _need(b, p, n - 1)
    return bytes(b[p:e]), e


def r_cbytes(b: memoryview, p: int) -> tuple[bytes, int]:
    v, p = r_cbytes_n(b, p)
    if v is None:
        raise ProtocolError("non-nullable bytes field was serialized as null")
    return v, p


def r_rec_n(b: memoryview, p: int) -> tuple[memoryview | None, int]:
    """Classic records: a zero-copy memoryview slice of the input (or None)."""
    (n,) = _unpack_i32(b, p)
    p += 4
    if n < 0:
        return None, p
    e = _need(b, p, n)
    return b[p:e], e


def r_rec(b: memoryview, p: int) -> tuple[memoryview, int]:
    v, p = r_rec_n(b, p)
    if v is None:
        raise ProtocolError("non-nullable records field was serialized as null")
    return v, p


def r_crec_n(b: memoryview, p: int) -> tuple[memoryview | None, int]:
    n, p = read_uvarint(b, p)
    if n == 0:
        return None, p
    e = _need(b, p, n - 1)
    return b[p:e], e


def r_crec(b: memoryview, p: int) -> tuple[memoryview, int]:
    v, p = r_crec_n(b, p)
    if v is None:
        raise ProtocolError("non-nullable records field was serialized as null")
    return v, p


def r_alen(b: memoryview, p: int) -> tuple[int, int]:
    """Classic array count (-1 = null), refused when larger than the remaining bytes."""
    (n,) = _unpack_i32(b, p)
    p += 4
    if n > len(b) - p:
        raise ProtocolError(f"array of {n} elements but only {len(b) - p} bytes remain")
    return n, p


def r_calen(b: memoryview, p: int) -> tuple[int, int]:
    """Compact array count (-1 = null)."""
    n = b[p]
    if n < 0x80:
        p += 1
    else:
        n, p = read_uvarint(b, p)
    n -= 1
    if n > len(b) - p:
        raise ProtocolError(f"array of {n} elements but only {len(b) - p} bytes remain")
    return n, p


def r_uuid(b: memoryview, p: int) -> tuple[bytes, int]:
    e = _need(b, p, 16)
    return bytes(b[p:e]), e


def null_error(field: str) -> None:
    raise ProtocolError(f"non-nullable field {field} was serialized as null")


def r_unknown_tags(o: Any, b: memoryview, p: int) -> int:
    """Read a tagged-field section of a struct with no known tags in this version."""
    n, p = read_uvarint(b, p)
    raw: list[tuple[int, bytes]] = []
    for _ in range(n):
        tag, p = read_uvarint(b, p)
        size, p = read_uvarint(b, p)
        e = _need(b, p, size)
        raw.append((tag, bytes(b[p:e])))
        p = e
    o._unknown_tagged_fields = raw or None
    return p


def tag_end(b: memoryview, p: int) -> tuple[int, int, int]:
    """Header of one tagged field -> (tag, start of value, end of value)."""
    tag, p = read_uvarint(b, p)
    size, p = read_uvarint(b, p)
    return tag, p, _need(b, p, size)


def tag_size_mismatch(tag: int, end: int, at: int) -> None:
    raise ProtocolError(f"tagged field {tag}: value ends at {at}, its size says {end}")


# --------------------------------------------------------------------------- writers
# Writers take the output's append function first; the output is a list of bytes-like chunks
# joined once at the end, so records (memoryviews) are copied exactly once.


def _utf8(v: str) -> bytes:
    s = v.encode("utf-8")
    if len(s) > MAX_STRING_BYTES:
        raise ProtocolError(f"string of {len(s)} bytes exceeds {MAX_STRING_BYTES}")
    return s


def w_str_n(a: Append, v: str | None) -> None:
    if v is None:
        a(NULL_I16)
        return
    s = _utf8(v)
    a(_pack_i16(len(s)))
    a(s)


def w_str(a: Append, v: str) -> None:
    if v is None:
        raise ProtocolError("null value for a non-nullable string field")
    s = _utf8(v)
    a(_pack_i16(len(s)))
    a(s)


def w_cstr_n(a: Append, v: str | None) -> None:
    if v is None:
        a(NULL_COMPACT)
        return
    s = _utf8(v)
    n = len(s) + 1
    a(_UV1[n] if n < 0x80 else uvarint(n))
    a(s)


def w_cstr(a: Append, v: str) -> None:
    if v is None:
        raise ProtocolError("null value for a non-nullable string field")
    s = _utf8(v)
    n = len(s) + 1
    a(_UV1[n] if n < 0x80 else uvarint(n))
    a(s)


def w_bytes_n(a: Append, v: Any) -> None:
    """Classic bytes or records: int32 length (-1 = null) then the bytes-like value itself."""
    if v is None:
        a(NULL_I32)
        return
    a(_pack_i32(len(v) if type(v) is not memoryview else v.nbytes))
    a(v)


def w_bytes(a: Append, v: Any) -> None:
    if v is None:
        raise ProtocolError("null value for a non-nullable bytes/records field")
    a(_pack_i32(len(v) if type(v) is not memoryview else v.nbytes))
    a(v)


def w_cbytes_n(a: Append, v: Any) -> None:
    if v is None:
        a(NULL_COMPACT)
        return
    a(uvarint((len(v) if type(v) is not memoryview else v.nbytes) + 1))
    a(v)


def w_cbytes(a: Append, v: Any) -> None:
    if v is None:
        raise ProtocolError("null value for a non-nullable bytes/records field")
    a(uvarint((len(v) if type(v) is not memoryview else v.nbytes) + 1))
    a(v)


def w_uuid(a: Append, v: bytes) -> None:
    if type(v) is not bytes or len(v) != 16:
        raise ProtocolError(f"uuid must be 16 raw bytes, got {v!r}")
    a(v)


def w_alen(a: Append, n: int) -> None:
    a(_pack_i32(n))


def w_calen(a: Append, n: int) -> None:
    n += 1
    a(_UV1[n] if n < 0x80 else uvarint(n))


def nonnull_error(field: str) -> None:
    raise ProtocolError(f"null value for non-nullable field {field}")


def w_tags(a: Append, known: list[tuple[int, bytes]], unknown: list[tuple[int, bytes]] | None) -> None:
    """Write a tagged-field section: known (non-default) fields merged with raw unknown ones,
    in ascending tag order, as Kafka's RawTaggedFieldWriter interleaves them."""
    items = known + unknown if unknown else known
    if len(items) > 1:
        items = sorted(items, key=_first)
    a(uvarint(len(items)))
    for tag, data in items:
        a(uvarint(tag))
        a(uvarint(len(data)))
        a(data)


def _first(t: tuple[int, bytes]) -> int:
    return t[0]


def w_unknown_tags(a: Append, unknown: list[tuple[int, bytes]] | None) -> None:
    if unknown:
        w_tags(a, [], unknown)
    else:
        a(EMPTY_TAGS)


def not_in_version(cls_name: str, field: str) -> None:
    # The version is added by Struct.write, so that identical per-version encoders can be shared.
    raise UnsupportedVersionError(f"attempted to write a non-default {field} of {cls_name}")


# --------------------------------------------------------------------------- classes


class FieldSpec(NamedTuple):
    """Schema of one field, as the generator saw it (used by tests and tooling, not by codecs).

    Version ranges are (lo, hi) inclusive; (1, 0) is the empty range."""

    attr: str  # snake_case attribute name
    json_name: str  # Kafka's JSON name, e.g. "TopicData"
    type: str  # Kafka type: "int32", "string", "[]int32", "[]TopicProduceData", "LeaderIdAndEpoch"
    struct: Any  # the generated class of a struct / struct array element, else None
    versions: tuple[int, int]
    nullable_versions: tuple[int, int]
    tag: int | None
    tagged_versions: tuple[int, int]
    ignorable: bool
    flexible_versions: tuple[int, int] | None  # per-field override (RequestHeader.ClientId)
    default: Any  # the default value ([] / struct defaults are shown as DEFAULT)


def in_range(r: tuple[int, int], v: int) -> bool:
    return r[0] <= v <= r[1]


_DECODE_ERRORS = (struct.error, IndexError, ValueError, OverflowError, RecursionError)
_ENCODE_ERRORS = (struct.error, TypeError, ValueError, OverflowError, AttributeError)


class Struct:
    """Base of every generated class: equality, repr, encode/decode by version."""

    __slots__ = ()
    _FIELD_NAMES: tuple[str, ...] = ()
    _ENCODERS: dict[int, Callable[[Any, Append], None]] = {}
    _DECODERS: dict[int, Callable[[memoryview, int], tuple[Any, int]]] = {}
    SPEC: tuple[FieldSpec, ...] = ()
    MIN_VERSION = 0
    MAX_VERSION = -1

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        for name in self._FIELD_NAMES:
            if getattr(self, name) != getattr(other, name):
                return False
        # Kafka compares raw unknown tagged fields too; None and [] both mean "none".
        return (self._unknown_tagged_fields or None) == (other._unknown_tagged_fields or None)  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        parts = []
        for name in self._FIELD_NAMES:
            v = getattr(self, name)
            if isinstance(v, memoryview):
                parts.append(f"{name}=<{v.nbytes} bytes>")
            else:
                parts.append(f"{name}={v!r}")
        u = self._unknown_tagged_fields  # type: ignore[attr-defined]
        if u:
            parts.append(f"_unknown_tagged_fields={u!r}")
        return f"{type(self).__qualname__}({', '.join(parts)})"

    def write(self, append: Append, version: int) -> None:
        """Append this object's encoding at `version` as bytes-like chunks."""
        fn = self._ENCODERS.get(version)
        if fn is None:
            raise UnsupportedVersionError(
                f"{type(self).__qualname__} has no version {version} "
                f"(valid {self.MIN_VERSION}-{self.MAX_VERSION})"
            )
        try:
            fn(self, append)
        except UnsupportedVersionError as e:
            raise UnsupportedVersionError(f"{e} at version {version}") from None
        except ProtocolError:
            raise
        except _ENCODE_ERRORS as e:
            raise ProtocolError(f"cannot encode {type(self).__qualname__} v{version}: {e}") from e

    def encode(self, version: int) -> bytes:
        """The bytes of this object at `version` (no size prefix, no header)."""
        out: list[Any] = []
        self.write(out.append, version)
        return b"".join(out)

    @classmethod
    def read(cls, buf: Any, pos: int, version: int) -> tuple[Any, int]:
        """Decode at `pos` of `buf` -> (object, position after it). Trailing bytes are allowed."""
        fn = cls._DECODERS.get(version)
        if fn is None:
            raise UnsupportedVersionError(
                f"{cls.__qualname__} has no version {version} (valid {cls.MIN_VERSION}-{cls.MAX_VERSION})"
            )
        b = buf if type(buf) is memoryview else memoryview(buf)
        if b.format != "B" or b.ndim != 1:
            b = b.cast("B")
        try:
            return fn(b, pos)
        except ProtocolError as e:
            raise ProtocolError(f"cannot decode {cls.__qualname__} v{version}: {e}") from e
        except _DECODE_ERRORS as e:
            raise ProtocolError(
                f"cannot decode {cls.__qualname__} v{version}: truncated or malformed ({type(e).__name__}: {e})"
            ) from e

    @classmethod
    def decode(cls, buf: Any, version: int) -> Any:
        """Decode a whole buffer (bytes or memoryview). `records` fields come back as
        zero-copy memoryview slices of `buf`. Trailing bytes are a ProtocolError."""
        obj, end = cls.read(buf, 0, version)
        n = buf.nbytes if type(buf) is memoryview else len(buf)
        if end != n:
            raise ProtocolError(f"{n - end} unexpected trailing bytes after {cls.__qualname__} v{version}")
        return obj


class Message(Struct):
    """Base of top-level generated messages (requests, responses, headers, data records)."""

    __slots__ = ()
    API_KEY: int | None = None
    FLEXIBLE_FROM: int | None = None
    SCHEMA_NAME = ""
    KIND = ""  # "request" / "response" / "header" / "data"
