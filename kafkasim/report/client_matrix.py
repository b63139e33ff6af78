"""The client × fault section of index.html: every matrix.json `kafkasim matrix` wrote under the
reports directory, as a table (a row per fault scenario, a column per client driver), each cell
linking to its run's page (or its run.json), with the matrix's measurements under it.

Cell classes: ok (pass), finding (an anomaly Kafka permits for the client's settings: a
finding about the client, not a failure), bad (fail), none (skipped, error, or not run).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kafkasim.report.model import RunLinks

MATRIX_FILE = "matrix.json"
CLASS = {"pass": "ok", "finding": "finding", "fail": "bad"}
TEXT = {"pass": "✓ pass", "finding": "finding", "fail": "✗ fail", "skipped": "skipped", "error": "error"}


def find_matrices(root: Path, out_dir: Path) -> list[tuple[Path, dict[str, Any]]]:
    """(path, document) of every readable matrix.json under root, outside the report's own output."""
    found = []
    for path in sorted(root.rglob(MATRIX_FILE)):
        if out_dir.resolve() in path.resolve().parents:
            continue
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and str(doc.get("schema", "")).startswith("kafkasim-matrix/"):
            found.append((path.resolve(), doc))
    return found


def _esc(value: Any) -> str:
    import html
    return html.escape(str(value), quote=True)


def _href(matrix_path: Path, cell: Mapping[str, Any], links: Mapping[Path, RunLinks], out_dir: Path) -> str:
    if not cell.get("run"):
        return ""
    run_json = (matrix_path.parent / str(cell["run"])).resolve()
    found = links.get(run_json)
    if found is not None and found.page:
        return found.page
    return Path(os.path.relpath(run_json, out_dir.resolve())).as_posix()


def _title(cell: Mapping[str, Any]) -> str:
    lines = [f"{cell['client']} × {cell['scenario']}: {cell['verdict']}"]
    if cell.get("reason"):
        lines.append(str(cell["reason"]))
    for a in cell.get("anomalies", []):
        lines.append(f"{a['verdict']}: {a['kind']} x{a['count']} — {a['why']}")
    s = cell.get("client_settings")
    if s:
        lines.append(f"acks={s['acks']} idempotent={s['idempotent']} ({s['idempotence_source']})")
    for f in cell.get("faults_not_applied", []):
        lines.append(f"fault not applied at {f['at_ms']} ms ({f['kind']}): {f['error']}")
    return "\n".join(lines)


def _cell_html(matrix_path: Path, cell: Mapping[str, Any] | None, links: Mapping[Path, RunLinks],
               out_dir: Path) -> str:
    if cell is None:
        return '<td class="none"></td>'
    v = str(cell["verdict"])
    kinds = [a["kind"] for a in cell.get("anomalies", []) if a["verdict"] == v]
    text = TEXT.get(v, v) + (f": {', '.join(kinds)}" if kinds else "")
    href = _href(matrix_path, cell, links, out_dir)
    inner = f'<a href="{_esc(href)}">{_esc(text)}</a>' if href else _esc(text)
    return (f'<td class="{CLASS.get(v, "none")}" data-verdict="{_esc(v)}" title="{_esc(_title(cell))}">'
            f"{inner}</td>")


def one_matrix(matrix_path: Path, doc: Mapping[str, Any], links: Mapping[Path, RunLinks], out_dir: Path) -> str:
    clients = list(doc.get("clients", []))
    by = {(c["scenario"], c["client"]): c for c in doc.get("cells", [])}
    head = "<tr><th>Fault \\ client</th>" + "".join(f"<th>{_esc(c)}</th>" for c in clients) + "</tr>"
    rows = []
    for s in doc.get("scenarios", []):
        tds = "".join(_cell_html(matrix_path, by.get((s["name"], c)), links, out_dir) for c in clients)
        rows.append(f'<tr><th title="{_esc(s.get("description", ""))}">{_esc(s["name"])}</th>{tds}</tr>')
    m = doc.get("measurements", {})
    ctl, lag = m.get("control_latency_ms"), m.get("pacing_lag_ms") or {}
    ctl_text = f"p50 {ctl['p50']} ms, p99 {ctl['p99']} ms over {ctl['n']} faults" if ctl else "no fault acted"
    totals = ", ".join(f"{k} {v}" for k, v in sorted(doc.get("totals", {}).items()))
    rel = Path(os.path.relpath(matrix_path, out_dir.resolve())).as_posix()
    return (f'<p>From <a href="{_esc(rel)}">{_esc(rel)}</a> (<code>{_esc(doc.get("command", ""))}</code>): '
            f"{_esc(totals)}. Control plane, call → fault acting: {_esc(ctl_text)}. Pacing error (wall − "
            f"simulated): p50 {_esc(lag.get('p50_ms'))} ms, p99 {_esc(lag.get('p99_ms'))} ms.</p>"
            f'<div class="scroll"><table class="matrix client-matrix">{head}{"".join(rows)}</table></div>')


def client_matrix_section(matrices: Sequence[tuple[Path, Mapping[str, Any]]], links: Mapping[str, RunLinks],
                          out_dir: Path) -> str:
    if not matrices:
        return ""
    by_path = {Path(k).resolve(): v for k, v in links.items()}
    legend = ('<p class="legend"><span class="ok">✓ pass</span><span class="finding">finding: an anomaly Kafka '
              "permits for the client's settings (about the client, not a failure)</span><span class=\"bad\">✗ "
              "fail: a guarantee broken</span><span>hover for the anomalies, click for the run</span></p>")
    body = "".join(one_matrix(p, doc, by_path, out_dir) for p, doc in matrices)
    return f'<h2>Client × fault</h2><div id="client-matrix">{legend}{body}</div>'
