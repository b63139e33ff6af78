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

No fetch sessions: the answer's session_id is 0, which tells a client to keep sending full
requests (what Kafka does when its session cache is full).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkasim.broker.replica_manager import FetchResult, FetchSpec
from kafkasim.broker.request_context import context_of
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.fetch import FetchRequest, FetchResponse
from kafkasim.records.conversion import UnsupportedCompressionTypeError, lazy_down_convert

if TYPE_CHECKING:
    from kafkasim.broker.config import BrokerConfig
    from kafkasim.broker.metadata_cache import MetadataCache
    from kafkasim.broker.replica_manager import ReplicaManager
    from kafkasim.protocol.messages.headers import RequestHeader

ZERO_UUID = bytes(16)
FT = FetchResponse.FetchableTopicResponse
PD = FT.PartitionData


@dataclass
class _Wanted:
    """One requested partition: its name (None for an unknown topic id) and what to answer."""

    topic: str | None
    topic_id: bytes
    partition: int
    fetch_offset: int
    error: int = E.NONE


def _down_convert_magic(version: int) -> int | None:
    if version <= 1:
        return 0
    if version <= 3:
        return 1
    return None


class FetchApi:
    def __init__(self, config: BrokerConfig, replica_manager: ReplicaManager, metadata_cache: MetadataCache) -> None:
        self.config = config
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache

    async def handle(self, header: RequestHeader, req: FetchRequest) -> FetchResponse:
        version = header.request_api_version
        replica_id = req.replica_state.replica_id if version >= 15 else req.replica_id
        wanted, specs = self._resolve(req, version)
        results: list[FetchResult] = []
        if specs:
            max_bytes = min(req.max_bytes, self.config.fetch_max_bytes)
            results = await self.replica_manager.fetch_messages(specs, req.max_wait_ms, min(req.min_bytes, max_bytes),
                                                                max_bytes, req.isolation_level == 1, replica_id)
        answered = [w for w in wanted if w.error == E.NONE]
        # Refused before the read, in Kafka's order: unknown topic ids, then unknown partitions.
        refused = [w for w in wanted if w.error == E.UNKNOWN_TOPIC_ID]
        refused += [w for w in wanted if w.error not in (E.NONE, E.UNKNOWN_TOPIC_ID)]
        parts = [(w, self._partition_data(w, r, version, req.isolation_level == 1, replica_id >= 0))
                 for w, r in zip(answered, results, strict=True)]
        parts += [(w, PD(partition_index=w.partition, error_code=w.error, high_watermark=-1, records=b""))
                  for w in refused]
        topics: list[Any] = []
        for w, pd in parts:
            if topics and topics[-1].topic == w.topic and topics[-1].topic_id == w.topic_id:
                topics[-1].partitions.append(pd)
            else:
                topics.append(FT(topic=w.topic or "", topic_id=w.topic_id, partitions=[pd]))
        return FetchResponse(throttle_time_ms=0, error_code=E.NONE, session_id=0, responses=topics,
                             node_endpoints=self._node_endpoints(parts, context_of(header).listener_name)
                             if version >= 16 else [])

    def _resolve(self, req: FetchRequest, version: int) -> tuple[list[_Wanted], list[FetchSpec]]:
        cache = self.metadata_cache
        names = {m.topic_id: m.name for m in cache.topics.values() if m.topic_id != ZERO_UUID} if version >= 13 else {}
        # A partition asked twice is asked once, where it first appeared, with its last fetch
        # position (FetchRequest.fetchData builds a LinkedHashMap).
        asked: dict[tuple[str | None, bytes, int], Any] = {}
        for t in req.topics:
            name = names.get(t.topic_id) if version >= 13 else t.topic
            topic_id = t.topic_id if version >= 13 else ZERO_UUID
            for p in t.partitions:
                asked[(name, topic_id, p.partition)] = p
        wanted: list[_Wanted] = []
        specs: list[FetchSpec] = []
        for (name, topic_id, index), p in asked.items():
            w = _Wanted(name, topic_id, index, p.fetch_offset)
            wanted.append(w)
            meta = cache.topic(name) if name is not None else None
            if name is None:
                w.error = E.UNKNOWN_TOPIC_ID
            elif meta is None or index not in meta.partitions:
                w.error = E.UNKNOWN_TOPIC_OR_PARTITION
            else:
                specs.append(FetchSpec(name, index, p.fetch_offset, p.partition_max_bytes,
                                       p.current_leader_epoch if version >= 9 else -1,
                                       p.log_start_offset if version >= 5 else -1,
                                       last_fetched_epoch=p.last_fetched_epoch if version >= 12 else -1,
                                       min_one_message=version >= 3))
        return wanted, specs

    def _partition_data(self, w: _Wanted, r: FetchResult, version: int, committed: bool, from_follower: bool) -> Any:
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
        return self._maybe_convert(w, pd, version, from_follower)

    def _maybe_convert(self, w: _Wanted, pd: Any, version: int, from_follower: bool) -> Any:
        """KafkaApis.maybeConvertFetchedData."""
        assert w.topic is not None
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

    def _node_endpoints(self, parts: list[tuple[_Wanted, Any]], listener: str) -> list[Any]:
        NE = FetchResponse.NodeEndpoint
        ids = sorted({pd.current_leader.leader_id for _, pd in parts
                      if pd.current_leader is not None and pd.current_leader.leader_id >= 0})
        brokers = self.metadata_cache.brokers
        # Each leader's endpoint on the request's listener (Kafka: getAliveBrokerNode(id, listenerName)).
        return [NE(node_id=b, host=ep[0], port=ep[1], rack=brokers[b].rack)
                for b in ids if b in brokers and (ep := brokers[b].endpoint(listener)) is not None]
