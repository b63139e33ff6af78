"""Fetch sessions with a real client: Apache Kafka's Java consumer 3.9.1 fetches in incremental
sessions (KIP-227: one full fetch, then only changes). Against `kafkasim serve`, over a long
run of produce / consume rounds with idle polls between them (incremental fetches that answer
no partition), it reads every acknowledged record exactly once and in order — and the broker's
trace shows it did so in sessions: a handful created, none refused. (A broker that answered
session id 0 would leave the client on full fetches: no session created at all; one that lost
its sessions would show FETCH_SESSION_ID_NOT_FOUND errors and new sessions all along.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.serve.clients.driver import Driver, create_topic, driver_missing
from tests.serve.conftest import ServedBroker

pytestmark = pytest.mark.real

ROUNDS = 12
PER_ROUND = 150
PARTITIONS = 3


def _events(trace: Path, name: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in trace.read_text().splitlines() if f'"{name}"' in line]


def test_java_consumer_reads_everything_over_incremental_fetch_sessions(tmp_path: Path) -> None:
    why = driver_missing("java")
    if why:
        pytest.skip(why)
    broker = ServedBroker(tmp_path / "logs")
    try:
        topic = "sessions"
        create_topic(broker.bootstrap, topic, PARTITIONS)
        acked: list[list[object]] = []
        got: list[list[object]] = []
        with Driver("java", broker.bootstrap, client_id="producer") as producer, \
                Driver("java", broker.bootstrap, client_id="consumer") as consumer:
            for r in range(ROUNDS):
                reply = producer.produce(topic, PER_ROUND, f"r{r}")
                assert reply["errors"] == []
                acked += reply["acked"]
                taken = consumer.consume(topic, max=PER_ROUND, timeout_ms=30000)
                assert not taken.get("errors"), taken.get("errors")
                got += taken["records"]
                idle = consumer.consume(topic, max=1, timeout_ms=1200)   # nothing new: empty incremental answers
                assert idle["records"] == [] and not idle.get("errors")
        assert len(got) == len(acked) == ROUNDS * PER_ROUND
        assert sorted(map(tuple, got)) == sorted(map(tuple, acked))   # every record once
        for p in range(PARTITIONS):
            offsets = [o for q, o, _ in got if q == p]
            assert offsets == list(range(len(offsets)))                 # in order, no gap
        created = [e for e in _events(broker.trace, "fetch_session_created") if e["replica"] == -1]
        errors = _events(broker.trace, "fetch_session_error")
        assert 1 <= len(created) <= 3, created   # the consumer's session(s), not one per fetch
        assert errors == []
    finally:
        out = broker.stop()
    assert broker.task_errors() == [], out[-3000:]
