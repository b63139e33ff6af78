"""PartitionStateMachine (Kafka's ZkPartitionStateMachine): NonExistent -> New -> Online <->
Offline -> NonExistent.

  New -> Online         initialize the partition: leader = the first live replica, ISR = the
                        live replicas; create the state znode (checked multi); LeaderAndIsr to
                        the ISR (is_new)
  Online/Offline -> Online   elect a leader with a strategy (election.py): read the state znodes,
                        compute, write each with its zkVersion (retrying a partition whose znode
                        changed meanwhile); LeaderAndIsr to the live replicas
  -> Offline / NonExistent   only the state changes

Every successful election is traced (`partition_leader_elected`) with the partition, the new
leader, its epoch and ISR, and whether it was unclean.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkasim.broker.controller import election as EL
from kafkasim.broker.controller.context import (
    VALID_PREVIOUS_PARTITION_STATES,
    ControllerContext,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionState,
    TopicPartition,
)
from kafkasim.broker.controller.election import ElectionResult, ElectionStrategy
from kafkasim.broker.zk import zk_data as Z
from kafkasim.runtime.api import BadVersionError

if TYPE_CHECKING:
    from kafkasim.broker.controller.kafka_controller import KafkaController

PS = PartitionState
MAX_ELECTION_ROUNDS = 10  # zkVersion conflicts retried; each round re-reads the znodes


class StateChangeFailed(Exception):
    pass


def leader_and_isr_from_state(data: bytes, zk_version: int) -> LeaderIsrAndControllerEpoch:
    st = Z.parse_partition_state(data)
    lai = LeaderAndIsr(st.leader, st.leader_epoch, tuple(st.isr), Z.parse_leader_recovery_state(data), zk_version)
    return LeaderIsrAndControllerEpoch(lai, st.controller_epoch)


def state_json(lai: LeaderAndIsr, controller_epoch: int) -> bytes:
    return Z.partition_state_json_full(lai.leader, lai.leader_epoch, list(lai.isr), controller_epoch,
                                       lai.leader_recovery_state)


class PartitionStateMachine:
    def __init__(self, controller: KafkaController) -> None:
        self.controller = controller

    @property
    def ctx(self) -> ControllerContext:
        return self.controller.ctx

    async def startup(self) -> None:
        """Initialize states from the leadership read at failover, then bring New/Offline online."""
        for tp in self.ctx.all_partitions():
            lai = self.ctx.leader_and_isr(tp)
            if lai is None:
                self.ctx.partition_states[tp] = PS.NEW
            elif self.ctx.is_replica_online(lai.leader, tp):
                self.ctx.partition_states[tp] = PS.ONLINE
            else:
                self.ctx.partition_states[tp] = PS.OFFLINE
        await self.trigger_online_partition_state_change()

    async def trigger_online_partition_state_change(self) -> dict[TopicPartition, LeaderAndIsr | None]:
        """Offline and New partitions (not being deleted) -> Online."""
        tps = [tp for tp in self.ctx.partitions_in_states({PS.OFFLINE, PS.NEW})
               if not self.ctx.is_topic_queued_for_deletion(tp[0])]
        return await self.handle_state_changes(tps, PS.ONLINE, ElectionStrategy.OFFLINE)

    async def handle_state_changes(self, tps: list[TopicPartition], target: PartitionState,
                                   strategy: ElectionStrategy | None = None,
                                   allow_unclean: bool = False) -> dict[TopicPartition, LeaderAndIsr | None]:
        """Returns, for partitions given a leader, their new LeaderAndIsr (None: election failed)."""
        if not tps:
            return {}
        batch = self.controller.request_batch
        batch.new_batch()
        try:
            result = await self._do_handle_state_changes(sorted(tps), target, strategy, allow_unclean)
            batch.send_requests_to_brokers(self.ctx.epoch)
        except Exception:
            # Not only ControllerMoved: a ZooKeeper read that met an expired session raises here
            # (Kafka's getTopicPartitionStatesRaw answers SESSIONEXPIRED per partition and the
            # state change goes on), so the event aborts — and its half-collected requests must
            # not stay for the next event's new_batch, which would refuse (seed 221 of
            # kill-failover-swarm). Dropping them is a controller failing between its ZooKeeper
            # write and the send, which the next controller's failover repairs.
            batch.clear()
            raise
        return result

    async def _do_handle_state_changes(self, tps: list[TopicPartition], target: PartitionState,
                                       strategy: ElectionStrategy | None,
                                       allow_unclean: bool) -> dict[TopicPartition, LeaderAndIsr | None]:
        ctx = self.ctx
        valid = []
        for tp in tps:
            if ctx.partition_state(tp) in VALID_PREVIOUS_PARTITION_STATES[target]:
                valid.append(tp)
            else:
                self.controller.trace("partition_state_change_invalid", partition=list(tp),
                                      state=ctx.partition_state(tp).value, target=target.value)
        if target == PS.NEW:
            for tp in valid:
                ctx.partition_states[tp] = PS.NEW
            return {}
        if target in (PS.OFFLINE, PS.NON_EXISTENT):
            for tp in valid:
                if target == PS.NON_EXISTENT:
                    ctx.partition_states.pop(tp, None)
                else:
                    ctx.partition_states[tp] = target
            return {}
        uninitialized = [tp for tp in valid if ctx.partition_state(tp) == PS.NEW]
        to_elect = [tp for tp in valid if ctx.partition_state(tp) in (PS.OFFLINE, PS.ONLINE)]
        out: dict[TopicPartition, LeaderAndIsr | None] = {}
        for tp in await self._initialize_leader_and_isr(uninitialized):
            ctx.partition_states[tp] = PS.ONLINE
            out[tp] = ctx.leader_and_isr(tp)
        if to_elect:
            assert strategy is not None, "an election strategy is required to bring partitions online"
            results = await self._elect_leaders(to_elect, strategy, allow_unclean)
            for tp, lai in results.items():
                if lai is not None:
                    ctx.partition_states[tp] = PS.ONLINE
                out[tp] = lai
        return out

    # ---------------------------------------------------------------- New -> Online
    async def _initialize_leader_and_isr(self, tps: list[TopicPartition]) -> list[TopicPartition]:
        ctx = self.ctx
        states: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        for tp in tps:
            live = tuple(r for r in ctx.replica_assignment(tp) if ctx.is_replica_online(r, tp))
            if not live:
                self.controller.trace("partition_state_change_failed", partition=list(tp), target=PS.ONLINE.value,
                                      reason="no assigned replica is alive",
                                      replicas=list(ctx.replica_assignment(tp)), live=ctx.live_broker_ids)
                continue
            states[tp] = LeaderIsrAndControllerEpoch(LeaderAndIsr(live[0], 0, live), ctx.epoch)
        if not states:
            return []
        errors = await self.controller.zk.create_partition_states(
            {tp: state_json(info.leader_and_isr, info.controller_epoch) for tp, info in states.items()},
            ctx.epoch_zk_version)
        done = []
        for tp, info in sorted(states.items()):
            if errors.get(tp) is not None:
                self.controller.trace("partition_state_change_failed", partition=list(tp), target=PS.ONLINE.value,
                                      reason=type(errors[tp]).__name__)
                continue
            ctx.leadership[tp] = info
            self.controller.request_batch.add_leader_and_isr_request_for_brokers(
                info.leader_and_isr.isr, tp, info, ctx.full_assignment(tp), is_new=True)
            self._trace_election(tp, info.leader_and_isr, False, "new")
            done.append(tp)
        return done

    # ---------------------------------------------------------------- elections
    async def _elect_leaders(self, tps: list[TopicPartition], strategy: ElectionStrategy,
                             allow_unclean: bool) -> dict[TopicPartition, LeaderAndIsr | None]:
        remaining = list(tps)
        out: dict[TopicPartition, LeaderAndIsr | None] = {}
        for _ in range(MAX_ELECTION_ROUNDS):
            if not remaining:
                break
            finished, remaining = await self._do_elect_leaders(remaining, strategy, allow_unclean)
            out.update(finished)
        for tp in remaining:
            out[tp] = None
        return out

    async def _do_elect_leaders(self, tps: list[TopicPartition], strategy: ElectionStrategy, allow_unclean: bool
                                ) -> tuple[dict[TopicPartition, LeaderAndIsr | None], list[TopicPartition]]:
        ctx, zk = self.ctx, self.controller.zk
        failed: dict[TopicPartition, LeaderAndIsr | None] = {}
        current: dict[TopicPartition, LeaderAndIsr] = {}
        for tp in tps:
            raw = await zk.get_partition_state_raw(*tp)
            if raw is None:
                failed[tp] = None
                continue
            info = leader_and_isr_from_state(*raw)
            if info.controller_epoch > ctx.epoch:
                # Written by a newer controller: this one is a zombie.
                failed[tp] = None
                continue
            current[tp] = info.leader_and_isr
        results: list[ElectionResult] = []
        for tp, lai in sorted(current.items()):
            results.append(await self._elect_one(tp, lai, strategy, allow_unclean))
        updates: dict[TopicPartition, tuple[bytes, int]] = {}
        by_tp: dict[TopicPartition, ElectionResult] = {}
        for r in results:
            if r.leader_and_isr is None:
                failed[r.tp] = None
                self.controller.trace("partition_state_change_failed", partition=list(r.tp), target=PS.ONLINE.value,
                                      reason=f"no leader under {strategy.value}",
                                      isr=list(current[r.tp].isr), live=ctx.live_broker_ids)
                continue
            updates[r.tp] = (state_json(r.leader_and_isr, ctx.epoch), r.leader_and_isr.partition_epoch)
            by_tp[r.tp] = r
        written = await zk.update_partition_states(updates, ctx.epoch_zk_version) if updates else {}
        finished: dict[TopicPartition, LeaderAndIsr | None] = dict(failed)
        retry: list[TopicPartition] = []
        for tp, res in sorted(written.items()):
            if isinstance(res, BadVersionError):
                retry.append(tp)
                continue
            if isinstance(res, BaseException):
                finished[tp] = None
                continue
            r = by_tp[tp]
            assert r.leader_and_isr is not None
            lai = r.leader_and_isr.with_partition_epoch(res)
            info = LeaderIsrAndControllerEpoch(lai, ctx.epoch)
            ctx.leadership[tp] = info
            self.controller.request_batch.add_leader_and_isr_request_for_brokers(
                r.live_replicas, tp, info, ctx.full_assignment(tp), is_new=False)
            self._trace_election(tp, lai, r.unclean, strategy.value)
            finished[tp] = lai
        return finished, retry

    async def _elect_one(self, tp: TopicPartition, lai: LeaderAndIsr, strategy: ElectionStrategy,
                         allow_unclean: bool) -> ElectionResult:
        ctx = self.ctx
        if strategy == ElectionStrategy.OFFLINE:
            live_isr = [r for r in lai.isr if ctx.is_replica_online(r, tp)]
            unclean = allow_unclean or (not live_isr and await self.controller.unclean_leader_election_enabled(tp[0]))
            return EL.leader_for_offline(ctx, tp, lai, unclean)
        if strategy == ElectionStrategy.REASSIGN:
            return EL.leader_for_reassign(ctx, tp, lai)
        if strategy == ElectionStrategy.PREFERRED:
            return EL.leader_for_preferred_replica(ctx, tp, lai)
        return EL.leader_for_controlled_shutdown(ctx, tp, lai)

    def _trace_election(self, tp: TopicPartition, lai: LeaderAndIsr, unclean: bool, why: str) -> None:
        self.controller.trace("partition_leader_elected", topic=tp[0], partition=tp[1], leader=lai.leader,
                              leader_epoch=lai.leader_epoch, isr=list(lai.isr), unclean=unclean, strategy=why)
