"""DelayedFetch (Kafka's kafka.server.DelayedFetch): the long poll of a Fetch — done once a read
of its partitions returns fetch.min.bytes (at least one byte) or any partition answers an error
or a diverging epoch; expired after max_wait_ms with what the last read found. Watched under a
TopicPartitionOperationKey per partition, checked when a partition's log end offset, high
watermark or role changes. Each check reads (ReplicaManager.read_once); a follower's read also
records its fetch position, which may move the ISR and the high watermark. A READ_COMMITTED read
stops at the last stable offset, so such a fetch waits for the LSO (a transaction's marker
passing the high watermark), not for the high watermark alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkasim.broker.purgatory import DelayedOperation, TopicPartitionOperationKey

if TYPE_CHECKING:
    from kafkasim.broker.replica_manager import FetchResult, FetchSpec, ReplicaManager


class DelayedFetch(DelayedOperation):
    def __init__(self, replica_manager: ReplicaManager, specs: list[FetchSpec], min_bytes: int, max_bytes: int,
                 committed: bool, replica_id: int, timeout_ms: float) -> None:
        super().__init__(timeout_ms)
        self.replica_manager = replica_manager
        self.specs, self.min_bytes, self.max_bytes = specs, min_bytes, max_bytes
        self.committed, self.replica_id = committed, replica_id
        self.results: list[FetchResult] = []  # the response's partitions: the last read's

    def operation_keys(self) -> list[TopicPartitionOperationKey]:
        return [TopicPartitionOperationKey(s.topic, s.partition) for s in self.specs]

    def try_complete(self) -> bool:
        self.results, total = self.replica_manager.read_once(self.specs, self.max_bytes, self.committed,
                                                             self.replica_id)
        # A diverged fetcher is answered at once too: it must truncate before reading on.
        if total >= max(self.min_bytes, 1) or any(r.error_code or r.diverging_epoch for r in self.results):
            return self.force_complete()
        return False
