"""Client quotas: Kafka's Rate and throttle-time arithmetic (unit), which quota entity applies
(DefaultQuotaCallback's precedence), and a producer over its produce quota in the simulated
world: throttled answers, a muted channel, and a measured rate that converges to the quota."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from kafkasim.broker.quota_manager import FETCH, PRODUCE, ClientQuotaManager, QuotaConfigs, Rate
from kafkasim.harness.runner import run_scenario
from kafkasim.harness.scenario import load_scenario
from kafkasim.protocol import api as A
from kafkasim.protocol.messages.alter_client_quotas import AlterClientQuotasRequest as Q
from kafkasim.protocol.messages.api_versions import ApiVersionsRequest
from kafkasim.protocol.messages.produce import ProduceRequest
from kafkasim.records.batch import Record, build_batch
from kafkasim.runtime.api import NodeRuntime
from kafkasim.runtime.sim.world import SimWorld
from tests.broker.test_idempotence import BROKER, _connect, _restart_broker, _run

pytestmark = pytest.mark.sim
SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def test_rate_counts_at_least_samples_minus_one_windows() -> None:
    r = Rate(11, 1000.0)
    r.record(100, 0)
    assert r.window_size_ms(0) == 10_000          # no full window yet: (11 - 1) windows assumed
    assert r.measure(0) == pytest.approx(10.0)
    for t in range(1, 30):                         # 100 bytes every second for 30 s
        r.record(100, t * 1000)
    # 11 samples kept (the oldest started 10 s ago), 1100 bytes over 10 s.
    assert r.measure(29_000) == pytest.approx(110.0)
    assert r.measure(29_000 + 11_000) == pytest.approx(0.0)   # all samples expired


def test_throttle_time_is_kafkas_formula() -> None:
    configs = QuotaConfigs()
    configs.set("clients/c1", {PRODUCE: "1000"})
    m = ClientQuotaManager(PRODUCE, configs, 11, 1000.0)
    assert m.record_and_get_throttle_ms("ANONYMOUS", "c1", 5000, 0) == 0       # 500/s: under
    # 15000 bytes over the 10 s window = 1500/s: (1500 - 1000) / 1000 * 10000 ms.
    assert m.record_and_get_throttle_ms("ANONYMOUS", "c1", 10000, 0) == 5000
    assert m.record_and_get_throttle_ms("ANONYMOUS", "other", 10**6, 0) == 0   # no quota: unlimited
    assert not ClientQuotaManager(FETCH, configs, 11, 1000.0).enabled()


def test_the_most_specific_quota_entity_applies_per_entity() -> None:
    configs = QuotaConfigs()
    configs.set("users/<default>", {PRODUCE: "10"})
    configs.set("users/alice", {PRODUCE: "20"})
    configs.set("users/alice/clients/c1", {PRODUCE: "30"})
    configs.set("clients/c2", {PRODUCE: "40"})
    assert configs.resolve(PRODUCE, "alice", "c1") == (("alice", "c1"), 30.0)
    assert configs.resolve(PRODUCE, "alice", "c2") == (("alice", ""), 20.0)
    assert configs.resolve(PRODUCE, "bob", "c2") == (("bob", ""), 10.0)        # user default before client
    configs.set("users/<default>", {})
    assert configs.resolve(PRODUCE, "bob", "c2") == (("", "c2"), 40.0)
    assert configs.resolve(PRODUCE, "bob", "c3") is None


async def produce_loop(rt: NodeRuntime, version: int, seconds: int) -> list[tuple[float, int, int]]:
    """Produce 2 KB batches back to back; (time, bytes, throttle_time_ms) per answer."""
    w = await _connect(rt, "q")
    EN = Q.EntryData
    await w.call(A.ALTER_CLIENT_QUOTAS, 1, Q(entries=[EN(
        entity=[EN.EntityData(entity_type="client-id", entity_name="t")],
        ops=[EN.OpData(key="producer_byte_rate", value=20_000, remove=False)])], validate_only=False))
    await rt.sleep(500)
    out = []
    PD = ProduceRequest.TopicProduceData.PartitionProduceData
    start = rt.monotonic_ms()
    while rt.monotonic_ms() - start < seconds * 1000:
        batch = build_batch([Record(0, None, b"x" * 2000)])
        req = ProduceRequest(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
            ProduceRequest.TopicProduceData(name="q", partition_data=[PD(index=0, records=batch)])])
        r = await w.call(A.PRODUCE, version, req)
        out.append((rt.monotonic_ms() - start, len(batch), r.throttle_time_ms))
    return out


def test_with_client_quotas_off_nothing_is_throttled() -> None:
    """client.quotas=false (kafkasim's switch; Kafka always enforces them): the quota znode is
    there, nothing is throttled."""
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        return await produce_loop(rt, 9, 5)

    assert all(t == 0 for _, _, t in _run(body, client_quotas=False))


def test_a_quota_set_during_a_run_is_enforced_by_default_and_after_a_restart() -> None:
    """No client.quotas anywhere: AlterClientQuotas during the run reaches the broker through
    /config/changes, the producer is throttled (throttle_time_ms, then a muted channel: its next
    request waits), and the broker, restarted, reads the quota back at startup."""
    async def burst(rt: NodeRuntime, w: Any) -> tuple[int, float]:
        """Produce until throttled a second or more; (that throttle, how long the next request
        then took — an ApiVersions, answered at once unless the channel is muted)."""
        for _ in range(200):
            r = await w.call(A.PRODUCE, 9, _batch())
            if r.throttle_time_ms >= 1000:
                start = rt.monotonic_ms()
                await w.call(A.API_VERSIONS, 0, ApiVersionsRequest())
                return r.throttle_time_ms, rt.monotonic_ms() - start
        return 0, 0.0

    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        w = await _connect(rt, "t")
        unthrottled = [(await w.call(A.PRODUCE, 9, _batch())).throttle_time_ms for _ in range(20)]
        EN = Q.EntryData
        await w.call(A.ALTER_CLIENT_QUOTAS, 1, Q(entries=[EN(
            entity=[EN.EntityData(entity_type="client-id", entity_name="t")],
            ops=[EN.OpData(key="producer_byte_rate", value=5_000, remove=False)])], validate_only=False))
        await rt.sleep(500)
        before = await burst(rt, w)
        w2 = await _restart_broker(world, rt, servers)
        after = await burst(rt, w2)
        return unthrottled, before, after, servers["broker"].config.client_quotas

    unthrottled, (throttle, muted_ms), (throttle2, muted2_ms), quotas_on = _run(body)
    assert quotas_on and unthrottled == [0] * 20      # 40 KB before any quota: nothing throttled
    # The channel stays muted that long (from the answer leaving the broker, a hop before the
    # client has it).
    assert throttle >= 1000 and muted_ms >= throttle - 5
    assert throttle2 >= 1000 and muted2_ms >= throttle2 - 5   # the restarted broker read the quota back


def test_after_a_new_zookeeper_session_the_broker_still_hears_of_quota_changes() -> None:
    """The /config/changes watch went with the expired session; the listener's re-read in the new
    session (pipelined behind the broker's re-registration) sets it again."""
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        w = await _connect(rt, "t")
        expired = world.zookeeper.expire_host(BROKER)
        await rt.sleep(3_000)   # the broker learns of it at its next ping and opens a new session
        EN = Q.EntryData
        await w.call(A.ALTER_CLIENT_QUOTAS, 1, Q(entries=[EN(
            entity=[EN.EntityData(entity_type="client-id", entity_name="t")],
            ops=[EN.OpData(key="producer_byte_rate", value=5_000, remove=False)])], validate_only=False))
        await rt.sleep(500)
        throttles = [(await w.call(A.PRODUCE, 9, _batch())).throttle_time_ms for _ in range(60)]
        return expired, servers["broker"].zk.session_generation, throttles

    expired, generation, throttles = _run(body)
    assert expired and generation == 1
    assert max(throttles) > 0


@pytest.mark.parametrize("name", ["broker-kill-restart", "controller-zk-session-expiry"])
def test_enforcing_quotas_moves_no_quota_less_schedule(name: str, tmp_path: Path) -> None:
    """The quota manager's reads ride on other ZooKeeper requests (startup, a restart, a new
    session): a run that sets no quota has the same trace, bit for bit, with quotas off."""
    scenario = load_scenario(str(SCENARIOS / f"{name}.toml"))
    off = dataclasses.replace(scenario, broker_config={**scenario.broker_config, "client.quotas": "false"})
    hashes = [run_scenario(s, 1, str(tmp_path / str(i))).run["trace_hash"] for i, s in enumerate((scenario, off))]
    assert hashes[0] == hashes[1]


def _batch() -> ProduceRequest:
    PD = ProduceRequest.TopicProduceData.PartitionProduceData
    return ProduceRequest(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name="t", partition_data=[
            PD(index=0, records=build_batch([Record(0, None, b"x" * 2000)]))])])


