"""Log dir failure in the simulated world: an EIO on the leader's disk takes its log dir
offline (KafkaStorageError), the broker stops serving those replicas and writes
/log_dir_event_notification; the controller asks it about its replicas (LeaderAndIsr), gets
KAFKA_STORAGE_ERROR for them, marks them offline and elects other leaders from the ISR."""

from __future__ import annotations

from typing import Any

import pytest

from kafkasim.protocol import errors as E
from kafkasim.runtime.api import NodeRuntime
from tests.cluster.cluster_sim import Cluster, run_cluster

pytestmark = pytest.mark.sim


def test_eio_takes_the_log_dir_offline_and_leadership_moves() -> None:
    async def body(c: Cluster, rt: NodeRuntime) -> Any:
        ctl = c.controller_id()
        leader = next(b for b in range(3) if b != ctl)
        assert await c.create_topic(rt, "t", 1, 3, {"min.insync.replicas": "2"},
                                    assignment={0: [leader, ctl, 3 - ctl - leader]}) == E.NONE
        await c.wait_until(rt, lambda: c.leader_id("t", 0) == leader)
        assert (await c.produce(rt, "t", 0, [b"before"]))[0] == E.NONE
        c.world.nodes[f"broker-{leader}"].disk.fail_next_write()
        failed = await c.produce(rt, "t", 0, [b"eio"])
        t0 = c.world.now_ms()
        moved = await c.wait_until(rt, lambda: c.leader_id("t", 0) not in (-1, leader))
        took = c.world.now_ms() - t0
        state = await c.zk_json(rt, "/brokers/topics/t/partitions/0/state")
        after = await c.produce(rt, "t", 0, [b"after"])
        meta = await c.metadata(rt, ctl, ["t"])
        offline = meta.topics[0].partitions[0].offline_replicas
        notifications = await c.any_live_server().zk.get_children("/log_dir_event_notification")
        return leader, failed, moved, took, state, after, offline, notifications

    leader, failed, moved, took, state, after, offline, notifications = run_cluster(body)
    assert failed[0] == E.KAFKA_STORAGE_ERROR
    assert moved and took < 1000  # no session timeout: the notification tells the controller at once
    assert state["leader"] != leader and leader not in state["isr"]
    assert after == (E.NONE, 1)
    assert offline == [leader]
    assert notifications == []  # the controller consumed (deleted) the notification
