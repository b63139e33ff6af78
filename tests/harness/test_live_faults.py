"""LiveFaultBackend on a simulated cluster (no wall clock: the backend only needs a world): specs
checked completely before anything acts, roles resolved when applied, durations as simulated
timers, each fault undone exactly once."""

from __future__ import annotations

from typing import Any

import pytest

from kafkasim.client.producer import Producer, ProducerConfig
from kafkasim.harness.live_faults import LiveFaultBackend
from kafkasim.runtime.api import NodeRuntime
from kafkasim.runtime.control_api import FaultError
from tests.cluster.cluster_sim import Cluster, run_cluster

pytestmark = pytest.mark.sim


def backend(c: Cluster) -> LiveFaultBackend:
    return LiveFaultBackend(c.world, c.sim, lambda n: f"127.0.0.1:{9092 + int(n[-1])}", lambda: {},
                            lambda: 1_000.0 + c.world.now_ms())


def refused(b: LiveFaultBackend, spec: dict[str, Any]) -> tuple[int, str]:
    with pytest.raises(FaultError) as e:
        b.apply(spec)
    return e.value.status, e.value.message


def test_bad_specs_are_refused_and_change_nothing() -> None:
    async def body(c: Cluster, rt: NodeRuntime) -> list[tuple[int, str]]:
        await c.create_topic(rt, "t", 1, 3)
        b = backend(c)
        traced = c.world.trace.count
        out = [refused(b, s) for s in (
            {"kind": "explode"},
            {"kind": "request_error", "api_key": 0, "error_code": 6, "targets": ["broker-7"]},
            {"kind": "crash", "targets": ["broker-0"], "at_ms": 5},
            {"kind": "crash", "targets": ["broker-9"]},
            {"kind": "crash", "targets": ["broker-0", "leader:nope-0"]},   # the second fails: none acts
            {"kind": "crash", "targets": ["coordinator:shard:x"]},
            {"kind": "crash", "targets": ["zookeeper"]},
            {"kind": "clog", "from": "broker-0", "to": "broker-1"},          # no extra_ms
            {"kind": "pause", "targets": ["broker-0"]},                      # no duration
        )]
        assert all(c.world.nodes[f"broker-{i}"].alive for i in range(3))
        assert b.active() == [] and b.history() == []
        assert c.world.trace.count == traced  # not even a trace line
        return out

    out = run_cluster(body)
    assert [s for s, _ in out] == [404, 404, 400, 404, 409, 404, 400, 400, 400]
    assert "unknown fault kind 'explode'" in out[0][1]
    assert "broker-9" in out[3][1] and "broker-0" in out[3][1]  # names the nodes there are
    assert "no holder" in out[4][1]


def test_a_role_resolves_when_applied_and_heal_undoes_it_once() -> None:
    async def body(c: Cluster, rt: NodeRuntime) -> dict[str, Any]:
        await c.create_topic(rt, "t", 1, 3)
        b = backend(c)
        leader = c.sim.leader_of("t", 0)
        af = b.apply({"kind": "crash", "mode": "power", "targets": ["leader:t-0"]})
        down = not c.world.nodes[leader].alive
        await rt.sleep(100)
        healed = b.heal(af.fault_id)
        await rt.sleep(100)
        with pytest.raises(FaultError) as again:
            b.heal(af.fault_id)
        return {"leader": leader, "af": af, "down": down, "healed": healed, "again": again.value.status,
                "up": c.world.nodes[leader].alive, "history": [h["event"] for h in b.history()]}

    r = run_cluster(body)
    assert r["af"].resolved_targets == [r["leader"]] and r["down"]
    assert [f.fault_id for f in r["healed"]] == [r["af"].fault_id] and r["up"]
    assert r["again"] == 404 and r["history"] == ["applied", "healed"]


