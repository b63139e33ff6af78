"""index.html: one self-contained static page (inline CSS, base64 PNG plots).

Nothing is fetched when the page is opened, so it can be attached to a CI
run or mailed.  Every string from a run.json goes through ``html.escape``:
scenario names, paths and error messages are user-controlled.
"""

from __future__ import annotations

import base64
import html
import shlex
from collections.abc import Sequence
from typing import Any

from kafkasim.report.model import ANOMALY_COLUMNS, CHECK_COLUMNS, FAULT_COLUMNS, SCENARIO_COLUMNS, ReportData, Row

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; }
th { background: #f0f0f0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.headline span { display: inline-block; margin-right: 2em; font-size: 1.1em; }
.bad { color: #b00020; } .ok { color: #0a7d28; }
code { background: #f6f6f6; padding: 0.1em 0.3em; }
img { margin: 0.5em 1em 0.5em 0; border: 1px solid #eee; }
"""


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def fmt(value: Any) -> str:
    """Human cell text: 3 significant digits for floats, ';' for lists."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)


def reproduce_command(run: Row) -> str:
    """The exact shell command that replays a run (quoted for POSIX shells)."""
    return f"kafkasim run {shlex.quote(run['scenario_path'])} --seed {int(run['seed'])}"


def table(rows: Sequence[Row], columns: Sequence[str], css_id: str) -> str:
    if not rows:
        return f'<p id="{esc(css_id)}"><em>none</em></p>'
    head = "".join(f"<th>{esc(c)}</th>" for c in columns)
    body = []
    for row in rows:
        cells = []
        for c in columns:
            klass = ' class="num"' if isinstance(row[c], (int, float)) and not isinstance(row[c], bool) else ""
            cells.append(f"<td{klass}>{esc(fmt(row[c]))}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    return f'<table id="{esc(css_id)}"><tr>{head}</tr>{"".join(body)}</table>'


def headline(data: ReportData) -> str:
    runs = len(data.runs)
    fails = len(data.failing_runs)
    rate = f"{(runs - fails) / runs:.1%}" if runs else "–"
    unexpected = sum(a["count"] for a in data.anomalies if not a["expected"])
    items = [
        ("runs", runs, ""),
        ("scenarios", len(data.scenarios), ""),
        ("pass rate", rate, "ok" if fails == 0 else "bad"),
        ("failures", fails, "bad" if fails else "ok"),
        ("flaky seeds", len(data.flaky_seeds), "bad" if data.flaky_seeds else "ok"),
        ("unexpected anomalies", unexpected, "bad" if unexpected else "ok"),
        ("invalid run.json", len(data.invalid), "bad" if data.invalid else "ok"),
    ]
    spans = "".join(f'<span class="{k}">{esc(label)}: <b>{esc(v)}</b></span>' for label, v, k in items)
    return f'<p class="headline">{spans}</p>'


def failing_section(data: ReportData) -> str:
    rows = data.failing_runs
    if not rows:
        return '<p id="failing"><em>no failing runs</em></p>'
    head = "<tr><th>scenario</th><th>seed</th><th>code</th><th>failed checks</th><th>reproduce</th></tr>"
    body = "".join(
        f"<tr><td>{esc(r['scenario'])}</td><td class='num'>{esc(r['seed'])}</td>"
        f"<td>{esc(r['code_version'])}</td><td>{esc(r['failed_checks'])}</td>"
        f"<td><code>{esc(reproduce_command(r))}</code></td></tr>"
        for r in rows
    )
    return f'<table id="failing">{head}{body}</table>'


def invalid_section(data: ReportData) -> str:
    if not data.invalid:
        return ""
    items = "".join(f"<li><code>{esc(i.path)}</code>: {esc(i.error)}</li>" for i in data.invalid)
    return f'<h2 class="bad">Invalid run.json (left out of every table)</h2><ul id="invalid" class="bad">{items}</ul>'


def flaky_section(data: ReportData) -> str:
    rows = [r for r in data.runs if r["flaky"]]
    cols = ["scenario", "seed", "code_version", "verdict", "trace_hash", "run_path"]
    return table(rows, cols, "flaky")


def plots_section(data: ReportData) -> str:
    # Lazy: console.py imports this module and must not need matplotlib.
    from kafkasim.report import plots

    imgs = []
    for alt, png in plots.all_plots(data.scenarios, data.runs, data.anomalies):
        b64 = base64.b64encode(png).decode("ascii")
        imgs.append(f'<img alt="{esc(alt)}" src="data:image/png;base64,{b64}">')
    return f'<div id="plots">{"".join(imgs)}</div>'


def render_html(data: ReportData) -> str:
    scenario_cols = [c for c in SCENARIO_COLUMNS if c != "flaky_seed_list"] + ["flaky_seed_list"]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>kafkasim report</title>',
        f"<style>{_CSS}</style></head><body>",
        "<h1>kafkasim report</h1>",
        headline(data),
        invalid_section(data),
        "<h2>Failing runs</h2>",
        failing_section(data),
        "<h2>Scenarios</h2>",
        table(data.scenarios, scenario_cols, "scenarios"),
        "<h2>Plots</h2>",
        plots_section(data),
        "<h2>Flaky seeds</h2>",
        "<p>Same scenario and seed seen with different verdicts or trace hashes.</p>",
        flaky_section(data),
        "<h2>Anomalies (kind × expected)</h2>",
        table(data.anomalies, ANOMALY_COLUMNS, "anomalies"),
        "<h2>Checks</h2>",
        table(data.checks, CHECK_COLUMNS, "checks"),
        "<h2>Fault kinds</h2>",
        table(data.faults, FAULT_COLUMNS, "faults"),
        "</body></html>",
    ]
    return "\n".join(p for p in parts if p)
