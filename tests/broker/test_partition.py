"""Partition's replication rules, tested directly (no server, no controller): a Partition over a
Log on a simulated disk, a clock the test moves, and an AlterPartition submitter that records
what the leader proposes. Each expectation was checked against Kafka 3.9's Partition.scala and
Replica.scala; where kafkasim differs the test states Kafka's behaviour and is marked
xfail(strict=True) with the difference.

Rules covered: the high watermark (min log end offset over the maximal ISR, never backwards,
never past the log end, still while the ISR is below the effective min ISR), acks=all (every
ISR member, min.insync.replicas capped by the replication factor), ISR expansion and shrink
proposed with AlterPartition (KIP-497 maximal ISR while pending), the controller's answers,
LeaderAndIsr role changes (stale partition epochs skipped, KIP-704 recovery), and
OffsetForLeaderEpoch answers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from kafkasim.broker.partition import (
    LEADER_RECOVERY_RECOVERED,
    LEADER_RECOVERY_RECOVERING,
    AppendError,
    Partition,
    PartitionState,
    Replica,
    validate_produce_records,
)
from kafkasim.protocol import errors as E
from kafkasim.records.batch import CREATE_TIME, LOG_APPEND_TIME, BatchHeader, Record, build_batch, iter_batches
from kafkasim.runtime.api import NodeRuntime
from kafkasim.runtime.sim.world import SimWorld
from kafkasim.storage.log import AppendInfo, Log, LogConfig

pytestmark = pytest.mark.sim

LAG_MS = 10_000        # replica.lag.time.max.ms
T0 = 1_000_000.0       # a clock far from 0, as Kafka's wall clock is (lastCaughtUpTimeMs 0 = "never")
LEADER = 0


class Harness:
    """One broker (id 0) hosting partition t-0: its clock, its log and what it proposed."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.clock = T0
        self.proposals: list[tuple[list[int], int]] = []   # (proposed ISR, leader recovery state)
        self.dead: set[int] = set()     # brokers not alive in the metadata cache

    def now(self) -> float:
        return self.clock

    def tick(self, ms: float) -> None:
        self.clock += ms

    def _record(self, partition: Partition, isr: list[int], recovery: int) -> None:
        self.proposals.append((list(isr), recovery))

    def partition(self, *, submit: bool = True, high_watermark: int | None = None) -> Partition:
        """A replica not yet told its role (as ReplicaManager creates it before LeaderAndIsr)."""
        return Partition("t", 0, self.log, -1, False, local_broker_id=LEADER, high_watermark=high_watermark,
                         now_ms=self.now, replica_lag_time_max_ms=LAG_MS,
                         alter_partition=self._record if submit else None,
                         is_alive_broker=lambda b: b not in self.dead)

    async def lead(self, p: Partition, epoch: int, isr: list[int], replicas: list[int], partition_epoch: int,
                   recovery: int = LEADER_RECOVERY_RECOVERED) -> bool:
        """LeaderAndIsr making broker 0 leader, as ReplicaManager._make_leader applies it."""
        return await p.become_leader(PartitionState(LEADER, epoch, isr, replicas, partition_epoch=partition_epoch,
                                                    leader_recovery_state=recovery))

    async def produce(self, p: Partition, n: int = 1, acks: int = 1) -> AppendInfo:
        """n single-record batches; the info of the last one."""
        info: AppendInfo | None = None
        for _ in range(n):
            buf = build_batch([Record(int(self.clock), b"k", b"v")])
            info = await p.append_records_to_leader(validate_produce_records(buf, p.log.config), acks)
        assert info is not None
        return info

    def fetch(self, p: Partition, replica: int, offset: int) -> None:
        """A follower fetch at `offset` (its log end offset) arriving now."""
        p.update_follower_fetch_state(replica, offset, 0, p.log_end_offset)


def run(body: Callable[[Harness], Awaitable[None]], config: LogConfig | None = None) -> None:
    """Run the async body on a fresh simulated node whose disk holds the log t-0."""
    world = SimWorld(1)
    node = world.add_node("b")
    raised: list[BaseException] = []

    async def main(rt: NodeRuntime) -> None:
        try:
            await body(Harness(await Log.load(rt, "t-0", config or LogConfig())))
        except BaseException as exc:  # re-raised below, outside the simulation
            raised.append(exc)

    task = node.runtime.spawn(main(node.runtime), name="test")
    while not task.done():
        assert world.now_ms() < 1_000_000, "partition test hung"
        world.run(world.now_ms() + 1_000)
    if raised:
        raise raised[0]
    assert world.failures == [], world.failures


def check_hw_invariants(p: Partition) -> None:
    assert p.log_start_offset <= p.high_watermark <= p.log_end_offset


# ==================================================================== high watermark
def test_hw_is_the_min_log_end_offset_over_the_isr() -> None:
    async def body(h: Harness) -> None:
        p = h.partition()
        await h.lead(p, 1, [0, 1, 2], [0, 1, 2], 1)
        await h.produce(p, 5)
        assert p.log_end_offset == 5
        assert p.high_watermark == 0   # followers not heard from in this epoch hold it
        h.fetch(p, 1, 5)
        assert p.high_watermark == 0   # replica 2 (in the ISR) still unknown
        h.fetch(p, 2, 3)
        assert p.high_watermark == 3
        check_hw_invariants(p)
        h.fetch(p, 1, 5)
        assert p.high_watermark == 3   # the slowest ISR member rules
        h.fetch(p, 2, 5)
        assert p.high_watermark == 5
        check_hw_invariants(p)
    run(body)


