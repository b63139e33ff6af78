"""A scenario whose workload is a third-party client (`client = "<driver>"` in [workload], or
`kafkasim run --client NAME`): the simulated cluster on real sockets (live.py, as `serve --sim`),
the client's driver process(es) against it, the scenario's faults fired on the wall-clock
timeline, and the same checks as a simulated run over a history made of the driver's replies.

The workload (times are wall ms from the moment the cluster is ready and the topics exist):
  producer-0  a driver sending the scenario's `messages` in chunks of rate_per_s/4 every 250 ms
              (no new chunk after the scenario's duration_ms: a client stuck retrying is noted),
              chunk k to partition k mod partitions (so every value's offset is observable, even
              for kcat), with the scenario's acks and, when `idempotence = true`, idempotence on
              (otherwise the client's default: run.json records which it was)
  consumer-0  with a [workload.consumer] group: a member of it, consuming and committing what
              it read after every consume, until the producer is done and the faults are over
  reader      then, with every fault healed: a fresh assign-mode consumer reads the topic back
              from the start; its reads settle lost-write / unseen / duplicate / inconsistent

Faults go through the cluster's control plane (an HTTP call per fault, roles resolved when it
acts), so each one's call-to-acting latency is measured; run.json lists them in faults_fired.
The cluster's checks are the simulated run's: GodsEye (recovery, invariants) stepped on the
loop's thread, check_replicas at the end, task errors and invariant violations.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafkasim.harness.checkers import CheckResult, check_all
from kafkasim.harness.client_eos import (
    PIPELINE_TIMEOUT_MS,
    PipelineLog,
    eos_checks,
    read_output,
    record_transform,
    transform_cmd,
)
from kafkasim.harness.client_history import DriverErrors, MemberTrack, record_produce, record_reads, value_names
from kafkasim.harness.client_verdict import client_run_json
from kafkasim.harness.godseye import GodsEye, check_replicas
from kafkasim.harness.live import LiveCluster, LiveOptions
from kafkasim.harness.runner import RunResult, default_out_dir
from kafkasim.harness.scenario import Scenario
from kafkasim.harness.workload import History
from kafkasim.runtime.real.client_driver import DriverFailed, DriverProcess, WallClock, Worker, driver_missing
from kafkasim.runtime.real.control_client import ControlClient, ControlError

CHUNK_MS = 250.0
READY_TIMEOUT_S = 120.0
SETTLE_MS = 3000.0          # after the producer and the last fault: the member keeps reading this long
READ_BACK_TIMEOUT_MS = 60000.0


class ClientRunError(Exception):
    """The run could not start (a driver not built, the cluster not ready): a usage-level error."""


@dataclass
class Settings:
    """The client as it ran: what the matrix judges its results against."""
    client: str
    version: str = ""
    acks: str = "all"
    idempotent: bool = False
    idempotence_source: str = "client default"   # or "scenario"
    commits_acknowledged: bool = True   # False: the driver cannot see its commit answered (kcat)

    def describe(self) -> dict[str, Any]:
        return {"client": self.client, "version": self.version, "acks": self.acks, "idempotent": self.idempotent,
                "idempotence_source": self.idempotence_source, "commits_acknowledged": self.commits_acknowledged}


@dataclass
class ClientRun:
    """Everything the threads of one run share (each field written by one thread)."""
    scenario: Scenario
    live: LiveCluster
    clock: WallClock
    out_dir: str
    settings: Settings
    history: History = field(default_factory=History)
    errors: DriverErrors = field(default_factory=DriverErrors)
    fired: list[dict[str, Any]] = field(default_factory=list)
    t0_ms: float = 0.0
    producer_done: bool = False
    faults_done: bool = False
    notes: list[str] = field(default_factory=list)
    pipeline: PipelineLog | None = None   # the exactly-once row (client_eos.py)

    @property
    def topic(self) -> str:
        return self.scenario.topics[0].name

    def now(self) -> float:
        return self.clock.now_ms() - self.t0_ms

    def driver(self, process: str) -> DriverProcess:
        return DriverProcess(self.settings.client, self.live.bootstrap_servers, f"{self.settings.client}-{process}",
                             os.path.join(self.out_dir, f"{process}.log"))


def fault_specs(scenario: Scenario) -> list[tuple[float, dict[str, Any]]]:
    """The scenario's [[faults]] as control-plane specs with their at_ms (scenario text order)."""
    raw = tomllib.loads(scenario.text).get("faults", []) if scenario.text else []
    out = []
    for f in raw:
        spec = {k: v for k, v in f.items() if k not in ("at_ms", "jitter_ms")}
        out.append((float(f.get("at_ms", 0)), spec))
    return sorted(out, key=lambda x: x[0])