def test_a_duration_expires_on_the_simulated_clock_and_an_early_heal_cancels_it() -> None:
    async def body(c: Cluster, rt: NodeRuntime) -> dict[str, Any]:
        b = backend(c)
        net = c.world.net
        cut = b.apply({"kind": "partition", "sides": [["broker-0"], ["broker-1", "broker-2"]], "duration_ms": 2000})
        other = b.apply({"kind": "block", "from": "broker-1", "to": "broker-0"})  # overlaps the partition
        during = net.path_up("broker-0", "broker-1")
        await rt.sleep(2500)
        after = (net.path_up("broker-0", "broker-1"), net.path_up("broker-1", "broker-0"))
        b.heal(None)
        return {"cut": cut, "during": during, "after": after, "healed": net.path_up("broker-1", "broker-0"),
                "active": b.active(), "events": [(h["id"], h["event"]) for h in b.history()],
                "other": other.fault_id, "blocked": dict(net.blocked)}

    r = run_cluster(body)
    assert r["cut"].until_world_ms == pytest.approx(r["cut"].applied_world_ms + 2000)
    assert r["during"] is False
    assert r["after"] == (True, False)  # the partition lifted; the block it overlapped did not
    assert r["healed"] is True and r["active"] == [] and r["blocked"] == {}
    assert r["events"] == [("f1", "applied"), ("f2", "applied"), ("f1", "expired"), ("f2", "healed")]


def test_a_group_coordinator_role_names_the_leader_of_its_offsets_partition() -> None:
    async def body(c: Cluster, rt: NodeRuntime) -> tuple[str, str | None]:
        await c.create_topic(rt, "__consumer_offsets", 50, 3)
        b = backend(c)
        p = c.server(0).group_coordinator.partition_for("g1")
        expected = c.sim.leader_of("__consumer_offsets", p)
        af = b.apply({"kind": "pause", "targets": ["coordinator:group:g1"], "duration_ms": 500})
        return af.resolved_targets[0], expected

    got, expected = run_cluster(body)
    assert expected is not None and got == expected


def test_a_request_error_without_targets_arms_every_broker_and_the_producer_retries_through_it() -> None:
    """The control plane's request-level kinds reach the live world's brokers: 4 Produce answers
    of NOT_LEADER_OR_FOLLOWER on each broker, kafkasim's producer retries through them, every
    record lands once, and healing removes what has not fired."""

    async def body(c: Cluster, rt: NodeRuntime) -> dict[str, Any]:
        await c.create_topic(rt, "t", 1, 3)
        assert await c.wait_until(rt, lambda: c.leader_id("t", 0) >= 0)
        b = backend(c)
        af = b.apply({"kind": "request_error", "api_key": "Produce", "error_code": "NOT_LEADER_OR_FOLLOWER",
                      "count": 4})
        armed = {n: len(s.request_faults.rules) for n, s in c.sim.servers.items()}
        producer = Producer(rt, "broker-0:9092,broker-1:9092,broker-2:9092",
                            ProducerConfig(acks=-1, linger_ms=0, retry_backoff_ms=10))
        await producer.start(["t"])
        offsets = [(await producer.send("t", f"v{i}".encode(), partition=0)).offset for i in range(6)]
        producer.close()
        leader = f"broker-{c.leader_id('t', 0)}"
        left_on_leader = len(c.sim.servers[leader].request_faults.rules)
        b.heal(None)
        return {"targets": af.resolved_targets, "armed": armed, "offsets": offsets, "leader_left": left_on_leader,
                "after_heal": {n: len(s.request_faults.rules) for n, s in c.sim.servers.items()}}

    r = run_cluster(body)
    assert r["targets"] == ["broker-0", "broker-1", "broker-2"]
    assert r["armed"] == {"broker-0": 1, "broker-1": 1, "broker-2": 1}
    assert r["offsets"] == list(range(6))
    assert r["leader_left"] == 0           # the leader answered its 4 errors, then the rule was spent
    assert r["after_heal"] == {"broker-0": 0, "broker-1": 0, "broker-2": 0}
