"""KafkaController in the simulated world: election and failover with epoch fencing, topic
creation through the /brokers/topics watch, leader election from the ISR on broker failure,
controlled shutdown, preferred-replica election, reassignment, and the ZooKeeper layout it
leaves (as a real Kafka 3.9.1 cluster of 3 leaves it)."""

from __future__ import annotations

from typing import Any

import pytest

from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.leader_and_isr import LeaderAndIsrRequest
from kafkasim.runtime.api import NodeRuntime
from tests.cluster.cluster_sim import Cluster, run_cluster

pytestmark = pytest.mark.sim


def test_topic_creation_elects_the_first_replica_and_every_broker_learns_it() -> None:
    async def body(c: Cluster, rt: NodeRuntime) -> Any:
        assert await c.create_topic(rt, "t", 3, 3) == E.NONE
        assignment = await c.zk_json(rt, "/brokers/topics/t")
        states = [await c.zk_json(rt, f"/brokers/topics/t/partitions/{p}/state") for p in range(3)]
        metas = [await c.metadata(rt, b, ["t"]) for b in range(3)]
        await c.wait_until(rt, lambda: all(c.server(b).replica_manager.get_partition("t", 0) is not None
                                            for b in range(3)))
        roles = sorted((b, c.server(b).replica_manager.get_partition("t", 0).is_leader) for b in range(3))
        return assignment, states, metas, roles, await c.zk_json(rt, "/controller"), \
            await c.zk_json(rt, "/controller_epoch")

    assignment, states, metas, roles, controller, epoch = run_cluster(body)
    replicas = {int(p): r for p, r in assignment["partitions"].items()}
    assert sorted(replicas) == [0, 1, 2] and all(sorted(r) == [0, 1, 2] for r in replicas.values())
    # Each partition's leader is its first replica; the ISR is the replicas, in assignment order.
    assert states == [{"controller_epoch": 1, "leader": replicas[p][0], "version": 1, "leader_epoch": 0,
                       "isr": replicas[p]} for p in range(3)]
    for meta in metas:
        parts = {p.partition_index: p for p in meta.topics[0].partitions}
        assert {p: (parts[p].leader_id, parts[p].replica_nodes, parts[p].isr_nodes) for p in parts} == \
            {p: (replicas[p][0], replicas[p], replicas[p]) for p in range(3)}
        assert sorted(b.node_id for b in meta.brokers) == [0, 1, 2] and meta.controller_id == controller["brokerid"]
    assert [is_leader for b, is_leader in roles].count(True) == 1
    assert epoch == 1


def test_controller_failover_bumps_the_epoch_and_keeps_serving() -> None:
    async def body(c: Cluster, rt: NodeRuntime) -> Any:
        first = c.controller_id()
        c.world.nodes[f"broker-{first}"].crash("kill")
        moved = await c.wait_until(rt, lambda: c.controller_id() not in (-1, first))
        second = c.controller_id()
        epoch = await c.zk_json(rt, "/controller_epoch")
        code = await c.create_topic(rt, "after", 2, 2)
        ok = await c.wait_until(rt, lambda: c.leader_id("after", 0) >= 0 and c.leader_id("after", 1) >= 0)
        return first, moved, second, epoch, code, ok, await c.zk_json(rt, "/controller")

    first, moved, second, epoch, code, ok, znode = run_cluster(body)
    assert moved and second != first and epoch == 2
    assert code == E.NONE and ok
    assert znode["brokerid"] == second and znode["version"] == 2


def test_a_stale_controller_epoch_is_refused() -> None:
    async def body(c: Cluster, rt: NodeRuntime) -> Any:
        assert await c.create_topic(rt, "t", 1, 3) == E.NONE
        await c.wait_until(rt, lambda: c.leader_id("t", 0) >= 0)
        follower = next(b for b in range(3) if b != c.leader_id("t", 0))
        w = await c.wire(rt, follower)
        S = LeaderAndIsrRequest.LeaderAndIsrPartitionState
        # Controller epoch 0 (older than the live controller's 1) asks the follower to lead.
        stale = LeaderAndIsrRequest(controller_id=9, controller_epoch=0, broker_epoch=-1, topic_states=[
            LeaderAndIsrRequest.LeaderAndIsrTopicState(topic_name="t", partition_states=[S(
                topic_name="t", partition_index=0, controller_epoch=0, leader=follower, leader_epoch=99,
                isr=[follower], partition_epoch=9, replicas=[0, 1, 2])])], live_leaders=[])
        r = await w.call(A.LEADER_AND_ISR, 7, stale)
        still_follower = not c.server(follower).replica_manager.get_partition("t", 0).is_leader
        # A stale broker epoch (an earlier incarnation of the broker) is refused too.
        old_epoch = c.server(follower).broker_epoch - 1
        stale.controller_epoch = 5
        stale.broker_epoch = old_epoch
        r2 = await w.call(A.LEADER_AND_ISR, 7, stale)
        return r.error_code, still_follower, r2.error_code

    code, still_follower, code2 = run_cluster(body)
    assert code == E.STALE_CONTROLLER_EPOCH and still_follower
    assert code2 == E.STALE_BROKER_EPOCH


