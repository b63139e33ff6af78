"""Each seeded bug (kafkasim/runtime/seeded_bugs.py) is caught by the check that claims to catch it,
on every seed tried, and the same runs without the bug pass: the checkers are shown to find
what they look for, and the scenarios to provoke it.

  bug                       scenario                                   check                  seeds
  hw-before-isr             a small 3-broker, RF 3 run (below)         hw-above-isr-replica   1-2
  skip-recovery-crc         scenarios/power-loss-reorder.toml          unwritten-bytes        1-3
  skip-follower-truncation  scenarios/diverged-leader-rejoins.toml     replica-divergence     3, 4
  commit-before-replicated  scenarios/coordinator-failover-commits.toml committed-offset-      1, 4
                                                                       regression
  two-owners                scenarios/rebalance-storm.toml             two-owners             1
  txn-end-ignores-epoch     scenarios/txn-zombie-fenced.toml           lost-committed-write   1, 3
                                                                       missing-marker         13
                            the same without KIP-890 verification      missing-marker         2

(diverged-leader-rejoins catches skip-follower-truncation on seeds 3, 4, 5, 7, 10, 11, 12 of 1-12
with replica-divergence; on seeds 1, 2, 6, 8, 9 the untruncated follower never rejoins and liveness
fails first: its log end falls inside one of the new leader's batches, so its fetcher marks the
partition failed (UnexpectedAppendOffsetException) and it stays out of the ISR. Which seeds do
depends on the interleaving: since the replica fetcher keeps fetch sessions, seed 1 is one of them.
coordinator-failover-commits catches commit-before-replicated on seeds 1, 3, 4, 5, 8 of 1-8: the
acknowledged-but-unreplicated commit must also be the last one before a rebalance reads it back.
txn-zombie-fenced catches txn-end-ignores-epoch on seeds 1, 2, 3 of 1-5 with lost-committed-write:
the zombie's late EndTxn(commit) is answered NONE by ending its successor's transaction while its
own records were aborted by the fence; on seeds 4, 5 the late EndTxn lands between two transactions
and is refused. With transaction.partition.verification.enable=false, seeds 2 and 5 show
missing-marker (and liveness) instead: the successor's later records hang in a transaction the
coordinator thinks is over — what KIP-890's verification refuses (INVALID_TXN_STATE). With it,
missing-marker still shows on seeds 9, 13, 15, 16 of 1-24 (lost-committed-write on 1, 2, 3, 6, 10,
12, 14, 17, 19, 23; the rest pass): the late EndTxn(commit) writes PrepareCommit over the
successor's open transaction, then the coordinator refuses to send its markers for the stale epoch
(PRODUCER_FENCED), so the transaction never completes and the successor's EndTxn gets
CONCURRENT_TRANSACTIONS to the end. Seed 4 showed it before the replica fetcher kept fetch
sessions; now its late EndTxn lands between two of the successor's transactions and is refused.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafkasim.harness.runner import run_scenario, seeded_bugs_from_env
from kafkasim.harness.scenario import Scenario, load_scenario, parse_scenario
from kafkasim.runtime.real.world import RealNode
from kafkasim.runtime.seeded_bugs import parse
from kafkasim.runtime.sim.world import SimWorld

pytestmark = pytest.mark.sim

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def _replicated() -> Scenario:
    """Three brokers, RF 3, acks=all, no faults: the smallest run with followers."""
    return parse_scenario("replicated.toml", {
        "scenario": {"name": "replicated-probe", "duration_ms": 60000},
        "cluster": {"brokers": 3, "config": {"zookeeper.session.timeout.ms": 6000, "min.insync.replicas": 2}},
        "topics": [{"name": "events", "partitions": 1, "replication_factor": 3}],
        "workload": {"producer": {"messages": 200, "rate_per_s": 200}, "consumer": {"fetch_max_wait_ms": 100}},
        "heal": {"liveness_ms": 40000},
    })


def _zombie_without_verification() -> Scenario:
    sc = load_scenario(str(SCENARIOS / "txn-zombie-fenced.toml"))
    sc.broker_config["transaction.partition.verification.enable"] = False
    return sc


CASES = [
    ("hw-before-isr", _replicated, "hw-above-isr-replica", [1, 2]),
    ("skip-recovery-crc", lambda: load_scenario(str(SCENARIOS / "power-loss-reorder.toml")), "unwritten-bytes", [1, 2, 3]),
    ("skip-follower-truncation", lambda: load_scenario(str(SCENARIOS / "diverged-leader-rejoins.toml")),
     "replica-divergence", [3, 4]),
    ("commit-before-replicated", lambda: load_scenario(str(SCENARIOS / "coordinator-failover-commits.toml")),
     "committed-offset-regression", [1, 4]),
    ("two-owners", lambda: load_scenario(str(SCENARIOS / "rebalance-storm.toml")), "two-owners", [1]),
    ("txn-end-ignores-epoch", lambda: load_scenario(str(SCENARIOS / "txn-zombie-fenced.toml")),
     "lost-committed-write", [1, 3]),
    ("txn-end-ignores-epoch", lambda: load_scenario(str(SCENARIOS / "txn-zombie-fenced.toml")),
     "missing-marker", [13]),
    ("txn-end-ignores-epoch", _zombie_without_verification, "missing-marker", [2]),
]


def _violations(run: dict[str, Any], check: str) -> int:
    found = [c for c in run["checks"] if c["name"] == check]
    assert found, f"run.json has no check named {check}"
    return int(found[0]["violations"])


@pytest.mark.parametrize("bug,scenario,check,seeds", CASES, ids=[c[0] for c in CASES])
def test_seeded_bug_is_caught_and_the_clean_run_passes(tmp_path: Path, bug: str, scenario: Any, check: str,
                                                       seeds: list[int]) -> None:
    sc = scenario()
    for seed in seeds:
        buggy = run_scenario(sc, seed, str(tmp_path / f"bug-{seed}"), [bug]).run
        assert buggy["seeded_bugs"] == [bug]
        assert _violations(buggy, check) > 0, f"{bug} not caught by {check} on seed {seed}"
        assert buggy["verdict"] == "fail"
        assert any(a["kind"] == check and not a["expected"] for a in buggy["anomalies"])

        clean = run_scenario(sc, seed, str(tmp_path / f"clean-{seed}")).run
        assert clean["seeded_bugs"] == []
        assert _violations(clean, check) == 0
        assert clean["verdict"] == "pass", [a for a in clean["anomalies"] if not a["expected"]][:3]


def test_a_run_with_a_seeded_bug_says_so_in_its_trace(tmp_path: Path) -> None:
    # A bug this run cannot reach: only the record differs.
    buggy = run_scenario(_replicated(), 1, str(tmp_path / "bug"), ["two-owners"]).run
    clean = run_scenario(_replicated(), 1, str(tmp_path / "clean")).run
    assert buggy["trace_hash"] != clean["trace_hash"]
    assert '"ev":"seeded_bugs"' in (tmp_path / "bug" / "trace.jsonl").read_text()
    assert '"ev":"seeded_bugs"' not in (tmp_path / "clean" / "trace.jsonl").read_text()


def test_worlds_refuse_unknown_names_and_answer_per_world(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown seeded bug"):
        parse("hw-before-isr,no-such-bug")
    with pytest.raises(ValueError, match="unknown seeded bug"):
        SimWorld(1, seeded_bugs=["no-such-bug"])
    with pytest.raises(ValueError, match="unknown seeded bug"):
        RealNode("n", str(tmp_path), seeded_bugs=["no-such-bug"])
    buggy, clean = SimWorld(1, seeded_bugs=["hw-before-isr", "two-owners"]), SimWorld(1)
    rt = buggy.add_node("a").runtime
    assert rt.seeded_bug("two-owners") and rt.seeded_bug("hw-before-isr") and not rt.seeded_bug("skip-recovery-crc")
    assert not clean.add_node("a").runtime.seeded_bug("two-owners")  # no process-wide state
    assert buggy.nodes["a"].runtime.seeded_bug("two-owners")
    assert RealNode("n", str(tmp_path), seeded_bugs=["two-owners"]).seeded_bug("two-owners")
    env = {"KAFKASIM_SEEDED_BUGS": "two-owners, hw-before-isr"}
    assert seeded_bugs_from_env(env) == {"two-owners", "hw-before-isr"}
    assert seeded_bugs_from_env({}) == frozenset()
