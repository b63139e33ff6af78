"""ReplicaManager: the partitions this broker hosts, leader or follower (Kafka's
kafka.server.ReplicaManager).

  becomeLeaderOrFollower  LeaderAndIsr from the controller: fenced by controller epoch (older ->
                          STALE_CONTROLLER_EPOCH) and per partition by leader epoch (older ->
                          STALE_CONTROLLER_EPOCH for that partition); leaders stop fetching and
                          lead (Partition.make_leader), followers (re)start a fetcher to the
                          leader, Truncating first (replica_fetcher.py)
  stopReplicas            StopReplica: stop fetching, and with delete drop the partition and its log
  appendRecords           Produce; acks=all completes through DelayedProduce: when the high
                          watermark passes the batch, or the request's timeout (REQUEST_TIMED_OUT)
  fetchMessages           Fetch, consumers (up to the high watermark) and followers (up to the log
                          end offset; a follower's fetch offset is its log end offset and may
                          move the ISR and the high watermark) — with the DelayedFetch long poll
  isr-expiration          every replica.lag.time.max.ms / 2, leaders drop lagging followers

Log dir failure: a KafkaStorageError (or the LogManager going offline) takes every partition
offline — their requests get KAFKA_STORAGE_ERROR, fetchers stop — and the broker announces it
under /log_dir_event_notification so the controller moves leadership (Kafka's
handleLogDirFailure with notifyController).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kafkasim.broker.alter_partition_manager import AlterPartitionManager
from kafkasim.broker.partition import AppendError, Partition, PartitionState, validate_produce_records
from kafkasim.broker.producer_state import ProducerStateManager
from kafkasim.broker.replica_fetcher import PartitionFetchState, ReplicaFetcherManager
from kafkasim.broker.zk import zk_data as Z
from kafkasim.protocol import errors as E
from kafkasim.runtime.api import FileSystem, NodeRuntime, Task
from kafkasim.storage.log import AppendInfo, KafkaStorageError, LogConfig
from kafkasim.storage.log_manager import LogManager, LogManagerConfig

if TYPE_CHECKING:
    from kafkasim.broker.metadata_cache import MetadataCache

TopicPartition = tuple[str, int]
EPOCH_DURING_DELETE = -2
NO_EPOCH = -1


@dataclass
class ReplicationConfig:
    """Kafka's replica.* configs (defaults as Kafka 3.9)."""

    replica_lag_time_max_ms: int = 30000                 # replica.lag.time.max.ms
    replica_fetch_wait_max_ms: int = 500                 # replica.fetch.wait.max.ms
    replica_fetch_min_bytes: int = 1                     # replica.fetch.min.bytes
    replica_fetch_max_bytes: int = 1048576               # replica.fetch.max.bytes
    replica_fetch_response_max_bytes: int = 10485760     # replica.fetch.response.max.bytes
    replica_fetch_backoff_ms: int = 1000                 # replica.fetch.backoff.ms
    replica_socket_timeout_ms: int = 30000               # replica.socket.timeout.ms
    # How long the fetcher's connect may take (BrokerBlockingSender's NetworkClient; Kafka adds
    # +-20% jitter, and close(node) after a failure resets the exponential growth to the max).
    socket_connection_setup_timeout_ms: int = 10000      # socket.connection.setup.timeout.ms
    request_timeout_ms: int = 30000                      # request.timeout.ms (broker to controller)


@dataclass
class PartitionAppendResult:
    error_code: int
    base_offset: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    info: AppendInfo | None = None


@dataclass
class FetchSpec:
    topic: str
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1     # a follower's


@dataclass
class FetchResult:
    error_code: int
    high_watermark: int = -1
    log_start_offset: int = -1
    records: Any = b""   # bytes, or FileRecords (regions of segment files)


@dataclass
class LeaderAndIsrPartition:
    tp: TopicPartition
    topic_id: bytes
    state: PartitionState


