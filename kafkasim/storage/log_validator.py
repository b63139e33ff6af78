"""LogAppendTime stamping: the part of Kafka's LogValidator (validateMessagesAndAssignOffsets)
that a topic with ``message.timestamp.type=LogAppendTime`` adds to a leader's append.

Per record batch v2 (the only format the log holds: v0/v1 message sets are up-converted first),
both of Kafka's paths come to the same bytes here, because kafkasim keeps the producer's codec:
  - uncompressed (assignOffsetsNonCompressed) and compressed in place
    (validateMessagesAndAssignOffsetsCompressed, inPlaceAssignment): ``setMaxTimestamp(
    LOG_APPEND_TIME, now)`` -- attributes bit 3 set, maxTimestamp (bytes 35..42) = now, CRC
    recomputed. Record timestamp deltas are left as they are; readers of a LogAppendTime batch
    report maxTimestamp for every record.
The append's max timestamp is then ``now`` and its shallow offset of max timestamp the last
offset (one batch per produce), so the time index holds the append time (UnifiedLog.append
hands both to LocalLog.append). Followers append the stamped batch as fetched.
"""

from __future__ import annotations

from kafkasim.records.batch import LOG_APPEND_TIME, BatchHeader, read_header, set_max_timestamp

LOG_APPEND_TIME_CONFIG = "LogAppendTime"  # message.timestamp.type's value


def uses_log_append_time(message_timestamp_type: str) -> bool:
    return message_timestamp_type == LOG_APPEND_TIME_CONFIG


def stamp_log_append_time(buf: bytearray, headers: list[tuple[int, BatchHeader]],
                          now_ms: int) -> list[tuple[int, BatchHeader]]:
    """Stamp every batch of `buf` (at the positions of `headers`) with the append time; returns
    the headers read back, so later steps (producer state, the append) see the stamped batch."""
    stamped = []
    for pos, _ in headers:
        set_max_timestamp(buf, pos, LOG_APPEND_TIME, now_ms)
        stamped.append((pos, read_header(buf, pos)))
    return stamped
