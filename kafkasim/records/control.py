"""Transaction markers (Kafka's EndTransactionMarker). PLACEHOLDER in the w2-txncoord branch: the
"txnlog" helper's kafkasim/records/control.py supersedes this file at merge (same signature);
layout and parsing live there. Here only what the coordinator's WriteTxnMarkers needs."""

from __future__ import annotations

from kafkasim.records.batch import NO_PARTITION_LEADER_EPOCH, ControlRecordType, build_control_batch

__all__ = ["end_txn_marker_batch"]


def end_txn_marker_batch(producer_id: int, producer_epoch: int, coordinator_epoch: int, committed: bool,
                         timestamp_ms: int, partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH) -> bytes:
    """The marker batch the coordinator's WriteTxnMarkers appends (base offset 0: the leader
    stamps the real one)."""
    return build_control_batch(ControlRecordType.COMMIT if committed else ControlRecordType.ABORT,
                               producer_id=producer_id, producer_epoch=producer_epoch,
                               coordinator_epoch=coordinator_epoch, timestamp_ms=timestamp_ms,
                               partition_leader_epoch=partition_leader_epoch)
