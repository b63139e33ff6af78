"""ClientCluster's metadata handling against Kafka 3.9's Metadata.updateLatestMetadata: a
partition's metadata naming an older leader epoch than the client has seen is ignored (the
cached leader stays), a newer or equal epoch replaces it, a recreated topic (new topic id)
starts over, and an unknown epoch (-1) is taken as it is; and against NetworkClient's
DefaultMetadataUpdater: an answer naming no brokers (a broker still starting) is ignored. Found by crash-swarm
kill-failover-swarm seed 394: a broker cut off from the controller still named itself leader of
events-1 at epoch 3 when the client knew epoch 6; the consumer went there, got
OFFSET_OUT_OF_RANGE at 327 and auto.offset.reset=earliest rewound it to 0."""

from __future__ import annotations

from typing import Any, cast

import pytest

from kafkasim.client.cluster import ClientCluster, PartitionLeader
from kafkasim.protocol.messages.metadata import MetadataResponse
from kafkasim.runtime.api import NodeRuntime

pytestmark = pytest.mark.unit

TOPIC_ID = bytes(range(1, 17))
RECREATED_ID = bytes(range(2, 18))
R = MetadataResponse
T = R.MetadataResponseTopic
P = T.MetadataResponsePartition


class ScriptedConnection:
    """Answers each Metadata request with the next scripted response."""

    def __init__(self, responses: list[MetadataResponse]) -> None:
        self.responses = responses
        self.host, self.port = "broker-0", 9092

    async def request_within(self, body: Any, timeout_ms: float) -> MetadataResponse:
        return self.responses.pop(0)


class ScriptedCluster(ClientCluster):
    def __init__(self, responses: list[MetadataResponse]) -> None:
        super().__init__(cast(NodeRuntime, object()), "127.0.0.1:9092", "test")   # refresh uses no runtime
        self.conn = ScriptedConnection(responses)

    async def any_connection(self) -> Any:
        return self.conn


def response(leaders: dict[int, tuple[int, int]], topic_id: bytes = TOPIC_ID,
             brokers: tuple[int, ...] = (0, 1, 2)) -> MetadataResponse:
    """Metadata for topic "events": partition -> (leader, leader epoch)."""
    return R(brokers=[R.MetadataResponseBroker(node_id=b, host=f"broker-{b}", port=9092) for b in brokers],
             controller_id=brokers[0], topics=[T(name="events", topic_id=topic_id, partitions=[
                 P(partition_index=i, leader_id=lead, leader_epoch=epoch) for i, (lead, epoch) in leaders.items()])])


async def refresh_all(cluster: ClientCluster, times: int) -> None:
    for _ in range(times):
        assert await cluster.refresh_metadata(["events"]) == {"events": 0}


def run(coro: Any) -> None:
    try:
        coro.send(None)
    except StopIteration:
        return
    raise AssertionError("the scripted refresh awaited something")


def test_metadata_naming_an_older_leader_epoch_keeps_the_known_leader() -> None:
    cluster = ScriptedCluster([response({0: (0, 2), 1: (1, 6)}),
                               response({0: (0, 2), 1: (2, 3)}, brokers=(2,))])   # a deposed leader's view
    run(refresh_all(cluster, 2))
    assert cluster.leaders[("events", 1)] == PartitionLeader(1, 6)
    assert cluster.leaders[("events", 0)] == PartitionLeader(0, 2)
    assert list(cluster.brokers) == [2]   # the broker list is the response's, as Kafka's MetadataSnapshot


def test_metadata_naming_the_same_or_a_newer_epoch_replaces_the_leader() -> None:
    cluster = ScriptedCluster([response({0: (0, 2)}), response({0: (1, 2)}), response({0: (2, 4)})])
    run(refresh_all(cluster, 2))
    assert cluster.leaders[("events", 0)] == PartitionLeader(1, 2)
    run(refresh_all(cluster, 1))
    assert cluster.leaders[("events", 0)] == PartitionLeader(2, 4)


def test_a_recreated_topic_starts_its_epochs_over() -> None:
    cluster = ScriptedCluster([response({0: (0, 7)}), response({0: (1, 0)}, topic_id=RECREATED_ID)])
    run(refresh_all(cluster, 2))
    assert cluster.leaders[("events", 0)] == PartitionLeader(1, 0)


def test_an_unknown_epoch_is_taken_and_any_epoch_follows_it() -> None:
    cluster = ScriptedCluster([response({0: (0, 5)}), response({0: (-1, -1)}), response({0: (2, 1)})])
    run(refresh_all(cluster, 2))
    assert cluster.leaders[("events", 0)] == PartitionLeader(-1, -1)
    run(refresh_all(cluster, 1))
    assert cluster.leaders[("events", 0)] == PartitionLeader(2, 1)


def test_metadata_naming_no_brokers_is_ignored() -> None:
    """kill-failover-swarm seed 1120: a restarted broker, not yet sent UpdateMetadata, answered
    with no brokers; the client took it, forgot every broker (KeyError for each leader) and asked
    only that broker for 7 s, so the consumer read nothing more. Kafka ignores such an answer."""
    starting = R(brokers=[], controller_id=-1, topics=[T(name="events", error_code=5, partitions=[])])
    cluster = ScriptedCluster([response({0: (0, 2), 1: (1, 2)}), starting])
    run(refresh_all(cluster, 1))
    coro = cluster.refresh_metadata(["events"])
    try:
        coro.send(None)
    except StopIteration as done:
        assert done.value == {"events": 5}   # LEADER_NOT_AVAILABLE: the caller retries later
    assert sorted(cluster.brokers) == [0, 1, 2]
    assert cluster.leaders[("events", 1)] == PartitionLeader(1, 2)


class RecordingCluster(ClientCluster):
    """any_connection as it is; connection() records the addresses asked."""

    def __init__(self) -> None:
        super().__init__(cast(NodeRuntime, object()), "broker-0:9092", "test")
        self.brokers = {0: ("broker-0", 9092), 1: ("broker-1", 9092), 2: ("broker-2", 9092)}
        self.asked: list[str] = []

    async def connection(self, host: str, port: int) -> Any:
        self.asked.append(host)
        return ScriptedConnection([])


def test_after_an_empty_answer_the_next_refresh_asks_another_broker_first() -> None:
    """Kafka's leastLoadedNode starts at a random node, so a client is never tied to the one
    broker still starting; kafkasim asks that broker last until another answers."""
    cluster = RecordingCluster()
    cluster._starting = ("broker-0", 9092)
    run(cluster.any_connection())
    assert cluster.asked == ["broker-1"]
