"""The liveness phase: after the workload has finished and its histories are final, heal
everything and require the cluster to converge within `[heal] liveness_ms`.

Heal (as an operator would, all at once): fault timers still pending are cancelled (a fault
scheduled after the workload ended never fires), every network cut and clog is lifted, every
paused process resumed, every disk's fault knobs cleared, every broker that is down restarted,
and every broker whose log dir went offline restarted (Kafka brings an offline log dir back only
by a restart).

Converged means, all at once, as a separate probe process ("liveness-probe", its own clients)
sees it through the wire protocol, knowing no topic in advance (Metadata for all topics):
  - every partition of every topic has a leader and a full ISR (= its replica set);
  - every acknowledged record is readable by a fresh consumer reading every partition from its
    log start offset to its high watermark (a record below the log start offset went by retention);
  - a probe produce with acks=all succeeds on every partition of every non-internal topic;
  - each consumer group of the scenario converges: a probe member joins it and gets every
    partition of the group's topic, and a heartbeat in that generation answers NONE (the group
    is Stable); it then leaves without committing.
The probe retries round after round; the first round where everything holds ends the phase. If
the bound passes first, the run fails `liveness` with the last round's problems, each naming what
did not converge (the partition and the ISR members missing, the record, the group...).

A scenario that EXPECTS acknowledged loss (an unclean election, a power loss without fsync, a
diverged leader truncated) is not asked again for the records its own checks found lost, nor for
any record acknowledged before its last fault was over (such a loss can hit a record the
workload's consumer had already read); every record acknowledged after that must be there. The
count excused is in run.json (`liveness_phase.excused_records`). Nothing the probe does reaches the workload's History:
the checks ran before the phase.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kafkasim.client.cluster import ClientCluster
from kafkasim.client.connection import ClientError
from kafkasim.client.consumer import EARLIEST, LATEST, Consumer, ConsumerConfig
from kafkasim.client.group import GroupConfig, GroupError, GroupMember
from kafkasim.client.producer import Producer, ProducerConfig
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.metadata import MetadataRequest
from kafkasim.runtime.api import NetworkError, NodeRuntime, RuntimeTimeout

TP = tuple[str, int]
PROBE_NODE = "liveness-probe"
ROUND_GAP_MS = 500.0
REQUEST_TIMEOUT_MS = 5000.0
LOST_KINDS = ("lost-write", "unseen", "inconsistent-offsets")  # anomalies naming a record not there
RETRYABLE = (NetworkError, RuntimeTimeout, ClientError, KeyError)


@dataclass
class Required:
    """An acknowledged record the fresh consumer must find."""
    topic: str
    partition: int
    offset: int
    value: str


@dataclass
class ProbeSpec:
    records: list[Required]
    groups: dict[str, str]          # group id -> the topic its members subscribe to
    deadline_ms: float
    excused: int = 0                # acked records not asked for (an expected loss: heal.required_records)


@dataclass
class Probe:
    """The probe's progress: what converged (and stays converged: nothing breaks it again once
    everything is healed), and the last round's problems."""
    spec: ProbeSpec
    read_ok: set[tuple[str, int, int, str]] = field(default_factory=set)
    produced: set[TP] = field(default_factory=set)
    problems: list[dict[str, Any]] = field(default_factory=list)
    rounds: int = 0
    converged_ms: float | None = None


async def run_probe(rt: NodeRuntime, bootstrap: str, probe: Probe) -> None:
    """Rounds until one finds no problem or the deadline passes (probe.problems then says why)."""
    while True:
        probe.rounds += 1
        try:
            probe.problems = await _round(rt, bootstrap, probe)
        except RETRYABLE as exc:
            probe.problems = [{"what": "probe", "error": f"{type(exc).__name__}: {exc}"}]
        if not probe.problems:
            probe.converged_ms = rt.monotonic_ms()
            return
        if rt.monotonic_ms() + ROUND_GAP_MS >= probe.spec.deadline_ms:
            return
        await rt.sleep(ROUND_GAP_MS)


