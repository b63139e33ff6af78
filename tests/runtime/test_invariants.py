"""NodeRuntime.invariant: the simulated world fails on a violated invariant (raises, records it,
and the run reports a failed check named after it); the real world traces it and goes on; a
holding invariant leaves no mark (no trace event, no random draw). And each invariant the broker
and storage check fires on a hand-built violation."""

from __future__ import annotations

import io
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from kafkasim.broker.partition import Partition, PartitionState, PendingIsrChange
from kafkasim.harness.runner import run_scenario
from kafkasim.harness.scenario import parse_scenario
from kafkasim.protocol import errors as E
from kafkasim.records.batch import Record, build_batch, iter_batches
from kafkasim.runtime.api import InvariantViolation, NodeRuntime
from kafkasim.runtime.real.world import JsonlTrace, RealNode
from kafkasim.runtime.sim.world import SimWorld
from kafkasim.storage.log import Log, LogConfig

pytestmark = pytest.mark.sim


def run_in_sim(body: Callable[[NodeRuntime], Awaitable[Any]]) -> tuple[SimWorld, Any]:
    """body(rt) on node "b" of a fresh world; returns the world and body's result."""
    world = SimWorld(1)
    rt = world.add_node("b").runtime
    out: list[Any] = []

    async def main() -> None:
        out.append(await body(rt))

    task = rt.spawn(main(), name="test")
    while not task.done():
        world.run(world.now_ms() + 1000)
    assert world.failures == [], world.failures
    return world, out[0]


def fired(body: Callable[[NodeRuntime], Awaitable[None]]) -> str:
    """Run body, which must violate an invariant; the name the world recorded."""
    async def catching(rt: NodeRuntime) -> str:
        with pytest.raises(InvariantViolation) as info:
            await body(rt)
        return info.value.what

    world, what = run_in_sim(catching)
    assert [v.what for v in world.violations] == [what]
    return str(what)


def append(log: Log, n: int) -> None:
    buf = bytearray(build_batch([Record(1000 + i, None, b"v") for i in range(n)]))
    log.append_as_leader(buf, list(iter_batches(buf, validate=True)), leader_epoch=0)


async def leader(rt: NodeRuntime, records: int = 0) -> Partition:
    """Broker 1 leading t-0 (replicas 1, 2; ISR 1, 2; epochs 5 and 3) with `records` appended."""
    log = await Log.load(rt, "t-0", LogConfig())
    if records:
        append(log, records)
    p = Partition("t", 0, log, -1, False, local_broker_id=1)
    p.make_leader(PartitionState(1, 5, [1, 2], [1, 2], partition_epoch=3))
    return p


# ---------------------------------------------------------------- the seam
def test_a_holding_invariant_leaves_no_mark_and_a_violated_one_fails_the_world() -> None:
    out = io.StringIO()
    world = SimWorld(1, trace_out=out)
    rt = world.add_node("b").runtime
    before = (world.trace.hexdigest(), world.trace.count, sorted(world._rngs))
    rt.invariant(True, "holds")
    assert (world.trace.hexdigest(), world.trace.count, sorted(world._rngs)) == before
    assert world.violations == []
    with pytest.raises(InvariantViolation, match="broken") as info:
        rt.invariant(False, "broken")
    assert info.value.what == "broken"
    assert [(v.what, v.node) for v in world.violations] == [("broken", "b")]
    last = json.loads(out.getvalue().splitlines()[-1])
    assert (last["ev"], last["what"], last["node"]) == ("invariant_violated", "broken", "b")


def test_the_real_world_traces_a_violation_and_goes_on(tmp_path: Path) -> None:
    out = io.StringIO()
    node = RealNode("b", str(tmp_path), trace=JsonlTrace(out))
    node.invariant(True, "holds")
    assert out.getvalue() == ""
    node.invariant(False, "broken")  # no exception: a real broker keeps serving
    record = json.loads(out.getvalue())
    assert (record["ev"], record["what"], record["node"]) == ("invariant_violated", "broken", "b")


def test_a_task_failing_after_its_node_stopped_is_kept_without_a_trace_to_write_to(tmp_path: Path) -> None:
    # CI, test_security_inter_broker: a broker task ended with an error after the broker had
    # closed its trace; the write to the closed file printed a traceback into the broker's log.
    trace = JsonlTrace.to_file(str(tmp_path / "trace.jsonl"))
    node = RealNode("b", str(tmp_path), trace=trace)
    trace.close()
    node._record_failure("late-task", ConnectionError("lost"))
    assert node.failures == [("b", "late-task", "ConnectionError: lost")]
    assert (tmp_path / "trace.jsonl").read_text() == ""


