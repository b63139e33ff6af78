"""Unit tests of batch v2 header handling, validation reasons, stamping, codecs, legacy edges."""

from __future__ import annotations

import struct

import cramjam
import pytest

from kafkasim.records import (
    CompressionType,
    ControlRecordType,
    CorruptRecordError,
    Record,
    TimestampType,
    build_batch,
    build_control_batch,
    build_empty_batch,
    build_legacy_message_set,
    compress,
    compute_crc,
    convert_legacy_to_v2,
    decode_batch_records,
    decompress,
    iter_batches,
    iter_legacy_messages,
    parse_control_key,
    parse_end_txn_marker,
    peek_magic,
    read_header,
    set_base_offset,
    set_max_timestamp,
    set_partition_leader_epoch,
    validate_batch,
)
from kafkasim.records.batch import CRC_OFFSET, DELETE_HORIZON_FLAG_MASK

pytestmark = pytest.mark.unit

BATCH = build_batch([Record(1000, b"k", b"v"), Record(1010, b"k2", None)])


def reason(fn, *args, **kwargs) -> str:
    with pytest.raises(CorruptRecordError) as info:
        fn(*args, **kwargs)
    return info.value.reason


def test_offset_and_epoch_are_outside_the_crc() -> None:
    buf = bytearray(BATCH)
    crc_before = bytes(buf[CRC_OFFSET : CRC_OFFSET + 4])
    set_base_offset(buf, 0, 2**40 + 7)
    set_partition_leader_epoch(buf, 0, 12345)
    assert (
        bytes(buf[CRC_OFFSET : CRC_OFFSET + 4]) == crc_before
    )  # nothing recomputed...
    h = validate_batch(buf)  # ...and still valid
    assert (h.base_offset, h.partition_leader_epoch, h.last_offset) == (
        2**40 + 7,
        12345,
        2**40 + 8,
    )
    assert compute_crc(buf) == compute_crc(BATCH)
    assert [r.offset for r in decode_batch_records(buf)] == [2**40 + 7, 2**40 + 8]


def test_stamping_through_a_memoryview_at_a_position() -> None:
    buf = bytearray(b"\xee" * 5 + BATCH)
    view = memoryview(buf)
    set_base_offset(view, 5, 99)
    assert validate_batch(view, 5).base_offset == 99
    assert buf[:5] == b"\xee" * 5


def test_fields_inside_the_crc_do_change_it() -> None:
    buf = bytearray(BATCH)
    struct.pack_into(">q", buf, 35, 5)  # maxTimestamp is covered
    assert reason(validate_batch, buf) == "crc_mismatch"


def test_set_max_timestamp_recomputes_crc() -> None:
    buf = bytearray(BATCH)
    set_max_timestamp(buf, 0, TimestampType.LOG_APPEND_TIME, 5555)
    h = validate_batch(buf)
    assert h.timestamp_type == TimestampType.LOG_APPEND_TIME and h.max_timestamp == 5555
    assert [r.timestamp_ms for r in decode_batch_records(buf)] == [5555, 5555]


def test_validation_reasons() -> None:
    assert reason(validate_batch, BATCH[:11]) == "truncated"
    assert reason(validate_batch, BATCH[:-1]) == "truncated"
    short = bytearray(BATCH)
    struct.pack_into(">i", short, 8, 48)
    assert reason(validate_batch, short) == "bad_length"
    struct.pack_into(">i", short, 8, -5)
    assert reason(validate_batch, short) == "bad_length"
    magic = bytearray(BATCH)
    magic[16] = 1
    assert reason(validate_batch, magic) == "bad_magic"
    assert reason(read_header, magic) == "bad_magic"
    assert reason(validate_batch, BATCH, max_batch_size=len(BATCH) - 1) == "too_large"
    validate_batch(BATCH, max_batch_size=len(BATCH))


