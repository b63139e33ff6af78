"""Replication in the simulated world: the high watermark waits for the ISR, a follower that
stops fetching leaves the ISR after replica.lag.time.max.ms (AlterPartition to the controller,
written to the partition's state znode) and rejoins once caught up, and a leader that lost
power with a tail nobody else had truncates it when it comes back (KIP-101)."""

from __future__ import annotations

from typing import Any

import pytest

from kafkasim.harness.godseye import check_replicas
from kafkasim.protocol import errors as E
from kafkasim.runtime.api import NodeRuntime
from tests.cluster.cluster_sim import Cluster, run_cluster

pytestmark = pytest.mark.sim


async def _topic(c: Cluster, rt: NodeRuntime, name: str = "t", rf: int = 3, **configs: str) -> tuple[int, list[int]]:
    ctl = c.controller_id()
    replicas = [b for b in range(3) if b != ctl][:1] + [b for b in range(3) if b != ctl][1:] + [ctl]
    replicas = replicas[:rf]
    assert await c.create_topic(rt, name, 1, rf, configs, assignment={0: replicas}) == E.NONE
    await c.wait_until(rt, lambda: c.leader_id(name, 0) == replicas[0])
    return replicas[0], replicas[1:]


def test_high_watermark_waits_for_the_isr_and_the_isr_shrinks_and_expands() -> None:
    async def body(c: Cluster, rt: NodeRuntime) -> Any:
        leader, followers = await _topic(c, rt)
        slow = followers[0]
        lp = c.server(leader).replica_manager.get_partition("t", 0)
        assert (await c.produce(rt, "t", 0, [b"a", b"b"]))[0] == E.NONE
        await c.wait_until(rt, lambda: all(c.server(f).replica_manager.get_partition("t", 0).high_watermark == 2
                                           for f in followers))
        # The slow follower cannot reach the leader. A follower at the leader's log end counts as
        # caught up however long it has not fetched (Kafka's Replica.isCaughtUp); once the leader
        # has more (an acks=1 write), it leaves the ISR replica.lag.time.max.ms (4 s here) after
        # its last caught-up fetch, at the next isr-expiration check (every 2 s).
        c.world.net.partition([f"broker-{slow}"], [f"broker-{leader}"])
        t0 = c.world.now_ms()
        assert (await c.produce(rt, "t", 0, [b"c"], acks=1))[0] == E.NONE
        hw_stuck = lp.high_watermark
        shrunk = await c.wait_until(rt, lambda: slow not in lp.isr, timeout_ms=20000)
        shrink_ms = c.world.now_ms() - t0
        state_shrunk = await c.zk_json(rt, "/brokers/topics/t/partitions/0/state")
        code = await c.produce(rt, "t", 0, [b"d"], acks=-1)
        hw_without = (hw_stuck, lp.high_watermark)
        c.world.net.heal()
        expanded = await c.wait_until(rt, lambda: slow in lp.isr, timeout_ms=20000)
        state_expanded = await c.zk_json(rt, "/brokers/topics/t/partitions/0/state")
        caught_up = c.server(slow).replica_manager.get_partition("t", 0).log.log_end_offset
        return (leader, slow, shrunk, shrink_ms, state_shrunk, code, hw_without, expanded, state_expanded,
                caught_up, c.sim)

    leader, slow, shrunk, shrink_ms, shrunk_state, code, hw, expanded, expanded_state, leo, sim = \
        run_cluster(body, replica_lag_time_max_ms=4000)
    assert shrunk and 4000 <= shrink_ms <= 4000 + 2000 + 1000  # lag max, + the check period, + a fetch
    assert slow not in shrunk_state["isr"] and shrunk_state["leader"] == leader
    assert shrunk_state["leader_epoch"] == 0  # an ISR change does not move the leader epoch
    assert hw == (2, 4)  # the write waited for the lagging ISR member; then committed without it
    assert code == (E.NONE, 3)
    assert expanded and slow in expanded_state["isr"] and leo == 4
    assert all(not r.anomalies for r in check_replicas(sim))


