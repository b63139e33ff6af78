"""LogAppendTime stamping (kafkasim.storage.log_validator), against Kafka 3.9's LogValidator:
setMaxTimestamp(LOG_APPEND_TIME, now) on the batch as it came -- attributes bit 3, maxTimestamp,
CRC -- with the records (and their timestamp deltas) left byte for byte, compressed or not."""

from __future__ import annotations

import pytest

from kafkasim.records.batch import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    MAX_TIMESTAMP_OFFSET,
    Record,
    build_batch,
    decode_batch_records,
    iter_batches,
    read_header,
    validate_batch,
)
from kafkasim.records.compression import CompressionType
from kafkasim.storage.log_validator import stamp_log_append_time, uses_log_append_time

pytestmark = pytest.mark.unit

NOW = 1_700_000_123_456


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.GZIP])
def test_stamping_sets_type_and_max_timestamp_and_keeps_a_valid_crc(codec: CompressionType) -> None:
    original = build_batch([Record(1000, b"a", b"1"), Record(1005, b"b", b"2")], compression=codec)
    buf = bytearray(original)
    headers = list(iter_batches(buf, validate=True))
    assert headers[0][1].timestamp_type == CREATE_TIME and headers[0][1].max_timestamp == 1005

    stamped = stamp_log_append_time(buf, headers, NOW)

    h = validate_batch(buf, 0)  # raises on a CRC mismatch
    assert h.timestamp_type == LOG_APPEND_TIME and h.max_timestamp == NOW
    assert stamped == [(0, read_header(buf, 0))]
    assert h.base_timestamp == 1000  # the first timestamp and the records' deltas are Kafka's to keep
    assert buf[MAX_TIMESTAMP_OFFSET + 8:] == original[MAX_TIMESTAMP_OFFSET + 8:]
    # Readers report the append time for every record of a LogAppendTime batch.
    assert [r.timestamp_ms for r in decode_batch_records(buf, 0)] == [NOW, NOW]


def test_only_the_log_append_time_setting_turns_it_on() -> None:
    assert uses_log_append_time("LogAppendTime")
    assert not uses_log_append_time("CreateTime")
