"""God's-eye checks: what only the simulation can see — every broker's log at once.

replica-divergence: for every partition with a live leader (the live broker leading it with
the highest leader epoch), every live replica's log must hold the same batches as the leader's
below the leader's high watermark (as far as the replica's log reaches): same base and last
offset, same leader epoch, same CRC. Compacted topics are skipped (each replica's cleaner
rewrites its own batches). Two replicas holding different records at a committed
offset is exactly what KIP-101/279's truncation by leader epoch prevents. KIP-101/279 promise
that only of a replica that has finished truncating against the current leader in its epoch
(its fetcher holds the partition, no longer Truncating, and the leader as it is now has seen
it fetch): a replica that has not (its fetcher still asks OffsetForLeaderEpoch, or cannot reach
the leader yet, or still waits on a power-lost leader's previous incarnation while that leader
leads the same epoch again) may hold a suffix the
truncation will remove, but never below its *own* high watermark — what it knew to be
committed survives every clean election. Such a replica is compared up to
min(leader's HW, its own HW) — and, when the leader lost power and then led the partition from
log end offset R (EpochReuseWatch.led_after_power_loss), below R only: a power loss can take
records the leader had acknowledged (no flush per write), so what such a replica still holds at
R and above, even below its own high watermark, is what its truncation will remove, not a
replication bug (power-loss-default-flush-swarm seeds 1450, 1480: the follower's fetcher was
waiting out replica.socket.timeout.ms on the leader's previous incarnation). The lost records
are lost-write.

leader-epoch-bit-flip: a replica's batch that equals the leader's in offsets and CRC but whose
partition leader epoch differs by exactly one bit, on a partition whose log a disk flipped
bits in (a "disk_fault" bitflip, on read or at rest). The partition leader epoch (bytes
12-15 of the batch) lies before the CRC, which covers attributes..end, so Kafka too stores and
serves such a batch as valid (UnifiedLog.append even puts the epoch into the follower's
leader-epoch cache). That is corruption that propagated, not a replication bug; the comparison
goes on past it, so whatever it leads to later (an inflated epoch steering a truncation leaves
different offsets or CRCs) is still replica-divergence. Without a bit flip in the run the same
difference is replica-divergence.

corrupt-offset-propagated: the same for a flip in the batch's base offset (bytes 0-7, not covered
by the CRC either), on such a partition: a replica holding the leader's records (same CRC, same
offset span) at an offset one bit from where the leader has them, or the other way round, or
the leader missing a stretch of offsets a replica holds (a hole: a follower takes the offsets a
batch claims — UnifiedLog.append refuses only a first offset below its log end — so a flipped
offset makes its log end jump, and the truncation back to the leader's end on
OFFSET_OUT_OF_RANGE leaves the skipped offsets missing; a leader that was once that follower
keeps the hole). Kafka does the same; other differences stay replica-divergence.

epoch-reused-after-power-loss (harness/epoch_reuse.py): a replica's first difference is a batch of
an epoch its leader lost the tail of to a power loss and then led again, at or above the offset
it resumed from (or of an older epoch there, with a batch of the reused epoch after it). Kafka
3.9 reaches that state; the replica is not compared further.

isr-behind-high-watermark: every ISR member (the leader's committed ISR) must have everything
below the high watermark — that is what admitting it to the ISR promised.

The check compares batch headers (the CRC covers every byte after it), reading each log
through the broker's own Log object, so it sees what that broker would serve.

recovered-not-prefix / unwritten-bytes (RecoveryWatch): when a broker crashes, the watch takes
— before the crash takes effect — every partition's log as the broker had it (L: its .log files'
batches) and every batch any of its files could bring back (W: the current bytes, the durable
bytes and each write not yet fsynced — a truncation the broker never fsynced can be undone by a
power loss, so what it cut is in W too). When the broker has recovered its logs (its
broker_started, which comes before it processes any request, so before replication resumes) the
recovered log R must be L's prefix followed only by batches the broker legitimately truncated
(in W, not in L), and every batch of R must be in W: a recovered batch nobody wrote — a torn
body under an intact header, zeros or garbage that parse — is unwritten-bytes. Batches are
compared by offsets, leader epoch and the CRC-32C of their bytes as they are on disk. Segments
below the pre-crash log start (a retention delete the power loss undid) are ignored; compacted
logs get only the unwritten-bytes check (the cleaner rewrites batches).

The watchers see the simulation through one tap on SimWorld.emit (`listen`), which runs on
every trace event, synchronously, before the event's cause proceeds; they read SimDisk and
broker state directly and never call the node's runtime (no seeded draws, no fault injection),
so checking never changes a run's trace.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafkasim.broker.partition import UNKNOWN_OFFSET
from kafkasim.cluster.sim_cluster import SimCluster
from kafkasim.harness.checkers import Anomaly, CheckResult
from kafkasim.harness.epoch_reuse import EpochReuseWatch
from kafkasim.harness.invariants import InvariantMonitor
from kafkasim.harness.txn_invariants import TxnWatch
from kafkasim.records.batch import LOG_OVERHEAD, MAGIC_VALUE_V2, MIN_BATCH_LENGTH, decode_batch_records, iter_batches
from kafkasim.records.crc import crc32c
from kafkasim.runtime.sim.filesystem import SimDisk, SimFile
from kafkasim.runtime.sim.world import SimWorld

READ_CHUNK_BYTES = 1 << 20
TopicPartition = tuple[str, int]


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


def leader_value_at(cluster: SimCluster, topic: str, partition: int, offset: int) -> bytes | None:
    """The value of the record at `offset` in the current leader's log (None: no leader, no
    such record, or a batch that does not decode)."""
    name = cluster.leader_of(topic, partition)
    rm = cluster.replica_manager(name) if name is not None else None
    part = rm.get_partition(topic, partition) if rm is not None else None
    if part is None:
        return None
    try:
        data = bytes(part.log.read(offset, 1, max_offset=offset + 1))
        for at, h in iter_batches(data):
            if h.base_offset <= offset <= h.last_offset:
                return next((r.value for r in decode_batch_records(data, at) if r.offset == offset), None)
    except Exception:  # an offline log, or a batch the CRC rejects: nothing there to read
        return None
    return None


def workload_value_at(cluster: SimCluster) -> Callable[[str, int, int], str | None]:
    """leader_value_at as the workload names values (the part before the padding dots)."""
    def value_at(topic: str, partition: int, offset: int) -> str | None:
        raw = leader_value_at(cluster, topic, partition, offset)
        return None if raw is None else raw.split(b".", 1)[0].decode(errors="replace")
    return value_at


def check_replicas(cluster: SimCluster, bit_flipped: set[TopicPartition] | None = None,
                   epoch_reuse: EpochReuseWatch | None = None) -> list[CheckResult]:
    """`bit_flipped`: the partitions whose log some disk flipped bits in (BitFlipWatch);
    `epoch_reuse`: the epochs power-lost leaders led again (EpochReuseWatch)."""
    divergence = CheckResult("replica-divergence")
    reused = CheckResult("epoch-reused-after-power-loss")
    behind = CheckResult("isr-behind-high-watermark")
    epoch_flips = CheckResult("leader-epoch-bit-flip")
    offset_propagated = CheckResult("corrupt-offset-propagated")
    partitions = sorted({tp for _, rm in cluster.live_replica_managers() for tp in rm.partitions})
    for topic, index in partitions:
        leader_name = cluster.leader_of(topic, index)
        if leader_name is None:
            continue
        leader_rm = cluster.replica_manager(leader_name)
        assert leader_rm is not None
        leader = leader_rm.get_partition(topic, index)
        assert leader is not None
        if leader.log.config.compact:
            continue  # each replica's cleaner compacts on its own: batches legitimately differ
        hw = leader.high_watermark
        reference = _safe_batches(leader.log, leader.log.log_start_offset, hw)
        if reference is None:
            continue
        by_base = {b.base_offset: b for b in reference}
        flips_possible = bit_flipped is not None and (topic, index) in bit_flipped
        for name, server in cluster.live_servers():
            if name == leader_name or server.replica_manager is None:
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
            if not _reconciled(server, (topic, index), leader_rm.broker_id, leader.leader_epoch) \
                    or not _fetched_from(leader, broker_id):
                end = min(end, replica.high_watermark)
                resumed_at = epoch_reuse.led_after_power_loss(leader_name, (topic, index)) if epoch_reuse else None
                if resumed_at is not None:
                    end = min(end, resumed_at)
            theirs = _safe_batches(replica.log, start, end)
            if theirs is None:
                continue
            where = {"topic": topic, "partition": index, "leader": leader_name, "replica": name, "high_watermark": hw}
            flips, offset_flips, first = _differences(by_base, theirs, start, flips_possible)
            for b, ref in flips:
                epoch_flips.anomalies.append(Anomaly("leader-epoch-bit-flip", {
                    **where, "offset": b.base_offset, "leader_epoch": ref.leader_epoch,
                    "replica_epoch": b.leader_epoch, "crc": b.crc}))
            for off, leader_batch, replica_batch in offset_flips:
                offset_propagated.anomalies.append(Anomaly("corrupt-offset-propagated", {
                    **where, "offset": off, "leader_batch": leader_batch, "replica_batch": replica_batch}))
            if first is None:
                continue
            detail = {**where, "offset": first[0], "leader_batch": first[1], "replica_batch": first[2]}
            base = first[2][0]
            above = {b.leader_epoch for b in theirs if b.base_offset > base} | _epochs_begun_above(replica.log, base)
            resumed = epoch_reuse.explains((topic, index), first[2], above) if epoch_reuse is not None else None
            if resumed is not None:
                reused.anomalies.append(Anomaly("epoch-reused-after-power-loss", {**detail, "resumed_at": resumed}))
            else:
                divergence.anomalies.append(Anomaly("replica-divergence", detail))
    return [divergence, reused, behind, epoch_flips, offset_propagated]


def _epochs_begun_above(log: Any, offset: int) -> set[int]:
    """The epochs the replica's epoch cache says it began above `offset`: it followed them there
    even when a truncation has since cut those batches away (seed 4251: broker-0 followed epoch 2
    from 275; truncated to 399, inside its batch 275-412, it kept only 0-274 of epochs 0 and 1)."""
    return {epoch for epoch, start in log.leader_epoch_cache.entries if start > offset}


def _reconciled(server: Any, tp: TopicPartition, leader_id: int, leader_epoch: int) -> bool:
    """Has this replica finished truncating against `leader_id` in `leader_epoch` (its fetcher
    for that leader holds the partition and is past the Truncating state)?"""
    replica = server.replica_manager.get_partition(*tp)
    if replica is None or replica.leader_epoch != leader_epoch:
        return False
    thread = server.replica_manager.fetcher_manager.threads.get(leader_id)
    st = thread.partitions.get(tp) if thread is not None else None
    return st is not None and not st.truncating and st.current_leader_epoch == leader_epoch


def _fetched_from(leader: Any, broker_id: int) -> bool:
    """Has the leader, as it is now, seen this replica fetch? A leader that lost power and came
    back leading the same epoch (no LeaderAndIsr reaches its followers) starts with every
    follower's log end unknown (Partition.makeLeader); a follower whose fetcher still waits on
    the leader's previous incarnation finished its truncation against a log the leader no
    longer has, so its own state says reconciled while it has not been checked against this
    log (power-loss-default-flush-swarm seed 1005)."""
    remote = leader.remote_replicas.get(broker_id)
    return remote is not None and remote.log_end_offset != UNKNOWN_OFFSET


def _safe_batches(log: Any, start: int, end: int) -> list[BatchId] | None:
    try:
        return batches_below(log, start, end)
    except Exception:  # an offline or closed log: nothing to compare
        return None


_Difference = tuple[int, list[int] | None, list[int]]


def _differences(reference: dict[int, BatchId], theirs: list[BatchId], start: int, flips_possible: bool
                 ) -> tuple[list[tuple[BatchId, BatchId]], list[_Difference], _Difference | None]:
    """(the batches that differ from the leader's only by one flipped bit of the partition
    leader epoch — when bit flips happened — with the leader's batch; the differences a flipped
    base offset explains — see _offset_flip; the first other difference or None)."""
    flips: list[tuple[BatchId, BatchId]] = []
    offset_flips: list[_Difference] = []
    by_crc: dict[int, list[BatchId]] = {}
    theirs_by_crc: dict[int, BatchId] = {}
    if flips_possible:
        for r in reference.values():
            by_crc.setdefault(r.crc, []).append(r)
        theirs_by_crc = {b.crc: b for b in theirs}
    for b in theirs:
        if b.last_offset < start:
            continue
        ref = reference.get(b.base_offset)
        if ref == b:
            continue
        if flips_possible and ref is not None and _epoch_bit_flip(ref, b):
            flips.append((b, ref))
            continue
        diff = (b.base_offset, _ids(ref), [b.base_offset, b.last_offset, b.leader_epoch, b.crc])
        if flips_possible and _offset_flip(b, ref, reference, by_crc, theirs_by_crc):
            offset_flips.append(diff)
            continue
        return flips, offset_flips, diff
    return flips, offset_flips, None


def _offset_flip(b: BatchId, ref: BatchId | None, reference: dict[int, BatchId], by_crc: dict[int, list[BatchId]],
                 theirs_by_crc: dict[int, BatchId]) -> bool:
    """Does a base offset that one flipped bit moved explain why the replica's batch `b` differs
    from the leader's `ref` at its offset? Yes when (a) the leader holds b's records (same CRC,
    same offset span) at an offset one bit from b's — the replica stored a batch whose header was
    flipped; (b) the replica holds ref's records one bit away — the leader stored the flipped
    copy; or (c) the leader has no batch overlapping b at all, in a log that is not compacted:
    a hole that only a flipped base offset makes (a follower takes the offsets it is given, and
    a leader that was once such a follower keeps the hole when its log end offset jumped and was
    truncated back — UnifiedLog.append checks only that the first offset is not below the log
    end, AbstractFetcherThread truncates to the leader's end on OFFSET_OUT_OF_RANGE)."""
    span = b.last_offset - b.base_offset
    if any(_one_bit(r.base_offset, b.base_offset) and r.last_offset - r.base_offset == span
           for r in by_crc.get(b.crc, [])):
        return True
    if ref is not None:
        twin = theirs_by_crc.get(ref.crc)
        if twin is not None and _one_bit(twin.base_offset, ref.base_offset):
            return True
        return False
    return not any(r.base_offset <= b.last_offset and r.last_offset >= b.base_offset for r in reference.values())


def _one_bit(a: int, b: int) -> bool:
    x = (a ^ b) & 0xFFFFFFFFFFFFFFFF
    return x != 0 and x & (x - 1) == 0


def _epoch_bit_flip(a: BatchId, b: BatchId) -> bool:
    """Same batch (offsets, CRC) but partition leader epochs one bit apart (as 32-bit words)."""
    if (a.base_offset, a.last_offset, a.crc) != (b.base_offset, b.last_offset, b.crc):
        return False
    x = (a.leader_epoch ^ b.leader_epoch) & 0xFFFFFFFF
    return x != 0 and x & (x - 1) == 0


class BitFlipWatch:
    """The partitions whose log a disk flipped bits in ("disk_fault" bitflip events on a path
    <log dir>/<topic>-<partition>/...), for leader-epoch-bit-flip."""

    def __init__(self) -> None:
        self.partitions: set[TopicPartition] = set()
        # (topic, partition, offset): where a follower's log got a hole from a batch whose base
        # offset is one bit from the log end offset it should have had (a flipped base offset).
        self.holes: set[tuple[str, int, int]] = set()

    def on_event(self, node: str, ev: str, fields: dict[str, Any]) -> None:
        if ev == "follower_offset_gap":
            leo, first = int(fields["log_end_offset"]), int(fields["first_offset"])
            x = leo ^ first
            if x & (x - 1) == 0:
                self.holes.add((str(fields["topic"]), int(fields["partition"]), leo))
            return
        if ev != "disk_fault" or fields.get("fault") != "bitflip":
            return
        parts = str(fields.get("path", "")).split("/")
        if len(parts) >= 2:
            topic, _, index = parts[-2].rpartition("-")
            if topic and index.isdigit():
                self.partitions.add((topic, int(index)))


def failover_times(trace_path: str) -> list[dict[str, Any]]:
    """For every broker crash in a run's trace: how long until another broker became leader of
    a partition the crashed one led (crash -> first LeaderAndIsr that made a new leader)."""
    import json

    leaders: dict[tuple[str, int], str] = {}
    pending: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []
    with open(trace_path) as f:
        for line in f:
            if '"ev":"become_leader"' not in line and '"ev":"node_crash"' not in line:
                continue  # the trace is canonical JSON: no need to parse the other ~99% of lines
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


# ==================================================================== the event tap
Listener = Callable[[str, str, dict[str, Any]], None]


def listen(world: SimWorld, listener: Listener) -> None:
    """Call `listener(node, ev, fields)` on every event the world emits, after it is traced,
    in the order the listeners were added."""
    world.listeners.append(listener)


# ==================================================================== recovery
# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta
_BATCH_HEAD = struct.Struct(">qiibIhi")
CRC_START = 21


def scan_batches(buf: bytes | bytearray, check_crc: bool) -> list[BatchId]:
    """The whole v2 batches at the start of `buf`, up to the first structurally invalid one
    (and, with check_crc, the first CRC mismatch). Each carries the CRC-32C of its bytes as they
    are, so a torn body under an intact header is a different batch."""
    out: list[BatchId] = []
    view, pos, n = memoryview(buf), 0, len(buf)
    while pos + _BATCH_HEAD.size <= n:
        base, length, epoch, magic, stored, _attr, delta = _BATCH_HEAD.unpack_from(buf, pos)
        end = pos + LOG_OVERHEAD + length
        if length < MIN_BATCH_LENGTH or magic != MAGIC_VALUE_V2 or end > n or delta < 0:
            break
        actual = crc32c(view[pos + CRC_START:end])
        if check_crc and actual != stored:
            break
        out.append(BatchId(base, base + delta, epoch, actual))
        pos = end
    return out


def _segment_tp(path: str, log_dir: str) -> tuple[TopicPartition, int, bool] | None:
    """(partition, base offset, is a live .log) for a segment file of `log_dir`, else None."""
    if not path.startswith(log_dir + "/"):
        return None
    parts = path[len(log_dir) + 1:].split("/")
    if len(parts) != 2 or ".log" not in parts[1]:
        return None
    stem, _, suffix = parts[1].partition(".")
    topic, _, index = parts[0].rpartition("-")
    if not (stem.isdigit() and index.isdigit() and topic) or not suffix.startswith("log"):
        return None
    return (topic, int(index)), int(stem), suffix == "log"


def live_logs(disk: SimDisk, log_dir: str, check_crc: bool) -> dict[TopicPartition, list[BatchId]]:
    """Each partition's .log files as reads see them now, in base offset order."""
    found: dict[TopicPartition, list[tuple[int, SimFile]]] = {}
    for path, f in sorted(disk.files.items()):
        seg = _segment_tp(path, log_dir)
        if seg is not None and seg[2]:
            found.setdefault(seg[0], []).append((seg[1], f))
    return {tp: [b for _, f in sorted(files, key=lambda bf: bf[0]) for b in scan_batches(f.read(0, f.size), check_crc)]
            for tp, files in sorted(found.items())}


def restorable_batches(disk: SimDisk, log_dir: str) -> dict[TopicPartition, set[BatchId]]:
    """Every batch a crash could leave in a partition's segment files (any suffix, any entry a
    power loss could bring back): current bytes, durable bytes, each unsynced write."""
    files: dict[int, tuple[str, SimFile]] = {}
    for path, f in list(disk.files.items()) + list(disk.durable_files.items()):
        files.setdefault(id(f), (path, f))
    for _kind, path, jf, _src in disk.journal:
        if jf is not None:
            files.setdefault(id(jf), (path, jf))
    out: dict[TopicPartition, set[BatchId]] = {}
    for path, f in sorted(files.values(), key=lambda pf: pf[0]):
        seg = _segment_tp(path, log_dir)
        if seg is None:
            continue
        found = out.setdefault(seg[0], set())
        durable = bytes(f.durable[:f.durable_size]) + bytes(max(0, f.durable_size - len(f.durable)))
        for chunk in [f.read(0, f.size), durable] + [c for kind, _pos, c in f.pending if kind == "w"]:
            found.update(scan_batches(chunk, check_crc=True))
    return out


@dataclass
class CrashSnapshot:
    node: str
    mode: str
    crash_ms: float
    logs: dict[TopicPartition, list[BatchId]]       # L
    written: dict[TopicPartition, set[BatchId]]     # W
    server: Any                                     # the KafkaServer that crashed
    compact: set[TopicPartition] = field(default_factory=set)


class RecoveryWatch:
    """recovered-not-prefix and unwritten-bytes (see the module docstring)."""

    def __init__(self, world: SimWorld, cluster: SimCluster) -> None:
        self.world, self.cluster = world, cluster
        self.pending: dict[str, CrashSnapshot] = {}
        self.not_prefix = CheckResult("recovered-not-prefix")
        self.unwritten = CheckResult("unwritten-bytes")
        self.recoveries_checked = 0

    def on_event(self, node: str, ev: str, fields: dict[str, Any]) -> None:
        if node not in self.cluster.servers:
            return
        if node in self.pending:
            self._check_if_recovered(node)
        if ev == "node_crash":
            self._capture(node, str(fields.get("mode", "kill")))

    def step(self) -> None:
        for node in sorted(self.pending):
            self._check_if_recovered(node)

    def finish(self) -> list[CheckResult]:
        self.step()
        return [self.not_prefix, self.unwritten]

    def _check_if_recovered(self, node: str) -> None:
        """Check once the new incarnation has loaded its logs. Any moment from then until its
        broker_started (after which it serves requests) sees the logs exactly as recovered."""
        server = self.cluster.servers[node]
        lm = server.replica_manager.log_manager if server.replica_manager is not None else None
        if (server is not self.pending[node].server and self.world.nodes[node].alive and lm is not None
                and lm.load_completed):
            self._check(node)

    def _log_dir(self, node: str) -> str:
        return self.cluster.servers[node].config.log_dir

    def _capture(self, node: str, mode: str) -> None:
        disk, log_dir = self.world.nodes[node].disk, self._log_dir(node)
        written = restorable_batches(disk, log_dir)
        rm = self.cluster.servers[node].replica_manager
        lm = rm.log_manager if rm is not None else None
        compact = {tp for tp, log in (lm.logs.items() if lm is not None else []) if log.config.compact}
        earlier = self.pending.get(node)
        if earlier is not None:  # crashed again before it recovered: the first log stays the reference
            for tp, batches in written.items():
                earlier.written.setdefault(tp, set()).update(batches)
            earlier.compact |= compact
            return
        self.pending[node] = CrashSnapshot(node, mode, self.world.now_ms(), live_logs(disk, log_dir, True),
                                           written, self.cluster.servers[node], compact)

    def _check(self, node: str) -> None:
        snap = self.pending.pop(node)
        self.recoveries_checked += 1
        recovered = live_logs(self.world.nodes[node].disk, self._log_dir(node), check_crc=False)
        for tp in sorted(set(recovered) | set(snap.logs)):
            self._check_partition(snap, tp, recovered.get(tp, []))

    def _check_partition(self, snap: CrashSnapshot, tp: TopicPartition, recovered: list[BatchId]) -> None:
        before, written = snap.logs.get(tp, []), snap.written.get(tp, set())
        where = {"node": snap.node, "topic": tp[0], "partition": tp[1], "crash_mode": snap.mode,
                 "crash_ms": round(snap.crash_ms, 3), "check_ms": round(self.world.now_ms(), 3)}
        for b in recovered:
            if b not in written:
                self.unwritten.anomalies.append(Anomaly("unwritten-bytes", dict(where, offset=b.base_offset,
                                                                                 recovered_batch=_ids(b))))
                break
        if tp in snap.compact:
            return
        first = _not_prefix(before, recovered)
        if first is not None:
            self.not_prefix.anomalies.append(Anomaly("recovered-not-prefix", dict(where, **first)))


def _ids(b: BatchId | None) -> list[int] | None:
    return None if b is None else [b.base_offset, b.last_offset, b.leader_epoch, b.crc]


def _not_prefix(before: list[BatchId], recovered: list[BatchId]) -> dict[str, Any] | None:
    """Where `recovered` stops being `before`'s prefix plus batches truncated from it (batches
    written once but absent from `before`); None if it does not."""
    log_start = before[0].base_offset if before else None
    r = [b for b in recovered if log_start is None or b.last_offset >= log_start]
    i = 0
    while i < len(r) and i < len(before) and r[i] == before[i]:
        i += 1
    kept = set(before)
    for b in r[i:]:
        if b in kept:  # a batch of the pre-crash log after the point the recovered one left it
            return {"offset": b.base_offset, "diverged_at": r[i].base_offset,
                    "expected_batch": _ids(before[i] if i < len(before) else None), "recovered_batch": _ids(r[i]),
                    "pre_crash_batches": len(before), "recovered_batches": len(recovered)}
    return None


# ==================================================================== all of it, for the runner
class GodsEye:
    """The run-time watchers, installed on a world before it runs: recovery and invariants."""

    def __init__(self, world: SimWorld, cluster: SimCluster) -> None:
        self.recovery = RecoveryWatch(world, cluster)
        self.invariants = InvariantMonitor(world, cluster)
        self.errors = CheckResult("checker-error")
        self.bit_flips = BitFlipWatch()
        self.epoch_reuse = EpochReuseWatch()
        self.txns = TxnWatch(world, cluster)
        listen(world, self._on_event)

    def _on_event(self, node: str, ev: str, fields: dict[str, Any]) -> None:
        # A checker bug must show, but never as an exception inside the node that emitted.
        try:
            self.recovery.on_event(node, ev, fields)
            self.invariants.on_event(node, ev, fields)
            self.bit_flips.on_event(node, ev, fields)
            self.epoch_reuse.on_event(node, ev, fields)
        except Exception as exc:  # noqa: BLE001 - reported as an anomaly
            self.errors.anomalies.append(Anomaly("checker-error", {"event": ev, "node": node,
                                                                    "error": f"{type(exc).__name__}: {exc}"}))

    def step(self) -> None:
        """Between simulation steps: the invariants over every partition."""
        try:
            self.recovery.step()
            self.invariants.check_everything()
            self.txns.step()
        except Exception as exc:  # noqa: BLE001
            self.errors.anomalies.append(Anomaly("checker-error", {"event": "step",
                                                                    "error": f"{type(exc).__name__}: {exc}"}))

    def results(self) -> list[CheckResult]:
        return self.recovery.finish() + self.invariants.results() + self.txns.results() + [self.errors]
