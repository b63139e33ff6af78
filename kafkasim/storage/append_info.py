"""AppendInfo: what an append did (Kafka's LogAppendInfo, the fields used here) — its own module
so that both the log and its producer state can name it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(init=False)
class AppendInfo:
    first_offset: int
    last_offset: int
    record_count: int
    max_timestamp: int
    shallow_offset_of_max_timestamp: int
    # LogAppendInfo.logAppendTime as the Produce answer carries it: -1 (NO_TIMESTAMP) for a
    # CreateTime append; a duplicate batch answers its original's timestamp (UnifiedLog.append).
    log_append_time: int

    # Written out (init=False; its defaults are the only ones) so that mypyc compiles it: a
    # dataclass-made __init__ runs interpreted.
    def __init__(self, first_offset: int, last_offset: int, record_count: int, max_timestamp: int,
                 shallow_offset_of_max_timestamp: int = -1, log_append_time: int = -1) -> None:
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.record_count = record_count
        self.max_timestamp = max_timestamp
        self.shallow_offset_of_max_timestamp = shallow_offset_of_max_timestamp
        self.log_append_time = log_append_time
