"""Compression codecs, framed exactly as Kafka's Java client frames them.

The compression codec id lives in the low 3 bits of a batch's ``attributes``::

    0 NONE   1 GZIP   2 SNAPPY   3 LZ4   4 ZSTD      (5..7 unknown -> corrupt)

What is compressed: for magic 2 the concatenated records after the ``recordsCount`` field;
for magic 0/1 the inner message set stored as the wrapper message's value.

Frames (what ``compress`` writes / ``decompress`` reads):

GZIP   RFC 1952 gzip stream (``java.util.zip.GZIPOutputStream``). We write mtime 0 so output
       is a pure function of input (determinism); readers accept concatenated members.

SNAPPY xerial snappy-java ``SnappyOutputStream`` framing (Kafka's Java client)::

           magic   82 53 4E 41 50 50 59 00     "\\x82SNAPPY\\0"
           version int32 BE = 1
           compat  int32 BE = 1
           then per 32 KiB of input: length int32 BE, raw snappy block of that length

       librdkafka (confluent-kafka, kcat) instead sends ONE raw snappy block with no
       framing (rdkafka_msgset_writer.c: rd_kafka_snappy_compress_iov); Java's
       SnappyInputStream falls back to raw when the magic is absent, and so do we.

LZ4    LZ4 frame format (KIP-57, ``KafkaLZ4BlockOutputStream``)::

           magic   04 22 4D 18                  (0x184D2204 LE)
           FLG     0x60  version 01, block independence 1, no block/content checksum,
                         no content size
           BD      0x40  max block size 64 KiB
           HC      (xxhash32(FLG..BD, seed 0) >> 8) & 0xFF
           blocks  size int32 LE (bit 31 set = stored uncompressed), data
           end     00 00 00 00

       Magic 0 messages predate KIP-57: Kafka computed HC over magic..BD (the "broken"
       checksum) and ignores HC when reading magic 0. We reproduce both quirks.

ZSTD   zstd frames (zstd-jni ``ZstdOutputStreamNoFinalizer``, level 3); readers accept
       frames without a content size and several concatenated frames. magic >= 2 only.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from enum import IntEnum

import cramjam
import lz4.block  # type: ignore[import-untyped]
import zstandard

from .errors import CorruptReason, CorruptRecordError

Buffer = bytes | bytearray | memoryview


class CompressionType(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @property
    def kafka_name(self) -> str:
        """The name Kafka prints (``compresscodec: gzip``) and uses in ``compression.type``."""
        return self.name.lower()


NONE = CompressionType.NONE
GZIP = CompressionType.GZIP
SNAPPY = CompressionType.SNAPPY
LZ4 = CompressionType.LZ4
ZSTD = CompressionType.ZSTD

COMPRESSION_CODEC_MASK = 0x07

# Kafka 3.9 defaults (KIP-390 compression.<codec>.level)
GZIP_DEFAULT_LEVEL = 6  # Deflater.DEFAULT_COMPRESSION
ZSTD_DEFAULT_LEVEL = 3
SNAPPY_BLOCK_SIZE = 32 * 1024  # snappy-java SnappyOutputStream.DEFAULT_BLOCK_SIZE
LZ4_BLOCK_SIZE = 64 * 1024  # KafkaLZ4BlockOutputStream.BLOCKSIZE_64KB

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)

LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"
LZ4_FLG_VERSION = 0x40
LZ4_FLG_BLOCK_INDEPENDENCE = 0x20
LZ4_FLG_BLOCK_CHECKSUM = 0x10
LZ4_FLG_CONTENT_SIZE = 0x08
LZ4_FLG_CONTENT_CHECKSUM = 0x04
LZ4_FLG_RESERVED = 0x02
LZ4_FLG_DICT_ID = 0x01
LZ4_INCOMPRESSIBLE_MASK = 0x80000000
_LZ4_BD_SIZES = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}


def codec_of(value: int) -> CompressionType:
    """Codec id -> enum; an id Kafka does not know is corrupt data, not a bug."""
    try:
        return CompressionType(value)
    except ValueError:
        raise CorruptRecordError(
            CorruptReason.BAD_COMPRESSION, f"unknown compression codec {value}"
        ) from None


# --------------------------------------------------------------------------- public API


def compress(codec: int, data: Buffer, *, magic: int = 2) -> bytes:
    """Compress ``data`` framed as Kafka's Java producer would for message format ``magic``."""
    codec = CompressionType(codec)
    if codec is NONE:
        return bytes(data)
    if codec is GZIP:
        out = gzip.compress(data, compresslevel=GZIP_DEFAULT_LEVEL, mtime=0)
        # Header byte 9 is the OS: Java's GZIPOutputStream (Kafka) writes 255 (unknown), CPython
        # its own (3, Unix) — set it so the bytes are the ones Kafka would store.
        return out[:9] + b"\xff" + out[10:]
    if codec is SNAPPY:
        return _xerial_compress(data)
    if codec is LZ4:
        return lz4_frame_compress(data, broken_header_checksum=(magic == 0))
    if codec is ZSTD:
        if magic < 2:
            raise ValueError("zstd needs message format v2 (magic 2)")
        return zstandard.ZstdCompressor(
            level=ZSTD_DEFAULT_LEVEL, write_content_size=False
        ).compress(data)
    raise AssertionError(codec)  # pragma: no cover - IntEnum is closed


