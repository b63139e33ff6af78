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
import functools

from kafkasim.broker.add_partitions_to_txn_manager import AddPartitionsToTxnManager
from kafkasim.broker.admin_apis import AdminManager
from kafkasim.broker.config import BrokerConfig, ReplicationConfig, TransactionConfig
from kafkasim.broker.controller.kafka_controller import KafkaController
from kafkasim.broker.group.coordinator import GroupCoordinator
from kafkasim.broker.group.manager import GROUP_METADATA_TOPIC_NAME
from kafkasim.broker.kafka_apis import KafkaApis
from kafkasim.broker.metadata_cache import MetadataCache
from kafkasim.broker.produce_api import ProduceApi
from kafkasim.broker.producer_id_manager import ZkProducerIdManager, producer_id_generator
from kafkasim.broker.purgatory import DelayedOperationPurgatory
from kafkasim.broker.quota_manager import QuotaManagers
from kafkasim.broker.replica_manager import ReplicaManager
from kafkasim.broker.request_faults import RequestFaults
from kafkasim.broker.security.authorizer import AclAuthorizer, AuthorizerConfig
from kafkasim.broker.security.credentials import zk_credentials
from kafkasim.broker.security.inter_broker import inter_broker_address, inter_broker_security
from kafkasim.broker.socket_server import SocketServer
from kafkasim.broker.topic_admin import TopicAdmin
from kafkasim.broker.transaction.coordinator import TransactionCoordinator
from kafkasim.broker.zk import zk_data as Z
from kafkasim.broker.zk.kafka_zk_client import KafkaZkClient
from kafkasim.broker.zk.zookeeper_client import ZooKeeperClient
from kafkasim.client.network_client import NetworkClient
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.controlled_shutdown import ControlledShutdownRequest
from kafkasim.runtime.api import NetworkError, NodeExistsError, NodeRuntime, RuntimeTimeout
from kafkasim.storage.log_manager import LogManager, split_log_dirs

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
    """The composition root: startup() builds every component in Kafka's order, each with only
    what it uses, at the point where what it needs is known (the broker id and the cluster id come
    from ZooKeeper, the port from the bound listener). The attributes below are None until startup
    has built them; code above the broker (the harness, tests) reads them."""

    def __init__(self, rt: NodeRuntime, config: BrokerConfig) -> None:
        self.rt = rt
        self.config = config
        self.port = config.port
        # The czxid of /brokers/ids/<id>: set at each registration (a new ZooKeeper session
        # registers again), so components read it through a callable, never a copy.
        self.broker_epoch = -1
        self.zk: ZooKeeperClient | None = None
        self.kzk: KafkaZkClient | None = None
        self.metadata_cache: MetadataCache | None = None
        self.replica_manager: ReplicaManager | None = None
        self.socket_server: SocketServer | None = None
        self.controller: KafkaController | None = None
        self.group_coordinator: GroupCoordinator | None = None
        self.txn_coordinator: TransactionCoordinator | None = None
        self.apis: KafkaApis | None = None
        # Request-level faults (the control plane's and scenarios'): built now, so a fault can be
        # armed before the broker has started; Fetch v13+ names topics by id, hence the lookup.
        self.request_faults = RequestFaults(rt, self._topic_id)
        self.authorizer: AclAuthorizer | None = None

    def _topic_id(self, name: str) -> object:
        meta = self.metadata_cache.topic(name) if self.metadata_cache is not None else None
        return meta.topic_id if meta is not None else None

    @property
    def controller_epoch(self) -> int:
        return self.controller.epoch if self.controller is not None and self.controller.is_active else -1

    # ---------------------------------------------------------------- startup
    async def startup(self) -> None:
        rt, cfg = self.rt, self.config
        for log_dir in split_log_dirs(cfg.log_dir):  # log.dirs: one or several, comma-separated
            rt.fs.mkdir(log_dir)
        meta = self._read_meta_properties()
        self.zk = zk = ZooKeeperClient(rt, cfg.zookeeper_session_timeout_ms)
        await zk.connect()
        self.kzk = kzk = KafkaZkClient(rt, zk)
        await kzk.create_top_level_paths()
        proposed = meta.get("cluster.id") or Z.uuid_to_str(rt.rng("cluster-id").randbytes(16))
        cluster_id = await kzk.get_or_create_cluster_id(proposed)
        if meta.get("cluster.id") and meta["cluster.id"] != cluster_id:
            raise InconsistentClusterIdError(
                f"The Cluster ID {cluster_id} doesn't match stored clusterId {meta['cluster.id']} in meta.properties")
        await self._resolve_broker_id(kzk, meta)
        if not meta:
            await self._write_meta_properties(cluster_id)
        self.metadata_cache = cache = MetadataCache(cluster_id=cluster_id)
        # Built now, bound after the logs are loaded (as Kafka's, whose bound port the broker
        # registration and the static `listeners` config report).
        self.socket_server = socket_server = SocketServer(rt, cfg, self.request_faults, zk_credentials(zk))
        # DelayedCreatePartitions / DelayedDeleteTopics (Kafka's ZkAdminManager.topicPurgatory).
        topic_admin = TopicAdmin(rt, cfg, kzk, cache, DelayedOperationPurgatory(rt, "topic"))
        log_manager = LogManager(rt, cfg.log_dir, cfg.log_config(), cfg.log_manager_config())
        admin_manager = AdminManager(cfg, zk, cache, log_manager.default_config, socket_server.bound_port)
        inter_broker = inter_broker_security(cfg)   # TLS/SASL of the broker's own clients
        self.replica_manager = rm = ReplicaManager(
            rt, log_manager, broker_id=cfg.broker_id, metadata_cache=cache, broker_epoch=self._broker_epoch,
            replication=_replication_config(cfg), topic_configs=admin_manager.topic_log_config,
            log_dir_failure_notifier=functools.partial(_propagate_log_dir_event, rt, zk, cfg.broker_id),
            isr_zk=zk if _ibp_before(cfg, (2, 7)) else None,
            delayed_request_purgatory=DelayedOperationPurgatory(rt, "ProduceFetch"), inter_broker_security=inter_broker)
        await rm.startup()
        self.port = await socket_server.start()
        quotas = QuotaManagers(rt, zk, cfg.quota_window_num, cfg.quota_window_size_seconds) \
            if cfg.client_quotas else None
        loading_quotas = quotas.start() if quotas is not None else None   # reads ride on the registration
        register_broker = functools.partial(self._register_broker, kzk)
        await register_broker()
        self.controller = controller = KafkaController(rt, cfg, zk, cache, register_broker)
        controller.startup()
        self.group_coordinator = coordinator = GroupCoordinator(rt, cfg, rm, cache)
        # The coordinator writes through the ReplicaManager, so it comes after it and subscribes
        # to its leadership changes (leading an offsets partition = coordinating its groups).
        rm.leadership_listeners.append(coordinator.on_leadership_change)
        rm.resignation_listeners.append(functools.partial(_on_resignation, coordinator))
        # The transaction coordinator, likewise: leading a __transaction_state partition =
        # coordinating its transactional ids. Producer ids come from ZooKeeper blocks.
        self.txn_coordinator = txn = TransactionCoordinator(
            rt, cfg.view(TransactionConfig), cfg.broker_id, rm, cache,
            producer_id_generator(ZkProducerIdManager(rt, cfg.broker_id, zk)), inter_broker)
        rm.leadership_listeners.append(txn.on_leadership_change)
        if cfg.transaction_partition_verification_enable:  # KIP-890 part 1: leaders ask the coordinator
            rm.add_partitions_to_txn_manager = AddPartitionsToTxnManager(rt, cfg.broker_id, cache, txn.partition_for,
                                                                         cfg.request_timeout_ms, inter_broker)
        rm.resignation_listeners.append(txn.on_resignation_change)
        txn.startup()
        self.authorizer = None if not cfg.authorizer_class_name else AclAuthorizer(
            rt, zk, AuthorizerConfig.parse(cfg.super_users, cfg.allow_everyone_if_no_acl_found))
        if self.authorizer is not None:
            await self.authorizer.start()   # every ACL loaded before the first request is read
        if loading_quotas is not None:
            await loading_quotas
        self.apis = apis = KafkaApis(rt, cfg, rm, cache, controller, topic_admin, coordinator, admin_manager,
                                     txn, kzk, self._broker_epoch, self.authorizer, quotas)
        # Requests are processed only now, as Kafka's startProcessingRequests at the end of
        # startup: a client that connects earlier waits rather than seeing no topics.
        # An injected Produce NOT_LEADER_OR_FOLLOWER carries the KIP-951 hint, as a real one does.
        self.request_faults.leader_hints = ProduceApi(rt, rm, cache).leader_hints
        socket_server.enable_request_processing(apis)
        rt.trace("broker_started", broker_id=cfg.broker_id, port=self.port, cluster_id=cluster_id,
                 broker_epoch=self.broker_epoch)

    def _broker_epoch(self) -> int:
        return self.broker_epoch

    async def _resolve_broker_id(self, kzk: KafkaZkClient, meta: dict[str, str]) -> None:
        """broker.id; unset (< 0): meta.properties's, else reserved.broker.max.id + the
        /brokers/seqid sequence (broker.id.generation.enable)."""
        if self.config.broker_id >= 0:
            return
        if meta.get("broker.id"):
            self.config.broker_id = int(meta["broker.id"])
        else:
            self.config.broker_id = await kzk.generate_broker_sequence_id()
        self.rt.trace("broker_id_generated", broker_id=self.config.broker_id)

    async def _register_broker(self, kzk: KafkaZkClient) -> None:
        """/brokers/ids/<id> (ephemeral): at startup, and again by the controller in each new
        ZooKeeper session."""
        cfg = self.config
        assert self.socket_server is not None
        self.broker_epoch = await kzk.register_broker(cfg.broker_id, self.socket_server.advertised_endpoints(),
                                                      cfg.rack)

    def _read_meta_properties(self) -> dict[str, str]:
        path = f"{split_log_dirs(self.config.log_dir)[0]}/{META_PROPERTIES}"
        if not self.rt.fs.exists(path):
            return {}
        f = self.rt.fs.open(path, create=False)
        try:
            return parse_properties(f.read(0, f.size()))
        finally:
            f.close()

    async def _write_meta_properties(self, cluster_id: str) -> None:
        """tmp + fsync + rename + directory fsync, so a crash leaves the old file or the new."""
        fs = self.rt.fs
        for d in split_log_dirs(self.config.log_dir):  # in every log dir, as Kafka
            f = fs.open(f"{d}/{META_PROPERTIES}.tmp")
            f.truncate(0)
            f.append(render_meta_properties(self.config.broker_id, cluster_id, self.rt.now_ms()))
            await f.fsync()
            f.close()
            fs.rename(f"{d}/{META_PROPERTIES}.tmp", f"{d}/{META_PROPERTIES}")
            await fs.fsync_dir(d)

    # ---------------------------------------------------------------- shutdown
    async def shutdown(self) -> None:
        if self.config.controlled_shutdown_enable:
            await self._controlled_shutdown()
        if self.socket_server is not None:
            self.socket_server.stop()
        # As KafkaServer.shutdown: the group coordinator stops (its expiration timers and
        # purgatories with it) before the replica manager closes the logs it writes to.
        if self.txn_coordinator is not None:
            self.txn_coordinator.shutdown()
        if self.group_coordinator is not None:
            self.group_coordinator.shutdown()
        if self.controller is not None:
            await self.controller.shutdown()
        if self.replica_manager is not None:
            if self.replica_manager.add_partitions_to_txn_manager is not None:
                self.replica_manager.add_partitions_to_txn_manager.shutdown()
            await self.replica_manager.shutdown()
        if self.zk is not None:
            await self.zk.close()
        self.rt.trace("broker_stopped", broker_id=self.config.broker_id)

    async def _controlled_shutdown(self) -> None:
        """Ask the controller to move this broker's leaderships (KafkaServer.controlledShutdown).
        Skipped when no other broker is alive: there is nowhere to move them."""
        cache, rm = self.metadata_cache, self.replica_manager
        if cache is None or rm is None or not [b for b in cache.brokers if b != self.config.broker_id]:
            return
        retries = self.config.controlled_shutdown_max_retries
        backoff = float(self.config.controlled_shutdown_retry_backoff_ms)
        for attempt in range(retries):
            controller = cache.brokers.get(cache.controller_id)
            if controller is not None:
                try:
                    security = inter_broker_security(self.config)
                    client = NetworkClient(self.rt, *inter_broker_address(controller, security),
                                           f"broker-{self.config.broker_id}-controlled-shutdown", security=security)
                    await client.connect(rm.replication.request_timeout_ms)
                    try:
                        resp = await client.send(ControlledShutdownRequest(broker_id=self.config.broker_id,
                                                                           broker_epoch=self.broker_epoch),
                                                 CONTROLLED_SHUTDOWN_VERSION,
                                                 rm.replication.request_timeout_ms)
                    finally:
                        client.close()
                    remaining = [(r.topic_name, r.partition_index) for r in resp.remaining_partitions]
                    self.rt.trace("controlled_shutdown_response", error=resp.error_code, remaining=len(remaining),
                                  attempt=attempt + 1)
                    if resp.error_code == E.NONE and not self._movable(cache, remaining):
                        return
                except (NetworkError, RuntimeTimeout):
                    pass
            await self.rt.sleep(backoff)

    def _movable(self, cache: MetadataCache, remaining: list[tuple[str, int]]) -> list[tuple[str, int]]:
        """Remaining leaderships some other live ISR member could take (single-replica
        partitions stay with us whatever happens)."""
        out = []
        for t, p in remaining:
            meta = cache.topic(t)
            pm = meta.partitions.get(p) if meta is not None else None
            if pm is not None and any(r != self.config.broker_id and r in cache.brokers for r in pm.isr):
                out.append((t, p))
        return out


