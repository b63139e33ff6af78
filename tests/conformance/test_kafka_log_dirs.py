"""kafkasim serves log dirs Kafka wrote: real Kafka 3.9.1 (1 broker on its real ZooKeeper) takes
records through librdkafka (confluent-kafka) — plain, keyed, with headers, gzip/lz4 compressed, an
idempotent producer, a transactional producer with one committed and one aborted transaction —
into topics with several partitions, small segments and compaction; a consumer group commits
offsets. Kafka's own answers (what a read_committed consumer gets, ListOffsets earliest/latest/by
timestamp, topic ids, committed offsets) are captured, Kafka's broker is stopped cleanly (its
ZooKeeper keeps running), and `kafkasim serve` is started on the same ZooKeeper, log dir and
broker id: it must answer the same, and take new records at the next offsets on top of Kafka's
log, which Kafka's kafka-dump-log then reads."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.conftest import kafka_launcher, require_real_kafka

ck = pytest.importorskip("confluent_kafka")
ck_admin = pytest.importorskip("confluent_kafka.admin")
pytestmark = pytest.mark.real

# name -> (partitions, topic configs)
# (retention.ms=-1: the records' timestamps are fixed, in 2023, and time retention would delete them.)
TOPICS: dict[str, tuple[int, dict[str, str]]] = {
    "ld-plain": (3, {"segment.bytes": "1500"}),                # several segments per partition
    "ld-compact": (2, {"cleanup.policy": "compact", "segment.bytes": "4096"}),
    "ld-gzip": (2, {}),                                          # the producer compresses (gzip)
    "ld-lz4": (1, {"compression.type": "lz4"}),                  # the broker recompresses (lz4)
    "ld-txn": (2, {}),
}
GROUP = "ld-group"
BASE_TS = 1_700_000_000_000


def produce(bootstrap: str, topic: str, rows: list[dict[str, Any]], **conf: Any) -> list[tuple[str, int, int]]:
    """Produces rows (key/value/headers/timestamp/partition) and returns what was acknowledged."""
    acked: list[tuple[str, int, int]] = []

    def report(err: Any, msg: Any) -> None:
        assert err is None, err
        acked.append((msg.topic(), msg.partition(), msg.offset()))

    # batch.size under the small segment.bytes (Kafka refuses a batch larger than a segment)
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 800, **conf})
    for row in rows:
        p.produce(topic, on_delivery=report, **row)
    assert p.flush(30) == 0
    return acked


def rows(prefix: str, n: int, partitions: int, keyed: bool = True, headers: bool = False,
         ts0: int = BASE_TS) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        row: dict[str, Any] = {"value": f"{prefix}-value-{i}-".encode() * 8, "partition": i % partitions,
                               "timestamp": ts0 + i * 1000}
        if keyed:
            row["key"] = f"{prefix}-key-{i % 7}".encode()
        if headers:
            row["headers"] = [("h1", f"{prefix}-{i}".encode()), ("empty", b"")]
        out.append(row)
    return out


def write_everything(bootstrap: str) -> dict[str, Any]:
    admin = ck_admin.AdminClient({"bootstrap.servers": bootstrap})
    new = [ck_admin.NewTopic(t, p, 1, config={"retention.ms": "-1", **c}) for t, (p, c) in TOPICS.items()]
    for fut in admin.create_topics(new).values():
        fut.result(30)
    acked = produce(bootstrap, "ld-plain", rows("plain", 60, 3, keyed=False), **{"enable.idempotence": True})
    acked += produce(bootstrap, "ld-plain", rows("hdr", 12, 3, headers=True, ts0=BASE_TS + 100_000))
    acked += produce(bootstrap, "ld-compact", rows("compact", 40, 2))
    acked += produce(bootstrap, "ld-gzip", rows("gzip", 30, 2, headers=True), **{"compression.type": "gzip"})
    acked += produce(bootstrap, "ld-lz4", rows("lz4", 20, 1), **{"compression.type": "none"})
    aborted = transactions(bootstrap)
    return {"acked": acked, "aborted": aborted}


def transactions(bootstrap: str) -> list[bytes]:
    """One committed, one aborted, one committed transaction; returns the aborted values."""
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "ld-txn-producer"})
    p.init_transactions(30)
    aborted: list[bytes] = []
    for n, outcome in enumerate(("commit", "abort", "commit")):
        p.begin_transaction()
        for row in rows(f"txn{n}-{outcome}", 6, 2, ts0=BASE_TS + 200_000 + n * 10_000):
            p.produce("ld-txn", **row)
            if outcome == "abort":
                aborted.append(row["value"])
        if outcome == "commit":
            p.commit_transaction(30)
        else:
            p.flush(30)
            p.abort_transaction(30)
    return aborted


def consumer(bootstrap: str, **conf: Any) -> Any:
    return ck.Consumer({"bootstrap.servers": bootstrap, "group.id": conf.pop("group", "ld-reader"),
                        "enable.auto.commit": False, "isolation.level": "read_committed",
                        "auto.offset.reset": "earliest", **conf})


def partitions() -> list[tuple[str, int]]:
    return [(t, p) for t, (n, _) in sorted(TOPICS.items()) for p in range(n)]


def read_all(bootstrap: str) -> list[tuple[Any, ...]]:
    """Every record a read_committed consumer gets, up to each partition's last stable offset."""
    c = consumer(bootstrap)
    ends = {tp: c.get_watermark_offsets(ck.TopicPartition(*tp), timeout=30, cached=False)[1] for tp in partitions()}
    c.assign([ck.TopicPartition(t, p, 0) for t, p in partitions()])
    out: list[tuple[Any, ...]] = []
    done: set[tuple[str, int]] = {tp for tp, end in ends.items() if end == 0}
    deadline = time.monotonic() + 60
    while len(done) < len(ends) and time.monotonic() < deadline:
        msg = c.poll(1.0)
        if msg is None or msg.error() is not None:
            continue
        tp = (msg.topic(), msg.partition())
        out.append((*tp, msg.offset(), msg.key(), msg.value(), msg.headers(), msg.timestamp()))
        if msg.offset() + 1 >= ends[tp]:
            done.add(tp)
    c.close()
    return sorted(out, key=lambda r: (r[0], r[1], r[2]))