def decompress(codec: int, data: Buffer, *, magic: int = 2, limit: int | None = None) -> bytes:
    """Inverse of :func:`compress`; raises ``CorruptRecordError(bad_compression)``.

    ``limit``: refuse (bad_compression) data that decompresses to more bytes, found without
    holding more than that — a few KiB of gzip or zstd can claim gigabytes (Kafka streams the
    records and never holds them whole; this decoder does)."""
    codec = codec_of(codec)
    try:
        if limit is not None and codec in (GZIP, ZSTD):
            _check_size(codec, data, limit)
        if codec is NONE:
            return bytes(data)
        if codec is GZIP:
            return gzip.decompress(data)
        if codec is SNAPPY:
            return snappy_decompress(data)
        if codec is LZ4:
            return lz4_frame_decompress(data, ignore_header_checksum=(magic == 0), limit=limit)
        if codec is ZSTD:
            return _zstd_decompress(data)
    except CorruptRecordError:
        raise
    except Exception as exc:  # every codec library has its own error types
        raise CorruptRecordError(
            CorruptReason.BAD_COMPRESSION,
            f"{codec.kafka_name}: {type(exc).__name__}: {exc}",
        ) from exc
    raise AssertionError(codec)  # pragma: no cover


def _too_big(codec: CompressionType, limit: int) -> CorruptRecordError:
    return CorruptRecordError(CorruptReason.BAD_COMPRESSION, f"{codec.kafka_name}: decompresses past {limit} bytes")


def _check_size(codec: CompressionType, data: Buffer, limit: int) -> None:
    """Decompress in bounded steps, keeping nothing, until the end or past `limit` (then raise);
    damage is left for the decoder proper to report."""
    if codec is ZSTD:
        reader = zstandard.ZstdDecompressor().stream_reader(bytes(data), read_across_frames=True)
        total = 0
        while chunk := reader.read(1 << 20):
            total += len(chunk)
            if total > limit:
                raise _too_big(codec, limit)
        return
    rest, total = bytes(data), 0
    while rest:   # gzip: one decompressobj per member, as gzip.decompress reads them
        d = zlib.decompressobj(wbits=31)
        while rest and not d.eof:
            total += len(d.decompress(rest, 1 << 20))
            if total > limit:
                raise _too_big(codec, limit)
            rest = d.unconsumed_tail
        if not d.eof:
            return
        rest = d.unused_data


# --------------------------------------------------------------------------- snappy


def _xerial_compress(data: Buffer) -> bytes:
    view = memoryview(data).cast("B")
    out = bytearray(XERIAL_HEADER)
    for start in range(0, len(view), SNAPPY_BLOCK_SIZE):
        block = bytes(
            cramjam.snappy.compress_raw(view[start : start + SNAPPY_BLOCK_SIZE])
        )
        out += struct.pack(">i", len(block))
        out += block
    return bytes(out)


def snappy_decompress(data: Buffer) -> bytes:
    """Xerial-framed (Java) or raw (librdkafka) snappy."""
    view = memoryview(data).cast("B")
    if len(view) < len(XERIAL_HEADER) or view[:8] != XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    pos = len(XERIAL_HEADER)
    out = bytearray()
    while pos < len(view):
        if pos + 4 > len(view):
            raise CorruptRecordError(
                CorruptReason.BAD_COMPRESSION, "snappy: truncated block length"
            )
        (n,) = struct.unpack_from(">i", view, pos)
        pos += 4
        if n < 0 or pos + n > len(view):
            raise CorruptRecordError(
                CorruptReason.BAD_COMPRESSION, f"snappy: bad block length {n}"
            )
        out += cramjam.snappy.decompress_raw(view[pos : pos + n])
        pos += n
    return bytes(out)


# --------------------------------------------------------------------------- lz4


