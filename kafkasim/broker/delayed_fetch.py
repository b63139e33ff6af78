"""DelayedFetch (Kafka's kafka.server.DelayedFetch): the long poll of a Fetch.

As Kafka 3.9 does it:
- The first check is ReplicaManager.fetchMessages' own read (read_once). It answers at once with
  fetch.min.bytes (at least one byte), an error or a diverging epoch. A follower's read records its
  fetch position here, and only here; that may move the ISR and the high watermark.
- Otherwise the fetch waits, watched under a TopicPartitionOperationKey per partition. It is
  checked when a partition's log end offset, high watermark or role changes. A check
  (DelayedFetch.tryComplete) reads nothing. It compares the fetch offset with the end the fetch
  may read to: the log end for a follower, the high watermark for READ_UNCOMMITTED, the last
  stable offset for READ_COMMITTED. It completes on:
  - cases A-E: an error (not the leader any more, an unknown partition, a storage error, a fenced
    epoch);
  - case F: a fetch offset past that end (the leader truncated);
  - case G: enough bytes below the end;
  - case H: a diverging epoch.
- Completed or expired (max_wait_ms), it reads again (onComplete, readFromPurgatory). That read
  records no fetch position.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkasim.broker.purgatory import DelayedOperation, TopicPartitionOperationKey
from kafkasim.protocol import errors as E
from kafkasim.storage.log import KafkaStorageError

if TYPE_CHECKING:
    from kafkasim.broker.partition import Partition
    from kafkasim.broker.replica_manager import FetchResult, FetchSpec, ReplicaManager


class DelayedFetch(DelayedOperation):
    def __init__(self, replica_manager: ReplicaManager, specs: list[FetchSpec], min_bytes: int, max_bytes: int,
                 committed: bool, replica_id: int, timeout_ms: float) -> None:
        super().__init__(timeout_ms)
        self.replica_manager = replica_manager
        self.specs, self.min_bytes, self.max_bytes = specs, min_bytes, max_bytes
        self.committed, self.replica_id = committed, replica_id
        self.results: list[FetchResult] = []  # the response's partitions
        self._read = False  # fetchMessages' own read done
        self._answered = False  # results hold the answer (the first read sufficed)

    def operation_keys(self) -> list[TopicPartitionOperationKey]:
        return [TopicPartitionOperationKey(s.topic, s.partition) for s in self.specs]

    def try_complete(self) -> bool:
        if not self._read:
            self._read = True
            self.results, total = self.replica_manager.read_once(self.specs, self.max_bytes, self.committed,
                                                                 self.replica_id)
            # A diverged fetcher is answered at once too: it must truncate before reading on.
            if total >= max(self.min_bytes, 1) or any(r.error_code or r.diverging_epoch for r in self.results):
                self._answered = True
                return self.force_complete()
            return False
        return self._satisfied() and self.force_complete()

    def on_complete(self) -> None:
        if not self._answered:
            self.results, _ = self.replica_manager.read_once(self.specs, self.max_bytes, self.committed,
                                                             self.replica_id, update_fetch_state=False)

    def _satisfied(self) -> bool:
        """DelayedFetch.tryComplete: whether the fetch can be answered, without reading."""
        rm, follower = self.replica_manager, self.replica_id >= 0
        accumulated = 0
        for s in self.specs:
            p = rm.partitions.get((s.topic, s.partition))
            if p is None or rm.check_fetch_partition(s, p) != E.NONE:
                return True  # cases A-E
            if follower:
                end = p.log_end_offset
            else:
                end = p.last_stable_offset if self.committed else p.high_watermark
            if s.fetch_offset > end:
                return True  # case F
            if s.fetch_offset < end:
                accumulated += self._bytes_below(p, s, end)
            if s.last_fetched_epoch >= 0 and self._diverged(p, s):
                return True  # case H
        return accumulated >= max(self.min_bytes, 1)  # case G

    def _bytes_below(self, p: Partition, s: FetchSpec, end: int) -> int:
        """Kafka's min(endOffset.positionDiff(fetchOffset), partition max bytes): the stored bytes
        of the batches from the fetch offset up to `end`. Most fetches wait for one byte, and any
        offset below the end is that."""
        if self.min_bytes <= 1:
            return 1
        try:
            return len(p.log.read_records(s.fetch_offset, s.max_bytes, max_offset=end))
        except KafkaStorageError:
            return self.min_bytes  # case D: the completing read answers the error

    @staticmethod
    def _diverged(p: Partition, s: FetchSpec) -> bool:
        """Case H: the log no longer holds the fetcher's last fetched epoch where it says (or at
        all): answer so that it truncates."""
        code, epoch, end = p.last_offset_for_leader_epoch(s.current_leader_epoch, s.last_fetched_epoch)
        return code != E.NONE or end < 0 or epoch < 0 or epoch < s.last_fetched_epoch or end < s.fetch_offset
