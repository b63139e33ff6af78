"""Byte-exact vectors, written field by field from Kafka's documented layouts -- never from
kafkasim's own builders -- so a builder bug cannot also "fix" the expectation."""

from __future__ import annotations

import struct
import zlib

import crc32c as crc32c_pkg
import pytest

from kafkasim.records import (
    ControlRecordType,
    Record,
    TimestampType,
    build_batch,
    build_control_batch,
    build_legacy_message_set,
    decode_batch_records,
    decode_unsigned_varint,
    decode_varint,
    decode_varlong,
    encode_unsigned_varint,
    encode_varint,
    encode_varlong,
    validate_batch,
)
from kafkasim.records.compression import LZ4, compress, xxhash32
from kafkasim.records.varint import varint_size, varlong_size

pytestmark = pytest.mark.unit

# ZigZag: 0->0, -1->1, 1->2, -2->3, ... then base-128 little-endian groups, MSB = "more".
VARINT_TABLE = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (63, "7e"),  # zigzag 126
    (-64, "7f"),  # zigzag 127: the largest one-byte value
    (64, "8001"),  # zigzag 128 -> 0x80|0, 0x01
    (300, "d804"),  # zigzag 600 = 0b100_1011000 -> 0xd8, 0x04
    (-(2**31), "ffffffff0f"),  # zigzag 2^32-1
    (2**31 - 1, "feffffff0f"),  # zigzag 2^32-2
]


@pytest.mark.parametrize("value,hexbytes", VARINT_TABLE)
def test_varint_table(value: int, hexbytes: str) -> None:
    raw = bytes.fromhex(hexbytes)
    assert encode_varint(value) == raw
    assert decode_varint(raw, 0) == (value, len(raw))
    assert varint_size(value) == len(raw)
    # a varlong of the same value uses the same zigzag bytes while it fits in 32 bits
    assert encode_varlong(value) == raw
    assert decode_varlong(b"\xaa" + raw, 1) == (value, 1 + len(raw))


def test_varlong_extremes() -> None:
    assert encode_varlong(-(2**63)) == bytes.fromhex("ffffffffffffffffff01")
    assert encode_varlong(2**63 - 1) == bytes.fromhex("feffffffffffffffff01")
    assert varlong_size(-(2**63)) == 10
    assert decode_varlong(bytes.fromhex("feffffffffffffffff01")) == (2**63 - 1, 10)


def test_unsigned_varint() -> None:
    assert encode_unsigned_varint(0) == b"\x00"
    assert encode_unsigned_varint(127) == b"\x7f"
    assert encode_unsigned_varint(128) == b"\x80\x01"
    assert encode_unsigned_varint(2**32 - 1) == bytes.fromhex("ffffffff0f")
    assert decode_unsigned_varint(bytes.fromhex("ffffffff0f")) == (2**32 - 1, 5)


def test_varint_out_of_range_is_a_programming_error() -> None:
    with pytest.raises(ValueError):
        encode_varint(2**31)
    with pytest.raises(ValueError):
        encode_varlong(-(2**63) - 1)


def _hand_batch_k_v_1000() -> bytes:
    """Batch v2 with one record (key b"k", value b"v", timestamp 1000, base offset 0)."""
    record_body = bytes(
        [
            0x00,  # attributes
            0x00,  # timestampDelta varlong 0
            0x00,  # offsetDelta varint 0
            0x02,  # keyLength varint 1 (zigzag 2)
            ord("k"),
            0x02,  # valueLength varint 1
            ord("v"),
            0x00,  # headers count 0
        ]
    )
    record = (
        bytes([len(record_body) * 2]) + record_body
    )  # length varint 8 -> zigzag 16 = 0x10
    after_crc = (
        struct.pack(
            ">h", 0
        )  # attributes: no compression, CreateTime, not txn, not control
        + struct.pack(">i", 0)  # lastOffsetDelta
        + struct.pack(">q", 1000)  # baseTimestamp
        + struct.pack(">q", 1000)  # maxTimestamp
        + struct.pack(">q", -1)  # producerId
        + struct.pack(">h", -1)  # producerEpoch
        + struct.pack(">i", -1)  # baseSequence
        + struct.pack(">i", 1)  # records count
        + record
    )
    crc = crc32c_pkg.crc32c(after_crc)
    batch_length = (
        4 + 1 + 4 + len(after_crc)
    )  # partitionLeaderEpoch + magic + crc + rest
    return (
        struct.pack(">q", 0)  # baseOffset
        + struct.pack(">i", batch_length)
        + struct.pack(">i", -1)  # partitionLeaderEpoch (producer: none)
        + struct.pack(">b", 2)  # magic
        + struct.pack(">I", crc)
        + after_crc
    )


EXPECTED_K_V_1000 = bytes.fromhex(
    "0000000000000000"  # baseOffset 0
    "0000003a"  # batchLength 58
    "ffffffff"  # partitionLeaderEpoch -1
    "02"  # magic
    "716a6189"  # crc (CRC-32C of the rest; Kafka's DumpLogSegments: crc 1902797193 isvalid true)
    "0000"  # attributes
    "00000000"  # lastOffsetDelta
    "00000000000003e8"  # baseTimestamp 1000
    "00000000000003e8"  # maxTimestamp 1000
    "ffffffffffffffff"  # producerId -1
    "ffff"  # producerEpoch -1
    "ffffffff"  # baseSequence -1
    "00000001"  # records count
    "10 00 00 00 02 6b 02 76 00".replace(" ", "")  # the record
)


