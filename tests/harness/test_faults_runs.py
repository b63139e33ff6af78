"""Each fault kind has an effect a small simulated run can observe in its trace, and the fault
scenarios of the suite do what their comments claim (one seed each)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kafkasim.harness.runner import run_scenario
from kafkasim.harness.scenario import load_scenario, parse_scenario, with_buggify
from tests.harness.epoch_reuse_support import old_epochs_led_again

pytestmark = pytest.mark.sim

SESSION_MS = 3000


def _small(faults: list[dict[str, Any]], brokers: int = 1, **config: Any) -> Any:
    raw: dict[str, Any] = {
        "scenario": {"name": "fault-probe", "duration_ms": 60000},
        "cluster": {"brokers": brokers, "config": {"zookeeper.session.timeout.ms": SESSION_MS, **config}},
        "topics": [{"name": "events", "partitions": 1, "replication_factor": brokers}],
        "workload": {"producer": {"messages": 300, "rate_per_s": 100}, "consumer": {"fetch_max_wait_ms": 100}},
        "faults": faults, "heal": {"liveness_ms": 40000},
    }
    return parse_scenario("probe.toml", raw)


def _events(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]


def _run(scenario: Any, out: Path, seed: int = 1) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    res = run_scenario(scenario, seed, str(out))
    return res.run, _events(out)


def _expiries_after(events: list[dict[str, Any]], t0: float) -> list[dict[str, Any]]:
    return [e for e in events if e["ev"] == "zk_session_expired" and e["node"] == "zookeeper" and e["t"] >= t0]


def test_pause_longer_than_the_session_timeout_expires_the_session_and_shorter_does_not(tmp_path: Path) -> None:
    long_run, long_ev = _run(_small([{"at_ms": 1000, "kind": "pause", "targets": ["broker-0"],
                                      "duration_ms": 2 * SESSION_MS}]), tmp_path / "long")
    short_run, short_ev = _run(_small([{"at_ms": 1000, "kind": "pause", "targets": ["broker-0"],
                                        "duration_ms": SESSION_MS / 3}]), tmp_path / "short")
    for run, ev in ((long_run, long_ev), (short_run, short_ev)):
        assert run["verdict"] == "pass", run["anomalies"][:3]
        assert [e["ev"] for e in ev if e["ev"] in ("node_pause", "node_resume")] == ["node_pause", "node_resume"]
    assert _expiries_after(long_ev, 1000) and not _expiries_after(short_ev, 1000)
    # the broker noticed on resume and re-registered with a new session
    assert any(e["ev"] == "zk_session_expired" and e["node"] == "broker-0" for e in long_ev)
    # nothing the paused broker had to do was lost: the workload completed and was all acked
    assert long_run["stats"]["acked"] == 300


def test_zk_expire_and_isolate_move_the_controller(tmp_path: Path) -> None:
    for kind in ("zk_expire", "isolate"):
        fault = {"at_ms": 2000, "kind": kind, "targets": ["controller"]}
        if kind == "isolate":
            fault["duration_ms"] = 2 * SESSION_MS
        run, ev = _run(_small([fault], brokers=3, **{"min.insync.replicas": 2}), tmp_path / kind)
        assert run["verdict"] == "pass", (kind, run["anomalies"][:3])
        fired = next(e for e in ev if e["ev"] == "fault")
        elected = [e["node"] for e in ev if e["ev"] == "controller_elected" and e["t"] >= fired["t"]]
        assert elected and elected[0] != fired["resolved"], (kind, fired, elected)


def test_disk_knobs_fire_and_clear(tmp_path: Path) -> None:
    slow = _small([{"at_ms": 0, "kind": "disk", "targets": ["broker-0"], "slow_fsync_ms": 300}],
                  **{"log.flush.interval.messages": 1})
    fast = _small([], **{"log.flush.interval.messages": 1})
    slow_run, _ = _run(slow, tmp_path / "slow")
    fast_run, _ = _run(fast, tmp_path / "fast")
    # log.flush.interval.messages=1: every append waits for an fsync, so the produce latency follows the disk
    assert slow_run["stats"]["produce_latency_ms"]["p50"] > 100 > fast_run["stats"]["produce_latency_ms"]["p50"]
    eio = _small([{"at_ms": 1500, "kind": "disk", "targets": ["broker-0"], "eio_rate": 1.0, "duration_ms": 500}])
    run, ev = _run(eio, tmp_path / "eio")
    assert any(e["ev"] == "disk_fault" and e["fault"] == "eio" for e in ev)
    assert any(e["ev"] == "log_dir_offline" for e in ev), "an I/O error takes the log dir offline"
    assert any(e["ev"] == "disk_faults_cleared" for e in ev)


def _scenario_events(name: str, tmp_path: Path, seed: int = 1) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    return _run(load_scenario(f"scenarios/{name}.toml"), tmp_path / name, seed)


def test_slow_follower_leaves_the_isr_and_comes_back(tmp_path: Path) -> None:
    run, ev = _scenario_events("slow-follower", tmp_path)
    assert run["verdict"] == "pass", run["anomalies"][:3]
    clog = next(e for e in ev if e["ev"] == "fault" and e["kind"] == "clog")
    follower = int(clog["resolved"].split("->")[0].split("-")[1])  # "broker-N->broker-M"
    isr = [(e["t"], e["isr"]) for e in ev if e["ev"] == "isr_changed" and e["topic"] == "events"]
    shrink = [t for t, i in isr if t > clog["t"] and follower not in i]
    assert shrink, f"broker {follower} never left the ISR: {isr}"
    assert any(t > shrink[0] and follower in i for t, i in isr), f"broker {follower} never rejoined: {isr}"


def test_bit_rot_is_caught_by_crc(tmp_path: Path) -> None:
    run, ev = _scenario_events("bit-rot", tmp_path)
    assert run["verdict"] == "pass", run["anomalies"][:3]
    flips = [e for e in ev if e["ev"] == "disk_fault" and e["fault"] == "bitflip"]
    caught = [e for e in ev if e["ev"] == "replica_fetch_corrupt" or
              (e["ev"] == "log_recovery" and e.get("reason") == "crc_mismatch")]
    assert flips and caught
    checks = {c["name"]: c for c in run["checks"]}
    assert checks["inconsistent-offsets"]["violations"] == 0 and checks["lost-write"]["violations"] == 0


def test_bit_rot_restarts_broker_1_only_once_the_controller_has_seen_it_go(tmp_path: Path) -> None:
    """Seed 123 with BUGGIFY, when broker-1 came back 1.5 s after its kill: it registered right
    after its old session expired, the new controller handed it back its leader epoch 0 of
    events-0 over the log its recovery had cut at a CRC mismatch (76), and the followers
    truncated 433 -> 77 (epoch reuse). Down past its session, it gets a new epoch's state."""
    run, ev = _run(with_buggify(load_scenario("scenarios/bit-rot.toml")), tmp_path / "bit-rot", 123)
    assert run["verdict"] == "pass", run["anomalies"][:3]
    crash = next(e for e in ev if e["ev"] == "node_crash" and e["node"] == "broker-1")
    before, again = old_epochs_led_again(ev, crash)
    assert before and not again, again[:3]


