"""Errors raised by the record codecs.

Bad bytes are data, not bugs (ARCHITECTURE rule 6): every decoder in this package turns a
malformed input into a ``CorruptRecordError`` carrying a machine-readable reason, so the
broker can map it to Kafka's error code (CORRUPT_MESSAGE = 2, INVALID_RECORD = 87, ...)
and the log recovery can truncate at the first invalid byte. Programming errors (an
out-of-range value handed to an encoder) stay ``ValueError``.
"""

from __future__ import annotations

from enum import StrEnum


class CorruptReason(StrEnum):
    """Why a byte range is not a valid record batch / message set.

    A ``StrEnum`` so that ``err.reason == "crc_mismatch"`` works for callers that prefer
    plain strings.
    """

    TRUNCATED = "truncated"  # fewer bytes than a length field promises
    BAD_LENGTH = (
        "bad_length"  # a length field that is impossible (too small / negative)
    )
    TOO_LARGE = "too_large"  # batch larger than the caller's limit (max.message.bytes)
    BAD_MAGIC = "bad_magic"  # magic byte not the one expected (or unknown)
    CRC_MISMATCH = "crc_mismatch"  # stored checksum differs from the computed one
    BAD_VARINT = "bad_varint"  # varint longer than its type allows
    BAD_RECORD = "bad_record"  # a record inside a batch does not parse / sizes disagree
    BAD_COMPRESSION = (
        "bad_compression"  # unknown codec or a stream that does not decompress
    )
    BAD_CONTROL = "bad_control"  # control record key/value not the documented layout


class CorruptRecordError(Exception):
    """Raised for any malformed record bytes.

    ``reason`` is a :class:`CorruptReason`; ``detail`` a human sentence; ``pos`` the byte
    position in the caller's buffer where the problem was found, when known.
    """

    def __init__(
        self, reason: CorruptReason | str, detail: str = "", pos: int | None = None
    ) -> None:
        self.reason = CorruptReason(reason)
        self.detail = detail
        self.pos = pos
        where = f" at {pos}" if pos is not None else ""
        super().__init__(
            f"{self.reason.value}{where}: {detail}"
            if detail
            else f"{self.reason.value}{where}"
        )