@pytest.mark.parametrize("version", [9, 5])
def test_a_producer_over_its_quota_is_throttled_to_it(version: int) -> None:
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        return await produce_loop(rt, version, 100)

    answers = _run(body)
    assert any(t > 0 for _, _, t in answers)
    late = [(at, n) for at, n, _ in answers if at >= 20_000]
    assert late[-1][0] > 95_000
    rate = sum(n for _, n in late) / ((late[-1][0] - late[0][0]) / 1000)
    # Kafka's windowed rate swings around the quota (over-allowing as old samples expire, then
    # throttling longer), so the average is taken over 80 s; the request bytes are a little
    # more than the batch bytes counted here.
    assert 0.9 * 20_000 < rate < 1.03 * 20_000, rate


def test_a_consumer_over_its_fetch_quota_gets_an_empty_throttled_answer() -> None:
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        from kafkasim.protocol.messages.fetch import FetchRequest
        w = await _connect(rt, "f")
        PD = ProduceRequest.TopicProduceData.PartitionProduceData
        for _ in range(10):
            await w.call(A.PRODUCE, 9, ProduceRequest(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
                ProduceRequest.TopicProduceData(name="f", partition_data=[
                    PD(index=0, records=build_batch([Record(0, None, b"x" * 10_000)]))])]))
        EN = Q.EntryData
        await w.call(A.ALTER_CLIENT_QUOTAS, 1, Q(entries=[EN(
            entity=[EN.EntityData(entity_type="client-id", entity_name="t")],
            ops=[EN.OpData(key="consumer_byte_rate", value=10_000, remove=False)])], validate_only=False))
        await rt.sleep(500)
        FT = FetchRequest.FetchTopic
        out = []
        for offset in (0, 0):
            req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                               topics=[FT(topic="f", partitions=[FT.FetchPartition(
                                   partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])])
            start = rt.monotonic_ms()
            r = await w.call(A.FETCH, 11, req)
            out.append((r.throttle_time_ms, sum(len(p.records or b"") for t in r.responses for p in t.partitions),
                        rt.monotonic_ms() - start))
        return out

    (throttle, size, _), (throttle2, size2, waited) = _run(body)
    # ~100 KB against 10 KB/s over the 10 s window: throttled, with nothing in the answer.
    assert throttle > 0 and size == 0
    # The next fetch waits out the muted channel (which started as the answer left the broker, a
    # network hop before the client had it). The throttled bytes were unrecorded and the window
    # grew by the throttle time — which Kafka computes for exactly that — so the same fetch now
    # fits the quota and gets its data.
    assert waited >= throttle - 1 and throttle2 == 0 and size2 >= 100_000   # all ten 10 KB batches


def test_a_broker_dying_before_its_quota_load_leaves_no_unawaited_coroutine(tmp_path: Path) -> None:
    """kill-failover-swarm seed 1 with BUGGIFY kills a broker between queueing its quota reads and
    awaiting their load; the load's coroutine is made only when awaited, so Python has no
    never-awaited coroutine to warn of when it collects the dead broker."""
    import gc
    import warnings

    from kafkasim.runtime.buggify import BuggifySpec

    scenario = load_scenario(str(SCENARIOS / "crash-swarm" / "kill-failover-swarm.toml"))
    scenario = dataclasses.replace(scenario, buggify=BuggifySpec(enabled=True))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run_scenario(scenario, 1, str(tmp_path))
        gc.collect()
    assert result.run["verdict"] == "pass"
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []
