"""The liveness phase (kafkasim/harness/heal.py, liveness.py): a healthy run converges and passes;
a stuck state after the heal (a broker left paused, a record that is not there, a broker left
down) is a `liveness` violation naming what did not converge; the phase heals what the faults
left behind; records an expected loss already reported are not asked for; the phase's probe
leaves the workload's history alone; `[heal] liveness = false` needs a reason."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kafkasim.harness import heal
from kafkasim.harness.checkers import Anomaly, CheckResult
from kafkasim.harness.liveness import Required
from kafkasim.harness.runner import run_scenario
from kafkasim.harness.scenario import ScenarioError, scenario_from_text
from kafkasim.harness.workload import History, Send

pytestmark = pytest.mark.sim

BASE = """
[scenario]
name = "live"
duration_ms = 120000
[cluster]
brokers = 3
[cluster.config]
"replica.lag.time.max.ms" = 3000
[[topics]]
name = "events"
partitions = 2
replication_factor = 3
[workload.producer]
messages = 200
rate_per_s = 100
[workload.consumer]
fetch_max_wait_ms = 100
"""


def _run(tmp_path: Path, extra: str = "", seed: int = 1) -> dict[str, Any]:
    s = scenario_from_text(str(tmp_path / "live.toml"), BASE + extra + "\n[heal]\nliveness_ms = 15000\n")
    return run_scenario(s, seed, str(tmp_path / "run")).run


def _stuck(run: dict[str, Any]) -> list[dict[str, Any]]:
    [anomaly] = [a for a in run["anomalies"] if a["kind"] == "liveness"]
    return list(anomaly["detail"]["stuck"])


def test_a_healthy_run_converges_and_passes(tmp_path: Path) -> None:
    run = _run(tmp_path)
    phase = run["liveness_phase"]
    assert run["verdict"] == "pass" and phase["converged"] and phase["required_records"] == run["stats"]["acked"]
    assert phase["required_records"] > 0
    assert run["stats"]["produced"] == 200, "the probe's records are not in the workload's history"


def test_a_group_scenario_converges_with_the_probe_member_owning_every_partition(tmp_path: Path) -> None:
    run = _run(tmp_path, 'group = "g"\n')  # appended to [workload.consumer]
    assert run["liveness_phase"]["groups"] == ["g"] and run["liveness_phase"]["converged"], run["anomalies"]
    assert run["verdict"] == "pass"


def test_a_broker_left_paused_after_the_heal_is_an_isr_that_never_fills(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    healed = heal.heal_all

    def leave_one_paused(world: Any, cluster: Any, faults: Any) -> dict[str, list[str]]:
        done = healed(world, cluster, faults)
        world.nodes["broker-1"].pause()  # the stuck state: as if the heal forgot it
        return done

    monkeypatch.setattr(heal, "heal_all", leave_one_paused)
    run = _run(tmp_path)
    assert run["verdict"] == "fail" and not run["liveness_phase"]["converged"]
    isr = [p for p in _stuck(run) if p["what"] == "isr"]
    assert {p["partition"] for p in isr} == {"events-0", "events-1"} and all(p["missing"] == [1] for p in isr)


def test_an_acknowledged_record_that_is_not_there_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = heal.required_records

    def plus_a_phantom(*args: Any) -> tuple[list[Required], int]:
        records, excused = real(*args)
        return records + [Required("events", 0, 1, "producer-9-9")], excused  # offset 1 holds another

    monkeypatch.setattr(heal, "required_records", plus_a_phantom)
    run = _run(tmp_path)
    [record] = [p for p in _stuck(run) if p["what"] == "record"]
    assert record["partition"] == "events-0" and record["offset"] == 1 and record["value"] == "producer-9-9"
    assert record["found"] and record["found"].startswith("producer-0-")


def test_the_heal_restarts_a_broker_a_fault_left_down_and_resumes_a_paused_one(tmp_path: Path) -> None:
    run = _run(tmp_path, """
