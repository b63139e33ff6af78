"""Cluster administration in the simulated world: controlled shutdown moves leadership first,
ElectLeaders brings it back to the preferred replica, AlterPartitionReassignments moves a
partition's replicas, DeleteTopics has every replica deleted, an offsets topic with
offsets.topic.replication.factor=3 is not created until three brokers are alive, and a broker
without broker.id gets reserved.broker.max.id + the /brokers/seqid sequence."""

from __future__ import annotations

from typing import Any

import pytest

from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.alter_partition_reassignments import AlterPartitionReassignmentsRequest as APR
from kafkasim.protocol.messages.delete_topics import DeleteTopicsRequest
from kafkasim.protocol.messages.elect_leaders import ElectLeadersRequest
from kafkasim.protocol.messages.find_coordinator import FindCoordinatorRequest
from kafkasim.protocol.messages.list_partition_reassignments import ListPartitionReassignmentsRequest
from kafkasim.runtime.api import NodeRuntime
from tests.cluster.cluster_sim import Cluster, run_cluster

pytestmark = pytest.mark.sim


def test_controlled_shutdown_moves_leadership_before_the_broker_stops() -> None:
    async def body(c: Cluster, rt: NodeRuntime) -> Any:
        ctl = c.controller_id()
        leader = next(b for b in range(3) if b != ctl)
        assert await c.create_topic(rt, "t", 1, 3, assignment={0: [leader, ctl, 3 - ctl - leader]}) == E.NONE
        await c.wait_until(rt, lambda: c.leader_id("t", 0) == leader and
                           len(c.server(leader).replica_manager.get_partition("t", 0).isr) == 3)
        server = c.server(leader)
        before = c.world.now_ms()
        await server.shutdown()
        moved_to = c.leader_id("t", 0)
        state = await c.zk_json(rt, "/brokers/topics/t/partitions/0/state")
        return leader, moved_to, state, c.world.now_ms() - before

    leader, moved_to, state, took_ms = run_cluster(body)
    assert moved_to not in (-1, leader) and state["leader"] == moved_to
    assert leader not in state["isr"]  # a shutting-down broker leaves the ISR
    assert took_ms < 1000  # no session timeout to wait for


def test_elect_leaders_restores_the_preferred_leader() -> None:
    async def body(c: Cluster, rt: NodeRuntime) -> Any:
        ctl = c.controller_id()
        preferred = next(b for b in range(3) if b != ctl)
        assert await c.create_topic(rt, "t", 1, 3, assignment={0: [preferred, ctl, 3 - ctl - preferred]}) == E.NONE
        await c.wait_until(rt, lambda: c.leader_id("t", 0) == preferred)
        c.world.nodes[f"broker-{preferred}"].crash("kill")
        await c.wait_until(rt, lambda: c.leader_id("t", 0) not in (-1, preferred))
        c.sim.restart(f"broker-{preferred}")
        await c.wait_until(rt, lambda: preferred in c.server(c.leader_id("t", 0)).replica_manager
                           .get_partition("t", 0).isr, timeout_ms=60000)
        w = await c.wire(rt, c.controller_id())
        T = ElectLeadersRequest.TopicPartitions
        r = await w.call(A.ELECT_LEADERS, 2, ElectLeadersRequest(election_type=0, timeout_ms=5000,
                                                                 topic_partitions=[T(topic="t", partitions=[0])]))
        again = await w.call(A.ELECT_LEADERS, 2, ElectLeadersRequest(election_type=0, timeout_ms=5000,
                                                                     topic_partitions=[T(topic="t", partitions=[0])]))
        await c.wait_until(rt, lambda: c.leader_id("t", 0) == preferred)
        return preferred, r, again, c.leader_id("t", 0)

    preferred, r, again, leader = run_cluster(body)
    assert [(p.partition_id, p.error_code) for p in r.replica_election_results[0].partition_result] == [(0, E.NONE)]
    assert again.replica_election_results[0].partition_result[0].error_code == E.ELECTION_NOT_NEEDED
    assert leader == preferred