def offsets(bootstrap: str) -> dict[str, Any]:
    c = consumer(bootstrap)
    marks = {tp: c.get_watermark_offsets(ck.TopicPartition(*tp), timeout=30, cached=False) for tp in partitions()}
    stamps = [BASE_TS - 1, BASE_TS, BASE_TS + 5_500, BASE_TS + 100_000, BASE_TS + 205_000, BASE_TS + 10**9]
    by_time = {ts: [(x.topic, x.partition, x.offset) for x in c.offsets_for_times(
        [ck.TopicPartition(t, p, ts) for t, p in partitions()], timeout=30)] for ts in stamps}
    committed = [(x.topic, x.partition, x.offset) for x in consumer(bootstrap, group=GROUP).committed(
        [ck.TopicPartition(t, p) for t, p in partitions()], timeout=30)]
    c.close()
    return {"watermarks": marks, "by_time": by_time, "committed": committed}


def commit_group(bootstrap: str) -> None:
    c = consumer(bootstrap, group=GROUP)
    c.commit(offsets=[ck.TopicPartition("ld-plain", 0, 7), ck.TopicPartition("ld-plain", 2, 11),
                      ck.TopicPartition("ld-gzip", 1, 3)], asynchronous=False)
    c.close()


def topic_ids(bootstrap: str) -> dict[str, str]:
    admin = ck_admin.AdminClient({"bootstrap.servers": bootstrap})
    req = ck.TopicCollection(sorted(TOPICS))
    return {t: str(f.result(30).topic_id) for t, f in admin.describe_topics(req).items()}


def start_kafkasim(broker: Any, zookeeper: str) -> Any:
    """`kafkasim serve --zookeeper Kafka's --log-dir Kafka's --broker-id same` (real/cluster's
    Broker: its log dir is DIR/data, as Kafka's is)."""
    launcher = kafka_launcher().cluster_launcher()
    sim = launcher.Broker(broker.broker_id, launcher.free_port(), broker.dir, {"offsets.topic.replication.factor": "1"},
                          zookeeper)
    sim.start()
    sim.wait_started()
    wait_led(sim.bootstrap)
    return sim


def wait_led(bootstrap: str, timeout_s: float = 30.0) -> None:
    """Until Metadata names a leader for every partition. (kafkasim prints "listening" before its
    controller has made it leader of the partitions it loaded — about 0.7 s on this machine — so
    a client that asks at once gets UNKNOWN_TOPIC_OR_PARTITION: a known gap, see the report.)"""
    admin = ck_admin.AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        topics = admin.list_topics(timeout=10).topics
        led = {(t, p.id) for t, m in topics.items() for p in m.partitions.values() if p.leader >= 0 and p.error is None}
        if set(partitions()) <= led:
            return
        time.sleep(0.2)
    raise AssertionError(f"kafkasim never led every partition of {sorted(TOPICS)}")


