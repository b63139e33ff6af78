"""Topic admin APIs, ZooKeeper mode, answered as a Kafka 3.9 broker answers them (each checked
against a real 3.9.1 broker with `realkafka`): DeleteTopics 0-6, CreatePartitions 0-3,
DeleteRecords 0-2, DescribeCluster 0-1, OffsetForLeaderEpoch 2-4.

ZooKeeper writes, as Kafka's AdminZkClient / KafkaController make them:

  /admin/delete_topics/<t>             DeleteTopics (on the controller) marks the topic; the
                                       KafkaController's TopicDeletionManager has the replicas
                                       deleted (StopReplica), then removes /brokers/topics/<t>,
                                       /config/topics/<t> and the mark. The answer waits until the
                                       topic left the metadata cache (DelayedDeleteTopics).
  /brokers/topics/<t>                  CreatePartitions (on the controller): the assignment grows
                                       (CAS on the znode version; AdminUtils from the existing
                                       partition 0's first replica), the controller gives the new
                                       partitions leaders; the answer waits for them.

Leader epochs: Metadata (v7+), ListOffsets (v4+) and OffsetForLeaderEpoch all answer the ZooKeeper
leader epoch of the partition, so a client validating its position (Java 3-4, librdkafka 2,
kafka-python/franz-go <= 4) gets a consistent end offset: for the current epoch the log end
offset; for an older one where the next epoch starts (Kafka's LeaderEpochFileCache.endOffsetFor).
Followers ask the same question before fetching (KIP-101/279).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafkasim.broker import config_helper as C
from kafkasim.broker.admin.manager import (
    AUTHORIZED_OPERATIONS_OMITTED,
    CLUSTER_AUTHORIZED_OPERATIONS_ALL,
    ENDPOINT_TYPE_BROKER,
    ENDPOINT_TYPE_CONTROLLER,
    INTERNAL_TOPICS,
    LATEST_OFFSET,
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    ZERO_UUID,
    AdminError,
    AdminManager,
)
from kafkasim.broker.admin_utils import AssignmentError, BrokerMetadata, assign_replicas_to_brokers
from kafkasim.broker.delayed_topic_ops import DelayedCreatePartitions, DelayedDeleteTopics
from kafkasim.broker.request_context import context_of
from kafkasim.broker.zk import zk_data as Z
from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsResponse
from kafkasim.protocol.messages.delete_records import DeleteRecordsRequest, DeleteRecordsResponse
from kafkasim.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from kafkasim.protocol.messages.describe_cluster import DescribeClusterRequest, DescribeClusterResponse
from kafkasim.protocol.messages.headers import RequestHeader
from kafkasim.protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
from kafkasim.protocol.primitives import Message
from kafkasim.runtime.api import BadVersionError, NodeExistsError, NodeRuntime

if TYPE_CHECKING:
    from kafkasim.broker.config import BrokerConfig
    from kafkasim.broker.metadata_cache import MetadataCache
    from kafkasim.broker.replica_manager import ReplicaManager
    from kafkasim.broker.topic_admin import TopicAdmin
    from kafkasim.broker.zk.kafka_zk_client import KafkaZkClient

VERSIONS: dict[int, tuple[int, int]] = {
    A.DELETE_TOPICS: (0, 6),
    A.CREATE_PARTITIONS: (0, 3),
    A.DELETE_RECORDS: (0, 2),
    A.DESCRIBE_CLUSTER: (0, 1),
    A.OFFSET_FOR_LEADER_EPOCH: (0, 4),  # v0-v1: the same answer, without epochs in the request
}


class TopicApis:
    def __init__(self, rt: NodeRuntime, config: BrokerConfig, manager: AdminManager, replica_manager: ReplicaManager,
                 metadata_cache: MetadataCache, kzk: KafkaZkClient, topic_admin: TopicAdmin) -> None:
        self.rt = rt
        self.config = config
        self.m = manager
        self.rm = replica_manager
        self.cache = metadata_cache
        self.kzk = kzk
        self.topics = topic_admin
        self._timeout_ms = 30000.0

    def handlers(self) -> dict[int, Any]:
        return {A.DELETE_TOPICS: self.delete_topics, A.CREATE_PARTITIONS: self.create_partitions,
                A.DELETE_RECORDS: self.delete_records, A.DESCRIBE_CLUSTER: self.describe_cluster,
                A.OFFSET_FOR_LEADER_EPOCH: self.offset_for_leader_epoch}

    # ------------------------------------------------------------ DescribeCluster
    async def describe_cluster(self, header: RequestHeader, req: DescribeClusterRequest) -> Message:
        cache = self.cache
        B = DescribeClusterResponse.DescribeClusterBroker
        listener = context_of(header).listener_name   # each broker's endpoint on the request's listener
        brokers = [B(broker_id=b.broker_id, host=ep[0], port=ep[1], rack=b.rack)
                   for b in sorted(cache.brokers.values(), key=lambda b: b.broker_id)
                   if (ep := b.endpoint(listener)) is not None]
        ops = CLUSTER_AUTHORIZED_OPERATIONS_ALL if req.include_cluster_authorized_operations \
            else AUTHORIZED_OPERATIONS_OMITTED
        version = header.request_api_version
        if version >= 1 and req.endpoint_type != ENDPOINT_TYPE_BROKER:
            # AuthHelper.computeDescribeClusterResponse: an answer with nothing but the error.
            if req.endpoint_type == ENDPOINT_TYPE_CONTROLLER:
                code, msg = E.MISMATCHED_ENDPOINT_TYPE, ("The request was sent to an endpoint of type BROKER, but "
                                                         "we wanted an endpoint of type CONTROLLER")
            else:
                code, msg = E.UNSUPPORTED_ENDPOINT_TYPE, f"Unsupported endpoint type {req.endpoint_type}"
            return DescribeClusterResponse(throttle_time_ms=0, error_code=code, error_message=msg,
                                           endpoint_type=ENDPOINT_TYPE_BROKER, cluster_id="", controller_id=-1,
                                           brokers=[], cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
        kw: dict[str, Any] = {"endpoint_type": ENDPOINT_TYPE_BROKER} if version >= 1 else {}
        return DescribeClusterResponse(throttle_time_ms=0, error_code=E.NONE, error_message=None,
                                       cluster_id=cache.cluster_id, controller_id=cache.controller_id,
                                       brokers=brokers, cluster_authorized_operations=ops, **kw)
    # ------------------------------------------------------------ DeleteTopics
    async def delete_topics(self, header: RequestHeader, req: DeleteTopicsRequest) -> Message:
        version = header.request_api_version
        wanted: list[tuple[str | None, bytes]]
        if version >= 6:
            wanted = [(t.name, t.topic_id) for t in req.topics]
        else:
            wanted = [(name, ZERO_UUID) for name in req.topic_names]
        R = DeleteTopicsResponse.DeletableTopicResult
        results = []
        pending: list[tuple[Any, str]] = []
        for name, topic_id in wanted:
            error, resolved, tid = await self._delete_one(name, topic_id)
            kw: dict[str, Any] = {"topic_id": tid} if version >= 6 else {}
            if version >= 5:
                kw["error_message"] = None
            results.append(R(name=resolved, error_code=error, **kw))
            if error == E.NONE and resolved is not None:
                pending.append((results[-1], resolved))
        if pending and req.timeout_ms > 0:
            # DelayedDeleteTopics: done when the topics left this broker's metadata cache.
            cache = self.cache
            op = DelayedDeleteTopics(cache, [t for _, t in pending], req.timeout_ms)
            await self.topics.wait_for_topic_operation(op, req.timeout_ms)
            for r, t in pending:
                if cache.topic(t) is not None:
                    r.error_code = E.REQUEST_TIMED_OUT
        kw2: dict[str, Any] = {"throttle_time_ms": 0} if version >= 1 else {}
        return DeleteTopicsResponse(responses=results, **kw2)

    async def _delete_one(self, name: str | None, topic_id: bytes) -> tuple[int, str | None, bytes]:
        cache = self.cache
        if name is not None and topic_id != ZERO_UUID:
            return E.INVALID_REQUEST, name, topic_id  # "Topic name and topic ID can not both be specified."
        if name is None:
            if topic_id == ZERO_UUID:
                return E.TOPIC_AUTHORIZATION_FAILED, None, topic_id  # as Kafka answers a null name
            meta = next((t for t in cache.topics.values() if t.topic_id == topic_id), None)
            if meta is None:
                return E.UNKNOWN_TOPIC_ID, None, topic_id
            name = meta.name
        meta = cache.topic(name)
        if meta is None:
            return E.UNKNOWN_TOPIC_OR_PARTITION, name, topic_id
        tid = topic_id
        if not self.m.is_controller():
            return E.NOT_CONTROLLER, name, tid
        if name in INTERNAL_TOPICS:
            return E.INVALID_TOPIC_EXCEPTION, name, tid
        try:
            await self.m.zk.create(f"{Z.ADMIN_DELETE_TOPICS}/{name}", b"", makepath=True)
        except NodeExistsError:
            pass  # already marked
        self.rt.trace("topic_deletion_requested", topic=name)
        return E.NONE, name, tid

    # ------------------------------------------------------------ CreatePartitions
    async def create_partitions(self, header: RequestHeader, req: CreatePartitionsRequest) -> Message:
        R = CreatePartitionsResponse.CreatePartitionsTopicResult
        names = [t.name for t in req.topics]
        results = []
        for t in req.topics:
            if names.count(t.name) > 1:
                results.append(R(name=t.name, error_code=E.INVALID_REQUEST,
                                 error_message="Duplicate topic in request."))
                continue
            assignments = None if t.assignments is None else [list(a.broker_ids) for a in t.assignments]
            self._timeout_ms = float(req.timeout_ms)
            try:
                await self._create_partitions(t.name, t.count, assignments, req.validate_only)
                results.append(R(name=t.name, error_code=E.NONE, error_message=None))
            except AdminError as exc:
                results.append(R(name=t.name, error_code=exc.error_code, error_message=exc.message))
        return CreatePartitionsResponse(throttle_time_ms=0, results=results)

    async def _create_partitions(self, topic: str, count: int, assignments: list[list[int]] | None,
                                 validate_only: bool) -> None:
        if not self.m.is_controller():
            raise AdminError(E.NOT_CONTROLLER, "This is not the correct controller for this cluster.")
        current = await self.kzk.topic_assignment(topic)
        if current is None or self.cache.topic(topic) is None:
            raise AdminError(E.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic}' does not exist.")
        existing = len(current.partitions)
        if count == existing:
            raise AdminError(E.INVALID_PARTITIONS, f"Topic already has {existing} partitions.")
        if count < existing:
            raise AdminError(E.INVALID_PARTITIONS,
                             f"Topic currently has {existing} partitions, which is higher than the requested {count}.")
        new = self._new_assignment(current.partitions, count, assignments)
        if validate_only:
            return
        full = dict(current.partitions)
        full.update(new)
        _, stat = await self.m.zk.get(Z.topic_path(topic))
        try:
            await self.m.zk.set(Z.topic_path(topic), Z.topic_assignment_json(full, current.topic_id), stat.version)
        except BadVersionError as exc:
            raise AdminError(E.REASSIGNMENT_IN_PROGRESS, "The topic assignment changed concurrently.") from exc
        self.rt.trace("partitions_created", topic=topic, partitions=count)
        # DelayedCreatePartitions: the controller gives the new partitions leaders.
        cache = self.cache
        op = DelayedCreatePartitions(cache, [(topic, count)], self._timeout_ms)
        if not await self.topics.wait_for_topic_operation(op, self._timeout_ms):
            raise AdminError(E.REQUEST_TIMED_OUT, f"Timed out waiting for partitions of {topic} to be created.")

    def _new_assignment(self, current: dict[int, list[int]], count: int,
                        assignments: list[list[int]] | None) -> dict[int, list[int]]:
        existing = len(current)
        rf = len(current[min(current)]) if current else 1
        cache = self.cache
        alive = cache.alive_broker_ids() or [self.config.broker_id]
        adding = count - existing
        if assignments is None:
            # AdminZkClient.addPartitions: AdminUtils from the existing partition 0's first
            # replica's place in the broker list, numbering on from the existing partitions.
            brokers = [BrokerMetadata(b, cache.brokers[b].rack if b in cache.brokers else None) for b in alive]
            first = current[min(current)][0] if current else alive[0]
            start = max(0, next((i for i, b in enumerate(alive) if b >= first), 0))
            try:
                return assign_replicas_to_brokers(brokers, adding, rf, lambda n: 0, fixed_start_index=start,
                                                  start_partition_id=existing)
            except AssignmentError as exc:
                raise AdminError(exc.error_code, str(exc)) from exc
        if len(assignments) != adding:
            raise AdminError(E.INVALID_REPLICA_ASSIGNMENT, f"Increasing the number of partitions by {adding} but "
                             f"{len(assignments)} assignments provided.")
        unknown = sorted({b for a in assignments for b in a if b not in alive})
        if unknown:
            raise AdminError(E.INVALID_REPLICA_ASSIGNMENT,
                             f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.")
        bad = [(existing + i, len(a)) for i, a in enumerate(assignments) if len(a) != rf]
        if bad:
            raise AdminError(E.INVALID_REPLICA_ASSIGNMENT,
                             f"Inconsistent replication factor between partitions, partition 0 has {rf} while "
                             f"partitions [{', '.join(str(p) for p, _ in bad)}] have replication factors "
                             f"[{', '.join(str(n) for _, n in bad)}], respectively.")
        return {existing + i: list(a) for i, a in enumerate(assignments)}
    # ------------------------------------------------------------ DeleteRecords
    async def delete_records(self, header: RequestHeader, req: DeleteRecordsRequest) -> Message:
        T = DeleteRecordsResponse.DeleteRecordsTopicResult
        P = T.DeleteRecordsPartitionResult
        topics = []
        for t in req.topics:
            cleanup = await self._cleanup_policy(t.name)
            parts = []
            for p in t.partitions:
                error, low = self._delete_records_one(t.name, p.partition_index, p.offset, cleanup)
                parts.append(P(partition_index=p.partition_index, low_watermark=low, error_code=error))
            topics.append(T(name=t.name, partitions=parts))
        return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)

    async def _cleanup_policy(self, topic: str) -> list[str]:
        if self.cache.topic(topic) is None:
            return []
        entries = C.topic_config_entries(await self.m.topic_overrides(topic), await self.m.broker_layers(),
                                         ["cleanup.policy"])
        return (entries[0].value or "").split(",") if entries else ["delete"]

    def _delete_records_one(self, topic: str, partition: int, offset: int, cleanup: list[str]) -> tuple[int, int]:
        part = self.rm.get_partition(topic, partition)
        if part is None:
            return E.UNKNOWN_TOPIC_OR_PARTITION, -1
        if not part.is_leader:
            return E.NOT_LEADER_OR_FOLLOWER, -1
        if "delete" not in cleanup:
            return E.POLICY_VIOLATION, -1
        target = part.high_watermark if offset == LATEST_OFFSET else offset
        if target < 0 or target > part.high_watermark:
            return E.OFFSET_OUT_OF_RANGE, -1
        low = part.log.delete_records(target)  # UnifiedLog.maybeIncrementLogStartOffset
        self.rt.trace("records_deleted", topic=topic, partition=partition, log_start_offset=low)
        return E.NONE, low
    # ------------------------------------------------------------ OffsetForLeaderEpoch
    async def offset_for_leader_epoch(self, header: RequestHeader, req: OffsetForLeaderEpochRequest) -> Message:
        T = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
        P = T.EpochEndOffset
        topics = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                error, epoch, end = self._epoch_end_offset(t.topic, p.partition, p.current_leader_epoch,
                                                           p.leader_epoch)
                parts.append(P(error_code=error, partition=p.partition, leader_epoch=epoch, end_offset=end))
            topics.append(T(topic=t.topic, partitions=parts))
        return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)

    def _epoch_end_offset(self, topic: str, partition: int, current: int, requested: int) -> tuple[int, int, int]:
        part = self.rm.get_partition(topic, partition)
        if part is None:
            return E.UNKNOWN_TOPIC_OR_PARTITION, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if part.offline:
            return E.KAFKA_STORAGE_ERROR, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        return part.last_offset_for_leader_epoch(current, requested)
