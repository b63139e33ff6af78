"""Checksums used by Kafka's record formats.

- Record batch v2 (magic 2): CRC-32C (Castagnoli), over ``attributes .. end of batch``.
- Legacy messages (magic 0/1): CRC-32 (IEEE, zlib's), over ``magic .. end of message``.

Both return the checksum as an unsigned 32-bit int, which is how Kafka writes it on the wire
(``ByteUtils.writeUnsignedInt``). Both accept any buffer (bytes, bytearray, memoryview)
without copying, which matters for the broker's hot path where a 1 MiB batch is checked
straight out of the socket buffer.
"""

from __future__ import annotations

import zlib

import crc32c as _crc32c

Buffer = bytes | bytearray | memoryview


def crc32c(data: Buffer, value: int = 0) -> int:
    """CRC-32C of ``data``; ``value`` continues a previous checksum (for split buffers)."""
    return int(_crc32c.crc32c(data, value))


def crc32(data: Buffer, value: int = 0) -> int:
    """CRC-32 (IEEE 802.3, as ``java.util.zip.CRC32``) of ``data``."""
    return zlib.crc32(data, value) & 0xFFFFFFFF
