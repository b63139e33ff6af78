"""AlterPartitionManager: a leader's ISR changes, sent to the controller (Kafka's
DefaultAlterPartitionManager, what a 3.9 broker in ZooKeeper mode uses with
inter.broker.protocol.version 3.9; brokers with IBP < 2.7 wrote the state znode themselves and
announced it under /isr_change_notification instead).

Proposals are batched: at most one AlterPartition (v3) is in flight; what is submitted
meanwhile goes in the next one. The controller is the one the metadata cache names (from
UpdateMetadata). A request-level failure (no controller known, NOT_CONTROLLER,
STALE_BROKER_EPOCH, a lost connection) is retried after a backoff; per-partition answers go to
the partitions (Partition.on_alter_partition_response).

With inter.broker.protocol.version < 2.7 the broker does what such brokers did instead
(Kafka's ZkAlterPartitionManager): it writes the partition's state znode itself — a conditional
set on the zkVersion it knows (the partition epoch) — and announces the changed partitions with a
sequential /isr_change_notification/isr_change_<n> znode, which the controller reads, deletes and
turns into UpdateMetadata for every broker.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kafkasim.broker.security.inter_broker import inter_broker_address
from kafkasim.broker.zk import zk_data as Z
from kafkasim.client.network_client import NetworkClient
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.alter_partition import AlterPartitionRequest
from kafkasim.runtime.api import (
    BadVersionError,
    CoordinationError,
    Future,
    NetworkError,
    NodeRuntime,
    RuntimeTimeout,
    Task,
    ZkClient,
)

if TYPE_CHECKING:
    from kafkasim.broker.metadata_cache import MetadataCache
    from kafkasim.broker.partition import Partition
    from kafkasim.client.channel_security import ChannelSecurity

ALTER_PARTITION_VERSION = 3
RETRY_BACKOFF_MS = 100.0

TopicPartition = tuple[str, int]


class AlterPartitionManager:
    def __init__(self, rt: NodeRuntime, broker_id: int, broker_epoch: Callable[[], int],
                 metadata_cache: MetadataCache, request_timeout_ms: int, *, topic_ids: dict[str, bytes],
                 controller_epoch: Callable[[], int], isr_zk: ZkClient | None = None,
                 security: ChannelSecurity | None = None) -> None:
        """`broker_epoch` and `controller_epoch` are read at each send (both change over time);
        `topic_ids` is the ReplicaManager's map, filled by LeaderAndIsr. `isr_zk` set: IBP < 2.7,
        ISR changes are written to ZooKeeper with this client instead of sent to the controller."""
        self.rt = rt
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.metadata_cache = metadata_cache
        self.request_timeout_ms = request_timeout_ms
        self.topic_ids = topic_ids
        self.controller_epoch = controller_epoch
        self.isr_zk = isr_zk
        self.security = security   # the inter-broker listener's TLS/SASL (security/inter_broker.py)
        self.unsent: dict[TopicPartition, tuple[Partition, list[int], int]] = {}
        self._wakeup: Future[Any] | None = None
        self._task: Task | None = None
        self._client: NetworkClient | None = None
        self._client_for: tuple[int, str, int] | None = None

    def start(self) -> None:
        self._task = self.rt.spawn(self._run(), name="alter-partition-manager")

    def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
        if self._client is not None:
            self._client.close()

    def submit(self, partition: Partition, isr: list[int], leader_recovery_state: int) -> None:
        self.unsent[(partition.topic, partition.index)] = (partition, list(isr), leader_recovery_state)
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    async def _run(self) -> None:
        while True:
            if not self.unsent:
                self._wakeup = self.rt.future()
                await self._wakeup
                continue
            if self.rt.buggify("alter_partition.slow"):  # the ISR change reaches the controller late
                await self.rt.sleep(RETRY_BACKOFF_MS)
            batch, self.unsent = self.unsent, {}
            ok = await self._send(batch)
            if not ok:
                for tp, item in batch.items():
                    self.unsent.setdefault(tp, item)  # newer proposals win
                await self.rt.sleep(RETRY_BACKOFF_MS)

    def _controller(self) -> Z.BrokerInfo | None:
        cache = self.metadata_cache
        if cache.controller_id < 0:
            return None
        return cache.brokers.get(cache.controller_id)

    async def _connection(self, controller: Z.BrokerInfo) -> NetworkClient:
        key = (controller.broker_id, controller.host, controller.port)
        if self._client is None or self._client.closed or self._client_for != key:
            if self._client is not None:
                self._client.close()
            self._client = NetworkClient(self.rt, *inter_broker_address(controller, self.security),
                                         f"broker-{self.broker_id}-alter-partition", security=self.security)
            self._client_for = key
            await self._client.connect(self.request_timeout_ms)
        return self._client

    async def _send(self, batch: dict[TopicPartition, tuple[Partition, list[int], int]]) -> bool:
        """Returns False to retry the whole batch."""
        live = {tp: item for tp, item in batch.items() if item[0].is_leader and item[0].pending is not None}
        if not live:
            return True
        if self.isr_zk is not None:
            return await self._write_zookeeper(live, self.isr_zk)
        controller = self._controller()
        if controller is None:
            return False
        T = AlterPartitionRequest.TopicData
        P = T.PartitionData
        by_topic: dict[str, list[Any]] = {}
        for (topic, index), (p, isr, recovery) in sorted(live.items()):
            by_topic.setdefault(topic, []).append(P(
                partition_index=index, leader_epoch=p.leader_epoch, leader_recovery_state=recovery,
                partition_epoch=p.partition_epoch,
                new_isr_with_epochs=[P.BrokerState(broker_id=b, broker_epoch=-1) for b in isr]))
        ids = {t: (self.topic_ids.get(t) or bytes(16)) for t in by_topic}
        req = AlterPartitionRequest(
            broker_id=self.broker_id, broker_epoch=self.broker_epoch(),
            topics=[T(topic_name=t, topic_id=ids[t], partitions=ps) for t, ps in by_topic.items()])
        try:
            conn = await self._connection(controller)
            resp = await conn.send(req, ALTER_PARTITION_VERSION, self.request_timeout_ms)
        except (NetworkError, RuntimeTimeout):
            if self._client is not None:
                self._client.close()
            return False
        if resp.error_code != E.NONE:
            self.rt.trace("alter_partition_failed", error=resp.error_code, controller=controller.broker_id)
            return False
        names = {tid: t for t, tid in ids.items()}
        unanswered = dict(live)
        for answered in resp.topics:
            name = names.get(answered.topic_id, answered.topic_name)
            for r in answered.partitions:
                item = unanswered.pop((name, r.partition_index), None)
                if item is None:
                    continue
                p = item[0]
                self.rt.trace("alter_partition_response", topic=name, partition=r.partition_index, error=r.error_code,
                              isr=list(r.isr), leader_epoch=r.leader_epoch, partition_epoch=r.partition_epoch)
                p.on_alter_partition_response(r.error_code, r.leader_epoch, list(r.isr), r.partition_epoch,
                                              r.leader_recovery_state)
        # A partition sent but not in the answer (e.g. under a topic id the controller no longer
        # knew: zeros) is sent again, as Kafka's DefaultAlterPartitionManager keeps it in
        # unsentIsrUpdates; dropping it would leave its Partition pending for good.
        for tp, item in unanswered.items():
            self.rt.trace("alter_partition_unanswered", topic=tp[0], partition=tp[1], controller=controller.broker_id)
            self.unsent.setdefault(tp, item)  # a newer proposal submitted meanwhile wins
        return True

    async def _write_zookeeper(self, live: dict[TopicPartition, tuple[Partition, list[int], int]],
                               zk: ZkClient) -> bool:
        """IBP < 2.7: conditional updates of the state znodes, then one isr_change notification."""
        changed: list[TopicPartition] = []
        for (topic, index), (p, isr, recovery) in sorted(live.items()):
            data = Z.partition_state_json_full(self.broker_id, p.leader_epoch, isr, self.controller_epoch(),
                                               recovery)
            try:
                st = await zk.set(Z.partition_state_path(topic, index), data, p.partition_epoch)
            except BadVersionError:
                p.on_alter_partition_response(E.INVALID_UPDATE_VERSION, p.leader_epoch, [], -1, recovery)
                continue
            except CoordinationError:
                return False
            self.rt.trace("isr_updated_in_zookeeper", topic=topic, partition=index, isr=isr,
                          partition_epoch=st.version)
            p.on_alter_partition_response(E.NONE, p.leader_epoch, isr, st.version, recovery)
            changed.append((topic, index))
        if changed:
            try:
                await zk.create(f"{Z.ISR_CHANGE_NOTIFICATION}/{Z.ISR_CHANGE_PREFIX}", Z.partitions_json(changed),
                                sequential=True, makepath=True)
            except CoordinationError:
                pass  # the znodes are written; the controller learns at its next read of them
        return True
