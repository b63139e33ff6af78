"""ReplicaStateMachine (Kafka's ZkReplicaStateMachine): the state of each (partition, broker)
replica.

  -> New        a replica of a new partition (or a reassignment's new replica): LeaderAndIsr
                to it if the partition has a leader already
  -> Online     LeaderAndIsr to it (it follows or leads the partition)
  -> Offline    StopReplica (keep the log) to it; removed from the ISR in ZooKeeper — unless it
                is the last ISR member, which stays (so the partition keeps its last clean
                leader candidate); LeaderAndIsr with the shrunk ISR to the other replicas
  -> DeletionStarted   StopReplica(delete) to it; -> DeletionSuccessful / Ineligible on the
                response; -> NonExistent removes it from the assignment
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkasim.broker.controller.context import (
    NO_LEADER,
    VALID_PREVIOUS_REPLICA_STATES,
    ControllerContext,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
    ReplicaState,
    TopicPartition,
)
from kafkasim.broker.controller.partition_state_machine import leader_and_isr_from_state, state_json
from kafkasim.runtime.api import BadVersionError

if TYPE_CHECKING:
    from kafkasim.broker.controller.kafka_controller import KafkaController

RS = ReplicaState
MAX_ISR_REMOVAL_ROUNDS = 10


class ReplicaStateMachine:
    def __init__(self, controller: KafkaController) -> None:
        self.controller = controller

    @property
    def ctx(self) -> ControllerContext:
        return self.controller.ctx

    async def startup(self) -> None:
        for tp in self.ctx.all_partitions():
            for r in self.ctx.replica_assignment(tp):
                self.ctx.replica_states[(tp, r)] = RS.ONLINE if self.ctx.is_replica_online(r, tp) \
                    else RS.DELETION_INELIGIBLE
        online = [rep for rep, st in sorted(self.ctx.replica_states.items()) if st == RS.ONLINE]
        offline = [rep for rep, st in sorted(self.ctx.replica_states.items()) if st != RS.ONLINE]
        await self.handle_state_changes(online, RS.ONLINE)
        await self.handle_state_changes(offline, RS.OFFLINE)

    async def handle_state_changes(self, replicas: list[PartitionAndReplica], target: ReplicaState) -> None:
        if not replicas:
            return
        batch = self.controller.request_batch
        batch.new_batch()
        try:
            by_broker: dict[int, list[PartitionAndReplica]] = {}
            for rep in sorted(replicas):
                by_broker.setdefault(rep[1], []).append(rep)
            for broker_id, reps in sorted(by_broker.items()):
                await self._do_handle_state_changes(broker_id, reps, target)
            batch.send_requests_to_brokers(self.ctx.epoch)
        except Exception:
            batch.clear()  # an aborted state change leaves no requests behind (partition_state_machine.py)
            raise

    async def _do_handle_state_changes(self, replica_id: int, replicas: list[PartitionAndReplica],
                                       target: ReplicaState) -> None:
        ctx, batch = self.ctx, self.controller.request_batch
        for rep in replicas:
            ctx.replica_states.setdefault(rep, RS.NON_EXISTENT)
        valid = [rep for rep in replicas if ctx.replica_state(rep) in VALID_PREVIOUS_REPLICA_STATES[target]]
        for rep in replicas:
            if rep not in valid:
                self.controller.trace("replica_state_change_invalid", partition=list(rep[0]), replica=rep[1],
                                      state=ctx.replica_state(rep).value, target=target.value)
        if target == RS.NEW:
            for tp, _ in valid:
                info = ctx.leadership.get(tp)
                if info is not None and info.leader_and_isr.leader == replica_id:
                    continue  # cannot be a new replica while asked to lead
                if info is not None:
                    batch.add_leader_and_isr_request_for_brokers([replica_id], tp, info, ctx.full_assignment(tp),
                                                                 is_new=True)
                ctx.replica_states[(tp, replica_id)] = RS.NEW
        elif target == RS.ONLINE:
            for tp, _ in valid:
                if ctx.replica_state((tp, replica_id)) != RS.NEW:
                    info = ctx.leadership.get(tp)
                    if info is not None:
                        batch.add_leader_and_isr_request_for_brokers([replica_id], tp, info,
                                                                     ctx.full_assignment(tp), is_new=False)
                elif replica_id not in ctx.replica_assignment(tp):
                    a = ctx.full_assignment(tp)
                    ctx.update_assignment(tp, type(a)(a.replicas + (replica_id,), a.adding_replicas,
                                                      a.removing_replicas))
                ctx.replica_states[(tp, replica_id)] = RS.ONLINE
        elif target == RS.OFFLINE:
            await self._to_offline(replica_id, [tp for tp, _ in valid])
        elif target == RS.DELETION_STARTED:
            for tp, _ in valid:
                ctx.replica_states[(tp, replica_id)] = RS.DELETION_STARTED
                batch.add_stop_replica_request_for_brokers([replica_id], tp, delete_partition=True)
        elif target in (RS.DELETION_INELIGIBLE, RS.DELETION_SUCCESSFUL):
            for tp, _ in valid:
                ctx.replica_states[(tp, replica_id)] = target
        elif target == RS.NON_EXISTENT:
            for tp, _ in valid:
                ctx.update_assignment(tp, ctx.full_assignment(tp).remove_replica(replica_id))
                ctx.replica_states.pop((tp, replica_id), None)

    async def _to_offline(self, replica_id: int, tps: list[TopicPartition]) -> None:
        ctx, batch = self.ctx, self.controller.request_batch
        for tp in tps:
            batch.add_stop_replica_request_for_brokers([replica_id], tp, delete_partition=False)
        with_leadership = [tp for tp in tps if tp in ctx.leadership]
        updated = await self._remove_replicas_from_isr(replica_id, with_leadership)
        for tp, info in sorted(updated.items()):
            if not ctx.is_topic_queued_for_deletion(tp[0]):
                recipients = [r for r in ctx.replica_assignment(tp) if r != replica_id]
                batch.add_leader_and_isr_request_for_brokers(recipients, tp, info, ctx.full_assignment(tp),
                                                             is_new=False)
            ctx.replica_states[(tp, replica_id)] = RS.OFFLINE
        for tp in tps:
            if tp not in ctx.leadership:
                batch.add_update_metadata_request_for_brokers(ctx.live_or_shutting_down_broker_ids, [tp])
                ctx.replica_states[(tp, replica_id)] = RS.OFFLINE

    async def _remove_replicas_from_isr(self, replica_id: int, tps: list[TopicPartition]
                                        ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """removeReplicasFromIsr: read each state znode; where the replica is in the ISR write
        the ISR without it (and no leader if it led) — but never an empty ISR."""
        ctx, zk = self.ctx, self.controller.zk
        out: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        remaining = list(tps)
        for _ in range(MAX_ISR_REMOVAL_ROUNDS):
            if not remaining:
                break
            updates: dict[TopicPartition, tuple[bytes, int]] = {}
            new: dict[TopicPartition, LeaderAndIsr] = {}
            for tp in remaining:
                raw = await zk.get_partition_state_raw(*tp)
                if raw is None:
                    continue
                info = leader_and_isr_from_state(*raw)
                if info.controller_epoch > ctx.epoch:
                    continue  # a newer controller wrote it: abort for this partition
                lai = info.leader_and_isr
                if replica_id not in lai.isr:
                    out[tp] = LeaderIsrAndControllerEpoch(lai, ctx.epoch)
                    ctx.leadership[tp] = out[tp]
                    continue
                leader = NO_LEADER if lai.leader == replica_id else lai.leader
                isr = lai.isr if len(lai.isr) == 1 else tuple(r for r in lai.isr if r != replica_id)
                new[tp] = lai.new_leader_and_isr(leader, isr)
                updates[tp] = (state_json(new[tp], ctx.epoch), lai.partition_epoch)
            written = await zk.update_partition_states(updates, ctx.epoch_zk_version) if updates else {}
            remaining = []
            for tp, res in sorted(written.items()):
                if isinstance(res, BadVersionError):
                    remaining.append(tp)
                elif not isinstance(res, BaseException):
                    info = LeaderIsrAndControllerEpoch(new[tp].with_partition_epoch(res), ctx.epoch)
                    ctx.leadership[tp] = info
                    out[tp] = info
                    self.controller.trace("isr_shrunk_by_controller", topic=tp[0], partition=tp[1],
                                          removed=replica_id, leader=info.leader_and_isr.leader,
                                          leader_epoch=info.leader_and_isr.leader_epoch,
                                          isr=list(info.leader_and_isr.isr))
        return out
