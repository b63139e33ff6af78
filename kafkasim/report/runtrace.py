"""One run over simulated time, read from the files the run wrote (for its report page).

  trace.jsonl    one JSON event per line ("ev", "t" in simulated ms, "node", ...): throughput
                 (send_complete, poll), faults and node crashes, leader / controller / coordinator
                 changes — each remembered with its 1-based line number so the page can link to it
  timeline.json  per-send invoke time and latency (kafkasim/harness/timeline.py); optional, as runs
                 written before it existed lack it: the page then says latency was not recorded
  run.json       anomalies, whose details are matched to the trace line they are about

One pass over the trace; nothing but the few hundred marked lines (and their context) is kept.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TRACE_FILE = "trace.jsonl"
TIMELINE_FILE = "timeline.json"  # the name kafkasim/harness/timeline.py writes
CONTEXT_LINES = 3  # trace lines kept either side of a marked one, for the trace excerpt page
MAX_EXCERPT_LINES = 6000  # the excerpt page of a huge run stays openable
# Bucket widths tried in order: the first giving at most MAX_BUCKETS buckets over the run wins.
BUCKET_STEPS_MS = (50, 100, 200, 250, 500, 1000, 2000, 5000, 10000, 30000, 60000)
MAX_BUCKETS = 150


@dataclass(frozen=True)
class Marker:
    """A point event on the timeline: category picks its colour and lane."""

    t_ms: float
    category: str  # controller | leader | unclean | coordinator | crash | restart | zk | fault | anomaly
    label: str
    line: int | None  # 1-based trace.jsonl line, None when no line matches


@dataclass(frozen=True)
class Span:
    """A period: a fault with a duration, or a node down between its crash and restart."""

    start_ms: float
    end_ms: float
    label: str
    line: int | None


@dataclass(frozen=True)
class AnomalyRef:
    kind: str
    expected: bool
    detail: Mapping[str, Any]
    t_ms: float | None
    line: int | None


@dataclass
class RunView:
    """Everything a run page draws; built by ``read_run_view``."""

    sim_time_ms: float
    bucket_ms: int
    produced_ok: list[int] = field(default_factory=list)  # answered sends per bucket, error 0
    produced_err: list[int] = field(default_factory=list)  # answered with an error
    consumed: list[int] = field(default_factory=list)  # records returned by polls
    latency: list[tuple[float, float, bool]] | None = None  # (invoke ms, latency ms, ok); None: no timeline
    unanswered: int = 0  # sends never answered (no latency)
    markers: list[Marker] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)
    anomalies: list[AnomalyRef] = field(default_factory=list)
    excerpt: list[tuple[int, str]] = field(default_factory=list)  # (line number, raw text)
    trace_lines: int = 0
    has_trace: bool = False
    notes: list[str] = field(default_factory=list)  # what could not be read, said on the page


def bucket_width(sim_time_ms: float) -> int:
    for step in BUCKET_STEPS_MS:
        if sim_time_ms / step <= MAX_BUCKETS:
            return step
    return BUCKET_STEPS_MS[-1]


def _first_time(detail: Any, depth: int = 0) -> float | None:
    """The first `*_ms` number in an anomaly's detail (depth-first, in key order): when it happened."""
    if depth > 2:
        return None
    items: list[Any] = []
    if isinstance(detail, Mapping):
        for key, value in detail.items():
            if str(key).endswith("_ms") and isinstance(value, (int, float)) and not isinstance(value, bool):
                return float(value)
            items.append(value)
    elif isinstance(detail, list):
        items = list(detail)
    for value in items:
        if isinstance(value, (Mapping, list)):
            found = _first_time(value, depth + 1)
            if found is not None:
                return found
    return None


def _value_of(detail: Mapping[str, Any]) -> str | None:
    """The produced value an anomaly is about (its ack is the line to show), if it names one."""
    for key in ("value", "later"):
        if isinstance(detail.get(key), str):
            return str(detail[key])
    values = detail.get("values")
    if isinstance(values, list) and values and isinstance(values[0], str):
        return values[0]  # inconsistent-offsets: the values read at one offset; the first one's ack
    return None


