"""run.json of a client-workload run (client_workload.py): the simulated run's fields (verdict,
checks, anomalies, stats) plus what was live, the client as it ran, every fault's control-plane
latency (call to acting) and the cluster's pacing error.

Its checks are the simulated run's history checkers and god's-eye checks, plus two of the live
world: `task-error` / `invariant:<what>` from the cluster (as in a simulated run) and
`client-liveness` — the run's notes when a driver died or the read-back could not read every
acknowledged value back within its time (the verdict treats it like `liveness`).

A check counts as expected (the run still passes, as with a scenario's [guarantees] expected)
when the scenario declares it or when every anomaly it found is one Kafka permits for the
client's settings (matrix_judge.py), e.g. duplicates from a producer without idempotence. So a
run's verdict and its matrix cell agree: pass with expected anomalies is a finding.
"""

from __future__ import annotations

import hashlib
from typing import Any, Protocol

from kafkasim.harness.checkers import Anomaly, CheckResult
from kafkasim.harness.client_history import DriverErrors
from kafkasim.harness.host import code_version
from kafkasim.harness.live import LIVE_PARTS
from kafkasim.harness.matrix_judge import judge_anomaly
from kafkasim.harness.scenario import Scenario
from kafkasim.harness.workload import History


class _Settings(Protocol):
    client: str

    def describe(self) -> dict[str, Any]: ...


def percentiles(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    v = sorted(values)

    def at(q: float) -> float:
        return round(v[min(len(v) - 1, int(q * len(v)))], 3)
    return {"n": len(v), "p50": at(0.5), "p90": at(0.9), "p99": at(0.99), "max": round(v[-1], 3)}


def control_latencies(fired: list[dict[str, Any]], backend_history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each fired fault with `latency_ms`: from the HTTP call (client side, epoch ms) to the backend
    applying it on the loop's thread (its `applied` record's wall_ms, epoch ms)."""
    applied = {h["id"]: h for h in backend_history if h.get("event") == "applied"}
    out = []
    for f in fired:
        f = dict(f)
        a = applied.get(f.get("id"))
        if a is not None:
            f["acted_epoch_ms"] = a["wall_ms"]
            f["latency_ms"] = round(a["wall_ms"] - f["call_epoch_ms"], 3)
            f["targets"] = a.get("targets")
        out.append(f)
    return out


def _extra_checks(summary: dict[str, Any], notes: list[str]) -> list[CheckResult]:
    tasks = CheckResult("task-error", [Anomaly("task-error", e) for e in summary.get("task_errors", [])])
    by_what: dict[str, list[Anomaly]] = {}
    for v in summary.get("invariant_violations", []):
        by_what.setdefault(v["what"], []).append(Anomaly(f"invariant:{v['what']}", v))
    liveness = CheckResult("client-liveness", [Anomaly("client-liveness", {"note": n}) for n in notes])
    return [tasks] + [CheckResult(f"invariant:{w}", a) for w, a in by_what.items()] + [liveness]


def client_run_json(scenario: Scenario, seed: int, settings: _Settings, history: History,
                    results: list[CheckResult], summary: dict[str, Any], fired: list[dict[str, Any]],
                    errors: DriverErrors, notes: list[str], backend_history: list[dict[str, Any]]) -> dict[str, Any]:
    checks, anomalies = [], []
    client = settings.describe()
    for r in results + _extra_checks(summary, notes):
        # Expected: declared by the scenario, or every anomaly of the check is one Kafka permits for
        # the client's settings (matrix_judge: a finding about the client, not a failure).
        expected = r.name in scenario.expected or bool(r.anomalies) and all(
            judge_anomaly(a.kind, a.detail, client)[0] == "finding" for a in r.anomalies)
        checks.append({"name": r.name, "ok": not r.anomalies, "violations": len(r.anomalies), "expected": expected})
        anomalies += [{"kind": a.kind, "expected": expected, "detail": a.detail} for a in r.anomalies[:100]]
    fired = control_latencies(fired, backend_history)
    acked = history.acked()
    stats = dict(summary["stats"])
    wall_s = float(stats.get("wall_time_s", 0.0))
    stats["sim_to_wall_ratio"] = round(stats["sim_time_ms"] / 1000.0 / wall_s, 3) if wall_s > 0 else 0.0
    stats.update(produced=len(history.sends), acked=len(acked), consumed=len(history.polls),
                 commits=len(history.commits),
                 produce_latency_ms=percentiles([s.complete_ms - s.invoke_ms for s in acked]),
                 control_latency_ms=percentiles([f["latency_ms"] for f in fired if "latency_ms" in f]))
    return {
        # one scenario run by several clients: each its own row in the report (same seed, other runs)
        "schema_version": 1, "scenario": f"{scenario.name} [{settings.client}]",
        "scenario_name": scenario.name, "scenario_path": scenario.path, "seed": seed,
        "world": "live", "code_version": code_version(),
        "verdict": "pass" if all(c["ok"] or c["expected"] for c in checks) else "fail",
        "trace_hash": summary["trace_hash"], "trace": "trace.jsonl", "checks": checks, "anomalies": anomalies,
        "faults": [f.describe() for f in scenario.faults], "faults_fired": fired,
        "control_faults": backend_history,
        "live": {**LIVE_PARTS, "workload": f"the {settings.client} driver process(es): producer-0, "
                 "consumer-0 (a group member, if the scenario has a group) and the read-back `reader`"},
        "client": client, "client_errors": errors.summary(), "notes": notes,
        "brokers": summary["brokers"], "broker_config": summary["broker_config"], "stats": stats,
        "scenario_text": scenario.text, "scenario_sha256": hashlib.sha256(scenario.text.encode()).hexdigest(),
        "repro": f"kafkasim run {scenario.path} --seed {seed} --client {settings.client}",
    }
