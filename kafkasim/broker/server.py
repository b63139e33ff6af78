"""KafkaServer: one broker — startup, topic creation, shutdown. The same code runs in the
simulated world and the real one; everything outside comes through the NodeRuntime.

Startup, in Kafka's order: read or write `meta.properties` in the log dir; connect to
ZooKeeper and create the top-level paths; get or create `/cluster/id` and check it against
meta.properties; start the listener; register `/brokers/ids/<id>` (ephemeral); try to become
controller; load the topics this broker leads and open (recover) their logs.
"""

from __future__ import annotations

import datetime
from typing import Optional

from kafkasim.broker import zk_data as Z
from kafkasim.broker.config import BrokerConfig
from kafkasim.broker.kafka_apis import KafkaApis
from kafkasim.broker.kafka_zk_client import KafkaZkClient, TopicError, validate_topic_name
from kafkasim.broker.metadata_cache import MetadataCache, PartitionMeta, TopicMeta
from kafkasim.broker.replica_manager import ReplicaManager
from kafkasim.broker.socket_server import SocketServer
from kafkasim.protocol import errors as E
from kafkasim.runtime.api import NodeRuntime, NoNodeError, WatchEvent, ZkClient

META_PROPERTIES = "meta.properties"
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})  # Kafka's Topic.INTERNAL_TOPICS


class InconsistentClusterIdError(Exception):
    pass


