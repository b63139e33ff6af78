"""Shared pieces of the group tests in the simulated world: one broker on a SimNode (crash and
restart on the same disk), client nodes, and raw request helpers for pinning API versions."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from kafkasim.broker.config import BrokerConfig
from kafkasim.broker.server import KafkaServer
from kafkasim.client.connection import BrokerConnection
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.find_coordinator import FindCoordinatorRequest
from kafkasim.protocol.messages.metadata import MetadataRequest
from kafkasim.protocol.primitives import Message
from kafkasim.runtime.api import NodeRuntime
from kafkasim.runtime.sim.world import SimNode, SimWorld

BOOTSTRAP = "broker-0:9092"
DEFAULT_GROUP_CONFIG: dict[str, Any] = {
    "group_initial_rebalance_delay_ms": 0,
    "group_min_session_timeout_ms": 1000,
    "offsets_topic_num_partitions": 5,
    "num_partitions": 4,
    # A restarted broker waits for its previous ZooKeeper session to expire before registering.
    "zookeeper_session_timeout_ms": 3000,
}


class SimCluster:
    def __init__(self, seed: int = 1, **config: Any) -> None:
        self.world = SimWorld(seed)
        self.config = dict(DEFAULT_GROUP_CONFIG, **config)
        self.broker_node = self.world.add_node("broker-0")
        self.server = self._start(self.broker_node.runtime)

    def _start(self, rt: NodeRuntime, before_startup: Callable[[KafkaServer], None] | None = None) -> KafkaServer:
        server = KafkaServer(rt, BrokerConfig(host="broker-0", port=9092, log_dir="logs", **self.config))
        if before_startup is not None:
            before_startup(server)
        rt.spawn(server.startup(), name="startup")
        return server

    def restart_broker(self, mode: str = "kill",
                       before_startup: Callable[[KafkaServer], None] | None = None) -> KafkaServer:
        """Crash the broker process (kill: the page cache survives) and start a new one on the
        same disk."""
        self.broker_node.crash(mode)
        self.server = self._start(self.broker_node.restart(), before_startup)
        return self.server

    def client(self, name: str) -> SimNode:
        return self.world.add_node(name)

    def run(self, main: Callable[[NodeRuntime], Awaitable[Any]], until_ms: float = 600_000,
            node: str = "client") -> Any:
        c = self.world.nodes.get(node) or self.client(node)
        out: dict[str, Any] = {}

        async def wrapper() -> None:
            await c.runtime.sleep(100)
            out["result"] = await main(c.runtime)

        task = c.runtime.spawn(wrapper(), name="test-main")
        self.world.run(self.world.now_ms() + until_ms)
        assert self.world.failures == [], self.world.failures
        assert task.done(), "the test's main task did not finish"
        return out["result"]


async def connect(rt: NodeRuntime, client_id: str = "t") -> BrokerConnection:
    conn = BrokerConnection(rt, "broker-0", 9092, client_id)
    await conn.connect()
    return conn


async def call(conn: BrokerConnection, body: Message, version: int) -> Any:
    assert body.API_KEY is not None
    return await conn.send_at(version, body)


async def led_partition(cluster: SimCluster, rt: NodeRuntime, topic: str) -> tuple[Any, Any]:
    """Create `topic` (a Metadata request auto-creates it) and wait until the broker leads its
    partition 0: (the ReplicaManager, the Partition)."""
    conn = await connect(rt)
    await call(conn, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                     allow_auto_topic_creation=True), 4)
    await rt.sleep(1000)
    rm = cluster.server.replica_manager
    assert rm is not None
    p = rm.get_partition(topic, 0)
    assert p is not None and p.is_leader
    return rm, p


async def find_coordinator(rt: NodeRuntime, conn: BrokerConnection, group: str, version: int = 1,
                           attempts: int = 400) -> Any:
    """FindCoordinator until it answers NONE (the first one creates __consumer_offsets)."""
    codes = []
    for _ in range(attempts):
        resp = await call(conn, FindCoordinatorRequest(key=group, key_type=0), version)
        codes.append(resp.error_code)
        if resp.error_code == E.NONE:
            return resp, codes
        await rt.sleep(50)
    raise AssertionError(f"no coordinator for {group}: {codes}")


class MemberRunner:
    """Drives a GroupMember like a consumer's poll loop: rejoin whenever the heartbeat says so.
    `history` keeps (generation, assignment) for every generation the member synced."""

    def __init__(self, rt: NodeRuntime, member: Any, topics: list[str]) -> None:
        self.rt, self.member, self.topics = rt, member, topics
        self.stopped = False
        self.task = rt.spawn(self._loop(), name=f"runner {member.client_id}")

    async def _loop(self) -> None:
        while not self.stopped:
            if self.member.rejoin_needed:
                await self.member.ensure_active_group(self.topics)
                self.member.start_heartbeats()
            await self.rt.sleep(50)

    @property
    def history(self) -> list[tuple[int, list[tuple[str, int]]]]:
        return list(self.member.generations_seen)

    def silence(self) -> None:
        """Stop everything without leaving the group (a hung or partitioned consumer)."""
        self.stopped = True
        self.member.stop_heartbeats()
        self.task.cancel()

    async def leave(self) -> int:
        self.silence()
        return int(await self.member.leave_group())
