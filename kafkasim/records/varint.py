"""Variable-length integers, exactly as Kafka's ``org.apache.kafka.common.utils.ByteUtils``.

Layout (protobuf base-128, little-endian groups of 7 bits)::

    byte i:  [c | b6 b5 b4 b3 b2 b1 b0]      c = 1: another byte follows
    value  = sum(b_i << (7 * i))

Signed varint / varlong use ZigZag first, so small negative numbers stay short::

    zigzag32(n) = (n << 1) ^ (n >> 31)        0->0, -1->1, 1->2, -2->3, ...
    zigzag64(n) = (n << 1) ^ (n >> 63)

Limits (Kafka's ``illegalVarintException`` / ``illegalVarlongException``):

    varint  (int32, signed or unsigned): at most 5 bytes
    varlong (int64, signed or unsigned): at most 10 bytes

Like Java, bits beyond 32 (resp. 64) in the last allowed byte are dropped rather than
rejected, and non-canonical encodings (``80 00`` for 0) are accepted: kafkasim must accept
what Kafka accepts. A sixth (resp. eleventh) byte, or a buffer that ends while the
continuation bit is set, raises ``CorruptRecordError`` (``bad_varint`` / ``truncated``).

Decoders take ``(buf, pos)`` and return ``(value, new_pos)`` so a parser can walk a
memoryview without slicing.
"""

from __future__ import annotations

from .errors import CorruptReason, CorruptRecordError

Buffer = bytes | bytearray | memoryview

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
UINT32_MAX = (1 << 32) - 1
UINT64_MAX = (1 << 64) - 1

MAX_VARINT_BYTES = 5
MAX_VARLONG_BYTES = 10

_MASK32 = 0xFFFFFFFF
_MASK64 = 0xFFFFFFFFFFFFFFFF


# --------------------------------------------------------------------------- encoding


def _encode_unsigned(value: int) -> bytes:
    """Base-128 groups of an unsigned value (caller range-checks)."""
    if value < 0x80:  # the overwhelmingly common case: lengths and deltas < 64
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """ZigZag varint of a signed int32 (``ByteUtils.writeVarint``)."""
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"varint out of int32 range: {value}")
    return _encode_unsigned(((value << 1) ^ (value >> 31)) & _MASK32)


def encode_varlong(value: int) -> bytes:
    """ZigZag varlong of a signed int64 (``ByteUtils.writeVarlong``)."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"varlong out of int64 range: {value}")
    return _encode_unsigned(((value << 1) ^ (value >> 63)) & _MASK64)


def encode_unsigned_varint(value: int) -> bytes:
    """Unsigned varint of a uint32 (``ByteUtils.writeUnsignedVarint``; flexible versions)."""
    if not 0 <= value <= UINT32_MAX:
        raise ValueError(f"unsigned varint out of uint32 range: {value}")
    return _encode_unsigned(value)


def encode_unsigned_varlong(value: int) -> bytes:
    """Unsigned varlong of a uint64."""
    if not 0 <= value <= UINT64_MAX:
        raise ValueError(f"unsigned varlong out of uint64 range: {value}")
    return _encode_unsigned(value)


def varint_size(value: int) -> int:
    """Bytes ``encode_varint(value)`` takes (``ByteUtils.sizeOfVarint``)."""
    raw = ((value << 1) ^ (value >> 31)) & _MASK32
    return _unsigned_size(raw)


def varlong_size(value: int) -> int:
    """Bytes ``encode_varlong(value)`` takes (``ByteUtils.sizeOfVarlong``)."""
    raw = ((value << 1) ^ (value >> 63)) & _MASK64
    return _unsigned_size(raw)


def unsigned_varint_size(value: int) -> int:
    return _unsigned_size(value)


def _unsigned_size(raw: int) -> int:
    # bit_length 0 still needs one byte.
    return max(1, (raw.bit_length() + 6) // 7)


# --------------------------------------------------------------------------- decoding


def _decode_unsigned(
    buf: Buffer, pos: int, max_bytes: int, mask: int
) -> tuple[int, int]:
    """Read base-128 groups; at most ``max_bytes``; excess high bits masked like Java."""
    end = len(buf)
    if pos < end:
        b = buf[pos]
        if b < 0x80:  # fast path: one byte
            return b, pos + 1
    result = 0
    shift = 0
    start = pos
    for _ in range(max_bytes):
        if pos >= end:
            raise CorruptRecordError(
                CorruptReason.TRUNCATED, "buffer ends inside a varint", start
            )
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result & mask, pos
        shift += 7
    raise CorruptRecordError(
        CorruptReason.BAD_VARINT, f"varint longer than {max_bytes} bytes", start
    )


def decode_unsigned_varint(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """Unsigned varint (uint32) at ``pos`` -> ``(value, new_pos)``."""
    return _decode_unsigned(buf, pos, MAX_VARINT_BYTES, _MASK32)


def decode_unsigned_varlong(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """Unsigned varlong (uint64) at ``pos`` -> ``(value, new_pos)``."""
    return _decode_unsigned(buf, pos, MAX_VARLONG_BYTES, _MASK64)


def decode_varint(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """ZigZag varint (int32) at ``pos`` -> ``(value, new_pos)``."""
    if pos < len(buf):  # one byte (-64..63: most lengths and deltas), without the general loop
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
    raw, pos = _decode_unsigned(buf, pos, MAX_VARINT_BYTES, _MASK32)
    return (raw >> 1) ^ -(raw & 1), pos


def decode_varlong(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """ZigZag varlong (int64) at ``pos`` -> ``(value, new_pos)``."""
    if pos < len(buf):
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
    raw, pos = _decode_unsigned(buf, pos, MAX_VARLONG_BYTES, _MASK64)
    return (raw >> 1) ^ -(raw & 1), pos
