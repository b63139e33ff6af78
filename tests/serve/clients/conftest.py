"""One `kafkasim serve` for the whole client matrix (tests use distinct topics and groups)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from tests.serve.conftest import ServedBroker


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedBroker]:
    # Kafka's 3 s initial rebalance delay would dominate the group scenarios; everything else is
    # the broker's default
    b = ServedBroker(Path(tmp_path_factory.mktemp("client-matrix")) / "logs",
                     configs={"group.initial.rebalance.delay.ms": 300})
    yield b
    out = b.stop()
    assert b.task_errors() == [], f"the broker hit unhandled errors:\n{out[-3000:]}"
