"""Request-level fault kinds in scenarios (one fault model with the control plane): parsed by
the broker's own parser, errors name file and key, and scenarios/request-errors.toml fires every
burst on the brokers its roles resolve to and still passes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kafkasim.harness.runner import run_scenario
from kafkasim.harness.scenario import ScenarioError, load_scenario, parse_scenario

pytestmark = pytest.mark.sim

BASE: dict[str, Any] = {"scenario": {"name": "t"}, "cluster": {"brokers": 3}, "topics": [{"name": "events"}]}
SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "request-errors.toml"


@pytest.mark.parametrize("fault, expected", [
    ({"kind": "request_error", "targets": ["broker-0"], "api_key": "Produce"}, "needs an error_code"),
    ({"kind": "request_error", "targets": ["broker-0"], "api_key": "CreateTopics", "error_code": 7},
     "has no error response"),
    ({"kind": "request_delay", "targets": ["broker-0"], "delay_ms": 0}, "delay_ms > 0"),
    ({"kind": "crash", "targets": ["broker-0"], "api_key": 0}, "only on kinds"),
])
def test_request_fault_errors_name_file_and_key(fault: dict[str, Any], expected: str) -> None:
    with pytest.raises(ScenarioError) as exc:
        parse_scenario("f.toml", dict(BASE, faults=[{"at_ms": 1, **fault}]))
    assert "f.toml: key 'faults[0]" in str(exc.value) and expected in str(exc.value)


def test_request_fault_parses_into_the_fault_and_its_description() -> None:
    s = parse_scenario("f.toml", dict(BASE, faults=[{"at_ms": 1, "kind": "request_error", "targets": ["leader:events-0"],
                                                      "api_key": "Produce", "error_code": 6, "count": 3}]))
    f = s.faults[0]
    assert f.request == {"api_key": "Produce", "error_code": 6, "count": 3}
    assert f.describe()["count"] == 3 and f.describe()["target"] == "leader:events-0"


def test_request_errors_scenario_fires_every_burst_and_passes(tmp_path: Path) -> None:
    run = run_scenario(load_scenario(str(SCENARIO)), 1, str(tmp_path)).run
    assert run["verdict"] == "pass", [c for c in run["checks"] if not c["ok"] and not c["expected"]]
    events = [json.loads(line) for line in (tmp_path / "trace.jsonl").read_text().splitlines()]
    fired: dict[str, int] = {}
    for e in events:
        if e.get("ev") == "request_fault_fired":
            fired[e["fault"].split("@")[0]] = fired.get(e["fault"].split("@")[0], 0) + 1
    assert fired["faults[0]"] == 5 and fired["faults[1]"] == 5      # count = 5 each, exactly
    assert fired["faults[2]"] > 0 and fired["faults[3]"] == 1        # delays while active; one close
