"""Cheap invariants over every broker's live state, checked as the run goes (only the
simulation can see all brokers at one instant). Each is something Kafka guarantees; states
Kafka allows are not violations (a deposed leader that has not heard of its successor still
believes it leads, with its older epoch; a follower that lost its page cache to a power loss is
briefly in the ISR without the data it had acknowledged).

  hw-above-isr-replica         the leader of a partition (the live one with the highest leader
                               epoch, unless a broker has become leader in a newer one, traced
                               or seen leading) never has a high watermark above the log end
                               offset of a live member of its (maximal) ISR that follows it in
                               the same or an older epoch — the high watermark is what the ISR
                               has. Exempt: a follower restarted after a power loss, until it has
                               caught up to the high watermark of a leader that had not lost
                               power itself (seed 252) or left the ISR once; and one that
                               truncated to a leader which had lost power (it inherits the loss),
                               until it has caught up to a leader that had not, or left the ISR
                               (seed 210: a stale ISR member with the old tail and high watermark
                               may lead next); the same for one that became a follower of such a
                               leader (seed 1607: its log becomes the leader's); leaving the ISR
                               of such a leader ends neither (seed 3307). A leader "that lost
                               power" includes one that inherited a loss this way and has not
                               caught up since: its log is as short (seed 5528: broker-0, back
                               from a power loss, caught up to broker-1, which had truncated to
                               broker-0's own short log). No exemption covers a high watermark
                               above every log end seen on the partition before the latest power
                               loss: what a loss took lies below that, so a high watermark above
                               it counted the follower for records written since. A deposed
                               leader is not judged: when the leader of a newer epoch is down,
                               one that missed its election (its ZooKeeper session expired) still
                               believes it leads with its old ISR, as Kafka allows.
  hw-regression                one leader (node incarnation), one leader epoch: its high
                               watermark never goes backwards.
  leader-epoch-regression      a broker incarnation's leader epoch of a partition never goes
                               backwards (become_leader / become_follower events).
  controller-epoch-regression  each newly elected controller has a higher epoch than every
                               earlier one; a broker incarnation's known controller epoch never
                               goes backwards.
  two-leaders-one-epoch        no two live brokers lead one partition with the same leader epoch.

When: on the events that change this state (produce — the leader appended; become_leader,
become_follower, controller_elected) for the partition named, and over every partition between
the runner's simulation steps (the high watermark also moves on followers' fetches, which are
not traced). The monitor only reads broker objects.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafkasim.cluster.sim_cluster import SimCluster, broker_node_name
from kafkasim.harness.checkers import Anomaly, CheckResult
from kafkasim.runtime.sim.world import SimWorld

TopicPartition = tuple[str, int]
NAMES = ("hw-above-isr-replica", "hw-regression", "leader-epoch-regression", "controller-epoch-regression",
         "two-leaders-one-epoch")
MAX_ANOMALIES = 100  # per invariant: the first ones tell the story; the count keeps going


class InvariantMonitor:
    def __init__(self, world: SimWorld, cluster: SimCluster) -> None:
        self.world, self.cluster = world, cluster
        self.counts: dict[str, int] = {n: 0 for n in NAMES}
        self.anomalies: dict[str, list[Anomaly]] = {n: [] for n in NAMES}
        self._reported: set[tuple[Any, ...]] = set()            # one report per distinct situation
        self._hw: dict[tuple[str, int, TopicPartition, int], int] = {}
        self._epochs: dict[tuple[str, int, TopicPartition], int] = {}
        self._newest_leader_epoch: dict[TopicPartition, int] = {}   # any broker's become_leader
        self._controller_epochs: dict[tuple[str, int], int] = {}
        self._elected_epoch = -1
        self._power_lost: set[str] = set()
        self._suspect_since: dict[str, float] = {}              # node -> restart after a power loss
        self._cleared: dict[tuple[str, TopicPartition], float] = {}
        # (follower, partition) -> when it truncated to, or began to follow, a lossy leader (_lossy:
        # it lost power, or inherited a loss, since it last caught up): the follower's log is now as
        # short as the leader's.
        self._inherited_loss: dict[tuple[str, TopicPartition], float] = {}
        # ... and when it last caught up to the high watermark of a leader that is not lossy (a
        # lossy leader's high watermark is the short one), or left such a leader's ISR.
        self._inherited_cleared: dict[tuple[str, TopicPartition], float] = {}
        # partition -> the highest log end offset seen on any live replica; and its value at the
        # latest power loss, which bounds every power-loss exemption (a lost record lies below it).
        self._seen_leo: dict[TopicPartition, int] = {}
        self._loss_cap: dict[TopicPartition, int] = {}
        self._last_stamp = -1.0
        self._handlers: dict[str, Callable[[str, dict[str, Any]], None]] = {
            "produce": self._on_produce, "become_leader": self._on_become_leader,
            "become_follower": self._on_become_follower,
            "controller_elected": self._on_controller_elected, "node_crash": self._on_crash,
            "node_restart": self._on_restart, "follower_truncated": self._on_truncated,
        }

    # ---------------------------------------------------------------- events
    def on_event(self, node: str, ev: str, fields: dict[str, Any]) -> None:
        handler = self._handlers.get(ev)
        if handler is not None:
            handler(node, fields)

    def _on_produce(self, node: str, f: dict[str, Any]) -> None:
        self.check_partition((f["topic"], f["partition"]))

    def _on_become_leader(self, node: str, f: dict[str, Any]) -> None:
        tp = (f["topic"], f["partition"])
        self._newest_leader_epoch[tp] = max(f["leader_epoch"], self._newest_leader_epoch.get(tp, -1))
        self._on_role(node, f)

    def _on_role(self, node: str, f: dict[str, Any]) -> None:
        tp = (f["topic"], f["partition"])
        key = (node, self.world.nodes[node].incarnation, tp)
        epoch, last = f["leader_epoch"], self._epochs.get(key, -1)
        if epoch < last:
            self._violation("leader-epoch-regression", key, node=node, topic=tp[0], partition=tp[1],
                            leader_epoch=epoch, previous_leader_epoch=last)
        self._epochs[key] = max(epoch, last)
        self.check_partition(tp)

    def _on_become_follower(self, node: str, f: dict[str, Any]) -> None:
        """A follower of a leader whose log came back shorter from a power loss inherits the loss
        as one that truncated to it does (_on_truncated): whether it cuts back or, being further
        behind, only appends, its log becomes the leader's. Seed 1607 of the power-loss
        default-flush swarm: broker-0, back from its own power loss at 99, fetched broker-1's
        post-loss 99-101 and joined the ISR, while broker-2, never truncated, kept the lost
        101-106 and the old high watermark 106 and was elected next."""
        self._on_role(node, f)
        if "leader" in f:
            self._on_truncated(node, f)

    def _on_controller_elected(self, node: str, f: dict[str, Any]) -> None:
        epoch = f["epoch"]
        if epoch <= self._elected_epoch:
            self._violation("controller-epoch-regression", ("elected", epoch), node=node, epoch=epoch,
                            previous_epoch=self._elected_epoch)
        self._elected_epoch = max(self._elected_epoch, epoch)

    def _on_crash(self, node: str, f: dict[str, Any]) -> None:
        if f.get("mode") == "power":
            self._power_lost.add(node)
            self._loss_cap = dict(self._seen_leo)

    def _on_truncated(self, node: str, f: dict[str, Any]) -> None:
        """A follower cut back to a leader whose log is short from a power loss (`_lossy`: its own,
        or one it inherited itself; seed 5528) inherits the loss:
        Kafka's truncation follows the leader, so the follower is as far below the high watermark
        (which another ISR replica, untouched, may still hold) as the leader is."""
        tp, leader = (f["topic"], f["partition"]), broker_node_name(f["leader"])
        if self._lossy(leader, tp):
            self._inherited_loss[(node, tp)] = self._stamp()

    def _on_restart(self, node: str, f: dict[str, Any]) -> None:
        if node in self._power_lost:
            self._power_lost.discard(node)
            self._suspect_since[node] = self._stamp()

    # ---------------------------------------------------------------- checks
    def check_everything(self) -> None:
        live = self.cluster.live_replica_managers()
        for name, rm in live:
            key = (name, self.world.nodes[name].incarnation)
            epoch, last = rm.controller_epoch, self._controller_epochs.get(key, -1)
            if epoch < last:
                self._violation("controller-epoch-regression", key + (epoch,), node=name,
                                known_controller_epoch=epoch, previous=last)
            self._controller_epochs[key] = max(epoch, last)
        for tp in sorted({tp for _, rm in live for tp in rm.partitions}):
            self.check_partition(tp)

    def check_partition(self, tp: TopicPartition) -> None:
        leaders, seen = [], self._seen_leo.get(tp, -1)
        for name, rm in self.cluster.live_replica_managers():
            p = rm.partitions.get(tp)
            if p is None or p.offline:
                continue
            seen = max(seen, p.log.log_end_offset)
            if p.is_leader:
                leaders.append((p.leader_epoch, name, p))
        self._seen_leo[tp] = seen
        if not leaders:
            return
        leaders.sort(key=lambda e: (-e[0], e[1]))
        for (e1, n1, _), (e2, n2, _) in zip(leaders, leaders[1:], strict=False):
            if e1 == e2:
                self._violation("two-leaders-one-epoch", (tp, e1), topic=tp[0], partition=tp[1], leader_epoch=e1,
                                leaders=[n1, n2])
        epoch, name, p = leaders[0]
        # A leader seen counts as having become leader even if its become_leader was never traced
        # (seed 702: paused between taking the epoch and tracing it, then lost power).
        newest = max(epoch, self._newest_leader_epoch.get(tp, -1))
        self._newest_leader_epoch[tp] = newest
        self._check_hw_monotonic(name, tp, epoch, p.high_watermark)
        if epoch >= newest:  # else a deposed leader: its ISR is stale
            self._check_isr_has_hw(name, tp, p)

    def _check_hw_monotonic(self, name: str, tp: TopicPartition, epoch: int, hw: int) -> None:
        key = (name, self.world.nodes[name].incarnation, tp, epoch)
        last = self._hw.get(key, -1)
        if hw < last:
            self._violation("hw-regression", key, node=name, topic=tp[0], partition=tp[1], leader_epoch=epoch,
                            high_watermark=hw, previous_high_watermark=last)
        self._hw[key] = max(hw, last)

    def _check_isr_has_hw(self, name: str, tp: TopicPartition, p: Any) -> None:
        hw, now, leader_lossy = p.high_watermark, self._stamp(), self._lossy(name, tp)
        for broker_id in p.maximal_isr:
            follower = broker_node_name(broker_id)
            replica = self._replica(follower, tp)
            if follower == name or replica is None or replica.leader_epoch > p.leader_epoch:
                continue  # not a live follower of this leader (or it already follows a newer one)
            leo = replica.log.log_end_offset
            if leo >= hw:
                # A lossy leader's high watermark is its short one: catching up to it ends no
                # exemption (seed 252: it may be below the pre-loss one a stale ISR member leads with).
                if not leader_lossy:
                    if self._leader_knows(p, broker_id, leo):
                        self._cleared[(follower, tp)] = now
                    self._inherited_cleared[(follower, tp)] = now
            elif hw <= self._loss_cap.get(tp, -1) and self._lossy(follower, tp):
                continue  # its log is short from a power loss, its own or its leader's: Kafka allows it
            else:
                self._violation("hw-above-isr-replica", (tp, name, p.leader_epoch, follower), node=name,
                                topic=tp[0], partition=tp[1], leader_epoch=p.leader_epoch, high_watermark=hw,
                                isr=list(p.maximal_isr), replica=follower, replica_log_end_offset=leo)
        for broker_id in self._out_of_isr(p):
            if self._leader_current(p, broker_id, tp):
                self._cleared[(broker_node_name(broker_id), tp)] = now
            if not leader_lossy:
                # Out of the ISR of a lossy leader, a follower rejoins by catching up to that
                # leader's short log: its inherited loss goes on (seed 3307).
                self._inherited_cleared[(broker_node_name(broker_id), tp)] = now

    @staticmethod
    def _leader_knows(p: Any, broker_id: int, leo: int) -> bool:
        """The leader's record of the follower's log end is not above the real one. A leader that
        stays leader into a new epoch keeps its followers' states (Partition.makeLeader resets
        them only when it was not leader), so a follower that lost its tail to a power loss and
        has not fetched since is still recorded at its old end, and the high watermark may rise
        to it (seed 4169: 104 over a follower back at 103, its old HW 103 reached at once).
        Its exemption ends only once the leader has taken a fetch from it."""
        record = p.remote_replicas.get(broker_id)
        return record is None or record.log_end_offset <= leo

    def _leader_current(self, p: Any, broker_id: int, tp: TopicPartition) -> bool:
        """Out of the ISR, a follower rejoins only by catching up, so its power-loss exemption can
        end; but only once it runs as a replica and the leader's record of it is not from before
        the loss. Seed 5005: broker-2, back from a power loss (its log cut from 157 to 144) but not
        yet registered, was out of the ISR; its fetch at 157 from before the loss, held while the
        leader was paused, then reached the leader, which added it to the ISR with the high
        watermark at 157 (Kafka 3.9 in ZooKeeper mode asks only that the broker be alive in its
        metadata cache, and its old ZooKeeper session still was)."""
        replica = self._replica(broker_node_name(broker_id), tp)
        return replica is not None and self._leader_knows(p, broker_id, replica.log.log_end_offset)

    def _lost_power_on(self, name: str, tp: TopicPartition) -> bool:
        """`name` restarted after a power loss and has not caught up on tp since (as a follower)."""
        return self._suspect_since.get(name, -1.0) > self._cleared.get((name, tp), -1.0)

    def _lossy(self, name: str, tp: TopicPartition) -> bool:
        """`name`'s log of tp may be short from a power loss: its own (not caught up since), or one
        it inherited by truncating to, or following, a lossy leader (not cleared since). Either
        way catching up to it proves nothing about the records above it (seeds 252, 5528)."""
        return self._lost_power_on(name, tp) or (
            self._inherited_loss.get((name, tp), -1.0) > self._inherited_cleared.get((name, tp), -1.0))

    @staticmethod
    def _out_of_isr(p: Any) -> list[int]:
        return [b for b in p.assignment if b not in p.maximal_isr]

    def _replica(self, name: str, tp: TopicPartition) -> Any | None:
        rm = self.cluster.replica_manager(name)
        if rm is None:
            return None
        replica = rm.partitions.get(tp)
        return None if replica is None or replica.offline else replica

    # ---------------------------------------------------------------- results
    def _stamp(self) -> float:
        """Now, in simulated ms, but strictly after every earlier stamp: the exemptions compare
        when things happened, and a follower can leave the ISR's check and begin following a
        power-lost leader at one instant (seed 1607), in that order."""
        self._last_stamp = max(self.world.now_ms(), self._last_stamp + 1e-9)
        return self._last_stamp

    def _violation(self, check: str, key: tuple[Any, ...], **detail: Any) -> None:
        if (check,) + key in self._reported:
            return
        self._reported.add((check,) + key)
        self.counts[check] += 1
        if len(self.anomalies[check]) < MAX_ANOMALIES:
            detail["t_ms"] = round(self.world.now_ms(), 3)
            self.anomalies[check].append(Anomaly(check, detail))

    def results(self) -> list[CheckResult]:
        return [CheckResult(n, list(self.anomalies[n])) for n in NAMES]
