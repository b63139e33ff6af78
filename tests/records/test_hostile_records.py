"""Record parsing of bytes a hostile or odd producer may send (found by tests/serve/test_fuzz.py):
Kafka reads a header key with Utils.utf8 (Java's new String(.., UTF_8)), which replaces what is
not UTF-8 — the batch is valid, and kafkasim must not raise on it. And a decompression bound,
since the broker now decompresses every produced batch to check its records."""

from __future__ import annotations

import pytest

from kafkasim.records import CompressionType, CorruptReason, CorruptRecordError
from kafkasim.records.batch import Record, build_batch, decode_batch_records
from kafkasim.records.compression import compress, decompress

pytestmark = pytest.mark.unit


def test_a_header_key_that_is_not_utf8_reads_with_replacement() -> None:
    batch = bytearray(build_batch([Record(1_700_000_000_000, b"k", b"v", (("hk", b"hv"),))]))
    at = batch.index(b"hk")
    batch[at] = 0xFF                     # an invalid UTF-8 lead byte in the header key
    (rec,) = decode_batch_records(bytes(batch), validate=False)
    assert rec.headers == (("\ufffdk", b"hv"),)
    assert (rec.key, rec.value) == (b"k", b"v")


@pytest.mark.parametrize("codec", [CompressionType.GZIP, CompressionType.ZSTD, CompressionType.LZ4])
def test_decompression_past_the_limit_is_refused(codec: CompressionType) -> None:
    """A few KiB that claim megabytes (zeros compress a thousandfold): past `limit` it is
    bad_compression, found without holding the whole output; within it, the bytes come back."""
    zeros = bytes(4 << 20)
    packed = compress(codec, zeros)
    assert len(packed) < 64 << 10
    with pytest.raises(CorruptRecordError) as exc:
        decompress(codec, packed, limit=1 << 20)
    assert exc.value.reason == CorruptReason.BAD_COMPRESSION
    assert decompress(codec, packed, limit=4 << 20) == zeros
    assert decompress(codec, packed) == zeros
