"""kafka-python's own integration tests (sdist 3.0.12) against `kafkasim serve`, through
real/kafka-python-suite/run.py (issue 4). Every test must pass except the ones in EXPECTED_FAILURES,
each of which names the kafkasim feature it is missing; when one of those starts passing this test
fails too, so the list only ever shrinks. Tests that cannot apply at all (SASL/SSL brokers of their
own, ACLs) are deselected by run.py and listed in real/kafka-python-suite/README.md."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.real

SUITE = Path(__file__).resolve().parents[2] / "real" / "kafka-python-suite"

# "module::test" -> the missing kafkasim feature (kafka-python's error in brackets).
EXPECTED_FAILURES: dict[str, str] = {}

# 55 tests run today (50 pass, 5 skipped by the suite's own version gates).
MIN_TESTS = 45


def _runner():  # real/kafka-python-suite/run.py as a module (its directory name has a dash)
    spec = importlib.util.spec_from_file_location("kafka_python_suite_run", SUITE / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_kafka_python_integration_suite(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    proc = subprocess.run([sys.executable, str(SUITE / "run.py"), "--junitxml", str(junit)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=420)
    tail = "\n".join(proc.stdout.splitlines()[-40:])
    assert junit.exists(), f"the suite did not run (exit {proc.returncode}):\n{tail}"
    res, details = _runner().summarize(junit)
    total = len(res["passed"]) + len(res["failed"]) + len(res["skipped"])
    assert total >= MIN_TESTS, f"only {total} tests ran:\n{tail}"

    unexpected = sorted(set(res["failed"]) - set(EXPECTED_FAILURES))
    now_passing = sorted(set(EXPECTED_FAILURES) & set(res["passed"]))
    not_failing = sorted(set(EXPECTED_FAILURES) - set(res["failed"]) - set(now_passing))
    assert not unexpected, "unexpected failures:\n" + "\n".join(f"{n}: {details[n]}" for n in unexpected) \
        + f"\n{tail}"
    assert not now_passing, f"allow-listed tests now pass, remove them from EXPECTED_FAILURES: {now_passing}"
    assert not not_failing, f"allow-listed tests did not run (skipped or gone): {not_failing}"
    assert "BROKER TASK ERROR" not in proc.stdout, f"the broker hit unhandled errors:\n{tail}"