def test_a_violated_invariant_fails_the_run_by_its_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    original = Log.update_high_watermark

    def broken(self: Log, offset: int) -> None:  # a hand-made violation once data flows
        original(self, offset)
        self.rt.invariant(offset < 20, "test-only-invariant")

    monkeypatch.setattr(Log, "update_high_watermark", broken)
    scenario = parse_scenario("tiny.toml", {
        "scenario": {"name": "invariant-probe", "duration_ms": 30000},
        "cluster": {"brokers": 1},
        "topics": [{"name": "events", "partitions": 1, "replication_factor": 1}],
        "workload": {"producer": {"messages": 50, "rate_per_s": 100}, "consumer": {"fetch_max_wait_ms": 100}},
        "heal": {"liveness_ms": 10000},
    })
    run = run_scenario(scenario, 1, str(tmp_path / "run")).run
    assert run["verdict"] == "fail"
    check = [c for c in run["checks"] if c["name"] == "invariant:test-only-invariant"]
    assert check and not check[0]["ok"] and check[0]["violations"] > 0
    assert any(a["kind"] == "invariant:test-only-invariant" and a["detail"]["node"].startswith("broker")
               for a in run["anomalies"])


# ---------------------------------------------------------------- each invariant fires
def test_high_watermark_above_log_end_offset() -> None:
    async def body(rt: NodeRuntime) -> None:
        log = await Log.load(rt, "t-0", LogConfig())
        append(log, 3)
        log.log_start_offset = 10  # hand-built: a start beyond the end drags the watermark past it
        log.update_high_watermark(3)

    assert fired(body) == "high-watermark<=log-end-offset"


def test_recovery_point_outside_the_log() -> None:
    async def body(rt: NodeRuntime) -> None:
        log = await Log.load(rt, "t-0", LogConfig())
        append(log, 3)
        log.log_start_offset = 10  # hand-built: the flushed offset falls below the log start
        await log.flush()

    assert fired(body) == "recovery-point-within-log"


def test_leader_high_watermark_moving_back() -> None:
    async def body(rt: NodeRuntime) -> None:
        p = await leader(rt, records=3)
        p.high_watermark = 3
        p.high_watermark = 1

    assert fired(body) == "leader-high-watermark-never-moves-back"


def test_leader_high_watermark_moving_back_through_a_follower_append() -> None:
    async def body(rt: NodeRuntime) -> None:
        p = await leader(rt, records=3)
        p.high_watermark = 3
        await p.append_records_to_follower(b"", [], leader_high_watermark=1, leader_log_start_offset=0)

    assert fired(body) == "leader-high-watermark-never-moves-back"


def test_isr_growing_with_a_broker_outside_the_replicas() -> None:
    async def body(rt: NodeRuntime) -> None:
        p = await leader(rt)
        p.make_leader(PartitionState(1, 5, [1], [1, 2], partition_epoch=4))
        p.pending = PendingIsrChange([1, 3], [1, 3], 0)
        p.on_alter_partition_response(E.NONE, 5, [1, 3], 5, 0)  # broker 3 is no replica of t-0

    assert fired(body) == "isr-grows-only-with-replicas"


def test_a_reassignment_leader_and_isr_may_carry_replicas_being_removed_in_the_isr() -> None:
    """Kafka's reassignment step B3: replicas = the target set while the ISR still holds the
    replicas being removed (B4 shrinks it); not a violation."""
    async def body(rt: NodeRuntime) -> None:
        p = await leader(rt)
        p.make_leader(PartitionState(1, 6, [1, 2], [1, 3], partition_epoch=4))
        assert p.isr == [1, 2] and p.assignment == [1, 3]

    world, _ = run_in_sim(body)
    assert world.violations == []


def test_leader_not_in_the_isr() -> None:
    async def body(rt: NodeRuntime) -> None:
        p = await leader(rt)
        p.make_leader(PartitionState(1, 6, [2], [1, 2], partition_epoch=4))

    assert fired(body) == "leader-in-isr"


def test_alter_partition_response_dropping_the_leader() -> None:
    async def body(rt: NodeRuntime) -> None:
        p = await leader(rt)
        p.alter_partition = lambda partition, isr, recovery: None
        p._propose([1], [1, 2], 0)  # a pending change, answered with an ISR without the leader
        p.on_alter_partition_response(0, 5, [2], 4, 0)

    assert fired(body) == "leader-in-isr"


def test_leader_epoch_going_back() -> None:
    async def body(rt: NodeRuntime) -> None:
        p = await leader(rt)
        p.make_follower(PartitionState(2, 4, [1, 2], [1, 2], partition_epoch=4))

    assert fired(body) == "leader-epoch-never-decreases"


def test_the_same_states_in_order_hold() -> None:
    async def body(rt: NodeRuntime) -> int:
        p = await leader(rt, records=3)
        p.high_watermark = 2
        p.high_watermark = 3
        p.make_leader(PartitionState(1, 5, [1, 2], [1, 2], partition_epoch=3))  # the same state again
        # An older partition epoch is skipped (Kafka's Partition.makeLeader), not a violation.
        p.make_leader(PartitionState(1, 5, [1, 2], [1, 2], partition_epoch=2))
        p.make_follower(PartitionState(2, 6, [2], [1, 2], partition_epoch=4))
        await p.log.flush()
        return p.high_watermark

    world, hw = run_in_sim(body)
    assert hw == 3 and world.violations == []
