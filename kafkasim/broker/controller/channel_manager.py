"""ControllerChannelManager: the controller's connection to every live broker (itself included,
over the network as Kafka does), and ControllerBrokerRequestBatch, which collects the
LeaderAndIsr, UpdateMetadata and StopReplica requests a state change needs and sends them.

Per broker there is one queue and one RequestSendThread (a task here): it sends the head
request, waits for the response (request.timeout.ms: the NetworkClient's request timeout in
Kafka 3.9's ControllerChannelManager.addNewBroker), hands it to the callback and only then takes
the next, so a broker sees the controller's requests in the order they were made. A connect
gives up after socket.connection.setup.timeout.ms (the NetworkClient's connection setup timeout
fails RequestSendThread.brokerReady's awaitReady, whose own bound is controller.socket.timeout.ms,
whichever comes first). A failed send reconnects after 100 ms and sends the same request again,
until the broker is removed (it died: its queue is dropped).

Versions are what inter.broker.protocol.version 3.9 (IBP_3_4_IV0 and later) sends:
LeaderAndIsr v7, UpdateMetadata v8, StopReplica v4.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kafkasim.broker.controller.context import (
    EPOCH_DURING_DELETE,
    LEADER_DURING_DELETE,
    ControllerContext,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kafkasim.broker.security.inter_broker import inter_broker_address
from kafkasim.broker.zk import zk_data as Z
from kafkasim.client.network_client import NetworkClient
from kafkasim.protocol.messages.leader_and_isr import LeaderAndIsrRequest
from kafkasim.protocol.messages.stop_replica import StopReplicaRequest
from kafkasim.protocol.messages.update_metadata import UpdateMetadataRequest
from kafkasim.protocol.primitives import Message
from kafkasim.runtime.api import Future, NetworkError, NodeRuntime, RuntimeTimeout, Task

if TYPE_CHECKING:
    from kafkasim.broker.config import BrokerConfig
    from kafkasim.client.channel_security import ChannelSecurity
    pass

LEADER_AND_ISR_VERSION = 7
UPDATE_METADATA_VERSION = 8
STOP_REPLICA_VERSION = 4
RECONNECT_BACKOFF_MS = 100.0
SECURITY_PROTOCOL_PLAINTEXT = 0
LISTENER = "PLAINTEXT"

ResponseCallback = Callable[[Any, int], None]


@dataclass
class QueueItem:
    body: Message
    version: int
    callback: ResponseCallback | None


@dataclass(frozen=True)
class ChannelTimeouts:
    """How long a RequestSendThread waits. A connect across a network partition must give up
    after the connection setup timeout, not the 30 s socket timeout: a broker that re-registered
    during the partition would otherwise get its UpdateMetadata/LeaderAndIsr only 30 s later and
    go on meanwhile as a zombie leader of an epoch long gone (crash-swarm seed 613)."""

    connect_ms: float   # min(socket.connection.setup.timeout.ms, controller.socket.timeout.ms)
    request_ms: float   # request.timeout.ms

    @classmethod
    def of(cls, config: BrokerConfig) -> ChannelTimeouts:
        return cls(min(config.socket_connection_setup_timeout_ms, config.controller_socket_timeout_ms),
                   config.request_timeout_ms)


@dataclass
class ControllerBrokerState:
    broker: Z.BrokerInfo
    queue: deque[QueueItem] = field(default_factory=deque)
    wakeup: Future[Any] | None = None
    task: Task | None = None
    client: NetworkClient | None = None


class ControllerChannelManager:
    def __init__(self, rt: NodeRuntime, controller_id: int, timeouts: ChannelTimeouts,
                 security: ChannelSecurity | None = None) -> None:
        self.rt, self.controller_id, self.timeouts = rt, controller_id, timeouts
        self.security = security   # the inter-broker listener's TLS/SASL (security/inter_broker.py)
        self.brokers: dict[int, ControllerBrokerState] = {}

    def startup(self, live: dict[int, Z.BrokerInfo]) -> None:
        for bid, info in sorted(live.items()):
            self.add_broker(bid, info)

    def shutdown(self) -> None:
        for bid in sorted(self.brokers):
            self.remove_broker(bid)

    def add_broker(self, broker_id: int, info: Z.BrokerInfo) -> None:
        if broker_id in self.brokers:
            return
        state = self.brokers[broker_id] = ControllerBrokerState(info)
        state.task = self.rt.spawn(self._request_send_thread(broker_id, state),
                                   name=f"Controller-{self.controller_id}-to-broker-{broker_id}-send-thread")

    def remove_broker(self, broker_id: int) -> None:
        state = self.brokers.pop(broker_id, None)
        if state is None:
            return
        if state.task is not None:
            state.task.cancel()
        if state.client is not None:
            state.client.close()
        state.queue.clear()

    def send_request(self, broker_id: int, body: Message, version: int,
                     callback: ResponseCallback | None = None) -> None:
        state = self.brokers.get(broker_id)
        if state is None:
            return  # not (or no longer) a live broker: Kafka drops the request too
        state.queue.append(QueueItem(body, version, callback))
        if state.wakeup is not None and not state.wakeup.done():
            state.wakeup.set_result(None)

    async def _request_send_thread(self, broker_id: int, state: ControllerBrokerState) -> None:
        while True:
            if not state.queue:
                state.wakeup = self.rt.future()
                await state.wakeup
                continue
            item = state.queue[0]
            if self.rt.buggify("controller.send.slow"):  # RequestSendThread behind: requests reach the broker late
                await self.rt.sleep(100)
            response = await self._send_until_answered(broker_id, state, item)
            if state.queue and state.queue[0] is item:
                state.queue.popleft()
            if item.callback is not None:
                item.callback(response, broker_id)

    async def _send_until_answered(self, broker_id: int, state: ControllerBrokerState, item: QueueItem) -> Any:
        while True:
            try:
                if state.client is None or state.client.closed:
                    state.client = NetworkClient(self.rt, *inter_broker_address(state.broker, self.security),
                                                 f"controller-{self.controller_id}", security=self.security)
                    await state.client.connect(self.timeouts.connect_ms)
                return await state.client.send(item.body, item.version, self.timeouts.request_ms)
            except (NetworkError, RuntimeTimeout) as exc:
                self.rt.trace("controller_send_failed", broker=broker_id, api=type(item.body).__name__,
                              error=type(exc).__name__)
                if state.client is not None:
                    state.client.close()
                state.client = None
            await self.rt.sleep(RECONNECT_BACKOFF_MS)  # (not in the except block: kafka_zk_client._get_or_none)


class ControllerBrokerRequestBatch:
    """Collects the requests of one state change (Kafka's AbstractControllerBrokerRequestBatch)."""

    def __init__(self, controller_id: int, ctx: ControllerContext, channel: Callable[[], ControllerChannelManager],
                 on_leader_and_isr_response: ResponseCallback,
                 on_stop_replica_delete_response: ResponseCallback) -> None:
        self.controller_id, self.ctx, self._channel = controller_id, ctx, channel
        self.on_leader_and_isr_response = on_leader_and_isr_response
        self.on_stop_replica_delete_response = on_stop_replica_delete_response
        self.leader_and_isr: dict[int, dict[TopicPartition, Any]] = {}
        self.stop_replica: dict[int, dict[TopicPartition, tuple[bool, int]]] = {}
        self.update_metadata_brokers: set[int] = set()
        self.update_metadata_partitions: set[TopicPartition] = set()

    def new_batch(self) -> None:
        if self.leader_and_isr or self.stop_replica or self.update_metadata_brokers:
            raise RuntimeError("controller to broker state change requests batch is not empty while creating a new one")

    def clear(self) -> None:
        self.leader_and_isr, self.stop_replica = {}, {}
        self.update_metadata_brokers, self.update_metadata_partitions = set(), set()

    # ---------------------------------------------------------------- collecting
    def add_leader_and_isr_request_for_brokers(self, broker_ids: list[int] | tuple[int, ...], tp: TopicPartition,
                                               info: LeaderIsrAndControllerEpoch, assignment: ReplicaAssignment,
                                               is_new: bool) -> None:
        lai = info.leader_and_isr
        for bid in sorted(set(broker_ids)):
            if bid < 0:
                continue
            per = self.leader_and_isr.setdefault(bid, {})
            prev = per.get(tp)
            per[tp] = LeaderAndIsrRequest.LeaderAndIsrPartitionState(
                topic_name=tp[0], partition_index=tp[1], controller_epoch=info.controller_epoch, leader=lai.leader,
                leader_epoch=lai.leader_epoch, isr=list(lai.isr), partition_epoch=lai.partition_epoch,
                replicas=list(assignment.replicas), adding_replicas=list(assignment.adding_replicas),
                removing_replicas=list(assignment.removing_replicas),
                is_new=is_new or (prev is not None and prev.is_new), leader_recovery_state=lai.leader_recovery_state)
        self.add_update_metadata_request_for_brokers(self.ctx.live_or_shutting_down_broker_ids, [tp])

    def add_stop_replica_request_for_brokers(self, broker_ids: list[int] | tuple[int, ...], tp: TopicPartition,
                                             delete_partition: bool) -> None:
        lai = self.ctx.leader_and_isr(tp)
        # A deleted partition's StopReplica carries EpochDuringDelete so that it wins over any
        # epoch the broker knows; otherwise the current leader epoch fences older requests.
        if self.ctx.is_topic_queued_for_deletion(tp[0]):
            epoch = EPOCH_DURING_DELETE
        else:
            epoch = lai.leader_epoch if lai is not None else -1
        for bid in sorted(set(broker_ids)):
            per = self.stop_replica.setdefault(bid, {})
            prev = per.get(tp)
            per[tp] = (delete_partition or (prev is not None and prev[0]), epoch)

    def add_update_metadata_request_for_brokers(self, broker_ids: list[int], tps: list[TopicPartition]) -> None:
        self.update_metadata_brokers.update(b for b in broker_ids if b >= 0)
        self.update_metadata_partitions.update(tps)

    # ---------------------------------------------------------------- sending
    def send_requests_to_brokers(self, controller_epoch: int) -> None:
        try:
            self._send_leader_and_isr(controller_epoch)
            self._send_update_metadata(controller_epoch)
            self._send_stop_replica(controller_epoch)
        finally:
            self.clear()

    def _broker_epoch(self, bid: int) -> int:
        return self.ctx.live_broker_epochs.get(bid, -1)

    def _send_leader_and_isr(self, controller_epoch: int) -> None:
        channel = self._channel()
        for bid, states in sorted(self.leader_and_isr.items()):
            if bid not in self.ctx.live_brokers:
                continue
            by_topic: dict[str, list[Any]] = {}
            for tp, st in sorted(states.items()):
                by_topic.setdefault(tp[0], []).append(st)
            leaders = sorted({st.leader for st in states.values()})
            # Each leader's inter-broker listener, where the followers fetch (Kafka's
            # broker.node(interBrokerListenerName)).
            addresses = {b: inter_broker_address(self.ctx.live_brokers[b], channel.security)
                         for b in leaders if b in self.ctx.live_brokers}
            live_leaders = [LeaderAndIsrRequest.LeaderAndIsrLiveLeader(broker_id=b, host_name=host, port=port)
                            for b, (host, port) in addresses.items()]
            topic_states = [LeaderAndIsrRequest.LeaderAndIsrTopicState(
                topic_name=t,
                topic_id=Z.uuid_from_str(self.ctx.topic_ids[t]) if self.ctx.topic_ids.get(t) else bytes(16),
                partition_states=sts) for t, sts in by_topic.items()]
            req = LeaderAndIsrRequest(controller_id=self.controller_id, is_k_raft_controller=False,
                                      controller_epoch=controller_epoch, broker_epoch=self._broker_epoch(bid), type=0,
                                      topic_states=topic_states, live_leaders=live_leaders)
            channel.send_request(bid, req, LEADER_AND_ISR_VERSION, self.on_leader_and_isr_response)

    def _partition_metadata(self, tp: TopicPartition) -> Any | None:
        info = self.ctx.leadership.get(tp)
        if info is None:
            return None
        lai = info.leader_and_isr
        replicas = self.ctx.replica_assignment(tp)
        leader = LEADER_DURING_DELETE if self.ctx.is_topic_queued_for_deletion(tp[0]) else lai.leader
        offline = [r for r in replicas if not self.ctx.is_replica_online(r, tp, include_shutting_down=True)]
        return UpdateMetadataRequest.UpdateMetadataPartitionState(
            topic_name=tp[0], partition_index=tp[1], controller_epoch=info.controller_epoch, leader=leader,
            leader_epoch=lai.leader_epoch, isr=list(lai.isr), zk_version=lai.partition_epoch, replicas=list(replicas),
            offline_replicas=offline)

    def _send_update_metadata(self, controller_epoch: int) -> None:
        if not self.update_metadata_brokers:
            return
        channel = self._channel()
        by_topic: dict[str, list[Any]] = {}
        for tp in sorted(self.update_metadata_partitions):
            st = self._partition_metadata(tp)
            if st is not None:
                by_topic.setdefault(tp[0], []).append(st)
        topic_states = [UpdateMetadataRequest.UpdateMetadataTopicState(
            topic_name=t, topic_id=Z.uuid_from_str(self.ctx.topic_ids[t]) if self.ctx.topic_ids.get(t) else bytes(16),
            partition_states=sts) for t, sts in by_topic.items()]
        B = UpdateMetadataRequest.UpdateMetadataBroker
        live = [B(id=b.broker_id, endpoints=_endpoints(b), rack=b.rack)
                for _, b in sorted(self.ctx.live_brokers.items())]
        for bid in sorted(self.update_metadata_brokers):
            if bid not in self.ctx.live_brokers:
                continue
            req = UpdateMetadataRequest(controller_id=self.controller_id, is_k_raft_controller=False, type=0,
                                        controller_epoch=controller_epoch, broker_epoch=self._broker_epoch(bid),
                                        topic_states=topic_states, live_brokers=live)
            channel.send_request(bid, req, UPDATE_METADATA_VERSION)

    def _send_stop_replica(self, controller_epoch: int) -> None:
        channel = self._channel()
        S = StopReplicaRequest.StopReplicaTopicState
        for bid, states in sorted(self.stop_replica.items()):
            if bid not in self.ctx.live_brokers:
                continue
            by_topic: dict[str, list[Any]] = {}
            for (t, p), (delete, epoch) in sorted(states.items()):
                by_topic.setdefault(t, []).append(S.StopReplicaPartitionState(partition_index=p, leader_epoch=epoch,
                                                                             delete_partition=delete))
            req = StopReplicaRequest(controller_id=self.controller_id, is_k_raft_controller=False,
                                     controller_epoch=controller_epoch, broker_epoch=self._broker_epoch(bid),
                                     topic_states=[S(topic_name=t, partition_states=ps) for t, ps in by_topic.items()])
            deleting = any(delete for delete, _ in states.values())
            channel.send_request(bid, req, STOP_REPLICA_VERSION,
                                 self.on_stop_replica_delete_response if deleting else None)


def _endpoints(b: Z.BrokerInfo) -> list[Any]:
    """Every listener the broker registered (its host/port as PLAINTEXT when it registered none)."""
    E = UpdateMetadataRequest.UpdateMetadataBroker.UpdateMetadataEndpoint
    if not b.endpoints:
        return [E(port=b.port, host=b.host, listener=LISTENER, security_protocol=SECURITY_PROTOCOL_PLAINTEXT)]
    return [E(port=port, host=host, listener=name, security_protocol=Z.SECURITY_PROTOCOL_IDS.get(proto, 0))
            for name, proto, host, port in b.endpoints]
