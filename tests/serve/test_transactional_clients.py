"""confluent-kafka's transactional producer against `kafkasim serve` over real sockets:
init_transactions, begin, produce, send_offsets_to_transaction, commit must complete (not hang),
and Kafka's own DumpLogSegments reads the `__transaction_state` segment kafkasim wrote."""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.serve.conftest import ServedBroker

pytestmark = pytest.mark.real
REALKAFKA = "/work/shared/tools/realkafka"


def _producer(bootstrap: str, txn_id: str) -> object:
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "transaction.timeout.ms": 60000})


def _offsets_transaction(bootstrap: str, produce: bool) -> None:
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("txn", 1, 1)])["txn"].result(30)
    p = _producer(bootstrap, "txn-client")
    p.init_transactions(30)  # type: ignore[attr-defined]
    p.begin_transaction()  # type: ignore[attr-defined]
    if produce:
        p.produce("txn", b"v", b"k")  # type: ignore[attr-defined]
    group = Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-group"})
    # Find the group's coordinator first, as a member of a group always has: on a broker whose
    # __consumer_offsets does not exist yet, librdkafka 2.16 gives up send_offsets_to_transaction's
    # own coordinator lookup after two retries (COORDINATOR_NOT_AVAILABLE while the topic is being
    # created) and then hangs past its timeout — against real Kafka 3.9.1 exactly as against kafkasim.
    group.committed([TopicPartition("txn", 0)], timeout=30)
    p.send_offsets_to_transaction(  # type: ignore[attr-defined]
        [TopicPartition("txn", 0, 5)], group.consumer_group_metadata(), 30)
    p.commit_transaction(30)  # type: ignore[attr-defined]
    group.close()


def _completes(bootstrap: str, produce: bool, within_s: float = 120) -> None:
    """Run the transaction in a thread: a client that hangs fails the test instead of the run."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            _offsets_transaction(bootstrap, produce)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(within_s)
    assert not t.is_alive(), f"the transactional producer hung for {within_s} s"
    assert errors == []


def test_transaction_with_records_and_offsets_commits(broker: ServedBroker) -> None:
    _completes(broker.bootstrap, produce=True)


def test_offsets_only_transaction_commits_and_kafka_reads_the_transaction_log(broker: ServedBroker) -> None:
    from confluent_kafka import Consumer, TopicPartition

    _completes(broker.bootstrap, produce=False)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "txn-group", "isolation.level": "read_committed"})
    committed = c.committed([TopicPartition("txn", 0)], timeout=30)
    c.close()
    assert committed[0].offset == 5
    if shutil.which(REALKAFKA) is None and not Path(REALKAFKA).exists():
        pytest.fail("realkafka (Kafka's DumpLogSegments) is not installed")
    segments = sorted(Path(broker.log_dir).glob("__transaction_state-*/00000000000000000000.log"))
    written = [s for s in segments if s.stat().st_size > 0]
    assert len(written) == 1
    # CompleteCommit is appended after the markers, which EndTxn's answer does not wait for:
    # dump again until it is there (or the deadline), then compare the whole sequence.
    deadline = time.monotonic() + 60
    while True:
        out = subprocess.run([REALKAFKA, "dump-log", str(written[0]), "--transaction-log-decoder",
                              "--deep-iteration", "--print-data-log"], capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        states = [line.split("state=")[1].split(",")[0] for line in out.stdout.splitlines() if "state=" in line]
        if "CompleteCommit" in states or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert states == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit"], out.stdout
    assert "transaction_metadata::transactionalId=txn-client" in out.stdout
