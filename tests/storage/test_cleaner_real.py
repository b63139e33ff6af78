"""Compaction's transaction rules against real Kafka 3.9.1: the same transactional workload on a
compacted topic (a committed transaction whose record a later write supersedes, an aborted one,
a committed one left as is) played on a real Kafka broker and on `kafkasim serve`, then filler
writes (each rolling a segment) until the cleaner has removed the markers of the emptied
transactions; the cleaned partitions must hold the same batches (offsets, producer, control,
records) — with the aborted records and both emptied transactions' markers gone.

Needs Kafka's jars (real/install.sh, or KAFKASIM_KAFKA_LIB pointing at a lib dir holding them),
Debian's ZooKeeper and confluent-kafka; without them it skips (fails in CI)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from runtime_worlds import load_script

from kafkasim.records.batch import decode_batch_records, iter_batches
from kafkasim.records.errors import CorruptRecordError

pytestmark = pytest.mark.real

REPO = Path(__file__).resolve().parents[2]
TOPIC = "compacted-txn"
TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.ms": "2000", "delete.retention.ms": "5000",
                 "min.cleanable.dirty.ratio": "0.01", "file.delete.delay.ms": "1000"}
SHARED = {"offsets.topic.replication.factor": "1", "default.replication.factor": "1",
          "group.initial.rebalance.delay.ms": "0", "num.partitions": "1", "log.cleaner.backoff.ms": "500"}
# kafkasim only: its periodic jobs (the cleaner among them) start after log.initial.task.delay.ms,
# and — beyond Kafka — it cleans only below the checkpointed recovery point.
KAFKASIM_ONLY = {"log.initial.task.delay.ms": "0", "log.flush.offset.checkpoint.interval.ms": "500"}
KAFKA_ONLY = {"transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1"}
TXN_END = 7          # offsets 0-6 are the transactions' (see play)
MAX_ROUNDS = 48   # about 2 min: ample for two cleaner passes 5 s apart, even on a loaded machine


_load = load_script


def _launcher() -> ModuleType:
    launcher = _load("kafkasim_real_kafka", REPO / "real" / "kafka" / "kafka.py")
    zk = launcher.cluster_launcher().load_zk()
    missing = [w for w, ok in (("Kafka's jars", launcher.jars_present()), (zk.ZK_JAR, os.path.exists(zk.ZK_JAR)))
               if not ok]
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        missing.append("confluent-kafka")
    if missing:
        if os.environ.get("KAFKASIM_REQUIRE_ZOOKEEPER") == "1":
            pytest.fail(f"missing: {', '.join(missing)}")
        pytest.skip(f"missing: {', '.join(missing)}")
    return launcher


def play(bootstrap: str) -> None:
    """0 a=t1 (txn, committed) 1 COMMIT 2 b=x (txn, aborted) 3 ABORT 4 a=later 5 c=t2 (txn) 6 COMMIT."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the topic exists
    admin.create_topics([NewTopic(TOPIC, 1, 1, config=TOPIC_CONFIGS)])[TOPIC].result(30)
    time.sleep(1)
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "cleaner-real", "linger.ms": 0})
    txn.init_transactions(30)
    txn.begin_transaction()
    txn.produce(TOPIC, key=b"a", value=b"t1")
    txn.commit_transaction(30)
    txn.begin_transaction()
    txn.produce(TOPIC, key=b"b", value=b"x")
    txn.flush(30)
    txn.abort_transaction(30)
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": False, "acks": "all"})
    plain.produce(TOPIC, key=b"a", value=b"later")
    plain.flush(30)
    txn.begin_transaction()
    txn.produce(TOPIC, key=b"c", value=b"t2")
    txn.commit_transaction(30)


def batches(partition_dir: Path) -> list[tuple[Any, ...]]:
    """(base offset, last offset, transactional producer?, control, [(key, value)]) below TXN_END."""
    for _ in range(20):  # a clean may swap a segment out under us: read again
        try:
            out: list[tuple[Any, ...]] = []
            for path in sorted(partition_dir.glob("*.log")):
                data = path.read_bytes()
                for pos, h in iter_batches(data):
                    if h.base_offset < TXN_END:
                        recs = [(r.key, r.value) for r in decode_batch_records(data, pos, validate=False)]
                        out.append((h.base_offset, h.last_offset, h.producer_id >= 0, h.is_control,
                                    recs if not h.is_control else len(recs)))
            return out
        except (OSError, CorruptRecordError):
            time.sleep(0.2)
    raise AssertionError(f"could not read {partition_dir}")


def drive(bootstrap: str, partition_dir: Path, result: dict[str, Any], side: str) -> None:
    """Play the transactions, then a filler write every 2.5 s (rolling a segment) until the
    markers of the emptied transactions are gone or MAX_ROUNDS."""
    from confluent_kafka import Producer
    try:
        play(bootstrap)
        plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
        for i in range(MAX_ROUNDS):
            time.sleep(2.5)
            plain.produce(TOPIC, key=b"filler", value=str(i).encode())
            plain.flush(30)
            if not any(b[0] in (1, 3) for b in batches(partition_dir)):
                break
        time.sleep(3)  # one more clean, in case
        result[side] = batches(partition_dir)
    except BaseException as exc:  # noqa: BLE001 - reported by the test
        result[side] = exc


def test_a_cleaned_transactional_partition_matches_real_kafka(tmp_path: Path) -> None:
    launcher = _launcher()
    real = launcher.up(tmp_path / "kafka", 1, {**SHARED, **KAFKA_ONLY})
    try:
        sim = launcher.cluster_launcher().up(tmp_path / "kafkasim", 1, {**SHARED, **KAFKASIM_ONLY})
        try:
            result: dict[str, Any] = {}
            threads = [threading.Thread(target=drive, args=(real.bootstrap, real.brokers[0].log_dir / f"{TOPIC}-0",
                                                             result, "kafka")),
                       threading.Thread(target=drive, args=(sim.bootstrap, sim.brokers[0].dir / "data" / f"{TOPIC}-0",
                                                            result, "kafkasim"))]
            for t in threads:
                t.start()
            for t in threads:
                t.join(300)
        finally:
            sim.down()
    finally:
        real.down()
    for side in ("kafka", "kafkasim"):
        assert not isinstance(result.get(side), BaseException), (side, result.get(side))
    expected = [(4, 4, False, False, [(b"a", b"later")]), (5, 5, True, False, [(b"c", b"t2")]), (6, 6, True, True, 1)]
    assert result["kafka"] == expected, result
    assert result["kafkasim"] == result["kafka"]