[[faults]]
at_ms = 1500
kind = "crash"
targets = ["broker-2"]
[[faults]]
at_ms = 1600
kind = "pause"
targets = ["broker-1"]
duration_ms = 200000
""")
    phase = run["liveness_phase"]
    assert phase["healed"]["restarted"] == ["broker-2"] and phase["healed"]["resumed"] == ["broker-1"]
    assert phase["converged"] and run["verdict"] == "pass", run["anomalies"]


def test_a_broker_that_stays_down_is_reported_with_its_partitions(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    healed = heal.heal_all

    def kill_one(world: Any, cluster: Any, faults: Any) -> dict[str, list[str]]:
        done = healed(world, cluster, faults)
        world.nodes["broker-0"].crash("power")
        return done

    monkeypatch.setattr(heal, "heal_all", kill_one)
    stuck = _stuck(_run(tmp_path))
    assert any(p["what"] == "isr" and 0 in p["missing"] for p in stuck), stuck


def test_records_an_expected_loss_already_reported_are_not_asked_for_again() -> None:
    h = History(sends=[Send("producer-0", "producer-0-0", None, 0.0, 1.0, True, 0, 0),
                       Send("producer-0", "producer-0-1", None, 0.0, 1.0, True, 0, 1),
                       Send("producer-0", "producer-0-2", None, 0.0, 1.0, False, -1, -1),
                       Send("producer-0", "producer-0-3", None, 0.0, 9.0, True, 0, 2)])
    lost = [CheckResult("lost-write", [Anomaly("lost-write", {"value": "producer-0-1"})])]
    values = [r.value for r in heal.required_records(h, "t", lost, [])[0]]
    assert values == ["producer-0-0", "producer-0-1", "producer-0-3"], "no loss expected: every acked record"
    records, excused = heal.required_records(h, "t", lost, ["lost-write"])
    assert [r.value for r in records] == ["producer-0-0", "producer-0-3"] and excused == 1
    # Acked loss expected: what was acked before the last fault was over may be gone, not after.
    records, excused = heal.required_records(h, "t", lost, ["lost-write"], last_fault_ms=5.0)
    assert [r.value for r in records] == ["producer-0-3"] and excused == 2


def test_a_record_in_a_hole_a_flipped_base_offset_left_is_excused_only_where_corruption_is_expected() -> None:
    """bit-rot seed 92: a follower took a batch whose base offset a read-side flip had moved 2**58
    up, truncated to the leader's end (416) and so skipped offset 415 for good; it led after the
    leader's crash, and the record acknowledged at 415 was gone — as in Kafka."""
    h = History(sends=[Send("producer-0", "producer-0-0", None, 0.0, 1.0, True, 2, 414),
                       Send("producer-0", "producer-0-1", None, 0.0, 1.0, True, 2, 415),
                       Send("producer-0", "producer-0-2", None, 0.0, 1.0, True, 1, 415)])
    holes = {("t", 2, 415)}
    records, excused = heal.required_records(h, "t", [], ["corrupt-offset-propagated"], holes=holes)
    assert [r.value for r in records] == ["producer-0-0", "producer-0-2"] and excused == 1
    records, excused = heal.required_records(h, "t", [], [], holes=holes)
    assert len(records) == 3 and excused == 0, "without corruption expected, the probe asks for every record"


def test_a_hole_spans_the_whole_batch_the_leader_lacks() -> None:
    """bit-rot seed 125: the replica check found the batch 433-436 on a replica and nothing there on
    the leader (corrupt-offset-propagated); all four records are in the hole, not only the first."""
    h = History(sends=[Send("producer-0", f"producer-0-{o}", None, 0.0, 1.0, True, 0, o) for o in range(432, 438)])
    flipped = [CheckResult("replica-divergence", [Anomaly("corrupt-offset-propagated", {
        "topic": "t", "partition": 0, "offset": 433, "leader_batch": None, "replica_batch": [433, 436, 0, 1]})])]
    records, excused = heal.required_records(h, "t", flipped, ["corrupt-offset-propagated"], holes={("t", 0, 433)})
    assert [r.offset for r in records] == [432, 437] and excused == 4
    same_batch_on_leader = [CheckResult("replica-divergence", [Anomaly("corrupt-offset-propagated", {
        "topic": "t", "partition": 0, "offset": 433, "leader_batch": [433, 436, 0, 2],
        "replica_batch": [433, 436, 0, 1]})])]
    records, _ = heal.required_records(h, "t", same_batch_on_leader, ["corrupt-offset-propagated"])
    assert len(records) == 6, "a batch the leader holds (one offset bit away) is no hole"


