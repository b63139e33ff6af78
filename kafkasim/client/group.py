"""GroupMember / GroupConsumer: kafkasim's own classic-protocol group consumer, speaking the
real wire protocol through the runtime (the simulated workload and tests use it; so can the
real load generator).

GroupMember is the membership half, as Kafka's AbstractCoordinator/ConsumerCoordinator: find
the coordinator, JoinGroup (rejoining with the id handed out by MEMBER_ID_REQUIRED), the leader
computes a range assignment over the members' subscriptions, SyncGroup, a heartbeat task that
notices rebalances (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
FENCED_INSTANCE_ID), OffsetCommit/OffsetFetch, LeaveGroup. GroupConsumer adds fetching from the
assigned partitions, starting at the committed offsets.

Versions: the highest each API shares with the broker, capped per API by `max_versions` (tests
pin old versions with it).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafkasim.client.cluster import ClientCluster
from kafkasim.client.connection import BrokerConnection, ClientError
from kafkasim.client.consumer import ConsumedRecord, Consumer, ConsumerConfig
from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.consumer_protocol import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from kafkasim.protocol.messages.find_coordinator import FindCoordinatorRequest
from kafkasim.protocol.messages.heartbeat import HeartbeatRequest
from kafkasim.protocol.messages.join_group import JoinGroupRequest
from kafkasim.protocol.messages.leave_group import LeaveGroupRequest
from kafkasim.protocol.messages.offset_commit import OffsetCommitRequest
from kafkasim.protocol.messages.offset_fetch import OffsetFetchRequest
from kafkasim.protocol.messages.sync_group import SyncGroupRequest
from kafkasim.protocol.primitives import Message
from kafkasim.runtime.api import NetworkError, NodeRuntime, RuntimeTimeout, Task

PROTOCOL_TYPE = "consumer"
RANGE = "range"
CONSUMER_PROTOCOL_VERSION = 0
# The highest version GroupMember implements per API.
GROUP_CLIENT_MAX_VERSIONS: dict[int, int] = {
    A.FIND_COORDINATOR: 3, A.JOIN_GROUP: 9, A.SYNC_GROUP: 5, A.HEARTBEAT: 4, A.LEAVE_GROUP: 5,
    A.OFFSET_COMMIT: 8, A.OFFSET_FETCH: 7,
}
REJOIN_ERRORS = frozenset({E.REBALANCE_IN_PROGRESS, E.ILLEGAL_GENERATION, E.UNKNOWN_MEMBER_ID,
                           E.FENCED_INSTANCE_ID})
COORDINATOR_ERRORS = frozenset({E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS})

TP = tuple[str, int]


class GroupError(Exception):
    def __init__(self, api: str, code: int) -> None:
        super().__init__(f"{api} failed: {E.error_name(code)}")
        self.code = code


@dataclass
class GroupConfig:
    group_id: str
    session_timeout_ms: int = 10000        # session.timeout.ms
    rebalance_timeout_ms: int = 30000      # max.poll.interval.ms
    heartbeat_interval_ms: int = 1000      # heartbeat.interval.ms
    group_instance_id: str | None = None  # group.instance.id
    retry_backoff_ms: int = 100            # retry.backoff.ms
    request_timeout_ms: float = 30000      # request.timeout.ms
    max_versions: dict[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Generation:
    generation_id: int
    member_id: str
    protocol: str | None
    leader: str


def encode_subscription(topics: list[str]) -> bytes:
    body = ConsumerProtocolSubscription(topics=sorted(topics), user_data=None)
    return struct.pack(">h", CONSUMER_PROTOCOL_VERSION) + body.encode(CONSUMER_PROTOCOL_VERSION)


def decode_subscription(data: bytes) -> list[str]:
    sub, _ = ConsumerProtocolSubscription.read(memoryview(data), 2, 0)
    return list(sub.topics)


def encode_assignment(partitions: list[TP]) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(partitions):
        by_topic.setdefault(t, []).append(p)
    T = ConsumerProtocolAssignment.TopicPartition
    body = ConsumerProtocolAssignment(assigned_partitions=[T(topic=t, partitions=ps) for t, ps in by_topic.items()],
                                      user_data=None)
    return struct.pack(">h", CONSUMER_PROTOCOL_VERSION) + body.encode(CONSUMER_PROTOCOL_VERSION)


def decode_assignment(data: bytes) -> list[TP]:
    if len(data) < 2:
        return []
    a, _ = ConsumerProtocolAssignment.read(memoryview(data), 2, 0)
    return sorted((t.topic, p) for t in a.assigned_partitions for p in t.partitions)


def range_assign(subscriptions: dict[str, list[str]], partition_counts: dict[str, int],
                 seeded_bug: Callable[[str], bool] = lambda name: False) -> dict[str, list[TP]]:
    """Kafka's RangeAssignor: per topic, the sorted subscribers split the partitions into
    contiguous ranges, the first ones getting one extra when it does not divide. `seeded_bug`
    is the member's NodeRuntime.seeded_bug."""
    out: dict[str, list[TP]] = {m: [] for m in subscriptions}
    topics = sorted({t for ts in subscriptions.values() for t in ts})
    for topic in topics:
        members = sorted(m for m, ts in subscriptions.items() if topic in ts)
        n = partition_counts.get(topic, 0)
        per, extra = divmod(n, len(members))
        start = 0
        for i, m in enumerate(members):
            count = per + (1 if i < extra else 0)
            out[m] += [(topic, p) for p in range(start, start + count)]
            if seeded_bug("two-owners") and start > 0:
                out[m].append((topic, start - 1))  # seeded bug: the previous member's last partition too
            start += count
    return out


