"""The partition leader's append of a coordinator batch (a transaction marker, or transactional
offsets), as ReplicaManager.appendRecords with AppendOrigin.COORDINATOR does it: acks=all,
internal topics allowed, control batches accepted, producer and coordinator epochs checked by
the log's producer state (INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkasim.protocol import errors as E
from kafkasim.storage.producer_state import AppendOrigin
from kafkasim.storage.verification import VerificationGuard

if TYPE_CHECKING:
    from kafkasim.broker.replica_manager import ReplicaManager
    from kafkasim.runtime.api import NodeRuntime


async def append_coordinator_batch(rt: NodeRuntime, rm: ReplicaManager, topic: str, partition: int, batch: bytes,
                                   timeout_ms: int, verification_guard: VerificationGuard | None = None) -> int:
    """Append one coordinator batch on this leader and wait until it is replicated; the error
    code. `verification_guard`: a transactional offset commit's KIP-890 verification."""
    deadline = rt.monotonic_ms() + timeout_ms
    result = await rm.append_records(topic, partition, batch, -1, origin=AppendOrigin.COORDINATOR,
                                     verification_guard=verification_guard)
    if result.error_code != E.NONE or result.info is None:
        return result.error_code
    return await rm.wait_for_replication(topic, partition, result.info.last_offset + 1, deadline)
