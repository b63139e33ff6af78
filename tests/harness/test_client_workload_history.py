"""client_history.py and client_eos.py: driver replies turned into the checkers' history, and the
checkers then catching what they must (a rewind below an acknowledged commit, a lost acked write,
exactly-once broken)."""

from __future__ import annotations

import pytest

from kafkasim.harness.checkers import check_all, check_committed_regression
from kafkasim.harness.client_eos import PipelineLog, eos_checks, record_transform
from kafkasim.harness.client_history import MemberTrack, record_produce, record_reads, value_names
from kafkasim.harness.client_workload import fault_specs
from kafkasim.harness.scenario import ScenarioError, load_scenario, scenario_from_text
from kafkasim.harness.workload import History

pytestmark = pytest.mark.unit


def test_acked_values_get_their_offsets_and_the_rest_stay_unresolved() -> None:
    h = History()
    reply = {"op": "produced", "acked": [[0, 10, "p.0-0"], [0, 11, "p.0-2"]], "errors": ["timed out"]}
    assert record_produce(h, "producer-0", value_names("p.0", 3), 1.0, 9.0, reply) == 2
    assert [(s.value, s.ok, s.offset) for s in h.sends] == [("p.0-0", True, 10), ("p.0-1", None, -1),
                                                             ("p.0-2", True, 11)]


def test_a_lost_acked_write_is_found_by_the_checkers() -> None:
    h = History()
    record_produce(h, "producer-0", value_names("p", 3), 0, 1, {"op": "produced", "acked": [
        [0, 0, "p-0"], [0, 1, "p-1"], [0, 2, "p-2"]]})
    record_reads(h, "reader", "t", 5, {"op": "consumed", "records": [[0, 0, "p-0"], [0, 2, "p-2"]]})
    lost = {r.name: r.anomalies for r in check_all(h)}["lost-write"]
    assert [a.detail["value"] for a in lost] == ["p-1"]


def test_a_member_resuming_below_an_acknowledged_commit_is_a_regression() -> None:
    h = History()
    m = MemberTrack("g", "consumer-0")
    m.record(h, "t", 0, 10, {"op": "consumed", "assignment": [0], "records": [[0, 0, "a"], [0, 1, "b"]],
                             "committed": [[0, 2]]})
    # an at-least-once re-read from the committed offset: not a regression, a new generation
    m.record(h, "t", 20, 30, {"op": "consumed", "assignment": [0], "records": [[0, 2, "c"]], "committed": [[0, 3]]})
    assert not check_committed_regression(h).anomalies
    m.record(h, "t", 40, 50, {"op": "consumed", "assignment": [0], "records": [[0, 1, "b"]], "committed": []})
    found = check_committed_regression(h).anomalies
    assert len(found) == 1 and found[0].detail["read"]["offset"] == 1 and found[0].detail["acked"]["offset"] == 3
    assert len({p.generation for p in h.polls}) == 2  # the rewind began a new generation
    assert not {r.name: r.anomalies for r in check_all(h)}["nonmonotonic-poll"]


def test_an_error_reply_ends_the_generation() -> None:
    h = History()
    m = MemberTrack("g", "consumer-0")
    m.record(h, "t", 0, 1, {"op": "consumed", "assignment": [0], "records": [[0, 0, "a"]], "committed": []})
    m.record(h, "t", 2, 3, {"op": "error", "error": "CommitFailedError"})
    m.record(h, "t", 4, 5, {"op": "consumed", "assignment": [0], "records": [[0, 5, "f"]], "committed": []})
    assert not {r.name: r.anomalies for r in check_all(h)}["poll-skip"]


def test_exactly_once_checks() -> None:
    log = PipelineLog()
    record_transform(log, {"op": "transformed", "transactions": [[[0, 0, "a"], [0, 1, "b"]], [[1, 0, "c"]]],
                           "aborted": 1, "errors": []})
    log.output = ["a", "b", "c"]
    assert all(not r.anomalies for r in eos_checks(log))
    log.output = ["a", "c", "c"]
    got = {r.name: r.anomalies for r in eos_checks(log)}
    assert [a.detail["value"] for a in got["eos-duplicate"]] == ["c"]
    assert [a.detail["value"] for a in got["eos-missing"]] == ["b"]
    assert got["torn-transaction"][0].detail["visible"] == 1
    assert record_transform(log, {"op": "error", "error": "ProducerFenced"}) == ["ProducerFenced"]


def test_the_workload_client_key() -> None:
    s = load_scenario("scenarios/matrix/broker-paused.toml")
    assert s.client == "" and s.consumer.group == "g"
    specs = fault_specs(s)
    assert specs == [(4000.0, {"kind": "pause", "targets": ["leader:__consumer_offsets-0"], "duration_ms": 10000})]
    text = s.text.replace("[workload.producer]", '[workload]\nclient = "java"\n\n[workload.producer]')
    assert scenario_from_text("x.toml", text).client == "java"
    with pytest.raises(ScenarioError, match="workload.client"):
        scenario_from_text("x.toml", text.replace('"java"', '"jav"'))
    with pytest.raises(ScenarioError, match="workload.clients"):
        scenario_from_text("x.toml", text.replace("client =", "clients ="))


def test_commits_a_driver_cannot_see_answered_are_not_acknowledged() -> None:
    # kcat commits as its one-shot member exits: a rewind below that commit proves nothing
    h = History()
    m = MemberTrack("g", "consumer-0", commits_acknowledged=False)
    m.record(h, "t", 0, 10, {"op": "consumed", "assignment": [0], "records": [[0, 0, "a"], [0, 1, "b"]],
                             "committed": [[0, 2]]})
    m.record(h, "t", 20, 30, {"op": "consumed", "assignment": [0], "records": [[0, 0, "a"]], "committed": []})
    assert h.commits[0].acked is None and h.offset_reads
    assert not check_committed_regression(h).anomalies
