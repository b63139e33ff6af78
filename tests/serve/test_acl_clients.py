"""ACLs with real clients over PLAINTEXT (every connection is User:ANONYMOUS): `kafkasim serve`
with the AclAuthorizer and allow.everyone.if.no.acl.found=true (what no ACL speaks of is open);
confluent-kafka's and kafka-python's admin clients create, describe and delete ACLs, and their
producers and consumers are denied where the ACLs say."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.serve.conftest import ACL_CONFIGS, ServedBroker, anonymous_topic_acl, served_broker

pytestmark = pytest.mark.real


@pytest.fixture
def acl_broker(tmp_path: Path) -> Iterator[ServedBroker]:
    with served_broker(tmp_path / "logs", ACL_CONFIGS) as b:
        yield b


def _deliver(bootstrap: str, topic: str) -> str | None:
    """Produce one message with librdkafka; the delivery error's name, None when delivered."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10000})
    errors: list[str | None] = []
    p.produce(topic, b"v", on_delivery=lambda err, msg: errors.append(err.name() if err else None))
    p.flush(15)
    return errors[0] if errors else "no delivery report"


def test_confluent_kafka_admin_acls_and_a_denied_producer(acl_broker: ServedBroker) -> None:
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": acl_broker.bootstrap})
    for f in admin.create_topics([NewTopic("open", 1, 1), NewTopic("locked", 1, 1)]).values():
        f.result(15)
    deny = anonymous_topic_acl("locked", "WRITE", "DENY")
    for f in admin.create_acls([deny]).values():
        assert f.result(15) is None
    described = admin.describe_acls(AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
        AclPermissionType.ANY)).result(15)
    assert [(b.name, b.principal, b.operation, b.permission_type) for b in described] == \
        [("locked", "User:ANONYMOUS", AclOperation.WRITE, AclPermissionType.DENY)]
    assert _deliver(acl_broker.bootstrap, "open") is None
    assert _deliver(acl_broker.bootstrap, "locked") == "TOPIC_AUTHORIZATION_FAILED"
    deleted = admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, "locked", ResourcePatternType.LITERAL,
                                                  None, None, AclOperation.ANY, AclPermissionType.ANY)])
    assert [len(f.result(15)) for f in deleted.values()] == [1]
    assert _deliver(acl_broker.bootstrap, "locked") is None    # no ACL left: open again


def test_kafka_python_admin_acls_and_a_denied_consumer(acl_broker: ServedBroker) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        NewTopic,
        ResourcePattern,
        ResourcePatternFilter,
        ResourceType,
    )
    from kafka.errors import TopicAuthorizationFailedError

    admin = KafkaAdminClient(bootstrap_servers=acl_broker.bootstrap)
    try:
        admin.create_topics([NewTopic("secret", 1, 1)])
        acl = ACL("User:ANONYMOUS", "*", ACLOperation.READ, ACLPermissionType.DENY,
                  ResourcePattern(ResourceType.TOPIC, "secr", ACLResourcePatternType.PREFIXED))
        result = admin.create_acls([acl])
        assert result["failed"] == [] and len(result["succeeded"]) == 1
        found, error = admin.describe_acls(ACLFilter(
            principal=None, host=None, operation=ACLOperation.ANY, permission_type=ACLPermissionType.ANY,
            resource_pattern=ResourcePatternFilter(ResourceType.TOPIC, None, ACLResourcePatternType.ANY)))
        assert error.errno == 0 and [(a.resource_pattern.resource_name, a.operation) for a in found] == \
            [("secr", ACLOperation.READ)]
        # The DENY of READ leaves the topic with ACLs and no ALLOW, so not even DESCRIBE is
        # allowed: the producer's metadata says TOPIC_AUTHORIZATION_FAILED, the consumer sees nothing.
        producer = KafkaProducer(bootstrap_servers=acl_broker.bootstrap, max_block_ms=5000)
        try:
            with pytest.raises(TopicAuthorizationFailedError):
                producer.send("secret", b"v").get(10)
        finally:
            producer.close()
        consumer = KafkaConsumer("secret", bootstrap_servers=acl_broker.bootstrap, auto_offset_reset="earliest",
                                 group_id="readers")
        try:
            assert not any(consumer.poll(timeout_ms=500) for _ in range(6))
        finally:
            consumer.close()
        admin.delete_acls([ACLFilter(principal=None, host=None, operation=ACLOperation.ANY,
                                     permission_type=ACLPermissionType.ANY, resource_pattern=ResourcePatternFilter(
                                         ResourceType.TOPIC, "secr", ACLResourcePatternType.PREFIXED))])
        producer = KafkaProducer(bootstrap_servers=acl_broker.bootstrap, max_block_ms=5000)
        try:
            assert producer.send("secret", b"v").get(10).offset == 0   # the ACL gone: open again
        finally:
            producer.close()
    finally:
        admin.close()


