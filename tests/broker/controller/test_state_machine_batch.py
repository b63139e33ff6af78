"""A state change that aborts mid-batch (a ZooKeeper call raising, here an expired session)
leaves the controller's request batch empty, so the next event's new_batch does not refuse.
Seed 221 of kill-failover-swarm (scenarios/regressions/kill-failover-swarm-seed-221.toml): a
BrokerChange's replica state change met SessionExpired after queueing a StopReplica; the next
event, an AlterPartition, found the batch not empty and its RuntimeError killed the connection."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

import pytest

from kafkasim.broker.controller.channel_manager import ControllerBrokerRequestBatch, ControllerChannelManager
from kafkasim.broker.controller.context import (
    ControllerContext,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionState,
    ReplicaAssignment,
    ReplicaState,
)
from kafkasim.broker.controller.election import ElectionStrategy
from kafkasim.broker.controller.partition_state_machine import PartitionStateMachine
from kafkasim.broker.controller.replica_state_machine import ReplicaStateMachine
from kafkasim.broker.zk.zk_data import BrokerInfo
from kafkasim.runtime.api import SessionExpiredError

pytestmark = pytest.mark.unit


class _ExpiredZk:
    """Creating partition states works; reading one meets an expired session."""

    async def create_partition_states(self, states: dict[Any, bytes], epoch_zk_version: int) -> dict[Any, Any]:
        return {tp: None for tp in states}

    async def get_partition_state_raw(self, topic: str, partition: int) -> Any:
        raise SessionExpiredError("session 0x107 expired")


class _Controller:
    def __init__(self) -> None:
        self.ctx = ControllerContext()
        self.ctx.epoch = 5
        self.ctx.add_live_brokers({b: (BrokerInfo(b, f"b{b}", 9092, None), 100 + b) for b in (0, 1, 2)})
        for p in (0, 1):
            self.ctx.update_assignment(("t", p), ReplicaAssignment((0, 1, 2)))
        self.zk = _ExpiredZk()
        self.request_batch = ControllerBrokerRequestBatch(0, self.ctx, self._channel, lambda r, b: None,
                                                          lambda r, b: None)

    def _channel(self) -> ControllerChannelManager:
        raise AssertionError("nothing is sent: the state change aborts before its batch goes out")

    def trace(self, ev: str, **fields: Any) -> None:
        pass

    async def unclean_leader_election_enabled(self, topic: str) -> bool:
        return False


def _run(coro: Coroutine[Any, Any, Any]) -> Any:
    """Drive a coroutine that never waits (every ZooKeeper call here answers at once)."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    raise AssertionError("the coroutine waited")


def _assert_batch_empty(batch: ControllerBrokerRequestBatch) -> None:
    assert not batch.leader_and_isr and not batch.stop_replica and not batch.update_metadata_brokers
    batch.new_batch()  # the next event's batch: refused while leftovers remain


def test_replica_state_change_aborted_by_an_expired_session_leaves_no_requests() -> None:
    c = _Controller()
    tp = ("t", 0)
    c.ctx.leadership[tp] = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 3, (1, 2)), 5)
    c.ctx.replica_states[(tp, 2)] = ReplicaState.ONLINE
    rsm = ReplicaStateMachine(c)  # type: ignore[arg-type]
    # Offline: StopReplica to broker 2 is queued, then removing it from the ISR reads ZooKeeper.
    with pytest.raises(SessionExpiredError):
        _run(rsm.handle_state_changes([(tp, 2)], ReplicaState.OFFLINE))
    _assert_batch_empty(c.request_batch)


def test_partition_state_change_aborted_by_an_expired_session_leaves_no_requests() -> None:
    c = _Controller()
    new, offline = ("t", 0), ("t", 1)
    c.ctx.partition_states[new] = PartitionState.NEW
    c.ctx.partition_states[offline] = PartitionState.OFFLINE
    c.ctx.leadership[offline] = LeaderIsrAndControllerEpoch(LeaderAndIsr(-1, 3, (1,)), 5)
    psm = PartitionStateMachine(c)  # type: ignore[arg-type]
    # The new partition is initialized (LeaderAndIsr queued), then electing the offline one
    # reads its state znode.
    with pytest.raises(SessionExpiredError):
        _run(psm.handle_state_changes([new, offline], PartitionState.ONLINE, ElectionStrategy.OFFLINE))
    _assert_batch_empty(c.request_batch)
