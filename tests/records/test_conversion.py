"""Message format conversion against Kafka 3.9.1's own answers.

Down-conversion: tests/resources/records/kafka-3.9.1-down-conversion.json holds, per fetch
offset, the records a real broker stored (Fetch v4) and what it sent for Fetch v0, v2 and v3.
kafkasim must send the same bytes — except inside snappy/lz4 wrappers, whose compressed bytes
depend on the compressor (xerial-snappy / lz4-java vs ours); there the messages, the wrappers'
offsets/attributes/timestamps and the total length must match.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from kafkasim.records.batch import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    ControlRecordType,
    Record,
    build_batch,
    build_control_batch,
    decode_batch_records,
    iter_batches,
    read_header,
)
from kafkasim.records.compression import CompressionType
from kafkasim.records.conversion import (
    UnsupportedCompressionTypeError,
    lazy_down_convert,
    target_compression,
    up_convert,
)
from kafkasim.records.legacy import build_legacy_message_set, iter_legacy_entries, iter_legacy_messages

pytestmark = pytest.mark.unit

VECTORS = Path(__file__).resolve().parents[1] / "resources" / "records" / "kafka-3.9.1-down-conversion.json"
MAGIC_FOR_VERSION = {"0": 0, "2": 1, "3": 1}


def _cases() -> list[tuple[int, str, bytes, int, bytes]]:
    data = json.loads(VECTORS.read_text())
    return [(o["fetch_offset"], v, bytes.fromhex(o["log_hex"]), a["error_code"], bytes.fromhex(a["records_hex"]))
            for o in data["offsets"] for v, a in o["answers"].items()]


def _shape(buf: bytes) -> tuple[object, ...]:
    entries = [(e.offset, e.magic, e.attributes, e.timestamp_ms) for e in iter_legacy_entries(buf)]
    return entries, list(iter_legacy_messages(buf)), len(buf)


def _recompressed(buf: bytes) -> bool:
    codecs = {e.compression for e in iter_legacy_entries(buf)}
    return bool(codecs & {CompressionType.SNAPPY, CompressionType.LZ4})


@pytest.mark.parametrize(("offset", "version", "log", "error", "kafka"), _cases())
def test_down_conversion_sends_what_kafka_sends(offset: int, version: str, log: bytes, error: int,
                                                kafka: bytes) -> None:
    magic = MAGIC_FOR_VERSION[version]
    if error:   # UNSUPPORTED_COMPRESSION_TYPE: the first batch from this offset is zstd
        assert error == 76 and kafka == b""
        with pytest.raises(UnsupportedCompressionTypeError):
            lazy_down_convert(log, magic, offset)
        return
    ours = lazy_down_convert(log, magic, offset)
    if _recompressed(kafka):
        assert _shape(ours) == _shape(kafka)
    else:
        assert ours == kafka


def test_the_vectors_cover_every_codec_and_the_zstd_refusal() -> None:
    cases = _cases()
    codecs = {read_header(log, pos).compression for _, _, log, _, _ in cases for pos, _ in iter_batches(log)}
    assert codecs == set(CompressionType)
    assert any(error for *_, error, _ in cases) and sum(not error for *_, error, _ in cases) >= 40


def _set(magic: int, n: int = 3, codec: CompressionType = CompressionType.NONE) -> bytes:
    return build_legacy_message_set([Record(1000 + i, b"k%d" % i, b"v%d" % i) for i in range(n)],
                                    magic=magic, base_offset=40, compression=codec)


def test_up_conversion_is_one_v2_batch_with_kafkas_timestamps() -> None:
    v0 = up_convert(_set(0), topic_compression_type="producer", timestamp_type=CREATE_TIME, now_ms=5)
    h = read_header(v0)
    assert (h.base_offset, h.records_count, h.last_offset_delta, h.producer_id) == (0, 3, 2, -1)
    assert (h.base_timestamp, h.max_timestamp, h.compression) == (-1, -1, CompressionType.NONE)
    assert [(r.offset, r.timestamp_ms, r.key) for r in decode_batch_records(v0)] == \
        [(0, -1, b"k0"), (1, -1, b"k1"), (2, -1, b"k2")]
    v1 = up_convert(_set(1), topic_compression_type="producer", timestamp_type=CREATE_TIME, now_ms=5)
    assert [r.timestamp_ms for r in decode_batch_records(v1)] == [1000, 1001, 1002]
    appended = up_convert(_set(1), topic_compression_type="producer", timestamp_type=LOG_APPEND_TIME, now_ms=5)
    assert read_header(appended).timestamp_type == LOG_APPEND_TIME and read_header(appended).max_timestamp == 5


@pytest.mark.parametrize(("topic", "source", "stored"), [
    ("producer", CompressionType.GZIP, CompressionType.GZIP),
    ("producer", CompressionType.LZ4, CompressionType.LZ4),
    ("uncompressed", CompressionType.SNAPPY, CompressionType.NONE),
    ("zstd", CompressionType.NONE, CompressionType.ZSTD),
])
def test_up_conversion_stores_the_topics_codec(topic: str, source: CompressionType, stored: CompressionType) -> None:
    batch = up_convert(_set(1, codec=source), topic_compression_type=topic, timestamp_type=CREATE_TIME, now_ms=0)
    assert read_header(batch).compression == stored
    assert [r.value for r in decode_batch_records(batch)] == [b"v0", b"v1", b"v2"]
    assert target_compression("producer", CompressionType.NONE) == CompressionType.NONE


def _v2(base: int, n: int, codec: CompressionType = CompressionType.NONE) -> bytes:
    return build_batch([Record(2000 + i, None, b"x" * 20) for i in range(n)], base_offset=base, compression=codec)


def test_down_conversion_pads_to_the_stored_size_with_an_overflow_message() -> None:
    log = _v2(0, 4) + _v2(4, 4)
    out = lazy_down_convert(log, 1, 2)
    assert len(out) == len(log)                     # the size Kafka promised in the response
    messages = list(iter_legacy_messages(out))
    assert [m.offset for m in messages] == [2, 3, 4, 5, 6, 7]   # uncompressed: from the fetch offset
    tail = out[sum(e.size_in_bytes for e in iter_legacy_entries(out)):]
    offset, length = struct.unpack_from(">qi", tail)
    assert (offset, length) == (-1, max(len(tail) + 1, 61)) and set(tail[12:]) <= {0}


def test_a_compressed_batch_converts_whole_and_control_batches_vanish() -> None:
    marker = build_control_batch(ControlRecordType.COMMIT, base_offset=4, producer_id=7, producer_epoch=0,
                                 coordinator_epoch=0, timestamp_ms=0)
    log = _v2(0, 4, CompressionType.GZIP) + marker
    messages = list(iter_legacy_messages(lazy_down_convert(log, 0, 2)))
    assert [m.offset for m in messages] == [0, 1, 2, 3]   # the wrapper cannot be cut
    assert lazy_down_convert(marker, 1, 4) == b""         # nothing a v0/v1 consumer can read


def test_zstd_after_the_first_batch_ends_the_data_with_the_overflow() -> None:
    log = _v2(0, 2) + _v2(2, 2, CompressionType.ZSTD)
    out = lazy_down_convert(log, 1, 0)
    assert [m.offset for m in iter_legacy_messages(out)] == [0, 1] and len(out) == len(log)
    with pytest.raises(UnsupportedCompressionTypeError):
        lazy_down_convert(_v2(2, 2, CompressionType.ZSTD), 1, 2)
