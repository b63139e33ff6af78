"""Fetch (api key 1), versions 0-17, as Kafka 3.9's KafkaApis.handleFetchRequest answers them.

Per version:
  v0-v3   the log holds record batch v2; the records are down-converted to the request's magic
          (v0-v1 magic 0, v2-v3 magic 1; kafkasim.records.conversion) unless the topic sets
          message.downconversion.enable=false (UNSUPPORTED_VERSION for consumers); a zstd topic
          answers UNSUPPORTED_COMPRESSION_TYPE below v10. v0-v2 have no response size limit
          and no "first batch whatever its size" (Kafka's hardMaxBytesLimit).
  v0-v5   KAFKA_STORAGE_ERROR is answered as NOT_LEADER_OR_FOLLOWER (older clients do not
          know it and would give up).
  v12+    last_fetched_epoch: a log that diverged from it answers diverging_epoch, no records.
  v13+    topics by id (UNKNOWN_TOPIC_ID for an id this broker does not know), answered by id.
  v15+    the replica id travels in replica_state.
  v16+    NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH carry the current leader, and the
          response its endpoint (node_endpoints; KIP-951).
Partitions are answered in request order, those refused before the read (unknown topic or
partition) last, grouped by topic where consecutive (FetchResponse.toMessage).

Fetch sessions (v7+, KIP-227) are fetch_session.py's: the context it gives says which
partitions to read (an incremental fetch reads the session's) and which of the answers to send.

Authorization (with an authorizer) is checked here, on the context's partitions, as
KafkaApis.handleFetchRequest does it, not by a rule on the request (security/authorizer_rules.py):
an incremental fetch reads session partitions its request does not name, and a check of the
request alone let a consumer read on in its session after its READ was revoked. A follower
needs CLUSTER_ACTION (else every partition TOPIC_AUTHORIZATION_FAILED); a consumer READ on each
topic (else its partitions TOPIC_AUTHORIZATION_FAILED; an unknown topic id is UNKNOWN_TOPIC_ID
first).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkasim.broker.fetch_session import (
    FINAL_EPOCH,
    INVALID_SESSION_ID,
    FetchContext,
    FetchManager,
    FetchSessionCache,
    FullFetchContext,
    PartitionRequest,
    ShardOutOfRange,
    TopicIdPartition,
)
from kafkasim.broker.replica_manager import FetchResult, FetchSpec
from kafkasim.broker.request_context import context_of
from kafkasim.broker.security.acl_types import CLUSTER_NAME, AclOperation, ResourceType
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.fetch import FetchRequest, FetchResponse
from kafkasim.records.conversion import UnsupportedCompressionTypeError, lazy_down_convert

if TYPE_CHECKING:
    from kafkasim.broker.config import BrokerConfig
    from kafkasim.broker.metadata_cache import MetadataCache
    from kafkasim.broker.replica_manager import ReplicaManager
    from kafkasim.broker.security.authorizer import AclAuthorizer
    from kafkasim.protocol.messages.headers import RequestHeader
    from kafkasim.runtime.api import NodeRuntime

ZERO_UUID = bytes(16)
FT = FetchResponse.FetchableTopicResponse
PD = FT.PartitionData


@dataclass(init=False)
class _Wanted:
    """One partition to answer: its name (None for an unknown topic id) and what to answer."""

    tp: TopicIdPartition
    req: PartitionRequest
    error: int

    # Written out (init=False; its defaults are the only ones) so that mypyc compiles it: a
    # dataclass-made __init__ runs interpreted.
    def __init__(self, tp: TopicIdPartition, req: PartitionRequest, error: int = E.NONE) -> None:
        self.tp = tp
        self.req = req
        self.error = error

    @property
    def topic(self) -> str | None:
        return self.tp[1]

    @property
    def topic_id(self) -> bytes:
        return self.tp[0]

    @property
    def partition(self) -> int:
        return self.tp[2]

    @property
    def fetch_offset(self) -> int:
        return self.req.fetch_offset


def _down_convert_magic(version: int) -> int | None:
    if version <= 1:
        return 0
    if version <= 3:
        return 1
    return None


class FetchApi:
    def __init__(self, rt: NodeRuntime, config: BrokerConfig, replica_manager: ReplicaManager,
                 metadata_cache: MetadataCache, authorizer: AclAuthorizer | None = None) -> None:
        """`authorizer`: authorizer.class.name's (None: every fetch is allowed)."""
        self.rt = rt
        self.authorizer = authorizer
        self.config = config
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        self.fetch_manager = FetchManager(FetchSessionCache(config.max_incremental_fetch_session_cache_slots,
                                                            rt.rng("fetch-session-ids")))

    async def handle(self, header: RequestHeader, req: FetchRequest) -> FetchResponse:
        version = header.request_api_version
        replica_id = req.replica_state.replica_id if version >= 15 else req.replica_id
        names = self._topic_names() if version >= 13 else {}
        session_id, epoch = (req.session_id, req.session_epoch) if version >= 7 else (INVALID_SESSION_ID, FINAL_EPOCH)
        try:
            context = self.fetch_manager.new_context(version, session_id, epoch, replica_id >= 0,
                                                     _fetch_data(req, version, names),
                                                     _forgotten(req, version, names), names, self.rt.now_ms())
        except ShardOutOfRange:
            return _error_response(req, version, E.UNKNOWN_SERVER_ERROR)
        wanted, specs = self._resolve(context, version, replica_id >= 0, self._allowed(header, replica_id >= 0))
        results: list[FetchResult] = []
        if specs:
            max_bytes = min(req.max_bytes, self.config.fetch_max_bytes)
            results = await self.replica_manager.fetch_messages(specs, req.max_wait_ms, min(req.min_bytes, max_bytes),
                                                                max_bytes, req.isolation_level == 1, replica_id)
        answered = [w for w in wanted if w.error == E.NONE]
        parts = [(w.tp, self._partition_data(w, r, version, req.isolation_level == 1))
                 for w, r in zip(answered, results, strict=True)]
        parts += [(w.tp, PD(partition_index=w.partition, error_code=w.error, high_watermark=-1, records=b""))
                  for w in wanted if w.error != E.NONE]
        # The session decides which partitions an incremental answer carries (on the data as
        # read: KafkaApis converts after FetchContext.updateAndGenerateResponseData).
        error, response_session_id, parts = context.generate(parts, self.rt.now_ms())
        self._trace_session(context, error, session_id, response_session_id, replica_id)
        if version >= 10:  # nothing to convert (see _maybe_convert): skip the per-partition pass
            converted = parts
        else:
            by_tp = {w.tp: w for w in wanted}
            converted = [(tp, self._maybe_convert(by_tp[tp], pd, version, replica_id >= 0)) for tp, pd in parts]
        topics: list[Any] = []
        for (topic_id, name, _), pd in converted:
            if topics and topics[-1].topic == (name or "") and topics[-1].topic_id == topic_id:
                topics[-1].partitions.append(pd)
            else:
                topics.append(FT(topic=name or "", topic_id=topic_id, partitions=[pd]))
        return FetchResponse(throttle_time_ms=0, error_code=error, session_id=response_session_id, responses=topics,
                             node_endpoints=self._node_endpoints(converted, context_of(header).listener_name)
                             if version >= 16 else [])

    def _trace_session(self, context: FetchContext, error: int, asked: int, answered: int, replica_id: int) -> None:
        """A session created or refused (not every incremental fetch: a consumer makes several a
        second)."""
        if isinstance(context, FullFetchContext) and answered != INVALID_SESSION_ID:
            self.rt.trace("fetch_session_created", session_id=answered, replica=replica_id,
                          partitions=len(list(context.partitions())), sessions=self.fetch_manager.cache.size)
        elif error != E.NONE:
            self.rt.trace("fetch_session_error", session_id=asked, error=error, replica=replica_id)

    def _topic_names(self) -> dict[bytes, str]:
        return {m.topic_id: m.name for m in self.metadata_cache.topics.values() if m.topic_id != ZERO_UUID}

    def _allowed(self, header: RequestHeader, from_follower: bool) -> Callable[[str | None], bool]:
        """May this request read a topic (None: a topic id unknown here)? A follower: CLUSTER_ACTION,
        for every partition alike; a consumer: READ on the topic, asked once per topic (as
        filterByAuthorized); an unknown id is the consumer's UNKNOWN_TOPIC_ID, never asked."""
        authorizer = self.authorizer
        if authorizer is None:
            return _always
        ctx = context_of(header)
        if from_follower:
            cluster_action = authorizer.authorize(ctx, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
            return lambda _topic: cluster_action
        read: dict[str, bool] = {}

        def allowed(topic: str | None) -> bool:
            if topic is None:
                return True
            if topic not in read:
                read[topic] = authorizer.authorize(ctx, AclOperation.READ, ResourceType.TOPIC, topic)
            return read[topic]
        return allowed

    def _resolve(self, context: FetchContext, version: int, from_follower: bool,
                 allowed: Callable[[str | None], bool]) -> tuple[list[_Wanted], list[FetchSpec]]:
        """The context's partitions: those to read (with their FetchSpecs), then the refused ones
        in Kafka's order — a consumer's unknown topic ids before its denied and unknown partitions
        (two passes in KafkaApis), a follower's in one pass (all denied without CLUSTER_ACTION)."""
        cache = self.metadata_cache
        readable: list[_Wanted] = []
        unknown_ids: list[_Wanted] = []
        unknown: list[_Wanted] = []
        specs: list[FetchSpec] = []
        min_one = version >= 3
        metas: dict[str, Any] = {}  # one metadata lookup per topic, not per partition
        for tp, p in context.partitions():
            _, name, index = tp
            if not allowed(name):
                unknown.append(_Wanted(tp, p, E.TOPIC_AUTHORIZATION_FAILED))
                continue
            if name is None:
                (unknown if from_follower else unknown_ids).append(_Wanted(tp, p, E.UNKNOWN_TOPIC_ID))
                continue
            meta = metas[name] if name in metas else metas.setdefault(name, cache.topic(name))
            if meta is None or index not in meta.partitions:
                unknown.append(_Wanted(tp, p, E.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            readable.append(_Wanted(tp, p))
            specs.append(FetchSpec(name, index, p.fetch_offset, p.max_bytes, p.current_leader_epoch,
                                   p.log_start_offset, last_fetched_epoch=p.last_fetched_epoch,
                                   min_one_message=min_one))
        return readable + unknown_ids + unknown, specs

    def _partition_data(self, w: _Wanted, r: FetchResult, version: int, committed: bool) -> Any:
        code = r.error_code
        if code == E.KAFKA_STORAGE_ERROR and version <= 5:
            code = E.NOT_LEADER_OR_FOLLOWER
        pd = PD(partition_index=w.partition, error_code=code, high_watermark=r.high_watermark,
                last_stable_offset=r.last_stable_offset, log_start_offset=r.log_start_offset,
                aborted_transactions=None if not committed else [
                    PD.AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
                    for a in r.aborted_transactions or []], preferred_read_replica=-1, records=r.records)
        if r.diverging_epoch is not None:
            pd.diverging_epoch = PD.EpochEndOffset(epoch=r.diverging_epoch[0], end_offset=r.diverging_epoch[1])
        if version >= 16 and r.error_code in (E.NOT_LEADER_OR_FOLLOWER, E.FENCED_LEADER_EPOCH):
            leader, epoch = self._current_leader(w)
            pd.current_leader = PD.LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch)
        return pd

    def _maybe_convert(self, w: _Wanted, pd: Any, version: int, from_follower: bool) -> Any:
        """KafkaApis.maybeConvertFetchedData."""
        if version >= 10:  # zstd is readable and nothing is down-converted: no log config to look up
            return pd
        if w.topic is None:   # an unknown topic id: no log config, nothing to convert
            return pd
        part = self.replica_manager.get_partition(w.topic, w.partition)
        if part is None:
            return pd
        config = part.log.config
        if config.compression_type == "zstd" and version < 10:
            return PD(partition_index=w.partition, error_code=E.UNSUPPORTED_COMPRESSION_TYPE, high_watermark=-1,
                      records=None)
        magic = _down_convert_magic(version)
        if magic is None:
            return pd
        if not from_follower and not config.message_downconversion_enable:
            return PD(partition_index=w.partition, error_code=E.UNSUPPORTED_VERSION, high_watermark=-1, records=None)
        try:
            pd.records = lazy_down_convert(bytes(pd.records), magic, w.fetch_offset)
        except UnsupportedCompressionTypeError:
            return PD(partition_index=w.partition, error_code=E.UNSUPPORTED_COMPRESSION_TYPE, high_watermark=-1,
                      records=None)
        return pd

    def _current_leader(self, w: _Wanted) -> tuple[int, int]:
        """KafkaApis.getCurrentLeader: this broker's partition if it has one, else the cache."""
        assert w.topic is not None
        part = self.replica_manager.get_partition(w.topic, w.partition)
        if part is not None:
            return (part.leader_id if part.leader_id is not None else -1), part.leader_epoch
        meta = self.metadata_cache.topic(w.topic)
        pm = meta.partitions.get(w.partition) if meta is not None else None
        return (pm.leader, pm.leader_epoch) if pm is not None else (-1, -1)

    def _node_endpoints(self, parts: list[tuple[TopicIdPartition, Any]], listener: str) -> list[Any]:
        NE = FetchResponse.NodeEndpoint
        ids = sorted({pd.current_leader.leader_id for _, pd in parts
                      if pd.current_leader is not None and pd.current_leader.leader_id >= 0})
        brokers = self.metadata_cache.brokers
        # Each leader's endpoint on the request's listener (Kafka: getAliveBrokerNode(id, listenerName)).
        return [NE(node_id=b, host=ep[0], port=ep[1], rack=brokers[b].rack)
                for b in ids if b in brokers and (ep := brokers[b].endpoint(listener)) is not None]


def _always(_topic: str | None) -> bool:
    return True


def _fetch_data(req: FetchRequest, version: int, names: dict[bytes, str]) -> dict[TopicIdPartition, PartitionRequest]:
    """FetchRequest.fetchData: the partitions asked, by (id, name, index) — the name looked up by
    id from v13 (None when unknown). A partition asked twice keeps its first place and its last
    position (a LinkedHashMap). Fields a version does not have are Kafka's defaults."""
    out: dict[TopicIdPartition, PartitionRequest] = {}
    for t in req.topics:
        name = names.get(t.topic_id) if version >= 13 else t.topic
        topic_id = t.topic_id if version >= 13 else ZERO_UUID
        for p in t.partitions:
            out[(topic_id, name, p.partition)] = PartitionRequest(
                p.fetch_offset, p.log_start_offset if version >= 5 else -1, p.partition_max_bytes,
                p.current_leader_epoch if version >= 9 else -1, p.last_fetched_epoch if version >= 12 else -1)
    return out


def _forgotten(req: FetchRequest, version: int, names: dict[bytes, str]) -> list[TopicIdPartition]:
    """FetchRequest.forgottenTopics (v7+)."""
    if version < 7:
        return []
    return [(t.topic_id if version >= 13 else ZERO_UUID, names.get(t.topic_id) if version >= 13 else t.topic, p)
            for t in req.forgotten_topics_data for p in t.partitions]


def _error_response(req: FetchRequest, version: int, error: int) -> FetchResponse:
    """FetchRequest.getErrorResponse: the error at the top level, and below v13 in every
    partition asked too; the request's session id echoed."""
    topics = [] if version >= 13 else [
        FT(topic=t.topic, topic_id=t.topic_id, partitions=[
            PD(partition_index=p.partition, error_code=error, high_watermark=-1, records=None) for p in t.partitions])
        for t in req.topics]
    return FetchResponse(throttle_time_ms=0, error_code=error, session_id=req.session_id, responses=topics,
                         node_endpoints=[])
