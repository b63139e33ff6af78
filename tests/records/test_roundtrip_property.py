"""Property tests: build -> validate -> decode round trips, corruption always detected."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkasim.records import (
    CompressionType,
    CorruptRecordError,
    Record,
    TimestampType,
    build_batch,
    build_legacy_message_set,
    convert_legacy_to_v2,
    decode_batch_records,
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
    iter_batches,
    iter_legacy_messages,
    read_header,
    set_base_offset,
    set_partition_leader_epoch,
    validate_batch,
)

pytestmark = pytest.mark.property

SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

small_bytes = st.none() | st.binary(max_size=40)
headers = st.lists(st.tuples(st.text(max_size=8), small_bytes), max_size=3)
timestamps = st.integers(min_value=0, max_value=2**41)


@st.composite
def record_lists(
    draw, min_size: int = 1, max_size: int = 8, with_headers: bool = True
) -> list[Record]:
    n = draw(st.integers(min_value=min_size, max_value=max_size))
    gaps = draw(st.lists(st.integers(min_value=1, max_value=5), min_size=n, max_size=n))
    explicit = draw(st.booleans())
    deltas, d = [], -1
    for g in gaps:
        d += g if explicit else 1
        deltas.append(d)
    return [
        Record(
            draw(timestamps),
            draw(small_bytes),
            draw(small_bytes),
            draw(headers) if with_headers else [],
            delta if explicit else None,
        )
        for delta in deltas
    ]


codecs = st.sampled_from(list(CompressionType))


@given(st.integers(min_value=-(2**31), max_value=2**31 - 1))
def test_varint_round_trip(value: int) -> None:
    raw = encode_varint(value)
    assert decode_varint(raw) == (value, len(raw))


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_varlong_round_trip(value: int) -> None:
    raw = encode_varlong(value)
    assert decode_varlong(raw) == (value, len(raw))


@given(st.binary(max_size=12))
def test_varint_decoder_never_crashes(raw: bytes) -> None:
    try:
        value, pos = decode_varint(raw)
        assert -(2**31) <= value < 2**31 and 1 <= pos <= 5
    except CorruptRecordError as exc:
        assert exc.reason in ("truncated", "bad_varint")


@SETTINGS
@given(
    records=record_lists(),
    codec=codecs,
    base_offset=st.integers(min_value=0, max_value=2**62),
    producer=st.tuples(
        st.integers(-1, 2**40), st.integers(-1, 2**15 - 1), st.integers(-1, 2**31 - 1)
    ),
    txn=st.booleans(),
    log_append=st.none() | timestamps,
)
def test_build_decode_round_trip(
    records, codec, base_offset, producer, txn, log_append
) -> None:
    ts_type = (
        TimestampType.CREATE_TIME
        if log_append is None
        else TimestampType.LOG_APPEND_TIME
    )
    data = build_batch(
        records,
        base_offset=base_offset,
        compression=codec,
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=producer[2],
        is_transactional=txn,
        timestamp_type=ts_type,
        log_append_time_ms=log_append,
    )
    h = validate_batch(data)
    deltas = [
        i if r.offset_delta is None else r.offset_delta for i, r in enumerate(records)
    ]
    assert h.compression == codec and h.is_transactional == txn and not h.is_control
    assert h.timestamp_type == ts_type
    assert (h.base_offset, h.last_offset, h.record_count) == (
        base_offset,
        base_offset + deltas[-1],
        len(records),
    )
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == producer
    assert h.base_timestamp == records[0].timestamp_ms
    assert h.max_timestamp == (
        log_append if log_append is not None else max(r.timestamp_ms for r in records)
    )
    got = decode_batch_records(data)
    assert [g.offset for g in got] == [base_offset + d for d in deltas]
    for g, r in zip(got, records):
        assert g.timestamp_ms == (
            log_append if log_append is not None else r.timestamp_ms
        )
        assert (g.key, g.value, list(g.headers)) == (r.key, r.value, list(r.headers))


@SETTINGS
@given(records=record_lists(max_size=4), codec=codecs, data=st.data())
def test_every_bit_flip_in_crc_region_is_caught(records, codec, data) -> None:
    batch = build_batch(records, compression=codec)
    # Exhaustive over bits would be slow for big batches: sample 40 bit positions per batch
    # (hypothesis explores different positions across examples), plus the CRC field itself.
    n_bits = (len(batch) - 17) * 8
    bits = data.draw(
        st.lists(st.integers(0, n_bits - 1), min_size=1, max_size=40, unique=True)
    )
    for bit in bits:
        flipped = bytearray(batch)
        flipped[17 + bit // 8] ^= 1 << (bit % 8)
        try:
            validate_batch(flipped)
        except CorruptRecordError as exc:
            assert exc.reason == "crc_mismatch"
        else:
            raise AssertionError(f"bit {bit} flip not detected")


def test_every_single_bit_flip_exhaustively_for_a_small_batch() -> None:
    batch = build_batch(
        [Record(1000, b"key", b"value", [("h", b"x")])],
        compression=CompressionType.NONE,
    )
    for byte in range(17, len(batch)):
        for bit in range(8):
            flipped = bytearray(batch)
            flipped[byte] ^= 1 << bit
            try:
                validate_batch(flipped)
            except CorruptRecordError as exc:
                assert exc.reason == "crc_mismatch"
            else:
                raise AssertionError((byte, bit))


@SETTINGS
@given(records=record_lists(max_size=4), codec=codecs)
def test_every_truncation_is_caught(records, codec) -> None:
    batch = build_batch(records, compression=codec)
    for cut in range(len(batch)):
        try:
            validate_batch(batch[:cut])
        except CorruptRecordError as exc:
            assert exc.reason == "truncated"
        else:
            raise AssertionError(cut)
        it = iter_batches(batch[:cut])
        assert list(it) == [] and it.position == 0 and it.partial == (cut > 0)


@SETTINGS
@given(
    st.lists(st.tuples(record_lists(max_size=3), codecs), min_size=1, max_size=5),
    st.integers(0, 60),
)
def test_iter_batches_on_concatenations(batches, tail) -> None:
    buf = bytearray()
    starts, offset = [], 0
    for records, codec in batches:
        b = bytearray(build_batch(records, compression=codec))
        set_base_offset(b, 0, offset)
        set_partition_leader_epoch(b, 0, 9)
        starts.append(len(buf))
        offset = read_header(b).next_offset
        buf += b
    whole = len(buf)
    last = build_batch(*[batches[0][0]])
    buf += last[: min(tail, len(last) - 1)]  # a trailing partial batch
    it = iter_batches(buf, validate=True)
    found = list(it)
    assert [p for p, _ in found] == starts
    assert all(h.partition_leader_epoch == 9 for _, h in found)
    assert found[-1][1].next_offset == offset
    assert it.position == whole and it.partial == (tail > 0)


@SETTINGS
@given(
    records=record_lists(with_headers=False, max_size=6),
    magic=st.sampled_from([0, 1]),
    codec=st.sampled_from(
        [
            CompressionType.NONE,
            CompressionType.GZIP,
            CompressionType.SNAPPY,
            CompressionType.LZ4,
        ]
    ),
    base=st.integers(0, 2**40),
)
def test_legacy_round_trip_and_conversion(records, magic, codec, base) -> None:
    data = build_legacy_message_set(
        records, magic=magic, base_offset=base, compression=codec
    )
    deltas = [
        i if r.offset_delta is None else r.offset_delta for i, r in enumerate(records)
    ]
    msgs = list(iter_legacy_messages(data))
    assert [m.offset for m in msgs] == [base + d for d in deltas]
    assert [(m.key, m.value) for m in msgs] == [(r.key, r.value) for r in records]
    assert [m.timestamp_ms for m in msgs] == [
        r.timestamp_ms if magic else -1 for r in records
    ]
    v2 = convert_legacy_to_v2(data)
    h = validate_batch(v2)
    assert h.compression == codec
    got = decode_batch_records(v2)
    assert [(g.offset, g.timestamp_ms, g.key, g.value) for g in got] == [
        (m.offset, m.timestamp_ms, m.key, m.value) for m in msgs
    ]


@SETTINGS
@given(st.binary(min_size=0, max_size=200))
def test_garbage_never_crashes_the_decoders(garbage: bytes) -> None:
    for fn in (validate_batch, decode_batch_records):
        try:
            fn(garbage)
        except CorruptRecordError:
            pass
    try:
        list(iter_legacy_messages(garbage))
    except CorruptRecordError:
        pass
    # a valid header with garbage records, CRC fixed up: record parsing must still fail cleanly
    if len(garbage) >= 1:
        body = bytearray(build_batch([Record(1, b"k", b"v")]))[:61] + garbage
        struct.pack_into(">i", body, 8, len(body) - 12)
        from kafkasim.records import compute_crc

        struct.pack_into(">I", body, 17, compute_crc(body))
        try:
            decode_batch_records(body)
        except CorruptRecordError:
            pass