def test_hand_batch_matches_the_spelled_out_bytes() -> None:
    assert _hand_batch_k_v_1000() == EXPECTED_K_V_1000
    assert len(EXPECTED_K_V_1000) == 70


def test_build_batch_exact_bytes_and_crc() -> None:
    built = build_batch([Record(timestamp_ms=1000, key=b"k", value=b"v")])
    assert built == EXPECTED_K_V_1000
    header = validate_batch(built)
    assert header.crc == 0x716A6189  # 1902797193 in DumpLogSegments' output
    assert header.size_in_bytes == 70
    [rec] = decode_batch_records(built)
    assert (rec.offset, rec.timestamp_ms, rec.key, rec.value, rec.headers) == (
        0,
        1000,
        b"k",
        b"v",
        (),
    )


def test_record_with_headers_and_nulls_exact_bytes() -> None:
    built = build_batch(
        [Record(1005, None, b"", [("a", b"1"), ("bc", None)], offset_delta=3)],
        base_offset=0,
    )
    record_body = (
        b"\x00"  # attributes
        + b"\x00"  # timestampDelta 0 (first record sets the base)
        + b"\x06"  # offsetDelta 3
        + b"\x01"  # key null (-1)
        + b"\x00"  # value length 0 (empty, not null)
        + b"\x04"  # 2 headers
        + b"\x02a"
        + b"\x02"
        + b"1"  # "a" = b"1"
        + b"\x04bc"
        + b"\x01"  # "bc" = null
    )
    assert built[61:] == bytes([len(record_body) * 2]) + record_body
    assert (
        struct.unpack_from(">i", built, 23)[0] == 3
    )  # lastOffsetDelta = the record's delta


def test_control_batch_exact_bytes() -> None:
    built = build_control_batch(
        ControlRecordType.COMMIT,
        producer_id=4660,
        producer_epoch=7,
        coordinator_epoch=9,
        timestamp_ms=5000,
        base_offset=42,
        partition_leader_epoch=3,
    )
    key = bytes.fromhex("00000001")  # version 0, type COMMIT
    value = bytes.fromhex("000000000009")  # version 0, coordinatorEpoch 9
    body = b"\x00\x00\x00" + b"\x08" + key + b"\x0c" + value + b"\x00"
    record = bytes([len(body) * 2]) + body
    after_crc = (
        struct.pack(">hiqqqhii", 0x30, 0, 5000, 5000, 4660, 7, -1, 1) + record
    )  # txn|control
    expected = (
        struct.pack(
            ">qiibI", 42, 9 + len(after_crc), 3, 2, crc32c_pkg.crc32c(after_crc)
        )
        + after_crc
    )
    assert built == expected
    h = validate_batch(built)
    assert h.is_control and h.is_transactional and h.base_sequence == -1


def test_legacy_v0_and_v1_message_exact_bytes() -> None:
    v0_body = (
        b"\x00\x00" + struct.pack(">i", 1) + b"k" + struct.pack(">i", 1) + b"v"
    )  # magic attrs key value
    v0 = struct.pack(">qiI", 7, 4 + len(v0_body), zlib.crc32(v0_body)) + v0_body
    assert (
        build_legacy_message_set([Record(1000, b"k", b"v")], magic=0, base_offset=7)
        == v0
    )
    assert len(v0) == 12 + 14 + 2  # LOG_OVERHEAD + RECORD_OVERHEAD_V0 + key + value

    v1_body = (
        b"\x01\x00"
        + struct.pack(">q", 1000)
        + struct.pack(">i", -1)
        + struct.pack(">i", 1)
        + b"v"
    )
    v1 = struct.pack(">qiI", 0, 4 + len(v1_body), zlib.crc32(v1_body)) + v1_body
    assert build_legacy_message_set([Record(1000, None, b"v")], magic=1) == v1


def test_timestamp_type_names() -> None:
    assert TimestampType.CREATE_TIME.kafka_name == "CreateTime"
    assert TimestampType.LOG_APPEND_TIME.kafka_name == "LogAppendTime"


def test_xxhash32_known_values() -> None:
    # Reference values of XXH32 (seed 0) from the xxHash test suite / python-xxhash docs.
    assert xxhash32(b"") == 0x02CC5D05
    assert xxhash32(b"a") == 0x550D7456
    assert xxhash32(b"Nobody inspects the spammish repetition") == 0xE2293B2F


def test_lz4_frame_header_bytes() -> None:
    frame = compress(LZ4, b"")
    # magic, FLG 0x60 (v01, block independence), BD 0x40 (64 KiB), HC, end mark
    assert frame == bytes.fromhex("04224d1860408200000000")
    assert (xxhash32(b"\x60\x40") >> 8) & 0xFF == 0x82
    broken = compress(LZ4, b"", magic=0)
    assert broken[:6] == frame[:6]
    assert broken[6] == (xxhash32(bytes.fromhex("04224d186040")) >> 8) & 0xFF