async def _round(rt: NodeRuntime, bootstrap: str, probe: Probe) -> list[dict[str, Any]]:
    """Discover the topics, produce, read, join the groups, and only then look at leaders and
    ISRs: a replica that is stuck (paused, partitioned) still looks in sync until the leader's
    replica.lag.time.max.ms runs out, which the acks=all probe produce waits for."""
    topics, _ = await _metadata(rt, bootstrap)
    user = {t: n for t, (n, internal) in topics.items() if not internal}
    problems = await _produce_problems(rt, bootstrap, user, probe)
    problems += await _read_problems(rt, bootstrap, user, probe)
    for group, topic in sorted(probe.spec.groups.items()):
        problems += await _group_problems(rt, bootstrap, group, topic, user.get(topic, 0))
    _, isr = await _metadata(rt, bootstrap)
    return isr + problems


async def _metadata(rt: NodeRuntime, bootstrap: str) -> tuple[dict[str, tuple[int, bool]], list[dict[str, Any]]]:
    cluster = ClientCluster(rt, bootstrap, PROBE_NODE, REQUEST_TIMEOUT_MS)
    try:
        return await _isr_problems(cluster)
    finally:
        cluster.close()


async def _isr_problems(cluster: ClientCluster) -> tuple[dict[str, tuple[int, bool]], list[dict[str, Any]]]:
    """Every topic (name -> (partitions, internal)), and each partition without a leader or a full ISR."""
    conn = await cluster.any_connection()
    resp = await conn.request_within(MetadataRequest(topics=None, allow_auto_topic_creation=False),
                                     REQUEST_TIMEOUT_MS)
    topics, problems = {}, []
    for t in sorted(resp.topics, key=lambda t: str(t.name)):
        if t.error_code != E.NONE:
            problems.append({"what": "topic", "topic": t.name, "error": E.error_name(t.error_code)})
            continue
        topics[str(t.name)] = (len(t.partitions), bool(t.is_internal))
        for p in sorted(t.partitions, key=lambda p: int(p.partition_index)):
            where = f"{t.name}-{p.partition_index}"
            replicas, isr = list(p.replica_nodes), set(p.isr_nodes)
            if p.leader_id < 0:
                problems.append({"what": "leader", "partition": where, "replicas": replicas,
                                 "offline": list(p.offline_replicas)})
            missing = sorted(set(replicas) - isr)
            if missing:
                problems.append({"what": "isr", "partition": where, "replicas": replicas, "isr": sorted(isr),
                                 "missing": missing})
    return topics, problems


async def _produce_problems(rt: NodeRuntime, bootstrap: str, topics: dict[str, int],
                            probe: Probe) -> list[dict[str, Any]]:
    """One acks=all probe record to each partition not yet shown producible (one attempt each)."""
    want = [(t, p) for t, n in sorted(topics.items()) for p in range(n) if (t, p) not in probe.produced]
    if not want:
        return []
    producer = Producer(rt, bootstrap, ProducerConfig(acks=-1, linger_ms=0, retries=0,
                                                      request_timeout_ms=REQUEST_TIMEOUT_MS), PROBE_NODE)
    problems: list[dict[str, Any]] = []
    try:
        errors = await producer.cluster.refresh_metadata(sorted({t for t, _ in want}), allow_auto_create=False)
        # A broker still starting answers no metadata (ignored, as Kafka's client does): not yet producible.
        known = [tp for tp in want if tp[0] in producer.cluster.partition_counts]
        problems += [{"what": "produce", "partition": f"{t}-{p}", "error": E.error_name(errors.get(t, E.NONE)),
                      "reason": "no metadata for the topic yet"} for t, p in want if (t, p) not in known]
        futures = [(tp, producer.send(tp[0], f"{PROBE_NODE}-{probe.rounds}".encode(), None, tp[1])) for tp in known]
        for tp, fut in futures:
            md = await fut
            if md.error_code == E.NONE:
                probe.produced.add(tp)
            else:
                problems.append({"what": "produce", "partition": f"{tp[0]}-{tp[1]}",
                                 "error": E.error_name(md.error_code)})
    finally:
        producer.close()
    return problems