@pytest.fixture(scope="module")
def handover(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    launcher = require_real_kafka()
    cluster = launcher.up(tmp_path_factory.mktemp("kafka-log-dirs"), 1, {"group.initial.rebalance.delay.ms": "0"})
    sim = None
    try:
        kafka = cluster.brokers[0]
        written = write_everything(kafka.bootstrap)
        commit_group(kafka.bootstrap)
        before = {"records": read_all(kafka.bootstrap), "offsets": offsets(kafka.bootstrap),
                  "ids": topic_ids(kafka.bootstrap)}
        cluster.stop_brokers()
        sim = start_kafkasim(kafka, cluster.zookeeper_connect)
        yield {"kafka": kafka, "sim": sim, "written": written, "before": before, "log_dir": kafka.log_dir}
    finally:
        if sim is not None:
            sim.stop()
        cluster.down()


def test_kafka_wrote_what_the_test_needs(handover: dict[str, Any]) -> None:
    log_dir: Path = handover["log_dir"]
    assert len(list((log_dir / "ld-plain-0").glob("*.log"))) > 1, "no second segment: segment.bytes too big"
    assert (log_dir / "meta.properties").exists() and (log_dir / "__consumer_offsets-0").exists()
    records = handover["before"]["records"]
    values = {r[4] for r in records}
    assert not values & set(handover["written"]["aborted"])
    # (ld-compact is left out: Kafka's cleaner may have compacted it before it was read.)
    assert sum(1 for r in records if r[0] != "ld-compact") == 60 + 12 + 30 + 20 + 2 * 6


def test_every_acknowledged_record_is_served(handover: dict[str, Any]) -> None:
    served = read_all(handover["sim"].bootstrap)
    assert served == handover["before"]["records"]
    acked = {(t, p, o) for t, p, o in handover["written"]["acked"]}
    assert acked <= {(r[0], r[1], r[2]) for r in served}


def test_aborted_records_are_not_delivered(handover: dict[str, Any]) -> None:
    served = read_all(handover["sim"].bootstrap)
    values = {r[4] for r in served}
    assert not values & set(handover["written"]["aborted"])
    assert sum(1 for r in served if r[0] == "ld-txn") == 12


def test_list_offsets_and_committed_offsets_answer_as_kafka_did(handover: dict[str, Any]) -> None:
    assert offsets(handover["sim"].bootstrap) == handover["before"]["offsets"]


def test_topic_ids_are_kafkas(handover: dict[str, Any]) -> None:
    ids = topic_ids(handover["sim"].bootstrap)
    assert ids == handover["before"]["ids"]
    for topic, topic_id in ids.items():
        text = (handover["log_dir"] / f"{topic}-0" / "partition.metadata").read_text()
        assert "version: 0" in text, text
        # (librdkafka prints a Uuid in base64 with + and /; Kafka writes it URL-safe, - and _.)
        url_safe = topic_id.translate(str.maketrans("+/", "-_"))
        assert len(topic_id) == 22 and f"topic_id: {url_safe}" in text, (topic_id, text)


def test_kafkasim_produces_onward_on_kafkas_log(handover: dict[str, Any]) -> None:
    sim = handover["sim"].bootstrap
    latest = handover["before"]["offsets"]["watermarks"][("ld-plain", 0)][1]
    new = rows("onward", 3, 1, headers=True, ts0=BASE_TS + 300_000)
    acked = produce(sim, "ld-plain", new, **{"enable.idempotence": True})
    assert sorted(o for _, _, o in acked) == [latest, latest + 1, latest + 2]
    served = [r for r in read_all(sim) if (r[0], r[1]) == ("ld-plain", 0) and r[2] >= latest]
    assert [r[4] for r in served] == [row["value"] for row in new]
    seg = sorted((handover["log_dir"] / "ld-plain-0").glob("*.log"))
    res = kafka_launcher().dump_log(seg, "--deep-iteration", "--print-data-log")
    assert res.returncode == 0, res.stderr
    assert "onward-value-2-" in res.stdout and f"offset: {latest + 2}" in res.stdout, res.stdout[-3000:]