def test_header_properties() -> None:
    h = read_header(
        build_batch(
            [Record(5, None, b"x")],
            compression=CompressionType.ZSTD,
            is_transactional=True,
            producer_id=4,
            producer_epoch=0,
            base_sequence=2**31 - 1,
        )
    )
    assert (
        h.compression == CompressionType.ZSTD
        and h.is_transactional
        and not h.is_control
    )
    assert h.last_sequence == 2**31 - 1 and h.next_offset == 1 and h.has_producer_id
    assert not h.has_delete_horizon and h.delete_horizon_ms is None
    buf = bytearray(build_batch([Record(5, None, b"x")]))
    struct.pack_into(">h", buf, 21, DELETE_HORIZON_FLAG_MASK)
    h = read_header(buf)
    assert h.has_delete_horizon and h.delete_horizon_ms == 5
    struct.pack_into(">h", buf, 21, 7)  # codec 7 is not a codec
    assert reason(lambda: read_header(buf).compression) == "bad_compression"


def test_empty_batch_like_the_cleaner_leaves() -> None:
    data = build_empty_batch(
        base_offset=10,
        last_offset=14,
        timestamp_ms=77,
        producer_id=3,
        producer_epoch=1,
        base_sequence=20,
    )
    h = validate_batch(data)
    assert (h.size_in_bytes, h.record_count, h.last_offset, h.last_sequence) == (
        61,
        0,
        14,
        24,
    )
    assert decode_batch_records(data) == []


def test_control_parse_errors() -> None:
    assert reason(parse_control_key, b"\x00\x00\x00") == "bad_control"
    assert reason(parse_control_key, b"\xff\xff\x00\x01") == "bad_control"
    assert parse_control_key(b"\x00\x00\x00\x63") == (
        0,
        99,
    )  # unknown types are kept as ints
    assert reason(parse_end_txn_marker, b"\x00\x00") == "bad_control"
    h = read_header(
        build_control_batch(
            ControlRecordType.ABORT,
            producer_id=1,
            producer_epoch=0,
            coordinator_epoch=0,
            timestamp_ms=0,
        )
    )
    assert h.is_control and h.is_transactional
    with pytest.raises(ValueError):
        build_control_batch(
            ControlRecordType.LEADER_CHANGE,
            producer_id=1,
            producer_epoch=0,
            coordinator_epoch=0,
            timestamp_ms=0,
        )


def test_builder_rejects_non_increasing_offset_deltas() -> None:
    with pytest.raises(ValueError):
        build_batch(
            [
                Record(1, None, None, offset_delta=2),
                Record(1, None, None, offset_delta=2),
            ]
        )
    with pytest.raises(ValueError):
        build_batch(
            [Record(1, None, None)], timestamp_type=TimestampType.LOG_APPEND_TIME
        )


def test_record_length_lies_are_bad_record() -> None:
    buf = bytearray(BATCH)
    buf[61] += 2  # first record claims 1 more byte than it has
    struct.pack_into(">I", buf, 17, compute_crc(buf))
    assert reason(decode_batch_records, buf) == "bad_record"
    buf = bytearray(BATCH)
    struct.pack_into(">i", buf, 57, 3)  # count says 3 records, there are 2
    struct.pack_into(">I", buf, 17, compute_crc(buf))
    assert reason(decode_batch_records, buf) in ("truncated", "bad_record")
    struct.pack_into(">i", buf, 57, 1)  # count says 1: trailing bytes
    struct.pack_into(">I", buf, 17, compute_crc(buf))
    assert reason(decode_batch_records, buf) == "bad_record"


def test_iter_batches_corruption_reports_position() -> None:
    buf = bytearray(BATCH + BATCH)
    buf[len(BATCH) + 40] ^= 1
    it = iter_batches(buf, validate=True)
    assert next(it)[0] == 0
    with pytest.raises(CorruptRecordError) as info:
        next(it)
    assert info.value.reason == "crc_mismatch" and info.value.pos == len(BATCH)
    assert [p for p, _ in iter_batches(buf)] == [
        0,
        len(BATCH),
    ]  # header-only mode skips CRC


def test_peek_magic() -> None:
    assert peek_magic(BATCH) == 2
    assert peek_magic(build_legacy_message_set([Record(1, None, b"v")], magic=1)) == 1
    assert reason(peek_magic, BATCH[:16]) == "truncated"


# --------------------------------------------------------------------------- compression


