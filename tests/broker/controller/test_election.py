"""Kafka's PartitionLeaderElectionAlgorithms and Election rules, as pure functions."""

from __future__ import annotations

import pytest

from kafkasim.broker.controller import election as EL
from kafkasim.broker.controller.context import ControllerContext, LeaderAndIsr, ReplicaAssignment
from kafkasim.broker.zk.zk_data import BrokerInfo

pytestmark = pytest.mark.unit


def _ctx(live: list[int], shutting_down: tuple[int, ...] = ()) -> ControllerContext:
    ctx = ControllerContext()
    ctx.add_live_brokers({b: (BrokerInfo(b, f"b{b}", 9092, None), 100 + b) for b in live})
    ctx.shutting_down_broker_ids = set(shutting_down)
    ctx.update_assignment(("t", 0), ReplicaAssignment((2, 0, 1)))
    return ctx


def test_offline_election_takes_the_first_live_isr_member_in_assignment_order() -> None:
    assert EL.offline_partition_leader((2, 0, 1), (1, 0), {0, 1}, False) == (0, False)
    assert EL.offline_partition_leader((2, 0, 1), (2,), {0, 1}, False) == (None, False)
    assert EL.offline_partition_leader((2, 0, 1), (2,), {0, 1}, True) == (0, True)  # unclean
    r = EL.leader_for_offline(_ctx([0, 1]), ("t", 0), LeaderAndIsr(2, 4, (2, 1, 0), partition_epoch=7), False)
    assert r.leader_and_isr == LeaderAndIsr(0, 5, (1, 0), 0, 7) and r.live_replicas == (0, 1)


def test_unclean_election_leaves_the_new_leader_alone_and_recovering() -> None:
    r = EL.leader_for_offline(_ctx([0, 1]), ("t", 0), LeaderAndIsr(2, 4, (2,)), True)
    assert r.unclean and r.leader_and_isr == LeaderAndIsr(0, 5, (0,), leader_recovery_state=1)


def test_preferred_and_controlled_shutdown_elections() -> None:
    cur = LeaderAndIsr(0, 3, (0, 1, 2))
    assert EL.leader_for_preferred_replica(_ctx([0, 1, 2]), ("t", 0), cur).leader_and_isr == LeaderAndIsr(2, 4, (0, 1, 2))
    assert EL.leader_for_preferred_replica(_ctx([0, 1]), ("t", 0), cur).leader_and_isr is None  # preferred is dead
    r = EL.leader_for_controlled_shutdown(_ctx([0, 1, 2], shutting_down=(2, 0)), ("t", 0), cur)
    assert r.leader_and_isr == LeaderAndIsr(1, 4, (1,))  # the shutting-down brokers leave the ISR


def test_reassignment_states() -> None:
    a = ReplicaAssignment.from_target((0, 1, 2), (3, 1, 4))
    assert a == ReplicaAssignment((3, 1, 4, 0, 2), (3, 4), (0, 2))
    assert a.target_replicas == (3, 1, 4) and a.original_replicas == (1, 0, 2)
    assert a.is_being_reassigned and not ReplicaAssignment((3, 1, 4)).is_being_reassigned
