"""FetchSessionCache / FetchManager as Kafka 3.9's FetchSession.scala: contexts by (session id,
epoch), epochs, forgotten partitions, the incremental answer's filter, and the cache's shards,
size limit and eviction order (FetchSessionCacheShard.tryEvict). The wire-level behaviour is
compared with real Kafka in tests/conformance (Fetch.*.session_*)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from kafkasim.broker import fetch_session as FS
from kafkasim.broker.fetch_session import (
    EVICTION_MS,
    FetchManager,
    FetchSessionCache,
    FullFetchContext,
    IncrementalFetchContext,
    PartitionRequest,
    SessionErrorContext,
    SessionlessFetchContext,
    ShardOutOfRange,
    TopicIdPartition,
)
from kafkasim.protocol import errors as E
from kafkasim.runtime.rng import SeededRng

pytestmark = pytest.mark.unit

ZERO = bytes(16)
TID = bytes(range(16))


@dataclass
class Resp:
    """The fields of a FetchResponse partition the session looks at."""

    high_watermark: int = 10
    log_start_offset: int = 0
    records: Any = b""
    error_code: int = E.NONE
    preferred_read_replica: int = -1
    diverging_epoch: Any = None


def tp(p: int, name: str = "t", tid: bytes = ZERO) -> TopicIdPartition:
    return (tid, name, p)


def req(offset: int = 0) -> PartitionRequest:
    return PartitionRequest(offset, -1, 1 << 20, -1, -1)


def manager(slots: int = 1000) -> FetchManager:
    return FetchManager(FetchSessionCache(slots, SeededRng(1, "fetch-session-ids")))


def open_session(m: FetchManager, parts: list[TopicIdPartition], now: int = 0, version: int = 12,
                 follower: bool = False) -> int:
    ctx = m.new_context(version, 0, 0, follower, {p: req() for p in parts}, [], {}, now)
    assert isinstance(ctx, FullFetchContext)
    error, sid, answered = ctx.generate([(p, Resp()) for p in parts], now)
    assert (error, len(answered)) == (E.NONE, len(parts))
    return sid


def test_epochs_and_the_session_error_contexts() -> None:
    m = manager()
    sid = open_session(m, [tp(0), tp(1)])
    assert sid != 0
    assert isinstance(m.new_context(12, sid, 2, False, {}, [], {}, 1), SessionErrorContext)   # epoch 1 expected
    ctx = m.new_context(12, sid, 1, False, {}, [], {}, 1)
    assert isinstance(ctx, IncrementalFetchContext)
    bad = m.new_context(12, sid, 1, False, {}, [], {}, 2)   # the same epoch again: a duplicate request
    assert isinstance(bad, SessionErrorContext) and bad.error == E.INVALID_FETCH_SESSION_EPOCH
    unknown = m.new_context(12, sid + 1, 1, False, {}, [], {}, 2)
    assert isinstance(unknown, SessionErrorContext) and unknown.error == E.FETCH_SESSION_ID_NOT_FOUND
    by_ids = m.new_context(13, sid, 2, False, {}, [], {}, 2)
    assert isinstance(by_ids, SessionErrorContext) and by_ids.error == E.FETCH_SESSION_TOPIC_ID_ERROR
    assert FS.next_epoch(2**31 - 1) == 1 and FS.next_epoch(-1) == -1


def test_incremental_answers_only_partitions_with_news_and_moves_readers_back() -> None:
    m = manager()
    sid = open_session(m, [tp(0), tp(1), tp(2)])
    ctx = m.new_context(12, sid, 1, False, {}, [], {}, 1)
    assert [p for p, _ in ctx.partitions()] == [tp(0), tp(1), tp(2)]
    news = [(tp(0), Resp()), (tp(1), Resp(records=b"x" * 10)), (tp(2), Resp(high_watermark=11))]
    error, same_sid, answered = ctx.generate(news, 1)
    assert (error, same_sid, [p for p, _ in answered]) == (E.NONE, sid, [tp(1), tp(2)])
    ctx = m.new_context(12, sid, 2, False, {}, [], {}, 2)
    # tp(1) returned records: it goes to the back; tp(2)'s new high watermark is remembered.
    assert [p for p, _ in ctx.partitions()] == [tp(0), tp(2), tp(1)]
    _, _, answered = ctx.generate([(tp(0), Resp(error_code=E.NOT_LEADER_OR_FOLLOWER)), (tp(2), Resp(high_watermark=11)),
                                   (tp(1), Resp())], 2)
    assert [p for p, _ in answered] == [tp(0)]


def test_forgotten_partitions_leave_and_an_emptied_session_closes() -> None:
    m = manager()
    sid = open_session(m, [tp(0), tp(1)])
    ctx = m.new_context(12, sid, 1, False, {tp(2): req(5)}, [tp(1)], {}, 1)
    assert [(p, r.fetch_offset) for p, r in ctx.partitions()] == [(tp(0), 0), (tp(2), 5)]
    last = m.new_context(12, sid, 2, False, {}, [tp(0), tp(2)], {}, 2)
    assert isinstance(last, SessionlessFetchContext)
    assert m.cache.get(sid) is None


def test_full_or_final_fetch_closes_the_named_session() -> None:
    m = manager()
    sid = open_session(m, [tp(0)])
    assert isinstance(m.new_context(12, sid, -1, False, {tp(0): req()}, [], {}, 1), SessionlessFetchContext)
    assert m.cache.get(sid) is None
    sid = open_session(m, [tp(0)])
    assert isinstance(m.new_context(12, sid, 0, False, {tp(0): req()}, [], {}, 1), FullFetchContext)
    assert m.cache.get(sid) is None


def test_topic_ids_identify_partitions_and_late_names_resolve() -> None:
    m = manager()
    unknown = (TID, None, 0)
    sid = open_session(m, [unknown], version=13)
    ctx = m.new_context(13, sid, 1, False, {}, [], {TID: "later"}, 1)
    assert [p for p, _ in ctx.partitions()] == [(TID, "later", 0)]
    ctx = m.new_context(13, sid, 2, False, {}, [(TID, "later", 0)], {TID: "later"}, 2)   # forgotten by id
    assert isinstance(ctx, SessionlessFetchContext)


def test_sessions_go_round_robin_over_eight_shards_each_owning_its_id_range() -> None:
    m = manager()
    ids = [open_session(m, [tp(0)]) for _ in range(9)]
    step = (2**31 - 1) // 8
    assert [i // step for i in ids] == [0, 1, 2, 3, 4, 5, 6, 7, 0]
    for bad in (2**31 - 1, -step - 1):
        with pytest.raises(ShardOutOfRange):
            m.new_context(12, bad, 1, False, {}, [], {}, 0)


def test_a_full_shard_evicts_as_kafka_does() -> None:
    # 8 slots: one per shard, so every 8th session competes with the one before it.
    m = manager(slots=8)

    def in_shard0(parts: int, now: int, follower: bool = False) -> int:
        for _ in range(7):   # the other shards' turns
            m.cache.next_shard()
        ctx = m.new_context(12, 0, 0, follower, {tp(i): req() for i in range(parts)}, [], {}, now)
        return ctx.generate([(tp(i), Resp()) for i in range(parts)], now)[1]

    first = open_session(m, [tp(0), tp(1)], now=0)   # shard 0, 2 partitions, a consumer's
    assert in_shard0(5, now=10) == 0                # not evictable yet by a consumer: no session
    sid = in_shard0(1, now=20, follower=True)        # a follower's session evicts a consumer's at once
    assert sid != 0 and m.cache.get(first) is None
    assert in_shard0(9, now=30) == 0                 # a privileged session is not evictable by a consumer...
    later = EVICTION_MS + 31                         # ...until unused for over 120 s (stale)
    bigger = in_shard0(3, now=later)
    assert bigger != 0 and m.cache.get(sid) is None
    # Old enough (created over 120 s before its last use) a session is evictable by anyone with
    # more partitions: the newcomer's key (privileged, size, 0) must not be smaller, so as many
    # partitions lose on the id.
    m.cache.shard_of(bigger).touch(m.cache.shard_of(bigger).sessions[bigger], later + EVICTION_MS + 1)
    assert in_shard0(3, now=later + EVICTION_MS + 2) == 0
    assert in_shard0(4, now=later + EVICTION_MS + 3) != 0
    assert m.cache.get(bigger) is None and m.cache.size == 1
