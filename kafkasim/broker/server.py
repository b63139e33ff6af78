"""KafkaServer: one broker — startup, topic creation, shutdown. The same code runs in the
simulated world and the real one; everything outside comes through the NodeRuntime.

Startup, in Kafka's order: read or write `meta.properties` in the log dir; connect to
ZooKeeper and create the top-level paths; get or create `/cluster/id` and check it against
meta.properties; the broker id (broker.id, else meta.properties, else generated from
/brokers/seqid); load (recover) the logs; start the listener; register `/brokers/ids/<id>`
(ephemeral; its czxid is the broker epoch); start the KafkaController, which runs for
/controller. From then on the broker hosts what the controller's LeaderAndIsr requests say and
knows the cluster from its UpdateMetadata requests.

Shutdown is controlled (controlled.shutdown.enable): the broker asks the controller to move
its leaderships away (ControlledShutdown, retried controlled.shutdown.max.retries times), then
stops serving, fetching and writing, and closes its ZooKeeper session.
"""

from __future__ import annotations

import datetime
from typing import Any

from kafkasim.broker.admin_utils import AssignmentError, BrokerMetadata, assign_replicas_to_brokers
from kafkasim.broker.config import BrokerConfig
from kafkasim.broker.controller.kafka_controller import KafkaController
from kafkasim.broker.kafka_apis import KafkaApis
from kafkasim.broker.metadata_cache import MetadataCache
from kafkasim.broker.replica_manager import ReplicaManager, ReplicationConfig
from kafkasim.broker.socket_server import SocketServer
from kafkasim.broker.zk import zk_data as Z
from kafkasim.broker.zk.kafka_zk_client import KafkaZkClient, TopicError, validate_topic_name
from kafkasim.broker.zk.zookeeper_client import ZooKeeperClient
from kafkasim.client.network_client import NetworkClient
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.controlled_shutdown import ControlledShutdownRequest
from kafkasim.runtime.api import Future, NetworkError, NodeExistsError, NodeRuntime, RuntimeTimeout

META_PROPERTIES = "meta.properties"
CONTROLLED_SHUTDOWN_VERSION = 3
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})  # Kafka's Topic.INTERNAL_TOPICS


class InconsistentClusterIdError(Exception):
    pass


def render_meta_properties(broker_id: int, cluster_id: str, now_ms: int) -> bytes:
    """As Java's Properties.store writes it (a blank comment, the date, then the keys)."""
    stamp = datetime.datetime.fromtimestamp(now_ms / 1000, datetime.UTC)
    return (f"#\n#{stamp.strftime('%a %b %d %H:%M:%S UTC %Y')}\n"
            f"broker.id={broker_id}\nversion=0\ncluster.id={cluster_id}\n").encode()


def parse_properties(data: bytes) -> dict[str, str]:
    out = {}
    for line in data.decode().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


