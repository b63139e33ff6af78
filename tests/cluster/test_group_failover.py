"""The group coordinator moves with its __consumer_offsets partition: with
offsets.topic.replication.factor=3 a committed offset is replicated like any acks=all write;
when the coordinator's broker dies, the partition's new leader loads the groups from its
replica (GroupCoordinator.onElection) and answers for them, with the committed offsets."""

from __future__ import annotations

from typing import Any

import pytest

from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.find_coordinator import FindCoordinatorRequest
from kafkasim.protocol.messages.offset_commit import OffsetCommitRequest as OC
from kafkasim.protocol.messages.offset_fetch import OffsetFetchRequest as OF
from kafkasim.runtime.api import NodeRuntime
from tests.cluster.cluster_sim import Cluster, run_cluster

pytestmark = pytest.mark.sim


async def _coordinator(c: Cluster, rt: NodeRuntime, via: int, not_in: tuple[int, ...] = ()) -> int:
    for _ in range(200):
        w = await c.wire(rt, via)
        try:
            r = await w.call(A.FIND_COORDINATOR, 3, FindCoordinatorRequest(key="g", key_type=0))
        finally:
            w.close()
        if r.error_code == E.NONE and r.node_id not in not_in:
            return int(r.node_id)
        await rt.sleep(100)
    raise AssertionError("no coordinator")


def test_committed_offsets_survive_the_coordinators_death() -> None:
    async def body(c: Cluster, rt: NodeRuntime) -> Any:
        assert await c.create_topic(rt, "t", 1, 3) == E.NONE
        first = await _coordinator(c, rt, 0)
        T = OC.OffsetCommitRequestTopic
        w = await c.wire(rt, first)
        commit = await w.call(A.OFFSET_COMMIT, 8, OC(group_id="g", generation_id_or_member_epoch=-1, member_id="",
                                                     topics=[T(name="t", partitions=[T.OffsetCommitRequestPartition(
                                                         partition_index=0, committed_offset=42,
                                                         committed_metadata="m")])]))
        w.close()
        c.world.nodes[f"broker-{first}"].crash("kill")
        other = next(b for b in range(3) if b != first)
        second = await _coordinator(c, rt, other, not_in=(first,))
        w = await c.wire(rt, second)
        for _ in range(100):  # the load of the group's partition may still be in progress
            fetched = await w.call(A.OFFSET_FETCH, 6, OF(group_id="g", topics=[OF.OffsetFetchRequestTopic(
                name="t", partition_indexes=[0])]))
            if fetched.error_code != E.COORDINATOR_LOAD_IN_PROGRESS:
                break
            await rt.sleep(50)
        w.close()
        return first, commit, second, fetched

    first, commit, second, fetched = run_cluster(body, offsets_topic_replication_factor=3,
                                                 offsets_topic_num_partitions=3)
    assert commit.topics[0].partitions[0].error_code == E.NONE
    assert second != first
    p = fetched.topics[0].partitions[0]
    assert (fetched.error_code, p.error_code, p.committed_offset, p.metadata) == (E.NONE, E.NONE, 42, "m")