def test_reassignment_moves_the_replicas() -> None:
    async def body(c: Cluster, rt: NodeRuntime) -> Any:
        assert await c.create_topic(rt, "t", 1, 2, assignment={0: [0, 1]}) == E.NONE
        await c.wait_until(rt, lambda: c.leader_id("t", 0) == 0)
        for i in range(5):
            assert (await c.produce(rt, "t", 0, [f"v{i}".encode()]))[0] == E.NONE
        w = await c.wire(rt, c.controller_id())
        T = APR.ReassignableTopic
        r = await w.call(A.ALTER_PARTITION_REASSIGNMENTS, 0, APR(timeout_ms=5000, topics=[
            T(name="t", partitions=[T.ReassignablePartition(partition_index=0, replicas=[2, 1])])]))
        done = await c.wait_until(rt, lambda: c.sim.servers["broker-0"].replica_manager.get_partition("t", 0) is None,
                                  timeout_ms=30000)
        listed = await w.call(A.LIST_PARTITION_REASSIGNMENTS, 0, ListPartitionReassignmentsRequest(timeout_ms=5000,
                                                                                                   topics=None))
        assignment = await c.zk_json(rt, "/brokers/topics/t")
        state = await c.zk_json(rt, "/brokers/topics/t/partitions/0/state")
        leo = c.server(2).replica_manager.get_partition("t", 0).log.log_end_offset
        return r, done, listed, assignment, state, leo, c.server(0).rt.fs.exists("kafka-logs/t-0")

    r, done, listed, assignment, state, leo, old_log = run_cluster(body)
    assert r.error_code == E.NONE and r.responses[0].partitions[0].error_code == E.NONE
    assert done and listed.topics == []
    assert assignment["partitions"] == {"0": [2, 1]} and assignment["adding_replicas"] == {}
    assert state["leader"] == 2 and sorted(state["isr"]) == [1, 2]
    assert leo == 5 and old_log is False  # the new replica copied the data; the old one was deleted


def test_delete_topic_deletes_every_replica() -> None:
    async def body(c: Cluster, rt: NodeRuntime) -> Any:
        assert await c.create_topic(rt, "t", 2, 3) == E.NONE
        await c.wait_until(rt, lambda: all(c.server(b).replica_manager.get_partition("t", 1) is not None
                                           for b in range(3)))
        w = await c.wire(rt, c.controller_id())
        r = await w.call(A.DELETE_TOPICS, 6, DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(
            name="t", topic_id=bytes(16))], timeout_ms=5000))
        gone = await c.wait_until(rt, lambda: all(not c.server(b).rt.fs.exists(f"kafka-logs/t-{p}")
                                                  for b in range(3) for p in range(2)))
        zk = c.any_live_server().zk
        left = [p for p in ("/brokers/topics/t", "/config/topics/t", "/admin/delete_topics/t")
                if await zk.exists(p) is not None]
        return r.responses[0].error_code, gone, left

    code, gone, left = run_cluster(body)
    assert code == E.NONE and gone
    assert left == []


def test_offsets_topic_waits_for_enough_brokers() -> None:
    async def body(c: Cluster, rt: NodeRuntime) -> Any:
        c.world.nodes["broker-2"].crash("kill")
        await c.wait_until(rt, lambda: all(len(s.metadata_cache.brokers) == 2 for _, s in c.sim.live_servers()))
        w = await c.wire(rt, c.controller_id())
        req = FindCoordinatorRequest(key="g", key_type=0)
        early = (await w.call(A.FIND_COORDINATOR, 3, req)).error_code
        exists_early = await c.any_live_server().zk.exists("/brokers/topics/__consumer_offsets")
        c.sim.restart("broker-2")
        await c.wait_until(rt, lambda: all(len(s.metadata_cache.brokers) == 3 for _, s in c.sim.live_servers()))
        codes = []
        for _ in range(50):
            codes.append((await w.call(A.FIND_COORDINATOR, 3, req)).error_code)
            if codes[-1] == E.NONE:
                break
            await rt.sleep(100)
        assignment = await c.zk_json(rt, "/brokers/topics/__consumer_offsets")
        return early, exists_early, codes[-1], assignment

    early, exists_early, late, assignment = run_cluster(body, offsets_topic_replication_factor=3,
                                                        offsets_topic_num_partitions=4)
    assert early == E.COORDINATOR_NOT_AVAILABLE and exists_early is None
    assert late == E.NONE
    assert all(len(r) == 3 for r in assignment["partitions"].values()) and len(assignment["partitions"]) == 4


