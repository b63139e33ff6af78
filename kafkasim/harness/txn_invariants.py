"""God's-eye invariants of transactions, sampled between simulation steps (GodsEye.step):

- lso-above-high-watermark: a partition leader whose last stable offset is above its high
  watermark (read_committed readers would get records not yet replicated).
- transaction-past-timeout: a transaction a live coordinator holds Ongoing for longer than its
  transaction.timeout.ms plus OVERDUE_BOUND_MS (the abort timer runs every
  transaction.abort.timed.out.transaction.cleanup.interval.ms; a failover adds a reload).
- missing-marker: a decided transaction whose markers do not all arrive — a coordinator stuck in
  PrepareCommit/PrepareAbort, or a transaction open on a partition leader (producer id, first
  offset) that no live coordinator has Ongoing or Prepare* with that partition (a hanging
  transaction, KIP-890) — for longer than OVERDUE_BOUND_MS.

Each anomaly is reported once per transaction. The checks only appear in run.json once some
coordinator held a transaction (a run without transactions lists none of them).
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkasim.cluster.sim_cluster import SimCluster
from kafkasim.harness.checkers import Anomaly, CheckResult
from kafkasim.runtime.sim.world import SimWorld

OVERDUE_BOUND_MS = 40000.0
OPEN_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort")


@dataclass(frozen=True)
class LeaderView:
    node: str
    topic: str
    partition: int
    high_watermark: int
    last_stable_offset: int
    ongoing: tuple[tuple[int, int], ...]   # (producer id, first offset)


@dataclass(frozen=True)
class CoordinatorView:
    node: str
    transactional_id: str
    producer_id: int
    epoch: int
    state: str
    partitions: frozenset[tuple[str, int]]
    start_ms: int
    timeout_ms: int


def leader_views(cluster: SimCluster) -> list[LeaderView]:
    out = []
    for node, rm in cluster.live_replica_managers():
        for (topic, partition), p in sorted(rm.partitions.items()):
            if not p.is_leader or p.offline:
                continue
            log = p.log
            txns = log.producer_state_manager.ongoing_txns
            ongoing = tuple((t.producer_id, first) for first, t in sorted(txns.items()))
            out.append(LeaderView(node, topic, partition, log.high_watermark, log.last_stable_offset, ongoing))
    return out


def coordinator_views(cluster: SimCluster) -> list[CoordinatorView]:
    out = []
    for node, server in cluster.live_servers():
        if server.txn_coordinator is None:
            continue
        for md in server.txn_coordinator.txn_manager.all_metadata():
            tps = frozenset((tp.topic, tp.partition) for tp in md.topic_partitions)
            out.append(CoordinatorView(node, md.transactional_id, md.producer_id, md.producer_epoch,
                                       md.state.state_name, tps, md.txn_start_timestamp, md.txn_timeout_ms))
    return out


class TxnInvariants:
    def __init__(self, bound_ms: float = OVERDUE_BOUND_MS) -> None:
        self.bound_ms = bound_ms
        self.lso = CheckResult("lso-above-high-watermark")
        self.overdue = CheckResult("transaction-past-timeout")
        self.missing = CheckResult("missing-marker")
        self.seen_transactions = False
        self._reported: set[tuple[str, ...]] = set()
        self._since: dict[tuple[str, ...], float] = {}

    def _once(self, result: CheckResult, key: tuple[str, ...], detail: dict[str, object]) -> None:
        if key not in self._reported:
            self._reported.add(key)
            result.anomalies.append(Anomaly(result.name, detail))

    def check(self, now_ms: float, leaders: list[LeaderView], coordinators: list[CoordinatorView]) -> None:
        """One sample: `now_ms` on the brokers' clock (the coordinators' timestamps)."""
        self.seen_transactions = self.seen_transactions or bool(coordinators)
        for v in leaders:
            if v.last_stable_offset > v.high_watermark:
                self._once(self.lso, ("lso", v.topic, str(v.partition), str(v.last_stable_offset)),
                           {"node": v.node, "topic": v.topic, "partition": v.partition,
                            "lso": v.last_stable_offset, "high_watermark": v.high_watermark})
        stuck: set[tuple[str, ...]] = set()
        for c in coordinators:
            txn_key = ("txn", c.transactional_id, str(c.producer_id), str(c.epoch), str(c.start_ms))
            if c.state == "Ongoing" and now_ms - c.start_ms > c.timeout_ms + self.bound_ms:
                self._once(self.overdue, txn_key, {"node": c.node, "transactional_id": c.transactional_id,
                                                   "open_ms": now_ms - c.start_ms, "timeout_ms": c.timeout_ms})
            if c.state in ("PrepareCommit", "PrepareAbort"):
                stuck.add((*txn_key, c.state))
        open_at = {(c.producer_id, tp) for c in coordinators if c.state in OPEN_STATES for tp in c.partitions}
        for v in leaders:
            for pid, first in v.ongoing:
                if (pid, (v.topic, v.partition)) not in open_at:
                    stuck.add(("hanging", v.topic, str(v.partition), str(pid), str(first)))
        self._since = {k: self._since.get(k, now_ms) for k in sorted(stuck)}
        for k, since in self._since.items():
            if now_ms - since > self.bound_ms:
                self._once(self.missing, k, {"what": list(k), "for_ms": now_ms - since})

    def results(self) -> list[CheckResult]:
        return [self.lso, self.overdue, self.missing] if self.seen_transactions else []


class TxnWatch:
    """TxnInvariants over a simulated cluster."""

    def __init__(self, world: SimWorld, cluster: SimCluster) -> None:
        self.world, self.cluster = world, cluster
        self.invariants = TxnInvariants()

    def step(self) -> None:
        servers = self.cluster.live_servers()
        if not servers:
            return
        now = float(servers[0][1].rt.now_ms())
        self.invariants.check(now, leader_views(self.cluster), coordinator_views(self.cluster))

    def results(self) -> list[CheckResult]:
        return self.invariants.results()
