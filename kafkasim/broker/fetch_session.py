"""Fetch sessions (KIP-227), as Kafka 3.9's FetchSession.scala keeps them: FetchManager,
FetchSessionCache (8 shards), FetchSession, CachedPartition and the four FetchContexts.

A Fetch request (v7+) carries (session_id, session_epoch):

  session_id  epoch       context
  any         0 (INITIAL) full: the partitions asked, all answered; the session named (if any)
                          is closed and a new one is created if the cache has room -> its id
  any         -1 (FINAL)  sessionless: the session named (if any) is closed, none created -> id 0
  id          N > 0       incremental: the session's partitions (updated by those asked, minus the
                          forgotten ones) are fetched; only partitions with news are answered
                          (records, a new high watermark or log start offset, an error, a
                          preferred replica, a diverging epoch). Unknown id ->
                          FETCH_SESSION_ID_NOT_FOUND; N not the session's epoch ->
                          INVALID_FETCH_SESSION_EPOCH; a v13+ request on a session built by
                          names (or the reverse) -> FETCH_SESSION_TOPIC_ID_ERROR. A session left
                          with no partitions is closed and the answer is sessionless.

A session's epoch is 1 when created and moves on (wrapping to 1) with every incremental fetch.
Partitions are identified by (topic id, partition) when the session uses topic ids (v13+) and by
(name, partition) otherwise; a partition that returned records moves to the end of the session's
order, so the next fetches start with the others (fairness).

The cache: `max.incremental.fetch.session.cache.slots` (default 1000) split evenly over 8 shards;
new sessions go to the shards in turn, and each shard owns an eighth of the session id range.
When a shard is full, a new session may evict (FetchSessionCacheShard.tryEvict) the least
recently used session if unused for over 120 s, else the smallest "evictable" one — by
(privileged, partition count, id), followers' sessions being privileged — if the newcomer's key
is not smaller; a session is evictable by anyone only 120 s after its creation, and a consumer's
session at once by a privileged (follower) newcomer. Otherwise no session is created (id 0: the
client keeps sending full requests).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kafkasim.protocol import errors as E
from kafkasim.runtime.api import Rng

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
NUM_SHARDS = 8                      # KafkaBroker.NumFetchSessionCacheShards
EVICTION_MS = 120_000               # KafkaServer.MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS
INT_MAX = 2**31 - 1
ZERO_UUID = bytes(16)

# A partition as a fetch names it: (topic id, topic name or None when the id is unknown, index).
TopicIdPartition = tuple[bytes, "str | None", int]


def next_epoch(prev: int) -> int:
    """FetchMetadata.nextEpoch: FINAL stays FINAL; after Int.MaxValue comes 1."""
    if prev < 0:
        return FINAL_EPOCH
    return 1 if prev == INT_MAX else prev + 1


def key_of(tp: TopicIdPartition) -> tuple[Any, ...]:
    """CachedPartition's equality: by id when the id is set, else by name."""
    topic_id, name, index = tp
    return ("id", topic_id, index) if topic_id != ZERO_UUID else ("name", name, index)


@dataclass(init=False)
class PartitionRequest:
    """FetchRequest.PartitionData: what is asked of one partition."""

    fetch_offset: int
    log_start_offset: int
    max_bytes: int
    current_leader_epoch: int
    last_fetched_epoch: int

    # Written out (init=False; its defaults are the only ones) so that mypyc compiles it: a
    # dataclass-made __init__ runs interpreted.
    def __init__(self, fetch_offset: int, log_start_offset: int, max_bytes: int, current_leader_epoch: int,
                 last_fetched_epoch: int) -> None:
        self.fetch_offset = fetch_offset
        self.log_start_offset = log_start_offset
        self.max_bytes = max_bytes
        self.current_leader_epoch = current_leader_epoch
        self.last_fetched_epoch = last_fetched_epoch