def test_turning_the_phase_off_needs_a_reason(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="heal.reason"):
        scenario_from_text("x.toml", BASE + "[heal]\nliveness = false\n")
    s = scenario_from_text("x.toml", BASE + "[heal]\nliveness = false\nreason = \"disk full forever\"\n")
    run = run_scenario(s, 1, str(tmp_path / "run")).run
    assert run["liveness_phase"] == {"skipped": "disk full forever"} and run["verdict"] == "pass"


REGRESSIONS = Path(__file__).resolve().parents[2] / "scenarios" / "regressions"


def test_a_follower_stalled_by_a_flipped_epoch_is_named_and_the_rest_must_still_converge(tmp_path: Path) -> None:
    """bit-rot seed 24: a leader epoch bit flipped on broker-1's disk (8192 for 0) reached
    broker-0's epoch cache; the leader answers its fetches OFFSET_OUT_OF_RANGE for good (as Kafka
    3.9's readRecords does), so events-0's ISR never regains it. That is leader-epoch-flip-stall,
    with the epochs that prove it; expected in this scenario, and a liveness failure without the
    expectation."""
    path = REGRESSIONS / "bit-rot-seed-24.toml"
    text = path.read_text()
    run = run_scenario(scenario_from_text(str(path), text), 24, str(tmp_path / "a")).run
    [stall] = [a for a in run["anomalies"] if a["kind"] == "leader-epoch-flip-stall"]
    assert stall["expected"] and stall["detail"]["partition"] == "events-0"
    [(replica)] = stall["detail"]["stalled"]
    assert replica["replica_latest_epoch"] > replica["leader_latest_epoch"] and replica["replica"] == 0
    assert run["verdict"] == "pass" and not [a for a in run["anomalies"] if a["kind"] == "liveness"]
    unexpected = text.replace('"leader-epoch-flip-stall"', '"liveness"')  # same run, the stall not expected
    again = run_scenario(scenario_from_text(str(path), unexpected), 24, str(tmp_path / "b")).run
    assert again["verdict"] == "fail" and again["trace_hash"] == run["trace_hash"]


def _cluster_whose_fetchers_failed(failed: dict[int, set[tuple[str, int]]]) -> Any:
    """A stand-in SimCluster: broker N is `broker-N`, its fetcher marked `failed[N]` failed."""
    def rm(name: str) -> Any:
        bid = int(name.rpartition("-")[2])
        marked = {tp: {"leader": 0, "first_offset": 350, "log_end_offset": 353} for tp in failed.get(bid, set())}
        return SimpleNamespace(fetcher_manager=SimpleNamespace(failed_partitions=marked))

    servers = [(f"broker-{b}", SimpleNamespace(config=SimpleNamespace(broker_id=b))) for b in range(3)]
    return SimpleNamespace(live_servers=lambda: servers, replica_manager=rm)


def test_a_replica_its_fetcher_marked_failed_is_named_and_any_other_stuck_replica_is_not() -> None:
    """power-loss-default-flush-swarm: a follower whose fetched batch started below its log end
    stops fetching the partition (Kafka's markPartitionFailed) and stays out of the ISR:
    unexpected-append-stall, with what the fetcher saw. A stuck ISR with one more missing
    replica the fetcher did not fail, or any other problem, stays for the liveness check."""
    cluster = _cluster_whose_fetchers_failed({2: {("events", 0), ("events", 1)}})
    problems = [{"what": "isr", "partition": "events-0", "replicas": [0, 1, 2], "isr": [0, 1], "missing": [2]},
                {"what": "isr", "partition": "events-1", "replicas": [0, 1, 2], "isr": [0], "missing": [1, 2]},
                {"what": "isr", "partition": "events-2", "replicas": [0, 1, 2], "isr": [0, 1], "missing": [2]},
                {"what": "produce", "partition": "events-0", "error": "timeout"}]
    named, rest = heal.split_unexpected_append_stalls(cluster, problems)
    [stall] = named
    assert stall.kind == "unexpected-append-stall" and stall.detail["partition"] == "events-0"
    assert stall.detail["failed"] == [{"replica": 2, "leader": 0, "first_offset": 350, "log_end_offset": 353}]
    assert [p["partition"] for p in rest] == ["events-1", "events-2", "events-0"]


