"""KafkaController: the ZooKeeper-mode controller (Kafka 3.9's kafka.controller.KafkaController).

Every broker runs one; the broker that creates the ephemeral /controller znode (and bumps
/controller_epoch in the same multi) is the active controller. It watches ZooKeeper and turns
what it sees into LeaderAndIsr / UpdateMetadata / StopReplica requests to the brokers:

  /controller             deleted -> everyone re-runs the election (failover)
  /brokers/ids            a broker's session ended -> its partitions' leaders move (onBrokerFailure),
                          a broker registered -> it gets its replicas (onBrokerStartup)
  /brokers/topics         a new topic -> its partitions get leaders (onNewPartitionCreation)
  /brokers/topics/<t>     partitions added (CreatePartitions) or a reassignment
  /admin/delete_topics    topic deletion (TopicDeletionManager)
  /admin/reassign_partitions, /admin/preferred_replica_election    admin znodes of old tools
  /isr_change_notification, /log_dir_event_notification         brokers' notifications

Fencing: the controller epoch (/controller_epoch) is in every request it sends; brokers drop a
request whose epoch is older than one they have seen (STALE_CONTROLLER_EPOCH). Its ZooKeeper
writes are multis that first check /controller_epoch's zkVersion, so a deposed controller that
has not noticed yet cannot write either (ControllerMovedException -> it resigns).

Also here: ControlledShutdown (move leadership off a stopping broker), AlterPartition (a
leader's ISR change, written to ZooKeeper with the partition epoch as zkVersion), ElectLeaders
(preferred / unclean), the automatic preferred-leader rebalance, and partition reassignment.

Events run one at a time on the ControllerEventManager.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from kafkasim.broker.controller.channel_manager import (
    ChannelTimeouts,
    ControllerBrokerRequestBatch,
    ControllerChannelManager,
)
from kafkasim.broker.controller.context import (
    ControllerContext,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
    PartitionState,
    ReplicaAssignment,
    ReplicaState,
    TopicPartition,
)
from kafkasim.broker.controller.election import ElectionStrategy
from kafkasim.broker.controller.event_manager import ControllerEvent, ControllerEventManager
from kafkasim.broker.controller.partition_state_machine import (
    PartitionStateMachine,
    leader_and_isr_from_state,
    state_json,
)
from kafkasim.broker.controller.replica_state_machine import ReplicaStateMachine
from kafkasim.broker.controller.topic_deletion_manager import TopicDeletionManager
from kafkasim.broker.security.inter_broker import inter_broker_security
from kafkasim.broker.zk import zk_data as Z
from kafkasim.broker.zk.kafka_zk_client import ControllerMovedException, ControllerZkClient
from kafkasim.broker.zk.zookeeper_client import StateChangeHandler, ZooKeeperClient
from kafkasim.protocol import errors as E
from kafkasim.runtime.api import BadVersionError, Timer, WatchEvent

if TYPE_CHECKING:
    from kafkasim.broker.config import BrokerConfig
    from kafkasim.broker.metadata_cache import MetadataCache
    from kafkasim.runtime.api import NodeRuntime

PS, RS = PartitionState, ReplicaState
AUTO_REBALANCE_INITIAL_DELAY_MS = 5000.0


class KafkaController:
    def __init__(self, rt: NodeRuntime, config: BrokerConfig, zk: ZooKeeperClient, metadata_cache: MetadataCache,
                 register_broker: Callable[[], Awaitable[None]]) -> None:
        """`metadata_cache`: where this broker learns who the controller is (its controller id);
        `register_broker`: registers this broker again in a new ZooKeeper session (the broker's,
        which owns the broker epoch)."""
        self.rt = rt
        self.config = config
        self.broker_id = config.broker_id
        self.metadata_cache = metadata_cache
        self.register_broker = register_broker
        self.zk = ControllerZkClient(self.rt, zk)
        self.zk_client = zk
        self.ctx = ControllerContext()
        self.active_controller_id = -1
        self.event_manager = ControllerEventManager(self.rt, self._on_event_error)
        self.channel_manager: ControllerChannelManager | None = None
        self.request_batch = ControllerBrokerRequestBatch(
            self.broker_id, self.ctx, self._channel, self._on_leader_and_isr_response,
            self._on_stop_replica_delete_response)
        self.partition_state_machine = PartitionStateMachine(self)
        self.replica_state_machine = ReplicaStateMachine(self)
        self.topic_deletion_manager = TopicDeletionManager(self)
        self._rebalance_timer: Timer | None = None
        self._watched_topics: set[str] = set()
        self._watchers: dict[str, Any] = {}

    # ================================================================ lifecycle
    @property
    def is_active(self) -> bool:
        return self.active_controller_id == self.broker_id

    @property
    def epoch(self) -> int:
        return self.ctx.epoch

    def trace(self, ev: str, **fields: Any) -> None:
        self.rt.trace(ev, controller=self.broker_id, controller_epoch=self.ctx.epoch, **fields)

    def _channel(self) -> ControllerChannelManager:
        assert self.channel_manager is not None, "controller requests while not the controller"
        return self.channel_manager

    def startup(self) -> None:
        """KafkaController.startup: session handling, then the election as the first event."""
        self.zk_client.register_state_change_handler(StateChangeHandler(
            "controller-state-change-handler", before_initializing_session=self._before_new_session,
            after_initializing_session=self._after_new_session))
        self.event_manager.start()
        self.event_manager.put("Startup", self._process_startup)

    async def shutdown(self) -> None:
        self.event_manager.stop()
        self._on_controller_resignation()

    async def _before_new_session(self) -> None:
        """Expire: the session is gone, so is the controllership (a new session elects again).
        As Kafka's handler: clearAndPut drops the queued events (they were meant for the old
        session), and the new session waits until the event thread has begun Expire, so an
        event still running (an election, say) ends on the expired session instead of going on
        in the new one and leaving a controller that Expire then resigns while its /controller
        znode, owned by the new session, stays (no one elects again: seed 575)."""
        await self.event_manager.await_processing(self.event_manager.clear_and_put("Expire", self._process_expire))

    async def _after_new_session(self) -> None:
        self.event_manager.put("RegisterBrokerAndReelect", self._process_register_broker_and_reelect)

    async def _on_event_error(self, ev: ControllerEvent, exc: Exception) -> None:
        if isinstance(exc, ControllerMovedException):
            self.trace("controller_moved", event=ev.name, error=str(exc))
            await self._maybe_resign()
            return
        self.trace("controller_event_error", event=ev.name, error=f"{type(exc).__name__}: {exc}")

    # ================================================================ election
    async def _process_startup(self) -> None:
        await self.zk.get_controller_id(watch=self._on_controller_znode)
        await self._elect()

    def _on_controller_znode(self, event: WatchEvent) -> None:
        if event.type == "deleted":
            self.event_manager.put("Reelect", self._process_reelect)
        else:
            self.event_manager.put("ControllerChange", self._maybe_resign)

    async def _process_reelect(self) -> None:
        await self._maybe_resign()
        await self._elect()

    async def _maybe_resign(self) -> None:
        was_active = self.is_active
        self.active_controller_id = await self.zk.get_controller_id(watch=self._on_controller_znode)
        self.metadata_cache.controller_id = self.active_controller_id
        if was_active and not self.is_active:
            self._on_controller_resignation()

    async def _elect(self) -> None:
        if self.rt.buggify("controller.elect.slow"):  # a slow ZooKeeper round trip before the /controller race
            await self.rt.sleep(300)
        self.active_controller_id = await self.zk.get_controller_id()
        if self.active_controller_id != -1:
            self.metadata_cache.controller_id = self.active_controller_id
            return
        try:
            epoch, epoch_zk_version = await self.zk.register_controller_and_increment_epoch(self.broker_id)
            lost = False
        except ControllerMovedException:
            lost = True  # (no await in an except block: kafka_zk_client._get_or_none says why)
        if lost:
            await self._maybe_resign()
            return
        self.ctx.epoch, self.ctx.epoch_zk_version = epoch, epoch_zk_version
        self.active_controller_id = self.broker_id
        self.metadata_cache.controller_id = self.broker_id
        self.trace("controller_elected", broker_id=self.broker_id, epoch=epoch, epoch_zk_version=epoch_zk_version)
        try:
            if self.rt.buggify("controller.failover.slow"):  # elected, still reading its context from ZooKeeper
                await self.rt.sleep(500)
            await self._on_controller_failover()
            return
        except ControllerMovedException:
            raise
        except Exception as exc:
            self.trace("controller_failover_failed", error=f"{type(exc).__name__}: {exc}")
        await self._trigger_controller_move()  # (not in the except block: kafka_zk_client._get_or_none)

    async def _trigger_controller_move(self) -> None:
        if not self.is_active:
            return
        zkv = self.ctx.epoch_zk_version
        self.active_controller_id = -1
        self._on_controller_resignation()
        try:
            await self.zk.delete_controller(zkv)
        except ControllerMovedException:
            pass

    async def _process_expire(self) -> None:
        self.active_controller_id = -1
        self._on_controller_resignation()

    async def _process_register_broker_and_reelect(self) -> None:
        await self.register_broker()
        await self.zk.get_controller_id(watch=self._on_controller_znode)
        await self._elect()

    def _on_controller_resignation(self) -> None:
        if self._rebalance_timer is not None:
            self._rebalance_timer.cancel()
            self._rebalance_timer = None
        if self.channel_manager is not None:
            self.channel_manager.shutdown()
            self.channel_manager = None
            self.trace("controller_resigned", broker_id=self.broker_id)
        self.request_batch.clear()
        self._watched_topics.clear()
        self.ctx.reset()

    # ================================================================ failover
    async def _on_controller_failover(self) -> None:
        zk, ctx = self.zk, self.ctx
        if await zk.get_data(Z.FEATURE) is None:
            await zk.set_or_create_checked(Z.FEATURE, Z.feature_json(), ctx.epoch_zk_version)
        await zk.get_children_sorted(Z.BROKER_IDS, watch=self._watch("BrokerChange", self._process_broker_change))
        await zk.get_children_sorted(Z.ADMIN_DELETE_TOPICS, watch=self._watch("TopicDeletion",
                                                                             self._process_topic_deletion))
        await zk.get_children_sorted(Z.LOG_DIR_EVENT_NOTIFICATION, watch=self._watch(
            "LogDirEventNotification", self._process_log_dir_event_notification))
        await zk.get_children_sorted(Z.ISR_CHANGE_NOTIFICATION, watch=self._watch(
            "IsrChangeNotification", self._process_isr_change_notification))
        await zk.get_data(Z.ADMIN_PREFERRED_REPLICA_ELECTION, watch=self._watch(
            "PreferredReplicaElection", self._process_zk_preferred_replica_election))
        await zk.get_data(Z.ADMIN_REASSIGN_PARTITIONS, watch=self._watch(
            "ZkPartitionReassignment", self._process_zk_partition_reassignment))
        for path in (Z.LOG_DIR_EVENT_NOTIFICATION, Z.ISR_CHANGE_NOTIFICATION):
            for child in await zk.get_children_sorted(path):
                await zk.delete_checked(f"{path}/{child}", ctx.epoch_zk_version)
        await self._initialize_controller_context()
        to_delete = set(await zk.get_children_sorted(Z.ADMIN_DELETE_TOPICS))
        ineligible = {t for t in to_delete
                      if any(not ctx.is_replica_online(r, tp) for tp, r in ctx.replicas_for_topic(t))}
        self.topic_deletion_manager.init(to_delete, ineligible)
        # Brokers learn the live brokers before any LeaderAndIsr of the state machines.
        self.send_update_metadata_request(ctx.live_or_shutting_down_broker_ids, [])
        await self.replica_state_machine.startup()
        await self.partition_state_machine.startup()
        self.trace("controller_ready", live_brokers=ctx.live_broker_ids, partitions=len(ctx.all_partitions()))
        await self._resume_partition_reassignments()
        await self.topic_deletion_manager.resume_deletions()
        await self._process_zk_preferred_replica_election()
        if self.config.auto_leader_rebalance_enable:
            self._schedule_auto_leader_rebalance(AUTO_REBALANCE_INITIAL_DELAY_MS)

    def _watch(self, name: str, body: Any) -> Any:
        """A ZooKeeper watcher that enqueues `body` as event `name` (the same object every time,
        so setting it again before it fires registers it once)."""
        if name not in self._watchers:
            self._watchers[name] = lambda _event: self.event_manager.put(name, body)
        return self._watchers[name]

    async def _initialize_controller_context(self) -> None:
        zk, ctx = self.zk, self.ctx
        ctx.add_live_brokers(await zk.get_all_broker_and_epochs())
        topics = await zk.get_all_topics(watch=self._watch("TopicChange", self._process_topic_change))
        ctx.all_topics = set(topics)
        for topic in sorted(topics):
            await self._load_topic_assignment(topic)
        await self._update_leader_and_isr_cache(ctx.all_partitions())
        self.channel_manager = ControllerChannelManager(self.rt, self.broker_id, ChannelTimeouts.of(self.config),
                                                        inter_broker_security(self.config))
        self.channel_manager.startup(ctx.live_brokers)
        for tp in ctx.all_partitions():
            if ctx.full_assignment(tp).is_being_reassigned:
                ctx.partitions_being_reassigned.add(tp)

    async def _load_topic_assignment(self, topic: str) -> list[TopicPartition]:
        """Read /brokers/topics/<t> (watching it) into the context; returns partitions that
        were not known before."""
        self._watched_topics.add(topic)
        full = await self.zk.get_full_assignment(topic, watch=self._partition_modifications_watcher(topic))
        if full is None:
            return []
        topic_id, parts, _ = full
        self.ctx.topic_ids[topic] = topic_id
        new = []
        for p, (replicas, adding, removing) in sorted(parts.items()):
            tp = (topic, p)
            if tp not in self.ctx.leadership and tp not in set(self.ctx.partitions_for_topic(topic)):
                new.append(tp)
            self.ctx.update_assignment(tp, ReplicaAssignment(tuple(replicas), tuple(adding), tuple(removing)))
        return new

    def _partition_modifications_watcher(self, topic: str) -> Any:
        return self._watch(f"PartitionModifications-{topic}", lambda: self._process_partition_modifications(topic))

    async def _update_leader_and_isr_cache(self, tps: list[TopicPartition]) -> None:
        for tp in tps:
            raw = await self.zk.get_partition_state_raw(*tp)
            if raw is not None:
                self.ctx.leadership[tp] = leader_and_isr_from_state(*raw)

    # ================================================================ brokers
    async def _process_broker_change(self) -> None:
        if not self.is_active:
            return
        ctx = self.ctx
        # Watch first, then read: a change in between fires the watch instead of being missed.
        await self.zk.get_children_sorted(Z.BROKER_IDS, watch=self._watch("BrokerChange", self._process_broker_change))
        current = await self.zk.get_all_broker_and_epochs()
        known = set(ctx.live_or_shutting_down_broker_ids)
        new = sorted(set(current) - known)
        dead = sorted(known - set(current))
        bounced = sorted(b for b in set(current) & known if current[b][1] > ctx.live_broker_epochs.get(b, -1))
        self.trace("broker_change", new=new, dead=dead, bounced=bounced, live=sorted(current))
        channel = self._channel()
        for b in bounced + dead:
            channel.remove_broker(b)
        for b in new + bounced:
            channel.add_broker(b, current[b][0])
        if new:
            ctx.add_live_brokers({b: current[b] for b in new})
            await self._on_broker_startup(new)
        if bounced:
            ctx.remove_live_brokers(bounced)
            await self._on_broker_failure(bounced)
            ctx.add_live_brokers({b: current[b] for b in bounced})
            await self._on_broker_startup(bounced)
        if dead:
            ctx.remove_live_brokers(dead)
            await self._on_broker_failure(dead)

    async def _on_broker_startup(self, new_brokers: list[int]) -> None:
        ctx = self.ctx
        for b in new_brokers:
            ctx.replicas_on_offline_dirs.pop(b, None)
        existing = [b for b in ctx.live_or_shutting_down_broker_ids if b not in new_brokers]
        self.send_update_metadata_request(existing, [])
        self.send_update_metadata_request(new_brokers, ctx.partitions_with_leaders())
        replicas = ctx.replicas_on_brokers(set(new_brokers))
        await self.replica_state_machine.handle_state_changes(replicas, RS.ONLINE)
        await self.partition_state_machine.trigger_online_partition_state_change()
        for tp in sorted(ctx.partitions_being_reassigned):
            if any(r in new_brokers for r in ctx.full_assignment(tp).target_replicas):
                await self._on_partition_reassignment(tp, ctx.full_assignment(tp))
        deleting = {tp[0] for tp, _ in replicas if ctx.is_topic_queued_for_deletion(tp[0])}
        if deleting:
            await self.topic_deletion_manager.resume_deletion_for_topics(deleting)

    async def _on_broker_failure(self, dead: list[int]) -> None:
        ctx = self.ctx
        for b in dead:
            ctx.replicas_on_offline_dirs.pop(b, None)
            ctx.shutting_down_broker_ids.discard(b)
        await self._on_replicas_become_offline(ctx.replicas_on_brokers(set(dead)))

    async def _on_replicas_become_offline(self, replicas: list[PartitionAndReplica]) -> None:
        ctx = self.ctx
        for_deletion = [r for r in replicas if ctx.is_topic_queued_for_deletion(r[0][0])]
        others = [r for r in replicas if r not in for_deletion]
        await self.partition_state_machine.handle_state_changes(ctx.partitions_with_offline_leader(), PS.OFFLINE)
        results = await self.partition_state_machine.trigger_online_partition_state_change()
        await self.replica_state_machine.handle_state_changes(others, RS.OFFLINE)
        if for_deletion:
            await self.topic_deletion_manager.fail_replica_deletion(for_deletion)
        if not others and all(v is None for v in results.values()):
            self.send_update_metadata_request(ctx.live_or_shutting_down_broker_ids, [])

    def send_update_metadata_request(self, brokers: list[int], tps: list[TopicPartition]) -> None:
        batch = self.request_batch
        batch.new_batch()
        batch.add_update_metadata_request_for_brokers(brokers, tps)
        batch.send_requests_to_brokers(self.ctx.epoch)

    # ================================================================ topics
    async def _process_topic_change(self) -> None:
        if not self.is_active:
            return
        ctx = self.ctx
        topics = set(await self.zk.get_all_topics(watch=self._watch("TopicChange", self._process_topic_change)))
        new_topics = sorted(topics - ctx.all_topics)
        deleted = sorted(ctx.all_topics - topics)
        ctx.all_topics = topics
        for t in deleted:
            ctx.remove_topic(t)
            self._watched_topics.discard(t)
        new_partitions: list[TopicPartition] = []
        for t in new_topics:
            new_partitions += await self._load_topic_assignment(t)
        if new_partitions:
            self.trace("topic_change", new_topics=new_topics, deleted_topics=deleted)
            await self._on_new_partition_creation(new_partitions)

    async def _process_partition_modifications(self, topic: str) -> None:
        if not self.is_active or topic not in self.ctx.all_topics:
            return
        if self.ctx.is_topic_queued_for_deletion(topic):
            await self._load_topic_assignment(topic)  # re-arm the watch only
            return
        before = {tp: self.ctx.full_assignment(tp) for tp in self.ctx.partitions_for_topic(topic)}
        new = await self._load_topic_assignment(topic)
        new = [tp for tp in new if tp not in before]
        for tp, old in sorted(before.items()):
            if tp in self.ctx.partitions_being_reassigned:
                continue
            if self.ctx.full_assignment(tp) != old:
                self.ctx.update_assignment(tp, old)  # only reassignment may change replicas
        if new:
            await self._on_new_partition_creation(new)

    async def _on_new_partition_creation(self, tps: list[TopicPartition]) -> None:
        ctx = self.ctx
        self.trace("new_partitions", partitions=[list(tp) for tp in sorted(tps)])
        await self.partition_state_machine.handle_state_changes(tps, PS.NEW)
        await self.replica_state_machine.handle_state_changes(ctx.replicas_for_partitions(tps), RS.NEW)
        await self.partition_state_machine.handle_state_changes(tps, PS.ONLINE, ElectionStrategy.OFFLINE)
        await self.replica_state_machine.handle_state_changes(ctx.replicas_for_partitions(tps), RS.ONLINE)

    async def _process_topic_deletion(self) -> None:
        if not self.is_active:
            return
        ctx = self.ctx
        marked = set(await self.zk.get_children_sorted(Z.ADMIN_DELETE_TOPICS, watch=self._watch(
            "TopicDeletion", self._process_topic_deletion)))
        unknown = sorted(marked - ctx.all_topics)
        for t in unknown:
            await self.zk.delete_checked(f"{Z.ADMIN_DELETE_TOPICS}/{t}", ctx.epoch_zk_version)
        marked -= set(unknown)
        if not self.config.delete_topic_enable:
            for t in sorted(marked):
                await self.zk.delete_checked(f"{Z.ADMIN_DELETE_TOPICS}/{t}", ctx.epoch_zk_version)
            return
        if marked - ctx.topics_to_be_deleted:
            await self.topic_deletion_manager.enqueue_topics_for_deletion(marked)

    def _on_stop_replica_delete_response(self, response: Any, broker_id: int) -> None:
        self.event_manager.put("TopicDeletionStopReplicaResponseReceived",
                               lambda: self._process_stop_replica_delete_response(response, broker_id))

    async def _process_stop_replica_delete_response(self, response: Any, broker_id: int) -> None:
        if not self.is_active:
            return
        ctx = self.ctx
        failed: list[PartitionAndReplica] = []
        deleted: list[PartitionAndReplica] = []
        for pe in response.partition_errors:
            rep = ((pe.topic_name, pe.partition_index), broker_id)
            if not ctx.is_topic_queued_for_deletion(pe.topic_name):
                continue
            (failed if response.error_code != E.NONE or pe.error_code != E.NONE else deleted).append(rep)
        if failed:
            await self.topic_deletion_manager.fail_replica_deletion(failed)
        if deleted:
            await self.topic_deletion_manager.complete_replica_deletion(deleted)

    # ================================================================ broker responses
    def _on_leader_and_isr_response(self, response: Any, broker_id: int) -> None:
        self.event_manager.put("LeaderAndIsrResponseReceived",
                               lambda: self._process_leader_and_isr_response(response, broker_id))

    async def _process_leader_and_isr_response(self, response: Any, broker_id: int) -> None:
        """KAFKA_STORAGE_ERROR for a partition: its replica there sits in an offline log dir."""
        if not self.is_active or response.error_code != E.NONE:
            return
        ctx = self.ctx
        names = {Z.uuid_from_str(tid): t for t, tid in ctx.topic_ids.items() if tid}
        offline: set[TopicPartition] = set()
        online: set[TopicPartition] = set()
        for t in response.topics:
            topic = names.get(t.topic_id)
            if topic is None:
                continue
            for pe in t.partition_errors:
                tp = (topic, pe.partition_index)
                if pe.error_code == E.KAFKA_STORAGE_ERROR:
                    offline.add(tp)
                elif pe.error_code == E.NONE:
                    online.add(tp)
        previous = ctx.replicas_on_offline_dirs.get(broker_id, set())
        current = (previous - online) | offline
        ctx.replicas_on_offline_dirs[broker_id] = current
        newly = sorted(current - previous)
        if newly:
            self.trace("replicas_offline", broker=broker_id, partitions=[list(tp) for tp in newly])
            await self._on_replicas_become_offline([(tp, broker_id) for tp in newly])

    # ================================================================ notifications
    async def _process_isr_change_notification(self) -> None:
        """ISR changes written by brokers with IBP < 2.7 (ZooKeeper-only ISR updates): refresh
        the leadership cache of those partitions and tell every broker."""
        if not self.is_active:
            return
        ctx = self.ctx
        children = await self.zk.get_children_sorted(Z.ISR_CHANGE_NOTIFICATION, watch=self._watch(
            "IsrChangeNotification", self._process_isr_change_notification))
        tps: set[TopicPartition] = set()
        for child in children:
            path = f"{Z.ISR_CHANGE_NOTIFICATION}/{child}"
            data = await self.zk.get_data(path)
            if data is not None:
                tps |= {tp for tp in Z.parse_partitions_json(data) if tp[0] in ctx.all_topics}
            await self.zk.delete_checked(path, ctx.epoch_zk_version)
        if tps:
            await self._update_leader_and_isr_cache(sorted(tps))
            self.send_update_metadata_request(ctx.live_or_shutting_down_broker_ids, sorted(tps))

    async def _process_log_dir_event_notification(self) -> None:
        """A broker's log dir failed: send it LeaderAndIsr for all its replicas; those in the
        failed dir answer KAFKA_STORAGE_ERROR and go offline (their leadership moves)."""
        if not self.is_active:
            return
        ctx = self.ctx
        children = await self.zk.get_children_sorted(Z.LOG_DIR_EVENT_NOTIFICATION, watch=self._watch(
            "LogDirEventNotification", self._process_log_dir_event_notification))
        brokers: set[int] = set()
        for child in children:
            path = f"{Z.LOG_DIR_EVENT_NOTIFICATION}/{child}"
            data = await self.zk.get_data(path)
            if data is not None:
                brokers.add(Z.parse_log_dir_event(data))
            await self.zk.delete_checked(path, ctx.epoch_zk_version)
        if brokers:
            self.trace("log_dir_failure_notified", brokers=sorted(brokers))
            await self.replica_state_machine.handle_state_changes(ctx.replicas_on_brokers(brokers), RS.ONLINE)

    # ================================================================ controlled shutdown
    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[int, list[TopicPartition]]:
        return await self.event_manager.put_and_wait(  # type: ignore[no-any-return]
            "ControlledShutdown", lambda: self._process_controlled_shutdown(broker_id, broker_epoch))

    async def _process_controlled_shutdown(self, broker_id: int, broker_epoch: int
                                           ) -> tuple[int, list[TopicPartition]]:
        ctx = self.ctx
        if not self.is_active:
            return E.NOT_CONTROLLER, []
        if broker_epoch != -1 and broker_epoch < ctx.live_broker_epochs.get(broker_id, -1):
            return E.STALE_BROKER_EPOCH, []
        if broker_id not in ctx.live_brokers:
            return E.BROKER_NOT_AVAILABLE, []
        ctx.shutting_down_broker_ids.add(broker_id)
        self.trace("controlled_shutdown", broker=broker_id)
        acting = [tp for tp in ctx.partitions_on_broker(broker_id)
                  if len(ctx.replica_assignment(tp)) > 1 and tp in ctx.leadership
                  and not ctx.is_topic_queued_for_deletion(tp[0])]
        led = [tp for tp in acting if ctx.leadership[tp].leader_and_isr.leader == broker_id]
        followed = [tp for tp in acting if tp not in led]
        await self.partition_state_machine.handle_state_changes(led, PS.ONLINE, ElectionStrategy.CONTROLLED_SHUTDOWN)
        batch = self.request_batch
        batch.new_batch()
        for tp in followed:
            batch.add_stop_replica_request_for_brokers([broker_id], tp, delete_partition=False)
        batch.send_requests_to_brokers(ctx.epoch)
        await self.replica_state_machine.handle_state_changes([(tp, broker_id) for tp in followed], RS.OFFLINE)
        remaining = [tp for tp in ctx.all_partitions()
                     if (lai := ctx.leader_and_isr(tp)) is not None and lai.leader == broker_id
                     and not ctx.is_topic_queued_for_deletion(tp[0])]
        return E.NONE, remaining

    # ================================================================ AlterPartition
    async def alter_partitions(self, broker_id: int, broker_epoch: int,
                               items: list[tuple[TopicPartition, LeaderAndIsr]]) -> tuple[int, list[Any]]:
        """Returns (top-level error, [(tp, error, LeaderAndIsr or None)])."""
        return await self.event_manager.put_and_wait(  # type: ignore[no-any-return]
            "AlterPartitionReceived", lambda: self._process_alter_partition(broker_id, broker_epoch, items))

    async def _process_alter_partition(self, broker_id: int, broker_epoch: int,
                                       items: list[tuple[TopicPartition, LeaderAndIsr]]) -> tuple[int, list[Any]]:
        ctx = self.ctx
        if not self.is_active:
            return E.NOT_CONTROLLER, []
        if ctx.live_broker_epochs.get(broker_id) != broker_epoch:
            return E.STALE_BROKER_EPOCH, []
        responses: dict[TopicPartition, tuple[int, LeaderAndIsr | None]] = {}
        to_write: dict[TopicPartition, LeaderAndIsr] = {}
        for tp, new in items:
            current = ctx.leader_and_isr(tp)
            if current is None:
                responses[tp] = (E.UNKNOWN_TOPIC_OR_PARTITION, None)
            elif new.partition_epoch > current.partition_epoch or new.leader_epoch > current.leader_epoch:
                responses[tp] = (E.NOT_CONTROLLER, None)
            elif new.leader_epoch < current.leader_epoch:
                responses[tp] = (E.FENCED_LEADER_EPOCH, None)
            elif new.equals_allow_stale_partition_epoch(current):
                responses[tp] = (E.NONE, current)
            elif new.partition_epoch < current.partition_epoch:
                responses[tp] = (E.INVALID_UPDATE_VERSION, None)
            elif new.leader_recovery_state == 1 and len(new.isr) > 1:
                responses[tp] = (E.INVALID_REQUEST, None)
            elif current.leader_recovery_state == 0 and new.leader_recovery_state == 1:
                responses[tp] = (E.INVALID_REQUEST, None)
            elif set(new.isr) - set(ctx.live_broker_ids):
                responses[tp] = (E.INELIGIBLE_REPLICA, None)   # KIP-841: only live brokers join
            else:
                to_write[tp] = new
        written = await self.zk.update_partition_states(
            {tp: (state_json(lai, ctx.epoch), lai.partition_epoch) for tp, lai in to_write.items()},
            ctx.epoch_zk_version) if to_write else {}
        for tp, res in sorted(written.items()):
            if isinstance(res, BadVersionError):
                responses[tp] = (E.INVALID_UPDATE_VERSION, None)
            elif isinstance(res, BaseException):
                responses[tp] = (E.UNKNOWN_SERVER_ERROR, None)
            else:
                lai = to_write[tp].with_partition_epoch(res)
                ctx.leadership[tp] = LeaderIsrAndControllerEpoch(lai, ctx.epoch)
                responses[tp] = (E.NONE, lai)
                self.trace("isr_changed", topic=tp[0], partition=tp[1], leader=lai.leader,
                           leader_epoch=lai.leader_epoch, isr=list(lai.isr), partition_epoch=lai.partition_epoch)
        self.send_update_metadata_request(ctx.live_or_shutting_down_broker_ids, sorted(tp for tp, _ in items))
        for tp in sorted(to_write):
            if tp in ctx.partitions_being_reassigned and responses[tp][0] == E.NONE:
                await self._maybe_complete_reassignment(tp)
        return E.NONE, [(tp, responses[tp][0], responses[tp][1]) for tp, _ in items]

    # ================================================================ leader elections
    async def elect_leaders(self, tps: list[TopicPartition], preferred: bool) -> dict[TopicPartition, tuple[int, str]]:
        return await self.event_manager.put_and_wait(  # type: ignore[no-any-return]
            "ReplicaLeaderElection", lambda: self._process_replica_leader_election(tps, preferred))

    async def _process_replica_leader_election(self, tps: list[TopicPartition], preferred: bool
                                               ) -> dict[TopicPartition, tuple[int, str]]:
        """ElectLeaders (AdminClient) and /admin/preferred_replica_election: PREFERRED moves
        leadership to the first replica; UNCLEAN elects any live replica when the ISR has none."""
        ctx = self.ctx
        out: dict[TopicPartition, tuple[int, str]] = {}
        if not self.is_active:
            return {tp: (E.NOT_CONTROLLER, "") for tp in tps}
        valid = []
        for tp in sorted(set(tps)):
            lai = ctx.leader_and_isr(tp)
            if lai is None or ctx.is_topic_queued_for_deletion(tp[0]):
                out[tp] = (E.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
            elif preferred and lai.leader == ctx.replica_assignment(tp)[0]:
                out[tp] = (E.ELECTION_NOT_NEEDED, "")
            elif not preferred and ctx.is_replica_online(lai.leader, tp):
                out[tp] = (E.ELECTION_NOT_NEEDED, "")
            else:
                valid.append(tp)
        if preferred:
            results = await self.partition_state_machine.handle_state_changes(valid, PS.ONLINE,
                                                                              ElectionStrategy.PREFERRED)
        else:
            await self.partition_state_machine.handle_state_changes(valid, PS.OFFLINE)
            results = await self.partition_state_machine.handle_state_changes(valid, PS.ONLINE,
                                                                              ElectionStrategy.OFFLINE,
                                                                              allow_unclean=True)
        for tp in valid:
            if results.get(tp) is not None:
                out[tp] = (E.NONE, "")
            else:
                strategy = "PreferredReplicaPartitionLeaderElectionStrategy" if preferred \
                    else "OfflinePartitionLeaderElectionStrategy(true)"
                out[tp] = (E.PREFERRED_LEADER_NOT_AVAILABLE if preferred else E.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                           f"Failed to elect leader for partition {tp[0]}-{tp[1]} under strategy {strategy}")
        return out

    async def _process_zk_preferred_replica_election(self) -> None:
        if not self.is_active:
            return
        data = await self.zk.get_data(Z.ADMIN_PREFERRED_REPLICA_ELECTION, watch=self._watch(
            "PreferredReplicaElection", self._process_zk_preferred_replica_election))
        if data is None:
            return
        tps = [tp for tp in Z.parse_partitions_json(data) if tp in self.ctx.leadership]
        await self._process_replica_leader_election(tps, preferred=True)
        await self.zk.delete_checked(Z.ADMIN_PREFERRED_REPLICA_ELECTION, self.ctx.epoch_zk_version)

    def _schedule_auto_leader_rebalance(self, delay_ms: float) -> None:
        def fire() -> None:
            self.event_manager.put("AutoPreferredReplicaLeaderElection",
                                   self._process_auto_preferred_replica_leader_election)
        self._rebalance_timer = self.rt.call_later(delay_ms, fire)

    async def _process_auto_preferred_replica_leader_election(self) -> None:
        """checkAndTriggerAutoLeaderRebalance: per preferred leader, the share of its
        partitions led by someone else; above leader.imbalance.per.broker.percentage, elect
        the preferred leader where it is alive and in the ISR."""
        if not self.is_active:
            return
        ctx = self.ctx
        try:
            ratio = self.config.leader_imbalance_per_broker_percentage / 100.0
            by_preferred: dict[int, list[TopicPartition]] = {}
            for tp in ctx.all_partitions():
                replicas = ctx.replica_assignment(tp)
                if replicas and not ctx.is_topic_queued_for_deletion(tp[0]) and tp in ctx.leadership:
                    by_preferred.setdefault(replicas[0], []).append(tp)
            to_elect: list[TopicPartition] = []
            for broker, tps in sorted(by_preferred.items()):
                imbalanced = [tp for tp in tps if ctx.leadership[tp].leader_and_isr.leader != broker]
                if tps and len(imbalanced) / len(tps) > ratio:
                    to_elect += [tp for tp in imbalanced if ctx.is_replica_online(broker, tp)
                                 and broker in ctx.leadership[tp].leader_and_isr.isr
                                 and not ctx.partitions_being_reassigned & {tp}
                                 and not ctx.shutting_down_broker_ids]
            if to_elect:
                self.trace("auto_leader_rebalance", partitions=[list(tp) for tp in to_elect])
                await self._process_replica_leader_election(to_elect, preferred=True)
        finally:
            if self.is_active:
                self._schedule_auto_leader_rebalance(
                    float(self.config.leader_imbalance_check_interval_seconds) * 1000.0)

    async def unclean_leader_election_enabled(self, topic: str) -> bool:
        """The topic's unclean.leader.election.enable (its override, else the broker's)."""
        overrides = await self.zk.get_topic_configs(topic)
        raw = overrides.get("unclean.leader.election.enable")
        if raw is None:
            return self.config.unclean_leader_election_enable
        return str(raw).strip().lower() == "true"

    # ================================================================ reassignment
    async def _process_zk_partition_reassignment(self) -> None:
        """/admin/reassign_partitions (kafka-reassign-partitions with --zookeeper, pre-2.4)."""
        if not self.is_active:
            return
        data = await self.zk.get_data(Z.ADMIN_REASSIGN_PARTITIONS, watch=self._watch(
            "ZkPartitionReassignment", self._process_zk_partition_reassignment))
        if data is None:
            return
        wanted = Z.parse_reassignment_json(data)
        errors = await self._trigger_reassignments({tp: tuple(r) for tp, r in wanted.items()})
        if all(code != E.NONE for code in errors.values()):
            await self.zk.delete_checked(Z.ADMIN_REASSIGN_PARTITIONS, self.ctx.epoch_zk_version)

    async def alter_partition_reassignments(self, wanted: dict[TopicPartition, tuple[int, ...] | None]
                                            ) -> dict[TopicPartition, int]:
        return await self.event_manager.put_and_wait(  # type: ignore[no-any-return]
            "ApiPartitionReassignment", lambda: self._trigger_reassignments(wanted))

    async def list_partition_reassignments(self) -> dict[TopicPartition, ReplicaAssignment]:
        async def body() -> dict[TopicPartition, ReplicaAssignment]:
            return {tp: self.ctx.full_assignment(tp) for tp in sorted(self.ctx.partitions_being_reassigned)}
        return await self.event_manager.put_and_wait("ListPartitionReassignments", body)  # type: ignore[no-any-return]

    async def _trigger_reassignments(self, wanted: dict[TopicPartition, tuple[int, ...] | None]
                                     ) -> dict[TopicPartition, int]:
        ctx = self.ctx
        out: dict[TopicPartition, int] = {}
        if not self.is_active:
            return {tp: E.NOT_CONTROLLER for tp in wanted}
        for tp, target in sorted(wanted.items()):
            if tp not in ctx.leadership or ctx.is_topic_queued_for_deletion(tp[0]):
                out[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
                continue
            current = ctx.full_assignment(tp)
            if target is None:  # cancel: back to the original replicas
                if not current.is_being_reassigned:
                    out[tp] = E.NO_REASSIGNMENT_IN_PROGRESS
                    continue
                target = current.original_replicas
            if not target or len(set(target)) != len(target) or any(r < 0 for r in target):
                out[tp] = E.INVALID_REPLICA_ASSIGNMENT
                continue
            if any(r not in ctx.live_brokers for r in target):
                out[tp] = E.INVALID_REPLICA_ASSIGNMENT
                continue
            original = current.original_replicas if current.is_being_reassigned else current.replicas
            await self._on_partition_reassignment(tp, ReplicaAssignment.from_target(original, tuple(target)))
            out[tp] = E.NONE
        return out

    async def _resume_partition_reassignments(self) -> None:
        for tp in sorted(self.ctx.partitions_being_reassigned):
            await self._on_partition_reassignment(tp, self.ctx.full_assignment(tp))

    async def _on_partition_reassignment(self, tp: TopicPartition, reassignment: ReplicaAssignment) -> None:
        """Kafka's onPartitionReassignment, phases U (write RS = TRS + ORS, AR, RR), A (bump
        the leader epoch so the new replicas join; start them) and — once the ISR holds every
        target replica — B (leader in the target, old replicas out and deleted, RS = TRS)."""
        ctx = self.ctx
        ctx.topics_ineligible_for_deletion.add(tp[0])
        await self._update_assignment_in_zk(tp, reassignment)
        ctx.update_assignment(tp, reassignment)
        if not reassignment.is_being_reassigned:
            ctx.partitions_being_reassigned.discard(tp)
            return
        ctx.partitions_being_reassigned.add(tp)
        self.trace("partition_reassignment", topic=tp[0], partition=tp[1], replicas=list(reassignment.replicas),
                   adding=list(reassignment.adding_replicas), removing=list(reassignment.removing_replicas))
        if not self._is_reassignment_complete(tp, reassignment):
            await self._update_leader_epoch_and_send_request(tp, reassignment)
            await self.replica_state_machine.handle_state_changes(
                [(tp, r) for r in reassignment.adding_replicas], RS.NEW)
        else:
            await self._complete_reassignment(tp, reassignment)

    def _is_reassignment_complete(self, tp: TopicPartition, reassignment: ReplicaAssignment) -> bool:
        lai = self.ctx.leader_and_isr(tp)
        return lai is not None and all(r in lai.isr for r in reassignment.target_replicas)

    async def _maybe_complete_reassignment(self, tp: TopicPartition) -> None:
        a = self.ctx.full_assignment(tp)
        if self._is_reassignment_complete(tp, a):
            await self._complete_reassignment(tp, a)

    async def _complete_reassignment(self, tp: TopicPartition, reassignment: ReplicaAssignment) -> None:
        ctx = self.ctx
        target = reassignment.target_replicas
        removing = reassignment.removing_replicas
        await self.replica_state_machine.handle_state_changes(
            [(tp, r) for r in reassignment.adding_replicas], RS.ONLINE)
        final = ReplicaAssignment(target)
        ctx.update_assignment(tp, final)
        await self._move_reassigned_partition_leader_if_required(tp, final)
        await self.replica_state_machine.handle_state_changes([(tp, r) for r in removing], RS.OFFLINE)
        await self.replica_state_machine.handle_state_changes([(tp, r) for r in removing], RS.DELETION_STARTED)
        await self.replica_state_machine.handle_state_changes([(tp, r) for r in removing], RS.DELETION_SUCCESSFUL)
        await self.replica_state_machine.handle_state_changes([(tp, r) for r in removing], RS.NON_EXISTENT)
        await self._update_assignment_in_zk(tp, final)
        ctx.partitions_being_reassigned.discard(tp)
        ctx.topics_ineligible_for_deletion.discard(tp[0])
        await self._remove_from_zk_reassignment(tp)
        self.send_update_metadata_request(ctx.live_or_shutting_down_broker_ids, [tp])
        self.trace("partition_reassignment_completed", topic=tp[0], partition=tp[1], replicas=list(target))

    async def _move_reassigned_partition_leader_if_required(self, tp: TopicPartition,
                                                            final: ReplicaAssignment) -> None:
        ctx = self.ctx
        lai = ctx.leader_and_isr(tp)
        if lai is None:
            return
        if lai.leader not in final.replicas or not ctx.is_replica_online(lai.leader, tp):
            await self.partition_state_machine.handle_state_changes([tp], PS.ONLINE, ElectionStrategy.REASSIGN)
        else:
            await self._update_leader_epoch_and_send_request(tp, final)

    async def _update_leader_epoch_and_send_request(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        """Bump the leader epoch (same leader and ISR) so every replica learns the new replica set."""
        ctx = self.ctx
        raw = await self.zk.get_partition_state_raw(*tp)
        if raw is None:
            return
        info = leader_and_isr_from_state(*raw)
        if info.controller_epoch > ctx.epoch:
            return
        new = info.leader_and_isr.new_leader_and_isr(info.leader_and_isr.leader, info.leader_and_isr.isr)
        written = await self.zk.update_partition_states({tp: (state_json(new, ctx.epoch), new.partition_epoch)},
                                                        ctx.epoch_zk_version)
        res = written[tp]
        if isinstance(res, BaseException):
            return
        lai = LeaderIsrAndControllerEpoch(new.with_partition_epoch(res), ctx.epoch)
        ctx.leadership[tp] = lai
        batch = self.request_batch
        batch.new_batch()
        batch.add_leader_and_isr_request_for_brokers(assignment.replicas, tp, lai, assignment, is_new=False)
        batch.send_requests_to_brokers(ctx.epoch)

    async def _update_assignment_in_zk(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        ctx = self.ctx
        parts = {p: (list(a.replicas), list(a.adding_replicas), list(a.removing_replicas))
                 for (t, p) in ctx.partitions_for_topic(tp[0]) for a in [ctx.full_assignment((t, p))]}
        parts[tp[1]] = (list(assignment.replicas), list(assignment.adding_replicas),
                        list(assignment.removing_replicas))
        await self.zk.set_topic_assignment(tp[0], ctx.topic_ids.get(tp[0], ""), parts, ctx.epoch_zk_version)

    async def _remove_from_zk_reassignment(self, tp: TopicPartition) -> None:
        data = await self.zk.get_data(Z.ADMIN_REASSIGN_PARTITIONS)
        if data is None:
            return
        left = {k: v for k, v in Z.parse_reassignment_json(data).items() if k != tp}
        if left:
            await self.zk.set_or_create_checked(Z.ADMIN_REASSIGN_PARTITIONS, Z.reassignment_json(left),
                                                self.ctx.epoch_zk_version)
        else:
            await self.zk.delete_checked(Z.ADMIN_REASSIGN_PARTITIONS, self.ctx.epoch_zk_version)
