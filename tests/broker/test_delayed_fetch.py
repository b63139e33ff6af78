"""DelayedFetch as Kafka 3.9's: only fetchMessages' own read records a follower's fetch position
(Partition.fetchRecords with updateFetchState = !readFromPurgatory). A follower fetch that waits
in the purgatory and is answered by a later append leaves the leader's record of that follower
as it was when the fetch arrived: its fetch time, its log end, and the leader's end it saw."""

from __future__ import annotations

from typing import Any

import pytest

from kafkasim.broker.partition import PartitionState
from kafkasim.broker.replica_manager import LeaderAndIsrPartition
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.fetch import FetchRequest
from kafkasim.protocol.messages.produce import ProduceRequest
from kafkasim.records.batch import Record, build_batch
from kafkasim.runtime.api import NodeRuntime
from tests.broker.group.group_sim import SimCluster, call, connect, led_partition

pytestmark = pytest.mark.sim

TOPIC, FOLLOWER = "df", 7


def _follower_fetch(offset: int, epoch: int) -> FetchRequest:
    P = FetchRequest.FetchTopic.FetchPartition
    return FetchRequest(replica_id=FOLLOWER, max_wait_ms=5000, min_bytes=1, max_bytes=1 << 20,
                        topics=[FetchRequest.FetchTopic(topic=TOPIC, partitions=[
                            P(partition=0, fetch_offset=offset, current_leader_epoch=epoch,
                              partition_max_bytes=1 << 20)])])


def _produce(value: bytes) -> ProduceRequest:
    PD = ProduceRequest.TopicProduceData.PartitionProduceData
    return ProduceRequest(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[PD(index=0, records=build_batch(
            [Record(0, None, value)]))])])


def test_a_waiting_follower_fetch_answered_by_an_append_records_its_position_only_on_arrival() -> None:
    cluster = SimCluster(seed=5)

    async def main(rt: NodeRuntime) -> Any:
        rm, p = await led_partition(cluster, rt, TOPIC)
        me, epoch = p.local_broker_id, p.leader_epoch + 1
        # The controller adds a follower (not in the ISR, so the high watermark need not wait for it).
        state = PartitionState(me, epoch, [me], [me, FOLLOWER], partition_epoch=p.partition_epoch + 1)
        await rm.become_leader_or_follower(rm.controller_epoch, [LeaderAndIsrPartition((TOPIC, 0), p.log.topic_id,
                                                                                        state)], {})
        await call(await connect(rt, "p"), _produce(b"first"), 7)
        producer = await connect(rt, "p2")

        async def produce_later() -> None:
            await rt.sleep(300)
            out["appended_ms"] = rt.monotonic_ms()
            await call(producer, _produce(b"second"), 7)

        out: dict[str, Any] = {}
        follower = await connect(rt, "follower")
        rt.spawn(produce_later())
        sent = rt.monotonic_ms()
        resp = await call(follower, _follower_fetch(1, epoch), 12)
        out["answered_after_ms"] = rt.monotonic_ms() - sent
        out["answer"] = resp.responses[0].partitions[0]
        replica = p.remote_replicas[FOLLOWER]
        out["replica"] = (replica.log_end_offset, replica.last_fetch_leader_log_end_offset, replica.last_fetch_time_ms)
        out["sent_ms"] = sent
        return out

    out = cluster.run(main, until_ms=30_000)
    answer = out["answer"]
    assert answer.error_code == E.NONE and b"second" in bytes(answer.records)
    assert 300 <= out["answered_after_ms"] < 320, "the append woke the waiting fetch"
    leo, leader_end_seen, fetch_time = out["replica"]
    assert (leo, leader_end_seen) == (1, 1), "the leader's end as it was when the fetch arrived"
    assert out["sent_ms"] <= fetch_time < out["appended_ms"], "the fetch time is its arrival, not its answer"