@pytest.mark.parametrize("codec", list(CompressionType))
@pytest.mark.parametrize("size", [0, 1, 65_536, 200_000])
def test_codec_round_trip(codec: CompressionType, size: int) -> None:
    data = bytes((i * 7 + i // 300) % 256 for i in range(size))
    assert decompress(codec, compress(codec, data)) == data


def test_snappy_raw_as_librdkafka_sends_it() -> None:
    data = b"librdkafka " * 1000
    assert (
        decompress(CompressionType.SNAPPY, bytes(cramjam.snappy.compress_raw(data)))
        == data
    )


def test_concatenated_gzip_and_zstd_frames() -> None:
    for codec in (CompressionType.GZIP, CompressionType.ZSTD):
        assert (
            decompress(codec, compress(codec, b"ab") + compress(codec, b"cd"))
            == b"abcd"
        )


@pytest.mark.parametrize(
    "codec", [c for c in CompressionType if c != CompressionType.NONE]
)
def test_truncated_streams_are_bad_compression(codec: CompressionType) -> None:
    z = compress(codec, bytes(range(256)) * 50)
    for cut in (5, len(z) // 2, len(z) - 1):
        assert reason(decompress, codec, z[:cut]) == "bad_compression"
    assert reason(decompress, 6, b"") == "bad_compression"


def test_lz4_header_checksum_checked_except_for_magic_0() -> None:
    z = bytearray(compress(CompressionType.LZ4, b"hello" * 100))
    z[6] ^= 0xFF
    assert reason(decompress, CompressionType.LZ4, bytes(z)) == "bad_compression"
    assert decompress(CompressionType.LZ4, bytes(z), magic=0) == b"hello" * 100


def test_lz4_incompressible_blocks_are_stored() -> None:
    x, out = 1, bytearray()
    for _ in range(70_000):  # 64-bit LCG top bytes: incompressible
        x = (x * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
        out.append(x >> 56)
    data = bytes(out)
    z = compress(CompressionType.LZ4, data)
    assert struct.unpack_from("<I", z, 7)[0] & 0x80000000  # first block stored raw
    assert decompress(CompressionType.LZ4, z) == data


# --------------------------------------------------------------------------- legacy


def test_legacy_v1_relative_offsets_and_log_append_time() -> None:
    recs = [Record(5, b"a", b"1"), Record(6, b"b", b"2", offset_delta=4)]
    data = build_legacy_message_set(
        recs,
        magic=1,
        base_offset=100,
        compression=CompressionType.GZIP,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        log_append_time_ms=999,
    )
    msgs = list(iter_legacy_messages(data))
    assert [(m.offset, m.timestamp_ms, m.timestamp_type) for m in msgs] == [
        (100, 999, TimestampType.LOG_APPEND_TIME),
        (104, 999, TimestampType.LOG_APPEND_TIME),
    ]
    h = validate_batch(convert_legacy_to_v2(data))
    assert h.timestamp_type == TimestampType.LOG_APPEND_TIME and h.max_timestamp == 999
    assert h.base_offset == 100 and h.last_offset == 104
    h = validate_batch(
        convert_legacy_to_v2(data, base_offset=0, compression=CompressionType.NONE)
    )
    assert (h.base_offset, h.last_offset, h.compression) == (0, 1, CompressionType.NONE)


def test_legacy_crc_and_partial_handling() -> None:
    data = build_legacy_message_set([Record(1, b"k", b"v")] * 3, magic=0)
    bad = bytearray(data)
    bad[-1] ^= 1
    assert reason(lambda: list(iter_legacy_messages(bad))) == "crc_mismatch"
    assert (
        len(list(iter_legacy_messages(data + data[:20]))) == 3
    )  # partial tail ignored
    assert (
        reason(
            lambda: list(
                iter_legacy_messages(b"\x00" * 8 + b"\x00\x00\x00\x05" + b"\x00" * 10)
            )
        )
        == "bad_length"
    )


def test_legacy_v0_conversion_uses_no_timestamp() -> None:
    v2 = convert_legacy_to_v2(
        build_legacy_message_set([Record(123, b"k", b"v")], magic=0, base_offset=5)
    )
    h = validate_batch(v2)
    assert (h.base_timestamp, h.max_timestamp, h.timestamp_type) == (
        -1,
        -1,
        TimestampType.CREATE_TIME,
    )
    [r] = decode_batch_records(v2)
    assert (r.offset, r.timestamp_ms) == (5, -1)
