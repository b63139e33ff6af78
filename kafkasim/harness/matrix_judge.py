"""One matrix cell's verdict: a client-workload run's anomalies judged against what Kafka
guarantees for the client's settings (run.json's `client`: acks, idempotence).

  fail     something Kafka guarantees for these settings broke: an acknowledged write lost or
           overwritten with acks=all, duplicates or reordering with idempotence on, an
           acknowledged offset commit lost, a transactional pipeline that is not exactly-once,
           or anything the cluster's god's-eye checks found (replicas, recovery, invariants,
           task errors) — those are kafkasim's, whatever the client
  finding  an anomaly Kafka permits for these settings — a finding about the client, reported
           with its reason, not a failed cell: duplicates / reordering without idempotence
           (retries re-send), acknowledged writes lost with acks=1 or 0, a group member
           re-reading or skipping (at-least-once redelivery is the contract; the read-back still
           saw every record), a client that did not finish (its driver died or timed out)
  pass     no anomaly
"""

from __future__ import annotations

from typing import Any

# Kinds the history checkers report about what the client saw; everything else a run reports
# (replica-divergence, recovered-not-prefix, invariant:..., task-error, ...) is the cluster's.
CLIENT_KINDS = {"lost-write", "unseen", "inconsistent-offsets", "duplicate", "reorder", "nonmonotonic-poll",
                "poll-skip", "two-owners", "committed-offset-regression", "client-liveness", "eos-duplicate",
                "eos-missing", "torn-transaction", "aborted-read"}


def judge_anomaly(kind: str, detail: dict[str, Any], client: dict[str, Any]) -> tuple[str, str]:
    """(fail | finding, why) for one anomaly of a run made with these client settings."""
    acks_all, idem = client.get("acks") == "all", bool(client.get("idempotent"))
    if kind not in CLIENT_KINDS:
        return "fail", "a cluster check (god's eye): kafkasim's guarantee, whatever the client"
    if kind in ("lost-write", "unseen", "inconsistent-offsets"):
        if acks_all:
            return "fail", "an acknowledged write lost or overwritten with acks=all"
        return "finding", f"acknowledged writes may be lost with acks={client.get('acks')}"
    if kind in ("duplicate", "reorder"):
        if idem:
            return "fail", f"{kind} with idempotence on"
        return "finding", f"{kind} without idempotence: the client's retries re-send (Kafka permits it)"
    if kind in ("nonmonotonic-poll", "poll-skip"):
        if detail.get("group"):
            return "finding", "a group member re-read or skipped records (at-least-once delivery)"
        return "fail", "the read-back of the whole log was not contiguous"
    if kind == "client-liveness":
        return "finding", "the client did not finish its work (driver died or timed out)"
    return "fail", f"{kind}: Kafka guarantees it for these settings"


def judge_run(run: dict[str, Any]) -> dict[str, Any]:
    """The cell of a finished run.json: verdict, its anomalies counted by kind with the reason."""
    client = run.get("client", {})
    kinds: dict[str, dict[str, Any]] = {}
    for a in run.get("anomalies", []):
        verdict, why = judge_anomaly(a["kind"], a.get("detail", {}), client)
        k = kinds.setdefault(a["kind"], {"kind": a["kind"], "verdict": verdict, "why": why, "count": 0,
                                         "example": a.get("detail")})
        k["count"] += 1
    for c in run.get("checks", []):  # anomaly lists are capped at 100 a check: counts from the checks
        if c["name"] in kinds:
            kinds[c["name"]]["count"] = max(kinds[c["name"]]["count"], c["violations"])
    verdicts = {k["verdict"] for k in kinds.values()}
    cell = "fail" if "fail" in verdicts else "finding" if verdicts else "pass"
    unapplied = [f for f in run.get("faults_fired", []) if "error" in f]
    return {"verdict": cell, "anomalies": sorted(kinds.values(), key=lambda k: (k["verdict"] != "fail", k["kind"])),
            "faults_not_applied": [{"at_ms": f["at_ms"], "kind": f["spec"].get("kind"), "error": f["error"]}
                                   for f in unapplied]}