def test_acks_all_times_out_when_the_isr_cannot_follow() -> None:
    async def body(c: Cluster, rt: NodeRuntime) -> Any:
        leader, followers = await _topic(c, rt, **{"min.insync.replicas": "2"})
        for f in followers:
            c.world.net.partition([f"broker-{f}"], [f"broker-{leader}"])
        # The followers are still in the ISR (and the controller, one of them, is out of reach,
        # so the ISR cannot shrink): the append is accepted but not replicated within the
        # request's timeout — DelayedProduce expires with REQUEST_TIMED_OUT, nothing acknowledged.
        timed_out = await c.produce(rt, "t", 0, [b"x"], acks=-1, timeout_ms=1000)
        c.world.net.heal()
        after_heal = await c.produce(rt, "t", 0, [b"y"], acks=-1, timeout_ms=10000)
        return timed_out, after_heal

    timed_out, after_heal = run_cluster(body)
    assert timed_out == (E.REQUEST_TIMED_OUT, -1)
    assert after_heal == (E.NONE, 1)  # x is in the log (replicated once healed), just never acknowledged


def test_a_power_lost_leaders_unreplicated_tail_is_truncated_when_it_returns() -> None:
    async def body(c: Cluster, rt: NodeRuntime) -> Any:
        leader, followers = await _topic(c, rt)
        assert (await c.produce(rt, "t", 0, [b"committed"]))[0] == E.NONE
        await c.wait_until(rt, lambda: all(c.server(f).replica_manager.get_partition("t", 0).log.log_end_offset == 1
                                           for f in followers))
        for f in followers:
            c.world.net.partition([f"broker-{f}"], [f"broker-{leader}"])
        lp = c.server(leader).replica_manager.get_partition("t", 0)
        await lp.log.flush()  # the leader's tail survives its power loss: it must be truncated, not lost
        code = await c.produce(rt, "t", 0, [b"never-acked-1", b"never-acked-2"], acks=1)
        await lp.log.flush()
        c.world.nodes[f"broker-{leader}"].crash("power")
        c.world.net.heal()  # what the dead leader had queued for the followers died with it
        await c.wait_until(rt, lambda: c.leader_id("t", 0) in followers)
        new_leader = c.leader_id("t", 0)
        assert (await c.produce(rt, "t", 0, [b"after-failover"]))[0] == E.NONE
        c.sim.restart(f"broker-{leader}")
        back = await c.wait_until(rt, lambda: leader in c.server(new_leader).replica_manager.get_partition("t", 0).isr,
                                  timeout_ms=60000)
        old = c.server(leader).replica_manager.get_partition("t", 0)
        values = old.log.read(0, 1 << 20)
        return code, back, old.log.log_end_offset, bytes(values), c.sim

    code, back, leo, data, sim = run_cluster(body)
    assert code == (E.NONE, 1)
    assert back and leo == 2
    assert b"after-failover" in data and b"never-acked" not in data
    assert all(not r.anomalies for r in check_replicas(sim))


def test_with_ibp_before_2_7_the_leader_writes_the_isr_and_notifies() -> None:
    """inter.broker.protocol.version=2.6: the leader shrinks the ISR by writing the state znode
    (zkVersion CAS) and creating /isr_change_notification/isr_change_<n>; the controller
    consumes the notification and every broker's metadata follows."""
    async def body(c: Cluster, rt: NodeRuntime) -> Any:
        leader, followers = await _topic(c, rt)
        slow = followers[0]
        c.world.net.partition([f"broker-{slow}"], [f"broker-{leader}"])
        assert (await c.produce(rt, "t", 0, [b"x"], acks=1))[0] == E.NONE
        lp = c.server(leader).replica_manager.get_partition("t", 0)
        shrunk = await c.wait_until(rt, lambda: slow not in lp.isr, timeout_ms=20000)
        state = await c.zk_json(rt, "/brokers/topics/t/partitions/0/state")
        propagated = await c.wait_until(rt, lambda: all(
            slow not in c.server(b).metadata_cache.topic("t").partitions[0].isr for b in range(3)))
        zk = c.any_live_server().zk
        left = await zk.get_children("/isr_change_notification")
        announced = (await zk.exists("/isr_change_notification")).cversion  # created and deleted children
        c.world.net.heal()
        back = await c.wait_until(rt, lambda: slow in lp.isr, timeout_ms=20000)
        return shrunk, state, propagated, left, announced, back, lp.partition_epoch

    shrunk, state, propagated, left, announced, back, partition_epoch = \
        run_cluster(body, inter_broker_protocol_version="2.6")
    assert shrunk and state["leader_epoch"] == 0 and len(state["isr"]) == 2
    assert propagated and left == [] and announced >= 2
    assert back and partition_epoch == 2  # two conditional writes of the state znode
