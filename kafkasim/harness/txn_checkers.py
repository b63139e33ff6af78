"""Checkers of a transactional history (History.txns, History.txn_polls: every poll there is a
read_committed read), after ../shared/reference/anomalies.md §5 (3, 12-16).

A transaction's outcome is committed, aborted or unknown (txn_workload.py). A value's writers are
the transactions whose writes carry it (a copier's output "copy:v" may be written by several).

- aborted-read (G1a): a read returned a value all of whose writers aborted.
- uncommitted-read: a read returned a value at a time when none of its writers had yet asked to
  commit — no writer intended commit and sent EndTxn(commit) at or before the read's completion.
  (A value whose writers all aborted is aborted-read, not this.) read_committed may only return
  records below the LSO, and a transaction's records stay above it until its commit marker, which
  follows the EndTxn(commit). Bufstream's `early_read`, Jepsen's precommitted-read.
- torn-transaction: a committed transaction and one reader that returned some of its values and,
  on every partition the transaction wrote, read past the transaction's last offset there, yet
  did not return all of them (KAFKA-17754: part of a transaction committed, part lost).
- lost-committed-write: a committed write (offset known) that no reader returned although some
  reader returned a later offset of the same partition.
- unseen-committed: a committed write of a topic someone reads that no reader ever returned
  (checked after the final reads; cannot tell loss from a stuck LSO — both fail).
- eos-duplicate / eos-missing / eos-offsets (consume-transform-produce, pipeline copiers: their
  transactions have reads): an input value of a committed source transaction whose copy the final
  consumers read at two or more output offsets / never read; and, against the copier group's
  final committed offsets F[p], an input record below F[p] without a copy read, or at or above
  F[p] with one (output and offsets were not committed together).
- g1c: a cycle of committed transactions over wr edges (T1→T2: T2 read a value T1 wrote) — must
  be absent under read_committed. G0 and G1c with ww edges (T1's write immediately precedes
  T2's in a partition) are allowed in Kafka, whose transactions do not isolate writes; they
  are counted by `cycle_counts` (reported, never a failure).
"""

from __future__ import annotations

from collections import defaultdict

from kafkasim.harness.checkers import Anomaly, CheckResult
from kafkasim.harness.workload import History, Poll, Txn, TxnWrite

TPO = tuple[str, int, int]


def check_txns(h: History) -> list[CheckResult]:
    return [check_aborted_read(h), check_uncommitted_read(h), check_torn(h),
            check_lost_committed(h, "lost-committed-write"), check_lost_committed(h, "unseen-committed"),
            *check_eos(h), check_g1c(h)]


def _writers(h: History) -> dict[str, list[Txn]]:
    out: dict[str, list[Txn]] = defaultdict(list)
    for t in h.txns:
        for w in t.writes:
            out[w.value].append(t)
    return out


def _read_detail(p: Poll, txns: list[Txn]) -> dict[str, object]:
    return {"reader": p.process, "topic": p.topic, "partition": p.partition, "offset": p.offset, "value": p.value,
            "at_ms": p.at_ms, "txns": [t.id for t in txns], "outcomes": [t.outcome for t in txns]}


def check_aborted_read(h: History) -> CheckResult:
    writers = _writers(h)
    out = CheckResult("aborted-read")
    for p in h.txn_polls:
        ts = writers.get(p.value, [])
        if ts and all(t.outcome == "aborted" for t in ts):
            out.anomalies.append(Anomaly("aborted-read", _read_detail(p, ts)))
    return out


def check_uncommitted_read(h: History) -> CheckResult:
    writers = _writers(h)
    out = CheckResult("uncommitted-read")
    for p in h.txn_polls:
        ts = writers.get(p.value, [])
        if not ts or all(t.outcome == "aborted" for t in ts):
            continue
        if not any(t.intent == "commit" and 0 <= t.end_invoke_ms <= p.at_ms for t in ts):
            out.anomalies.append(Anomaly("uncommitted-read", _read_detail(p, ts)))
    return out


def _reads_by_process(h: History) -> dict[str, list[Poll]]:
    out: dict[str, list[Poll]] = defaultdict(list)
    for p in h.txn_polls:
        out[p.process].append(p)
    return out


def _known(t: Txn) -> list[TxnWrite]:
    return [w for w in t.writes if w.offset >= 0]


def check_torn(h: History) -> CheckResult:
    out = CheckResult("torn-transaction")
    for reader, polls in sorted(_reads_by_process(h).items()):
        values = {p.value for p in polls}
        furthest: dict[tuple[str, int], int] = {}
        for p in polls:
            furthest[(p.topic, p.partition)] = max(furthest.get((p.topic, p.partition), -1), p.offset)
        for t in h.txns:
            ws = _known(t)
            if t.outcome != "committed" or not ws:
                continue
            last: dict[tuple[str, int], int] = {}
            for w in ws:
                last[(w.topic, w.partition)] = max(last.get((w.topic, w.partition), -1), w.offset)
            seen = [w for w in ws if w.value in values]
            passed = all(furthest.get(tp, -1) > off for tp, off in last.items())
            if seen and passed and len(seen) < len(ws):
                out.anomalies.append(Anomaly("torn-transaction", {
                    "txn": t.id, "reader": reader, "seen": [[w.partition, w.offset] for w in seen],
                    "missing": [[w.partition, w.offset, w.value] for w in ws if w.value not in values]}))
    return out


