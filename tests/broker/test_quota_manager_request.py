"""Request quotas (ClientRequestQuotaManager): the request timer charges a handler's own time and
its ZooKeeper waits but not a wait parked in a purgatory; Kafka's exemptions; and, in the
simulated world, a client over its request_percentage is throttled (throttle_time_ms, bounded by
one quota window, the channel muted) while a long-polling consumer under the same quota is not."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from kafkasim.broker.purgatory import park, parking
from kafkasim.broker.quota_manager import REQUEST, ClientQuotaManager, QuotaConfigs
from kafkasim.broker.quota_manager_request import RequestTimer, exempt, percentage
from kafkasim.protocol import api as A
from kafkasim.protocol.messages.alter_client_quotas import AlterClientQuotasRequest as Q
from kafkasim.protocol.messages.describe_client_quotas import DescribeClientQuotasRequest
from kafkasim.protocol.messages.fetch import FetchRequest
from kafkasim.runtime.api import NodeRuntime
from kafkasim.runtime.sim.world import SimWorld
from tests.broker.test_idempotence import _connect, _run

pytestmark = pytest.mark.sim


def _on_sim_node(body: Any) -> Any:
    world = SimWorld(3)
    rt = world.add_node("n").runtime
    out: dict[str, Any] = {}

    async def main() -> None:
        out["result"] = await body(rt)

    rt.spawn(main())
    world.run(60_000)
    return out["result"]


def test_the_timer_charges_io_waits_but_not_parked_waits() -> None:
    async def body(rt: NodeRuntime) -> tuple[float, str]:
        async def handler() -> str:
            await rt.sleep(30)            # e.g. a ZooKeeper read: charged
            parking()
            await rt.sleep(500)           # a DelayedFetch long poll: not charged
            fut = rt.future()
            rt.call_later(300, lambda: fut.set_result("done"))
            result: str = await park(fut)   # a DelayedJoin: not charged
            await rt.sleep(20)            # a disk flush after it: charged
            return result
        timer = RequestTimer(rt.monotonic_ms)
        result = await timer.run(handler())
        return timer.request_ms, result

    request_ms, result = _on_sim_node(body)
    assert result == "done"
    assert request_ms == pytest.approx(50.0)


def test_the_timer_passes_a_handlers_exception_through() -> None:
    async def body(rt: NodeRuntime) -> tuple[float, str]:
        async def handler() -> None:
            await rt.sleep(10)
            raise ValueError("bad")
        timer = RequestTimer(rt.monotonic_ms)
        try:
            await timer.run(handler())
        except ValueError as exc:
            return timer.request_ms, str(exc)
        return timer.request_ms, "no exception"

    assert _on_sim_node(body) == (pytest.approx(10.0), "bad")


def test_kafkas_exemptions() -> None:
    consumer = SimpleNamespace(replica_id=-1, replica_state=SimpleNamespace(replica_id=-1))
    follower = SimpleNamespace(replica_id=2, replica_state=SimpleNamespace(replica_id=2))
    for key in (A.LEADER_AND_ISR, A.STOP_REPLICA, A.UPDATE_METADATA, A.CONTROLLED_SHUTDOWN, A.WRITE_TXN_MARKERS,
                A.ALTER_PARTITION):
        assert exempt(key, 0, None)
    assert exempt(A.FETCH, 11, follower) and exempt(A.FETCH, 15, follower)
    assert not exempt(A.FETCH, 11, consumer) and not exempt(A.FETCH, 15, consumer)
    assert exempt(A.PRODUCE, 9, SimpleNamespace(acks=0))
    assert not exempt(A.PRODUCE, 9, SimpleNamespace(acks=-1))
    # Through KafkaApis, ApiVersions is throttled like any other request (handleApiVersionsRequest
    # uses sendResponseMaybeThrottle); only the SASL authenticator's answers go unrecorded.
    assert not exempt(A.API_VERSIONS, 3, None) and not exempt(A.METADATA, 12, None)


def test_the_request_throttle_is_bounded_by_one_window() -> None:
    configs = QuotaConfigs()
    configs.set("clients/c1", {REQUEST: "10"})
    m = ClientQuotaManager(REQUEST, configs, 11, 1000.0, max_throttle_ms=1000.0)
    # 50 % over 10 s of window against 10 %: Kafka's formula says (50 - 10) / 10 × 10 s = 40 s.
    assert m.record_and_get_throttle_ms("ANONYMOUS", "c1", percentage(5000), 0) == 1000
    assert percentage(1000) == pytest.approx(100.0)   # a second of a thread's time: 100 percent-seconds


async def _set_request_quota(w: Any, percent: float) -> None:
    EN = Q.EntryData
    r = await w.call(A.ALTER_CLIENT_QUOTAS, 1, Q(entries=[EN(
        entity=[EN.EntityData(entity_type="client-id", entity_name="t")],
        ops=[EN.OpData(key="request_percentage", value=percent, remove=False)])], validate_only=False))
    assert r.entries[0].error_code == 0


def test_a_client_over_its_request_quota_is_throttled_and_muted() -> None:
    """DescribeClientQuotas reads ZooKeeper: its waits are request time. At 1 % (10 ms of each
    second) a loop of them goes over; each answer then carries a throttle time of at most one
    window, and the next request waits out the muted channel."""
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        w = await _connect(rt)
        await _set_request_quota(w, 1)
        await rt.sleep(500)
        out = []
        for _ in range(60):
            start = rt.monotonic_ms()
            r = await w.call(A.DESCRIBE_CLIENT_QUOTAS, 1, DescribeClientQuotasRequest(components=[], strict=False))
            out.append((r.throttle_time_ms, rt.monotonic_ms() - start))
        return out

    answers = _run(body, client_quotas=True)
    throttles = [t for t, _ in answers]
    assert any(t > 0 for t in throttles), throttles
    assert max(throttles) <= 1000       # quota.window.size.seconds = 1
    # A throttled answer mutes the channel: the request after it waits (about) that long.
    waits = [(t, answers[i + 1][1]) for i, (t, _) in enumerate(answers[:-1]) if t > 0]
    assert all(waited >= t - 1 for t, waited in waits), waits


def test_a_long_poll_under_a_small_request_quota_is_not_throttled() -> None:
    """Fetches that wait 500 ms in the purgatory for data that never comes: parked, so not
    charged — none is throttled under a 1 % quota that charging the wait would exceed 50-fold."""
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        w = await _connect(rt, "lp")
        await _set_request_quota(w, 1)
        await rt.sleep(500)
        FT = FetchRequest.FetchTopic
        req = FetchRequest(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                           topics=[FT(topic="lp", partitions=[FT.FetchPartition(
                               partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
        out = []
        for _ in range(30):
            start = rt.monotonic_ms()
            r = await w.call(A.FETCH, 11, req)
            out.append((r.throttle_time_ms, rt.monotonic_ms() - start))
        return out

    answers = _run(body, client_quotas=True)
    assert all(waited >= 500 for _, waited in answers)    # they did wait in the purgatory
    assert all(t == 0 for t, _ in answers), answers
