"""ReplicaManager: the partitions this broker hosts, leader or follower (Kafka's
kafka.server.ReplicaManager).

  becomeLeaderOrFollower  LeaderAndIsr from the controller: fenced by controller epoch (older ->
                          STALE_CONTROLLER_EPOCH) and per partition by leader epoch (not newer ->
                          STALE_CONTROLLER_EPOCH for that partition, nothing applied; a topic id
                          unlike the log's -> INCONSISTENT_TOPIC_ID); leaders stop fetching and
                          lead (Partition.make_leader), followers (re)start a fetcher to the
                          leader, Truncating first (replica_fetcher.py); a state whose partition
                          epoch is older than the partition's is skipped (answered NONE)
  stopReplicas            StopReplica: stop fetching, and with delete drop the partition and its log
  appendRecords           Produce; acks=all completes through DelayedProduce: when the high
                          watermark passes the batch, or the request's timeout (REQUEST_TIMED_OUT)
  fetchMessages           Fetch, consumers (READ_UNCOMMITTED up to the high watermark, READ_COMMITTED
                          up to the last stable offset with the aborted transactions in the range
                          read) and followers (up to the log end offset; a follower's fetch offset
                          is its log end offset and may move the ISR and the high watermark) —
                          with the DelayedFetch long poll
  isr-expiration          every replica.lag.time.max.ms / 2, leaders drop lagging followers

Log dir failure: a KafkaStorageError (or the LogManager going offline) takes every partition
offline — their requests get KAFKA_STORAGE_ERROR, fetchers stop — and the broker announces it
under /log_dir_event_notification so the controller moves leadership (Kafka's
handleLogDirFailure with notifyController).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkasim.broker.alter_partition_manager import AlterPartitionManager
from kafkasim.broker.config import ReplicationConfig
from kafkasim.broker.delayed_fetch import DelayedFetch
from kafkasim.broker.delayed_produce import DelayedProduce
from kafkasim.broker.partition import (
    AppendError,
    DelayedOperations,
    Partition,
    PartitionState,
    validate_produce_records,
)
from kafkasim.broker.purgatory import DelayedOperationPurgatory, TopicPartitionOperationKey
from kafkasim.broker.replica_fetcher import PartitionFetchState, ReplicaFetcherManager
from kafkasim.broker.zk import zk_data as Z
from kafkasim.protocol import errors as E
from kafkasim.records.batch import CREATE_TIME, LOG_APPEND_TIME, MAGIC_VALUE_V2, peek_magic
from kafkasim.records.conversion import up_convert
from kafkasim.records.errors import CorruptReason, CorruptRecordError
from kafkasim.runtime.api import FileSystem, Future, NodeRuntime, Task, ZkClient
from kafkasim.storage.file_records import FileRecords
from kafkasim.storage.log import AppendInfo, KafkaStorageError, LogConfig
from kafkasim.storage.log_manager import LogManager
from kafkasim.storage.producer_state import AppendOrigin
from kafkasim.storage.txn_index import AbortedTxn
from kafkasim.storage.verification import VerificationGuard

if TYPE_CHECKING:
    from kafkasim.broker.add_partitions_to_txn_manager import AddPartitionsToTxnManager
    from kafkasim.broker.metadata_cache import MetadataCache
    from kafkasim.client.channel_security import ChannelSecurity

TopicPartition = tuple[str, int]
EPOCH_DURING_DELETE = -2
NO_EPOCH = -1



@dataclass(init=False)
class PartitionAppendResult:
    error_code: int
    base_offset: int
    log_start_offset: int
    error_message: str | None
    info: AppendInfo | None

    # Written out (init=False; its defaults are the only ones) so that mypyc compiles it: a
    # dataclass-made __init__ runs interpreted.
    def __init__(self, error_code: int, base_offset: int = -1, log_start_offset: int = -1,
                 error_message: str | None = None, info: AppendInfo | None = None) -> None:
        self.error_code = error_code
        self.base_offset = base_offset
        self.log_start_offset = log_start_offset
        self.error_message = error_message
        self.info = info


@dataclass(init=False)
class FetchSpec:
    topic: str
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int
    log_start_offset: int     # a follower's
    last_fetched_epoch: int   # fetch v12+: checked against the log for divergence
    min_one_message: bool   # fetch v0-v2: False (Kafka's hardMaxBytesLimit)

    # Written out (init=False; its defaults are the only ones) so that mypyc compiles it: a
    # dataclass-made __init__ runs interpreted.
    def __init__(self, topic: str, partition: int, fetch_offset: int, max_bytes: int,
                 current_leader_epoch: int = -1, log_start_offset: int = -1, last_fetched_epoch: int = -1,
                 min_one_message: bool = True) -> None:
        self.topic = topic
        self.partition = partition
        self.fetch_offset = fetch_offset
        self.max_bytes = max_bytes
        self.current_leader_epoch = current_leader_epoch
        self.log_start_offset = log_start_offset
        self.last_fetched_epoch = last_fetched_epoch
        self.min_one_message = min_one_message


@dataclass(init=False)
class FetchResult:
    error_code: int
    high_watermark: int
    log_start_offset: int
    records: Any   # bytes, or FileRecords (regions of segment files)
    last_stable_offset: int  # -1 with an error (FetchResponse.INVALID_LAST_STABLE_OFFSET)
    # READ_COMMITTED consumers only (None otherwise: the response's null): the aborted
    # transactions overlapping the records returned.
    aborted_transactions: list[AbortedTxn] | None
    diverging_epoch: tuple[int, int] | None   # (epoch, end offset) when the fetcher diverged

    # Written out (init=False; its defaults are the only ones) so that mypyc compiles it: a
    # dataclass-made __init__ runs interpreted.
    def __init__(self, error_code: int, high_watermark: int = -1, log_start_offset: int = -1,
                 records: Any = b"", last_stable_offset: int = -1,
                 aborted_transactions: list[AbortedTxn] | None = None,
                 diverging_epoch: tuple[int, int] | None = None) -> None:
        self.error_code = error_code
        self.high_watermark = high_watermark
        self.log_start_offset = log_start_offset
        self.records = records
        self.last_stable_offset = last_stable_offset
        self.aborted_transactions = aborted_transactions
        self.diverging_epoch = diverging_epoch


@dataclass
class LeaderAndIsrPartition:
    tp: TopicPartition
    topic_id: bytes
    state: PartitionState


# What the ReplicaManager applies to a topic's partitions when it creates one: the topic's
# effective log config and min.insync.replicas (the admin manager's topic_log_config).
TopicConfigSource = Callable[[str], Awaitable[tuple[LogConfig, int]]]


class ReplicaManager:
    def __init__(self, rt: NodeRuntime, log_manager: LogManager, *, broker_id: int,
                 metadata_cache: MetadataCache, broker_epoch: Callable[[], int],
                 replication: ReplicationConfig | None = None,
                 topic_configs: TopicConfigSource | None = None,
                 log_dir_failure_notifier: Callable[[], Coroutine[Any, Any, None]] | None = None,
                 isr_zk: ZkClient | None = None,
                 delayed_request_purgatory: DelayedOperationPurgatory | None = None,
                 inter_broker_security: ChannelSecurity | None = None) -> None:
        """`broker_epoch` is read at each use: it changes when the broker re-registers in
        ZooKeeper after a session expiry. `topic_configs` is None for a broker without dynamic
        configs (tests): partitions then keep the log manager's default config.
        `isr_zk`: with inter.broker.protocol.version < 2.7 ISR changes are written to ZooKeeper
        directly (see alter_partition_manager.py) — through this client; None: AlterPartition."""
        self.rt = rt
        self.log_manager = log_manager
        self.log_config: LogConfig = log_manager.default_config
        self.broker_id = broker_id
        self.metadata_cache = metadata_cache
        self.replication = replication or ReplicationConfig()
        # TLS/SASL of the inter-broker listener, for the fetchers and AlterPartition (security/inter_broker.py).
        self.inter_broker_security = inter_broker_security
        self.topic_configs = topic_configs
        # The topics' effective configs as last read or applied, by topic: what a partition takes
        # when its log already exists (Kafka keeps them on the UnifiedLog). Read from ZooKeeper
        # only at startup, for the logs loaded, and when a log is created here — as Kafka's
        # LogManager reads them — never while a LeaderAndIsr brings up a loaded log (an
        # expired session there aborted the request after some followers had taken their epoch
        # but before their fetchers started: power-loss-fsync-swarm 8336).
        self._topic_config: dict[str, tuple[LogConfig, int]] = {}
        # Announces a log dir failure to the controller (/log_dir_event_notification).
        self.log_dir_failure_notifier = log_dir_failure_notifier
        # KIP-890 part 1: set by the server when transaction.partition.verification.enable.
        self.add_partitions_to_txn_manager: AddPartitionsToTxnManager | None = None
        self.partitions: dict[TopicPartition, Partition] = {}
        # Called with (topic, partition, leader epoch) when this broker becomes the leader (it was
        # not: a re-sent LeaderAndIsr or a new epoch while leading is no election) — Kafka's
        # onLeadershipChange, how the group coordinator learns it owns a
        # partition; and with (topic, partition, leader epoch or None) when it stops leading.
        # Observers, not dependencies: the group coordinator writes through this ReplicaManager,
        # so it is built after it and subscribes (KafkaServer.startup).
        self.leadership_listeners: list[Callable[[str, int, int], None]] = []
        self.resignation_listeners: list[Callable[[str, int, int | None], None]] = []
        self.controller_epoch = 0       # KafkaController.InitialControllerEpoch
        # replicaStateChangeLock: the last LeaderAndIsr in progress (each waits for the one before)
        self._state_change: Future[Any] | None = None
        self.topic_ids: dict[str, bytes] = {}
        self.offline = False
        # DelayedProduce and DelayedFetch (and the group coordinator's acks=all appends). Kafka
        # has a Produce and a Fetch purgatory; one here, so that a partition's change wakes the
        # requests waiting on it in the order they began to wait, whatever their kind.
        self.delayed_request_purgatory = (DelayedOperationPurgatory(rt, "ProduceFetch")
                                          if delayed_request_purgatory is None else delayed_request_purgatory)
        self.fetcher_manager = ReplicaFetcherManager(self)
        self.alter_partition_manager = AlterPartitionManager(
            rt, broker_id, broker_epoch, metadata_cache, self.replication.request_timeout_ms,
            topic_ids=self.topic_ids, controller_epoch=lambda: self.controller_epoch, isr_zk=isr_zk,
            security=inter_broker_security)
        self._isr_task: Task | None = None
        self._failure_handled = False

    @property
    def log_dir(self) -> str:
        return self.log_manager.log_dir

    @property
    def fs(self) -> FileSystem:
        return self.rt.fs

    def get_partition(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    async def startup(self) -> None:
        """Load (recovering) every log in the log dir and start the storage jobs; start the ISR
        expiration task and the AlterPartition sender."""
        await self.log_manager.startup()
        # LogManager.startup's fetchTopicConfigOverrides. Kafka reads every topic in the cluster
        # (getAllTopicsInCluster) before loading; only the topics with a log here use theirs.
        if self.topic_configs is not None:
            for topic in sorted({tp[0] for tp in self.log_manager.logs}):
                self._topic_config[topic] = await self.topic_configs(topic)
        self.alter_partition_manager.start()
        if self._isr_task is None:
            self._isr_task = self.rt.spawn(self._isr_expiration(), name="isr-expiration")

    # ---------------------------------------------------------------- partitions
    async def _get_or_create_partition(self, topic: str, partition: int, topic_id: bytes | None) -> Partition:
        p = self.partitions.get((topic, partition))
        if p is not None:
            return p
        created = self.log_manager.get_log(topic, partition) is None
        log = await self.log_manager.get_or_create_log(topic, partition, topic_id=topic_id)
        config = self._topic_config.get(topic)
        if self.topic_configs is not None and (created or config is None):
            # LogManager.getOrCreateLog's fetchLogConfig. Read before the partition is hosted: a
            # failed read leaves it unhosted, and the next LeaderAndIsr applies its state again.
            config = await self.topic_configs(topic)
        p = self.partitions.get((topic, partition))
        if p is not None:
            return p
        hw = self.log_manager.high_watermark_checkpoint.get((topic, partition), 0)
        p = Partition(topic, partition, log, -1, False, local_broker_id=self.broker_id, high_watermark=hw,
                      now_ms=self.rt.monotonic_ms, replica_lag_time_max_ms=self.replication.replica_lag_time_max_ms,
                      alter_partition=self.alter_partition_manager.submit,
                      delayed_operations=DelayedOperations(self.delayed_request_purgatory,
                                                           TopicPartitionOperationKey(topic, partition)),
                      is_alive_broker=self._is_alive_broker)
        self.partitions[(topic, partition)] = p
        if config is not None:
            self.apply_topic_config(topic, *config)
        return p

    def _is_alive_broker(self, broker_id: int) -> bool:
        return broker_id in self.metadata_cache.brokers

    def apply_topic_config(self, topic: str, log_config: LogConfig, min_insync_replicas: int) -> None:
        """A topic's configs changed (or it got a partition here): its partitions use them at once."""
        self._topic_config[topic] = (log_config, min_insync_replicas)
        for (t, _), part in sorted(self.partitions.items()):
            if t == topic:
                part.log.config = log_config
                part.min_insync_replicas = min_insync_replicas

    async def make_leader(self, topic: str, partition: int, leader_epoch: int,
                          topic_id: bytes | None = None) -> Partition:
        """Lead alone (replicas = ISR = [this broker]): what a LeaderAndIsr for a single-replica
        partition does; kept for callers that host a partition without a controller."""
        state = PartitionState(self.broker_id, leader_epoch, [self.broker_id], [self.broker_id])
        p = await self._get_or_create_partition(topic, partition, topic_id)
        await self._make_leader(p, state)
        return p

    def _skipped_as_stale(self, p: Partition, state: PartitionState) -> bool:
        """A LeaderAndIsr state older than the partition epoch held: skipped, and traced so."""
        if not p.is_stale(state):
            return False
        self.rt.trace("leader_and_isr_skipped", topic=p.topic, partition=p.index,
                      partition_epoch=state.partition_epoch, known=p.partition_epoch)
        return True

    async def _make_leader(self, p: Partition, state: PartitionState) -> bool:
        await self.fetcher_manager.remove_fetcher_for_partitions([(p.topic, p.index)])
        if self._skipped_as_stale(p, state):  # Partition.makeLeader skips it (after makeLeaders stopped the fetcher)
            return False
        # The new epoch starts at the log end offset, recorded before any append of the epoch.
        new = await p.become_leader(state)
        self.rt.trace("become_leader", topic=p.topic, partition=p.index, leader_epoch=state.leader_epoch,
                      isr=list(state.isr), log_end_offset=p.log.log_end_offset, high_watermark=p.high_watermark)
        # Only a partition that became leader here is an election for the coordinators (Kafka's
        # makeLeaders -> partitionsBecomeLeader -> onElection): a LeaderAndIsr re-sent to the
        # current leader must not reload their state under the same coordinator epoch, which would
        # swap the metadata under an append in flight.
        if new:
            for listener in self.leadership_listeners:
                listener(p.topic, p.index, state.leader_epoch)
        return new

    # ---------------------------------------------------------------- LeaderAndIsr
    async def become_leader_or_follower(self, controller_epoch: int, partitions: list[LeaderAndIsrPartition],
                                        live_leaders: dict[int, Z.BrokerInfo]) -> tuple[int, dict[TopicPartition, int]]:
        """One LeaderAndIsr at a time, in arrival order: Kafka's becomeLeaderOrFollower holds
        replicaStateChangeLock throughout. Interleaved at an await (a disk write while becoming
        leader), a request from an older controller checked its epochs before a newer one applied
        its state, then lowered a partition's leader epoch (power-loss-default-flush-swarm 1885)."""
        before, mine = self._state_change, self.rt.future()
        self._state_change = mine
        try:
            if before is not None and not before.done():
                await before
            return await self._become_leader_or_follower(controller_epoch, partitions, live_leaders)
        finally:
            mine.set_result(None)

    async def _become_leader_or_follower(self, controller_epoch: int, partitions: list[LeaderAndIsrPartition],
                                         live_leaders: dict[int, Z.BrokerInfo]
                                         ) -> tuple[int, dict[TopicPartition, int]]:
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
            error = await self._check_leader_and_isr_epoch(p, item)
            if error is not None:
                errors[tp] = error
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
            if self._skipped_as_stale(p, st):  # Partition.makeFollower skips it: no fetcher to its leader either
                continue
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
        await self.fetcher_manager.remove_fetcher_for_partitions(sorted(fetch_states))
        await self.fetcher_manager.add_fetcher_for_partitions(fetch_states)
        return E.NONE, errors

    async def _check_leader_and_isr_epoch(self, p: Partition | None, item: LeaderAndIsrPartition) -> int | None:
        """becomeLeaderOrFollower's per-partition checks (ZooKeeper mode): None when the state is
        to be applied (a newer leader epoch), else the partition's error. Same leader epoch: the
        state is not applied again — STALE_CONTROLLER_EPOCH, unless the request only brings the
        topic id the log lacks (assigned, NONE) or, to a follower, drops one (NONE)."""
        request_id = item.topic_id if item.topic_id != bytes(16) else None
        log_id = p.log.topic_id if p is not None else None
        if request_id is not None and log_id is not None and request_id != log_id:
            return E.INCONSISTENT_TOPIC_ID
        current = p.leader_epoch if p is not None else -1
        if item.state.leader_epoch > current:
            return None
        if item.state.leader_epoch < current or p is None:
            return E.STALE_CONTROLLER_EPOCH
        if request_id is not None and log_id is None:
            await p.log.write_partition_metadata(request_id)
            return E.NONE
        if request_id is None and log_id is not None and item.state.leader != self.broker_id:
            return E.NONE
        return E.STALE_CONTROLLER_EPOCH

    def _broker(self, broker_id: int, live_leaders: dict[int, Z.BrokerInfo]) -> Z.BrokerInfo | None:
        if broker_id < 0:
            return None
        if broker_id in self.metadata_cache.brokers:
            return self.metadata_cache.brokers[broker_id]
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
        await self.fetcher_manager.remove_fetcher_for_partitions([tp for tp, _, _ in stop])
        for tp, delete, leader_epoch in stop:
            p = self.partitions.get(tp)
            if p is not None and p.is_leader:
                for listener in self.resignation_listeners:
                    listener(tp[0], tp[1], leader_epoch if leader_epoch >= 0 else None)
            if delete:
                self.partitions.pop(tp, None)
                if p is not None:
                    p.leader_id = None
                    p.try_complete_delayed_requests()
                try:
                    await self._delete_log(tp)
                except KafkaStorageError:
                    errors[tp] = E.KAFKA_STORAGE_ERROR
            elif p is not None:
                p.try_complete_delayed_requests()  # complete delayed produce/fetch rather than let them time out
        return E.NONE, errors

    async def _delete_log(self, tp: TopicPartition) -> None:
        await self.log_manager.async_delete(tp[0], tp[1])  # crash-atomic: the dir is renamed away first

    # ---------------------------------------------------------------- truncation (the fetcher's)
    async def truncate_partition(self, p: Partition, offset: int) -> None:
        if await p.log.truncate_to(offset):  # the log reloads its producer state
            p.try_complete_delayed_requests()

    async def truncate_partition_fully(self, p: Partition, offset: int) -> None:
        await p.log.truncate_fully_and_start_at(offset)
        p.log.update_high_watermark(offset)
        p.try_complete_delayed_requests()

    # ---------------------------------------------------------------- produce
    async def append_records(self, topic: str, partition: int, records: Any, required_acks: int = 1,
                             origin: AppendOrigin = AppendOrigin.CLIENT,
                             verification_guard: VerificationGuard | None = None) -> PartitionAppendResult:
        """Append to a partition this broker leads. `origin`: AppendOrigin.CLIENT for Produce
        (control batches refused with INVALID_RECORD; sequences checked), COORDINATOR for
        WriteTxnMarkers and the group coordinator (control batches accepted, producer and
        coordinator epochs checked)."""
        p = self.partitions.get((topic, partition))
        if p is None:
            return PartitionAppendResult(self.missing_partition_error(topic, partition))
        if p.offline:
            return PartitionAppendResult(E.KAFKA_STORAGE_ERROR, error_message="the log dir is offline")
        try:
            records = self._up_convert(records, p.log.config)
            validated = validate_produce_records(records, p.log.config, origin)  # the topic's max.message.bytes
            info = await p.append_records_to_leader(validated, required_acks, origin, verification_guard)
        except AppendError as exc:
            return PartitionAppendResult(exc.error_code, log_start_offset=p.log_start_offset, error_message=str(exc))
        except KafkaStorageError as storage_exc:  # its own name: mypyc types one name once
            self.on_storage_error()
            return PartitionAppendResult(E.KAFKA_STORAGE_ERROR, error_message=str(storage_exc))
        return PartitionAppendResult(E.NONE, info.first_offset, p.log_start_offset, info=info)

    def _up_convert(self, records: Any, config: LogConfig) -> Any:
        """Produce v0-v2 may carry magic 0/1 message sets: Kafka's log holds only record batch
        v2, so LogValidator converts them into one batch (compression.type decides the codec)."""
        if records is None or len(records) < 17 or peek_magic(records, 0) == MAGIC_VALUE_V2:
            return records
        ts_type = LOG_APPEND_TIME if config.message_timestamp_type == "LogAppendTime" else CREATE_TIME
        try:
            return up_convert(records, topic_compression_type=config.compression_type, timestamp_type=ts_type,
                              now_ms=int(self.rt.now_ms()))
        except CorruptRecordError as exc:
            code = E.CORRUPT_MESSAGE if exc.reason in (CorruptReason.CRC_MISMATCH, CorruptReason.BAD_LENGTH,
                                                        CorruptReason.TRUNCATED) else E.INVALID_RECORD
            raise AppendError(code, f"invalid message set: {exc}") from exc

    async def wait_for_replication(self, topic: str, partition: int, required_offset: int,
                                   deadline_ms: float) -> int:
        """DelayedProduce for acks=all: done when the high watermark reaches required_offset
        (the batch's last offset + 1); the error for the partition's response."""
        op = DelayedProduce(self, topic, partition, required_offset, deadline_ms - self.rt.monotonic_ms())
        await self.delayed_request_purgatory.await_completion(op, [TopicPartitionOperationKey(topic, partition)],
                                                              deadline_ms)
        return op.error

    # ---------------------------------------------------------------- fetch
    def missing_partition_error(self, topic: str, partition: int) -> int:
        """ReplicaManager.getPartitionOrError for a partition this broker does not host: the
        topic exists but this broker is not (or no longer) a replica — NOT_LEADER_OR_FOLLOWER,
        so clients refresh their metadata — or it does not exist."""
        meta = self.metadata_cache.topic(topic)
        if meta is not None and partition in meta.partitions:
            return E.NOT_LEADER_OR_FOLLOWER
        return E.UNKNOWN_TOPIC_OR_PARTITION

    def check_fetch_partition(self, s: FetchSpec, p: Partition | None) -> int:
        if p is None:
            return self.missing_partition_error(s.topic, s.partition)
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
                  replica_id: int = -1, update_fetch_state: bool = True) -> tuple[list[FetchResult], int]:
        """ReplicaManager.readFromLog. A follower's read records its fetch position (which may move
        the ISR and the high watermark) unless `update_fetch_state` is off: the read that answers a
        fetch that waited in the purgatory (Kafka's readFromPurgatory) records nothing."""
        results: list[FetchResult] = []
        total = 0
        follower = replica_id >= 0
        for s in specs:
            p = self.partitions.get((s.topic, s.partition))
            code = self.check_fetch_partition(s, p)
            if code != E.NONE:
                results.append(FetchResult(code))
                continue
            assert p is not None
            leo = p.log_end_offset
            code, diverging = self._diverging_epoch(p, s)
            if code == E.NONE and diverging is None and not p.log_start_offset <= s.fetch_offset <= leo:
                code = E.OFFSET_OUT_OF_RANGE
            if code != E.NONE:
                # An error of the read: no offsets in the answer (Kafka's createLogReadResult).
                results.append(FetchResult(code))
                continue
            if diverging is not None:
                results.append(FetchResult(E.NONE, p.high_watermark, p.log_start_offset, b"", p.last_stable_offset,
                                           diverging_epoch=diverging))
                continue
            if follower and update_fetch_state:
                p.update_follower_fetch_state(replica_id, s.fetch_offset, s.log_start_offset, leo)
            # fetch.max.bytes caps the response, but the first batch always goes out (KIP-74) —
            # from fetch v3 on; v0-v2 have a hard limit (an oversized first batch reads nothing).
            budget = min(s.max_bytes, max_bytes - total) if total else s.max_bytes
            if not s.min_one_message:
                budget = min(s.max_bytes, max_bytes - total)
            elif self.rt.buggify("fetch.response.tiny"):
                budget = min(budget, 1)  # as fetch.max.bytes=1 answers: the first batch only (KIP-74)
            data: FileRecords | bytes
            if follower and s.min_one_message and s.fetch_offset >= leo and not p.log.offline:
                # A caught-up follower (most partitions of most follower fetches): what
                # _read_partition would find — nothing — without walking down to the log.
                data = b"" if budget <= 0 and total else FileRecords([])
                results.append(FetchResult(E.NONE, p.high_watermark, p.log_start_offset, data, p.last_stable_offset))
                continue
            try:
                aborted: list[AbortedTxn] | None = None
                if not s.min_one_message:  # fetch v0-v2 (no isolation level yet): a hard limit
                    hard_limit = leo if follower else p.high_watermark
                    data = p.log.read_records(s.fetch_offset, max(budget, 0), max_offset=hard_limit,
                                              min_one_message=False)
                else:
                    data, aborted = self._read_partition(p, s.fetch_offset, budget, total,
                                                         committed and not follower, leo if follower else None)
            except KafkaStorageError:
                self.on_storage_error()
                results.append(FetchResult(E.KAFKA_STORAGE_ERROR))
                continue
            total += len(data)
            results.append(FetchResult(E.NONE, p.high_watermark, p.log_start_offset, data,
                                       p.last_stable_offset, aborted))
        return results, total

    @staticmethod
    def _read_partition(p: Partition, offset: int, budget: int, total: int, txn_committed: bool,
                        limit: int | None) -> tuple[Any, list[AbortedTxn] | None]:
        """One partition's read (Partition.fetchRecords): a follower to `limit` (the log end), a
        READ_COMMITTED consumer to the LSO with the aborted transactions in what it reads, a
        READ_UNCOMMITTED one to the high watermark. Past the response's budget only an empty
        read (the first partition always gets its first batch, KIP-74)."""
        if budget <= 0 and total:
            return b"", [] if txn_committed else None
        if txn_committed:
            records, aborted = p.read_committed(offset, max(budget, 0))
            return records, aborted
        return p.read(offset, max(budget, 0), False, max_offset=limit), None

    @staticmethod
    def _diverging_epoch(p: Partition, s: FetchSpec) -> tuple[int, tuple[int, int] | None]:
        """Partition.readRecords with a last fetched epoch (fetch v12+): the largest epoch <= it
        that this log knows and where it ends — (epoch, end offset) when that ends before the
        fetch offset or is an older epoch: the fetcher diverged. An epoch this log cannot place,
        or a fetch offset below the log start, is OFFSET_OUT_OF_RANGE."""
        if s.last_fetched_epoch < 0:
            return E.NONE, None
        code, epoch, end = p.last_offset_for_leader_epoch(s.current_leader_epoch, s.last_fetched_epoch)
        if code != E.NONE:
            return code, None
        if end < 0 or epoch < 0 or s.fetch_offset < p.log_start_offset:
            return E.OFFSET_OUT_OF_RANGE, None
        if epoch < s.last_fetched_epoch or end < s.fetch_offset:
            return E.NONE, (epoch, end)
        return E.NONE, None

    async def fetch_messages(self, specs: list[FetchSpec], max_wait_ms: int, min_bytes: int, max_bytes: int,
                             committed: bool, replica_id: int = -1) -> list[FetchResult]:
        """Read now; without fetch.min.bytes (and no error), wait as DelayedFetch up to max_wait_ms."""
        deadline = self.rt.monotonic_ms() + max(0, max_wait_ms)
        op = DelayedFetch(self, specs, min_bytes, max_bytes, committed, replica_id, max(0, max_wait_ms))
        await self.delayed_request_purgatory.await_completion(op, op.operation_keys(), deadline)
        return op.results

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
        if self._failure_handled or not lm.offline:
            return
        self._failure_handled = True
        self.offline = True
        tps = sorted(self.partitions)
        self.fetcher_manager.remove_fetcher_for_partitions_now(tps)
        self.fetcher_manager.shutdown_idle_fetcher_threads()
        for tp in tps:
            p = self.partitions[tp]
            if p.is_leader:
                for listener in self.resignation_listeners:
                    listener(tp[0], tp[1], None)
            p.offline = True
            p.try_complete_delayed_requests()
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
        await self.log_manager.shutdown()
