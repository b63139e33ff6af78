"""Differential conformance: every case of the library (library.py) played against real Kafka
3.9.1 and kafkasim, responses compared field by field after normalize.py's normalisations.
A case differs or not exactly as KNOWN_DIFFERENCES.md says (a case that starts matching must leave
the list; a new difference must join it with its reason)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conformance.conftest import Conformance
from tests.conformance.library import KAFKA_VERSIONS, cases

pytestmark = pytest.mark.real

HERE = Path(__file__).resolve().parent
KNOWN = HERE / "KNOWN_DIFFERENCES.md"
CASES = [c.name for c in cases()]


def known_differences() -> dict[str, str]:
    """case name -> the row's text, from the table rows of KNOWN_DIFFERENCES.md."""
    out: dict[str, str] = {}
    for line in KNOWN.read_text().splitlines():
        m = re.match(r"^\|\s*`([^`]+)`\s*\|", line)
        if m:
            assert m.group(1) not in out, f"{m.group(1)} is listed twice"
            out[m.group(1)] = line
    return out


def test_the_library_is_large_and_unique() -> None:
    assert len(CASES) >= 300
    assert len(set(CASES)) == len(CASES)


def test_kafka_advertises_the_table_the_cases_use(conformance: Conformance) -> None:
    assert conformance.real.advertised == KAFKA_VERSIONS


@pytest.mark.parametrize("name", CASES)
def test_case(conformance: Conformance, name: str) -> None:
    diff = conformance.diff(name)
    listed = name in known_differences()
    if listed:
        assert diff, f"{name} now matches Kafka: remove it from KNOWN_DIFFERENCES.md"
    else:
        assert not diff, f"{name} differs from Kafka:\n  " + "\n  ".join(diff[:20])


def test_known_differences_are_exactly_the_differing_cases(conformance: Conformance) -> None:
    listed = set(known_differences())
    differing = conformance.differing()
    assert listed - set(CASES) == set(), "KNOWN_DIFFERENCES.md lists cases the library does not have"
    assert differing - listed == set(), "differences not in KNOWN_DIFFERENCES.md"
    assert listed - differing == set(), "cases that now match Kafka are still listed"


def test_report(conformance: Conformance, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Writes the per-case differences (the first lines of each) for whoever updates the list;
    asserts both sides answered every case."""
    differing = sorted(conformance.differing())
    out = tmp_path_factory.getbasetemp() / "conformance-differences.json"
    out.write_text(json.dumps({n: conformance.diff(n)[:5] for n in differing}, indent=1, default=str))
    print(f"\nconformance: {len(CASES)} cases, {len(CASES) - len(differing)} equal, {len(differing)} differ; "
          f"real {conformance.real.seconds:.1f}s, kafkasim {conformance.sim.seconds:.1f}s; details in {out}")
    assert set(conformance.real.results) == set(conformance.sim.results) == set(CASES)
