"""ReplicaManager.becomeLeaderOrFollower's fencing, as Kafka 3.9 does it in ZooKeeper mode: an
older controller epoch refuses the whole request; per partition, a leader epoch older than the
current one, or the same one, is STALE_CONTROLLER_EPOCH and nothing is applied — except a
same-epoch request that only brings the topic id the log lacks (assigned, NONE); a topic id unlike
the log's is INCONSISTENT_TOPIC_ID; a newer epoch is applied, unless its partition epoch is older
than the partition's (Partition.makeLeader skips it; the answer is NONE)."""

from __future__ import annotations

from typing import Any

import pytest

from kafkasim.broker.partition import PartitionState
from kafkasim.broker.replica_manager import LeaderAndIsrPartition
from kafkasim.protocol import errors as E
from kafkasim.runtime.api import NodeRuntime
from tests.broker.group.group_sim import SimCluster, led_partition

pytestmark = pytest.mark.sim

TOPIC = "lai"


def test_leader_and_isr_is_applied_only_at_a_newer_leader_epoch() -> None:
    cluster = SimCluster(seed=3)

    async def main(rt: NodeRuntime) -> Any:
        rm, p = await led_partition(cluster, rt, TOPIC)
        assert p.log.topic_id is not None
        topic_id, epoch, ctl = p.log.topic_id, p.leader_epoch, rm.controller_epoch
        me = p.local_broker_id

        async def send(leader_epoch: int, partition_epoch: int, tid: bytes = topic_id,
                       controller_epoch: int = ctl) -> tuple[int, dict[Any, int]]:
            state = PartitionState(me, leader_epoch, [me], [me], partition_epoch=partition_epoch)
            return await rm.become_leader_or_follower(controller_epoch, [LeaderAndIsrPartition((TOPIC, 0), tid, state)],
                                                      {})

        out: dict[str, Any] = {"start": (epoch, p.partition_epoch)}
        out["old controller"] = (await send(epoch + 5, 50, controller_epoch=ctl - 1), p.leader_epoch)
        out["older"] = (await send(epoch - 1, 60), p.partition_epoch)
        out["same"] = (await send(epoch, 70), p.partition_epoch)
        out["other topic id"] = (await send(epoch + 1, 80, tid=b"\x07" * 16), p.leader_epoch)
        p.log.topic_id = None  # a log from before topic ids: the same epoch may bring one
        out["same, brings the id"] = (await send(epoch, 90), p.log.topic_id == topic_id, p.partition_epoch)
        out["newer"] = (await send(epoch + 1, 100), p.leader_epoch, p.partition_epoch)
        cache = list(p.log.leader_epoch_cache.entries)
        out["newer, older partition epoch"] = (await send(epoch + 2, 99), p.leader_epoch, p.partition_epoch,
                                               p.log.leader_epoch_cache.entries == cache)
        return out

    out = cluster.run(main, until_ms=30_000)
    epoch, partition_epoch = out["start"]
    tp = (TOPIC, 0)
    assert out["old controller"] == ((E.STALE_CONTROLLER_EPOCH, {}), epoch)
    assert out["older"] == ((E.NONE, {tp: E.STALE_CONTROLLER_EPOCH}), partition_epoch)
    assert out["same"] == ((E.NONE, {tp: E.STALE_CONTROLLER_EPOCH}), partition_epoch)  # not applied
    assert out["other topic id"] == ((E.NONE, {tp: E.INCONSISTENT_TOPIC_ID}), epoch)
    assert out["same, brings the id"] == ((E.NONE, {tp: E.NONE}), True, partition_epoch)
    assert out["newer"] == ((E.NONE, {tp: E.NONE}), epoch + 1, 100)
    # Accepted by the ReplicaManager (a newer leader epoch), skipped by Partition.makeLeader.
    assert out["newer, older partition epoch"] == ((E.NONE, {tp: E.NONE}), epoch + 1, 100, True)
