"""AlterPartitionManager's handling of the controller's answers, against a scripted controller
connection on a simulated node (no broker, no controller: the answers are what is under test).

Kafka 3.9's DefaultAlterPartitionManager.handleAlterPartitionResponse walks the items it sent,
not the ones it got back: an item missing from the answer (or answered under a topic id it cannot
map, e.g. zeros from a controller that lost its topic ids while resigning) stays in
unsentIsrUpdates and is sent again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from kafkasim.broker.alter_partition_manager import AlterPartitionManager
from kafkasim.broker.zk.zk_data import BrokerInfo
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse
from kafkasim.runtime.api import NodeRuntime
from kafkasim.runtime.sim.world import SimWorld

pytestmark = pytest.mark.unit

TOPIC_ID = bytes(range(1, 17))
T = AlterPartitionResponse.TopicData
P = T.PartitionData


@dataclass
class FakePending:
    isr: list[int]


@dataclass
class FakePartition:
    """What the manager reads of a Partition, and the answers it is given."""

    topic: str = "events"
    index: int = 2
    is_leader: bool = True
    leader_epoch: int = 2
    partition_epoch: int = 3
    pending: FakePending | None = field(default_factory=lambda: FakePending([2, 1]))
    answers: list[tuple[int, list[int]]] = field(default_factory=list)

    def on_alter_partition_response(self, error: int, leader_epoch: int, isr: list[int], partition_epoch: int,
                                    recovery: int) -> None:
        self.answers.append((error, isr))
        self.pending = None


@dataclass
class FakeCache:
    controller_id: int = 1
    brokers: dict[int, BrokerInfo] = field(default_factory=lambda: {1: BrokerInfo(1, "broker-1", 9092, None)})


class ScriptedConnection:
    """Answers each AlterPartition with the next scripted response; records the requests."""

    def __init__(self, answers: list[AlterPartitionResponse]) -> None:
        self.answers = answers
        self.requests: list[AlterPartitionRequest] = []

    async def send(self, req: AlterPartitionRequest, version: int, timeout_ms: float) -> AlterPartitionResponse:
        self.requests.append(req)
        return self.answers.pop(0) if self.answers else AlterPartitionResponse(error_code=E.NONE, topics=[])


def _run(answers: list[AlterPartitionResponse], partition: FakePartition) -> ScriptedConnection:
    world = SimWorld(1)
    node = world.add_node("broker-2")
    rt: NodeRuntime = node.runtime
    conn = ScriptedConnection(answers)
    manager = AlterPartitionManager(rt, 2, lambda: 7, FakeCache(), 30000,  # type: ignore[arg-type]
                                    topic_ids={"events": TOPIC_ID}, controller_epoch=lambda: 3)

    async def connection(controller: Any) -> ScriptedConnection:
        return conn
    manager._connection = connection  # type: ignore[method-assign,assignment]
    manager.start()
    manager.submit(partition, [2, 1], 0)  # type: ignore[arg-type]
    world.run(5_000)
    manager.shutdown()
    assert world.failures == [], world.failures
    return conn


def test_a_partition_left_out_of_the_answer_is_sent_again() -> None:
    partition = FakePartition()
    # seed 250: a resigning controller answered under topic id zeros (UNKNOWN_SERVER_ERROR),
    # which names no topic the manager sent
    unmapped = AlterPartitionResponse(error_code=E.NONE, topics=[
        T(topic_id=bytes(16), partitions=[P(partition_index=2, error_code=E.UNKNOWN_SERVER_ERROR)])])
    committed = AlterPartitionResponse(error_code=E.NONE, topics=[
        T(topic_id=TOPIC_ID, partitions=[P(partition_index=2, error_code=E.NONE, leader_id=2, leader_epoch=2,
                                           isr=[2, 1], partition_epoch=4)])])
    conn = _run([unmapped, committed], partition)
    assert len(conn.requests) == 2
    assert partition.answers == [(E.NONE, [2, 1])]
    assert partition.pending is None


def test_an_answered_partition_is_not_sent_again() -> None:
    partition = FakePartition()
    committed = AlterPartitionResponse(error_code=E.NONE, topics=[
        T(topic_id=TOPIC_ID, partitions=[P(partition_index=2, error_code=E.NONE, leader_id=2, leader_epoch=2,
                                           isr=[2, 1], partition_epoch=4)])])
    conn = _run([committed], partition)
    assert len(conn.requests) == 1
    assert partition.answers == [(E.NONE, [2, 1])]