def test_leader_failure_elects_from_the_isr_and_shrinks_it() -> None:
    async def body(c: Cluster, rt: NodeRuntime) -> Any:
        # The leader is not the controller (else the failover elects twice: see the next test).
        ctl = c.controller_id()
        replicas = [b for b in range(3) if b != ctl] + [ctl]
        assert await c.create_topic(rt, "t", 1, 3, {"min.insync.replicas": "2"}, assignment={0: replicas}) == E.NONE
        await c.wait_until(rt, lambda: c.leader_id("t", 0) >= 0)
        acked = [await c.produce(rt, "t", 0, [f"v{i}".encode()]) for i in range(10)]
        old = c.leader_id("t", 0)
        c.world.nodes[f"broker-{old}"].crash("kill")
        await c.wait_until(rt, lambda: c.leader_id("t", 0) not in (-1, old))
        new = c.leader_id("t", 0)
        state = await c.zk_json(rt, "/brokers/topics/t/partitions/0/state")
        after = await c.produce(rt, "t", 0, [b"after"])
        p = c.server(new).replica_manager.get_partition("t", 0)
        return acked, old, new, state, after, p.log.log_end_offset, p.high_watermark

    acked, old, new, state, after, leo, hw = run_cluster(body)
    assert all(code == E.NONE for code, _ in acked)
    assert new != old and state["leader"] == new and state["leader_epoch"] == 1 and old not in state["isr"]
    assert after == (E.NONE, 10) and leo == 11 and hw == 11


def test_acks_all_needs_min_insync_replicas() -> None:
    async def body(c: Cluster, rt: NodeRuntime) -> Any:
        assert await c.create_topic(rt, "t", 1, 3, {"min.insync.replicas": "2"}) == E.NONE
        await c.wait_until(rt, lambda: c.leader_id("t", 0) >= 0)
        leader = c.leader_id("t", 0)
        others = [b for b in range(3) if b != leader]
        c.world.nodes[f"broker-{others[0]}"].crash("kill")
        c.world.nodes[f"broker-{others[1]}"].crash("kill")
        await c.wait_until(rt, lambda: c.server(leader).replica_manager.get_partition("t", 0).isr == [leader],
                           timeout_ms=60000)
        refused = await c.produce(rt, "t", 0, [b"x"], acks=-1)
        one = await c.produce(rt, "t", 0, [b"y"], acks=1)
        return refused, one, await c.zk_json(rt, "/brokers/topics/t/partitions/0/state")

    refused, one, state = run_cluster(body)
    assert refused[0] == E.NOT_ENOUGH_REPLICAS
    assert one == (E.NONE, 0)
    assert len(state["isr"]) == 1


def test_losing_the_controller_and_the_leader_at_once_elects_twice() -> None:
    """As Kafka's failover does: ReplicaStateMachine.startup first takes the dead leader out of
    the ISR (leader -1, epoch + 1), then PartitionStateMachine.startup elects (epoch + 1)."""
    async def body(c: Cluster, rt: NodeRuntime) -> Any:
        ctl = c.controller_id()
        replicas = [ctl] + [b for b in range(3) if b != ctl]
        assert await c.create_topic(rt, "t", 1, 3, assignment={0: replicas}) == E.NONE
        await c.wait_until(rt, lambda: c.leader_id("t", 0) == ctl)
        c.world.nodes[f"broker-{ctl}"].crash("kill")
        await c.wait_until(rt, lambda: c.leader_id("t", 0) not in (-1, ctl) and c.controller_id() not in (-1, ctl))
        return ctl, await c.zk_json(rt, "/brokers/topics/t/partitions/0/state")

    ctl, state = run_cluster(body)
    assert state["leader"] == [b for b in range(3) if b != ctl][0]
    assert state["leader_epoch"] == 2 and ctl not in state["isr"] and state["controller_epoch"] == 2
