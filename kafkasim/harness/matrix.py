"""`kafkasim matrix`: every client driver x every client scenario of a folder (scenarios/matrix/),
each cell a client-workload run (client_workload.py) judged by matrix_judge.py.

  <out>/runs/<scenario>/<client>/run.json   each cell's run (+ trace.jsonl, the drivers' logs)
  <out>/matrix.json                         the table, rewritten after every cell:
      cells[]: scenario, client, verdict (pass | finding | fail | skipped | error), run (path
               relative to <out>), anomalies judged (kind, verdict, why, count, example), the
               client's settings, faults the control plane could not apply
      measurements: control_latency_ms (every fault of every cell: HTTP call -> acting on the
               loop's thread, p50/p99) and pacing_lag_ms (every instant of every cell's live
               world: wall - simulated ms, p50/p99, from the merged histograms)

The exactly-once row is the folder's scenarios with a transactional pipeline workload; it runs
only the clients with transactions (EOS_CLIENTS).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafkasim.harness.client_verdict import percentiles
from kafkasim.harness.client_workload import ClientRunError, run_client_scenario
from kafkasim.harness.matrix_judge import judge_run
from kafkasim.harness.scenario import Scenario, load_scenario
from kafkasim.harness.sweep import scenario_files
from kafkasim.runtime.live.pacing import PacingStats
from kafkasim.runtime.real.client_driver import CLIENTS, DriverFailed

EOS_CLIENTS = ("java", "franz-go", "confluent-kafka", "kafka-python")
SCHEMA = "kafkasim-matrix/1"


def is_eos(s: Scenario) -> bool:
    return s.producer.txn is not None and s.producer.txn.pipeline > 0


def parse_clients(spec: str) -> list[str]:
    if spec == "all":
        return list(CLIENTS)
    names = [c.strip() for c in spec.split(",") if c.strip()]
    for c in names:
        if c not in CLIENTS:
            raise ValueError(f"--clients: unknown client {c!r} (the drivers: {', '.join(CLIENTS)}, or all)")
    if not names:
        raise ValueError("--clients: no client named")
    return names


@dataclass
class Matrix:
    out_dir: str
    seed: int
    clients: list[str]
    scenarios: list[Scenario]
    command: str
    resume: bool = False
    cells: list[dict[str, Any]] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    pacing: PacingStats = field(default_factory=PacingStats)

    def plan(self) -> list[tuple[Scenario, str]]:
        return [(s, c) for s in self.scenarios for c in self.clients if not is_eos(s) or c in EOS_CLIENTS]

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "seed": self.seed, "command": self.command, "clients": self.clients,
                "scenarios": [{"name": s.name, "path": s.path, "description": s.description, "eos": is_eos(s)}
                              for s in self.scenarios],
                "cells": self.cells, "totals": self.totals(),
                "measurements": {"control_latency_ms": percentiles(self.latencies),
                                 "pacing_lag_ms": self.pacing.summary()}}

    def totals(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.cells:
            out[c["verdict"]] = out.get(c["verdict"], 0) + 1
        return out

    def write(self) -> str:
        path = os.path.join(self.out_dir, "matrix.json")
        with open(path + ".tmp", "w") as f:
            json.dump(self.to_json(), f, indent=2, sort_keys=True)
        os.replace(path + ".tmp", path)
        return path


def run_cell(m: Matrix, s: Scenario, client: str) -> dict[str, Any]:
    rel = os.path.join("runs", s.name, client)
    cell: dict[str, Any] = {"scenario": s.name, "client": client, "run": os.path.join(rel, "run.json")}
    done = os.path.join(m.out_dir, rel, "run.json")
    if m.resume and os.path.exists(done):  # --resume: a finished cell of an interrupted matrix counts
        with open(done) as f:
            doc = json.load(f)
        if "verdict" in doc and "client" in doc:  # not the live summary a run writes while it runs
            return _judged(m, cell, doc)
    try:
        result = run_client_scenario(s, m.seed, client, os.path.join(m.out_dir, rel))
    except ClientRunError as exc:
        return {**cell, "verdict": "skipped", "reason": str(exc), "run": None}
    except (DriverFailed, OSError, ValueError, RuntimeError) as exc:  # one cell's trouble, not the matrix's
        return {**cell, "verdict": "error", "reason": f"{type(exc).__name__}: {exc}", "run": None}
    return _judged(m, cell, result.run)


def _judged(m: Matrix, cell: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
    for f in run.get("faults_fired", []):
        if "latency_ms" in f:
            m.latencies.append(f["latency_ms"])
    for b, n in run["stats"].get("pacing_histogram", {}).items():
        m.pacing.counts[int(b)] = m.pacing.counts.get(int(b), 0) + n
        m.pacing.n += n
    m.pacing.max_ms = max(m.pacing.max_ms, run["stats"]["pacing_lag_ms"]["max_ms"])
    return {**cell, **judge_run(run), "client_settings": run["client"], "wall_s": run["stats"]["wall_time_s"],
            "acked": run["stats"]["acked"], "produced": run["stats"]["produced"]}


def run_matrix(folder: str, clients: list[str], out_dir: str, seed: int, command: str,
               only_eos: bool = False, say: Callable[[str], None] = print, resume: bool = False) -> Matrix:
    scenarios = [load_scenario(p) for p in scenario_files(folder)]
    scenarios = [s for s in scenarios if is_eos(s)] if only_eos else scenarios
    if not scenarios:
        raise ValueError(f"{folder}: no client scenarios (*.toml) there")
    os.makedirs(out_dir, exist_ok=True)
    m = Matrix(out_dir, seed, clients, scenarios, command, resume)
    plan = m.plan()
    for i, (s, client) in enumerate(plan, 1):
        say(f"[{i}/{len(plan)}] {s.name} x {client} ...")
        cell = run_cell(m, s, client)
        m.cells.append(cell)
        m.write()
        say(f"[{i}/{len(plan)}] {s.name} x {client}: {cell_text(cell)}")
    return m


def cell_text(cell: dict[str, Any]) -> str:
    """`pass`, `finding: duplicate x3`, `FAIL: lost-write x2`, `skipped: <why>`."""
    v = cell["verdict"]
    if v in ("skipped", "error"):
        return f"{v}: {cell['reason'][:80]}"
    kinds = [a for a in cell.get("anomalies", []) if a["verdict"] == v]
    what = ", ".join(f"{a['kind']} x{a['count']}" for a in kinds)
    return ("FAIL" if v == "fail" else v) + (f": {what}" if what else "")
