"""Report plots as PNG bytes (matplotlib, Agg backend, no pyplot global state).

Every function returns a valid PNG even with no data (one run, no failures,
no anomalies, no latency) — it draws a "no data" note instead of raising, so
the page layout never depends on what the runs happened to do.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from kafkasim.report.model import Row

_SIZE = (6.4, 3.2)
_DPI = 80  # small PNGs: the page embeds them inline as base64


def _figure() -> tuple[Figure, Any]:
    fig = Figure(figsize=_SIZE, dpi=_DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _no_data(ax: Any, title: str, note: str) -> None:
    ax.set_title(title)
    ax.text(0.5, 0.5, note, ha="center", va="center", transform=ax.transAxes, color="gray")
    ax.set_xticks([])
    ax.set_yticks([])


def _num(value: Any) -> float:
    return float("nan") if value is None else float(value)


def pass_rate_png(scenarios: Sequence[Row]) -> bytes:
    fig, ax = _figure()
    title = "Pass rate per scenario"
    if not scenarios:
        _no_data(ax, title, "no runs")
        return _png(fig)
    names = [s["scenario"] for s in scenarios]
    rates = [s["pass_rate"] for s in scenarios]
    colors = ["tab:green" if r == 1 else "tab:red" for r in rates]
    ax.bar(names, rates, color=colors)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("pass rate")
    ax.set_title(title)
    ax.tick_params(axis="x", labelrotation=30)
    return _png(fig)


def latency_png(scenarios: Sequence[Row]) -> bytes:
    fig, ax = _figure()
    title = "Produce latency per scenario (median over runs)"
    p50 = [_num(s["latency_p50_ms_median"]) for s in scenarios]
    p99 = [_num(s["latency_p99_ms_median"]) for s in scenarios]
    if all(math.isnan(v) for v in p50 + p99):
        _no_data(ax, title, "no acked records")
        return _png(fig)
    xs = range(len(scenarios))
    width = 0.4
    ax.bar([x - width / 2 for x in xs], p50, width, label="p50")
    ax.bar([x + width / 2 for x in xs], p99, width, label="p99")
    ax.set_xticks(list(xs), [s["scenario"] for s in scenarios], rotation=30)
    ax.set_ylabel("ms")
    ax.set_title(title)
    ax.legend()
    return _png(fig)


def ratio_hist_png(runs: Sequence[Row]) -> bytes:
    fig, ax = _figure()
    title = "Sim-to-wall ratio across runs"
    ratios = [float(r["ratio"]) for r in runs if r["ratio"] is not None]
    if not ratios:
        _no_data(ax, title, "no runs")
        return _png(fig)
    # One run or identical ratios: a zero-width range still gets one bar.
    ax.hist(ratios, bins=min(20, max(1, len(set(ratios)))), color="tab:blue")
    ax.set_xlabel("simulated time / wall time")
    ax.set_ylabel("runs")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # counts: no 0.25 ticks
    ax.set_title(title)
    return _png(fig)


def anomalies_png(anomalies: Sequence[Row]) -> bytes:
    fig, ax = _figure()
    title = "Anomalies by kind"
    if not anomalies:
        _no_data(ax, title, "no anomalies")
        return _png(fig)
    kinds = sorted({a["kind"] for a in anomalies})
    counts = {(a["kind"], a["expected"]): a["count"] for a in anomalies}
    expected = [counts.get((k, True), 0) for k in kinds]
    unexpected = [counts.get((k, False), 0) for k in kinds]
    ax.bar(kinds, expected, label="expected", color="tab:gray")
    ax.bar(kinds, unexpected, bottom=expected, label="unexpected", color="tab:red")
    ax.set_ylabel("count")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(title)
    ax.tick_params(axis="x", labelrotation=30)
    ax.legend()
    return _png(fig)


def all_plots(scenarios: Sequence[Row], runs: Sequence[Row], anomalies: Sequence[Row]) -> list[tuple[str, bytes]]:
    """(alt text, PNG bytes) for every plot on the page, in page order."""
    return [
        ("Pass rate per scenario", pass_rate_png(scenarios)),
        ("Produce latency p50/p99 per scenario", latency_png(scenarios)),
        ("Sim-to-wall ratio distribution", ratio_hist_png(runs)),
        ("Anomalies by kind", anomalies_png(anomalies)),
    ]
