"""Group administration with real admin clients against `kafkasim serve`: ListGroups,
DescribeGroups (members, assignment, authorized operations), OffsetFetch of all partitions,
DeleteGroups refused while the group has members and done once it is empty."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Iterator

import pytest

from tests.serve.conftest import ServedBroker
from tests.serve.groups_support import GROUP_BROKER_CONFIG, TOPIC_PARTITIONS, produce

pytestmark = pytest.mark.real


@pytest.fixture
def group_broker(tmp_path: Path) -> Iterator[ServedBroker]:
    b = ServedBroker(tmp_path / "logs", configs=GROUP_BROKER_CONFIG)
    yield b
    b.stop()
    errors = b.task_errors()
    assert errors == [], f"the broker hit unhandled errors: {errors}"


def test_admin_clients_list_describe_offsets_and_delete_groups(group_broker: ServedBroker) -> None:
    from confluent_kafka import Consumer, ConsumerGroupState
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaAdminClient

    bootstrap = group_broker.bootstrap
    produce(bootstrap, "adm-topic", 0, 3)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "adm", "client.id": "adm-member",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe(["adm-topic"])
    consumed = 0
    deadline = time.monotonic() + 30
    while consumed < 3 * TOPIC_PARTITIONS and time.monotonic() < deadline:
        m = c.poll(0.3)
        if m is not None and m.error() is None:
            consumed += 1
            c.commit(message=m, asynchronous=False)
    assert consumed == 3 * TOPIC_PARTITIONS

    kp = KafkaAdminClient(bootstrap_servers=bootstrap)
    ck = AdminClient({"bootstrap.servers": bootstrap})
    try:
        # ListGroups v5 (KIP-848) adds the group type; Kafka 3.9 answers "classic" for these groups
        assert kp.list_groups() == [{"group_id": "adm", "protocol_type": "consumer", "group_state": "Stable",
                                     "group_type": "classic"}]
        described = kp.describe_groups(["adm"])["adm"]
        assert (described["group_state"], described["protocol_type"], described["protocol_data"]) == \
            ("Stable", "consumer", "range")
        [member] = described["members"]
        assert member["client_id"] == "adm-member" and member["member_id"].startswith("adm-member-")
        assert member["member_metadata"]["topics"] == ["adm-topic"]
        assert member["member_assignment"]["assigned_partitions"] == [
            {"topic": "adm-topic", "partitions": list(range(TOPIC_PARTITIONS))}]
        assert sorted(described["authorized_operations"]) == ["DELETE", "DESCRIBE", "READ"]
        offsets = kp.list_group_offsets("adm")["adm"]
        assert {tp.partition: om.offset for tp, om in offsets.items()} == {p: 3 for p in range(TOPIC_PARTITIONS)}

        ck_groups = ck.list_consumer_groups().result(10).valid
        assert [(g.group_id, g.state) for g in ck_groups] == [("adm", ConsumerGroupState.STABLE)]
        ck_desc = ck.describe_consumer_groups(["adm"])["adm"].result(10)
        assert ck_desc.state == ConsumerGroupState.STABLE and len(ck_desc.members) == 1

        assert dict(kp.delete_groups(["adm"])) == {"adm": "NonEmptyGroupError"}
        c.close()   # LeaveGroup: the group becomes Empty
        assert dict(kp.delete_groups(["adm"])) == {"adm": "OK"}
        assert kp.list_groups() == []
        assert kp.list_group_offsets("adm")["adm"] == {}
    finally:
        kp.close()