@dataclass
class CachedPartition:
    topic: str | None
    topic_id: bytes
    partition: int
    req: PartitionRequest
    high_watermark: int = -1
    local_log_start_offset: int = -1

    @property
    def tp(self) -> TopicIdPartition:
        return (self.topic_id, self.topic, self.partition)

    def maybe_update_response_data(self, resp: Any, update: bool) -> bool:
        """CachedPartition.maybeUpdateResponseData: must this partition be in an incremental
        answer? (and, when `update`, remember what it answered)."""
        must = records_size(resp.records) > 0
        if self.high_watermark != resp.high_watermark:
            must = True
            if update:
                self.high_watermark = resp.high_watermark
        if self.local_log_start_offset != resp.log_start_offset:
            must = True
            if update:
                self.local_log_start_offset = resp.log_start_offset
        if resp.preferred_read_replica != -1:
            must = True
        if resp.error_code != E.NONE:
            if update:
                self.high_watermark = -1
            must = True
        div = resp.diverging_epoch
        if div is not None and (div.epoch != -1 or div.end_offset != -1):
            must = True
        return must


def records_size(records: Any) -> int:
    return 0 if records is None else len(records)


class FetchSession:
    def __init__(self, session_id: int, privileged: bool, partitions: dict[tuple[Any, ...], CachedPartition],
                 uses_topic_ids: bool, now: int) -> None:
        self.id = session_id
        self.privileged = privileged
        self.partition_map = partitions            # insertion-ordered, like ImplicitLinkedHashCollection
        self.uses_topic_ids = uses_topic_ids
        self.creation_ms = now
        self.last_used_ms = now
        self.epoch = next_epoch(INITIAL_EPOCH)
        self.cached_size = -1

    def evictable_key(self) -> tuple[bool, int, int]:
        return (self.privileged, self.cached_size, self.id)

    def update(self, fetch_data: dict[TopicIdPartition, PartitionRequest],
               to_forget: list[TopicIdPartition]) -> tuple[int, int, int]:
        """FetchSession.update: add or update the partitions asked, drop the forgotten ones;
        (added, updated, removed) counts."""
        added = updated = removed = 0
        for tp, req in fetch_data.items():
            cached = self.partition_map.get(key_of(tp))
            if cached is None:
                self.partition_map[key_of(tp)] = CachedPartition(tp[1], tp[0], tp[2], req)
                added += 1
            else:
                cached.req = req
                updated += 1
        for tp in to_forget:
            if self.partition_map.pop(key_of(tp), None) is not None:
                removed += 1
        return added, updated, removed


class FetchSessionCacheShard:
    def __init__(self, max_entries: int, eviction_ms: int, session_id_range: int, shard_num: int, rng: Rng) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.session_id_range = session_id_range
        self.shard_num = shard_num
        self.rng = rng
        self.sessions: dict[int, FetchSession] = {}
        # Kafka's TreeMaps, as id -> key (the key as of the session's last touch); the smallest
        # key is found by min() — a shard holds at most max.incremental.fetch.session.cache.slots/8.
        self.evictable_by_all: dict[int, tuple[bool, int, int]] = {}
        self.evictable_by_privileged: dict[int, tuple[bool, int, int]] = {}
        self.num_partitions = 0

    def new_session_id(self) -> int:
        lo, hi = max(1, self.shard_num * self.session_id_range), (self.shard_num + 1) * self.session_id_range
        while True:
            sid = self.rng.randint(lo, hi - 1)   # ThreadLocalRandom.nextInt(origin, bound): bound excluded
            if sid not in self.sessions and sid != INVALID_SESSION_ID:
                return sid

    def maybe_create_session(self, now: int, privileged: bool, size: int, uses_topic_ids: bool,
                             create_partitions: Callable[[], dict[tuple[Any, ...], CachedPartition]]) -> int:
        if len(self.sessions) < self.max_entries or self._try_evict(privileged, (privileged, size, 0), now):
            session = FetchSession(self.new_session_id(), privileged, create_partitions(), uses_topic_ids, now)
            self.sessions[session.id] = session
            self.touch(session, now)
            return session.id
        return INVALID_SESSION_ID

    def _try_evict(self, privileged: bool, key: tuple[bool, int, int], now: int) -> bool:
        if not self.sessions:
            return False
        stalest = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now - stalest.last_used_ms > self.eviction_ms:
            self.remove(stalest)
            return True
        candidates = self.evictable_by_privileged if privileged else self.evictable_by_all
        if not candidates:
            return False
        victim_key = min(candidates.values())
        if key < victim_key:
            return False
        self.remove(self.sessions[victim_key[2]])
        return True

    def remove(self, session: FetchSession) -> FetchSession | None:
        self.evictable_by_all.pop(session.id, None)
        self.evictable_by_privileged.pop(session.id, None)
        removed = self.sessions.pop(session.id, None)
        if removed is not None:
            self.num_partitions -= session.cached_size
        return removed

    def touch(self, session: FetchSession, now: int) -> None:
        """FetchSessionCacheShard.touch: the session was used; re-key it in the eviction maps."""
        session.last_used_ms = now
        if session.cached_size != -1:
            self.evictable_by_all.pop(session.id, None)
            self.evictable_by_privileged.pop(session.id, None)
            self.num_partitions -= session.cached_size
        session.cached_size = len(session.partition_map)
        key = session.evictable_key()
        old = now - session.creation_ms > self.eviction_ms
        if not session.privileged or old:
            self.evictable_by_privileged[session.id] = key
        if old:
            self.evictable_by_all[session.id] = key
        self.num_partitions += session.cached_size


