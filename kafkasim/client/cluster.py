"""ClientCluster: bootstrap, metadata, partition leaders and one connection per broker."""

from __future__ import annotations

from dataclasses import dataclass

from mypy_extensions import mypyc_attr

from kafkasim.client.connection import BrokerConnection
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.create_topics import CreateTopicsRequest
from kafkasim.protocol.messages.metadata import MetadataRequest
from kafkasim.protocol.primitives import ZERO_UUID
from kafkasim.runtime.api import NetworkError, NodeRuntime, RuntimeTimeout


@dataclass(frozen=True)
class PartitionLeader:
    leader: int
    leader_epoch: int


def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    out = []
    for item in servers.split(","):
        host, port = item.strip().rsplit(":", 1)
        out.append((host, int(port)))
    return out


@mypyc_attr(allow_interpreted_subclasses=True)
class ClientCluster:
    def __init__(self, rt: NodeRuntime, bootstrap: str, client_id: str, request_timeout_ms: float = 30000) -> None:
        self.rt = rt
        self.bootstrap = parse_bootstrap(bootstrap)
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.brokers: dict[int, tuple[str, int]] = {}
        self.leaders: dict[tuple[str, int], PartitionLeader] = {}
        self.partition_counts: dict[str, int] = {}
        self.topic_ids: dict[str, bytes] = {}
        self.controller_id = -1
        self._conns: dict[tuple[str, int], BrokerConnection] = {}
        self._starting: tuple[str, int] | None = None  # the last broker that answered empty metadata

    async def connection(self, host: str, port: int) -> BrokerConnection:
        conn = self._conns.get((host, port))
        if conn is None or conn.closed:
            conn = BrokerConnection(self.rt, host, port, self.client_id)
            await conn.connect(self.request_timeout_ms)
            self._conns[(host, port)] = conn
        return conn

    async def broker_connection(self, broker_id: int) -> BrokerConnection:
        host, port = self.brokers[broker_id]
        return await self.connection(host, port)

    async def any_connection(self) -> BrokerConnection:
        addrs = list(self.brokers.values()) + self.bootstrap
        if self._starting in addrs:  # ask the others first (Kafka's leastLoadedNode starts at random)
            addrs = [a for a in addrs if a != self._starting] + [self._starting]
        last: Exception | None = None
        for host, port in addrs:
            try:
                return await self.connection(host, port)
            except (NetworkError, RuntimeTimeout) as exc:
                last = exc
        raise NetworkError(f"no broker reachable: {last}")

    async def refresh_metadata(self, topics: list[str], allow_auto_create: bool = True) -> dict[str, int]:
        """Fetch metadata; returns per-topic error codes."""
        conn = await self.any_connection()
        req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
                              allow_auto_topic_creation=allow_auto_create)
        resp = await conn.request_within(req, self.request_timeout_ms)
        if not resp.brokers:
            # A broker still starting (no UpdateMetadata yet) knows no brokers. Kafka's
            # NetworkClient ignores such an answer ("it is possible to receive an empty metadata
            # set, which we should retry later"): taken, it would forget every broker and leave
            # the client asking that one broker alone until it learns the cluster.
            self._starting = (conn.host, conn.port)
            return {t.name: t.error_code if t.error_code != E.NONE else E.LEADER_NOT_AVAILABLE for t in resp.topics}
        self._starting = None
        self.brokers = {b.node_id: (b.host, b.port) for b in resp.brokers}
        self.controller_id = resp.controller_id
        errors = {}
        for t in resp.topics:
            errors[t.name] = t.error_code
            if t.error_code != E.NONE:
                continue
            self.partition_counts[t.name] = len(t.partitions)
            new_topic = t.topic_id != ZERO_UUID and t.topic_id != self.topic_ids.get(t.name)
            if t.topic_id != ZERO_UUID:
                self.topic_ids[t.name] = t.topic_id
            for p in t.partitions:
                self._update_leader((t.name, p.partition_index), PartitionLeader(p.leader_id, p.leader_epoch),
                                    new_topic)
        return errors

    def _update_leader(self, tp: tuple[str, int], new: PartitionLeader, new_topic: bool) -> None:
        """Kafka's Metadata.updateLatestMetadata: a partition's metadata with an older leader epoch
        than the one already seen is ignored and the cached leader kept. A broker whose metadata
        cache is behind (one cut off from the controller still names itself leader at its old
        epoch) must not send the client to a deposed leader, where its position may be out of
        range and auto.offset.reset would rewind it. A new topic id (the topic was recreated)
        resets the epochs; an unknown epoch (-1) is taken as it is."""
        known = self.leaders.get(tp)
        if known is not None and not new_topic and 0 <= new.leader_epoch < known.leader_epoch:
            return
        self.leaders[tp] = new

    async def wait_for_topic(self, topic: str, attempts: int = 50, backoff_ms: float = 100) -> int:
        """Metadata until the topic has leaders (auto-creating it); returns its partition count."""
        for _ in range(attempts):
            try:
                errors = await self.refresh_metadata([topic])
                if errors.get(topic) == E.NONE and all(
                        (topic, p) in self.leaders and self.leaders[(topic, p)].leader >= 0
                        for p in range(self.partition_counts[topic])):
                    return self.partition_counts[topic]
            except (NetworkError, RuntimeTimeout):
                pass
            await self.rt.sleep(backoff_ms)
        raise NetworkError(f"topic {topic} has no leaders after {attempts} attempts")

    async def create_topic(self, topic: str, partitions: int, replication_factor: int,
                           configs: dict[str, str] | None = None) -> int:
        """CreateTopics to the controller (a ZooKeeper-mode broker that is not the controller
        answers NOT_CONTROLLER; then metadata is refreshed and the request goes again)."""
        code = E.NOT_CONTROLLER
        for _ in range(3):
            conn = await self._controller_connection()
            T = CreateTopicsRequest.CreatableTopic
            C = T.CreatableTopicConfig
            req = CreateTopicsRequest(topics=[T(name=topic, num_partitions=partitions,
                                                replication_factor=replication_factor, assignments=[],
                                                configs=[C(name=k, value=v)
                                                         for k, v in sorted((configs or {}).items())])],
                                      timeout_ms=int(self.request_timeout_ms), validate_only=False)
            resp = await conn.request_within(req, self.request_timeout_ms)
            code = int(resp.topics[0].error_code)
            if code != E.NOT_CONTROLLER:
                return code
            self.controller_id = -1
        return code

    async def _controller_connection(self) -> BrokerConnection:
        if self.controller_id < 0 or self.controller_id not in self.brokers:
            try:
                await self.refresh_metadata([], allow_auto_create=False)
            except (NetworkError, RuntimeTimeout):
                pass
        if self.controller_id in self.brokers:
            return await self.broker_connection(self.controller_id)
        return await self.any_connection()

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()
