"""The [workload] keys of a scenario: groups, churn, commit modes, idempotence, key and value
distributions — parsed, and refused with a message naming the key (tests/harness/test_shrink.py checks that shrink writes them back)."""

from __future__ import annotations

import pytest

from kafkasim.harness.scenario import ProducerSpec, ScenarioError, parse_scenario
from kafkasim.harness.workload import KeyChooser, value_size
from kafkasim.runtime.rng import SeededRng

pytestmark = pytest.mark.sim


def _raw(producer: dict | None = None, consumer: dict | None = None) -> dict:
    return {"scenario": {"name": "x"}, "topics": [{"name": "t"}],
            "workload": {"producer": producer or {}, "consumer": consumer or {}}}


@pytest.mark.parametrize("producer,consumer,key", [
    ({"idempotence": True, "acks": 1}, {}, "workload.producer.acks"),
    ({"key_distribution": "pareto", "key_space": 5}, {}, "workload.producer.key_distribution"),
    ({"key_distribution": "zipf"}, {}, "workload.producer.key_space"),
    ({"value_bytes": [50, 10]}, {}, "workload.producer.value_bytes"),
    ({}, {"commit": "after-poll"}, "workload.consumer.commit"),          # no group
    ({}, {"group": "g", "commit": "sometimes"}, "workload.consumer.commit"),
    ({}, {"group": "g", "churn": ["join", "explode"]}, "workload.consumer.churn"),
    ({}, {"group": "g", "churn_interval_ms": 500}, "workload.consumer.churn_until_ms"),
])
def test_bad_workload_keys_name_the_key(producer: dict, consumer: dict, key: str) -> None:
    with pytest.raises(ScenarioError, match=f"x.toml: key '{key}'"):
        parse_scenario("x.toml", _raw(producer, consumer))


def test_zipf_keys_favour_the_first_keys_and_sizes_stay_in_range() -> None:
    spec = ProducerSpec(key_space=20, key_distribution="zipf", value_bytes=10, value_bytes_max=30)
    rng = SeededRng(7, "keys")
    keys = KeyChooser(spec, rng)
    counts: dict[str, int] = {}
    for _ in range(4000):
        k = keys.next()
        assert k is not None
        counts[k] = counts.get(k, 0) + 1
    # weight 1/(i+1) over 20 keys: k0 ~ 28 %, k19 ~ 1.4 %
    assert counts["k0"] > 5 * counts.get("k19", 0) and set(counts) <= {f"k{i}" for i in range(20)}
    sizes = {value_size(spec, rng) for _ in range(500)}
    assert min(sizes) >= 10 and max(sizes) <= 30 and len(sizes) > 10
