"""Run one scenario in the simulated world with one seed, check it, and write its report.

  reports/runs/<scenario>/seed-<N>/run.json     summary (schema: reports/README.md)
  reports/runs/<scenario>/seed-<N>/trace.jsonl  every traced event; run.json carries its sha256
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kafkasim.broker.config import BrokerConfig
from kafkasim.client.cluster import ClientCluster
from kafkasim.client.consumer import ConsumerConfig
from kafkasim.cluster.sim_cluster import SimCluster, broker_node_name
from kafkasim.harness.acl_world import acl_results, run_acl_changes, seed_then
from kafkasim.harness.checkers import Anomaly, CheckResult, check_all
from kafkasim.harness.corruption import attribute_offset_flips
from kafkasim.harness.godseye import GodsEye, check_replicas, failover_times, workload_value_at
from kafkasim.harness.group_workload import GroupRun, Slot, StartMember, member_starter, run_churn
from kafkasim.harness.heal import liveness_phase, probe_spec
from kafkasim.harness.host import code_version, wall_seconds
from kafkasim.harness.inject import schedule_faults
from kafkasim.harness.liveness import PROBE_NODE
from kafkasim.harness.nemesis import swarm_draws, with_concrete_faults
from kafkasim.harness.repro import SEEDED_BUGS_ENV, repro_command
from kafkasim.harness.scenario import Scenario
from kafkasim.harness.timeline import write_timeline
from kafkasim.harness.txn_checkers import check_txns, txn_stats
from kafkasim.harness.txn_pipeline import spawn_txn_workload
from kafkasim.harness.workload import History, run_consumer, run_producer
from kafkasim.protocol import errors as E
from kafkasim.runtime import seeded_bugs
from kafkasim.runtime.sim.kernel import Owner, fewer_collections
from kafkasim.runtime.sim.world import SimWorld

BROKER_PORT = 9092
STEP_MS = 1000.0


def seeded_bugs_from_env(env: Mapping[str, str]) -> frozenset[str]:
    try:
        return seeded_bugs.parse(env.get(SEEDED_BUGS_ENV, ""))
    except ValueError as exc:
        raise ValueError(f"{SEEDED_BUGS_ENV}: {exc}") from None


@dataclass
class RunResult:
    run: dict[str, Any]
    out_dir: str

    @property
    def passed(self) -> bool:
        return bool(self.run["verdict"] == "pass")


def default_out_dir(scenario: Scenario, seed: int, reports_dir: str = "reports") -> str:
    return os.path.join(reports_dir, "runs", scenario.name, f"seed-{seed}")


def _broker_config(scenario: Scenario, broker_id: int, host: str) -> BrokerConfig:
    cfg = BrokerConfig.from_properties(dict(scenario.broker_config))
    cfg.broker_id, cfg.host, cfg.port, cfg.log_dir = broker_id, host, BROKER_PORT, "kafka-logs"
    return cfg


def build_world(scenario: Scenario, seed: int, trace_out: Any, history: History, bugs: Iterable[str] = ()
                ) -> tuple[SimWorld, list[Any], SimCluster]:
    world = SimWorld(seed, trace_out, latency_ms=scenario.latency_ms, seeded_bugs=bugs, buggify=scenario.buggify)
    cluster = SimCluster(world, lambda broker_id, host: _broker_config(scenario, broker_id, host), scenario.racks)
    for i in range(scenario.brokers):
        cluster.add_broker(i)
    bootstrap = cluster.bootstrap
    ready = world.kernel.future()
    admin = world.add_node("admin")
    create = _create_topics(admin.runtime, bootstrap, scenario, ready)
    if scenario.acls:   # [[acls]]: seeded in ZooKeeper first, changed during the run (acl_world.py)
        trusted = [broker_node_name(i) for i in range(scenario.brokers)] + [admin.name, PROBE_NODE]
        create = seed_then(admin.runtime, scenario.acls, trusted, create)
        admin.runtime.spawn(_after(ready, run_acl_changes(admin.runtime, bootstrap, scenario.acls)), name="acls")
    admin.runtime.spawn(create, name="create topics")
    if scenario.producer.txn is not None:
        return world, _spawn_txn(world, scenario, bootstrap, ready, history), cluster
    topic = scenario.topics[0].name
    finals = []
    for i in range(scenario.producer.count):
        node = world.add_node(f"producer-{i}")
        node.runtime.spawn(_after(ready, run_producer(node.runtime, bootstrap, topic, scenario.producer,
                                                      node.name, history)), name="producer")
    if scenario.consumer.group:
        finals.append(_spawn_group(world, scenario, bootstrap, ready, history))
        return world, finals, cluster
    for i in range(scenario.consumer.count):
        node = world.add_node(f"consumer-{i}")
        finals.append(node.runtime.spawn(_after(ready, run_consumer(
            node.runtime, bootstrap, topic, scenario.consumer, node.name, history, scenario.producer.count)),
            name="consumer"))
    return world, finals, cluster


def _spawn_txn(world: SimWorld, scenario: Scenario, bootstrap: str, ready: Any, history: History) -> list[Any]:
    def spawn(name: str, make: Any) -> Any:
        rt = world.add_node(name).runtime
        return rt.spawn(_after(ready, make(rt)), name=name.rsplit("-", 1)[0])
    return spawn_txn_workload(scenario, bootstrap, history, spawn, spawn)


class _SimMemberHost:
    """The churn driver's hands on the members' simulated machines."""

    def __init__(self, world: SimWorld, ready: Any, start: StartMember) -> None:
        self.world, self.ready, self._start = world, ready, start

    def start(self, process: str) -> None:
        rt = self.world.nodes[process].runtime
        rt.spawn(_after(self.ready, self._start(rt, process)), name="group member")

    def crash(self, process: str) -> None:
        self.world.nodes[process].crash("kill")

    def restart(self, process: str) -> None:
        self.world.nodes[process].restart()


def _spawn_group(world: SimWorld, scenario: Scenario, bootstrap: str, ready: Any, history: History) -> Any:
    """Group members consumer-0..N-1 and the group's churn driver, whose task ends the run."""
    run = GroupRun(scenario.consumer, scenario.topics[0].name, scenario.topics[0].partitions,
                   scenario.producer.count, history)
    host = _SimMemberHost(world, ready, member_starter(bootstrap, run))
    for i in range(scenario.consumer.count):
        node = world.add_node(f"consumer-{i}")
        run.slots[node.name] = Slot(node.name)
        host.start(node.name)
    driver = world.add_node(f"group-{scenario.consumer.group}")
    return driver.runtime.spawn(_after(ready, run_churn(driver.runtime, run, host)), name="group driver")