def test_without_a_power_loss_only_a_partition_with_flipped_bits_has_an_unexpected_append_stall() -> None:
    """bit-rot seeds 116 (before the replica fetcher's fetch sessions) and 1030 (BUGGIFY): a flipped
    base offset that recovery kept leaves a follower's log end inside a leader batch, and its
    fetcher fails the partition as after a power loss. Without a power loss that is named only on
    a partition whose log a disk flipped bits in; the same stuck replica elsewhere stays a
    liveness problem."""
    cluster = _cluster_whose_fetchers_failed({2: {("events", 0), ("events", 1)}})
    problems = [{"what": "isr", "partition": "events-0", "replicas": [0, 1, 2], "isr": [0, 1], "missing": [2]},
                {"what": "isr", "partition": "events-1", "replicas": [0, 1, 2], "isr": [0, 1], "missing": [2]}]
    named, rest = heal.split_unexpected_append_stalls(cluster, problems, False, {("events", 1)})
    assert [a.detail["partition"] for a in named] == ["events-1"]
    assert [p["partition"] for p in rest] == ["events-0"]
    named, rest = heal.split_unexpected_append_stalls(cluster, problems, False, set())
    assert named == [] and len(rest) == 2


def test_a_flipped_base_offset_recovery_kept_stalls_its_follower_and_bit_rot_expects_it(tmp_path: Path) -> None:
    """The regression run of bit-rot seed 1030 (seed 116's state, which seed 116 itself no longer
    reaches since the replica fetcher keeps fetch sessions; this pins one schedule, so a change
    that moves it needs a new seed: scan bit-rot --buggify for unexpected-append-stall): a bit
    rotted at rest moved broker-1's batch 125 of events-0 to 127, recovery kept it, and the
    leader's batch from 127 is refused. The stall is named and expected, the run passes; the
    same run with the stall unexpected fails, with the same trace."""
    detail = _expected_stall_that_fails_unexpected(tmp_path, "bit-rot-seed-1030.toml", 1030,
                                                   ',\n            "unexpected-append-stall"]')
    assert detail["partition"] == "events-0"
    assert detail["failed"] == [{"replica": 1, "leader": 0, "first_offset": 127, "log_end_offset": 128}]


def _expected_stall_that_fails_unexpected(tmp_path: Path, name: str, seed: int, listed: str) -> dict[str, Any]:
    """Run regression `name`: its one unexpected-append-stall is expected and the run passes; the
    same run with `listed` (the stall in the expected list) taken out fails, with the same trace.
    The stall's detail."""
    path = REGRESSIONS / name
    text = path.read_text()
    run = run_scenario(scenario_from_text(str(path), text), seed, str(tmp_path / "a")).run
    [stall] = [a for a in run["anomalies"] if a["kind"] == "unexpected-append-stall"]
    assert stall["expected"] and run["verdict"] == "pass"
    unexpected = text.replace(listed, "]")
    assert unexpected != text
    again = run_scenario(scenario_from_text(str(path), unexpected), seed, str(tmp_path / "b")).run
    assert again["verdict"] == "fail" and again["trace_hash"] == run["trace_hash"]
    return dict(stall["detail"])