class GroupMember:
    def __init__(self, rt: NodeRuntime, bootstrap: str, config: GroupConfig, client_id: str = "kafkasim-group",
                 cluster: ClientCluster | None = None) -> None:
        self.rt = rt
        self.config = config
        self.client_id = client_id
        self.cluster = cluster or ClientCluster(rt, bootstrap, client_id, config.request_timeout_ms)
        self.coordinator: BrokerConnection | None = None
        self.member_id = ""
        self.generation = Generation(-1, "", None, "")
        self.assignment: list[TP] = []
        self.rejoin_needed = True
        self.subscription: list[str] = []
        self.last_heartbeat_error = E.NONE
        self._heartbeat_task: Task | None = None
        self.generations_seen: list[tuple[int, list[TP]]] = []

    # ---------------------------------------------------------------- plumbing
    def version(self, conn: BrokerConnection, api_key: int) -> int:
        ours = min(GROUP_CLIENT_MAX_VERSIONS[api_key], self.config.max_versions.get(api_key, 99))
        lo, hi = conn.versions.get(api_key, (-1, -1))
        v = min(ours, hi)
        if v < lo or v < 0:
            raise ClientError(f"no usable version of api {api_key}")
        return v

    async def _call(self, conn: BrokerConnection, body: Message, version: int | None = None) -> Any:
        api_key = body.API_KEY
        assert api_key is not None
        v = self.version(conn, api_key) if version is None else version
        # BrokerConnection negotiates the core APIs; the group APIs pick their version here.
        return await conn.within(conn.send_at(v, body), self.config.request_timeout_ms)

    async def find_coordinator(self, attempts: int = 100) -> BrokerConnection:
        for _ in range(attempts):
            try:
                conn = await self.cluster.any_connection()
                resp = await self._call(conn, FindCoordinatorRequest(key=self.config.group_id, key_type=0))
                if resp.error_code == E.NONE:
                    self.coordinator = await self.cluster.connection(resp.host, resp.port)
                    return self.coordinator
            except (NetworkError, RuntimeTimeout, ClientError):
                pass
            await self.rt.sleep(self.config.retry_backoff_ms)
        raise GroupError("FindCoordinator", E.COORDINATOR_NOT_AVAILABLE)

    async def _coordinator(self) -> BrokerConnection:
        if self.coordinator is None or self.coordinator.closed:
            return await self.find_coordinator()
        return self.coordinator

    def _mark_coordinator_dead(self) -> None:
        self.coordinator = None

    # ---------------------------------------------------------------- join / sync
    async def join_group(self) -> tuple[int, Any]:
        """One JoinGroup round trip (following MEMBER_ID_REQUIRED); (error, response)."""
        conn = await self._coordinator()
        P = JoinGroupRequest.JoinGroupRequestProtocol
        while True:
            req = JoinGroupRequest(group_id=self.config.group_id, session_timeout_ms=self.config.session_timeout_ms,
                                   rebalance_timeout_ms=self.config.rebalance_timeout_ms, member_id=self.member_id,
                                   group_instance_id=None, protocol_type=PROTOCOL_TYPE,
                                   protocols=[P(name=RANGE, metadata=encode_subscription(self.subscription))])
            version = self.version(conn, A.JOIN_GROUP)
            if version >= 5:
                req.group_instance_id = self.config.group_instance_id
            resp = await conn.within(conn.send_at(version, req),
                                     self.config.request_timeout_ms + self.config.rebalance_timeout_ms)
            if resp.error_code == E.MEMBER_ID_REQUIRED:
                self.member_id = resp.member_id
                continue
            return resp.error_code, resp

    async def sync_group(self, join: Any) -> tuple[int, list[TP]]:
        conn = await self._coordinator()
        assignments: list[Any] = []
        if join.leader == join.member_id and join.members:
            subscriptions = {m.member_id: decode_subscription(bytes(m.metadata)) for m in join.members}
            topics = sorted({t for ts in subscriptions.values() for t in ts})
            counts = {t: await self.cluster.wait_for_topic(t) for t in topics}
            plan = range_assign(subscriptions, counts, self.rt.seeded_bug)
            A_ = SyncGroupRequest.SyncGroupRequestAssignment
            assignments = [A_(member_id=m, assignment=encode_assignment(tps)) for m, tps in plan.items()]
        req = SyncGroupRequest(group_id=self.config.group_id, generation_id=join.generation_id,
                               member_id=self.member_id, group_instance_id=None, protocol_type=PROTOCOL_TYPE,
                               protocol_name=join.protocol_name or RANGE, assignments=assignments)
        if self.version(conn, A.SYNC_GROUP) >= 3:
            req.group_instance_id = self.config.group_instance_id
        resp = await self._call(conn, req)
        return resp.error_code, decode_assignment(bytes(resp.assignment)) if resp.error_code == E.NONE else []

    async def ensure_active_group(self, topics: list[str], attempts: int = 200) -> list[TP]:
        """Join and sync until this member has an assignment in a stable generation."""
        self.subscription = sorted(topics)
        for _ in range(attempts):
            try:
                code, join = await self.join_group()
                if code == E.NONE:
                    self.member_id = join.member_id
                    self.generation = Generation(join.generation_id, join.member_id, join.protocol_name, join.leader)
                    code, assignment = await self.sync_group(join)
                    if code == E.NONE:
                        self.assignment = assignment
                        self.rejoin_needed = False
                        self.generations_seen.append((join.generation_id, assignment))
                        return assignment
                self._handle_error(code)
            except (NetworkError, RuntimeTimeout, ClientError):
                self._mark_coordinator_dead()
            await self.rt.sleep(self.config.retry_backoff_ms)
        raise GroupError("JoinGroup", E.REBALANCE_IN_PROGRESS)

    def _handle_error(self, code: int) -> None:
        if code in COORDINATOR_ERRORS:
            if code != E.COORDINATOR_LOAD_IN_PROGRESS:
                self._mark_coordinator_dead()
        elif code in (E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION, E.FENCED_INSTANCE_ID):
            if code == E.UNKNOWN_MEMBER_ID:
                self.member_id = ""
            self.generation = Generation(-1, self.member_id, None, "")
        if code != E.NONE:
            self.rejoin_needed = True

    # ---------------------------------------------------------------- heartbeats
    async def heartbeat(self) -> int:
        conn = await self._coordinator()
        req = HeartbeatRequest(group_id=self.config.group_id, generation_id=self.generation.generation_id,
                               member_id=self.member_id, group_instance_id=None)
        if self.version(conn, A.HEARTBEAT) >= 3:
            req.group_instance_id = self.config.group_instance_id
        resp = await self._call(conn, req)
        self.last_heartbeat_error = resp.error_code
        return int(resp.error_code)

    def start_heartbeats(self) -> None:
        if self._heartbeat_task is None or self._heartbeat_task.done():
            self._heartbeat_task = self.rt.spawn(self._heartbeat_loop(), name=f"heartbeat {self.client_id}")

    def stop_heartbeats(self) -> None:
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()
            self._heartbeat_task = None

    async def _heartbeat_loop(self) -> None:
        while True:
            early = self.rt.buggify("consumer.heartbeat.early")  # a heartbeat before heartbeat.interval.ms
            await self.rt.sleep(self.config.heartbeat_interval_ms / (4 if early else 1))
            if self.rejoin_needed:
                continue
            try:
                code = await self.heartbeat()
            except (NetworkError, RuntimeTimeout, ClientError):
                self._mark_coordinator_dead()
                continue
            if code != E.NONE:
                self._handle_error(code)

    # ---------------------------------------------------------------- offsets
    async def commit(self, offsets: dict[TP, int]) -> dict[TP, int]:
        conn = await self._coordinator()
        by_topic: dict[str, list[Any]] = {}
        P = OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition
        for (t, p), off in sorted(offsets.items()):
            by_topic.setdefault(t, []).append(P(partition_index=p, committed_offset=off, committed_metadata=""))
        req = OffsetCommitRequest(group_id=self.config.group_id,
                                  generation_id_or_member_epoch=self.generation.generation_id,
                                  member_id=self.member_id,
                                  topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=ps)
                                          for t, ps in by_topic.items()])
        if self.version(conn, A.OFFSET_COMMIT) >= 7:
            req.group_instance_id = self.config.group_instance_id
        resp = await self._call(conn, req)
        out = {(t.name, p.partition_index): int(p.error_code) for t in resp.topics for p in t.partitions}
        for code in sorted(set(out.values())):
            if code in REJOIN_ERRORS or code in COORDINATOR_ERRORS:
                self._handle_error(code)
        return out

    async def fetch_committed(self, tps: list[TP]) -> tuple[int, dict[TP, int]]:
        """(group error, {tp: committed offset or -1}). Asked with require_stable (v7+), as Kafka's
        ConsumerCoordinator always asks (KIP-447): while a transaction that commits offsets of
        these partitions is open, the coordinator answers UNSTABLE_OFFSET_COMMIT for them and this
        returns that error (retriable) instead of an offset the transaction is about to replace
        (txn-pipeline seed 93 with BUGGIFY: a copier that rejoined read the offset before its own
        committed transaction and copied a record twice)."""
        conn = await self._coordinator()
        by_topic: dict[str, list[int]] = {}
        for t, p in sorted(tps):
            by_topic.setdefault(t, []).append(p)
        version = self.version(conn, A.OFFSET_FETCH)
        req = OffsetFetchRequest(group_id=self.config.group_id, require_stable=version >= 7,
                                 topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                                         for t, ps in by_topic.items()])
        resp = await self._call(conn, req, version)
        offsets = {(t.name, p.partition_index): int(p.committed_offset) for t in resp.topics for p in t.partitions}
        unstable = any(p.error_code == E.UNSTABLE_OFFSET_COMMIT for t in resp.topics for p in t.partitions)
        return (E.UNSTABLE_OFFSET_COMMIT if unstable and resp.error_code == E.NONE else int(resp.error_code)), offsets

    async def leave_group(self) -> int:
        self.stop_heartbeats()
        if not self.member_id:
            return E.NONE
        conn = await self._coordinator()
        version = self.version(conn, A.LEAVE_GROUP)
        if version >= 3:
            M = LeaveGroupRequest.MemberIdentity
            req = LeaveGroupRequest(group_id=self.config.group_id,
                                    members=[M(member_id=self.member_id,
                                               group_instance_id=self.config.group_instance_id)])
        else:
            req = LeaveGroupRequest(group_id=self.config.group_id, member_id=self.member_id)
        resp = await self._call(conn, req, version)
        code = resp.members[0].error_code if version >= 3 and resp.members else resp.error_code
        self.member_id = ""
        self.rejoin_needed = True
        return int(code)

    def close(self) -> None:
        self.stop_heartbeats()
        self.cluster.close()


