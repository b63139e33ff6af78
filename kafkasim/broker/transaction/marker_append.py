"""The partition leader's append of a transaction marker, as ReplicaManager.appendRecords with
AppendOrigin.COORDINATOR does it (acks=all, internal topics allowed, no client validation).

STOPGAP of the w2-txncoord branch: the "txnlog" helper makes the log accept control batches from
the coordinator origin (producer state, last stable offset, aborted-transaction index); once that
is merged, `append_marker` becomes a call of the ReplicaManager's coordinator-origin append and
this module goes. Until then the batch is appended below the producer-state checks (which refuse
every transactional batch) and the producer's entry only records the coordinator epoch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkasim.protocol import errors as E
from kafkasim.records.batch import read_header
from kafkasim.storage.log import KafkaStorageError

if TYPE_CHECKING:
    from kafkasim.broker.replica_manager import ReplicaManager
    from kafkasim.runtime.api import NodeRuntime


async def append_coordinator_batch(rt: NodeRuntime, rm: ReplicaManager, topic: str, partition: int, batch: bytes,
                        timeout_ms: int) -> int:
    """Append one coordinator batch (a marker, or transactional offsets) on this leader and wait
    until it is replicated; the error code."""
    p = rm.get_partition(topic, partition)
    if p is None:
        return E.UNKNOWN_TOPIC_OR_PARTITION
    if p.offline:
        return E.KAFKA_STORAGE_ERROR
    if not p.is_leader:
        return E.NOT_LEADER_OR_FOLLOWER
    if len(p.isr) < p.min_insync_replicas:
        return E.NOT_ENOUGH_REPLICAS
    deadline = rt.monotonic_ms() + timeout_ms
    header = read_header(batch, 0)
    try:
        info = p.log.append_as_leader(bytearray(batch), [(0, header)], p.leader_epoch)
    except KafkaStorageError:
        rm.on_storage_error()
        return E.KAFKA_STORAGE_ERROR
    entry = p.log.producer_state_manager.producers.get(header.producer_id)
    if entry is not None:
        entry.coordinator_epoch = max(entry.coordinator_epoch, _coordinator_epoch(batch))
    p.log.producer_state_manager.last_map_offset = info.last_offset + 1
    p.maybe_increment_leader_hw()
    p.try_complete_delayed_requests()
    return await rm.wait_for_replication(topic, partition, info.last_offset + 1, deadline)


def _coordinator_epoch(batch: bytes) -> int:
    """The coordinator epoch of a one-record marker batch (the value's last 4 bytes)."""
    return int.from_bytes(batch[-5:-1], "big", signed=True)
