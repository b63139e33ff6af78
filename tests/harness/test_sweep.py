"""`kafkasim sweep` refuses a scenario whose workload is a third-party client (it runs live, with
`kafkasim run` or `kafkasim matrix`): a clear message and exit 2, before any run starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kafkasim.harness.scenario import ScenarioError
from kafkasim.harness.sweep import sweep

pytestmark = pytest.mark.unit

_CLIENT_SCENARIO = """
[scenario]
name = "client-row"
duration_ms = 5000
[cluster]
brokers = 1
[[topics]]
name = "t"
[workload]
client = "kafka-python"
[workload.producer]
messages = 10
"""


def test_sweep_refuses_a_client_scenario_naming_it(tmp_path: Path) -> None:
    (tmp_path / "a-plain.toml").write_text(_CLIENT_SCENARIO.replace('client = "kafka-python"\n', "")
                                           .replace("client-row", "plain"))
    (tmp_path / "b-client.toml").write_text(_CLIENT_SCENARIO)
    out = tmp_path / "out"
    with pytest.raises(ScenarioError, match=r"b-client\.toml: \[workload\] client = 'kafka-python'.*kafkasim run"):
        sweep(str(tmp_path), [1], 1, str(out), None)
    assert not (out / "runs").exists()   # refused before the plain scenario ran too


def test_sweep_cli_exits_2_with_the_message_and_no_traceback(tmp_path: Path) -> None:
    scenario = tmp_path / "client.toml"
    scenario.write_text(_CLIENT_SCENARIO)
    p = subprocess.run([sys.executable, "-m", "kafkasim.cli", "sweep", str(scenario), "--seeds", "1", "--jobs", "1",
                        "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=300)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "kafkasim matrix" in p.stderr and "not `kafkasim sweep`" in p.stderr
    assert "Traceback" not in p.stderr + p.stdout
