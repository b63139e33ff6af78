"""The exactly-once row of the client matrix: a consume-transform-produce pipeline of a
third-party client (the driver's `transform`: a read_committed group member on topics[0] and a
transactional producer writing each value to the same partition of topics[1], the consumed
offsets sent to the transaction with the consumer's group metadata), under the scenario's faults.

The input is written by the client's own producer (client_workload._produce, checked as any
producer is). When the faults are over and the pipeline has copied every acknowledged input
value (or its time ran out), a read_committed read-back of the output gives:

  eos-duplicate     an output value read more than once (a committed transaction's records
                    doubled, or an aborted transaction's records delivered to read_committed)
  eos-missing       an input value the pipeline reported in a committed transaction that the
                    output does not hold
  torn-transaction  a committed transaction partly visible
An input value the pipeline never got to in time is `client-liveness` (a note), not eos-missing.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kafkasim.harness.checkers import Anomaly, CheckResult
from kafkasim.runtime.real.client_driver import DriverProcess

PIPELINE_TIMEOUT_MS = 60000.0   # after the producer and the faults are done


@dataclass
class PipelineLog:
    transactions: list[list[str]] = field(default_factory=list)
    aborted: int = 0
    output: list[str] = field(default_factory=list)

    def processed(self) -> set[str]:
        return {v for t in self.transactions for v in t}


def transform_cmd(inp: str, out: str, client: str) -> dict[str, Any]:
    return {"op": "transform", "input": inp, "output": out, "group": f"pipe-{client}",
            "transactional_id": f"pipe-{client}", "max": 1 << 20, "batch": 20, "abort_every": 3,
            "timeout_ms": 1000, "session_timeout_ms": 10000, "heartbeat_interval_ms": 500}


def record_transform(log: PipelineLog, reply: dict[str, Any]) -> list[str]:
    """Adds a transform reply's committed transactions; answers its errors."""
    if reply.get("op") != "transformed":
        return [str(reply.get("error"))]
    log.transactions += [[str(v) for _, _, v in t] for t in reply.get("transactions", [])]
    log.aborted += int(reply.get("aborted", 0))
    return [str(e) for e in reply.get("errors", [])]


def read_output(d: DriverProcess, topic: str, want: set[str], now: Any, deadline_ms: float) -> list[str]:
    """read_committed from the start until every wanted value came, then one short poll more (so
    duplicates past them are seen too)."""
    got: list[str] = []
    cmd = {"op": "consume", "topic": topic, "group": None, "from": "earliest", "max": 1 << 20,
           "timeout_ms": 1500, "isolation": "read_committed"}
    while now() < deadline_ms:
        r = d.call(cmd, 90.0)
        new = [str(v) for _, _, v in r.get("records", [])] if r.get("op") == "consumed" else []
        got += new
        if want <= set(got) and not new:
            break
    return got


def eos_checks(log: PipelineLog) -> list[CheckResult]:
    counts = Counter(log.output)
    dup = CheckResult("eos-duplicate", [Anomaly("eos-duplicate", {"value": v, "times": n})
                                        for v, n in sorted(counts.items()) if n > 1])
    have = set(log.output)
    missing = CheckResult("eos-missing", [Anomaly("eos-missing", {"value": v})
                                          for v in sorted(log.processed() - have)])
    torn = CheckResult("torn-transaction", [Anomaly("torn-transaction", {"transaction": t[:10], "size": len(t),
                                                                         "visible": len(have.intersection(t))})
                                            for t in log.transactions if 0 < len(have.intersection(t)) < len(t)])
    return [dup, missing, torn]
