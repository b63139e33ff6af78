"""A page per run: its timeline (runtrace + svg), faults, events and anomalies linked to their
trace lines, the checks, and the command that reproduces it; plus trace.html, the excerpt of
trace.jsonl around every linked line (anchors #L<line>).

  <out>/runs/<run dir relative to the reports tree>/index.html
  <out>/runs/<...>/trace.html

Pages link to the run's own files (run.json, trace.jsonl, timeline.json) by relative path, so
the report tree and the runs can be opened from disk or served together.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kafkasim.report.html import CSS, esc, fmt, outcome, reproduce_command
from kafkasim.report.model import Row, RunLinks
from kafkasim.report.runtrace import TIMELINE_FILE, TRACE_FILE, AnomalyRef, RunView, read_run_view
from kafkasim.report.svg import timeline_svg

PAGES_DIR = "runs"
RUN_CSS = """
.badge { padding: 0.15em 0.6em; border-radius: 0.3em; font-weight: 600; }
.badge.ok { background: #e3f4e6; } .badge.exp { background: #fff1d6; } .badge.bad { background: #fde2e4; }
.stats span { display: inline-block; margin: 0 1.5em 0.3em 0; }
.warn { background: #fde2e4; padding: 0.4em 0.8em; border-left: 4px solid #b00020; }
svg { max-width: 100%; height: auto; border: 1px solid #eee; }
pre.trace { font-size: 0.8em; line-height: 1.35; }
pre.trace span { display: block; white-space: pre-wrap; word-break: break-all; }
pre.trace span:target { background: #fff1a8; }
pre.trace a.n { color: #888; display: inline-block; min-width: 5.5em; text-decoration: none; }
pre.trace .gap { color: #aaa; }
"""
VERDICT_TEXT = {"ok": "PASS", "exp": "PASS (expected anomalies)", "bad": "FAIL"}


def page_dir(out_dir: Path, root: Path, run_json: Path) -> Path:
    """Where a run's pages go: its run directory's path under the reports tree, below out/runs/."""
    rel = run_json.parent.resolve().relative_to(root.resolve())
    return out_dir / PAGES_DIR / rel


def _rel(target: Path, start: Path) -> str:
    return Path(os.path.relpath(target, start)).as_posix()


def _line_link(line: int | None) -> str:
    return f'<a href="trace.html#L{line}">line {line}</a>' if line is not None else "–"


def _time(t_ms: float | None) -> str:
    return "–" if t_ms is None else f"{t_ms / 1000:.3f} s"


def _stats(run: Mapping[str, Any]) -> str:
    st = run["stats"]
    lat = st.get("produce_latency_ms") or {}
    items = [
        ("simulated", f"{st['sim_time_ms'] / 1000:.1f} s"), ("wall", f"{st['wall_time_s']:.2f} s"),
        ("sim / wall", f"{st['sim_to_wall_ratio']:.1f}×"), ("acked / produced", f"{st['acked']} / {st['produced']}"),
        ("consumed", st["consumed"]), ("produce latency p50 / p99 / max",
                                       " / ".join(fmt(lat.get(k)) for k in ("p50", "p99", "max")) + " ms"),
        ("events", st["events"]), ("trace hash", run["trace_hash"][:16] + "…"),
    ]
    return '<p class="stats">' + "".join(f"<span>{esc(k)}: <b>{esc(v)}</b></span>" for k, v in items) + "</p>"


def _events_table(view: RunView) -> str:
    rows = [(m.t_ms, m.category, m.label, m.line) for m in view.markers]
    rows += [(s.start_ms, "period", f"{s.label} until {_time(s.end_ms)}", s.line) for s in view.spans]
    if not rows:
        return "<p><em>no faults or leadership changes traced</em></p>"
    body = "".join(f"<tr><td class='num'>{esc(_time(t))}</td><td>{esc(c)}</td><td>{esc(text)}</td>"
                   f"<td>{_line_link(line)}</td></tr>" for t, c, text, line in sorted(rows, key=lambda r: r[0]))
    head = "<tr><th>Time (simulated)</th><th>Kind</th><th>What</th><th>Trace</th></tr>"
    return f'<div class="scroll"><table id="events">{head}{body}</table></div>'


def _anomaly_table(refs: Sequence[AnomalyRef]) -> str:
    if not refs:
        return '<p id="anomalies"><em>no anomalies</em></p>'
    head = "<tr><th>Kind</th><th>Status</th><th>Time (simulated)</th><th>Detail</th><th>Trace</th></tr>"
    body = []
    for a in refs:
        klass, status = ("exp", "expected here") if a.expected else ("bad", "unexpected: a violation")
        detail = json.dumps(a.detail, sort_keys=True)
        body.append(f"<tr><td class='{klass}'>{esc(a.kind)}</td><td class='{klass}'>{esc(status)}</td>"
                    f"<td class='num'>{esc(_time(a.t_ms))}</td><td class='wrap'><code>{esc(detail)}</code></td>"
                    f"<td>{_line_link(a.line)}</td></tr>")
    return f'<div class="scroll"><table id="anomalies">{head}{"".join(body)}</table></div>'


def _checks_table(run: Mapping[str, Any]) -> str:
    body = []
    for c in run["checks"]:
        if c["ok"]:
            klass, status = "ok", "held"
        else:
            klass, status = ("exp", "expected anomaly seen") if c["expected"] else ("bad", "VIOLATED")
        body.append(f"<tr><td>{esc(c['name'])}</td><td class='{klass}'>{esc(status)}</td>"
                    f"<td class='num'>{esc(c['violations'])}</td></tr>")
    head = "<tr><th>Check</th><th>Status</th><th>Violations</th></tr>"
    return f'<div class="scroll"><table id="checks">{head}{"".join(body)}</table></div>'


def _faults_table(run: Mapping[str, Any]) -> str:
    faults = run["faults"]
    if not faults:
        return "<p><em>no faults scheduled</em></p>"
    body = "".join(f"<tr><td class='num'>{esc(_time(f['at_ms']))}</td><td>{esc(f['kind'])}</td><td class='wrap'>"
                   f"<code>{esc(json.dumps({k: v for k, v in f.items() if k not in ('at_ms', 'kind')}))}</code>"
                   "</td></tr>" for f in faults)
    head = "<tr><th>Scheduled at</th><th>Kind</th><th>Parameters</th></tr>"
    return f'<div class="scroll"><table id="faults">{head}{body}</table></div>'


def _file_links(files: Mapping[str, str]) -> str:
    return "<nav>Files: " + "".join(f'<a href="{esc(h)}">{esc(n)}</a>' for n, h in files.items() if h) + "</nav>"


def render_run_page(run: Mapping[str, Any], row: Row, view: RunView, files: Mapping[str, str], overview: str) -> str:
    status = outcome(row)
    title = f"{run['scenario']} seed {run['seed']}"
    bugs = run.get("seeded_bugs") or []
    parts = [
        "<!DOCTYPE html>", f'<html lang="en"><head><meta charset="utf-8"><title>{esc(title)} — kafkasim</title>',
        f"<style>{CSS}{RUN_CSS}</style></head><body>",
        f'<p><a href="{esc(overview)}">← overview</a></p>',
        f'<h1>{esc(title)} <span class="badge {status}">{esc(VERDICT_TEXT[status])}</span></h1>',
        (f'<p class="warn">Seeded bugs on: <b>{esc(", ".join(bugs))}</b> — not a clean run.</p>' if bugs else ""),
        f"<p>Reproduce: <code id=\"repro\">{esc(reproduce_command(dict(row, seeded_bugs=bugs)))}</code></p>",
        _file_links(files), _stats(run),
        "".join(f'<p class="exp">{esc(n)}</p>' for n in view.notes),
        "<h2>Timeline</h2>", timeline_svg(view),
        "<h2>Anomalies</h2>", _anomaly_table(view.anomalies),
        "<h2>Checks</h2>", _checks_table(run),
        "<h2>Faults scheduled</h2>", _faults_table(run),
        "<h2>Faults, crashes and leadership over time</h2>", _events_table(view),
        "</body></html>",
    ]
    return "\n".join(p for p in parts if p)


def render_trace_page(title: str, view: RunView, trace_href: str) -> str:
    lines, last = [], 0
    for n, raw in view.excerpt:
        if n > last + 1:
            lines.append(f'<span class="gap">… {n - last - 1} lines …</span>')
        lines.append(f'<span id="L{n}"><a class="n" href="#L{n}">{n}</a>{esc(raw)}</span>')
        last = n
    if view.trace_lines > last:
        lines.append(f'<span class="gap">… {view.trace_lines - last} lines …</span>')
    return "\n".join([
        "<!DOCTYPE html>", f'<html lang="en"><head><meta charset="utf-8"><title>{esc(title)} trace</title>',
        f"<style>{CSS}{RUN_CSS}</style></head><body>",
        f'<p><a href="index.html">← {esc(title)}</a> · full trace: <a href="{esc(trace_href)}">{TRACE_FILE}</a> '
        f"({view.trace_lines} lines)</p>",
        "<p>The lines the run page links to, with context; the number is the line in the trace file.</p>",
        f'<pre class="trace">{"".join(lines)}</pre></body></html>',
    ])


def write_run_pages(out_dir: Path, root: Path, run_json: Path, run: Mapping[str, Any], row: Row) -> RunLinks:
    """Write one run's index.html and trace.html; the links returned are relative to out_dir."""
    where = page_dir(out_dir, root, run_json)
    where.mkdir(parents=True, exist_ok=True)
    run_dir = run_json.parent
    view = read_run_view(run_dir, run)
    trace, timeline = run_dir / TRACE_FILE, run_dir / TIMELINE_FILE
    files = {"run.json": _rel(run_json, where), TRACE_FILE: _rel(trace, where) if trace.is_file() else "",
             TIMELINE_FILE: _rel(timeline, where) if timeline.is_file() else "", "trace excerpt": "trace.html"}
    overview = _rel(out_dir / "index.html", where)
    title = f"{run['scenario']} seed {run['seed']}"
    (where / "index.html").write_text(render_run_page(run, row, view, files, overview), encoding="utf-8")
    (where / "trace.html").write_text(render_trace_page(title, view, files[TRACE_FILE]), encoding="utf-8")
    return RunLinks(page=_rel(where / "index.html", out_dir), run_json=_rel(run_json, out_dir),
                    trace=_rel(trace, out_dir) if trace.is_file() else "",
                    timeline=_rel(timeline, out_dir) if timeline.is_file() else "")