def test_a_fetch_session_stops_reading_once_read_is_denied(acl_broker: ServedBroker) -> None:
    """kafka-python fetches in a session (KIP-227): once a partition's position stops moving, its
    incremental fetches no longer name it and the broker reads it from the session. After a DENY
    of READ, the next record on such a partition must not reach the consumer: the broker answers
    the session's partitions TOPIC_AUTHORIZATION_FAILED (KafkaApis checks the fetch context's
    partitions, not only the request's)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import TopicAuthorizationFailedError

    admin = AdminClient({"bootstrap.servers": acl_broker.bootstrap})
    for f in admin.create_topics([NewTopic("orders", 2, 1)]).values():
        f.result(15)
    producer = Producer({"bootstrap.servers": acl_broker.bootstrap, "message.timeout.ms": 10000})

    def deliver(partition: int, value: bytes) -> None:
        errors: list[object] = []
        producer.produce("orders", value, partition=partition, on_delivery=lambda err, msg: errors.append(err))
        producer.flush(15)
        assert errors == [None]

    deliver(1, b"before")
    consumer = KafkaConsumer(bootstrap_servers=acl_broker.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100)
    try:
        consumer.assign([TopicPartition("orders", 0), TopicPartition("orders", 1)])
        consumer.seek_to_beginning()
        seen: list[bytes] = []
        deadline = time.monotonic() + 30   # a deadline for the first record: a loaded machine is slow
        while not seen and time.monotonic() < deadline:
            seen += [r.value for rs in consumer.poll(timeout_ms=250).values() for r in rs]
        seen += [r.value for _ in range(12) for rs in consumer.poll(timeout_ms=250).values() for r in rs]
        assert seen == [b"before"]   # and a dozen fetches since, neither position moving
        # DENY READ; the ALLOW WRITE keeps the producer in (the topic has ACLs now, so what they
        # do not allow is denied).
        for f in admin.create_acls([anonymous_topic_acl("orders", "READ", "DENY"),
                                    anonymous_topic_acl("orders", "WRITE", "ALLOW")]).values():
            assert f.result(15) is None
        # The broker's ACL cache has them when CreateAcls answers. A fetch it authorized before
        # may still wait in purgatory (fetch.max.wait.ms, 100 ms) and answer a record written
        # meanwhile, as Kafka's DelayedFetch does (it does not authorize again), so the record is
        # written once those are over.
        time.sleep(1.0)
        deliver(0, b"after")
        after: list[bytes] = []
        raised: list[str] = []
        polls, deadline = 0, time.monotonic() + 30
        while polls < 12 or ("denied" not in raised and time.monotonic() < deadline):
            polls += 1
            try:
                after += [r.value for rs in consumer.poll(timeout_ms=250).values() for r in rs]
            except TopicAuthorizationFailedError:
                raised.append("denied")
            except Exception as exc:  # noqa: BLE001 - what else the client raised is the finding
                raised.append(f"{type(exc).__name__}: {exc}")
        assert after == []
        assert set(raised) == {"denied"}
    finally:
        consumer.close()
