"""The liveness phase in the simulated world (kafkasim/harness/liveness.py says what it
requires): heal everything, start the probe process, run the world until the probe converges or
the bound passes, and turn the outcome into the run's `liveness` check."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafkasim.client.producer import partition_for_key
from kafkasim.cluster.sim_cluster import SimCluster
from kafkasim.harness.checkers import Anomaly, CheckResult
from kafkasim.harness.godseye import TopicPartition
from kafkasim.harness.liveness import LOST_KINDS, PROBE_NODE, REQUEST_TIMEOUT_MS, Probe, ProbeSpec, Required, run_probe
from kafkasim.harness.scenario import Scenario
from kafkasim.harness.workload import History
from kafkasim.runtime.sim.kernel import Owner
from kafkasim.runtime.sim.world import SimWorld

STEP_MS = 1000.0


def heal_all(world: SimWorld, cluster: SimCluster, faults: Owner) -> dict[str, list[str]]:
    """Undo every fault at once; returns what was done (traced as `liveness_heal`)."""
    faults.alive = False  # fault (and undo) timers still pending never fire
    world.net.heal()
    done: dict[str, list[str]] = {"resumed": [], "restarted": [], "log_dir_restarted": []}
    for name, node in sorted(world.nodes.items()):
        if node.paused:
            node.resume()
            done["resumed"].append(name)
        node.disk.clear_faults()
    for name in sorted(cluster.servers):
        rm = cluster.replica_manager(name)
        if rm is not None and rm.offline:  # an offline log dir comes back only with a restart
            world.nodes[name].crash("kill")
            done["log_dir_restarted"].append(name)
        if not world.nodes[name].alive:
            cluster.restart(name)
            done["restarted"].append(name)
    world.emit("harness", "liveness_heal", {k: v for k, v in done.items()})
    return done


# A hole a flipped base offset left in a follower's log (godseye.BitFlipWatch.holes) loses the record
# acknowledged there on that replica: Kafka's truncateTo sets the log end offset to the leader's end
# whatever the log holds, so the replica skips the offset for good and, once it leads, nobody can
# read the record. Corruption that propagated, as in Kafka — excused where the scenario expects it.
HOLE_KINDS = ("corrupt-offset-propagated", "corrupt-offset-delivered")


def required_records(history: History, topic: str, results: list[CheckResult], expected: list[str],
                     last_fault_ms: float = 0.0,
                     holes: set[tuple[str, int, int]] | None = None) -> tuple[list[Required], int]:
    """Every acknowledged record (and how many were excused), but those a scenario that EXPECTS
    acknowledged loss may have lost: a record an expected anomaly of its own checks already named,
    and any record acknowledged before its last fault was over (a power loss without fsync, an
    unclean election or a diverged leader's truncation loses acked records, some of them after
    the workload's consumer had already read them, so its checks never name them). A record
    acknowledged after every fault was undone must still be there."""
    loss_expected = any(k in expected for k in LOST_KINDS)
    excused = {str(a.detail.get("value")) for r in results if r.name in expected
               for a in r.anomalies if a.kind in LOST_KINDS and a.kind in expected}
    in_holes = _hole_offsets(topic, results, holes) if any(k in expected for k in HOLE_KINDS) else set()
    out, skipped = [], 0
    for s in history.acked():
        if s.partition < 0 or s.offset < 0:
            continue
        if s.value in excused or (loss_expected and s.complete_ms <= last_fault_ms) \
                or (topic, s.partition, s.offset) in in_holes:
            skipped += 1
            continue
        out.append(Required(topic, s.partition, s.offset, s.value))
    return out, skipped


def run_liveness_phase(world: SimWorld, cluster: SimCluster, faults: Owner, spec: ProbeSpec,
                       step: Callable[[], None] = lambda: None, flipped: set[TopicPartition] | None = None,
                       power_loss: bool = False) -> tuple[list[CheckResult], dict[str, Any]]:
    """Heal, probe until converged or `spec.deadline_ms`; the checks (liveness first, then
    leader-epoch-flip-stall and unexpected-append-stall when it did not converge) and run.json's
    `liveness_phase`. `flipped`: the partitions whose log some disk flipped bits in;
    `power_loss`: whether the run's faults include a power loss."""
    start = world.now_ms()
    healed = heal_all(world, cluster, faults)
    probe = Probe(spec)
    node = world.add_node(PROBE_NODE)
    task = node.runtime.spawn(run_probe(node.runtime, cluster.bootstrap, probe), name="liveness probe")
    hard_stop = spec.deadline_ms + 4 * REQUEST_TIMEOUT_MS  # a round in flight at the deadline may finish
    while not task.done() and world.now_ms() < hard_stop:
        world.run(min(world.now_ms() + STEP_MS, hard_stop))
        step()
    converged = probe.converged_ms is not None
    world.emit("harness", "liveness_phase", {"converged": converged, "rounds": probe.rounds,
                                             "problems": len(probe.problems)})
    summary = {"healed": healed, "started_ms": round(start, 3), "deadline_ms": round(spec.deadline_ms, 3),
               "rounds": probe.rounds, "converged": converged,
               "converged_after_ms": round(probe.converged_ms - start, 3) if probe.converged_ms else None,
               "required_records": len(spec.records), "excused_records": spec.excused, "groups": sorted(spec.groups)}
    if converged:
        return [CheckResult("liveness", [])], summary
    problems = probe.problems or [{"what": "probe", "error": "the probe did not finish a round"}]
    stalls, problems = split_epoch_flip_stalls(cluster, problems, flipped or set())
    failed, problems = split_unexpected_append_stalls(cluster, problems, power_loss, flipped or set())
    named = [CheckResult("leader-epoch-flip-stall", stalls), CheckResult(UNEXPECTED_APPEND_STALL, failed)]
    if not problems:
        return [CheckResult("liveness", []), *named], summary
    return [CheckResult("liveness", [Anomaly("liveness", {
        "reason": "the healed cluster did not converge within heal.liveness_ms", "deadline_ms": spec.deadline_ms,
        "stuck": problems[:20], "stuck_count": len(problems)})]), *named], summary


# A leader epoch bit flipped on disk (not CRC-covered) that a follower took into its epoch cache
# (godseye's leader-epoch-bit-flip) stalls that follower for good in Kafka 3.9 as well: it fetches
# with that epoch as last_fetched_epoch, the leader's LeaderEpochFileCache.endOffsetFor answers
# UNDEFINED for an epoch above its latest, Partition.readRecords turns that into
# OFFSET_OUT_OF_RANGE, and the fetcher's fetchOffsetAndTruncate keeps a log end at or below the
# leader's and fetches again — never back in the ISR. Corruption that propagated, not a
# replication bug: named on its own, so a scenario with disk bit flips can expect it.
def split_epoch_flip_stalls(cluster: SimCluster, problems: list[dict[str, Any]], flipped: set[TopicPartition]
                            ) -> tuple[list[Anomaly], list[dict[str, Any]]]:
    """The stuck-ISR problems every missing replica of which is stalled by a flipped epoch, as
    anomalies; and the other problems."""
    stalls, rest = [], []
    for problem in problems:
        stalled = _epoch_flip_stalled(cluster, problem, flipped)
        if stalled:
            stalls.append(Anomaly("leader-epoch-flip-stall", {**problem, "stalled": stalled}))
        else:
            rest.append(problem)
    return stalls, rest


def _epoch_flip_stalled(cluster: SimCluster, problem: dict[str, Any],
                        flipped: set[TopicPartition]) -> list[dict[str, Any]]:
    """For an "isr" problem on a bit-flipped partition: each missing replica's epoch above the
    leader's latest (all of them, or none: a replica missing for another reason keeps it a
    liveness failure)."""
    if problem.get("what") != "isr":
        return []
    tp = _partition_of(problem)
    leader_name = cluster.leader_of(*tp)
    if tp not in flipped or leader_name is None:
        return []
    leader_rm = cluster.replica_manager(leader_name)
    leader = leader_rm.get_partition(*tp) if leader_rm is not None else None
    if leader is None:
        return []
    leader_epoch = leader.log.leader_epoch_cache.latest_epoch
    names = {s.config.broker_id: n for n, s in cluster.live_servers()}
    out = []
    for broker_id in problem.get("missing", []):
        rm = cluster.replica_manager(names.get(broker_id, ""))
        replica = rm.get_partition(*tp) if rm is not None else None
        epoch = replica.log.leader_epoch_cache.latest_epoch if replica is not None else -1
        if epoch <= leader_epoch:
            return []
        out.append({"replica": broker_id, "replica_latest_epoch": epoch, "leader_latest_epoch": leader_epoch})
    return out


# A follower whose fetched batch starts below its log end is out of the ISR for good in Kafka 3.9
# as well: UnifiedLog.append throws UnexpectedAppendOffsetException, AbstractFetcherThread marks
# the partition failed and fetches it no more until a LeaderAndIsr adds it again, and the healed
# cluster sends none (the leader's epoch does not change). Two faults get a follower there:
# - a power-lost leader came back and rewrote the offsets the follower still holds, in other
#   batches (epoch-reused-after-power-loss);
# - a bit flipped in a stored batch's base offset (not CRC-covered), which recovery keeps (Kafka's
#   LogSegment.recover checks CRCs only): the follower's log then ends inside one of the leader's
#   batches (bit-rot seed 116 with BUGGIFY, before the replica fetcher kept fetch sessions: a
#   flip at rest in segment 27 of broker-1, bit 0 of byte 6 of a base offset, moved a batch 256
#   offsets up; recovery kept it and cut what followed as going backwards, the log ended at 285,
#   and the leader's batch from 283 was refused; since DelayedFetch's offset-only checks, seed
#   1030: batch 125 moved 2 up to 127, the log ended at 128, and the leader's batch from 127 was
#   refused).
# The log's divergence stands, not a new replication bug: named on its own, for a scenario with
# a power loss, or on a partition whose log a disk flipped bits in, to expect. A stuck replica
# the fetcher did not mark failed, or one elsewhere, keeps the problem a liveness failure.
UNEXPECTED_APPEND_STALL = "unexpected-append-stall"


def split_unexpected_append_stalls(cluster: SimCluster, problems: list[dict[str, Any]], power_loss: bool = True,
                                   flipped: set[TopicPartition] | None = None
                                   ) -> tuple[list[Anomaly], list[dict[str, Any]]]:
    """The stuck-ISR problems every missing replica of which is a partition its fetcher marked
    failed after an unexpected append offset, as anomalies; and the other problems. Only in a run
    with a power loss (`power_loss`) or on a partition in `flipped` (bits flipped in its log)."""
    stalls, rest = [], []
    for problem in problems:
        failed = _failed_after_unexpected_append(cluster, problem) \
            if power_loss or _partition_of(problem) in (flipped or set()) else []
        if failed:
            stalls.append(Anomaly(UNEXPECTED_APPEND_STALL, {**problem, "failed": failed}))
        else:
            rest.append(problem)
    return stalls, rest


def _failed_after_unexpected_append(cluster: SimCluster, problem: dict[str, Any]) -> list[dict[str, Any]]:
    """For an "isr" problem: what each missing replica's fetcher saw when it marked the partition
    failed (all of them, or none)."""
    if problem.get("what") != "isr" or not problem.get("missing"):
        return []
    tp = _partition_of(problem)
    names = {s.config.broker_id: n for n, s in cluster.live_servers()}
    out = []
    for broker_id in problem["missing"]:
        rm = cluster.replica_manager(names.get(broker_id, ""))
        seen = rm.fetcher_manager.failed_partitions.get(tp) if rm is not None else None
        if seen is None:
            return []
        out.append({"replica": broker_id, **seen})
    return out


def unfinished_workload_stalls(cluster: SimCluster, history: History, topic: str, partitions: int,
                               power_loss: bool, flipped: set[TopicPartition]) -> list[Anomaly]:
    """When the workload did not finish: an unexpected-append-stall per partition its unresolved
    sends went to, if every one of them is under min.insync.replicas and each replica missing
    from its ISR is one its fetcher marked failed after an unexpected append offset (acks=all
    is then refused NOT_ENOUGH_REPLICAS until a LeaderAndIsr, in Kafka 3.9 too: both followers
    of a partition there, power-loss-default-flush-swarm seed 8355). Else [], and the unfinished
    workload stays a liveness failure: an unkeyed send (its partition unknown), a send to a
    partition that could take it, or a replica missing for another reason."""
    unresolved = [s for s in history.sends if s.ok is None]
    if not unresolved or any(s.key is None for s in unresolved):
        return []
    by_partition: dict[int, int] = {}
    for s in unresolved:
        index = partition_for_key(str(s.key).encode(), partitions)
        by_partition[index] = by_partition.get(index, 0) + 1
    out = []
    for index, count in sorted(by_partition.items()):
        problem = _under_min_isr(cluster, topic, index)
        stalls = split_unexpected_append_stalls(cluster, [problem], power_loss, flipped)[0] if problem else []
        if not stalls:
            return []
        out.append(Anomaly(UNEXPECTED_APPEND_STALL, {**stalls[0].detail, "unresolved_sends": count}))
    return out


def _under_min_isr(cluster: SimCluster, topic: str, index: int) -> dict[str, Any] | None:
    """The probe's "isr" problem for a partition whose leader cannot take an acks=all write."""
    leader_name = cluster.leader_of(topic, index)
    rm = cluster.replica_manager(leader_name) if leader_name is not None else None
    p = rm.get_partition(topic, index) if rm is not None else None
    if p is None or not p.is_under_min_isr:
        return None
    return {"what": "isr", "partition": f"{topic}-{index}", "replicas": list(p.assignment), "isr": sorted(p.isr),
            "missing": sorted(set(p.assignment) - set(p.isr))}


def _partition_of(problem: dict[str, Any]) -> TopicPartition:
    """A probe problem's "events-0" as ("events", 0)."""
    topic, _, index = str(problem.get("partition", "")).rpartition("-")
    return (topic, int(index)) if index.isdigit() else (topic, -1)


def _hole_offsets(topic: str, results: list[CheckResult],
                  holes: set[tuple[str, int, int]] | None) -> set[tuple[str, int, int]]:
    """Every offset of a hole: where the follower trace saw it open (`holes`), and each offset of a
    batch a replica holds where the leader holds nothing (the replica check's
    corrupt-offset-propagated with no leader batch: the hole spans that whole batch)."""
    out = set(holes or ())
    for r in results:
        for a in r.anomalies:
            d = a.detail
            if a.kind != "corrupt-offset-propagated" or d.get("leader_batch") is not None:
                continue
            batch = d.get("replica_batch")
            if d.get("topic") == topic and isinstance(batch, list) and len(batch) >= 2:
                out.update((topic, int(d["partition"]), o) for o in range(int(batch[0]), int(batch[1]) + 1))
    return out


def probe_spec(scenario: Scenario, history: History, results: list[CheckResult], last_fault_ms: float,
               holes: set[tuple[str, int, int]] | None = None) -> ProbeSpec:
    """What the probe must find for this run (the deadline is set when the phase starts)."""
    topic = scenario.topics[0].name
    records, excused = required_records(history, topic, results, scenario.expected, last_fault_ms, holes)
    return ProbeSpec(records, {scenario.consumer.group: topic} if scenario.consumer.group else {}, 0.0, excused)


def liveness_phase(world: SimWorld, cluster: SimCluster, faults: Owner, scenario: Scenario, completed: bool,
                   history: History, spec: ProbeSpec, step: Callable[[], None], flipped: set[TopicPartition]
                   ) -> tuple[list[CheckResult], dict[str, Any]]:
    """The runner's hook: the phase, unless the workload did not finish (the workload's own
    liveness check fails then, unless an unexpected-append stall explains every send left
    unanswered: that is named instead) or the scenario turns it off (`[heal] liveness = false`)."""
    if not scenario.liveness_phase:
        return [], {"skipped": scenario.liveness_skip_reason}
    power_loss = any(f.kind == "crash" and f.mode == "power" for f in scenario.faults)
    if not completed:
        topic = scenario.topics[0]
        stalls = unfinished_workload_stalls(cluster, history, topic.name, topic.partitions, power_loss, flipped)
        if not stalls:
            return [], {"skipped": "the workload did not finish (the liveness check says so)"}
        return [CheckResult("liveness", []), CheckResult(UNEXPECTED_APPEND_STALL, stalls)], {
            "skipped": "the workload did not finish: each partition its unresolved sends went to is under "
                       "min.insync.replicas, its missing followers failed (unexpected-append-stall)"}
    spec.deadline_ms = world.now_ms() + scenario.liveness_ms
    return run_liveness_phase(world, cluster, faults, spec, step, flipped, power_loss)
