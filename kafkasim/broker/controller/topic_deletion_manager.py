"""TopicDeletionManager: deletes the topics marked under /admin/delete_topics (Kafka's
kafka.controller.TopicDeletionManager).

A topic is deleted in steps, each resumable after a controller failover because the mark stays
in ZooKeeper until the end:
  1. its partitions go Offline -> NonExistent and every broker gets UpdateMetadata with leader
     LeaderDuringDelete (-2), which drops the topic from their metadata caches;
  2. each replica goes Offline -> DeletionStarted: StopReplica(delete) to its broker; replicas on
     dead brokers are DeletionIneligible and the topic waits for them to come back;
  3. when every replica answered (DeletionSuccessful), the replicas go NonExistent, the znodes
     /brokers/topics/<t>, /config/topics/<t> and the mark are deleted, and the topic is forgotten.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkasim.broker.controller.context import ControllerContext, PartitionAndReplica, PartitionState, ReplicaState

if TYPE_CHECKING:
    from kafkasim.broker.controller.kafka_controller import KafkaController

RS = ReplicaState


class TopicDeletionManager:
    def __init__(self, controller: KafkaController) -> None:
        self.controller = controller

    @property
    def ctx(self) -> ControllerContext:
        return self.controller.ctx

    def init(self, to_delete: set[str], ineligible: set[str]) -> None:
        self.ctx.topics_to_be_deleted |= to_delete
        self.ctx.topics_ineligible_for_deletion |= ineligible & to_delete

    async def enqueue_topics_for_deletion(self, topics: set[str]) -> None:
        self.ctx.topics_to_be_deleted |= topics
        await self.resume_deletions()

    async def resume_deletion_for_topics(self, topics: set[str]) -> None:
        queued = topics & self.ctx.topics_to_be_deleted
        if queued:
            self.ctx.topics_ineligible_for_deletion -= queued
            await self.resume_deletions()

    async def fail_replica_deletion(self, replicas: list[PartitionAndReplica]) -> None:
        queued = [r for r in replicas if self.ctx.is_topic_queued_for_deletion(r[0][0])]
        if not queued:
            return
        await self.controller.replica_state_machine.handle_state_changes(queued, RS.DELETION_INELIGIBLE)
        self.ctx.topics_ineligible_for_deletion |= {r[0][0] for r in queued}
        await self.resume_deletions()

    async def complete_replica_deletion(self, replicas: list[PartitionAndReplica]) -> None:
        done = [r for r in replicas if self.ctx.replica_state(r) == RS.DELETION_STARTED]
        await self.controller.replica_state_machine.handle_state_changes(done, RS.DELETION_SUCCESSFUL)
        await self.resume_deletions()

    def is_deletion_in_progress(self, topic: str) -> bool:
        return any(self.ctx.replica_state(r) == RS.DELETION_STARTED for r in self.ctx.replicas_for_topic(topic))

    async def resume_deletions(self) -> None:
        ctx = self.ctx
        eligible: set[str] = set()
        for topic in sorted(ctx.topics_to_be_deleted):
            replicas = ctx.replicas_for_topic(topic)
            if all(ctx.replica_state(r) == RS.DELETION_SUCCESSFUL for r in replicas):
                # Every replica deleted — or none known (a mark for a topic already gone).
                await self._complete_delete_topic(topic)
                continue
            if self.is_deletion_in_progress(topic):
                continue
            if any(ctx.replica_state(r) == RS.DELETION_INELIGIBLE for r in replicas):
                await self._retry_ineligible(topic)
            if topic not in ctx.topics_ineligible_for_deletion:
                eligible.add(topic)
        if eligible:
            await self._on_topic_deletion(eligible)

    async def _retry_ineligible(self, topic: str) -> None:
        ineligible = [r for r in self.ctx.replicas_for_topic(topic)
                      if self.ctx.replica_state(r) == RS.DELETION_INELIGIBLE]
        await self.controller.replica_state_machine.handle_state_changes(ineligible, RS.OFFLINE)
        self.ctx.topics_ineligible_for_deletion.discard(topic)

    async def _on_topic_deletion(self, topics: set[str]) -> None:
        ctx = self.ctx
        self.controller.trace("topic_deletion_started", topics=sorted(topics))
        new = topics - ctx.topics_with_deletion_started
        ctx.topics_with_deletion_started |= topics
        partitions = [tp for t in sorted(topics) for tp in ctx.partitions_for_topic(t)]
        if new:
            psm = self.controller.partition_state_machine
            await psm.handle_state_changes(partitions, PartitionState.OFFLINE)
            await psm.handle_state_changes(partitions, PartitionState.NON_EXISTENT)
            # UpdateMetadata with LeaderDuringDelete: brokers drop the topic from their caches.
            self.controller.send_update_metadata_request(ctx.live_or_shutting_down_broker_ids, partitions)
        replicas = ctx.replicas_for_partitions(partitions)
        dead = [r for r in replicas if not ctx.is_replica_online(r[1], r[0])]
        live = [r for r in replicas if r not in dead and ctx.replica_state(r) != RS.DELETION_SUCCESSFUL]
        rsm = self.controller.replica_state_machine
        await rsm.handle_state_changes(live, RS.OFFLINE)
        await rsm.handle_state_changes(live, RS.DELETION_STARTED)
        if dead:
            await rsm.handle_state_changes(dead, RS.OFFLINE)
            await rsm.handle_state_changes(dead, RS.DELETION_INELIGIBLE)
            ctx.topics_ineligible_for_deletion |= {r[0][0] for r in dead}

    async def _complete_delete_topic(self, topic: str) -> None:
        ctx = self.ctx
        replicas = ctx.replicas_for_topic(topic)
        await self.controller.replica_state_machine.handle_state_changes(replicas, RS.NON_EXISTENT)
        ctx.topics_to_be_deleted.discard(topic)
        ctx.topics_with_deletion_started.discard(topic)
        ctx.topics_ineligible_for_deletion.discard(topic)
        await self.controller.zk.delete_topic_znodes(topic, ctx.epoch_zk_version)
        ctx.remove_topic(topic)
        self.controller.trace("topic_deleted", topic=topic)
