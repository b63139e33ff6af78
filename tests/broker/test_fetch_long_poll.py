"""Fetch long poll in simulated time: a fetch that finds nothing waits max_wait_ms, and an append
to one of its partitions wakes it at once (DelayedFetch); acks 0/1/all answer as Kafka does."""

from __future__ import annotations

from typing import Any

import pytest

from kafkasim.broker.config import BrokerConfig
from kafkasim.broker.server import KafkaServer
from kafkasim.client.connection import BrokerConnection
from kafkasim.protocol.messages.fetch import FetchRequest
from kafkasim.protocol.messages.produce import ProduceRequest
from kafkasim.records.batch import Record, build_batch
from kafkasim.runtime.sim.world import SimWorld

pytestmark = pytest.mark.sim


def _fetch(offset: int, max_wait_ms: int) -> FetchRequest:
    P = FetchRequest.FetchTopic.FetchPartition
    return FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                        topics=[FetchRequest.FetchTopic(topic="t", partitions=[
                            P(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])])


def _produce(acks: int, value: bytes) -> ProduceRequest:
    PD = ProduceRequest.TopicProduceData.PartitionProduceData
    return ProduceRequest(transactional_id=None, acks=acks, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name="t", partition_data=[PD(index=0, records=build_batch(
            [Record(0, None, value)]))])])


def _world() -> tuple[SimWorld, Any]:
    world = SimWorld(9)
    b = world.add_node("broker-0")
    server = KafkaServer(b.runtime, BrokerConfig(host="broker-0", port=9092, log_dir="logs"))
    b.runtime.spawn(server.startup())
    return world, world.add_node("client")


def test_empty_fetch_waits_max_wait_and_append_wakes_it() -> None:
    world, c = _world()
    rt = c.runtime
    out: dict[str, Any] = {}

    async def main() -> None:
        await rt.sleep(50)
        await server_topic(rt)
        consumer = BrokerConnection(rt, "broker-0", 9092, "c")
        await consumer.connect()
        t0 = rt.monotonic_ms()
        empty = await consumer.request(_fetch(0, 700))
        out["empty_wait_ms"] = rt.monotonic_ms() - t0
        out["empty_records"] = empty.responses[0].partitions[0].records
        producer = BrokerConnection(rt, "broker-0", 9092, "p")
        await producer.connect()

        async def produce_later() -> None:
            await rt.sleep(100)
            out["acks1"] = await producer.request(_produce(1, b"one"))

        rt.spawn(produce_later())
        t1 = rt.monotonic_ms()
        woke = await consumer.request(_fetch(0, 5000))
        out["woken_after_ms"] = rt.monotonic_ms() - t1
        out["woken_records"] = bytes(woke.responses[0].partitions[0].records)
        assert await producer.request(_produce(0, b"zero"), expect_response=False) is None
        out["acks_all"] = await producer.request(_produce(-1, b"all"))

    task = rt.spawn(main())
    world.run(20_000)
    assert task.done() and world.failures == []
    assert 700 <= out["empty_wait_ms"] < 710 and not out["empty_records"]
    assert 100 <= out["woken_after_ms"] < 110 and b"one" in out["woken_records"]
    r1 = out["acks1"].responses[0].partition_responses[0]
    rall = out["acks_all"].responses[0].partition_responses[0]
    assert (r1.error_code, r1.base_offset) == (0, 0)
    assert (rall.error_code, rall.base_offset) == (0, 2), "the acks=0 record took offset 1"


async def server_topic(rt: Any) -> None:
    from kafkasim.client.cluster import ClientCluster
    cluster = ClientCluster(rt, "broker-0:9092", "admin")
    assert await cluster.create_topic("t", 1, 1) == 0
    cluster.close()
