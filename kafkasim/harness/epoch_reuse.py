"""epoch-reused-after-power-loss: a leader that lost the unflushed tail of its log to a power loss
and then led the *same* leader epoch again, so that a follower which had fetched that tail keeps
records of that epoch the leader no longer has, and Kafka's epoch checks cannot tell.

How Kafka 3.9 (ZooKeeper mode) gets there: the broker restarts and registers again before the
controller notices it was gone (a controller failover that reads /brokers/ids after the
re-registration, KafkaController.onControllerFailover), so the controller sends the partition's
unchanged state, leader = that broker in epoch E, and the restarted broker becomes leader of E
with its shorter log (Partition.makeLeader). Its followers get no LeaderAndIsr (the epoch is not
newer). A follower whose fetch offset is above the leader's new log end learns of it by
truncation on fetch (Partition.fetchRecords answers a diverging epoch only while the leader's
end of the fetched epoch, `lastOffsetForLeaderEpoch`, is below the fetch offset); one that
fetches again only once the leader has written past its fetch offset in E sees nothing wrong:
epoch E ends at the leader's log end, above the fetch offset, and the follower appends the
leader's new records after its own old ones (AbstractFetcherThread, UnifiedLog.appendAsFollower
checks only that offsets grow). The replicas then differ below the high watermark, for good.

The leader may also resume E below where E first began (it lost the first E batches and some of
the epoch before): a follower that had fetched E keeps its batches of the older epoch at and
above the resume offset too (power-loss-default-flush-swarm seed 1184: broker-1 began epoch 3 at
293, came back at 266 leading 3; broker-2, last fetched epoch 3 at 353, kept its epoch-2 266-292).
Its fetch names epoch 3, whose end on the leader is the log end, so Kafka truncates nothing.

The watch also keeps, per (broker, partition), the lowest log end offset the broker led the
partition from after a power loss of that broker, whatever the epoch (`led_after_power_loss`):
from there on the leader's log holds what it wrote since, and a replica that has not yet
truncated against it may still hold records the leader lost, below the replica's own high
watermark too, when the power loss took records the leader had acknowledged (seeds 1450: the
same epoch again; 1480: a new epoch, broker-2 alone in the ISR after losing offsets 32-270).

The watch learns it from the trace: a broker's `become_leader` of (partition, E) after a power
loss of that broker that came after it had already become leader of (partition, E). From that
restart's log end offset on, a replica's batch of epoch E that differs from the leader's is
this, not a replication bug; any other difference stays replica-divergence.
"""

from __future__ import annotations

from typing import Any

TopicPartition = tuple[str, int]


class EpochReuseWatch:
    def __init__(self) -> None:
        self._leader_of: dict[tuple[TopicPartition, int], str] = {}   # (tp, epoch) -> who led it
        self._lost_power: set[tuple[str, TopicPartition, int]] = set()
        # tp -> epoch -> the lowest log end offset a power-lost leader resumed that epoch from
        self.reused: dict[TopicPartition, dict[int, int]] = {}
        # broker -> the partitions it has led since its last power loss (absent: never lost power)
        self._led_since_loss: dict[str, set[TopicPartition]] = {}
        # (broker, tp) -> the lowest log end offset it first led tp from after a power loss
        self._resumed_at: dict[tuple[str, TopicPartition], int] = {}

    def on_event(self, node: str, ev: str, fields: dict[str, Any]) -> None:
        if ev == "node_crash" and fields.get("mode") == "power":
            self._lost_power.update((node, tp, e) for (tp, e), n in self._leader_of.items() if n == node)
            self._led_since_loss[node] = set()
        elif ev == "become_leader":
            tp, epoch = (str(fields["topic"]), int(fields["partition"])), int(fields["leader_epoch"])
            self._on_lead_after_loss(node, tp, int(fields["log_end_offset"]))
            if (node, tp, epoch) in self._lost_power:
                self._lost_power.discard((node, tp, epoch))
                by_epoch = self.reused.setdefault(tp, {})
                end = int(fields["log_end_offset"])
                by_epoch[epoch] = min(end, by_epoch.get(epoch, end))
            self._leader_of[(tp, epoch)] = node

    def _on_lead_after_loss(self, node: str, tp: TopicPartition, end: int) -> None:
        led = self._led_since_loss.get(node)
        if led is None or tp in led:
            return
        led.add(tp)
        key = (node, tp)
        self._resumed_at[key] = min(end, self._resumed_at.get(key, end))

    def led_after_power_loss(self, node: str, tp: TopicPartition) -> int | None:
        """The lowest log end offset `node` first led `tp` from after one of its power losses
        (None: it never led tp after losing power)."""
        return self._resumed_at.get((node, tp))

    def explains(self, tp: TopicPartition, replica_batch: list[int], epochs_above: set[int] | None = None
                 ) -> int | None:
        """The offset the leader resumed a reused epoch E from, when `replica_batch` ([base, last,
        epoch, crc]) is at or above it and either of epoch E, or of an older epoch with a batch of
        E above it in the replica (`epochs_above`: the epochs of the replica's later batches);
        None otherwise."""
        base, epoch = replica_batch[0], replica_batch[2]
        for reused_epoch, start in sorted(self.reused.get(tp, {}).items()):
            if base < start:
                continue
            if epoch == reused_epoch or (epoch < reused_epoch and reused_epoch in (epochs_above or set())):
                return start
        return None
