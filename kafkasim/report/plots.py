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

_SIZE = (6.4, 3.6)
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


def _names_axis(ax: Any, names: Sequence[str]) -> None:
    ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)


def pass_rate_png(scenarios: Sequence[Row]) -> bytes:
    fig, ax = _figure()
    title = "Pass rate per scenario"
    if not scenarios:
        _no_data(ax, title, "no runs")
        return _png(fig)
    names = [s["scenario"] for s in scenarios]
    rates = [float(s["pass_rate"]) for s in scenarios]
    colors = ["tab:green" if r == 1 else "tab:red" for r in rates]
    # A 0 % scenario must not read as a gap: give it a visible stub and every bar its number.
    ax.bar(range(len(names)), [max(r, 0.02) for r in rates], color=colors)
    for x, r in enumerate(rates):
        ax.text(x, max(r, 0.02) + 0.02, f"{r:.0%}", ha="center", va="bottom", fontsize=7)
    ax.set_ylim(0, 1.15)
    ax.set_ylabel("pass rate")
    ax.set_title(title)
    _names_axis(ax, names)
    return _png(fig)


def latency_png(scenarios: Sequence[Row]) -> bytes:
    fig, ax = _figure()
    title = "Produce latency per scenario (median run; log scale)"
    p50 = [_num(s["latency_p50_ms_median"]) for s in scenarios]
    p99 = [_num(s["latency_p99_ms_median"]) for s in scenarios]
    if all(math.isnan(v) or v <= 0 for v in p50 + p99):
        _no_data(ax, title, "no acked records")
        return _png(fig)
    xs = range(len(scenarios))
    # Log scale: a 5 ms steady state and a 30 s failover stall on one axis, both readable.
    ax.set_yscale("log")
    ax.scatter(xs, p50, marker="o", label="p50", color="tab:blue", zorder=3)
    ax.scatter(xs, p99, marker="^", label="p99", color="tab:orange", zorder=3)
    ax.vlines(xs, p50, p99, color="#bbb", zorder=2)
    finite = [v for v in p50 + p99 if not math.isnan(v) and v > 0]
    # Whole decades: one scenario's 5-7 ms must not fill the axis as if it were a wide spread.
    ax.set_ylim(10 ** math.floor(math.log10(min(finite))), 10 ** math.ceil(math.log10(max(finite)) + 1e-9))
    ax.grid(axis="y", which="major", color="#eee")
    _names_axis(ax, [s["scenario"] for s in scenarios])
    ax.set_xlim(-0.5, len(scenarios) - 0.5)
    ax.set_ylabel("ms (log)")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper left")
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
    xs = range(len(kinds))
    ax.bar(xs, expected, label="expected (declared by the scenario)", color="#e0a030")
    ax.bar(xs, unexpected, bottom=expected, label="unexpected (violations)", color="tab:red")
    ax.set_ylabel("count")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(title)
    _names_axis(ax, kinds)
    ax.legend(fontsize=8)
    return _png(fig)


def all_plots(scenarios: Sequence[Row], runs: Sequence[Row], anomalies: Sequence[Row]) -> list[tuple[str, bytes]]:
    """(alt text, PNG bytes) for every plot on the page, in page order."""
    return [
        ("Pass rate per scenario", pass_rate_png(scenarios)),
        ("Produce latency p50/p99 per scenario", latency_png(scenarios)),
        ("Sim-to-wall ratio distribution", ratio_hist_png(runs)),
        ("Anomalies by kind", anomalies_png(anomalies)),
    ]