class KafkaServer:
    def __init__(self, rt: NodeRuntime, config: BrokerConfig) -> None:
        self.rt = rt
        self.config = config
        self.metadata_cache = MetadataCache()
        self.replica_manager = ReplicaManager(rt, config.log_dir, config.log_config(),
                                              log_manager_config=config.log_manager_config(),
                                              replication=_replication_config(config))
        self.replica_manager.metadata = self.metadata_cache
        self.apis = KafkaApis(self)
        self.socket_server = SocketServer(self)
        self.zk: ZooKeeperClient | None = None
        self.kzk: KafkaZkClient | None = None
        self.controller: KafkaController | None = None
        self.broker_epoch = -1
        self.port = config.port
        self._metadata_waiters: list[Future[Any]] = []
        rm = self.replica_manager
        rm.topic_configurer = self.apis.admin.apply_topic_config
        rm.log_dir_failure_notifier = self._propagate_log_dir_event
        rm.resignation_listeners.append(self._on_resignation)

    @property
    def controller_epoch(self) -> int:
        return self.controller.epoch if self.controller is not None and self.controller.is_active else -1

    # ---------------------------------------------------------------- startup
    async def startup(self) -> None:
        rt, cfg = self.rt, self.config
        rt.fs.mkdir(cfg.log_dir)
        meta = self._read_meta_properties()
        self.zk = ZooKeeperClient(rt, cfg.zookeeper_session_timeout_ms)
        await self.zk.connect()
        self.kzk = KafkaZkClient(rt, self.zk)
        self.replica_manager.zk = self.zk
        self.replica_manager.zk_isr_updates = _ibp_before(cfg, (2, 7))
        await self.kzk.create_top_level_paths()
        proposed = meta.get("cluster.id") or Z.uuid_to_str(rt.rng("cluster-id").randbytes(16))
        cluster_id = await self.kzk.get_or_create_cluster_id(proposed)
        if meta.get("cluster.id") and meta["cluster.id"] != cluster_id:
            raise InconsistentClusterIdError(
                f"The Cluster ID {cluster_id} doesn't match stored clusterId {meta['cluster.id']} in meta.properties")
        await self._resolve_broker_id(meta)
        if not meta:
            await self._write_meta_properties(cluster_id)
        self.metadata_cache.cluster_id = cluster_id
        self.replica_manager.broker_id = cfg.broker_id
        await self.replica_manager.startup()
        self.port = await self.socket_server.start(cfg.host, cfg.port)
        await self.register_broker_in_zk()
        self.controller = KafkaController(self, self.zk)
        self.controller.startup()
        # Requests are processed only now, as Kafka's startProcessingRequests at the end of
        # startup: a client that connects earlier waits rather than seeing no topics.
        self.socket_server.start_processing()
        rt.trace("broker_started", broker_id=cfg.broker_id, port=self.port, cluster_id=cluster_id,
                 broker_epoch=self.broker_epoch)

    async def _resolve_broker_id(self, meta: dict[str, str]) -> None:
        """broker.id; unset (< 0): meta.properties's, else reserved.broker.max.id + the
        /brokers/seqid sequence (broker.id.generation.enable)."""
        assert self.kzk is not None
        if self.config.broker_id >= 0:
            return
        if meta.get("broker.id"):
            self.config.broker_id = int(meta["broker.id"])
        else:
            self.config.broker_id = await self.kzk.generate_broker_sequence_id()
        self.rt.trace("broker_id_generated", broker_id=self.config.broker_id)

    async def register_broker_in_zk(self) -> None:
        assert self.kzk is not None
        cfg = self.config
        self.broker_epoch = await self.kzk.register_broker(cfg.broker_id, cfg.host, self.port, cfg.rack)
        self.replica_manager.broker_epoch = self.broker_epoch

    def _read_meta_properties(self) -> dict[str, str]:
        path = f"{self.config.log_dir}/{META_PROPERTIES}"
        if not self.rt.fs.exists(path):
            return {}
        f = self.rt.fs.open(path, create=False)
        try:
            return parse_properties(f.read(0, f.size()))
        finally:
            f.close()

    async def _write_meta_properties(self, cluster_id: str) -> None:
        """tmp + fsync + rename + directory fsync, so a crash leaves the old file or the new."""
        fs, d = self.rt.fs, self.config.log_dir
        f = fs.open(f"{d}/{META_PROPERTIES}.tmp")
        f.truncate(0)
        f.append(render_meta_properties(self.config.broker_id, cluster_id, self.rt.now_ms()))
        await f.fsync()
        f.close()
        fs.rename(f"{d}/{META_PROPERTIES}.tmp", f"{d}/{META_PROPERTIES}")
        await fs.fsync_dir(d)

    # ---------------------------------------------------------------- metadata events
    def on_metadata_updated(self) -> None:
        """UpdateMetadata applied: wake the requests waiting for topics to appear or vanish
        (Kafka's DelayedCreatePartitions / DelayedDeleteTopics)."""
        waiters, self._metadata_waiters = self._metadata_waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    async def wait_for_metadata(self, done: Any, timeout_ms: float) -> bool:
        deadline = self.rt.monotonic_ms() + max(0.0, timeout_ms)
        while not done():
            remaining = deadline - self.rt.monotonic_ms()
            if remaining <= 0:
                return False
            fut = self.rt.future()
            self._metadata_waiters.append(fut)
            await self.rt.wait_first([fut], remaining)
        return True

    async def on_partitions_deleted(self, deleted: list[tuple[str, int]]) -> None:
        """A topic left the metadata cache (deletion): its groups' offsets go (Kafka's
        handleUpdateMetadataRequest -> GroupCoordinator.onPartitionsDeleted)."""
        from kafkasim.broker.group.metadata import TopicPartition
        coordinator = self.apis.group_coordinator
        if coordinator is not None and coordinator.is_active:
            await coordinator.on_partitions_deleted([TopicPartition(t, p) for t, p in deleted])

    def _on_resignation(self, topic: str, partition: int, leader_epoch: int | None) -> None:
        from kafkasim.broker.group.manager import GROUP_METADATA_TOPIC_NAME
        if topic == GROUP_METADATA_TOPIC_NAME:
            self.apis.group_coordinator.on_resignation(partition, leader_epoch)

    async def _propagate_log_dir_event(self) -> None:
        """LogDirEventNotification: a persistent sequential znode the controller watches."""
        assert self.zk is not None
        try:
            await self.zk.create(f"{Z.LOG_DIR_EVENT_NOTIFICATION}/{Z.LOG_DIR_EVENT_PREFIX}",
                                 Z.log_dir_event_json(self.config.broker_id), sequential=True, makepath=True)
        except NodeExistsError:
            pass
        self.rt.trace("log_dir_event_propagated", broker_id=self.config.broker_id)

    # ---------------------------------------------------------------- topics
    async def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                           assignment: dict[int, list[int]] | None, configs: dict[str, str],
                           validate_only: bool = False) -> tuple[int, int]:
        """Validate and create a topic: its config and assignment znodes (Kafka's
        AdminZkClient.createTopicWithAssignment); the controller, watching /brokers/topics,
        gives its partitions leaders. Returns (partitions, replication factor)."""
        assert self.kzk is not None
        validate_topic_name(name)
        if self.metadata_cache.topic(name) is not None:
            raise TopicError(E.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if assignment is None:
            n = self.config.num_partitions if num_partitions == -1 else num_partitions
            rf = self.config.default_replication_factor if replication_factor == -1 else replication_factor
            assignment = self._assign_replicas(n, rf)
        elif num_partitions != -1 or replication_factor != -1:
            raise TopicError(E.INVALID_REQUEST,
                             "Both numPartitions or replicationFactor and replicasAssignment were set.")
        rf = len(next(iter(assignment.values())))
        if validate_only:
            return len(assignment), rf
        await self.kzk.create_topic(name, assignment, configs)
        self.rt.trace("topic_created", topic=name, partitions=len(assignment), replication_factor=rf,
                      assignment={str(p): r for p, r in sorted(assignment.items())})
        return len(assignment), rf

    def _assign_replicas(self, partitions: int, rf: int) -> dict[int, list[int]]:
        """AdminUtils.assignReplicasToBrokers over the live brokers, sorted by id (Kafka
        iterates its metadata cache's LongMap, a hash order; with the random start index the
        spread is the same)."""
        brokers = [BrokerMetadata(b.broker_id, b.rack) for _, b in sorted(self.metadata_cache.brokers.items())]
        rng = self.rt.rng("replica-assignment")
        try:
            return assign_replicas_to_brokers(brokers, partitions, rf, lambda n: rng.randint(0, n - 1))
        except AssignmentError as exc:
            raise TopicError(exc.error_code, str(exc)) from exc

    # ---------------------------------------------------------------- shutdown
    async def shutdown(self) -> None:
        if self.config.extra.get("controlled.shutdown.enable", True) not in (False, "false"):
            await self._controlled_shutdown()
        self.socket_server.stop()
        # As KafkaServer.shutdown: the group coordinator stops (its expiration timers and
        # purgatories with it) before the replica manager closes the logs it writes to.
        self.apis.group_coordinator.shutdown()
        if self.controller is not None:
            await self.controller.shutdown()
        await self.replica_manager.shutdown()
        if self.zk is not None:
            await self.zk.close()
        self.rt.trace("broker_stopped", broker_id=self.config.broker_id)

    async def _controlled_shutdown(self) -> None:
        """Ask the controller to move this broker's leaderships (KafkaServer.controlledShutdown).
        Skipped when no other broker is alive: there is nowhere to move them."""
        if not [b for b in self.metadata_cache.brokers if b != self.config.broker_id]:
            return
        retries = int(self.config.extra.get("controlled.shutdown.max.retries", 3))
        backoff = float(self.config.extra.get("controlled.shutdown.retry.backoff.ms", 5000))
        for attempt in range(retries):
            controller = self.metadata_cache.brokers.get(self.metadata_cache.controller_id)
            if controller is not None:
                try:
                    client = NetworkClient(self.rt, controller.host, controller.port,
                                           f"broker-{self.config.broker_id}-controlled-shutdown")
                    await client.connect(self.replica_manager.replication.request_timeout_ms)
                    try:
                        resp = await client.send(ControlledShutdownRequest(broker_id=self.config.broker_id,
                                                                           broker_epoch=self.broker_epoch),
                                                 CONTROLLED_SHUTDOWN_VERSION,
                                                 self.replica_manager.replication.request_timeout_ms)
                    finally:
                        client.close()
                    remaining = [(r.topic_name, r.partition_index) for r in resp.remaining_partitions]
                    self.rt.trace("controlled_shutdown_response", error=resp.error_code, remaining=len(remaining),
                                  attempt=attempt + 1)
                    if resp.error_code == E.NONE and not self._movable(remaining):
                        return
                except (NetworkError, RuntimeTimeout):
                    pass
            await self.rt.sleep(backoff)

    def _movable(self, remaining: list[tuple[str, int]]) -> list[tuple[str, int]]:
        """Remaining leaderships some other live ISR member could take (single-replica
        partitions stay with us whatever happens)."""
        out = []
        for t, p in remaining:
            meta = self.metadata_cache.topic(t)
            pm = meta.partitions.get(p) if meta is not None else None
            if pm is not None and any(r != self.config.broker_id and r in self.metadata_cache.brokers for r in pm.isr):
                out.append((t, p))
        return out


def _replication_config(cfg: BrokerConfig) -> ReplicationConfig:
    """replica.* from the broker's configs (server.properties names in `extra`)."""
    out = ReplicationConfig()
    for key, value in cfg.extra.items():
        name = key.replace(".", "_")
        if hasattr(out, name):
            setattr(out, name, int(value))
    return out


def _ibp_before(cfg: BrokerConfig, version: tuple[int, int]) -> bool:
    """inter.broker.protocol.version (e.g. "2.6" or "2.6-IV0") older than `version`; unset is
    the latest (3.9)."""
    raw = str(cfg.extra.get("inter.broker.protocol.version", "")).strip()
    if not raw:
        return False
    try:
        major, minor = (int(x) for x in raw.split("-", 1)[0].split(".")[:2])
    except ValueError:
        return False
    return (major, minor) < version