async def _after(ready: Any, coro: Any) -> Any:
    await ready
    return await coro


async def _create_topics(rt: Any, bootstrap: str, scenario: Scenario, ready: Any) -> None:
    cluster = ClientCluster(rt, bootstrap, "admin")
    for t in scenario.topics:
        for _ in range(100):
            try:
                code = await cluster.create_topic(t.name, t.partitions, t.replication_factor, t.config)
                if code in (E.NONE, E.TOPIC_ALREADY_EXISTS):
                    break
            except Exception:  # broker not up yet: connection refused or timed out
                pass
            await rt.sleep(200)
        await cluster.wait_for_topic(t.name)
    cluster.close()
    ready.set_result(None)


Progress = Callable[[float, float], None]  # (sim ms now, sim ms deadline)


def run_scenario(scenario: Scenario, seed: int, out_dir: str | None = None,
                 bugs: Iterable[str] = (), progress: Progress | None = None) -> RunResult:
    """`bugs`: the seeded bugs the world is built with (none for a clean run). run.json is
    written only when the run finishes: an interrupt (KeyboardInterrupt, SystemExit) propagates
    and leaves no verdict behind, not even an earlier run's."""
    out_dir = out_dir or default_out_dir(scenario, seed)
    os.makedirs(out_dir, exist_ok=True)
    run_json = os.path.join(out_dir, "run.json")
    if os.path.exists(run_json):
        os.remove(run_json)  # a verdict left by an earlier run would describe this run's trace
    swarm = swarm_draws(scenario.nemesis, seed)  # what a swarm profile enabled this seed (run.json)
    scenario = with_concrete_faults(scenario, seed)  # nemesis profiles -> this seed's faults
    history = History()
    wall_start = wall_seconds()
    last_fault_ms = max((f.end_ms for f in scenario.faults), default=0.0)
    deadline = min(scenario.duration_ms, last_fault_ms + scenario.liveness_ms)
    with open(os.path.join(out_dir, "trace.jsonl"), "w") as trace_out, fewer_collections():
        world, finals, cluster = build_world(scenario, seed, trace_out, history, bugs)
        eyes = GodsEye(world, cluster)  # recovery and invariant checks while the run goes
        if world.seeded_bugs:  # a run with seeded bugs says so in its trace, not only in run.json
            world.emit("harness", "seeded_bugs", {"bugs": sorted(world.seeded_bugs)})
        fault_owner = Owner("harness")
        fired = schedule_faults(world, scenario, cluster, fault_owner)
        while world.now_ms() < deadline and not all(t.done() for t in finals):
            world.run(min(world.now_ms() + STEP_MS, deadline))
            eyes.step()
            if progress is not None:
                progress(world.now_ms(), deadline)
        completed = all(t.done() for t in finals)
        flipped = eyes.bit_flips.partitions
        results = (attribute_offset_flips(history, check_all(history), flipped, workload_value_at(cluster),
                                          eyes.bit_flips.holes)
                   + check_replicas(cluster, flipped, eyes.epoch_reuse) + eyes.results()
                   + (check_txns(history) if scenario.producer.txn is not None else [])
                   + acl_results(scenario.acls, scenario.broker_config, scenario.topics[0].name, history, trace_out,
                                 ConsumerConfig().request_timeout_ms + scenario.consumer.fetch_max_wait_ms))
        world.emit("harness", "run_end", {"completed": completed, "sends": len(history.sends),
                                          "polls": len(history.polls)})
        # The histories are final and checked: heal everything and require convergence.
        phase, phase_summary = liveness_phase(world, cluster, fault_owner, scenario, completed, history,
                                              probe_spec(scenario, history, results, last_fault_ms,
                                                         eyes.bit_flips.holes), eyes.step, flipped)
    wall = wall_seconds() - wall_start
    run = _run_json(scenario, seed, world, history, results, completed, wall, deadline, phase)
    run["liveness_phase"] = phase_summary
    run["stats"]["failovers"] = failover_times(os.path.join(out_dir, "trace.jsonl"))
    run["seeded_bugs"] = sorted(world.seeded_bugs)
    run["stats"]["recoveries_checked"] = eyes.recovery.recoveries_checked
    if scenario.producer.txn is not None:
        run["stats"]["transactions"] = txn_stats(history)
    run["faults_fired"] = fired
    if swarm:
        run["swarm"] = swarm
    if world.buggify is not None:  # the points this run asked, enabled and fired (runtime/buggify.py)
        run["buggify"] = world.buggify.summary()
    run["scenario_text"] = scenario.text
    run["scenario_sha256"] = hashlib.sha256(scenario.text.encode()).hexdigest()
    run["repro"] = repro_command(run)
    tmp = run_json + ".tmp"
    with open(tmp, "w") as f:
        json.dump(run, f, indent=2, sort_keys=True)
    write_timeline(out_dir, history)  # per-request latency for the report's run page
    os.replace(tmp, run_json)  # all or nothing: an interrupt mid-write leaves no verdict
    return RunResult(run, out_dir)


