"""What `kafkasim run --client` and `kafkasim matrix` print."""

from __future__ import annotations

from typing import Any


def print_client_run(run: dict[str, Any], out_dir: str, say: Any = print) -> None:
    st, c = run["stats"], run["client"]
    say(f"scenario {run['scenario']} seed {run['seed']} client {c['client']} {c['version']}: {run['verdict'].upper()}")
    say(f"  settings: acks={c['acks']} idempotent={c['idempotent']} ({c['idempotence_source']})")
    say(f"  acked {st['acked']}/{st['produced']}, consumed {st['consumed']}, commits {st['commits']}, "
        f"{st['wall_time_s']:.1f} s wall (live world)")
    lag, ctl = st["pacing_lag_ms"], st.get("control_latency_ms")
    say(f"  pacing lag p50 {lag['p50_ms']} ms p99 {lag['p99_ms']} ms; control-plane call->acting "
        + (f"p50 {ctl['p50']} ms p99 {ctl['p99']} ms over {ctl['n']} faults" if ctl else "n/a (no fault acted)"))
    for f in run["faults_fired"]:
        if "error" in f:
            say(f"  fault at {f['at_ms']:.0f} ms {f['spec'].get('kind')}: NOT APPLIED: {f['error']}")
    for c2 in run["checks"]:
        if not c2["ok"]:
            say(f"  {'expected' if c2['expected'] else 'VIOLATION'}: {c2['name']} x{c2['violations']}")
    for e in run["client_errors"][:5]:
        say(f"  client error x{e['times']}: {e['error'][:160]}")
    say(f"  report: {out_dir}/run.json")


def matrix_table(doc: dict[str, Any]) -> list[str]:
    """The matrix as a Markdown table: a row per scenario, a column per client."""
    from kafkasim.harness.matrix import cell_text

    clients = doc["clients"]
    by = {(c["scenario"], c["client"]): c for c in doc["cells"]}
    lines = ["| scenario | " + " | ".join(clients) + " |", "|---|" + "---|" * len(clients)]
    for s in doc["scenarios"]:
        row = [cell_text(by[(s["name"], c)]) if (s["name"], c) in by else "—" for c in clients]
        lines.append(f"| {s['name']} | " + " | ".join(row) + " |")
    return lines


def measurement_lines(doc: dict[str, Any]) -> list[str]:
    m = doc["measurements"]
    ctl, lag = m["control_latency_ms"], m["pacing_lag_ms"]
    ctl_text = (f"p50 {ctl['p50']} ms, p99 {ctl['p99']} ms, max {ctl['max']} ms over {ctl['n']} faults"
                if ctl else "no fault acted")
    return [f"control plane, call -> fault acting: {ctl_text}",
            f"pacing error (wall - simulated, per instant): p50 {lag['p50_ms']} ms, p99 {lag['p99_ms']} ms, "
            f"max {lag['max_ms']} ms over {lag['instants']} instants",
            "cells: " + ", ".join(f"{k} {v}" for k, v in sorted(doc["totals"].items()))]


def matrix_command(folder: str, clients_spec: str, out_dir: str, seed: int, only_eos: bool,
                   say: Any = print, resume: bool = False) -> int:
    """Run the matrix, print it; exit 1 iff a cell failed (findings and skips do not fail it)."""
    import os
    import shlex

    from kafkasim.harness.matrix import parse_clients, run_matrix

    if not os.path.exists(folder):
        raise ValueError(f"{folder}: no such scenario folder or file")
    command = shlex.join(["kafkasim", "matrix", folder, "--clients", clients_spec, "--out", out_dir,
                          "--seed", str(seed)] + (["--only-eos"] if only_eos else []))
    m = run_matrix(folder, parse_clients(clients_spec), out_dir, seed, command,
                   only_eos, say=lambda s: say(s, flush=True), resume=resume)
    doc = m.to_json()
    say("")
    for line in matrix_table(doc) + [""] + measurement_lines(doc):
        say(line)
    say(f"matrix: {os.path.join(out_dir, 'matrix.json')} (kafkasim report {out_dir} shows it)")
    return 1 if doc["totals"].get("fail", 0) or doc["totals"].get("error", 0) else 0


def show_matrix(out_dir: str, say: Any = print) -> int:
    """`kafkasim matrix --show`: the table and measurements of an existing matrix.json."""
    import json
    import os

    path = os.path.join(out_dir, "matrix.json")
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: no readable matrix.json ({exc})") from None
    if not isinstance(doc, dict) or not str(doc.get("schema", "")).startswith("kafkasim-matrix/"):
        raise ValueError(f"{path}: not a kafkasim matrix.json")
    say(f"{doc['command']} (seed {doc['seed']}): {len(doc['cells'])} cells")
    for line in matrix_table(doc) + [""] + measurement_lines(doc):
        say(line)
    return 0
