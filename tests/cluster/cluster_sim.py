"""A simulated Kafka cluster for tests: N brokers on a SimWorld with SimZooKeeper, a client
node, and helpers to speak the wire protocol and read the brokers' state directly."""

from __future__ import annotations

import json
import struct
from typing import Any, Awaitable, Callable, Optional

from kafkasim.broker.config import BrokerConfig
from kafkasim.cluster.sim_cluster import SimCluster
from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.framing import encode_request
from kafkasim.protocol.messages.create_topics import CreateTopicsRequest
from kafkasim.protocol.messages.headers import RequestHeader
from kafkasim.protocol.messages.metadata import MetadataRequest
from kafkasim.protocol.messages.produce import ProduceRequest
from kafkasim.records.batch import Record, build_batch
from kafkasim.runtime.api import NodeRuntime, Stream
from kafkasim.runtime.sim.world import SimWorld

Body = Callable[["Cluster", NodeRuntime], Awaitable[Any]]


class Wire:
    """One connection speaking raw requests at chosen versions."""

    def __init__(self, stream: Stream) -> None:
        self.stream, self.corr = stream, 0

    async def call(self, key: int, version: int, body: Any) -> Any:
        self.corr += 1
        await self.stream.write(encode_request(RequestHeader(request_api_key=key, request_api_version=version,
                                                             correlation_id=self.corr, client_id="t"), body))
        frame = await self.stream.read_frame(1 << 24)
        assert struct.unpack_from(">i", frame, 0)[0] == self.corr
        skip = 4 if A.response_header_version(key, version) == 0 else 5
        return A.api_info(key).response.decode(memoryview(frame)[skip:], version)

    def close(self) -> None:
        self.stream.close()


class Cluster:
    def __init__(self, world: SimWorld, sim: SimCluster) -> None:
        self.world, self.sim = world, sim

    def server(self, broker_id: int) -> Any:
        return self.sim.servers[f"broker-{broker_id}"]

    def replica(self, broker_id: int, topic: str, partition: int) -> Any:
        """The broker's replica of the partition; None if it has none (or has not started yet)."""
        rm = self.server(broker_id).replica_manager
        return rm.get_partition(topic, partition) if rm is not None else None

    async def wire(self, rt: NodeRuntime, broker_id: int) -> Wire:
        return Wire(await rt.net.connect(f"broker-{broker_id}", 9092, 2000))

    def controller_id(self) -> int:
        name = self.sim.controller()
        return -1 if name is None else int(name.split("-")[1])

    def leader_id(self, topic: str, partition: int) -> int:
        name = self.sim.leader_of(topic, partition)
        return -1 if name is None else int(name.split("-")[1])

    async def zk_json(self, rt: NodeRuntime, path: str) -> Any:
        data, st = await self.any_live_server().zk.get(path)
        return json.loads(data) if data else None

    def any_live_server(self) -> Any:
        """A running broker with an open ZooKeeper session (a stopped one keeps its node up)."""
        return next(s for _, s in self.sim.live_servers() if s.zk is not None and not s.zk._closed)

    async def wait_until(self, rt: NodeRuntime, cond: Callable[[], bool], timeout_ms: float = 30000,
                         step_ms: float = 50) -> bool:
        waited = 0.0
        while not cond():
            if waited >= timeout_ms:
                return False
            await rt.sleep(step_ms)
            waited += step_ms
        return True

    async def create_topic(self, rt: NodeRuntime, name: str, partitions: int, rf: int,
                           configs: Optional[dict[str, str]] = None,
                           assignment: Optional[dict[int, list[int]]] = None) -> int:
        T = CreateTopicsRequest.CreatableTopic
        req = CreateTopicsRequest(topics=[T(
            name=name, num_partitions=-1 if assignment else partitions, replication_factor=-1 if assignment else rf,
            assignments=[T.CreatableReplicaAssignment(partition_index=p, broker_ids=r)
                         for p, r in sorted((assignment or {}).items())],
            configs=[T.CreatableTopicConfig(name=k, value=v) for k, v in sorted((configs or {}).items())])],
            timeout_ms=10000, validate_only=False)
        w = await self.wire(rt, self.controller_id())
        try:
            return int((await w.call(A.CREATE_TOPICS, 7, req)).topics[0].error_code)
        finally:
            w.close()

    async def produce(self, rt: NodeRuntime, topic: str, partition: int, values: list[bytes], acks: int = -1,
                      timeout_ms: int = 10000, broker_id: Optional[int] = None) -> tuple[int, int]:
        bid = self.leader_id(topic, partition) if broker_id is None else broker_id
        w = await self.wire(rt, bid)
        PD = ProduceRequest.TopicProduceData.PartitionProduceData
        batch = build_batch([Record(1000 + i, None, v) for i, v in enumerate(values)])
        req = ProduceRequest(transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=[
            ProduceRequest.TopicProduceData(name=topic, partition_data=[PD(index=partition, records=batch)])])
        try:
            pr = (await w.call(A.PRODUCE, 9, req)).responses[0].partition_responses[0]
            return int(pr.error_code), int(pr.base_offset)
        finally:
            w.close()

    async def metadata(self, rt: NodeRuntime, broker_id: int, topics: Optional[list[str]]) -> Any:
        w = await self.wire(rt, broker_id)
        T = MetadataRequest.MetadataRequestTopic
        try:
            return await w.call(A.METADATA, 12, MetadataRequest(
                topics=None if topics is None else [T(name=t) for t in topics], allow_auto_topic_creation=False))
        finally:
            w.close()


def broker_config(broker_id: int, host: str, **extra: Any) -> BrokerConfig:
    cfg = BrokerConfig.from_properties({"zookeeper.session.timeout.ms": 6000, "replica.lag.time.max.ms": 4000,
                                        **extra})
    cfg.broker_id, cfg.host, cfg.port, cfg.log_dir = broker_id, host, 9092, "kafka-logs"
    return cfg


def run_cluster(body: Body, brokers: int = 3, seed: int = 7, until_ms: float = 300_000,
                allow_failures: bool = False, **configs: Any) -> Any:
    """Start `brokers` brokers, wait for a controller, run `body(cluster, client_rt)`."""
    world = SimWorld(seed)
    props = {k.replace("_", "."): v for k, v in configs.items()}
    sim = SimCluster(world, lambda bid, host: broker_config(bid, host, **props))
    for i in range(brokers):
        sim.add_broker(i)
    client = world.add_node("client")
    cluster = Cluster(world, sim)
    out: dict[str, Any] = {}

    async def main() -> None:
        ok = await cluster.wait_until(client.runtime, lambda: sim.controller() is not None and all(
            len(s.metadata_cache.brokers) == brokers for _, s in sim.live_servers()))
        assert ok, "no controller, or brokers without metadata"
        out["result"] = await body(cluster, client.runtime)

    task = client.runtime.spawn(main())
    while not task.done() and world.now_ms() < until_ms:
        world.run(min(world.now_ms() + 1000, until_ms))
    assert task.done(), "the test body did not finish"
    if not allow_failures:
        assert world.failures == [], world.failures
    assert "result" in out, world.failures
    return out["result"]


def ok(code: int) -> bool:
    return code == E.NONE
