"""Admin clients of real libraries against `kafkasim serve` over real sockets: confluent-kafka's
AdminClient (librdkafka) and kafka-python's KafkaAdminClient create and delete topics, add
partitions, describe and alter configs, delete records, describe the cluster and the log dirs —
and get Kafka's answers."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.serve.conftest import ServedBroker, poll_until

pytestmark = pytest.mark.real


def _partitions(bootstrap: str, topic: str) -> list[int]:
    from kafka import KafkaConsumer

    c = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            parts = c.partitions_for_topic(topic)
            if parts:
                return sorted(parts)
            time.sleep(0.2)
            c._client.cluster.request_update()
            c.topics()
        return []
    finally:
        c.close()


def _topics(bootstrap: str) -> set[str]:
    from kafka.admin import KafkaAdminClient

    a = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return set(a.list_topics())
    finally:
        a.close()


def _produce(bootstrap: str, topic: str, n: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(n):
        p.produce(topic, value=f"v{i}".encode(), partition=0)
        p.flush(10)
    assert p.flush(10) == 0


def _segment_bytes(log_dir: Path, topic: str, partition: int) -> int:
    return sum(f.stat().st_size for f in (log_dir / f"{topic}-{partition}").glob("*.log"))


# ---------------------------------------------------------------- confluent-kafka (librdkafka)

def _gone(path: Path, timeout_s: float = 10.0) -> bool:
    """The log dir renamed `-delete`, waited for: the topic leaves the metadata cache when the
    controller starts deleting it (UpdateMetadata with LeaderDuringDelete, as Kafka's
    TopicDeletionManager.onTopicDeletion sends it), before StopReplica(delete) renames the dir, so
    DeleteTopics may answer first — in Kafka too."""
    deadline = time.monotonic() + timeout_s
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return not path.exists()

def test_confluent_admin_topics_partitions_configs_records_cluster(broker: ServedBroker) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ConfigSource,
        NewPartitions,
        NewTopic,
        ResourceType,
    )

    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    created = a.create_topics([NewTopic("ck-a", 2, 1, config={"retention.ms": "1000"}), NewTopic("ck-b", 1, 1)])
    assert {t: f.result() for t, f in created.items()} == {"ck-a": None, "ck-b": None}
    assert {t: f.result() for t, f in a.create_partitions([NewPartitions("ck-a", 4)]).items()} == {"ck-a": None}
    assert _partitions(broker.bootstrap, "ck-a") == [0, 1, 2, 3]
    with pytest.raises(Exception, match="Topic already has 4 partitions"):
        a.create_partitions([NewPartitions("ck-a", 4)])["ck-a"].result()

    topic = ConfigResource(ResourceType.TOPIC, "ck-a")
    described = a.describe_configs([topic])[topic].result()
    assert len(described) == 36
    assert (described["retention.ms"].value, described["retention.ms"].source) == (
        "1000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    seg = described["segment.bytes"]
    assert (seg.value, seg.source, seg.is_default) == ("1073741824", ConfigSource.DEFAULT_CONFIG.value, True)
    assert described["cleanup.policy"].value == "delete" and not described["cleanup.policy"].is_read_only

    incremental = ConfigResource(ResourceType.TOPIC, "ck-a", incremental_configs=[
        ConfigEntry("segment.bytes", "100000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)])
    assert a.incremental_alter_configs([incremental])[incremental].result() is None
    after = a.describe_configs([topic])[topic].result()
    assert {k: (after[k].value, after[k].source) for k in ("segment.bytes", "cleanup.policy", "retention.ms")} == {
        "segment.bytes": ("100000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value),
        "cleanup.policy": ("delete,compact", ConfigSource.DYNAMIC_TOPIC_CONFIG.value),
        "retention.ms": ("604800000", ConfigSource.DEFAULT_CONFIG.value)}
    bad = ConfigResource(ResourceType.TOPIC, "ck-a", set_config={"retention.ms": "abc"})
    with pytest.raises(Exception, match="Not a number of type LONG"):
        a.alter_configs([bad])[bad].result()

    brokers = ConfigResource(ResourceType.BROKER, "0")
    b = a.describe_configs([brokers])[brokers].result()
    assert (b["broker.id"].value, b["broker.id"].source, b["broker.id"].is_read_only) == (
        "0", ConfigSource.STATIC_BROKER_CONFIG.value, True)
    assert b["log.segment.bytes"].value == "1073741824" and b["listeners"].value == f"PLAINTEXT://{broker.bootstrap}"

    _produce(broker.bootstrap, "ck-b", 10)
    deleted = a.delete_records([TopicPartition("ck-b", 0, 4)])
    [(tp, fut)] = list(deleted.items())
    assert (tp.topic, tp.partition, fut.result().low_watermark) == ("ck-b", 0, 4)

    cluster = a.describe_cluster().result()
    assert cluster.controller.id == 0 and [(n.id, f"{n.host}:{n.port}") for n in cluster.nodes] == [
        (0, broker.bootstrap)]
    assert cluster.cluster_id

    assert {t: f.result() for t, f in a.delete_topics(["ck-a"]).items()} == {"ck-a": None}
    assert "ck-a" not in _topics(broker.bootstrap) and "ck-b" in _topics(broker.bootstrap)
    assert _gone(broker.log_dir / "ck-a-0")


# ---------------------------------------------------------------- kafka-python
def test_kafka_python_admin_topics_partitions_configs_records_log_dirs(broker: ServedBroker) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewPartitions, NewTopic
    from kafka.errors import UnknownTopicOrPartitionError

    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        r = a.create_topics([NewTopic("kp-a", 2, 1, topic_configs={"retention.ms": "1000"})])
        assert [(t["name"], t["error_code"], t["num_partitions"]) for t in r["topics"]] == [("kp-a", 0, 2)]
        assert a.create_partitions({"kp-a": NewPartitions(3)}).results[0].error_code == 0
        [desc] = a.describe_topics(["kp-a"])
        assert [(p["partition_index"], p["leader_id"], p["leader_epoch"]) for p in desc["partitions"]] == [
            (0, 0, 0), (1, 0, 0), (2, 0, 0)]

        topic = ConfigResource(ConfigResourceType.TOPIC, "kp-a")
        modified = a.describe_configs([topic])  # config_filter='modified': only the overrides
        assert modified == {"topic": {"kp-a": {"retention.ms": {
            "value": "1000", "read_only": False, "config_source": "DYNAMIC_TOPIC_CONFIG", "is_sensitive": False,
            "synonyms": [], "config_type": "LONG", "documentation": None}}}}
        with_synonyms = a.describe_configs([topic], include_synonyms=True, config_filter='all')["topic"]["kp-a"]
        assert len(with_synonyms) == 36
        assert with_synonyms["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
        assert [tuple(s.values())[:3] for s in with_synonyms["segment.bytes"]["synonyms"]] == [
            ("log.segment.bytes", "1073741824", "DEFAULT_CONFIG")]

        # Legacy AlterConfigs replaces the whole set; kafka-python re-sends the current dynamic
        # configs with it (DescribeConfigs first), so retention.ms stays.
        legacy = ConfigResource(ConfigResourceType.TOPIC, "kp-a", configs={"segment.bytes": "100000"})
        assert a.alter_configs([legacy], incremental=False) == {"topic": {"kp-a": "OK"}}
        assert {k: v["value"] for k, v in a.describe_configs([topic])["topic"]["kp-a"].items()} == {
            "segment.bytes": "100000", "retention.ms": "1000"}
        # Incremental (the default where the broker has it): SET keeps the others.
        inc = ConfigResource(ConfigResourceType.TOPIC, "kp-a", configs={"retention.ms": "5000"})
        assert a.alter_configs([inc]) == {"topic": {"kp-a": "OK"}}
        assert {k: v["value"] for k, v in a.describe_configs([topic])["topic"]["kp-a"].items()} == {
            "segment.bytes": "100000", "retention.ms": "5000"}

        producer_topic = "kp-a"
        _produce(broker.bootstrap, producer_topic, 10)
        dr = a.delete_records({TopicPartition(producer_topic, 0): 4})
        assert dr == {TopicPartition(producer_topic, 0): {"partition_index": 0, "low_watermark": 4, "error_code": 0}}
        c = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
        c.assign([TopicPartition(producer_topic, 0)])
        c.seek_to_beginning()
        got = [(m.offset, m.value) for m in poll_until(c, 6)]
        c.close()
        assert got == [(i, f"v{i}".encode()) for i in range(4, 10)]

        cluster = a.describe_cluster()
        assert (cluster["controller_id"], [(b["broker_id"], b["host"], b["port"]) for b in cluster["brokers"]]) == (
            0, [(0, "127.0.0.1", broker.port)])

        [dirs] = a.describe_log_dirs()
        [log_dir] = dirs["log_dirs"]
        sizes: dict[Any, int] = {(t["name"], p["partition_index"]): p["partition_size"]
                                 for t in log_dir["topics"] for p in t["partitions"]}
        assert log_dir["error_code"] == 0
        assert sizes == {("kp-a", i): _segment_bytes(broker.log_dir, "kp-a", i) for i in range(3)}
        assert sizes[("kp-a", 0)] > 0

        r2 = a.delete_topics(["kp-a"])
        assert [(t["name"], t["error_code"]) for t in r2["topics"]] == [("kp-a", 0)]
        with pytest.raises(UnknownTopicOrPartitionError):
            a.delete_topics(["kp-missing"])
        assert "kp-a" not in set(a.list_topics())
        assert _gone(broker.log_dir / "kp-a-0")
    finally:
        a.close()