async def _read_problems(rt: NodeRuntime, bootstrap: str, topics: dict[str, int],
                         probe: Probe) -> list[dict[str, Any]]:
    """A fresh consumer reads every partition still owing records, from its log start offset to
    its high watermark; each required record not found is a problem."""
    owing: dict[TP, list[Required]] = {}
    for r in probe.spec.records:
        if (r.topic, r.partition, r.offset, r.value) not in probe.read_ok:
            owing.setdefault((r.topic, r.partition), []).append(r)
    if not owing:
        return []
    consumer = Consumer(rt, bootstrap, ConsumerConfig(fetch_max_wait_ms=100, request_timeout_ms=REQUEST_TIMEOUT_MS),
                        client_id=f"{PROBE_NODE}-reader-{probe.rounds}")
    try:
        return await _read_all(consumer, owing, probe)
    finally:
        consumer.close()


async def _read_all(consumer: Consumer, owing: dict[TP, list[Required]], probe: Probe) -> list[dict[str, Any]]:
    await consumer.assign(sorted(owing))
    start, hw = {}, {}
    for tp in sorted(owing):
        start[tp] = await consumer.list_offset(tp, EARLIEST)
        hw[tp] = await consumer.list_offset(tp, LATEST)
        consumer.seek(tp, start[tp])
    seen: dict[TP, dict[int, str]] = {tp: {} for tp in owing}
    idle = 0
    while any((consumer.positions[tp] or 0) < hw[tp] for tp in owing) and idle < 20:
        records = await consumer.poll()
        idle = 0 if records else idle + 1
        for rec in records:
            seen[(rec.topic, rec.partition)][rec.offset] = (rec.value or b"").split(b".", 1)[0].decode(errors="replace")
    problems = []
    for tp, reqs in sorted(owing.items()):
        for r in reqs:
            if r.offset < start[tp] or seen[tp].get(r.offset) == r.value:
                probe.read_ok.add((r.topic, r.partition, r.offset, r.value))
                continue
            problems.append({"what": "record", "partition": f"{tp[0]}-{tp[1]}", "offset": r.offset,
                             "value": r.value, "found": seen[tp].get(r.offset), "log_start": start[tp],
                             "high_watermark": hw[tp]})
    return problems


async def _group_problems(rt: NodeRuntime, bootstrap: str, group: str, topic: str,
                          partitions: int) -> list[dict[str, Any]]:
    """A probe member joins the group; converged when it owns every partition in a Stable group."""
    member = GroupMember(rt, bootstrap, GroupConfig(group, request_timeout_ms=REQUEST_TIMEOUT_MS),
                         client_id=f"{PROBE_NODE}-member")
    try:
        await member.cluster.refresh_metadata([topic], allow_auto_create=False)
        owned = sorted(p for _, p in await member.ensure_active_group([topic], attempts=10))
        # A heartbeat in the generation just synced answers NONE only while the group is Stable
        # (REBALANCE_IN_PROGRESS once another rebalance started).
        code = await member.heartbeat()
        if code == E.NONE and owned == list(range(partitions)):
            return []
        unowned = sorted(set(range(partitions)) - set(owned))
        return [{"what": "group", "group": group, "heartbeat": E.error_name(code), "unowned": unowned}]
    except (*RETRYABLE, GroupError) as exc:  # GroupError: the join gave up after its attempts
        return [{"what": "group", "group": group, "error": f"{type(exc).__name__}: {exc}"}]
    finally:
        try:
            await member.leave_group()
        except RETRYABLE:
            pass  # the session expires instead
        member.close()