def test_a_follower_outside_the_isr_does_not_hold_the_hw_back() -> None:
    async def body(h: Harness) -> None:
        p = h.partition()
        await h.lead(p, 1, [0, 1], [0, 1, 2], 1)
        await h.produce(p, 5)
        h.fetch(p, 1, 3)
        assert p.high_watermark == 3
        h.fetch(p, 2, 0)               # far behind, never caught up: not about to join
        assert h.proposals == []       # below the HW: not proposed for the ISR either
        h.fetch(p, 1, 5)
        assert p.high_watermark == 5   # 2, at 0, does not hold it
    run(body)


def test_a_caught_up_follower_about_to_join_holds_the_hw() -> None:
    """Kafka's shouldWaitForReplicaToJoinIsr: a replica outside the ISR but caught up (within
    replica.lag.time.max.ms) holds the HW, so it can reach it and join. No submitter here, so
    the rule is seen without a pending expansion."""
    async def body(h: Harness) -> None:
        p = h.partition(submit=False)
        await h.lead(p, 1, [0, 1], [0, 1, 2], 1)
        await h.produce(p, 2)
        h.fetch(p, 1, 2)
        h.fetch(p, 2, 2)               # caught up to the leader's end now
        assert p.high_watermark == 2
        await h.produce(p, 3)
        h.fetch(p, 1, 5)
        assert p.high_watermark == 2   # 2 (caught up LAG_MS ago at most) is waited for
        h.tick(LAG_MS + 1)
        await h.produce(p, 1)
        h.fetch(p, 1, 6)
        assert p.high_watermark == 6   # 2 has lagged too long: no longer waited for
    run(body)


def test_hw_never_moves_backwards_on_the_leader() -> None:
    async def body(h: Harness) -> None:
        p = h.partition()
        await h.lead(p, 1, [0, 1], [0, 1, 2], 1)
        await h.produce(p, 5)
        h.fetch(p, 1, 5)
        assert p.high_watermark == 5
        h.fetch(p, 1, 2)               # an ISR member reporting less (e.g. after a truncation)
        assert p.high_watermark == 5
        await h.lead(p, 2, [0, 1, 2], [0, 1, 2], 2)   # new epoch: 2 joins the ISR at an unknown offset
        assert p.high_watermark == 5
        h.fetch(p, 2, 1)
        assert p.high_watermark == 5
        await h.produce(p, 1)
        h.fetch(p, 1, 6)
        assert p.high_watermark == 5   # 2 (at 1) holds it, but does not pull it back
        check_hw_invariants(p)
    run(body)


def test_hw_never_passes_the_log_end_offset() -> None:
    async def body(h: Harness) -> None:
        for _ in range(3):
            h.log.append_as_leader(*_batch(), leader_epoch=0)
        p = h.partition(high_watermark=100)   # a checkpoint beyond the log (lost unflushed tail)
        assert p.high_watermark == 3
        await h.lead(p, 1, [0], [0], 1)
        assert p.high_watermark == 3
        await h.produce(p, 2)
        assert p.high_watermark == p.log_end_offset == 5   # alone in the ISR: everything committed
        check_hw_invariants(p)
    run(body)


def test_hw_does_not_advance_while_the_isr_is_below_min_insync_replicas() -> None:
    """Kafka 3.7+ maybeIncrementLeaderHW (KAFKA-15583) returns at once while isUnderMinIsr: the
    committed ISR is smaller than min(min.insync.replicas, replication factor). Even acks=1
    writes stay above the HW; a follower's pending expansion (maximal ISR) does not count."""
    async def body(h: Harness) -> None:
        p = h.partition()
        p.min_insync_replicas = 2
        await h.lead(p, 1, [0], [0, 1], 1)
        await h.produce(p, 3, acks=1)
        assert p.high_watermark == 0
        h.fetch(p, 1, 3)                       # caught up: proposed for the ISR
        assert h.proposals == [([0, 1], LEADER_RECOVERY_RECOVERED)] and sorted(p.maximal_isr) == [0, 1]
        assert p.high_watermark == 0           # the committed ISR is still [0]
        p.on_alter_partition_response(E.NONE, 1, [0, 1], 2, LEADER_RECOVERY_RECOVERED)
        assert p.high_watermark == 3
    run(body)


def test_min_insync_replicas_above_the_replication_factor_does_not_hold_the_hw() -> None:
    """effectiveMinIsr caps min.insync.replicas by the replication factor: a single-replica
    partition with min.insync.replicas=2 is not under min ISR."""
    async def body(h: Harness) -> None:
        p = h.partition()
        p.min_insync_replicas = 2
        await h.lead(p, 1, [0], [0], 1)
        await h.produce(p, 3, acks=1)
        assert p.high_watermark == 3
    run(body)


# ==================================================================== acks=all
def test_acks_all_completes_only_when_every_isr_member_has_the_offset() -> None:
    async def body(h: Harness) -> None:
        p = h.partition()
        p.min_insync_replicas = 2
        await h.lead(p, 1, [0, 1, 2], [0, 1, 2], 1)
        info = await h.produce(p, 1, acks=-1)
        required = info.last_offset + 1        # DelayedProduce waits for the HW to pass the batch
        assert p.check_enough_replicas_reach_offset(required) == (False, E.NONE)
        h.fetch(p, 1, required)
        assert p.check_enough_replicas_reach_offset(required) == (False, E.NONE)   # 2 lacks it
        h.fetch(p, 2, required)
        assert p.check_enough_replicas_reach_offset(required) == (True, E.NONE)
    run(body)