@dataclass
class ReplicaManager:
    rt: NodeRuntime
    log_dir: str
    log_config: LogConfig
    partitions: dict[tuple[str, int], Partition] = field(default_factory=dict)
    # Called with (topic, partition, leader epoch) whenever this broker becomes (or stays) the
    # leader — Kafka's onLeadershipChange, how the group coordinator learns it owns a partition.
    leadership_listeners: list[Callable[[str, int, int], None]] = field(default_factory=list)
    # Called with (topic, partition, leader epoch or None) when this broker stops leading it.
    resignation_listeners: list[Callable[[str, int, int | None], None]] = field(default_factory=list)

    log_manager: LogManager | None = None
    log_manager_config: LogManagerConfig | None = None  # log.retention.check.interval.ms, log.cleaner.*
    broker_id: int = 0
    broker_epoch: int = -1
    controller_epoch: int = 0       # KafkaController.InitialControllerEpoch
    replication: ReplicationConfig = field(default_factory=ReplicationConfig)
    metadata: MetadataCache | None = None
    topic_ids: dict[str, bytes] = field(default_factory=dict)
    # Applies the topic's configs (log config, min.insync.replicas) to its partitions.
    topic_configurer: Callable[[str], Awaitable[None]] | None = None
    # Announces a log dir failure to the controller (/log_dir_event_notification).
    log_dir_failure_notifier: Callable[[], Coroutine[Any, Any, None]] | None = None
    offline: bool = False
    # inter.broker.protocol.version < 2.7: ISR changes go to ZooKeeper directly (see
    # alter_partition_manager.py); needs the broker's ZooKeeper client.
    zk_isr_updates: bool = False
    zk: Any | None = None

    def __post_init__(self) -> None:
        if self.log_manager is None:
            self.log_manager = LogManager(self.rt, self.log_dir, self.log_config, self.log_manager_config)
        self.fetcher_manager = ReplicaFetcherManager(self)
        self.alter_partition_manager = AlterPartitionManager(self)
        self._isr_task: Task | None = None
        self._failure_handled = False

    @property
    def fs(self) -> FileSystem:
        return self.rt.fs

    def get_partition(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    async def startup(self) -> None:
        """Load (recovering) every log in the log dir and start the storage jobs; start the ISR
        expiration task and the AlterPartition sender."""
        assert self.log_manager is not None
        await self.log_manager.startup()
        self.alter_partition_manager.start()
        if self._isr_task is None:
            self._isr_task = self.rt.spawn(self._isr_expiration(), name="isr-expiration")

    # ---------------------------------------------------------------- partitions
    async def _get_or_create_partition(self, topic: str, partition: int, topic_id: bytes | None) -> Partition:
        assert self.log_manager is not None
        p = self.partitions.get((topic, partition))
        if p is not None:
            return p
        log = await self.log_manager.get_or_create_log(topic, partition, topic_id=topic_id)
        p = self.partitions.get((topic, partition))
        if p is not None:
            return p
        hw = self.log_manager.high_watermark_checkpoint.get((topic, partition), 0)
        p = Partition(topic, partition, log, -1, False, local_broker_id=self.broker_id, high_watermark=hw)
        p.now_ms = self.rt.monotonic_ms
        p.replica_lag_time_max_ms = self.replication.replica_lag_time_max_ms
        p.alter_partition = self.alter_partition_manager.submit
        self.partitions[(topic, partition)] = p
        if self.topic_configurer is not None:
            await self.topic_configurer(topic)
        return p

    async def make_leader(self, topic: str, partition: int, leader_epoch: int,
                          topic_id: bytes | None = None) -> Partition:
        """Lead alone (replicas = ISR = [this broker]): what a LeaderAndIsr for a single-replica
        partition does; kept for callers that host a partition without a controller."""
        state = PartitionState(self.broker_id, leader_epoch, [self.broker_id], [self.broker_id])
        p = await self._get_or_create_partition(topic, partition, topic_id)
        await self._make_leader(p, state)
        return p

    async def _make_leader(self, p: Partition, state: PartitionState) -> bool:
        self.fetcher_manager.remove_fetcher_for_partitions([(p.topic, p.index)])
        new = p.make_leader(state)
        # The new epoch starts at the log end offset, recorded before any append of the epoch.
        await p.log.maybe_assign_epoch_start_offset(state.leader_epoch, p.log.log_end_offset)
        self.rt.trace("become_leader", topic=p.topic, partition=p.index, leader_epoch=state.leader_epoch,
                      isr=list(state.isr), log_end_offset=p.log.log_end_offset, high_watermark=p.high_watermark)
        for listener in self.leadership_listeners:
            listener(p.topic, p.index, state.leader_epoch)
        return new

    # ---------------------------------------------------------------- LeaderAndIsr
    async def become_leader_or_follower(self, controller_epoch: int, partitions: list[LeaderAndIsrPartition],
                                        live_leaders: dict[int, Z.BrokerInfo]) -> tuple[int, dict[TopicPartition, int]]:
        if controller_epoch < self.controller_epoch:
            self.rt.trace("leader_and_isr_stale", controller_epoch=controller_epoch, known=self.controller_epoch)
            return E.STALE_CONTROLLER_EPOCH, {}
        self.controller_epoch = controller_epoch
        errors: dict[TopicPartition, int] = {}
        leaders: list[tuple[TopicPartition, bytes, PartitionState]] = []
        followers: list[tuple[TopicPartition, bytes, PartitionState]] = []
        for item in partitions:
            tp, st = item.tp, item.state
            if item.topic_id != bytes(16):
                self.topic_ids[tp[0]] = item.topic_id
            if self.offline:
                errors[tp] = E.KAFKA_STORAGE_ERROR
                continue
            p = self.partitions.get(tp)
            current = p.leader_epoch if p is not None else -1
            if st.leader_epoch < current:
                errors[tp] = E.STALE_CONTROLLER_EPOCH
            elif self.broker_id not in st.replicas:
                errors[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
            else:
                (leaders if st.leader == self.broker_id else followers).append((tp, item.topic_id, st))
                errors[tp] = E.NONE
        became_leader: list[Partition] = []
        became_follower: list[Partition] = []
        for tp, topic_id, st in leaders:
            try:
                p = await self._get_or_create_partition(tp[0], tp[1], topic_id)
                await self._make_leader(p, st)
                became_leader.append(p)
            except KafkaStorageError:
                errors[tp] = E.KAFKA_STORAGE_ERROR
                self.on_storage_error()
        fetch_states: dict[TopicPartition, tuple[Z.BrokerInfo, PartitionFetchState]] = {}
        for tp, topic_id, st in followers:
            try:
                p = await self._get_or_create_partition(tp[0], tp[1], topic_id)
            except KafkaStorageError:
                errors[tp] = E.KAFKA_STORAGE_ERROR
                self.on_storage_error()
                continue
            leader = self._broker(st.leader, live_leaders)
            if leader is None:
                continue  # no live leader: keep the log, wait for the next LeaderAndIsr
            was_leader = p.is_leader
            if p.make_follower(st) or (tp not in self.fetcher_manager.assigned):
                became_follower.append(p)
                fetch_states[tp] = (leader, PartitionFetchState(topic_id, p.high_watermark, st.leader_epoch))
                self.rt.trace("become_follower", topic=tp[0], partition=tp[1], leader=st.leader,
                              leader_epoch=st.leader_epoch, log_end_offset=p.log.log_end_offset,
                              high_watermark=p.high_watermark)
                if was_leader:
                    for r_listener in self.resignation_listeners:
                        r_listener(tp[0], tp[1], st.leader_epoch)
        self.fetcher_manager.remove_fetcher_for_partitions(sorted(fetch_states))
        self.fetcher_manager.add_fetcher_for_partitions(fetch_states)
        return E.NONE, errors

    def _broker(self, broker_id: int, live_leaders: dict[int, Z.BrokerInfo]) -> Z.BrokerInfo | None:
        if broker_id < 0:
            return None
        if self.metadata is not None and broker_id in self.metadata.brokers:
            return self.metadata.brokers[broker_id]
        return live_leaders.get(broker_id)

    # ---------------------------------------------------------------- StopReplica
    async def stop_replicas(self, controller_epoch: int, partitions: list[tuple[TopicPartition, int, bool]]
                            ) -> tuple[int, dict[TopicPartition, int]]:
        if controller_epoch < self.controller_epoch:
            return E.STALE_CONTROLLER_EPOCH, {}
        self.controller_epoch = controller_epoch
        errors: dict[TopicPartition, int] = {}
        stop: list[tuple[TopicPartition, bool, int]] = []
        for tp, leader_epoch, delete in partitions:
            p = self.partitions.get(tp)
            if p is None:
                errors[tp] = E.NONE  # nothing hosted here; a delete still removes a stray log dir
                if delete:
                    stop.append((tp, True, leader_epoch))
                continue
            if p.offline:
                errors[tp] = E.KAFKA_STORAGE_ERROR  # in a failed log dir: it cannot be stopped or deleted
                continue
            if leader_epoch in (EPOCH_DURING_DELETE, NO_EPOCH) or leader_epoch >= p.leader_epoch:
                stop.append((tp, delete, leader_epoch))
                errors[tp] = E.NONE
            else:
                errors[tp] = E.FENCED_LEADER_EPOCH
        self.fetcher_manager.remove_fetcher_for_partitions([tp for tp, _, _ in stop])
        for tp, delete, leader_epoch in stop:
            p = self.partitions.get(tp)
            if p is not None and p.is_leader:
                for listener in self.resignation_listeners:
                    listener(tp[0], tp[1], leader_epoch if leader_epoch >= 0 else None)
            if delete:
                self.partitions.pop(tp, None)
                if p is not None:
                    p.leader_id = None
                    p.wake_waiters()
                try:
                    await self._delete_log(tp, p)
                except KafkaStorageError:
                    errors[tp] = E.KAFKA_STORAGE_ERROR
            elif p is not None:
                p.wake_waiters()  # complete delayed produce/fetch rather than let them time out
        return E.NONE, errors

    async def _delete_log(self, tp: TopicPartition, p: Partition | None) -> None:
        assert self.log_manager is not None
        delete = getattr(self.log_manager, "async_delete", None)
        if callable(delete):
            result = delete(tp[0], tp[1])
            if hasattr(result, "__await__"):
                await result
            return
        if p is not None:
            p.log.close()
            path = p.log.dir
            if self.fs.exists(path):
                for name in self.fs.listdir(path):
                    self.fs.unlink(f"{path}/{name}")
                self.fs.rmdir(path)

    # ---------------------------------------------------------------- truncation (the fetcher's)
    async def truncate_partition(self, p: Partition, offset: int) -> None:
        if await p.log.truncate_to(offset):
            p.producer_state = ProducerStateManager.load(p.log, f"{p.topic}-{p.index}")
            p.wake_waiters()

    async def truncate_partition_fully(self, p: Partition, offset: int) -> None:
        await p.log.truncate_fully_and_start_at(offset)
        p.producer_state = ProducerStateManager.load(p.log, f"{p.topic}-{p.index}")
        p.log.update_high_watermark(offset)
        p.wake_waiters()

    # ---------------------------------------------------------------- produce
    async def append_records(self, topic: str, partition: int, records: Any,
                             required_acks: int = 1) -> PartitionAppendResult:
        p = self.partitions.get((topic, partition))
        if p is None:
            return PartitionAppendResult(E.UNKNOWN_TOPIC_OR_PARTITION)
        if p.offline:
            return PartitionAppendResult(E.KAFKA_STORAGE_ERROR, error_message="the log dir is offline")
        try:
            validated = validate_produce_records(records, p.log.config)  # the topic's max.message.bytes
            info = await p.append_records_to_leader(validated, required_acks)
        except AppendError as exc:
            return PartitionAppendResult(exc.error_code, log_start_offset=p.log_start_offset, error_message=str(exc))
        except KafkaStorageError as exc:
            self.on_storage_error()
            return PartitionAppendResult(E.KAFKA_STORAGE_ERROR, error_message=str(exc))
        return PartitionAppendResult(E.NONE, info.first_offset, p.log_start_offset, info=info)

    async def wait_for_replication(self, topic: str, partition: int, required_offset: int,
                                   deadline_ms: float) -> int:
        """DelayedProduce for acks=all: done when the high watermark reaches required_offset
        (the batch's last offset + 1); the error for the partition's response."""
        while True:
            p = self.partitions.get((topic, partition))
            if p is None or p.offline:
                return E.NOT_LEADER_OR_FOLLOWER if p is None else E.KAFKA_STORAGE_ERROR
            done, error = p.check_enough_replicas_reach_offset(required_offset)
            if done:
                return error
            remaining = deadline_ms - self.rt.monotonic_ms()
            if remaining <= 0:
                return E.REQUEST_TIMED_OUT
            fut = self.rt.future()
            p.add_waiter(fut)
            try:
                await self.rt.wait_first([fut], remaining)
            finally:
                p.remove_waiter(fut)

    # ---------------------------------------------------------------- fetch
    def _check_fetch_partition(self, s: FetchSpec, p: Partition | None) -> int:
        if p is None:
            return E.UNKNOWN_TOPIC_OR_PARTITION
        if p.offline:
            return E.KAFKA_STORAGE_ERROR
        if s.current_leader_epoch >= 0 and s.current_leader_epoch < p.leader_epoch:
            return E.FENCED_LEADER_EPOCH
        if s.current_leader_epoch > p.leader_epoch:
            return E.UNKNOWN_LEADER_EPOCH
        if not p.is_leader:
            return E.NOT_LEADER_OR_FOLLOWER
        return E.NONE

    def read_once(self, specs: list[FetchSpec], max_bytes: int, committed: bool,
                  replica_id: int = -1) -> tuple[list[FetchResult], int]:
        results: list[FetchResult] = []
        total = 0
        follower = replica_id >= 0
        for s in specs:
            p = self.partitions.get((s.topic, s.partition))
            code = self._check_fetch_partition(s, p)
            if code != E.NONE:
                results.append(FetchResult(code))
                continue
            assert p is not None
            leo = p.log_end_offset
            if s.fetch_offset < p.log_start_offset or s.fetch_offset > leo:
                results.append(FetchResult(E.OFFSET_OUT_OF_RANGE, p.high_watermark, p.log_start_offset))
                continue
            if follower:
                p.update_follower_fetch_state(replica_id, s.fetch_offset, s.log_start_offset, leo)
            # fetch.max.bytes caps the response, but the first batch always goes out (KIP-74).
            budget = min(s.max_bytes, max_bytes - total) if total else s.max_bytes
            try:
                limit = leo if follower else None
                data = p.read(s.fetch_offset, max(budget, 0), committed, max_offset=limit) \
                    if budget > 0 or not total else b""
            except KafkaStorageError:
                self.on_storage_error()
                results.append(FetchResult(E.KAFKA_STORAGE_ERROR))
                continue
            total += len(data)
            results.append(FetchResult(E.NONE, p.high_watermark, p.log_start_offset, data))
        return results, total

    async def fetch_messages(self, specs: list[FetchSpec], max_wait_ms: int, min_bytes: int, max_bytes: int,
                             committed: bool, replica_id: int = -1) -> list[FetchResult]:
        deadline = self.rt.monotonic_ms() + max(0, max_wait_ms)
        while True:
            results, total = self.read_once(specs, max_bytes, committed, replica_id)
            remaining = deadline - self.rt.monotonic_ms()
            if total >= max(min_bytes, 1) or remaining <= 0 or any(r.error_code for r in results):
                return results
            await self._wait_for_data(specs, remaining)

    async def _wait_for_data(self, specs: list[FetchSpec], timeout_ms: float) -> None:
        fut = self.rt.future()
        waiting = [p for s in specs if (p := self.partitions.get((s.topic, s.partition))) is not None]
        for p in waiting:
            p.add_waiter(fut)
        try:
            await self.rt.wait_first([fut], timeout_ms)
        finally:
            for p in waiting:
                p.remove_waiter(fut)

    # ---------------------------------------------------------------- ISR expiration
    async def _isr_expiration(self) -> None:
        period = max(1.0, self.replication.replica_lag_time_max_ms / 2)
        while True:
            await self.rt.sleep(period)
            self.maybe_handle_log_dir_failure()
            for _, p in sorted(self.partitions.items()):
                if p.is_leader and not p.offline:
                    p.maybe_shrink_isr()

    # ---------------------------------------------------------------- log dir failure
    def on_storage_error(self) -> None:
        self.maybe_handle_log_dir_failure()

    def maybe_handle_log_dir_failure(self) -> None:
        """handleLogDirFailure: once, when the log dir went offline (a Log's I/O error takes
        the LogManager's whole dir offline)."""
        lm = self.log_manager
        if self._failure_handled or lm is None or not lm.offline:
            return
        self._failure_handled = True
        self.offline = True
        tps = sorted(self.partitions)
        self.fetcher_manager.remove_fetcher_for_partitions(tps)
        for tp in tps:
            p = self.partitions[tp]
            if p.is_leader:
                for listener in self.resignation_listeners:
                    listener(tp[0], tp[1], None)
            p.offline = True
            p.wake_waiters()
        self.rt.trace("log_dir_failure_handled", log_dir=self.log_dir, partitions=[list(tp) for tp in tps])
        if self.log_dir_failure_notifier is not None:
            self.rt.spawn(self.log_dir_failure_notifier(), name="log dir event notification")

    # ---------------------------------------------------------------- shutdown
    async def shutdown(self) -> None:
        """Stop fetching, then flush and close every log, write the checkpoints and the
        clean-shutdown marker."""
        if self._isr_task is not None:
            self._isr_task.cancel()
        self.fetcher_manager.shutdown()
        self.alter_partition_manager.shutdown()
        assert self.log_manager is not None
        await self.log_manager.shutdown()