class ShardOutOfRange(Exception):
    """A session id no shard owns (negative, or in the few ids past 8 × Int.MaxValue/8): Kafka's
    `cacheShards(sessionId / range)` throws, and the request gets UNKNOWN_SERVER_ERROR."""


class FetchSessionCache:
    def __init__(self, max_slots: int, rng: Rng, eviction_ms: int = EVICTION_MS, shards: int = NUM_SHARDS) -> None:
        rng_range = INT_MAX // shards
        self.shards = [FetchSessionCacheShard(max_slots // shards, eviction_ms, rng_range, n, rng)
                       for n in range(shards)]
        self.counter = 0

    def shard_of(self, session_id: int) -> FetchSessionCacheShard:
        rng_range = self.shards[0].session_id_range
        index = abs(session_id) // rng_range * (1 if session_id >= 0 else -1)   # Java's int division
        if not 0 <= index < len(self.shards):
            raise ShardOutOfRange(session_id)
        return self.shards[index]

    def next_shard(self) -> FetchSessionCacheShard:
        shard = self.shards[self.counter % len(self.shards)]
        self.counter = (self.counter + 1) & INT_MAX   # Utils.toPositive(counter.getAndIncrement)
        return shard

    def get(self, session_id: int) -> FetchSession | None:
        return self.shard_of(session_id).sessions.get(session_id)

    @property
    def size(self) -> int:
        return sum(len(s.sessions) for s in self.shards)


# ------------------------------------------------------------------ contexts
Answer = tuple[int, int, list[tuple[TopicIdPartition, Any]]]   # (top-level error, session id, partitions)


class FetchContext:
    """What a Fetch reads (`partitions`) and how its answer is built (`generate`)."""

    def partitions(self) -> Iterable[tuple[TopicIdPartition, PartitionRequest]]:
        raise NotImplementedError

    def generate(self, parts: list[tuple[TopicIdPartition, Any]], now: int) -> Answer:
        raise NotImplementedError


class SessionErrorContext(FetchContext):
    def __init__(self, error: int) -> None:
        self.error = error

    def partitions(self) -> Iterable[tuple[TopicIdPartition, PartitionRequest]]:
        return []

    def generate(self, parts: list[tuple[TopicIdPartition, Any]], now: int) -> Answer:
        return self.error, INVALID_SESSION_ID, []


class SessionlessFetchContext(FetchContext):
    def __init__(self, fetch_data: dict[TopicIdPartition, PartitionRequest]) -> None:
        self.fetch_data = fetch_data

    def partitions(self) -> Iterable[tuple[TopicIdPartition, PartitionRequest]]:
        return list(self.fetch_data.items())

    def generate(self, parts: list[tuple[TopicIdPartition, Any]], now: int) -> Answer:
        return E.NONE, INVALID_SESSION_ID, parts


class FullFetchContext(SessionlessFetchContext):
    """Answers every partition, then caches them all in a new session (if the cache lets it)."""

    def __init__(self, cache: FetchSessionCache, fetch_data: dict[TopicIdPartition, PartitionRequest],
                 uses_topic_ids: bool, from_follower: bool) -> None:
        super().__init__(fetch_data)
        self.cache = cache
        self.uses_topic_ids = uses_topic_ids
        self.from_follower = from_follower

    def generate(self, parts: list[tuple[TopicIdPartition, Any]], now: int) -> Answer:
        def create() -> dict[tuple[Any, ...], CachedPartition]:
            out: dict[tuple[Any, ...], CachedPartition] = {}
            for tp, resp in parts:
                out[key_of(tp)] = CachedPartition(tp[1], tp[0], tp[2], self.fetch_data[tp], resp.high_watermark,
                                                  resp.log_start_offset)
            return out
        session_id = self.cache.next_shard().maybe_create_session(now, self.from_follower, len(parts),
                                                                  self.uses_topic_ids, create)
        return E.NONE, session_id, parts


class IncrementalFetchContext(FetchContext):
    def __init__(self, session: FetchSession, req_epoch: int, topic_names: dict[bytes, str]) -> None:
        self.session = session
        self.req_epoch = req_epoch
        self.topic_names = topic_names

    def partitions(self) -> Iterable[tuple[TopicIdPartition, PartitionRequest]]:
        out = []
        for cached in self.session.partition_map.values():
            if self.session.uses_topic_ids and cached.topic is None:   # maybeResolveUnknownName
                cached.topic = self.topic_names.get(cached.topic_id)
            out.append((cached.tp, cached.req))
        return out

    def generate(self, parts: list[tuple[TopicIdPartition, Any]], now: int) -> Answer:
        session = self.session
        if session.epoch != next_epoch(self.req_epoch):
            # Another request on the session moved its epoch while this one was fetching.
            return E.INVALID_FETCH_SESSION_EPOCH, session.id, []
        kept = []
        for tp, resp in parts:
            key = key_of(tp)
            cached = session.partition_map.get(key)
            if cached is None:   # forgotten by a concurrent request: nothing to compare with
                continue
            if cached.maybe_update_response_data(resp, True):
                kept.append((tp, resp))
                if records_size(resp.records) > 0:   # to the back of the line
                    session.partition_map[key] = session.partition_map.pop(key)
        return E.NONE, session.id, kept


class FetchManager:
    def __init__(self, cache: FetchSessionCache) -> None:
        self.cache = cache

    def new_context(self, version: int, session_id: int, epoch: int, from_follower: bool,
                    fetch_data: dict[TopicIdPartition, PartitionRequest], to_forget: list[TopicIdPartition],
                    topic_names: dict[bytes, str], now: int) -> FetchContext:
        """FetchManager.newContext. Raises ShardOutOfRange for a session id no shard owns."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):   # FetchMetadata.isFull
            if session_id != INVALID_SESSION_ID:
                shard = self.cache.shard_of(session_id)
                session = shard.sessions.get(session_id)
                if session is not None:
                    shard.remove(session)
            if epoch == FINAL_EPOCH:
                return SessionlessFetchContext(fetch_data)
            return FullFetchContext(self.cache, fetch_data, version >= 13, from_follower)
        shard = self.cache.shard_of(session_id)
        session = shard.sessions.get(session_id)
        if session is None:
            return SessionErrorContext(E.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return SessionErrorContext(E.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != (version >= 13):
            return SessionErrorContext(E.FETCH_SESSION_TOPIC_ID_ERROR)
        session.update(fetch_data, to_forget)
        if not session.partition_map:
            shard.remove(session)
            return SessionlessFetchContext(fetch_data)
        shard.touch(session, now)
        session.epoch = next_epoch(session.epoch)
        return IncrementalFetchContext(session, epoch, topic_names)