def test_acks_all_is_refused_before_the_append_when_the_isr_is_below_min_insync() -> None:
    async def body(h: Harness) -> None:
        p = h.partition()
        p.min_insync_replicas = 2
        await h.lead(p, 1, [0], [0, 1], 1)
        with pytest.raises(AppendError) as err:
            await h.produce(p, 1, acks=-1)
        assert err.value.error_code == E.NOT_ENOUGH_REPLICAS
        assert p.log_end_offset == 0           # nothing was written
        await h.produce(p, 1, acks=1)          # acks=1 is not subject to min.insync.replicas
        assert p.log_end_offset == 1
    run(body)


def test_acks_all_fails_after_the_append_when_the_isr_shrank_below_min_insync() -> None:
    async def body(h: Harness) -> None:
        p = h.partition()
        p.min_insync_replicas = 2
        await h.lead(p, 1, [0, 1], [0, 1], 1)
        info = await h.produce(p, 1, acks=-1)
        required = info.last_offset + 1
        h.fetch(p, 1, required)
        assert p.high_watermark == required
        await h.produce(p, 1)                  # 1 falls behind and stays behind
        h.tick(LAG_MS + 1)
        p.maybe_shrink_isr()
        assert h.proposals == [([0], LEADER_RECOVERY_RECOVERED)]
        p.on_alter_partition_response(E.NONE, 1, [0], 2, LEADER_RECOVERY_RECOVERED)
        assert p.isr == [0]
        # The HW had passed the batch, but the ISR is now below min.insync.replicas.
        assert p.check_enough_replicas_reach_offset(required) == (True, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
    run(body)


def test_acks_all_uses_min_insync_capped_by_the_replication_factor() -> None:
    async def body(h: Harness) -> None:
        p = h.partition()
        p.min_insync_replicas = 2
        await h.lead(p, 1, [0], [0], 1)
        info = await h.produce(p, 1, acks=-1)
        assert p.check_enough_replicas_reach_offset(info.last_offset + 1) == (True, E.NONE)
    run(body)


def test_acks_all_counts_the_maximal_isr_against_min_insync() -> None:
    async def body(h: Harness) -> None:
        p = h.partition()
        p.min_insync_replicas = 2
        await h.lead(p, 1, [0, 1, 2], [0, 1, 2], 1)
        info = await h.produce(p, 1, acks=-1)
        required = info.last_offset + 1
        h.fetch(p, 1, required)
        h.fetch(p, 2, required)
        assert p.high_watermark == required
        await h.produce(p, 1)
        h.tick(LAG_MS + 1)
        p.maybe_shrink_isr()
        p.on_alter_partition_response(E.NONE, 1, [0], 2, LEADER_RECOVERY_RECOVERED)
        h.fetch(p, 2, p.log_end_offset)        # 2 caught up again: expansion in flight
        assert p.pending is not None and sorted(p.maximal_isr) == [0, 2]
        assert p.check_enough_replicas_reach_offset(required) == (True, E.NONE)
    run(body)


# ==================================================================== ISR expansion
def test_a_follower_that_reached_the_hw_is_proposed_for_the_isr() -> None:
    async def body(h: Harness) -> None:
        p = h.partition()
        await h.lead(p, 1, [0, 1], [0, 1, 2], 1)
        await h.produce(p, 4)
        h.fetch(p, 1, 4)
        assert p.high_watermark == 4
        h.fetch(p, 2, 3)
        assert h.proposals == [] and p.pending is None   # below the HW: not in sync
        h.fetch(p, 2, 4)
        assert h.proposals == [([0, 1, 2], LEADER_RECOVERY_RECOVERED)]
        assert p.isr == [0, 1]                            # committed only when the controller answers
        assert sorted(p.maximal_isr) == [0, 1, 2]         # but the HW already waits for 2
        await h.produce(p, 1)
        h.fetch(p, 1, 5)
        assert p.high_watermark == 4                      # 2 (at 4) holds it
        h.fetch(p, 2, 5)
        assert h.proposals == [([0, 1, 2], LEADER_RECOVERY_RECOVERED)]   # one change in flight at a time
        assert p.high_watermark == 5
    run(body)


def test_expansion_waits_for_the_leader_epoch_start_offset() -> None:
    """Kafka's isFollowerInSync: the follower must also have reached this leader epoch's start
    offset, not only the HW (which a new leader may still be behind)."""
    async def body(h: Harness) -> None:
        for _ in range(5):
            h.log.append_as_leader(*_batch(), leader_epoch=0)
        p = h.partition(high_watermark=2)
        await h.lead(p, 1, [0, 1], [0, 1, 2], 1)
        assert p.leader_epoch_start_offset == 5 and p.high_watermark == 2
        h.fetch(p, 2, 3)                    # >= HW but < the epoch start offset
        assert h.proposals == []
        h.fetch(p, 2, 5)
        assert h.proposals == [([0, 1, 2], LEADER_RECOVERY_RECOVERED)]
    run(body)


def test_a_replica_not_assigned_to_the_partition_is_never_proposed() -> None:
    async def body(h: Harness) -> None:
        p = h.partition()
        await h.lead(p, 1, [0], [0, 1], 1)
        h.fetch(p, 7, 0)                    # not a replica: ignored
        assert h.proposals == [] and 7 not in p.maximal_isr
    run(body)


def test_a_follower_not_alive_in_the_metadata_cache_is_not_waited_for_on_its_way_in() -> None:
    """Kafka's shouldWaitForReplicaToJoinIsr asks isReplicaIsrEligible, in ZooKeeper mode
    hasAliveBroker: a caught-up follower outside the ISR whose session expired (the controller's
    UpdateMetadata dropped it) does not hold the HW back; alive again, it does. No submitter, so
    the rule is seen without a pending expansion."""
    async def body(h: Harness) -> None:
        p = h.partition(submit=False)
        await h.lead(p, 1, [0, 1], [0, 1, 2], 1)
        h.dead.add(2)
        await h.produce(p, 2)
        h.fetch(p, 2, 2)                    # caught up to the leader's end
        await h.produce(p, 3)
        h.fetch(p, 1, 5)
        assert p.high_watermark == 5        # 2, at 2 and not alive, is not waited for
        h.dead.discard(2)                   # the controller's UpdateMetadata names it again
        h.fetch(p, 2, 5)
        await h.produce(p, 1)
        h.fetch(p, 1, 6)
        assert p.high_watermark == 5        # 2, at 5, caught up and alive: waited for
        assert sorted(p.maximal_isr) == [0, 1]
    run(body)


def test_a_follower_not_alive_in_the_metadata_cache_is_not_proposed_for_the_isr() -> None:
    """Kafka's canAddReplicaToIsr asks isReplicaIsrEligible too: at the HW but not alive in the
    metadata cache, no AlterPartition; alive again, the next fetch proposes it."""
    async def body(h: Harness) -> None:
        p = h.partition()
        await h.lead(p, 1, [0, 1], [0, 1, 2], 1)
        h.dead.add(2)
        await h.produce(p, 4)
        h.fetch(p, 1, 4)
        h.fetch(p, 2, 4)                    # at the HW
        assert h.proposals == [] and sorted(p.maximal_isr) == [0, 1]
        h.dead.discard(2)
        h.fetch(p, 2, 4)
        assert h.proposals == [([0, 1, 2], LEADER_RECOVERY_RECOVERED)]
    run(body)


# ==================================================================== ISR shrink
def test_a_follower_lagging_longer_than_replica_lag_time_max_is_proposed_for_removal() -> None:
    async def body(h: Harness) -> None:
        p = h.partition()
        await h.lead(p, 1, [0, 1, 2], [0, 1, 2], 1)
        await h.produce(p, 2)
        h.fetch(p, 1, 2)
        h.fetch(p, 2, 2)
        assert p.high_watermark == 2
        await h.produce(p, 3)               # 2 stops fetching; 1 keeps up
        h.fetch(p, 1, 5)
        h.tick(LAG_MS)
        p.maybe_shrink_isr()
        assert h.proposals == []            # exactly replica.lag.time.max.ms: still in sync
        h.tick(1)
        h.fetch(p, 1, 5)
        p.maybe_shrink_isr()
        assert h.proposals == [([0, 1], LEADER_RECOVERY_RECOVERED)]
        # Until the controller answers, the maximal ISR is the current one: 2 still holds the HW.
        assert p.isr == [0, 1, 2] and sorted(p.maximal_isr) == [0, 1, 2]
        assert p.high_watermark == 2
        p.maybe_shrink_isr()
        assert len(h.proposals) == 1        # one change in flight at a time
        p.on_alter_partition_response(E.NONE, 1, [0, 1], 2, LEADER_RECOVERY_RECOVERED)
        assert p.isr == [0, 1] and p.partition_epoch == 2 and p.pending is None
        assert p.high_watermark == 5        # committed shrink: 2 no longer counts
    run(body)


def test_a_follower_at_the_leader_end_is_never_out_of_sync() -> None:
    async def body(h: Harness) -> None:
        p = h.partition()
        await h.lead(p, 1, [0, 1], [0, 1], 1)
        await h.produce(p, 2)
        h.fetch(p, 1, 2)
        h.tick(10 * LAG_MS)                 # no fetch for long, but nothing new was written
        p.maybe_shrink_isr()
        assert h.proposals == []
    run(body)


def test_an_isr_member_not_heard_from_in_this_epoch_is_removed_after_the_lag() -> None:
    async def body(h: Harness) -> None:
        p = h.partition()
        await h.lead(p, 1, [0, 1], [0, 1], 1)
        await h.produce(p, 1)
        h.tick(LAG_MS)
        p.maybe_shrink_isr()
        assert h.proposals == []            # an ISR member counts as caught up when the epoch begins
        h.tick(1)
        p.maybe_shrink_isr()
        assert h.proposals == [([0], LEADER_RECOVERY_RECOVERED)]
    run(body)


def test_replica_caught_up_time_follows_kafka_replica_update_fetch_state() -> None:
    """Replica.updateFetchStateOrThrow: caught up now if the fetch reached the leader's end; at
    the previous fetch if it reached the leader's end as of that fetch."""
    r = Replica(1)
    r.update_fetch_state(0, 0, 100.0, leader_end_offset=10)
    assert r.last_caught_up_time_ms == 0.0
    r.update_fetch_state(10, 0, 200.0, leader_end_offset=15)   # reached what the leader had at 100
    assert r.last_caught_up_time_ms == 100.0
    r.update_fetch_state(15, 0, 300.0, leader_end_offset=15)   # at the leader's end now
    assert r.last_caught_up_time_ms == 300.0
    assert r.is_caught_up(15, 10_000.0, LAG_MS)                # at the leader's end: always
    assert r.is_caught_up(20, 300.0 + LAG_MS, LAG_MS)
    assert not r.is_caught_up(20, 300.0 + LAG_MS + 1, LAG_MS)


# ==================================================================== AlterPartition responses
async def _pending_expansion(h: Harness) -> Partition:
    """Leader of epoch 1 (partition epoch 1), ISR [0, 1], with 2 proposed to join."""
    p = h.partition()
    await h.lead(p, 1, [0, 1], [0, 1, 2], 1)
    await h.produce(p, 2)
    h.fetch(p, 1, 2)
    h.fetch(p, 2, 2)
    assert h.proposals == [([0, 1, 2], LEADER_RECOVERY_RECOVERED)] and p.pending is not None
    return p


def test_a_successful_response_commits_the_isr_and_partition_epoch() -> None:
    async def body(h: Harness) -> None:
        p = await _pending_expansion(h)
        p.on_alter_partition_response(E.NONE, 1, [0, 1, 2], 2, LEADER_RECOVERY_RECOVERED)
        assert p.isr == [0, 1, 2] and p.partition_epoch == 2 and p.pending is None
        assert p.leader_epoch == 1
    run(body)


def test_a_successful_response_for_another_leader_epoch_is_ignored() -> None:
    async def body(h: Harness) -> None:
        p = await _pending_expansion(h)
        p.on_alter_partition_response(E.NONE, 2, [0, 1, 2], 2, LEADER_RECOVERY_RECOVERED)
        assert p.isr == [0, 1] and p.partition_epoch == 1
        assert p.pending is not None        # Kafka stays pending until new metadata
    run(body)


def test_a_successful_response_with_an_older_partition_epoch_is_ignored() -> None:
    """Kafka 3.9 handleAlterPartitionUpdate: ignored, and the change stays pending."""
    async def body(h: Harness) -> None:
        p = await _pending_expansion(h)
        p.partition_epoch = 5               # newer state known (e.g. from a LeaderAndIsr of the same epoch)
        p.on_alter_partition_response(E.NONE, 1, [0, 1, 2], 3, LEADER_RECOVERY_RECOVERED)
        assert p.isr == [0, 1] and p.partition_epoch == 5
        assert p.pending is not None and sorted(p.maximal_isr) == [0, 1, 2]
    run(body)


def test_a_successful_response_with_the_same_partition_epoch_commits_the_change() -> None:
    """Equal partition epochs: the controller found nothing to change (the proposed state is
    the current one); Kafka commits it and leaves the pending state."""
    async def body(h: Harness) -> None:
        p = await _pending_expansion(h)
        p.on_alter_partition_response(E.NONE, 1, [0, 1, 2], 1, LEADER_RECOVERY_RECOVERED)
        assert p.isr == [0, 1, 2] and p.partition_epoch == 1 and p.pending is None
    run(body)


@pytest.mark.parametrize("error", [E.INELIGIBLE_REPLICA, E.OPERATION_NOT_ATTEMPTED])
def test_a_rejected_change_goes_back_to_the_committed_state(error: int) -> None:
    async def body(h: Harness) -> None:
        p = await _pending_expansion(h)
        p.on_alter_partition_response(error, -1, [], -1, LEADER_RECOVERY_RECOVERED)
        assert p.pending is None and p.isr == [0, 1] and p.maximal_isr == [0, 1] and p.partition_epoch == 1
        h.fetch(p, 2, 2)                    # the next fetch may propose again
        assert len(h.proposals) == 2
    run(body)


@pytest.mark.parametrize("error", [E.FENCED_LEADER_EPOCH, E.INVALID_UPDATE_VERSION, E.UNKNOWN_TOPIC_OR_PARTITION,
                                   E.INVALID_REQUEST, E.NEW_LEADER_ELECTED])
def test_a_failed_change_stays_pending_until_new_metadata(error: int) -> None:
    async def body(h: Harness) -> None:
        p = await _pending_expansion(h)
        p.on_alter_partition_response(error, -1, [], -1, LEADER_RECOVERY_RECOVERED)
        assert p.pending is not None and sorted(p.maximal_isr) == [0, 1, 2] and p.isr == [0, 1]
        h.fetch(p, 2, 2)
        h.tick(LAG_MS + 1)
        p.maybe_shrink_isr()
        assert len(h.proposals) == 1        # nothing new proposed while pending
        await h.lead(p, 2, [0, 1], [0, 1, 2], 2)   # the LeaderAndIsr that follows clears it
        assert p.pending is None and p.isr == [0, 1]
    run(body)


@pytest.mark.parametrize("error", [E.UNKNOWN_SERVER_ERROR, E.NOT_CONTROLLER])
def test_an_unexpected_error_resubmits_the_change(error: int) -> None:
    """Kafka 3.9 handleAlterPartitionError: anything but the give-up errors is retried (the same
    proposal again), else ISR changes would stop until a LeaderAndIsr."""
    async def body(h: Harness) -> None:
        p = await _pending_expansion(h)
        p.on_alter_partition_response(error, -1, [], -1, LEADER_RECOVERY_RECOVERED)
        assert h.proposals == [([0, 1, 2], LEADER_RECOVERY_RECOVERED)] * 2
        assert p.pending is not None and sorted(p.maximal_isr) == [0, 1, 2]
    run(body)


def test_a_response_when_nothing_is_pending_is_ignored() -> None:
    async def body(h: Harness) -> None:
        p = h.partition()
        await h.lead(p, 1, [0, 1], [0, 1], 1)
        p.on_alter_partition_response(E.NONE, 1, [0], 9, LEADER_RECOVERY_RECOVERED)
        assert p.isr == [0, 1] and p.partition_epoch == 1
    run(body)


# ==================================================================== LeaderAndIsr
def test_make_leader_and_make_follower_epochs() -> None:
    async def body(h: Harness) -> None:
        p = h.partition()
        assert await h.lead(p, 3, [0, 1], [0, 1, 2], 4) is True       # was not leader
        assert (p.leader_epoch, p.partition_epoch, p.leader_epoch_start_offset) == (3, 4, 0)
        assert LEADER in p.isr and set(p.isr) <= set(p.assignment)
        await h.produce(p, 2)
        # Same leader epoch, new ISR (a controller-side change): epoch and its start stay.
        assert await h.lead(p, 3, [0, 1, 2], [0, 1, 2], 5) is False
        assert (p.leader_epoch, p.partition_epoch, p.leader_epoch_start_offset) == (3, 5, 0)
        assert p.isr == [0, 1, 2]
        # A new epoch starts at the log end offset.
        assert await h.lead(p, 4, [0, 1, 2], [0, 1, 2], 6) is False
        assert (p.leader_epoch, p.leader_epoch_start_offset) == (4, 2)
        assert p.make_follower(PartitionState(1, 5, [1, 2], [0, 1, 2], partition_epoch=7)) is True
        assert not p.is_leader and p.leader_id == 1 and p.leader_epoch == 5
        assert p.isr == [] and p.pending is None and p.leader_epoch_start_offset is None
        # The same epoch again: the fetcher need not restart.
        assert p.make_follower(PartitionState(1, 5, [1, 2], [0, 1, 2], partition_epoch=7)) is False
        # As follower it answers neither acks=all nor OffsetForLeaderEpoch.
        assert p.check_enough_replicas_reach_offset(1)[1] == E.NOT_LEADER_OR_FOLLOWER
        assert p.last_offset_for_leader_epoch(5, 4)[0] == E.NOT_LEADER_OR_FOLLOWER
    run(body)


def test_an_append_waits_until_become_leader_has_written_the_new_epoch() -> None:
    """Kafka's makeLeader holds leaderIsrUpdateLock (write) while it writes the new epoch's start
    to the leader-epoch checkpoint; appendRecordsToLeader takes the read lock. A produce arriving
    during the write is appended after it, in the new epoch: none of the epoch's batches exists
    before the broker has recorded (and traced) becoming its leader (seed 1442's power loss fell
    between such an append and the `become_leader` that would have followed it)."""
    async def body(h: Harness) -> None:
        p = h.partition()
        await h.lead(p, 0, [0], [0], 0)
        await h.produce(p, 2)
        seen: list[tuple[bool, int, int]] = []   # (become_leader done, batch offset, batch epoch)

        async def produce() -> None:
            info = await h.produce(p, 1)
            batch = next(h for _, h in iter_batches(p.log.read(info.first_offset, 1 << 20)))
            seen.append((becoming.done(), batch.base_offset, batch.partition_leader_epoch))

        becoming = p.rt.spawn(p.become_leader(PartitionState(LEADER, 1, [0], [0], partition_epoch=1)))
        producing = p.rt.spawn(produce())
        await becoming
        await producing
        assert seen == [(True, 2, 1)]
        assert p.log.leader_epoch_cache.end_offset_for(0, p.log_end_offset) == (0, 2)
    run(body)


def test_make_leader_clears_a_pending_change_and_resets_followers() -> None:
    async def body(h: Harness) -> None:
        p = await _pending_expansion(h)
        await h.lead(p, 2, [0, 1], [0, 1, 2], 2)
        assert p.pending is None and p.maximal_isr == [0, 1]
        # Same leader, new epoch: the followers' offsets are kept, their caught-up time reset.
        await h.produce(p, 1)
        h.fetch(p, 1, 3)
        assert p.high_watermark == 3
    run(body)


def test_every_proposed_isr_keeps_the_leader_and_stays_within_the_replicas() -> None:
    async def body(h: Harness) -> None:
        p = h.partition()
        await h.lead(p, 1, [0, 1, 2], [0, 1, 2], 1)
        await h.produce(p, 1)
        h.tick(LAG_MS + 1)
        p.maybe_shrink_isr()                # both followers out
        assert h.proposals == [([0], LEADER_RECOVERY_RECOVERED)]
        p.on_alter_partition_response(E.NONE, 1, [0], 2, LEADER_RECOVERY_RECOVERED)
        h.fetch(p, 2, 1)
        p.on_alter_partition_response(E.NONE, 1, [0, 2], 3, LEADER_RECOVERY_RECOVERED)
        h.fetch(p, 1, 1)
        for isr, _ in h.proposals:
            assert LEADER in isr and set(isr) <= {0, 1, 2} and len(set(isr)) == len(isr)
        assert sorted(h.proposals[-1][0]) == [0, 1, 2]
    run(body)


def test_make_leader_ignores_a_stale_partition_epoch() -> None:
    """Kafka 3.9 Partition.makeLeader: a state with a partition epoch below the current one is
    skipped whatever its leader epoch (nothing applied, no epoch start recorded); an equal one
    is applied."""
    async def body(h: Harness) -> None:
        p = h.partition()
        await h.lead(p, 3, [0, 1, 2], [0, 1, 2], 5)
        await h.produce(p, 2)
        assert await h.lead(p, 3, [0, 1], [0, 1, 2], 4) is False
        assert (p.leader_epoch, p.partition_epoch, p.isr) == (3, 5, [0, 1, 2])
        assert await h.lead(p, 4, [0, 1], [0, 1, 2], 4) is False
        assert (p.leader_epoch, p.partition_epoch, p.isr, p.leader_epoch_start_offset) == (3, 5, [0, 1, 2], 0)
        assert h.log.leader_epoch_cache.entries == [(3, 0)]
        await h.lead(p, 3, [0, 1], [0, 1, 2], 5)
        assert p.isr == [0, 1]
    run(body)


def test_make_follower_ignores_a_stale_partition_epoch() -> None:
    async def body(h: Harness) -> None:
        p = h.partition()
        await h.lead(p, 3, [0, 1, 2], [0, 1, 2], 5)
        assert p.make_follower(PartitionState(1, 4, [1, 2], [0, 1, 2], partition_epoch=4)) is False
        assert p.is_leader and (p.leader_epoch, p.partition_epoch) == (3, 5)
    run(body)


def test_make_leader_of_a_recovering_partition_marks_it_recovered() -> None:
    """Kafka 3.9 makeLeader (KIP-704): RECOVERED locally, nothing submitted; expansion is not
    held back and carries the recovered state to the controller."""
    async def body(h: Harness) -> None:
        p = h.partition()
        await h.lead(p, 2, [0], [0, 1], 2, recovery=LEADER_RECOVERY_RECOVERING)
        assert p.leader_recovery_state == LEADER_RECOVERY_RECOVERED
        assert h.proposals == []
        h.fetch(p, 1, 0)
        assert h.proposals == [([0, 1], LEADER_RECOVERY_RECOVERED)]
    run(body)


def test_a_role_change_during_a_follower_flush_keeps_the_new_leaders_hw() -> None:
    """flush.messages=1: the follower's flush awaits the disk, and a LeaderAndIsr making it leader
    lands meanwhile (crash-swarm power-loss-fsync-swarm seeds 97, 218). In Kafka the fetcher's
    append and high-watermark update hold partitionMapLock, which makeLeader's
    removeFetcherForPartitions waits for, so the old leader's high watermark can never be applied
    to the new leader: here it must not lower the HW the new leader's followers already raised."""
    async def body(h: Harness) -> None:
        p = h.partition()
        assert p.make_follower(PartitionState(1, 1, [1, 0], [0, 1], partition_epoch=1)) is True
        buf = build_batch([Record(int(h.clock), b"k", b"v")] * 2, partition_leader_epoch=1)
        append = p.rt.spawn(p.append_records_to_follower(buf, list(iter_batches(buf)), 0, 0), name="fetcher")
        await p.rt.sleep(0)           # the fetcher appended and now awaits its flush
        assert not append.done() and p.log_end_offset == 2
        await h.lead(p, 2, [0, 1], [0, 1], 2)
        h.fetch(p, 1, 2)              # the new follower has everything: the HW reaches the log end
        assert p.high_watermark == 2
        await append                  # the flush ends; the old leader's HW (0) no longer applies
        assert p.is_leader and p.high_watermark == 2
        check_hw_invariants(p)
    run(body, LogConfig(flush_messages=1))


# ==================================================================== OffsetForLeaderEpoch
async def _leader_with_epochs(h: Harness) -> Partition:
    """Epoch 1 wrote offsets 0-2, epoch 3 offsets 3-4, epoch 5 (current) nothing yet: LEO 5."""
    p = h.partition()
    await h.lead(p, 1, [0], [0], 1)
    await h.produce(p, 3)
    await h.lead(p, 3, [0], [0], 2)
    await h.produce(p, 2)
    await h.lead(p, 5, [0], [0], 3)
    assert h.log.leader_epoch_cache.entries == [(1, 0), (3, 3), (5, 5)]
    return p


def test_last_offset_for_leader_epoch_known_unknown_and_future_epochs() -> None:
    async def body(h: Harness) -> None:
        p = await _leader_with_epochs(h)
        assert p.last_offset_for_leader_epoch(-1, 1) == (E.NONE, 1, 3)    # ends where epoch 3 starts
        assert p.last_offset_for_leader_epoch(-1, 2) == (E.NONE, 1, 3)    # unknown: the largest epoch below
        assert p.last_offset_for_leader_epoch(-1, 3) == (E.NONE, 3, 5)
        assert p.last_offset_for_leader_epoch(-1, 5) == (E.NONE, 5, 5)    # the latest ends at the log end
        assert p.last_offset_for_leader_epoch(-1, 0) == (E.NONE, 0, 0)    # before the first: its start
        assert p.last_offset_for_leader_epoch(-1, 6) == (E.NONE, -1, -1)  # a future epoch: undefined
        await h.produce(p, 2)
        assert p.last_offset_for_leader_epoch(5, 5) == (E.NONE, 5, 7)
    run(body)


def test_last_offset_for_leader_epoch_checks_the_current_leader_epoch() -> None:
    async def body(h: Harness) -> None:
        p = await _leader_with_epochs(h)
        assert p.last_offset_for_leader_epoch(4, 3) == (E.FENCED_LEADER_EPOCH, -1, -1)
        assert p.last_offset_for_leader_epoch(6, 3) == (E.UNKNOWN_LEADER_EPOCH, -1, -1)
        assert p.last_offset_for_leader_epoch(5, 3) == (E.NONE, 3, 5)
    run(body)


def test_a_follower_fences_an_older_current_leader_epoch_first() -> None:
    async def body(h: Harness) -> None:
        p = await _leader_with_epochs(h)
        p.make_follower(PartitionState(1, 6, [1], [0, 1], partition_epoch=4))
        assert p.last_offset_for_leader_epoch(5, 3)[0] == E.FENCED_LEADER_EPOCH
        assert p.last_offset_for_leader_epoch(7, 3)[0] == E.UNKNOWN_LEADER_EPOCH
        assert p.last_offset_for_leader_epoch(6, 3)[0] == E.NOT_LEADER_OR_FOLLOWER
        assert p.last_offset_for_leader_epoch(-1, 3)[0] == E.NOT_LEADER_OR_FOLLOWER   # no epoch: not checked
    run(body)


def _batch() -> tuple[bytearray, list[tuple[int, BatchHeader]]]:
    buf = bytearray(build_batch([Record(0, b"k", b"v")]))
    return buf, validate_produce_records(buf, LogConfig()).headers


# ==================================================================== LogAppendTime
LOG_APPEND_TIME_TOPIC = LogConfig(message_timestamp_type="LogAppendTime")


async def _produce_at(h: Harness, p: Partition, create_time: int, **batch: int) -> AppendInfo:
    buf = build_batch([Record(create_time, b"k", b"v"), Record(create_time + 1, b"k", b"w")], **batch)
    return await p.append_records_to_leader(validate_produce_records(buf, p.log.config))


def test_a_log_append_time_topic_stamps_the_batch_with_the_append_time() -> None:
    """LogValidator: setMaxTimestamp(LOG_APPEND_TIME, now); UnifiedLog.append answers now as
    logAppendTime and indexes it at the batch's last offset."""
    async def body(h: Harness) -> None:
        p = h.partition()
        await h.lead(p, 1, [LEADER], [LEADER], 1)
        now = p.rt.now_ms()
        info = await _produce_at(h, p, 5)
        assert (info.log_append_time, info.max_timestamp, info.shallow_offset_of_max_timestamp) == (now, now, 1)
        [(pos, stored)] = list(iter_batches(p.log.read(0, 1 << 20), validate=True))  # CRC recomputed
        assert (stored.timestamp_type, stored.max_timestamp, stored.base_timestamp) == (LOG_APPEND_TIME, now, 5)
        assert p.log.offset_for_timestamp(now) == (0, now)   # the time index holds the append time
        assert p.log.offset_for_timestamp(now + 1) is None
        assert p.log.max_timestamp_and_offset() == (now, 0)
    run(body, LOG_APPEND_TIME_TOPIC)


def test_a_create_time_topic_answers_no_append_time_and_keeps_the_batch() -> None:
    async def body(h: Harness) -> None:
        p = h.partition()
        await h.lead(p, 1, [LEADER], [LEADER], 1)
        info = await _produce_at(h, p, 5)
        assert (info.log_append_time, info.max_timestamp) == (-1, 6)
        [(_, stored)] = list(iter_batches(p.log.read(0, 1 << 20)))
        assert (stored.timestamp_type, stored.max_timestamp) == (CREATE_TIME, 6)
    run(body)


def test_a_duplicate_on_a_log_append_time_topic_answers_the_original_append_time() -> None:
    """UnifiedLog.append: a duplicate's logAppendTime is the original batch's (stamped) timestamp."""
    async def body(h: Harness) -> None:
        p = h.partition()
        await h.lead(p, 1, [LEADER], [LEADER], 1)
        first = await _produce_at(h, p, 5, producer_id=7, producer_epoch=0, base_sequence=0)
        await p.rt.sleep(50)
        again = await _produce_at(h, p, 5, producer_id=7, producer_epoch=0, base_sequence=0)
        assert p.rt.now_ms() > first.log_append_time >= 0
        assert (again.first_offset, again.log_append_time) == (0, first.log_append_time)
        assert p.log_end_offset == 2
    run(body, LOG_APPEND_TIME_TOPIC)


def test_a_follower_keeps_the_leaders_stamped_batch() -> None:
    """Replication appends the leader's bytes as they are: the follower's time index holds the
    leader's append time, not the follower's clock."""
    async def body(h: Harness) -> None:
        stamped = bytearray(build_batch([Record(5, b"k", b"v")], timestamp_type=LOG_APPEND_TIME,
                                        log_append_time_ms=42, partition_leader_epoch=1))
        p = h.partition()
        p.make_follower(PartitionState(1, 1, [1, LEADER], [1, LEADER], partition_epoch=1))
        await p.append_records_to_follower(bytes(stamped), list(iter_batches(stamped)), 1, 0)
        assert p.log.read(0, 1 << 20) == bytes(stamped)
        assert p.log.offset_for_timestamp(42) == (0, 42)
    run(body, LOG_APPEND_TIME_TOPIC)


# ==================================================================== follower appends
def _follower_batch(offset: int, epoch: int) -> tuple[bytes, list[tuple[int, BatchHeader]]]:
    buf = build_batch([Record(0, b"k", b"v")], base_offset=offset, partition_leader_epoch=epoch)
    return bytes(buf), list(iter_batches(buf))


def test_a_follower_append_that_became_leader_while_flushing_leaves_the_high_watermark_alone() -> None:
    """power-loss-fsync-swarm seeds 97, 218: a follower append waited on its flush (flush.messages
    1) while a LeaderAndIsr made the replica leader; the append then applied the old leader's
    high watermark (lower) to the new leader's, moving it back. Kafka's makeLeader removes the
    fetcher first, which waits out the fetcher's partition processing: the two never interleave."""
    async def body(h: Harness) -> None:
        p = h.partition()
        p.make_follower(PartitionState(1, 1, [1, 0], [0, 1], partition_epoch=1))
        for offset in range(2):
            await p.append_records_to_follower(*_follower_batch(offset, 1), 2, 0)
        assert p.high_watermark == 2
        task = h.log.rt.spawn(p.append_records_to_follower(*_follower_batch(2, 1), 1, 0))
        await h.lead(p, 2, [0, 1], [0, 1], 2)   # while the append's flush waits
        await task
        assert p.is_leader and p.high_watermark >= 2
    run(body, LogConfig(flush_messages=1))
