"""A scenario's [cluster] config and [[topics]] config hold Kafka configs by name: an unknown
name is refused naming it (with the nearest known one), a broker value Kafka would not parse too;
every scenario shipped loads."""

from __future__ import annotations

import glob
from typing import Any

import pytest

from kafkasim.harness.scenario import ScenarioError, load_scenario, parse_scenario

pytestmark = pytest.mark.unit


def _raw(broker: dict[str, Any] | None = None, topic: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"scenario": {"name": "x"}, "cluster": {"config": broker or {}},
            "topics": [{"name": "t", "config": topic or {}}]}


@pytest.mark.parametrize("broker,topic,message", [
    ({"min.insync.replica": 2}, {}, "key 'cluster.config': unknown broker config 'min.insync.replica' "
                                    "(did you mean 'min.insync.replicas'?)"),
    ({}, {"retention.msx": "1"}, "key 'topics[0].config': unknown topic config 'retention.msx' "
                                 "(did you mean 'retention.ms'?)"),
    ({"retention.ms": 1}, {}, "unknown broker config 'retention.ms' (did you mean 'log.retention.ms'?)"),
    ({"num.partitions": "many"}, {}, "Invalid value many for configuration num.partitions"),
])
def test_unknown_config_names_are_refused_with_a_suggestion(broker: dict[str, Any], topic: dict[str, Any],
                                                             message: str) -> None:
    with pytest.raises(ScenarioError) as exc:
        parse_scenario("x.toml", _raw(broker, topic))
    assert str(exc.value).startswith("x.toml: ") and message in str(exc.value)


def test_known_configs_are_kept_as_given() -> None:
    s = parse_scenario("x.toml", _raw({"min.insync.replicas": 2, "unclean.leader.election.enable": True},
                                      {"min.insync.replicas": 2}))
    assert s.broker_config == {"min.insync.replicas": 2, "unclean.leader.election.enable": True}
    assert s.topics[0].config == {"min.insync.replicas": "2"}


@pytest.mark.parametrize("path", sorted(glob.glob("scenarios/*.toml")))
def test_every_shipped_scenario_loads(path: str) -> None:
    load_scenario(path)