def run_client_scenario(scenario: Scenario, seed: int, client: str, out_dir: str | None = None,
                        say: Callable[[str], None] | None = None) -> RunResult:
    why = driver_missing(client)
    if why:
        raise ClientRunError(why)
    if scenario.nemesis:
        raise ClientRunError(f"{scenario.path}: [[nemesis]] profiles are drawn per seed for simulated runs; a client "
                             "workload fires only explicit [[faults]]")
    txn = scenario.producer.txn
    if txn is not None and (txn.pipeline <= 0 or len(scenario.topics) < 2):
        raise ClientRunError(f"{scenario.path}: with client = {client!r} a transactional workload is the "
                             "exactly-once pipeline: pipeline = 1 and two [[topics]] (input, output)")
    out_dir = out_dir or default_out_dir(scenario, seed)
    os.makedirs(out_dir, exist_ok=True)
    live = LiveCluster(LiveOptions(seed=seed, scenario_path=scenario.path, out_dir=out_dir, schedule_faults=False))
    eyes = GodsEye(live.world, live.cluster)  # installed before the world runs, as in a simulated run
    run = ClientRun(scenario, live, WallClock(), out_dir, Settings(client))
    live.start()
    try:
        if not live.loop.wait_for(live.ready, READY_TIMEOUT_S):
            raise ClientRunError(f"the live cluster was not ready within {READY_TIMEOUT_S:.0f} s")
        run.t0_ms = run.clock.now_ms()
        _drive(run, eyes, say or (lambda _m: None))
        results = _check(run, eyes)
    finally:
        summary = live.stop()
    doc = client_run_json(scenario, seed, run.settings, run.history, results, summary, run.fired, run.errors,
                          run.notes, live.backend.history())
    if run.pipeline is not None:
        p = run.pipeline
        doc["pipeline"] = {"transactions": len(p.transactions), "aborted_on_purpose": p.aborted,
                           "values_copied": len(p.processed()), "output_read_committed": len(p.output)}
    # the exact histogram (0.01 ms buckets), so `kafkasim matrix` can merge every cell's pacing error
    doc["stats"]["pacing_histogram"] = {str(b): n for b, n in sorted(live.loop.pacing.counts.items())}
    with open(os.path.join(out_dir, "run.json.tmp"), "w") as f:
        json.dump(doc, f, indent=2, sort_keys=True)
    os.replace(os.path.join(out_dir, "run.json.tmp"), os.path.join(out_dir, "run.json"))
    return RunResult(doc, out_dir)


