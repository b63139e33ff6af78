"""The ZooKeeper-mode control-plane APIs on the broker, with the version ranges a Kafka 3.9.1
ZooKeeper-mode broker advertises (checked with `realkafka`'s ApiVersions):

  LeaderAndIsr 0-7, StopReplica 0-4, UpdateMetadata 0-8   controller -> every broker
  ControlledShutdown 0-3, AlterPartition 0-3,
  AllocateProducerIds 0                                    broker -> controller
  Envelope 0                                               forwarding (KIP-590)
  ElectLeaders 0-2, AlterPartitionReassignments 0,
  ListPartitionReassignments 0                             admin clients -> controller

Controller requests carry the controller epoch (and the receiver's broker epoch, KIP-380): a
broker answers STALE_CONTROLLER_EPOCH to a controller older than one it has heard from, and
STALE_BROKER_EPOCH to a request meant for an earlier incarnation of itself. Requests the
controller answers go through its event queue (KafkaController); a broker that is not the
controller answers NOT_CONTROLLER.

AllocateProducerIds: the controller claims the next block of 1000 producer ids in ZooKeeper for
a registered broker of the current epoch (BROKER_ID_NOT_REGISTERED / STALE_BROKER_EPOCH
otherwise) — KafkaController.processAllocateProducerIds; the claim is a compare-and-set on the
block znode, so it needs no event-queue ordering. Envelope: a ZooKeeper-mode broker without
migration has no forwarding, and Kafka closes the connection of whoever sends one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from kafkasim.broker.api_registry import CloseConnection
from kafkasim.broker.controller.context import LeaderAndIsr
from kafkasim.broker.controller.event_manager import ControllerMovedError
from kafkasim.broker.group.metadata import TopicPartition
from kafkasim.broker.partition import PartitionState
from kafkasim.broker.producer_id_manager import ProducerIdsExhaustedError, claim_producer_id_block
from kafkasim.broker.replica_manager import LeaderAndIsrPartition
from kafkasim.broker.zk import zk_data as Z
from kafkasim.broker.zk.kafka_zk_client import ControllerMovedException
from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.allocate_producer_ids import AllocateProducerIdsRequest, AllocateProducerIdsResponse
from kafkasim.protocol.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse
from kafkasim.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from kafkasim.protocol.messages.controlled_shutdown import ControlledShutdownRequest, ControlledShutdownResponse
from kafkasim.protocol.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse
from kafkasim.protocol.messages.envelope import EnvelopeRequest
from kafkasim.protocol.messages.headers import RequestHeader
from kafkasim.protocol.messages.leader_and_isr import LeaderAndIsrRequest, LeaderAndIsrResponse
from kafkasim.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from kafkasim.protocol.messages.stop_replica import StopReplicaRequest, StopReplicaResponse
from kafkasim.protocol.messages.update_metadata import UpdateMetadataRequest, UpdateMetadataResponse
from kafkasim.protocol.primitives import Message
from kafkasim.runtime.api import CoordinationError

if TYPE_CHECKING:
    from kafkasim.broker.api_registry import ApiRegistry
    from kafkasim.broker.controller.kafka_controller import KafkaController
    from kafkasim.broker.group.coordinator import GroupCoordinator
    from kafkasim.broker.metadata_cache import MetadataCache
    from kafkasim.broker.replica_manager import ReplicaManager
    from kafkasim.broker.topic_admin import TopicAdmin
    from kafkasim.runtime.api import NodeRuntime

T = TypeVar("T")

VERSIONS: dict[int, tuple[int, int]] = {
    A.LEADER_AND_ISR: (0, 7),
    A.STOP_REPLICA: (0, 4),
    A.UPDATE_METADATA: (0, 8),
    A.CONTROLLED_SHUTDOWN: (0, 3),
    A.ALTER_PARTITION: (0, 3),
    A.ALLOCATE_PRODUCER_IDS: (0, 0),
    A.ENVELOPE: (0, 0),
    A.ELECT_LEADERS: (0, 2),
    A.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    A.LIST_PARTITION_REASSIGNMENTS: (0, 0),
}
ZERO_UUID = bytes(16)
ELECTION_PREFERRED, ELECTION_UNCLEAN = 0, 1


class ControllerApis:
    def __init__(self, rt: NodeRuntime, replica_manager: ReplicaManager, metadata_cache: MetadataCache,
                 controller: KafkaController, group_coordinator: GroupCoordinator, topic_admin: TopicAdmin,
                 broker_epoch: Callable[[], int]) -> None:
        """`broker_epoch` is read per request: it changes when the broker re-registers."""
        self.rt = rt
        self.rm = replica_manager
        self.metadata_cache = metadata_cache
        self.controller = controller
        self.group_coordinator = group_coordinator
        self.topic_admin = topic_admin
        self.broker_epoch = broker_epoch

    def _broker_epoch_stale(self, epoch_in_request: int) -> bool:
        return epoch_in_request != -1 and epoch_in_request < self.broker_epoch()

    # ---------------------------------------------------------------- LeaderAndIsr
    async def leader_and_isr(self, header: RequestHeader, req: LeaderAndIsrRequest) -> Message:
        version = header.request_api_version
        states = _leader_and_isr_states(req, version)
        if self._broker_epoch_stale(req.broker_epoch if version >= 2 else -1):
            return _leader_and_isr_response(version, E.STALE_BROKER_EPOCH, {}, states)
        live = {b.broker_id: Z.BrokerInfo(b.broker_id, b.host_name, b.port, None) for b in req.live_leaders}
        if self.rt.buggify("leader_and_isr.slow"):  # a busy request handler: the controller waits for our answer
            await self.rt.sleep(200)
        error, errors = await self.rm.become_leader_or_follower(req.controller_epoch, states, live)
        self.rt.trace("leader_and_isr", controller=req.controller_id, controller_epoch=req.controller_epoch,
                             error=error, partitions=len(states),
                             errors={f"{t}-{p}": e for (t, p), e in sorted(errors.items()) if e})
        return _leader_and_isr_response(version, error, errors, states)

    # ---------------------------------------------------------------- UpdateMetadata
    async def update_metadata(self, header: RequestHeader, req: UpdateMetadataRequest) -> Message:
        version = header.request_api_version
        if self._broker_epoch_stale(req.broker_epoch if version >= 5 else -1):
            return UpdateMetadataResponse(error_code=E.STALE_BROKER_EPOCH)
        rm = self.rm
        if req.controller_epoch < rm.controller_epoch:
            return UpdateMetadataResponse(error_code=E.STALE_CONTROLLER_EPOCH)
        rm.controller_epoch = req.controller_epoch
        brokers = [_broker_info(b, version) for b in req.live_brokers]
        partitions = _update_metadata_partitions(req, version)
        deleted = self.metadata_cache.update_metadata(req.controller_id, brokers, partitions)
        if deleted:
            await self._on_partitions_deleted(deleted)
        self.topic_admin.on_metadata_updated()
        return UpdateMetadataResponse(error_code=E.NONE)

    async def _on_partitions_deleted(self, deleted: list[tuple[str, int]]) -> None:
        """A topic left the metadata cache (deletion): its groups' offsets go (Kafka's
        handleUpdateMetadataRequest -> GroupCoordinator.onPartitionsDeleted)."""
        if self.group_coordinator.is_active:
            await self.group_coordinator.on_partitions_deleted([TopicPartition(t, p) for t, p in deleted])

    # ---------------------------------------------------------------- StopReplica
    async def stop_replica(self, header: RequestHeader, req: StopReplicaRequest) -> Message:
        version = header.request_api_version
        parts = _stop_replica_partitions(req, version)
        P = StopReplicaResponse.StopReplicaPartitionError
        if self._broker_epoch_stale(req.broker_epoch if version >= 1 else -1):
            return StopReplicaResponse(error_code=E.STALE_BROKER_EPOCH, partition_errors=[])
        error, errors = await self.rm.stop_replicas(req.controller_epoch, parts)
        return StopReplicaResponse(error_code=error, partition_errors=[
            P(topic_name=t, partition_index=p, error_code=e) for (t, p), e in sorted(errors.items())])

    # ---------------------------------------------------------------- ControlledShutdown
    async def controlled_shutdown(self, header: RequestHeader, req: ControlledShutdownRequest) -> Message:
        controller = self.controller
        error: int = E.NOT_CONTROLLER
        remaining: list[tuple[str, int]] = []
        answer = await _ask(controller.controlled_shutdown(
            req.broker_id, req.broker_epoch if header.request_api_version >= 2 else -1))
        if answer is not None:
            error, remaining = answer
        if error == E.NOT_CONTROLLER:
            error = E.STALE_CONTROLLER_EPOCH  # Kafka: Errors.forException(ControllerMovedException)
        R = ControlledShutdownResponse.RemainingPartition
        return ControlledShutdownResponse(error_code=error, remaining_partitions=[
            R(topic_name=t, partition_index=p) for t, p in remaining])

    # ---------------------------------------------------------------- AlterPartition
    async def alter_partition(self, header: RequestHeader, req: AlterPartitionRequest) -> Message:
        version = header.request_api_version
        controller = self.controller
        if not controller.is_active:
            return AlterPartitionResponse(throttle_time_ms=0, error_code=E.NOT_CONTROLLER, topics=[])
        names = {Z.uuid_from_str(tid): t for t, tid in controller.ctx.topic_ids.items() if tid}
        items: list[tuple[tuple[str, int], LeaderAndIsr]] = []
        unknown: list[tuple[bytes, int]] = []
        for t in req.topics:
            name = t.topic_name if version < 2 else names.get(t.topic_id)
            for p in t.partitions:
                if name is None:
                    unknown.append((t.topic_id, p.partition_index))
                    continue
                isr = [b.broker_id for b in p.new_isr_with_epochs] if version >= 3 else list(p.new_isr)
                items.append(((name, p.partition_index), LeaderAndIsr(
                    req.broker_id, p.leader_epoch, tuple(isr), p.leader_recovery_state if version >= 1 else 0,
                    p.partition_epoch)))
        answer = await _ask(controller.alter_partitions(req.broker_id, req.broker_epoch, items))
        if answer is None:
            return AlterPartitionResponse(throttle_time_ms=0, error_code=E.NOT_CONTROLLER, topics=[])
        error, results = answer
        T = AlterPartitionResponse.TopicData
        P = T.PartitionData
        by_topic: dict[str, list[Any]] = {}
        for (topic, index), code, lai in results:
            if lai is None:
                by_topic.setdefault(topic, []).append(P(partition_index=index, error_code=code))
            else:
                by_topic.setdefault(topic, []).append(P(
                    partition_index=index, error_code=code, leader_id=lai.leader, leader_epoch=lai.leader_epoch,
                    isr=list(lai.isr), leader_recovery_state=lai.leader_recovery_state,
                    partition_epoch=lai.partition_epoch))
        topics = [T(topic_name=t, topic_id=Z.uuid_from_str(controller.ctx.topic_ids.get(t, "")) if
                    controller.ctx.topic_ids.get(t) else ZERO_UUID, partitions=ps) for t, ps in by_topic.items()]
        for tid, index in unknown:
            topics.append(T(topic_id=tid, partitions=[P(partition_index=index, error_code=E.UNKNOWN_TOPIC_ID)]))
        return AlterPartitionResponse(throttle_time_ms=0, error_code=error, topics=topics if error == E.NONE else [])

    # ---------------------------------------------------------------- AllocateProducerIds / Envelope
    async def allocate_producer_ids(self, header: RequestHeader, req: AllocateProducerIdsRequest) -> Message:
        controller = self.controller

        def answer(code: int, start: int = 0, length: int = 0) -> Message:
            return AllocateProducerIdsResponse(throttle_time_ms=0, error_code=code, producer_id_start=start,
                                               producer_id_len=length)
        if not controller.is_active:
            return answer(E.NOT_CONTROLLER)
        epoch = controller.ctx.live_broker_epochs.get(req.broker_id)
        if epoch is None:
            return answer(E.BROKER_ID_NOT_REGISTERED)
        if epoch != req.broker_epoch:
            return answer(E.STALE_BROKER_EPOCH)
        try:
            block = await claim_producer_id_block(controller.zk_client, req.broker_id)
        except ProducerIdsExhaustedError:
            return answer(E.UNKNOWN_SERVER_ERROR)
        except CoordinationError:
            return answer(E.UNKNOWN_SERVER_ERROR)
        return answer(E.NONE, block.first_producer_id, block.size)

    async def envelope(self, header: RequestHeader, req: EnvelopeRequest) -> Message:
        self.rt.trace("connection_closed", reason="Envelope without forwarding (ZooKeeper mode)")
        raise CloseConnection("Envelope request on a broker without forwarding")

    # ---------------------------------------------------------------- ElectLeaders
    async def elect_leaders(self, header: RequestHeader, req: ElectLeadersRequest) -> Message:
        version = header.request_api_version
        preferred = version == 0 or req.election_type == ELECTION_PREFERRED
        cache = self.metadata_cache
        if req.topic_partitions is None:
            tps = [(t, p) for t in sorted(cache.topics) for p in sorted(cache.topics[t].partitions)]
        else:
            tps = [(tp.topic, p) for tp in req.topic_partitions for p in tp.partitions]
        controller = self.controller
        R = ElectLeadersResponse.ReplicaElectionResult
        results: dict[tuple[str, int], tuple[int, str | None]]
        if not controller.is_active:
            results = {tp: (E.NOT_CONTROLLER, None) for tp in tps}
        else:
            raw = await _ask(controller.elect_leaders(tps, preferred))
            if raw is None:  # Kafka's preemptReplicaLeaderElection: NOT_CONTROLLER for each
                raw = {tp: (E.NOT_CONTROLLER, "") for tp in tps}
            results = {tp: (code, msg or _election_message(code)) for tp, (code, msg) in raw.items()}
            if req.topic_partitions is None:  # all partitions: those that needed nothing are not listed
                results = {tp: r for tp, r in results.items() if r[0] != E.ELECTION_NOT_NEEDED}
        by_topic: dict[str, list[Any]] = {}
        for (t, p), (code, msg) in sorted(results.items()):
            by_topic.setdefault(t, []).append(R.PartitionResult(partition_id=p, error_code=code, error_message=msg))
        kw: dict[str, Any] = {"error_code": E.NONE} if version >= 1 else {}
        return ElectLeadersResponse(throttle_time_ms=0, replica_election_results=[
            R(topic=t, partition_result=ps) for t, ps in by_topic.items()], **kw)

    # ---------------------------------------------------------------- reassignments
    async def alter_partition_reassignments(self, header: RequestHeader,
                                            req: AlterPartitionReassignmentsRequest) -> Message:
        controller = self.controller
        R = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
        wanted = {(t.name, p.partition_index): (None if p.replicas is None else tuple(p.replicas))
                  for t in req.topics for p in t.partitions}
        if not controller.is_active:
            return AlterPartitionReassignmentsResponse(throttle_time_ms=0, error_code=E.NOT_CONTROLLER,
                                                       error_message=None, responses=[])
        results = await _ask(controller.alter_partition_reassignments(wanted))
        if results is None:
            return AlterPartitionReassignmentsResponse(throttle_time_ms=0, error_code=E.NOT_CONTROLLER,
                                                       error_message=None, responses=[])
        by_topic: dict[str, list[Any]] = {}
        for (t, p), code in sorted(results.items()):
            by_topic.setdefault(t, []).append(R.ReassignablePartitionResponse(
                partition_index=p, error_code=code, error_message=None if code == E.NONE else E.ERRORS[code].message))
        return AlterPartitionReassignmentsResponse(throttle_time_ms=0, error_code=E.NONE, error_message="",
                                                   responses=[R(name=t, partitions=ps) for t, ps in by_topic.items()])

    async def list_partition_reassignments(self, header: RequestHeader,
                                           req: ListPartitionReassignmentsRequest) -> Message:
        controller = self.controller
        if not controller.is_active:
            return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=E.NOT_CONTROLLER,
                                                      error_message=None, topics=[])
        ongoing = await _ask(controller.list_partition_reassignments())
        if ongoing is None:
            return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=E.NOT_CONTROLLER,
                                                      error_message=None, topics=[])
        if req.topics is not None:
            wanted = {(t.name, p) for t in req.topics for p in t.partition_indexes}
            ongoing = {tp: a for tp, a in ongoing.items() if tp in wanted}
        T = ListPartitionReassignmentsResponse.OngoingTopicReassignment
        by_topic: dict[str, list[Any]] = {}
        for (t, p), a in sorted(ongoing.items()):
            by_topic.setdefault(t, []).append(T.OngoingPartitionReassignment(
                partition_index=p, replicas=list(a.replicas), adding_replicas=list(a.adding_replicas),
                removing_replicas=list(a.removing_replicas)))
        return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=E.NONE, error_message="",
                                                  topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()])


def _election_message(code: int) -> str | None:
    """An ElectLeaders partition result's message: none on success, else ApiError's text (Kafka's
    own for ELECTION_NOT_NEEDED)."""
    if code == E.NONE:
        return None
    if code == E.ELECTION_NOT_NEEDED:
        return "Leader election not needed for topic partition."
    return E.ERRORS[code].message


# ==================================================================== request shapes by version
def _leader_and_isr_states(req: LeaderAndIsrRequest, version: int) -> list[LeaderAndIsrPartition]:
    out: list[LeaderAndIsrPartition] = []
    if version < 2:
        pairs = [(s.topic_name, ZERO_UUID, s) for s in req.ungrouped_partition_states]
    else:
        pairs = [(t.topic_name, t.topic_id if version >= 5 else ZERO_UUID, s)
                 for t in req.topic_states for s in t.partition_states]
    for topic, topic_id, s in pairs:
        out.append(LeaderAndIsrPartition((topic, s.partition_index), topic_id, PartitionState(
            leader=s.leader, leader_epoch=s.leader_epoch, isr=list(s.isr), replicas=list(s.replicas),
            partition_epoch=s.partition_epoch, adding_replicas=list(s.adding_replicas),
            removing_replicas=list(s.removing_replicas), leader_recovery_state=s.leader_recovery_state,
            is_new=s.is_new)))
    return out


def _leader_and_isr_response(version: int, error: int, errors: dict[tuple[str, int], int],
                             states: list[LeaderAndIsrPartition]) -> LeaderAndIsrResponse:
    codes = {st.tp: (error if error != E.NONE else errors.get(st.tp, E.NONE)) for st in states}
    if version < 5:
        PE = LeaderAndIsrResponse.LeaderAndIsrPartitionError
        return LeaderAndIsrResponse(error_code=error, partition_errors=[
            PE(topic_name=t, partition_index=p, error_code=c) for (t, p), c in sorted(codes.items())])
    TE = LeaderAndIsrResponse.LeaderAndIsrTopicError
    ids = {st.tp[0]: st.topic_id for st in states}
    by_topic: dict[str, list[Any]] = {}
    for (t, p), c in sorted(codes.items()):
        by_topic.setdefault(t, []).append(LeaderAndIsrResponse.LeaderAndIsrPartitionError(partition_index=p,
                                                                                          error_code=c))
    return LeaderAndIsrResponse(error_code=error, topics=[TE(topic_id=ids[t], partition_errors=ps)
                                                          for t, ps in by_topic.items()])


def _broker_info(b: Any, version: int) -> Z.BrokerInfo:
    if version == 0:
        return Z.BrokerInfo(b.id, b.v0_host, b.v0_port, None)
    ep = next((e for e in b.endpoints if e.listener in ("PLAINTEXT", "")), None) or \
        next((e for e in b.endpoints if e.security_protocol == 0), b.endpoints[0] if b.endpoints else None)
    host, port = (ep.host, ep.port) if ep is not None else ("", -1)
    # v3+ names each endpoint's listener; v1-2's are named by their protocol.
    protocols = {v: k for k, v in Z.SECURITY_PROTOCOL_IDS.items()}
    endpoints = tuple((e.listener or protocols.get(e.security_protocol, "PLAINTEXT"),
                       protocols.get(e.security_protocol, "PLAINTEXT"), e.host, e.port) for e in b.endpoints)
    return Z.BrokerInfo(b.id, host, port, b.rack if version >= 2 else None, endpoints)


def _update_metadata_partitions(req: UpdateMetadataRequest, version: int) -> list[tuple[str, bytes, int, Any]]:
    if version < 5:
        return [(s.topic_name, ZERO_UUID, s.partition_index, s) for s in req.ungrouped_partition_states]
    return [(t.topic_name, t.topic_id if version >= 7 else ZERO_UUID, s.partition_index, s)
            for t in req.topic_states for s in t.partition_states]


def _stop_replica_partitions(req: StopReplicaRequest, version: int) -> list[tuple[tuple[str, int], int, bool]]:
    if version == 0:
        return [((p.topic_name, p.partition_index), -1, req.delete_partitions) for p in req.ungrouped_partitions]
    if version <= 2:
        return [((t.name, p), -1, req.delete_partitions) for t in req.topics for p in t.partition_indexes]
    return [((t.topic_name, s.partition_index), s.leader_epoch, s.delete_partition)
            for t in req.topic_states for s in t.partition_states]


Handler = Callable[[RequestHeader, Any], Awaitable[Message | None]]


def register(apis: ApiRegistry, h: ControllerApis) -> None:
    """Add the inter-broker and controller APIs to the broker's (one call from KafkaApis)."""
    handlers: dict[int, Handler] = {
        A.LEADER_AND_ISR: h.leader_and_isr,
        A.STOP_REPLICA: h.stop_replica,
        A.UPDATE_METADATA: h.update_metadata,
        A.CONTROLLED_SHUTDOWN: h.controlled_shutdown,
        A.ALTER_PARTITION: h.alter_partition,
        A.ALLOCATE_PRODUCER_IDS: h.allocate_producer_ids,
        A.ENVELOPE: h.envelope,
        A.ELECT_LEADERS: h.elect_leaders,
        A.ALTER_PARTITION_REASSIGNMENTS: h.alter_partition_reassignments,
        A.LIST_PARTITION_REASSIGNMENTS: h.list_partition_reassignments,
    }
    for key, handler in handlers.items():
        apis.register(key, *VERSIONS[key], handler)


async def _ask(call: Awaitable[T]) -> T | None:
    """The controller's answer to a queued request, or None when it shut down first — or when
    the event itself found the controller moved (a ZooKeeper write fenced by the controller
    epoch's zkVersion: ControllerMovedException; the controller resigns on it). Kafka then
    never calls the request's callback and the asker retries at the new controller after its
    request timeout; kafkasim answers NOT_CONTROLLER at once (as Kafka's preempt does for a
    queued event) rather than let the exception kill the connection's task."""
    try:
        return await call
    except (ControllerMovedError, ControllerMovedException):
        return None
