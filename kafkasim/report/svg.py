"""The run page's timeline as one inline SVG (no matplotlib: a run page costs milliseconds, so a
report over many runs is not dominated by plotting).

Three panels share the x axis (simulated seconds): throughput (ops/s, linear), produce latency
(ms, log scale: a 5 ms steady state and a 6 s failover stall are both readable), and a lane per
event category. Fault periods and node down periods are shaded across all panels and labelled.
Every marker has a <title> tooltip and links to its line on the trace excerpt page.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

from kafkasim.report.runtrace import Marker, RunView, Span

WIDTH = 1040
LEFT, RIGHT = 112, 24
PLOT_W = WIDTH - LEFT - RIGHT
THROUGHPUT_H, LATENCY_H, LANE_H, GAP = 170, 190, 18, 34
MAX_POINTS = 6000  # latency dots drawn; a stride keeps the shape of bigger runs
# Lanes of the event panel, top to bottom: (category, label, colour, symbol).
LANES = (
    ("controller", "controller", "#7b3fa0", "diamond"),
    ("leader", "partition leader", "#1f6fb4", "tick"),
    ("unclean", "unclean election", "#b00020", "diamond"),
    ("coordinator", "group coordinator", "#0b8a8a", "diamond"),
    ("crash", "crash / restart", "#b00020", "cross"),
    ("zk", "ZooKeeper / fault", "#a05a00", "tick"),
    ("anomaly", "anomaly", "#b00020", "dot"),
)
LANE_OF = {"restart": "crash", "fault": "zk"}
SERIES = (("produced_ok", "produce acked", "#1f6fb4"), ("produced_err", "produce error", "#b00020"),
          ("consumed", "consumed", "#2a8a2a"))


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def nice_step(span: float, target: int) -> float:
    raw = span / max(target, 1)
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    return next((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), 10 * mag)


def linear_ticks(hi: float, target: int = 5) -> list[float]:
    if hi <= 0:
        return [0.0]
    step = nice_step(hi, target)
    return [i * step for i in range(int(hi / step + 1e-9) + 1)]


def fmt_tick(v: float) -> str:
    if v >= 1000 and v % 1000 == 0:
        return f"{v / 1000:g}k"
    return f"{v:g}"


class Axis:
    """Maps data x (simulated ms) to pixels; shared by every panel."""

    def __init__(self, end_ms: float) -> None:
        self.end_ms = max(end_ms, 1.0)

    def x(self, t_ms: float) -> float:
        return LEFT + PLOT_W * min(max(t_ms, 0.0), self.end_ms) / self.end_ms


def _frame(top: float, height: float, title: str) -> list[str]:
    return [f'<rect x="{LEFT}" y="{top}" width="{PLOT_W}" height="{height}" fill="none" stroke="#999"/>',
            f'<text x="{LEFT}" y="{top - 6}" class="ptitle">{esc(title)}</text>']


def _x_grid(axis: Axis, top: float, bottom: float, labels: bool) -> list[str]:
    out = []
    for s in linear_ticks(axis.end_ms / 1000.0, 10):
        x = axis.x(s * 1000.0)
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" class="grid"/>')
        if labels:
            out.append(f'<text x="{x:.1f}" y="{bottom + 14}" text-anchor="middle">{fmt_tick(s)}</text>')
    return out


def _throughput(view: RunView, axis: Axis, top: float) -> list[str]:
    per_s = 1000.0 / view.bucket_ms
    series = {name: [c * per_s for c in getattr(view, name)] for name, _, _ in SERIES}
    hi = max((max(v, default=0.0) for v in series.values()), default=0.0) or 1.0
    ticks = linear_ticks(hi * 1.05)
    top_val = ticks[-1] if ticks[-1] >= hi else hi

    def y(v: float) -> float:
        return top + THROUGHPUT_H * (1 - v / top_val)

    out = _frame(top, THROUGHPUT_H, f"Throughput (operations/s, {view.bucket_ms} ms buckets)")
    for v in ticks:
        out.append(f'<line x1="{LEFT}" y1="{y(v):.1f}" x2="{LEFT + PLOT_W}" y2="{y(v):.1f}" class="grid"/>'
                   f'<text x="{LEFT - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{fmt_tick(v)}</text>')
    for name, label, colour in SERIES:
        values = series[name]
        if not any(values):
            continue
        pts = []
        for i, v in enumerate(values):
            x0, x1 = axis.x(i * view.bucket_ms), axis.x((i + 1) * view.bucket_ms)
            pts.append(f"{x0:.1f},{y(v):.1f} {x1:.1f},{y(v):.1f}")
        out.append(f'<polyline points="{" ".join(pts)}" fill="none" stroke="{colour}" stroke-width="1.5">'
                   f"<title>{esc(label)}</title></polyline>")
    return out


def _log_bounds(values: Sequence[float]) -> tuple[float, float]:
    positive = [v for v in values if v > 0]
    if not positive:
        return 0.1, 10.0
    lo = 10 ** math.floor(math.log10(min(positive)))
    hi = 10 ** math.ceil(math.log10(max(positive)))
    return lo, hi if hi > lo else lo * 10


def _p99_per_bucket(view: RunView, points: Sequence[tuple[float, float, bool]]) -> list[tuple[int, float]]:
    by_bucket: dict[int, list[float]] = {}
    for t, lat, _ in points:
        by_bucket.setdefault(int(t // view.bucket_ms), []).append(lat)
    out = []
    for i in sorted(by_bucket):
        values = sorted(by_bucket[i])
        out.append((i, values[min(len(values) - 1, int(0.99 * len(values)))]))
    return out


def _latency(view: RunView, axis: Axis, top: float) -> list[str]:
    title = "Produce latency (ms, log scale): one dot per request at its send time; line: p99 per bucket"
    out = _frame(top, LATENCY_H, title)
    points = view.latency or []
    if not points:
        why = "no per-request latency recorded (no timeline.json)" if view.latency is None else "no answered sends"
        out.append(f'<text x="{LEFT + PLOT_W / 2}" y="{top + LATENCY_H / 2}" text-anchor="middle" '
                   f'class="nodata">{esc(why)}</text>')
        return out
    lo, hi = _log_bounds([p[1] for p in points])
    span = math.log10(hi) - math.log10(lo)

    def y(v: float) -> float:
        return top + LATENCY_H * (1 - (math.log10(max(v, lo)) - math.log10(lo)) / span)

    for e in range(round(math.log10(lo)), round(math.log10(hi)) + 1):
        v = 10.0**e
        out.append(f'<line x1="{LEFT}" y1="{y(v):.1f}" x2="{LEFT + PLOT_W}" y2="{y(v):.1f}" class="grid"/>'
                   f'<text x="{LEFT - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{fmt_tick(v)}</text>')
    stride = max(1, math.ceil(len(points) / MAX_POINTS))
    dots = [f'<circle cx="{axis.x(t):.1f}" cy="{y(lat):.1f}" r="1.6" class="{"ok" if ok else "err"}"/>'
            for t, lat, ok in points[::stride]]
    out.append(f'<g class="dots">{"".join(dots)}</g>')
    p99 = [f"{axis.x((i + 0.5) * view.bucket_ms):.1f},{y(v):.1f}" for i, v in _p99_per_bucket(view, points)]
    out.append(f'<polyline points="{" ".join(p99)}" fill="none" stroke="#e07000" stroke-width="1.5">'
               "<title>p99 latency per bucket</title></polyline>")
    return out


def _symbol(kind: str, x: float, y: float, colour: str) -> str:
    if kind == "diamond":
        return f'<path d="M{x:.1f},{y - 5} l5,5 l-5,5 l-5,-5 z" fill="{colour}"/>'
    if kind == "cross":
        return f'<path d="M{x - 4:.1f},{y - 4} l8,8 M{x + 4:.1f},{y - 4} l-8,8" stroke="{colour}" stroke-width="2"/>'
    if kind == "dot":
        return f'<circle cx="{x:.1f}" cy="{y}" r="3.5" fill="{colour}"/>'
    return f'<line x1="{x:.1f}" y1="{y - 6}" x2="{x:.1f}" y2="{y + 6}" stroke="{colour}" stroke-width="2"/>'


def _linked(inner: str, title: str, line: int | None) -> str:
    body = f"<g>{inner}<title>{esc(title)}</title></g>"
    return f'<a href="trace.html#L{line}">{body}</a>' if line is not None else body


def _lanes(markers: Sequence[Marker], axis: Axis, top: float) -> list[str]:
    out = _frame(top, LANE_H * len(LANES), "Events (hover for details, click for the trace line)")
    row = {cat: i for i, (cat, _, _, _) in enumerate(LANES)}
    for i, (_, label, _, _) in enumerate(LANES):
        y = top + LANE_H * (i + 0.5)
        out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" class="lane">{esc(label)}</text>')
    for m in markers:
        cat = LANE_OF.get(m.category, m.category)
        _, _, colour, shape = LANES[row.get(cat, row["zk"])]
        if m.category == "restart":
            colour, shape = "#2a8a2a", "tick"
        y = top + LANE_H * (row.get(cat, row["zk"]) + 0.5)
        when = f"t={m.t_ms / 1000:.3f} s: {m.label}"
        out.append(_linked(_symbol(shape, axis.x(m.t_ms), y, colour), when, m.line))
    return out


def _spans(spans: Sequence[Span], axis: Axis, top: float, bottom: float) -> list[str]:
    out: list[str] = []
    label_rows: list[float] = []  # greedy rows so labels of overlapping spans do not overprint
    for s in spans:
        x0, x1 = axis.x(s.start_ms), axis.x(s.end_ms)
        klass = "down" if s.label.endswith("down") or "down (" in s.label else "fault"
        width = 6.2 * len(s.label)  # about 6 px per character at 11 px
        # A label that would run past the plot's right edge ends at the edge instead.
        if x0 + 3 + width < LEFT + PLOT_W:
            tx, anchor, lx0 = x0 + 3, "start", x0 + 3
        else:
            tx, anchor, lx0 = LEFT + PLOT_W - 3, "end", LEFT + PLOT_W - 3 - width
        row = next((i for i, end in enumerate(label_rows) if end < lx0), len(label_rows))
        if row == len(label_rows):
            label_rows.append(0.0)
        label_rows[row] = lx0 + width + 4
        title = f"{s.label}: {s.start_ms / 1000:.3f}–{s.end_ms / 1000:.3f} s"
        rect = (f'<rect x="{x0:.1f}" y="{top}" width="{max(x1 - x0, 1.5):.1f}" height="{bottom - top}" '
                f'class="{klass}"/><text x="{tx:.1f}" y="{top + 12 + 12 * row}" text-anchor="{anchor}" '
                f'class="spanlabel">{esc(s.label)}</text>')
        out.append(_linked(rect, title, s.line))
    return out


def timeline_svg(view: RunView) -> str:
    axis = Axis(view.sim_time_ms)
    t_top = 30.0
    l_top = t_top + THROUGHPUT_H + GAP
    e_top = l_top + LATENCY_H + GAP
    bottom = e_top + LANE_H * len(LANES)
    height = bottom + 40
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" id="timeline" viewBox="0 0 {WIDTH} {height:.0f}" '
             f'width="{WIDTH}" height="{height:.0f}" role="img" aria-label="run timeline">',
             "<style>text{font:11px system-ui,sans-serif;fill:#333}.ptitle{font-weight:600}.grid{stroke:#eee}"
             ".fault{fill:#f5a623;fill-opacity:.22}.down{fill:#888;fill-opacity:.18}.spanlabel{fill:#8a4b00}"
             ".ok{fill:#1f6fb4;fill-opacity:.45}.err{fill:#b00020}.nodata{fill:#888}.lane{font-size:10px}</style>"]
    parts += _spans(view.spans, axis, t_top, bottom)
    parts += _x_grid(axis, t_top, bottom, labels=True)
    parts += _throughput(view, axis, t_top)
    parts += _latency(view, axis, l_top)
    parts += _lanes(view.markers + _anomaly_markers(view), axis, e_top)
    parts.append(f'<text x="{LEFT + PLOT_W / 2}" y="{bottom + 32}" text-anchor="middle">simulated time (s)</text>')
    parts.append(_legend(t_top))
    parts.append("</svg>")
    return "".join(parts)


def _anomaly_markers(view: RunView) -> list[Marker]:
    return [Marker(a.t_ms, "anomaly", f"{a.kind}{' (expected)' if a.expected else ''}", a.line)
            for a in view.anomalies if a.t_ms is not None]


def _legend(top: float) -> str:
    x = LEFT + PLOT_W - 320
    items = []
    for i, (_, label, colour) in enumerate(SERIES):
        xi, yi = x + 110 * i, top - 10  # beside the panel's title, above the shaded periods' labels
        items.append(f'<line x1="{xi}" y1="{yi}" x2="{xi + 16}" y2="{yi}" stroke="{colour}" '
                     f'stroke-width="2"/><text x="{xi + 20}" y="{yi + 4}">{esc(label)}</text>')
    return "".join(items)