class _AnomalyMatcher:
    """Finds each anomaly's trace line during the single pass: a send_complete carrying its value,
    else the first event at or after its time."""

    def __init__(self, anomalies: list[Mapping[str, Any]]) -> None:
        self.items = anomalies
        self.times = [_first_time(a.get("detail", {})) for a in anomalies]
        self.values = [_value_of(a.get("detail", {})) for a in anomalies]
        self.lines: list[int | None] = [None] * len(anomalies)
        self.value_times: list[float | None] = [None] * len(anomalies)
        self._by_value: dict[str, list[int]] = {}
        for i, v in enumerate(self.values):
            if v is not None:
                self._by_value.setdefault(v, []).append(i)
        self._by_time = sorted((t, i) for i, t in enumerate(self.times) if t is not None and self.values[i] is None)
        self._next = 0

    def see(self, n: int, ev: Mapping[str, Any]) -> bool:
        hit = False
        t = float(ev.get("t", 0.0))
        if ev.get("ev") == "send_complete" and self._by_value:
            for i in self._by_value.pop(str(ev.get("value")), []):
                self.lines[i], self.value_times[i], hit = n, t, True
        while self._next < len(self._by_time) and self._by_time[self._next][0] <= t:
            self.lines[self._by_time[self._next][1]] = n
            self._next, hit = self._next + 1, True
        return hit

    def refs(self) -> list[AnomalyRef]:
        out = []
        for i, a in enumerate(self.items):
            t = self.times[i] if self.times[i] is not None else self.value_times[i]
            detail = a.get("detail", {})
            out.append(AnomalyRef(str(a.get("kind")), bool(a.get("expected")), detail if isinstance(detail, Mapping)
                                  else {}, t, self.lines[i]))
        return out


def _marker(ev: Mapping[str, Any], n: int) -> Marker | None:
    """The timeline marker for one trace event, or None for the events the timeline does not mark."""
    kind, t, node = ev.get("ev"), float(ev.get("t", 0.0)), ev.get("node", "?")
    if kind == "controller_elected":
        return Marker(t, "controller", f"controller → broker {ev.get('controller')} "
                                       f"(controller epoch {ev.get('controller_epoch')})", n)
    if kind == "become_leader":
        return Marker(t, "leader", f"{ev.get('topic')}-{ev.get('partition')} leader → {node} "
                                   f"(leader epoch {ev.get('leader_epoch')})", n)
    if kind == "partition_leader_elected" and ev.get("unclean"):
        return Marker(t, "unclean", f"unclean election: {ev.get('topic')}-{ev.get('partition')} → broker "
                                    f"{ev.get('leader')}", n)
    if kind == "group_load_completed":
        return Marker(t, "coordinator", f"group coordinator for __consumer_offsets-{ev.get('partition')} → "
                                        f"{node} ({ev.get('groups')} groups loaded)", n)
    if kind == "node_crash":
        return Marker(t, "crash", f"{node} crashed ({ev.get('mode', 'kill')})", n)
    if kind == "node_restart":
        return Marker(t, "restart", f"{node} restarted", n)
    if kind == "zk_session_expired":
        return Marker(t, "zk", f"ZooKeeper session {ev.get('session')} expired", n)
    if kind == "fault" and "duration_ms" not in ev and ev.get("kind") not in ("crash", "restart"):
        return Marker(t, "fault", f"fault {ev.get('kind')} on {ev.get('resolved', ev.get('target'))}", n)
    return None


def _fault_span(ev: Mapping[str, Any], n: int) -> Span | None:
    # Crashes are drawn as the node's down period (crash -> restart) instead, from node events.
    if ev.get("ev") != "fault" or "duration_ms" not in ev or ev.get("kind") == "crash":
        return None
    t = float(ev.get("t", 0.0))
    return Span(t, t + float(ev["duration_ms"]), f"{ev.get('kind')} {ev.get('resolved', ev.get('target'))}", n)


