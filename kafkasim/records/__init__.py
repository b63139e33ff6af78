"""kafkasim.records: Kafka's record formats, exact to the byte (pure: no I/O, time or randomness).

- ``batch``: record batch v2 (magic 2) -- header, validation, in-place stamping, build/decode,
  control (transaction marker) batches.
- ``legacy``: message sets magic 0/1, nested compression, conversion to v2.
- ``compression``: gzip / snappy (xerial) / lz4 (frame, KIP-57) / zstd as Kafka frames them.
- ``varint``: ZigZag varints as ``ByteUtils``.  ``crc``: CRC-32C and CRC-32.
"""

from .batch import (
    BatchHeader,
    BatchIterator,
    ControlRecordType,
    DecodedRecord,
    LOG_OVERHEAD,
    MAGIC_VALUE_V0,
    MAGIC_VALUE_V1,
    MAGIC_VALUE_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    Record,
    TimestampType,
    build_batch,
    build_control_batch,
    build_empty_batch,
    compute_crc,
    decode_batch_records,
    encode_control_key,
    encode_end_txn_marker,
    iter_batch_records,
    iter_batches,
    parse_control_key,
    parse_end_txn_marker,
    peek_magic,
    read_header,
    set_base_offset,
    set_max_timestamp,
    set_partition_leader_epoch,
    validate_batch,
)
from .compression import CompressionType, compress, decompress
from .crc import crc32, crc32c
from .errors import CorruptReason, CorruptRecordError
from .legacy import (
    LegacyEntry,
    LegacyMessage,
    build_legacy_message_set,
    convert_legacy_to_v2,
    iter_legacy_entries,
    iter_legacy_messages,
    read_legacy_entry,
)
from .varint import (
    decode_unsigned_varint,
    decode_varint,
    decode_varlong,
    encode_unsigned_varint,
    encode_varint,
    encode_varlong,
)

__all__ = [
    "BatchHeader", "BatchIterator", "CompressionType", "ControlRecordType", "CorruptReason",
    "CorruptRecordError", "DecodedRecord", "LOG_OVERHEAD", "LegacyEntry", "LegacyMessage",
    "MAGIC_VALUE_V0", "MAGIC_VALUE_V1", "MAGIC_VALUE_V2", "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH", "NO_PRODUCER_ID", "NO_SEQUENCE", "NO_TIMESTAMP", "RECORD_BATCH_OVERHEAD",
    "Record", "TimestampType", "build_batch", "build_control_batch", "build_empty_batch",
    "build_legacy_message_set", "compress", "compute_crc", "convert_legacy_to_v2", "crc32",
    "crc32c", "decode_batch_records", "decode_unsigned_varint", "decode_varint", "decode_varlong",
    "decompress", "encode_control_key", "encode_end_txn_marker", "encode_unsigned_varint",
    "encode_varint", "encode_varlong", "iter_batch_records", "iter_batches", "iter_legacy_entries",
    "iter_legacy_messages", "parse_control_key", "parse_end_txn_marker", "peek_magic",
    "read_header", "read_legacy_entry", "set_base_offset", "set_max_timestamp",
    "set_partition_leader_epoch", "validate_batch",
]