@pytest.mark.parametrize("seed", [151, 161])
def test_cluster_chaos_brings_the_power_lost_leader_back_after_its_session(tmp_path: Path, seed: int) -> None:
    """Seeds 151 and 161 with BUGGIFY, when the first restart was at 9 s: the power-lost leader
    of events-0, also the controller, registered again right after its session expired and the
    new controller handed it back epoch 0 over its cut log (epoch reuse, acknowledged records
    lost). Back 2 s after its session, it only ever leads new epochs."""
    run, ev = _run(with_buggify(load_scenario("scenarios/cluster-chaos.toml")), tmp_path / "cluster-chaos", seed)
    assert run["verdict"] == "pass", run["anomalies"][:3]
    for crash in (e for e in ev if e["ev"] == "node_crash" and e["mode"] == "power"):
        before, again = old_epochs_led_again(ev, crash)
        assert not again, again[:3]


def test_unclean_election_loses_acknowledged_writes_as_expected(tmp_path: Path) -> None:
    run, ev = _scenario_events("unclean-election", tmp_path)
    assert run["verdict"] == "pass"
    assert any(e["ev"] == "partition_leader_elected" and e["unclean"] for e in ev)
    lost = next(c for c in run["checks"] if c["name"] == "lost-write")
    assert lost["violations"] > 0 and lost["expected"]
    assert any(a["kind"] == "lost-write" and a["expected"] for a in run["anomalies"])