def _on_resignation(coordinator: GroupCoordinator, topic: str, partition: int, leader_epoch: int | None) -> None:
    if topic == GROUP_METADATA_TOPIC_NAME:
        coordinator.on_resignation(partition, leader_epoch)


async def _propagate_log_dir_event(rt: NodeRuntime, zk: ZooKeeperClient, broker_id: int) -> None:
    """LogDirEventNotification: a persistent sequential znode the controller watches."""
    try:
        await zk.create(f"{Z.LOG_DIR_EVENT_NOTIFICATION}/{Z.LOG_DIR_EVENT_PREFIX}",
                        Z.log_dir_event_json(broker_id), sequential=True, makepath=True)
    except NodeExistsError:
        pass
    rt.trace("log_dir_event_propagated", broker_id=broker_id)


def _replication_config(cfg: BrokerConfig) -> ReplicationConfig:
    """replica.* from the broker's configs."""
    return cfg.view(ReplicationConfig)


def _ibp_before(cfg: BrokerConfig, version: tuple[int, int]) -> bool:
    """inter.broker.protocol.version (e.g. "2.6" or "2.6-IV0") older than `version`; unset is
    the latest (3.9)."""
    raw = cfg.inter_broker_protocol_version.strip()
    if not raw:
        return False
    try:
        major, minor = (int(x) for x in raw.split("-", 1)[0].split(".")[:2])
    except ValueError:
        return False
    return (major, minor) < version
