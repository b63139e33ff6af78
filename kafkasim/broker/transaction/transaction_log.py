"""TransactionLog: the `__transaction_state` record formats (Kafka 3.9's
kafka.coordinator.transaction.TransactionLog), from the generated TransactionLogKey/Value
(kafkasim.protocol.messages.transaction_log, Kafka's own JSON schemas).

Every key and value starts with its int16 version (MessageUtil.toVersionPrefixedBytes):

    key    int16 0 | TransactionLogKey v0    transactional_id STRING
    value  int16 0 | TransactionLogValue v0  producer_id INT64, producer_epoch INT16,
                                             transaction_timeout_ms INT32, transaction_status INT8,
                                             transaction_partitions NULLABLE ARRAY
                                               [topic STRING, partition_ids ARRAY INT32],
                                             transaction_last_update_timestamp_ms INT64,
                                             transaction_start_timestamp_ms INT64
    tombstone  the key with a null value (an expired transactional id)

Kafka 3.9 writes value v0 until the transaction.version feature is 1 (never in ZooKeeper mode);
transaction_partitions is null for Empty. Records go one per uncompressed batch v2 (CreateTime),
appended with acks=all; a transactional id maps to partition
`Utils.abs(transactionalId.hashCode) % transaction.state.log.num.partitions`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kafkasim.broker.transaction.metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from kafkasim.broker.zk.java_compat import java_string_hash_code, kafka_utils_abs
from kafkasim.protocol.messages.transaction_log import TransactionLogKey, TransactionLogValue

TRANSACTION_STATE_TOPIC_NAME = "__transaction_state"
KEY_VERSION = 0      # TransactionLogKey.HIGHEST_SUPPORTED_VERSION
VALUE_VERSION = 0    # non-flexible: transaction.version 0
_INT16 = struct.Struct(">h")


def partition_for(transactional_id: str, partitions: int) -> int:
    """Utils.abs(transactionalId.hashCode) % partitions (Utils.abs maps Integer.MIN_VALUE to 0)."""
    return kafka_utils_abs(java_string_hash_code(transactional_id)) % partitions


def key_to_bytes(transactional_id: str) -> bytes:
    return _INT16.pack(KEY_VERSION) + TransactionLogKey(transactional_id=transactional_id).encode(KEY_VERSION)


def value_to_bytes(t: TxnTransitMetadata) -> bytes:
    if t.txn_state == TransactionState.EMPTY and t.topic_partitions:
        raise ValueError(f"Transaction is not expected to have any partitions since its state is Empty: {t}")
    P = TransactionLogValue.PartitionsSchema
    parts: list[TransactionLogValue.PartitionsSchema] | None = None
    if t.txn_state != TransactionState.EMPTY:
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(t.topic_partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        parts = [P(topic=topic, partition_ids=ids) for topic, ids in by_topic.items()]
    value = TransactionLogValue(producer_id=t.producer_id, producer_epoch=t.producer_epoch,
                                transaction_timeout_ms=t.txn_timeout_ms, transaction_status=t.txn_state.id,
                                transaction_partitions=parts,
                                transaction_last_update_timestamp_ms=t.txn_last_update_timestamp,
                                transaction_start_timestamp_ms=t.txn_start_timestamp)
    return _INT16.pack(VALUE_VERSION) + value.encode(VALUE_VERSION)


@dataclass(frozen=True)
class TxnKey:
    version: int
    transactional_id: str


@dataclass(frozen=True)
class UnknownKey:
    version: int


def read_txn_record_key(buf: bytes) -> TxnKey | UnknownKey:
    (version,) = _INT16.unpack_from(buf, 0)
    if TransactionLogKey.MIN_VERSION <= version <= TransactionLogKey.MAX_VERSION:
        return TxnKey(version, TransactionLogKey.decode(memoryview(buf)[2:], version).transactional_id)
    return UnknownKey(version)


def read_txn_record_value(transactional_id: str, buf: bytes | None) -> TransactionMetadata | None:
    """The metadata a value holds; None for a tombstone. ValueError for an unknown version."""
    if buf is None:
        return None
    (version,) = _INT16.unpack_from(buf, 0)
    if not TransactionLogValue.MIN_VERSION <= version <= TransactionLogValue.MAX_VERSION:
        raise ValueError(f"Unknown version {version} from the transaction log message value")
    v = TransactionLogValue.decode(memoryview(buf)[2:], version)
    md = TransactionMetadata(transactional_id=transactional_id, producer_id=v.producer_id,
                             last_producer_id=NO_PRODUCER_ID, producer_epoch=v.producer_epoch,
                             last_producer_epoch=NO_PRODUCER_EPOCH, txn_timeout_ms=v.transaction_timeout_ms,
                             state=TransactionState.from_id(v.transaction_status),
                             txn_last_update_timestamp=v.transaction_last_update_timestamp_ms,
                             txn_start_timestamp=v.transaction_start_timestamp_ms)
    if md.state != TransactionState.EMPTY:
        for ps in v.transaction_partitions or []:
            md.add_partitions([TopicPartition(ps.topic, p) for p in ps.partition_ids])
    return md