# Called after each completed rebalance with the generation, the assignment, the committed
# offsets read back for it (-1: none) and when that OffsetFetch was sent (the workload's history).
OnAssigned = Callable[[Generation, list[TP], dict[TP, int], float], None]


class GroupConsumer:
    """A subscribed consumer: poll() rejoins when needed, fetches the assignment from the
    committed offsets (or auto.offset.reset), and commit() commits the consumed positions.

    The committed offsets are fetched until the coordinator answers (as Kafka's
    ConsumerCoordinator.refreshCommittedOffsetsIfNeeded does): starting a partition at
    auto.offset.reset because one OffsetFetch failed would re-read it from the start and then
    commit offsets below what the group had committed."""

    def __init__(self, rt: NodeRuntime, bootstrap: str, group: GroupConfig, topics: list[str],
                 consumer_config: ConsumerConfig | None = None, client_id: str = "kafkasim-group-consumer",
                 on_assigned: OnAssigned | None = None) -> None:
        self.rt = rt
        self.topics = sorted(topics)
        self.consumer = Consumer(rt, bootstrap, consumer_config, client_id)
        self.member = GroupMember(rt, bootstrap, group, client_id, cluster=self.consumer.cluster)
        self.on_assigned = on_assigned
        self.fetch_generation = Generation(-1, "", None, "")  # the last poll's records were fetched in it

    async def _rebalance(self) -> None:
        while self.member.rejoin_needed:
            assignment = await self.member.ensure_active_group(self.topics)
            self.member.start_heartbeats()
            await self.consumer.assign(assignment)
            sent_ms = self.rt.monotonic_ms()
            committed = await self._fetch_committed(assignment) if assignment else {}
            if committed is None:
                continue  # the generation ended while fetching: join again
            for tp, off in committed.items():
                if off >= 0:
                    self.consumer.seek(tp, off)
            if self.on_assigned is not None:
                self.on_assigned(self.member.generation, assignment, committed, sent_ms)

    async def _fetch_committed(self, tps: list[TP]) -> dict[TP, int] | None:
        """The committed offsets of `tps`, retried until answered; None if a rebalance began."""
        while not self.member.rejoin_needed:
            try:
                code, committed = await self.member.fetch_committed(tps)
                if code == E.NONE:
                    return committed
                if code in REJOIN_ERRORS:
                    self.member._handle_error(code)
                elif code in (E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR):
                    self.member._mark_coordinator_dead()  # find it again; COORDINATOR_LOAD_IN_PROGRESS,
                    # UNSTABLE_OFFSET_COMMIT (a transaction's offsets pending): wait and ask again
            except (NetworkError, RuntimeTimeout, ClientError):
                self.member._mark_coordinator_dead()
            await self.rt.sleep(self.member.config.retry_backoff_ms)
        return None

    async def poll(self) -> list[ConsumedRecord]:
        if self.member.rejoin_needed:
            await self._rebalance()
        self.fetch_generation = self.member.generation
        if not self.consumer.positions:
            await self.rt.sleep(self.consumer.config.fetch_max_wait_ms)
            return []
        return await self.consumer.poll()

    def positions(self) -> dict[TP, int]:
        return {tp: pos for tp, pos in self.consumer.positions.items() if pos is not None}

    async def commit(self) -> dict[TP, int]:
        positions = self.positions()
        return await self.member.commit(positions) if positions else {}

    async def close(self) -> None:
        try:
            await self.member.leave_group()
        except (NetworkError, RuntimeTimeout, ClientError):
            pass
        self.member.close()