_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxhash32(data: bytes, seed: int = 0) -> int:
    """Plain-Python XXH32; only used for the few bytes of an LZ4 frame descriptor."""
    n = len(data)
    pos = 0
    if n >= 16:
        v = [
            (seed + _P1 + _P2) & _M32,
            (seed + _P2) & _M32,
            seed & _M32,
            (seed - _P1) & _M32,
        ]
        while pos + 16 <= n:
            for i in range(4):
                (lane,) = struct.unpack_from("<I", data, pos)
                v[i] = (_rotl((v[i] + lane * _P2) & _M32, 13) * _P1) & _M32
                pos += 4
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while pos + 4 <= n:
        (lane,) = struct.unpack_from("<I", data, pos)
        h = (_rotl((h + lane * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    while pos < n:
        h = (_rotl((h + data[pos] * _P5) & _M32, 11) * _P1) & _M32
        pos += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


def _lz4_header(broken_header_checksum: bool) -> bytes:
    flg = LZ4_FLG_VERSION | LZ4_FLG_BLOCK_INDEPENDENCE
    bd = 4 << 4  # 64 KiB
    descriptor = bytes((flg, bd))
    # KIP-57: HC covers FLG..BD; pre-KIP-57 (magic 0) Kafka hashed magic..BD.
    hashed = LZ4_FRAME_MAGIC + descriptor if broken_header_checksum else descriptor
    hc = (xxhash32(hashed) >> 8) & 0xFF
    return LZ4_FRAME_MAGIC + descriptor + bytes((hc,))


def lz4_frame_compress(data: Buffer, *, broken_header_checksum: bool = False) -> bytes:
    """LZ4 frame as ``KafkaLZ4BlockOutputStream``: independent 64 KiB blocks, end mark."""
    view = memoryview(data).cast("B")
    out = bytearray(_lz4_header(broken_header_checksum))
    for start in range(0, len(view), LZ4_BLOCK_SIZE):
        chunk = view[start : start + LZ4_BLOCK_SIZE]
        block = lz4.block.compress(chunk, store_size=False)
        if len(block) >= len(chunk):  # Kafka stores incompressible blocks raw
            out += struct.pack("<I", len(chunk) | LZ4_INCOMPRESSIBLE_MASK)
            out += chunk
        else:
            out += struct.pack("<I", len(block))
            out += block
    out += b"\x00\x00\x00\x00"
    return bytes(out)


def _lz4_bad(detail: str) -> CorruptRecordError:
    return CorruptRecordError(CorruptReason.BAD_COMPRESSION, f"lz4: {detail}")


def lz4_frame_decompress(
    data: Buffer, *, ignore_header_checksum: bool = False, limit: int | None = None
) -> bytes:
    """Read an LZ4 frame the way ``KafkaLZ4BlockInputStream`` does.

    Dependent (linked) blocks are rejected like Kafka does; block and content checksums are
    skipped, not verified (Kafka's reader does not verify them either).
    """
    view = memoryview(data).cast("B")
    if len(view) < 7 or view[:4] != LZ4_FRAME_MAGIC:
        raise _lz4_bad("missing frame magic")
    flg, bd = view[4], view[5]
    if flg & 0xC0 != LZ4_FLG_VERSION or flg & (LZ4_FLG_RESERVED | LZ4_FLG_DICT_ID):
        raise _lz4_bad(f"unsupported FLG {flg:#04x}")
    if not flg & LZ4_FLG_BLOCK_INDEPENDENCE:
        raise _lz4_bad("dependent blocks are not supported")
    max_block = _LZ4_BD_SIZES.get((bd >> 4) & 0x07)
    if max_block is None or bd & 0x8F:
        raise _lz4_bad(f"unsupported BD {bd:#04x}")
    pos = 6
    if flg & LZ4_FLG_CONTENT_SIZE:
        pos += 8
    if pos >= len(view):
        raise _lz4_bad("truncated frame descriptor")
    if not ignore_header_checksum:
        expected = (xxhash32(bytes(view[4:pos])) >> 8) & 0xFF
        if view[pos] != expected:
            raise _lz4_bad("frame descriptor checksum mismatch")
    pos += 1
    out = bytearray()
    while True:
        if pos + 4 > len(view):
            raise _lz4_bad("truncated block size")
        (size,) = struct.unpack_from("<I", view, pos)
        pos += 4
        if size == 0:
            break
        stored = bool(size & LZ4_INCOMPRESSIBLE_MASK)
        size &= ~LZ4_INCOMPRESSIBLE_MASK
        if size > max_block or pos + size > len(view):
            raise _lz4_bad(f"bad block size {size}")
        block = view[pos : pos + size]
        pos += size
        if stored:
            out += block
        else:
            out += lz4.block.decompress(block, uncompressed_size=max_block)
        if limit is not None and len(out) > limit:
            raise _lz4_bad(f"decompresses past {limit} bytes")
        if flg & LZ4_FLG_BLOCK_CHECKSUM:
            pos += 4
    return bytes(out)


# --------------------------------------------------------------------------- zstd


def _zstd_decompress(data: Buffer) -> bytes:
    # One decompressobj per frame: handles frames without a content size (zstd-jni's
    # streaming output) and concatenated frames, like ZstdInputStream; and unlike
    # stream_reader it lets us notice a frame cut short (eof never reached).
    rest = bytes(data)
    out = bytearray()
    while rest:
        obj = zstandard.ZstdDecompressor().decompressobj()
        out += obj.decompress(rest)
        if not obj.eof:
            raise CorruptRecordError(
                CorruptReason.BAD_COMPRESSION, "zstd: truncated frame"
            )
        rest = obj.unused_data
    return bytes(out)


__all__ = [
    "GZIP",
    "LZ4",
    "NONE",
    "SNAPPY",
    "ZSTD",
    "CompressionType",
    "codec_of",
    "compress",
    "decompress",
    "lz4_frame_compress",
    "lz4_frame_decompress",
    "snappy_decompress",
    "xxhash32",
]