def _drive(run: ClientRun, eyes: GodsEye, say: Callable[[str], None]) -> None:
    control = ControlClient(run.live.control_address or "")
    producer = run.driver("producer-0")
    try:
        hello = producer.call({"op": "hello"}, 120.0)
        _settle_settings(run, hello)
        workers = [Worker(lambda: _fire_faults(run, control), "faults"),
                   Worker(lambda: _produce(run, producer), "producer")]
        if run.scenario.producer.txn is not None:
            run.pipeline = PipelineLog()
            workers.append(Worker(lambda: _pipeline(run), "pipeline"))
        elif run.scenario.consumer.group:
            workers.append(Worker(lambda: _member(run), "member"))
        while not all(w.done() for w in workers):
            run.live.loop.call(eyes.step)
            say(f"{run.settings.client}: {run.now() / 1000:.0f} s, acked "
                f"{sum(1 for s in run.history.sends if s.ok)}/{len(run.history.sends)}")
            run.clock.sleep(1000.0)
        for w in workers:
            w.join()
    finally:
        producer.close()
    try:
        control.heal()  # whatever is still active: the read-back sees a healed cluster
    except ControlError as exc:
        run.notes.append(f"heal before read-back: {exc}")
    _read_back(run)
    if run.pipeline is not None:
        _read_output(run, run.pipeline)
    run.live.loop.call(eyes.step)


def _settle_settings(run: ClientRun, hello: dict[str, Any]) -> None:
    s, p = run.settings, run.scenario.producer
    s.version = str(hello.get("version", ""))
    s.commits_acknowledged = hello.get("commit") != "on-exit"
    s.acks = {-1: "all", 1: "1", 0: "0"}[p.acks]
    if p.idempotence:
        s.idempotent, s.idempotence_source = True, "scenario"
    else:
        s.idempotent = bool(hello.get("default_idempotent", False)) and p.acks == -1


def _fire_faults(run: ClientRun, control: ControlClient) -> None:
    for at_ms, spec in fault_specs(run.scenario):
        run.clock.sleep_until(run.t0_ms + at_ms)
        entry: dict[str, Any] = {"at_ms": at_ms, "spec": spec, "wall_ms": round(run.now(), 3)}
        entry["call_epoch_ms"] = run.clock.epoch_ms()
        try:
            entry["id"] = control.add(spec).get("id")
        except ControlError as exc:  # e.g. a role with no holder at that moment: recorded, not fatal
            entry["error"] = f"{exc.status}: {exc.message}"
        entry["returned_epoch_ms"] = run.clock.epoch_ms()
        run.fired.append(entry)
    run.faults_done = True


def _produce(run: ClientRun, d: DriverProcess) -> None:
    p = run.scenario.producer
    chunk = max(1, int(p.rate_per_s * CHUNK_MS / 1000.0))
    partitions = run.scenario.topics[0].partitions
    cmd_base: dict[str, Any] = {"op": "produce", "topic": run.topic, "acks": run.settings.acks,
                                "timeout_ms": int(max(p.request_timeout_ms, 30000))}
    if run.settings.idempotence_source == "scenario":
        cmd_base["idempotent"] = True
    sent, k = 0, 0
    try:
        while sent < p.messages:
            if run.now() > run.scenario.duration_ms:  # a client stuck in retries must not hold the run
                run.notes.append(f"producer-0: {p.messages - sent} of {p.messages} values not sent: the "
                                 f"scenario's duration_ms ({run.scenario.duration_ms / 1000:.0f} s) passed")
                break
            run.clock.sleep_until(run.t0_ms + k * CHUNK_MS)
            n = min(chunk, p.messages - sent)
            prefix = f"producer-0.{k}"
            invoke, gone = run.now(), False
            try:
                reply = d.call({**cmd_base, "count": n, "prefix": prefix, "partition": k % partitions},
                               cmd_base["timeout_ms"] / 1000.0 + 60.0)
            except DriverFailed as exc:  # the driver died or hung: its values have no answer
                run.notes.append(f"producer: {exc}")
                reply, gone = {"op": "error", "error": str(exc)}, True
            record_produce(run.history, "producer-0", value_names(prefix, n), invoke, run.now(), reply)
            run.errors.add(reply.get("errors", []) + ([reply["error"]] if reply.get("op") == "error" else []))
            sent, k = sent + n, k + 1
            if gone:
                break
    finally:
        run.history.producers_done += 1
        run.producer_done = True


