"""`kafkasim load` picks a fresh topic per run unless --topic names one."""

from __future__ import annotations

import pytest

from kafkasim.cli import build_parser
from kafkasim.harness.load import fresh_topic

pytestmark = pytest.mark.unit


def test_each_run_gets_its_own_topic() -> None:
    a, b = fresh_topic(), fresh_topic()
    assert a != b and a.startswith("kafkasim-load-")
    assert build_parser().parse_args(["load", "--bootstrap", "h:1"]).topic is None
    assert build_parser().parse_args(["load", "--bootstrap", "h:1", "--topic", "t"]).topic == "t"