class _Collector:
    """Folds trace events into a RunView."""

    def __init__(self, view: RunView, matcher: _AnomalyMatcher) -> None:
        self.view, self.matcher = view, matcher
        self.down: dict[str, tuple[float, int]] = {}  # node -> (crash time, line)

    def _bucket(self, series: list[int], t: float, n: int = 1) -> None:
        i = min(max(int(t // self.view.bucket_ms), 0), len(series) - 1)
        series[i] += n

    def see(self, n: int, ev: Mapping[str, Any]) -> bool:
        """Fold in event n; True when the line is marked (kept for the excerpt page)."""
        kind, t = ev.get("ev"), float(ev.get("t", 0.0))
        v = self.view
        if kind == "send_complete":
            self._bucket(v.produced_ok if ev.get("error", 0) == 0 else v.produced_err, t)
        elif kind == "poll":
            self._bucket(v.consumed, t, int(ev.get("records", 0)))
        marked = self.matcher.see(n, ev)
        marker = _marker(ev, n)
        if marker is not None:
            v.markers.append(marker)
            marked = True
        span = _fault_span(ev, n)
        if span is not None:
            v.spans.append(span)
            marked = True
        node = str(ev.get("node"))
        if kind == "node_crash":
            self.down[node] = (t, n)
        elif kind == "node_restart" and node in self.down:
            start, line = self.down.pop(node)
            v.spans.append(Span(start, t, f"{node} down", line))
        return marked

    def finish(self) -> None:
        for node, (start, line) in sorted(self.down.items()):
            self.view.spans.append(Span(start, self.view.sim_time_ms, f"{node} down (not restarted)", line))
        self.view.anomalies = self.matcher.refs()
        self.view.spans.sort(key=lambda s: (s.start_ms, s.label))


def _events(path: Path, notes: list[str]) -> Iterator[tuple[int, str, dict[str, Any]]]:
    with path.open(encoding="utf-8") as f:
        for n, raw in enumerate(f, start=1):
            try:
                ev = json.loads(raw)
            except json.JSONDecodeError:
                notes.append(f"{TRACE_FILE} line {n} is not JSON; skipped")
                continue
            if isinstance(ev, dict):
                yield n, raw.rstrip("\n"), ev


def _read_trace(path: Path, collector: _Collector) -> None:
    view = collector.view
    before: deque[tuple[int, str]] = deque(maxlen=CONTEXT_LINES)
    keep_until = 0
    for n, raw, ev in _events(path, view.notes):
        view.trace_lines = n
        if collector.see(n, ev):
            if len(view.excerpt) < MAX_EXCERPT_LINES:
                view.excerpt.extend(before)
                keep_until = n + CONTEXT_LINES
            before.clear()
        if n <= keep_until and len(view.excerpt) < MAX_EXCERPT_LINES:
            view.excerpt.append((n, raw))
        else:
            before.append((n, raw))


def _read_latency(path: Path, view: RunView) -> None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        sends = doc["sends"]
        rows = zip(sends["invoke_ms"], sends["latency_ms"], sends["error"], strict=True)
        points = []
        for invoke, latency, error in rows:
            if latency is None:
                view.unanswered += 1
            else:
                points.append((float(invoke), float(latency), error == 0))
        view.latency = points
    except (OSError, ValueError, KeyError, TypeError) as exc:
        view.notes.append(f"{TIMELINE_FILE} unreadable ({exc}); per-request latency not shown")


def read_run_view(run_dir: Path, run: Mapping[str, Any]) -> RunView:
    """The run page's data from run_dir's trace.jsonl and timeline.json and its parsed run.json."""
    sim_ms = float(run["stats"]["sim_time_ms"])
    width = bucket_width(sim_ms)
    buckets = max(1, int(sim_ms // width) + 1)
    view = RunView(sim_ms, width, [0] * buckets, [0] * buckets, [0] * buckets)
    matcher = _AnomalyMatcher([a for a in run.get("anomalies", []) if isinstance(a, Mapping)])
    collector = _Collector(view, matcher)
    trace = run_dir / TRACE_FILE
    if trace.is_file():
        view.has_trace = True
        try:
            _read_trace(trace, collector)
        except (OSError, UnicodeDecodeError) as exc:
            view.notes.append(f"{TRACE_FILE} unreadable: {exc}")
    else:
        view.notes.append(f"no {TRACE_FILE} beside run.json: throughput and events not shown")
    collector.finish()
    timeline = run_dir / TIMELINE_FILE
    if timeline.is_file():
        _read_latency(timeline, view)
    else:
        view.notes.append(f"no {TIMELINE_FILE} (written by kafkasim runs since the report's run pages): "
                          "per-request latency not recorded")
    return view