def _member(run: ClientRun) -> None:
    c = run.scenario.consumer
    d = run.driver("consumer-0")
    track = MemberTrack(c.group, "consumer-0", run.settings.commits_acknowledged)
    cmd = {"op": "consume", "topic": run.topic, "group": c.group, "from": "earliest", "max": 500,
           "timeout_ms": 1000, "commit": True, "session_timeout_ms": c.session_timeout_ms,
           "heartbeat_interval_ms": c.heartbeat_interval_ms}
    done_at: float | None = None
    try:
        while done_at is None or run.now() < done_at:
            if done_at is None and run.producer_done and run.faults_done:
                done_at = run.now() + SETTLE_MS
            sent = run.now()
            try:
                reply = d.call(cmd, 90.0)
            except DriverFailed as exc:
                run.notes.append(f"consumer-0: {exc}")
                return
            track.record(run.history, run.topic, sent, run.now(), reply)
            run.errors.add(reply.get("errors", []) + ([reply["error"]] if reply.get("op") == "error" else []))
    finally:
        d.close()


def _pipeline(run: ClientRun) -> None:
    assert run.pipeline is not None
    log = run.pipeline
    d = run.driver("pipeline-0")
    cmd = transform_cmd(run.topic, run.scenario.topics[1].name, run.settings.client)
    deadline: float | None = None
    try:
        while deadline is None or run.now() < deadline:
            if deadline is None and run.producer_done and run.faults_done:
                deadline = run.now() + PIPELINE_TIMEOUT_MS
            try:
                reply = d.call(cmd, 120.0)
            except DriverFailed as exc:
                run.notes.append(f"pipeline-0: {exc}")
                return
            run.errors.add(record_transform(log, reply))
            if deadline is not None and {s.value for s in run.history.sends if s.ok} <= log.processed():
                return
        left = {s.value for s in run.history.sends if s.ok} - log.processed()
        run.notes.append(f"pipeline-0: {len(left)} acknowledged input values not copied in committed transactions "
                         f"within {PIPELINE_TIMEOUT_MS / 1000:.0f} s after the faults")
    finally:
        d.close()


def _read_output(run: ClientRun, log: PipelineLog) -> None:
    d = run.driver("output-reader")
    try:
        log.output = read_output(d, run.scenario.topics[1].name, log.processed(), run.now,
                                 run.now() + READ_BACK_TIMEOUT_MS)
    except DriverFailed as exc:
        run.notes.append(f"output-reader: {exc}")
    finally:
        d.close()


def _read_back(run: ClientRun) -> None:
    d = run.driver("reader")
    acked = {s.value for s in run.history.sends if s.ok}
    seen: set[str] = set()
    cmd = {"op": "consume", "topic": run.topic, "group": None, "from": "earliest", "max": 5000, "timeout_ms": 2000}
    deadline = run.now() + READ_BACK_TIMEOUT_MS
    try:
        while run.now() < deadline:
            before = len(run.history.polls)
            try:
                reply = d.call(cmd, 90.0)
            except DriverFailed as exc:
                run.notes.append(f"reader: {exc}")
                return
            n = record_reads(run.history, "reader", run.topic, run.now(), reply)
            seen.update(p.value for p in run.history.polls[before:])
            if n == 0 and acked <= seen:
                return
    finally:
        d.close()
    run.notes.append(f"reader: stopped after {READ_BACK_TIMEOUT_MS / 1000:.0f} s with "
                     f"{len(acked - seen)} acknowledged values not read")


def _check(run: ClientRun, eyes: GodsEye) -> list[CheckResult]:
    def cluster_checks() -> list[CheckResult]:
        eyes.step()
        return check_replicas(run.live.cluster, eyes.bit_flips.partitions, eyes.epoch_reuse) + eyes.results()
    cluster: list[CheckResult] = run.live.loop.call(cluster_checks)
    eos = eos_checks(run.pipeline) if run.pipeline is not None else []
    return check_all(run.history) + eos + cluster
