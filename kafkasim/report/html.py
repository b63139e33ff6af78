"""index.html: the overview page (inline CSS, base64 PNG plots, links to each run's page).

Nothing is fetched when the page is opened, so it can be attached to a CI run or mailed with
its folder. Every string from a run.json goes through ``html.escape``: scenario names, paths and
error messages are user-controlled. A check whose anomaly the scenario expects (e.g. acknowledged
loss under the default flush policy) is shown as *expected*, never as a failure.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from typing import Any

from kafkasim.harness.repro import repro_command
from kafkasim.report.labels import label
from kafkasim.report.model import ANOMALY_COLUMNS, FAULT_COLUMNS, ReportData, Row, RunLinks

CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; max-width: 1400px; }
h2 { margin-top: 1.6em; border-bottom: 1px solid #ddd; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: left; vertical-align: top; }
th { background: #f0f0f0; position: sticky; top: 0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.wrap, td code { word-break: break-all; }
.headline span { display: inline-block; margin: 0 1.5em 0.3em 0; font-size: 1.05em; }
.bad { color: #b00020; } .ok { color: #0a7d28; } .exp { color: #8a5a00; }
td.bad { background: #fde2e4; } td.ok { background: #e3f4e6; } td.exp { background: #fff1d6; }
td.finding, .legend .finding { background: #fff6bf; color: #6b5500; }
code { background: #f6f6f6; padding: 0.1em 0.3em; }
img { margin: 0.5em 1em 0.5em 0; border: 1px solid #eee; max-width: 100%; }
table.matrix td { padding: 0; text-align: center; min-width: 1.9em; }
table.matrix td a { display: block; padding: 0.2em 0.3em; color: inherit; text-decoration: none; }
table.matrix td.none { background: #fafafa; }
table.matrix td.flaky { outline: 2px dashed #7b3fa0; outline-offset: -3px; }
.legend span { margin-right: 1.2em; padding: 0.1em 0.5em; }
nav a { margin-right: 1em; }
"""

