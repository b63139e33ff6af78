"""The transactional workload's scenario keys (parsed, refused with a message naming the key,
dumped and read back equal) and a short transactional run: it records every transaction with its
outcome, its reads are read_committed, and the same seed gives the same trace hash."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafkasim.harness.runner import run_scenario
from kafkasim.harness.scenario import Scenario, ScenarioError, parse_scenario, scenario_from_text
from kafkasim.harness.shrink import dump_scenario

pytestmark = pytest.mark.sim


def _raw(**producer: Any) -> dict[str, Any]:
    return {
        "scenario": {"name": "txn-probe", "duration_ms": 60000},
        "cluster": {"brokers": 1},
        "topics": [{"name": "in", "partitions": 2}, {"name": "out", "partitions": 2}],
        "workload": {"producer": {"messages": 40, "rate_per_s": 200, **producer},
                     "consumer": {"fetch_max_wait_ms": 100}},
        "heal": {"liveness_ms": 50000},
    }


def test_txn_keys_parse_and_round_trip() -> None:
    s = parse_scenario("p.toml", _raw(transactional=True, txn_size=4, abort_ratio=0.25, pipeline=1))
    assert s.producer.txn is not None
    assert (s.producer.txn.txn_size, s.producer.txn.abort_ratio, s.producer.txn.pipeline) == (4, 0.25, 1)
    assert scenario_from_text("p.toml", dump_scenario(s)) == s
    assert parse_scenario("p.toml", _raw()).producer.txn is None


@pytest.mark.parametrize("producer,message", [
    ({"abort_ratio": 0.2}, "transactional = true"),
    ({"transactional": True, "abort_ratio": 1.5}, "abort_ratio"),
    ({"transactional": True, "acks": 1}, "\"all\" when transactional = true"),
    ({"transactional": True, "txn_size": 0}, "txn_size"),
])
def test_bad_txn_keys_are_refused_by_name(producer: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        parse_scenario("p.toml", _raw(**producer))


def test_pipeline_needs_two_topics() -> None:
    raw = _raw(transactional=True, pipeline=1)
    raw["topics"] = raw["topics"][:1]
    with pytest.raises(ScenarioError, match="pipeline"):
        parse_scenario("p.toml", raw)


def _small() -> Scenario:
    raw = _raw(transactional=True, txn_size=4, abort_ratio=0.3)
    raw["cluster"]["config"] = {"transaction.state.log.replication.factor": 1, "transaction.state.log.num.partitions": 2}
    return parse_scenario("p.toml", raw)


def test_short_transactional_run_records_outcomes_and_is_deterministic(tmp_path: Path) -> None:
    a = run_scenario(_small(), 3, str(tmp_path / "a")).run
    b = run_scenario(_small(), 3, str(tmp_path / "b")).run
    assert a["verdict"] == "pass", a["anomalies"][:3]
    assert a["trace_hash"] == b["trace_hash"]
    txns = a["stats"]["transactions"]
    assert txns["txns_committed"] + txns["txns_aborted"] + txns["txns_unknown"] == 10
    assert txns["txns_aborted"] > 0 and txns["txns_committed"] > 0
    # one consumer read every committed record once, and nothing else
    assert txns["read_committed_reads"] == 4 * txns["txns_committed"]
    names = {c["name"] for c in a["checks"]}
    assert {"aborted-read", "torn-transaction", "lost-committed-write", "missing-marker"} <= names