def invariant_results(world: SimWorld) -> list[CheckResult]:
    """One failed check per violated NodeRuntime.invariant, named `invariant:<what>` (only
    violated ones appear: the invariants are checked inline, not enumerated)."""
    by_name: dict[str, list[Anomaly]] = {}
    for v in world.violations:
        by_name.setdefault(v.what, []).append(Anomaly(f"invariant:{v.what}", {"node": v.node, "t_ms": v.t_ms}))
    return [CheckResult(f"invariant:{what}", anomalies) for what, anomalies in by_name.items()]


def _percentiles(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    v = sorted(values)

    def at(q: float) -> float:
        return round(v[min(len(v) - 1, int(q * len(v)))], 3)

    return {"p50": at(0.5), "p90": at(0.9), "p99": at(0.99), "max": round(v[-1], 3)}


def _run_json(scenario: Scenario, seed: int, world: SimWorld, history: History, results: list[CheckResult],
              completed: bool, wall_s: float, deadline_ms: float, phase: list[CheckResult]) -> dict[str, Any]:
    # A task that died of an exception nobody handled is a bug in the node's code.
    extra = [CheckResult("task-error", [Anomaly("task-error", {"node": o, "task": t, "error": e})
                                        for o, t, e in world.failures])] + invariant_results(world)
    liveness = CheckResult("liveness", [] if completed else [Anomaly("liveness", {
        "reason": "the workload did not finish by the deadline (last fault + heal.liveness_ms, capped by "
                  "scenario.duration_ms)", "deadline_ms": deadline_ms,
        "acked": len(history.acked()), "unresolved_sends": sum(1 for s in history.sends if s.ok is None)})])
    after = phase or [liveness]  # the liveness phase's checks (liveness first), or the workload's own
    checks, anomalies = [], []
    for r in results + extra + after:
        expected = r.name in scenario.expected
        checks.append({"name": r.name, "ok": not r.anomalies, "violations": len(r.anomalies), "expected": expected})
        anomalies += [{"kind": a.kind, "expected": expected, "detail": a.detail} for a in r.anomalies[:100]]
    verdict = "pass" if all(c["ok"] or c["expected"] for c in checks) else "fail"
    sim_ms = world.now_ms()
    acked = history.acked()
    return {
        "schema_version": 1, "scenario": scenario.name, "scenario_path": scenario.path, "seed": seed, "world": "sim",
        "code_version": code_version(), "verdict": verdict, "trace_hash": world.trace.hexdigest(),
        "checks": checks, "anomalies": anomalies, "faults": [f.describe() for f in scenario.faults],
        "stats": {"sim_time_ms": sim_ms, "wall_time_s": round(wall_s, 3),
                  "sim_to_wall_ratio": round(sim_ms / 1000.0 / wall_s, 3) if wall_s > 0 else 0.0,
                  "events": world.trace.count, "produced": len(history.sends), "acked": len(acked),
                  "consumed": len(history.polls),
                  "produce_latency_ms": _percentiles([s.complete_ms - s.invoke_ms for s in acked])},
    }