def check_lost_committed(h: History, kind: str) -> CheckResult:
    out = CheckResult(kind)
    read_values = {p.value for p in h.txn_polls}
    furthest: dict[tuple[str, int], int] = {}
    for p in h.txn_polls:
        furthest[(p.topic, p.partition)] = max(furthest.get((p.topic, p.partition), -1), p.offset)
    read_topics = {p.topic for p in h.txn_polls}
    for t in h.txns:
        if t.outcome != "committed":
            continue
        for w in _known(t):
            if w.value in read_values or w.topic not in read_topics:
                continue
            if kind == "unseen-committed" or furthest.get((w.topic, w.partition), -1) > w.offset:
                out.anomalies.append(Anomaly(kind, {"txn": t.id, "topic": w.topic, "partition": w.partition,
                                                    "offset": w.offset, "value": w.value,
                                                    "furthest_read": furthest.get((w.topic, w.partition), -1)}))
    return out


def check_eos(h: History) -> list[CheckResult]:
    dup, missing, offsets = CheckResult("eos-duplicate"), CheckResult("eos-missing"), CheckResult("eos-offsets")
    copiers = [t for t in h.txns if t.reads]
    if not copiers:
        return [dup, missing, offsets]
    input_topic = copiers[0].reads[0].topic
    inputs = [w for t in h.txns if not t.reads and t.outcome == "committed" for w in _known(t)
              if w.topic == input_topic]
    copies: dict[str, set[tuple[str, int, int]]] = defaultdict(set)
    for p in h.txn_polls:
        if p.value.startswith("copy:") and p.topic != input_topic:
            copies[p.value[len("copy:"):]].add((p.topic, p.partition, p.offset))
    for w in inputs:
        got = copies.get(w.value, set())
        detail = {"value": w.value, "partition": w.partition, "offset": w.offset, "copies": sorted(got)}
        if len(got) > 1:
            dup.anomalies.append(Anomaly("eos-duplicate", detail))
        if not got:
            missing.anomalies.append(Anomaly("eos-missing", detail))
        final = h.final_offsets.get(f"{w.topic}-{w.partition}")
        if final is not None and (w.offset < final) != bool(got):
            offsets.anomalies.append(Anomaly("eos-offsets", dict(detail, committed_offset=final)))
    return [dup, missing, offsets]


def _wr_edges(h: History) -> dict[str, set[str]]:
    writers = _writers(h)
    edges: dict[str, set[str]] = defaultdict(set)
    for t in h.txns:
        if t.outcome != "committed":
            continue
        for r in t.reads:
            for w in writers.get(r.value, []):
                if w.outcome == "committed" and w.id != t.id:
                    edges[w.id].add(t.id)
    return edges


def _ww_edges(h: History) -> dict[str, set[str]]:
    by_tp: dict[tuple[str, int], list[tuple[int, str]]] = defaultdict(list)
    for t in h.txns:
        if t.outcome == "committed":
            for w in _known(t):
                by_tp[(w.topic, w.partition)].append((w.offset, t.id))
    edges: dict[str, set[str]] = defaultdict(set)
    for writes in by_tp.values():
        writes.sort()
        for (_, a), (_, b) in zip(writes, writes[1:], strict=False):
            if a != b:
                edges[a].add(b)
    return edges


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's SCCs with more than one node (iterative: histories can be long)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    nodes = sorted(set(edges) | {b for bs in edges.values() for b in bs})
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, ())))))
                elif nxt in on_stack:
                    low[v] = min(low[v], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on_stack.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def check_g1c(h: History) -> CheckResult:
    out = CheckResult("g1c")
    for comp in strongly_connected(_wr_edges(h)):
        out.anomalies.append(Anomaly("g1c", {"txns": comp, "edges": "wr"}))
    return out


def cycle_counts(h: History) -> dict[str, int]:
    """G0 (ww-only cycles) and G1c over ww ∪ wr: informational (Kafka allows them)."""
    ww, wr = _ww_edges(h), _wr_edges(h)
    both: dict[str, set[str]] = defaultdict(set)
    for e in (ww, wr):
        for a, bs in e.items():
            both[a] |= bs
    return {"g0": len(strongly_connected(ww)), "g1c_with_ww": len(strongly_connected(both))}


def txn_stats(h: History) -> dict[str, int]:
    """run.json stats of a transactional run: transactions by outcome, records read, cycles."""
    out = {f"txns_{o}": sum(1 for t in h.txns if t.outcome == o) for o in ("committed", "aborted", "unknown")}
    out["read_committed_reads"] = len(h.txn_polls)
    return {**out, **cycle_counts(h)}
