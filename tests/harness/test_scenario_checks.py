"""A scenario that would silently test something else is refused before anything runs, with
the file, the key, why, and the name it probably meant."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kafkasim.harness.scenario import ScenarioError, parse_scenario

pytestmark = pytest.mark.unit


def base() -> dict[str, Any]:
    return {
        "scenario": {"name": "s"},
        "cluster": {"brokers": 3},
        "topics": [{"name": "events", "partitions": 2, "replication_factor": 3},
                   {"name": "single", "partitions": 1, "replication_factor": 1}],
        "workload": {"producer": {"count": 2}, "consumer": {"count": 1}},
    }


def with_fault(**fault: Any) -> dict[str, Any]:
    raw = base()
    raw["faults"] = [{"at_ms": 1000, "kind": "crash", **fault}]
    return raw


def refused(raw: dict[str, Any]) -> str:
    with pytest.raises(ScenarioError) as err:
        parse_scenario("s.toml", raw)
    msg = str(err.value)
    assert msg.startswith("s.toml: key '")
    return msg


def test_the_base_scenario_is_accepted() -> None:
    parse_scenario("s.toml", with_fault(targets=["leader:events-1", "follower:events-0", "controller", "broker-2",
                                                 "producer-1", "consumer-0"]))


def test_unknown_topic_in_a_role_target() -> None:
    msg = refused(with_fault(targets=["leader:evnts-0"]))
    assert "faults[0].targets" in msg and "unknown topic 'evnts'" in msg and "did you mean 'events'" in msg


def test_partition_beyond_the_topic() -> None:
    msg = refused(with_fault(targets=["leader:events-2"]))
    assert "partitions 0-1, not 2" in msg


def test_a_role_without_a_partition() -> None:
    assert "expected leader:<topic>-<partition>" in refused(with_fault(targets=["leader:events"]))


def test_follower_of_an_unreplicated_topic_can_never_resolve() -> None:
    msg = refused(with_fault(targets=["follower:single-0"]))
    assert "can never resolve" in msg and "replication factor 1" in msg


def test_offsets_topic_needs_a_group() -> None:
    msg = refused(with_fault(targets=["leader:__consumer_offsets-0"]))
    assert "only with a [workload.consumer] group" in msg
    raw = with_fault(targets=["leader:__consumer_offsets-0"])
    raw["workload"]["consumer"]["group"] = "g"
    raw["cluster"]["config"] = {"offsets.topic.num.partitions": 1}
    parse_scenario("s.toml", raw)
    raw["faults"][0]["targets"] = ["leader:__consumer_offsets-1"]
    assert "partitions 0-0, not 1" in refused(raw)


def test_unknown_node_with_a_suggestion() -> None:
    msg = refused(with_fault(targets=["brokr-1"]))
    assert "unknown node 'brokr-1'" in msg and "did you mean 'broker-1'" in msg
    assert "unknown node 'broker-3'" in refused(with_fault(targets=["broker-3"]))


def test_unknown_node_in_sides_and_one_way_cuts() -> None:
    raw = base()
    raw["faults"] = [{"at_ms": 1, "kind": "partition", "sides": [["broker-0"], ["producer-9"]]}]
    assert "faults[0].sides" in refused(raw) and "producer-9" in refused(raw)
    raw["faults"] = [{"at_ms": 1, "kind": "block", "from": "leader:events-0", "to": "zookeepr"}]
    msg = refused(raw)
    assert "faults[0].to" in msg and "did you mean 'zookeeper'" in msg


def test_the_key_names_the_fault_as_written_not_as_sorted() -> None:
    raw = base()
    raw["faults"] = [{"at_ms": 9000, "kind": "crash", "targets": ["broker-0"]},
                     {"at_ms": 1000, "kind": "crash", "targets": ["leader:nope-0"]}]
    assert "faults[1].targets" in refused(raw)


def test_a_nemesis_pool_is_checked_whatever_the_seed_draws() -> None:
    raw = base()
    raw["nemesis"] = [{"kind": "crash", "targets": ["broker-0", "leader:evts-0"], "until_ms": 9000,
                       "interval_ms": 1000, "duration_ms": 500}]
    msg = refused(raw)
    assert "nemesis[0].targets" in msg and "did you mean 'events'" in msg


def test_zookeeper_is_no_process_to_crash() -> None:
    assert "cannot target 'zookeeper'" in refused(with_fault(targets=["zookeeper"]))


def test_replication_factor_above_the_broker_count() -> None:
    raw = base()
    raw["cluster"]["brokers"] = 1
    msg = refused(raw)
    assert "topics[0].replication_factor" in msg and "[cluster] brokers = 1" in msg


@pytest.mark.parametrize("where,name,hint", [
    ("cluster", "num.partitons", "num.partitions"),
    ("topic", "min.insync.replica", "min.insync.replicas"),
])
def test_unknown_config_keys(where: str, name: str, hint: str) -> None:
    raw = copy.deepcopy(base())
    if where == "cluster":
        raw["cluster"]["config"] = {name: 3}
    else:
        raw["topics"][0]["config"] = {name: 2}
    msg = refused(raw)
    assert f"unknown {'broker' if where == 'cluster' else 'topic'} config '{name}'" in msg
    assert f"did you mean '{hint}'" in msg


def test_a_topic_config_value_of_the_wrong_type() -> None:
    raw = base()
    raw["topics"][0]["config"] = {"min.insync.replicas": "two"}
    assert "min.insync.replicas" in refused(raw)
