"""One `kafkasim serve` for the whole client matrix (tests use distinct topics and groups).

`KAFKASIM_CLIENTS_BOOTSTRAP=HOST:PORT` points the matrix at a broker that is already running
instead — real Kafka (`/work/shared/tools/realkafka up DIR`), to check that a test is right: the
same test must pass against both."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.serve.conftest import ServedBroker


class ExternalBroker:
    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    external = os.environ.get("KAFKASIM_CLIENTS_BOOTSTRAP")
    if external:
        yield ExternalBroker(external)
        return
    # Kafka's 3 s initial rebalance delay would dominate the group scenarios; everything else is
    # the broker's default
    b = ServedBroker(Path(tmp_path_factory.mktemp("client-matrix")) / "logs",
                     configs={"group.initial.rebalance.delay.ms": 300})
    yield b
    out = b.stop()
    assert b.task_errors() == [], f"the broker hit unhandled errors:\n{out[-3000:]}"