def test_broker_id_generation_from_the_sequence() -> None:
    from kafkasim.broker.config import BrokerConfig
    from kafkasim.broker.server import KafkaServer

    async def body(c: Cluster, rt: NodeRuntime) -> Any:
        node = c.world.add_node("broker-new")
        cfg = BrokerConfig.from_properties({"zookeeper.session.timeout.ms": 6000})
        cfg.broker_id, cfg.host, cfg.port, cfg.log_dir = -1, "broker-new", 9092, "kafka-logs"
        server = KafkaServer(node.runtime, cfg)
        node.runtime.spawn(server.startup())
        await c.wait_until(rt, lambda: server.broker_epoch > 0)
        registered = await c.any_live_server().zk.exists(f"/brokers/ids/{server.config.broker_id}")
        meta = node.runtime.fs.open("kafka-logs/meta.properties", create=False)
        text = meta.read(0, meta.size()).decode()
        return server.config.broker_id, registered is not None, text

    broker_id, registered, meta = run_cluster(body)
    assert broker_id == 1001 and registered  # reserved.broker.max.id (1000) + seqid version 1
    assert "broker.id=1001" in meta


def test_the_old_zookeeper_admin_paths() -> None:
    """/admin/preferred_replica_election, /admin/reassign_partitions and /isr_change_notification
    (what pre-2.4 tools and IBP < 2.7 brokers write) are acted on and consumed."""
    from kafkasim.broker.zk import zk_data as Z

    async def body(c: Cluster, rt: NodeRuntime) -> Any:
        ctl = c.controller_id()
        preferred = next(b for b in range(3) if b != ctl)
        third = 3 - ctl - preferred
        assert await c.create_topic(rt, "t", 1, 2, assignment={0: [preferred, ctl]}) == E.NONE
        await c.wait_until(rt, lambda: c.leader_id("t", 0) == preferred and
                           len(c.server(preferred).replica_manager.get_partition("t", 0).isr) == 2)
        zk = c.server(ctl).zk
        # Leadership away from the preferred replica, then back through the znode.
        c.world.nodes[f"broker-{preferred}"].crash("kill")
        await c.wait_until(rt, lambda: c.leader_id("t", 0) == ctl)
        c.sim.restart(f"broker-{preferred}")
        await c.wait_until(rt, lambda: preferred in c.server(ctl).replica_manager.get_partition("t", 0).isr,
                           timeout_ms=60000)
        await zk.create(Z.ADMIN_PREFERRED_REPLICA_ELECTION, Z.partitions_json([("t", 0)]))
        back = await c.wait_until(rt, lambda: c.leader_id("t", 0) == preferred)
        election_znode = await zk.exists(Z.ADMIN_PREFERRED_REPLICA_ELECTION)
        # Reassignment through the znode: [preferred, ctl] -> [third, preferred].
        await zk.create(Z.ADMIN_REASSIGN_PARTITIONS, Z.reassignment_json({("t", 0): [third, preferred]}))
        moved = await c.wait_until(rt, lambda: c.server(ctl).replica_manager.get_partition("t", 0) is None,
                                   timeout_ms=30000)
        assignment = await c.zk_json(rt, "/brokers/topics/t")
        reassign_znode = await zk.exists(Z.ADMIN_REASSIGN_PARTITIONS)
        # An ISR change notification: the controller re-reads the state and tells every broker.
        data, st = await zk.get("/brokers/topics/t/partitions/0/state")
        state = Z.parse_partition_state(data)
        await zk.set("/brokers/topics/t/partitions/0/state",
                     Z.partition_state_json(state.leader, state.leader_epoch, [state.leader], state.controller_epoch),
                     st.version)
        await zk.create(f"{Z.ISR_CHANGE_NOTIFICATION}/{Z.ISR_CHANGE_PREFIX}", Z.partitions_json([("t", 0)]),
                        sequential=True)
        propagated = await c.wait_until(rt, lambda: all(
            c.server(b).metadata_cache.topic("t").partitions[0].isr == [state.leader] for b in range(3)))
        left = await zk.get_children(Z.ISR_CHANGE_NOTIFICATION)
        return back, election_znode, moved, assignment["partitions"], reassign_znode, propagated, left, third

    back, election_znode, moved, partitions, reassign_znode, propagated, left, third = run_cluster(body)
    assert back and election_znode is None
    assert moved and partitions["0"][0] == third and reassign_znode is None
    assert propagated and left == []
