"""Partition leader election (Kafka's kafka.controller.Election and
PartitionLeaderElectionAlgorithms). Pure functions over the ControllerContext.

  offline / new        the first replica in assignment order that is alive and in the ISR; if
                       none and unclean.leader.election.enable, the first alive replica at all
                       (new ISR = [it], leader recovery state RECOVERING, KIP-704). The new ISR
                       is the old one minus dead replicas.
  reassign             the first target replica alive and in the ISR
  preferred            the first replica of the assignment, if alive and in the ISR
  controlled shutdown  the first replica alive, in the ISR and not shutting down; the shutting
                       down brokers leave the ISR
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from kafkasim.broker.controller.context import ControllerContext, LeaderAndIsr, TopicPartition


class ElectionStrategy(enum.Enum):
    OFFLINE = "OfflinePartitionLeaderElectionStrategy"
    REASSIGN = "ReassignPartitionLeaderElectionStrategy"
    PREFERRED = "PreferredReplicaPartitionLeaderElectionStrategy"
    CONTROLLED_SHUTDOWN = "ControlledShutdownPartitionLeaderElectionStrategy"


@dataclass(frozen=True)
class ElectionResult:
    tp: TopicPartition
    leader_and_isr: LeaderAndIsr | None
    live_replicas: tuple[int, ...]   # who gets the LeaderAndIsr request
    unclean: bool = False


def offline_partition_leader(assignment: tuple[int, ...], isr: tuple[int, ...], live: set[int],
                             unclean_enabled: bool) -> tuple[int | None, bool]:
    """(leader, was it unclean)."""
    for r in assignment:
        if r in live and r in isr:
            return r, False
    if unclean_enabled:
        for r in assignment:
            if r in live:
                return r, True
    return None, False


def reassign_partition_leader(target: tuple[int, ...], isr: tuple[int, ...], live: set[int]) -> int | None:
    return next((r for r in target if r in live and r in isr), None)


def preferred_replica_partition_leader(assignment: tuple[int, ...], isr: tuple[int, ...],
                                       live: set[int]) -> int | None:
    if assignment and assignment[0] in live and assignment[0] in isr:
        return assignment[0]
    return None


def controlled_shutdown_partition_leader(assignment: tuple[int, ...], isr: tuple[int, ...], live: set[int],
                                         shutting_down: set[int]) -> int | None:
    return next((r for r in assignment if r in live and r in isr and r not in shutting_down), None)


def leader_for_offline(ctx: ControllerContext, tp: TopicPartition, current: LeaderAndIsr,
                       unclean_enabled: bool) -> ElectionResult:
    assignment = ctx.replica_assignment(tp)
    live = tuple(r for r in assignment if ctx.is_replica_online(r, tp))
    leader, unclean = offline_partition_leader(assignment, current.isr, set(live), unclean_enabled)
    if leader is None:
        return ElectionResult(tp, None, live)
    if leader in current.isr:
        new_isr = tuple(r for r in current.isr if ctx.is_replica_online(r, tp))
        return ElectionResult(tp, current.new_leader_and_isr(leader, new_isr), live)
    # Unclean: the new leader may lack acknowledged records; it recovers alone (KIP-704).
    return ElectionResult(tp, current.new_recovering_leader_and_isr(leader, (leader,)), live, unclean=True)


def leader_for_reassign(ctx: ControllerContext, tp: TopicPartition, current: LeaderAndIsr) -> ElectionResult:
    target = ctx.full_assignment(tp).target_replicas
    live = tuple(r for r in target if ctx.is_replica_online(r, tp))
    leader = reassign_partition_leader(target, current.isr, set(live))
    return ElectionResult(tp, None if leader is None else current.new_leader(leader), target)


def leader_for_preferred_replica(ctx: ControllerContext, tp: TopicPartition, current: LeaderAndIsr) -> ElectionResult:
    assignment = ctx.replica_assignment(tp)
    live = tuple(r for r in assignment if ctx.is_replica_online(r, tp))
    leader = preferred_replica_partition_leader(assignment, current.isr, set(live))
    return ElectionResult(tp, None if leader is None else current.new_leader(leader), assignment)


def leader_for_controlled_shutdown(ctx: ControllerContext, tp: TopicPartition,
                                   current: LeaderAndIsr) -> ElectionResult:
    assignment = ctx.replica_assignment(tp)
    live = tuple(r for r in assignment if ctx.is_replica_online(r, tp, include_shutting_down=True))
    shutting = set(ctx.shutting_down_broker_ids)
    leader = controlled_shutdown_partition_leader(assignment, current.isr, set(live), shutting)
    new_isr = tuple(r for r in current.isr if r not in shutting)
    return ElectionResult(tp, None if leader is None else current.new_leader_and_isr(leader, new_isr), live)