def test_a_follower_its_fetcher_failed_is_expected_only_where_the_scenario_says(tmp_path: Path) -> None:
    """power-loss-default-flush-swarm seed 279: leader broker-2 of events-1 loses power, comes back
    with 0-74 and leads epoch 3 again from 75 (epoch reuse); brokers 0 and 2 take its new batch
    from 75, and broker-1, which never truncated to it, leads epoch 4 with the old epoch-3 batches
    to 419. Both followers' fetches at 76 get broker-1's batch from 75, their fetchers mark events-1
    failed (as in Kafka 3.9), the ISR stays [1] below min.insync.replicas 2 and every unresolved
    send (all keyed to events-1) waits for good: the workload does not finish. Named, with what
    each fetcher saw, and expected there; the same run without the expectation fails. (Before the
    broker read topic configs at startup, stop 22, the seed stalled broker-1 on events-2 in the
    liveness phase instead.)"""
    detail = _expected_stall_that_fails_unexpected(tmp_path, "power-loss-default-flush-swarm-seed-279.toml", 279,
                                                   ', "unexpected-append-stall"]')
    assert detail["partition"] == "events-1" and detail["missing"] == [0, 2] and detail["isr"] == [1]
    assert detail["failed"] == [{"replica": 0, "leader": 1, "first_offset": 75, "log_end_offset": 76},
                                {"replica": 2, "leader": 1, "first_offset": 75, "log_end_offset": 76}]
    assert detail["unresolved_sends"] > 0


def _cluster_under_min_isr(isr: dict[int, list[int]], failed: dict[int, set[tuple[str, int]]]) -> Any:
    """A stand-in SimCluster whose broker-0 leads every partition of `events` with ISR `isr[index]`
    (replicas [0, 1, 2], min.insync.replicas 2); broker N's fetcher marked `failed[N]` failed."""
    fetchers = _cluster_whose_fetchers_failed(failed)

    def rm(name: str) -> Any:
        if name != "broker-0":
            return fetchers.replica_manager(name)
        parts = {("events", i): SimpleNamespace(assignment=[0, 1, 2], isr=members, is_under_min_isr=len(members) < 2)
                 for i, members in isr.items()}
        return SimpleNamespace(get_partition=lambda t, i: parts.get((t, i)), fetcher_manager=SimpleNamespace(
            failed_partitions={}))

    return SimpleNamespace(live_servers=fetchers.live_servers, replica_manager=rm, leader_of=lambda t, i: "broker-0")


def _unresolved(*keys: str | None) -> History:
    history = History()
    history.sends = [Send("producer-0", f"producer-0-{n}", key, 0.0) for n, key in enumerate(keys)]
    history.sends.append(Send("producer-0", "producer-0-acked", "k1", 0.0, 1.0, True, 0, 0))
    return history


def test_a_workload_stuck_only_on_partitions_its_fetchers_failed_is_named_and_nothing_else_is() -> None:
    """power-loss-default-flush-swarm seed 8355 (and 279): both followers of a partition failed it
    after an unexpected append, the ISR stays below min.insync.replicas and acks=all sends to it
    wait for good, so the workload cannot finish (in Kafka 3.9 too): unexpected-append-stall per
    such partition, with its unresolved sends. An unresolved send to a partition that takes writes,
    one whose missing follower was not failed, or an unkeyed one keeps it a liveness failure."""
    from kafkasim.client.producer import partition_for_key
    keys = {i: [k for k in (f"k{n}" for n in range(40)) if partition_for_key(k.encode(), 3) == i] for i in range(3)}
    stuck = _cluster_under_min_isr({0: [0, 1, 2], 1: [0], 2: [0, 1, 2]}, {1: {("events", 1)}, 2: {("events", 1)}})
    [stall] = heal.unfinished_workload_stalls(stuck, _unresolved(*keys[1][:3]), "events", 3, True, set())
    assert stall.kind == "unexpected-append-stall" and stall.detail["partition"] == "events-1"
    assert stall.detail["unresolved_sends"] == 3 and [f["replica"] for f in stall.detail["failed"]] == [1, 2]
    assert heal.unfinished_workload_stalls(stuck, _unresolved(keys[1][0], keys[0][0]), "events", 3, True, set()) == []
    assert heal.unfinished_workload_stalls(stuck, _unresolved(keys[1][0], None), "events", 3, True, set()) == []
    assert heal.unfinished_workload_stalls(stuck, _unresolved(keys[1][0]), "events", 3, False, set()) == []
    one_failed = _cluster_under_min_isr({1: [0]}, {2: {("events", 1)}})
    assert heal.unfinished_workload_stalls(one_failed, _unresolved(keys[1][0]), "events", 3, True, set()) == []