def render_meta_properties(broker_id: int, cluster_id: str, now_ms: int) -> bytes:
    """As Java's Properties.store writes it (a blank comment, the date, then the keys)."""
    stamp = datetime.datetime.fromtimestamp(now_ms / 1000, datetime.timezone.utc)
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
        self.replica_manager = ReplicaManager(rt, config.log_dir, config.log_config())
        self.apis = KafkaApis(self)
        self.socket_server = SocketServer(self)
        self.zk: Optional[ZkClient] = None
        self.kzk: Optional[KafkaZkClient] = None
        self.controller_epoch = -1
        self.port = config.port

    # ---------------------------------------------------------------- startup
    async def startup(self) -> None:
        rt, cfg = self.rt, self.config
        rt.fs.mkdir(cfg.log_dir)
        meta = self._read_meta_properties()
        self.zk = await rt.coordination.connect(cfg.zookeeper_session_timeout_ms)
        self.kzk = KafkaZkClient(rt, self.zk)
        await self.kzk.create_top_level_paths()
        proposed = meta.get("cluster.id") or Z.uuid_to_str(rt.rng("cluster-id").randbytes(16))
        cluster_id = await self.kzk.get_or_create_cluster_id(proposed)
        if meta.get("cluster.id") and meta["cluster.id"] != cluster_id:
            raise InconsistentClusterIdError(
                f"The Cluster ID {cluster_id} doesn't match stored clusterId {meta['cluster.id']} in meta.properties")
        if not meta:
            await self._write_meta_properties(cluster_id)
        self.metadata_cache.cluster_id = cluster_id
        self.port = await self.socket_server.start(cfg.host, cfg.port)
        await self.kzk.register_broker(cfg.broker_id, cfg.host, self.port, cfg.rack)
        await self.elect_controller()
        await self.refresh_metadata()
        # Requests are processed only now, as Kafka's startProcessingRequests at the end of
        # startup: a client that connects earlier waits rather than seeing no topics.
        self.socket_server.start_processing()
        rt.trace("broker_started", broker_id=cfg.broker_id, port=self.port, cluster_id=cluster_id,
                 controller_epoch=self.controller_epoch)

    async def elect_controller(self) -> None:
        """Become controller if /controller is free; otherwise watch it and try again when it
        goes (the previous controller's session ended). The cluster work grows this into
        KafkaController's election and failover."""
        assert self.kzk is not None and self.zk is not None
        epoch = await self.kzk.try_become_controller(self.config.broker_id)
        if epoch > 0:
            self.controller_epoch = epoch
            self.metadata_cache.controller_id = self.config.broker_id
            self.rt.trace("controller_elected", broker_id=self.config.broker_id, epoch=epoch)
            return
        try:
            data, _ = await self.zk.get(Z.CONTROLLER, watch=self._on_controller_change)
            self.metadata_cache.controller_id = Z.parse_controller(data)
        except NoNodeError:
            self.rt.spawn(self.elect_controller(), name="controller election")

    def _on_controller_change(self, event: WatchEvent) -> None:
        self.rt.spawn(self.elect_controller(), name="controller election")

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

    async def refresh_metadata(self) -> None:
        """Rebuild the metadata cache from ZooKeeper and lead the partitions assigned here."""
        assert self.kzk is not None
        cache = self.metadata_cache
        cache.brokers = {b.broker_id: b for b in await self.kzk.live_brokers()}
        for topic in await self.kzk.topics():
            await self._load_topic(topic)

    async def _load_topic(self, topic: str) -> None:
        assert self.kzk is not None
        assignment = await self.kzk.topic_assignment(topic)
        if assignment is None:
            return
        meta = TopicMeta(topic, Z.uuid_from_str(assignment.topic_id) if assignment.topic_id else bytes(16),
                         is_internal=topic in INTERNAL_TOPICS)
        for p, replicas in sorted(assignment.partitions.items()):
            state = await self.kzk.partition_state(topic, p)
            if state is None:
                continue
            meta.partitions[p] = PartitionMeta(state.leader, state.leader_epoch, replicas, state.isr)
            if state.leader == self.config.broker_id:
                await self.replica_manager.make_leader(topic, p, state.leader_epoch, meta.topic_id)
        self.metadata_cache.update_topic(meta)
        await self.apis.admin.on_topic_loaded(topic)  # topic configs -> logs; finishes a deletion

    # ---------------------------------------------------------------- topics
    async def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                           assignment: Optional[dict[int, list[int]]], configs: dict[str, str],
                           validate_only: bool = False) -> tuple[int, int]:
        """Validate and create a topic; returns (partitions, replication factor)."""
        assert self.kzk is not None
        validate_topic_name(name)
        if self.metadata_cache.topic(name) is not None:
            raise TopicError(E.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if assignment is None:
            n = self.config.num_partitions if num_partitions == -1 else num_partitions
            rf = self.config.default_replication_factor if replication_factor == -1 else replication_factor
            if n <= 0:
                raise TopicError(E.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
            if rf <= 0:
                raise TopicError(E.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
            assignment = self._assign_replicas(n, rf)
        elif num_partitions != -1 or replication_factor != -1:
            raise TopicError(E.INVALID_REQUEST,
                             "Both numPartitions or replicationFactor and replicasAssignment were set.")
        rf = len(next(iter(assignment.values())))
        if validate_only:
            return len(assignment), rf
        await self.kzk.create_topic(name, assignment, configs, max(self.controller_epoch, 1))
        self.rt.trace("topic_created", topic=name, partitions=len(assignment), replication_factor=rf)
        await self._load_topic(name)
        return len(assignment), rf

    def _assign_replicas(self, partitions: int, rf: int) -> dict[int, list[int]]:
        brokers = self.metadata_cache.alive_broker_ids() or [self.config.broker_id]
        if rf > len(brokers):
            raise TopicError(E.INVALID_REPLICATION_FACTOR,
                             f"Replication factor: {rf} larger than available brokers: {len(brokers)}.")
        # Round-robin from a fixed start; the cluster work replaces this with Kafka's
        # rack-aware AdminUtils.assignReplicasToBrokers.
        return {p: [brokers[(p + r) % len(brokers)] for r in range(rf)] for p in range(partitions)}

    # ---------------------------------------------------------------- shutdown
    async def shutdown(self) -> None:
        self.socket_server.stop()
        await self.replica_manager.shutdown()
        if self.zk is not None:
            await self.zk.close()
        self.rt.trace("broker_stopped", broker_id=self.config.broker_id)