CELL_TEXT = {"ok": "✓", "exp": "E", "bad": "✗"}


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def fmt(value: Any) -> str:
    """Human cell text: 3 significant digits for floats, ', ' for lists."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)


def reproduce_command(run: Row) -> str:
    """The exact shell command that replays a run (quoted for POSIX shells, seeded bugs included)."""
    bugs = run.get("seeded_bugs") or []
    if isinstance(bugs, str):  # summary rows hold them comma-joined
        bugs = [b for b in bugs.split(",") if b]
    return repro_command(dict(run, seeded_bugs=bugs))


def outcome(run: Row) -> str:
    """ok (pass, nothing seen), exp (pass, but an anomaly the scenario expects was seen), bad (fail)."""
    if run["verdict"] != "pass":
        return "bad"
    return "exp" if (run.get("anomalies") or 0) > (run.get("unexpected_anomalies") or 0) else "ok"


def _td(value: Any, klass: str = "") -> str:
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    classes = " ".join(c for c in (klass, "num" if numeric else "") if c)
    return f'<td class="{classes}">{esc(fmt(value))}</td>' if classes else f"<td>{esc(fmt(value))}</td>"


def table(rows: Sequence[Row], columns: Sequence[str], css_id: str, cell_class: Any = None) -> str:
    """A table with readable headers inside a horizontally scrolling container."""
    if not rows:
        return f'<p id="{esc(css_id)}"><em>none</em></p>'
    head = "".join(f"<th>{esc(label(c))}</th>" for c in columns)
    body = []
    for row in rows:
        cells = "".join(_td(row[c], cell_class(row, c) if cell_class else "") for c in columns)
        body.append(f"<tr>{cells}</tr>")
    return f'<div class="scroll"><table id="{esc(css_id)}"><tr>{head}</tr>{"".join(body)}</table></div>'


def headline(data: ReportData) -> str:
    runs = len(data.runs)
    fails = len(data.failing_runs)
    rate = f"{(runs - fails) / runs:.1%}" if runs else "–"
    expected_runs = sum(1 for r in data.runs if outcome(r) == "exp")
    unexpected = sum(a["count"] for a in data.anomalies if not a["expected"])
    items = [
        ("runs", runs, ""),
        ("scenarios", len(data.scenarios), ""),
        ("pass rate", rate, "ok" if fails == 0 else "bad"),
        ("failures", fails, "bad" if fails else "ok"),
        ("passed with expected anomalies", expected_runs, "exp" if expected_runs else ""),
        ("flaky seeds", len(data.flaky_seeds), "bad" if data.flaky_seeds else "ok"),
        ("unexpected anomalies", unexpected, "bad" if unexpected else "ok"),
        ("invalid run.json", len(data.invalid), "bad" if data.invalid else "ok"),
    ]
    spans = "".join(f'<span class="{k}">{esc(lbl)}: <b>{esc(v)}</b></span>' for lbl, v, k in items)
    return f'<p class="headline">{spans}</p>'


def _links(links: RunLinks | None) -> str:
    if links is None:
        return ""
    parts = [(links.page, "page"), (links.run_json, "run.json"), (links.trace, "trace"), (links.timeline, "timeline")]
    return " ".join(f'<a href="{esc(href)}">{esc(text)}</a>' for href, text in parts if href)


def _cell_title(runs: Sequence[Row]) -> str:
    lines = []
    for r in runs:
        what = r["failed_checks"] or ("expected anomalies" if outcome(r) == "exp" else "all checks held")
        lines.append(f"{r['verdict']} ({r['code_version']}): {what}")
    return "\n".join(lines)


def matrix_section(data: ReportData) -> str:
    """Scenario × seed: one cell per (scenario, seed), linking to the run page; the worst outcome
    wins when a seed ran more than once (several code versions), and a flaky seed is outlined."""
    if not data.runs:
        return '<p id="matrix"><em>no runs</em></p>'
    seeds = sorted({r["seed"] for r in data.runs})
    cells: dict[tuple[str, int], list[Row]] = {}
    for r in data.runs:
        cells.setdefault((r["scenario"], r["seed"]), []).append(r)
    rank = {"bad": 2, "exp": 1, "ok": 0}
    head = "<tr><th>Scenario \\ seed</th>" + "".join(f"<th>{esc(s)}</th>" for s in seeds) + "</tr>"
    rows = []
    for scenario in sorted({r["scenario"] for r in data.runs}):
        tds = [f"<th>{esc(scenario)}</th>"]
        for seed in seeds:
            runs = cells.get((scenario, seed), [])
            if not runs:
                tds.append('<td class="none"></td>')
                continue
            worst = max((outcome(r) for r in runs), key=rank.__getitem__)
            flaky = " flaky" if any(r["flaky"] for r in runs) else ""
            text = CELL_TEXT[worst] + (f"×{len(runs)}" if len(runs) > 1 else "")
            links = data.links.get(runs[0]["run_path"])
            inner = f'<a href="{esc(links.page)}">{esc(text)}</a>' if links and links.page else esc(text)
            tds.append(f'<td class="{worst}{flaky}" title="{esc(_cell_title(runs))}">{inner}</td>')
        rows.append(f"<tr>{''.join(tds)}</tr>")
    legend = ('<p class="legend"><span class="ok">✓ pass</span><span class="exp">E pass, expected anomaly seen '
              '(declared in the scenario)</span><span class="bad">✗ fail</span><span>dashed outline: flaky</span>'
              "<span>click a cell for the run's timeline</span></p>")
    return f'{legend}<div class="scroll"><table id="matrix" class="matrix">{head}{"".join(rows)}</table></div>'


def failing_section(data: ReportData) -> str:
    rows = data.failing_runs
    if not rows:
        return '<p id="failing"><em>no failing runs</em></p>'
    head = ("<tr><th>Scenario</th><th>Seed</th><th>Code version</th><th>Failed checks</th>"
            "<th>Reproduce</th><th>Files</th></tr>")
    body = "".join(
        f"<tr><td>{esc(r['scenario'])}</td><td class='num'>{esc(r['seed'])}</td>"
        f"<td>{esc(r['code_version'])}</td><td class='wrap'>{esc((r['failed_checks'] or '').replace(';', '; '))}</td>"
        f"<td><code>{esc(reproduce_command(r))}</code></td><td>{_links(data.links.get(r['run_path']))}</td></tr>"
        for r in rows
    )
    return f'<div class="scroll"><table id="failing">{head}{body}</table></div>'


def invalid_section(data: ReportData) -> str:
    if not data.invalid:
        return ""
    items = "".join(f"<li><code>{esc(i.path)}</code>: {esc(i.error)}</li>" for i in data.invalid)
    return f'<h2 class="bad">Invalid run.json (left out of every table)</h2><ul id="invalid" class="bad">{items}</ul>'


def _rate_class(row: Row, column: str) -> str:
    if column in ("pass_rate", "failures"):
        return "ok" if row["failures"] == 0 else "bad"
    return ""


def scenario_section(data: ReportData) -> str:
    cols = ["scenario", "runs", "passes", "failures", "pass_rate", "anomalies", "unexpected_anomalies",
            "flaky_seeds", "flaky_seed_list", "latency_p50_ms_median", "latency_p99_ms_median", "latency_p99_ms_p99",
            "ratio_p50"]
    rows = [dict(s, pass_rate=_percent(s["pass_rate"])) for s in data.scenarios]
    return table(rows, cols, "scenarios", _rate_class)


def _percent(value: Any) -> str:
    return "–" if value is None else f"{100 * float(value):.0f} %"


def check_section(data: ReportData) -> str:
    """A check the scenario expects to fail is an *expected anomaly*, not a 0 % pass rate."""
    head = ("<tr><th>Check</th><th>Status</th><th>Runs</th><th>Held (runs)</th><th>Held (%)</th>"
            "<th>Violations</th></tr>")
    body = []
    for c in data.checks:
        broke = c["runs"] - c["ok"]
        if c["expected"]:
            status, klass = (f"expected anomaly, seen in {broke} of {c['runs']} runs" if broke
                             else "expected anomaly, not seen"), "exp"
        else:
            status, klass = ("held in every run", "ok") if not broke else (f"violated in {broke} runs", "bad")
        body.append(f"<tr><td>{esc(c['name'])}</td><td class='{klass}'>{esc(status)}</td>{_td(c['runs'])}"
                    f"{_td(c['ok'])}<td class='num'>{esc(_percent(c['pass_rate']))}</td>{_td(c['violations'])}</tr>")
    if not body:
        return '<p id="checks"><em>none</em></p>'
    return f'<div class="scroll"><table id="checks">{head}{"".join(body)}</table></div>'


def _expected_class(row: Row, column: str) -> str:
    return ("exp" if row["expected"] else "bad") if column in ("kind", "expected") else ""


def runs_section(data: ReportData) -> str:
    cols = ["scenario", "seed", "verdict", "code_version", "sim_time_ms", "ratio", "acked", "consumed",
            "latency_p50_ms", "latency_p99_ms", "anomalies", "unexpected_anomalies", "failed_checks", "seeded_bugs"]
    head = "".join(f"<th>{esc(label(c))}</th>" for c in cols) + "<th>Files</th>"
    body = []
    for r in data.runs:
        verdict_class = {"ok": "ok", "exp": "exp", "bad": "bad"}[outcome(r)]
        cells = "".join(_td(r[c] if r[c] != "" else None, verdict_class if c == "verdict" else "") for c in cols)
        body.append(f"<tr>{cells}<td>{_links(data.links.get(r['run_path']))}</td></tr>")
    if not body:
        return '<p id="runs"><em>none</em></p>'
    return f'<div class="scroll"><table id="runs"><tr>{head}</tr>{"".join(body)}</table></div>'


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


def files_section(files: Mapping[str, str]) -> str:
    if not files:
        return ""
    links = "".join(f'<a href="{esc(href)}">{esc(name)}</a>' for name, href in files.items())
    return f"<nav id=\"files\">Files: {links}</nav>"


def render_html(data: ReportData) -> str:
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>kafkasim report</title>',
        f"<style>{CSS}</style></head><body>",
        "<h1>kafkasim report</h1>",
        headline(data),
        files_section(data.files),
        invalid_section(data),
        "<h2>Scenario × seed</h2>",
        matrix_section(data),
        data.client_matrix_html,
        "<h2>Failing runs</h2>",
        failing_section(data),
        "<h2>Scenarios</h2>",
        scenario_section(data),
        "<h2>Plots</h2>",
        plots_section(data),
        "<h2>Checks</h2>",
        check_section(data),
        "<h2>Anomalies (kind × expected)</h2>",
        table(data.anomalies, ANOMALY_COLUMNS, "anomalies", _expected_class),
        "<h2>Fault kinds</h2>",
        table([dict(f, pass_rate=_percent(f["pass_rate"])) for f in data.faults], FAULT_COLUMNS, "faults"),
        "<h2>Flaky seeds</h2>",
        "<p>Same scenario and seed seen with different verdicts or trace hashes.</p>",
        flaky_section(data),
        "<h2>All runs</h2>",
        runs_section(data),
        "</body></html>",
    ]
    return "\n".join(p for p in parts if p)
