"""God's-eye checks: what only the simulation can see — every broker's log at once.

replica-divergence: for every partition with a live leader (the live broker leading it with
the highest leader epoch), every live replica's log must hold the same batches as the leader's
below the leader's high watermark (as far as the replica's log reaches): same base and last
offset, same leader epoch, same CRC. Compacted topics are skipped (each replica's cleaner
rewrites its own batches). Two replicas holding different records at a committed
offset is exactly what KIP-101/279's truncation by leader epoch prevents.

isr-behind-high-watermark: every ISR member (the leader's committed ISR) must have everything
below the high watermark — that is what admitting it to the ISR promised.

The check compares batch headers (the CRC covers every byte after it), reading each log
through the broker's own Log object, so it sees what that broker would serve.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from kafkasim.cluster.sim_cluster import SimCluster
from kafkasim.harness.checkers import Anomaly, CheckResult
from kafkasim.records.batch import iter_batches

READ_CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class BatchId:
    base_offset: int
    last_offset: int
    leader_epoch: int
    crc: int


def batches_below(log: Any, start: int, end: int) -> list[BatchId]:
    """The batches of `log` overlapping [start, end)."""
    out: list[BatchId] = []
    offset = start
    while offset < end:
        data = log.read(offset, READ_CHUNK_BYTES, max_offset=end)
        if not data:
            break
        nxt = offset
        for _, h in iter_batches(bytes(data)):
            if h.last_offset >= start and h.base_offset < end:
                out.append(BatchId(h.base_offset, h.last_offset, h.partition_leader_epoch, h.crc))
            nxt = h.next_offset
        if nxt <= offset:
            break
        offset = nxt
    return out


def check_replicas(cluster: SimCluster) -> list[CheckResult]:
    divergence = CheckResult("replica-divergence")
    behind = CheckResult("isr-behind-high-watermark")
    partitions = sorted({tp for _, s in cluster.live_servers() for tp in s.replica_manager.partitions})
    for topic, index in partitions:
        leader_name = cluster.leader_of(topic, index)
        if leader_name is None:
            continue
        leader = cluster.servers[leader_name].replica_manager.get_partition(topic, index)
        assert leader is not None
        if leader.log.config.compact:
            continue  # each replica's cleaner compacts on its own: batches legitimately differ
        hw = leader.high_watermark
        reference = _safe_batches(leader.log, leader.log.log_start_offset, hw)
        if reference is None:
            continue
        by_base = {b.base_offset: b for b in reference}
        for name, server in cluster.live_servers():
            if name == leader_name:
                continue
            replica = server.replica_manager.get_partition(topic, index)
            if replica is None or replica.offline:
                continue
            broker_id = server.config.broker_id
            if broker_id in leader.isr and replica.log.log_end_offset < hw:
                behind.anomalies.append(Anomaly("isr-behind-high-watermark", {
                    "topic": topic, "partition": index, "replica": broker_id, "leader": leader_name,
                    "log_end_offset": replica.log.log_end_offset, "high_watermark": hw}))
            start = max(replica.log.log_start_offset, leader.log.log_start_offset)
            end = min(hw, replica.log.log_end_offset)
            theirs = _safe_batches(replica.log, start, end)
            if theirs is None:
                continue
            first = _first_difference(by_base, theirs, start)
            if first is not None:
                divergence.anomalies.append(Anomaly("replica-divergence", {
                    "topic": topic, "partition": index, "leader": leader_name, "replica": name,
                    "high_watermark": hw, "offset": first[0], "leader_batch": first[1], "replica_batch": first[2]}))
    return [divergence, behind]


def _safe_batches(log: Any, start: int, end: int) -> Optional[list[BatchId]]:
    try:
        return batches_below(log, start, end)
    except Exception:  # an offline or closed log: nothing to compare
        return None


def _first_difference(reference: dict[int, BatchId], theirs: list[BatchId], start: int
                      ) -> Optional[tuple[int, Optional[list[int]], list[int]]]:
    for b in theirs:
        if b.last_offset < start:
            continue
        ref = reference.get(b.base_offset)
        if ref != b:
            return (b.base_offset, None if ref is None else [ref.base_offset, ref.last_offset, ref.leader_epoch, ref.crc],
                    [b.base_offset, b.last_offset, b.leader_epoch, b.crc])
    return None


def failover_times(trace_path: str) -> list[dict[str, Any]]:
    """For every broker crash in a run's trace: how long until another broker became leader of
    a partition the crashed one led (crash -> first LeaderAndIsr that made a new leader)."""
    import json

    leaders: dict[tuple[str, int], str] = {}
    pending: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []
    with open(trace_path) as f:
        for line in f:
            ev = json.loads(line)
            kind = ev.get("ev")
            if kind == "become_leader":
                tp = (ev["topic"], ev["partition"])
                leaders[tp] = ev["node"]
                for crash in list(pending):
                    if tp in crash["led"] and ev["node"] != crash["node"]:
                        out.append({"node": crash["node"], "crash_ms": crash["crash_ms"], "new_leader_ms": ev["t"],
                                    "new_leader": ev["node"], "topic": ev["topic"], "partition": ev["partition"],
                                    "time_to_new_leader_ms": round(ev["t"] - crash["crash_ms"], 3)})
                        pending.remove(crash)
            elif kind == "node_crash":
                led = {tp for tp, n in leaders.items() if n == ev["node"] and not tp[0].startswith("__")}
                if led:
                    pending.append({"node": ev["node"], "crash_ms": ev["t"], "led": led})
    return out
