"""ACL denial through the Java client, franz-go and kcat (confluent-kafka and kafka-python are in
tests/serve/test_acl_clients.py): `kafkasim serve` with the AclAuthorizer over PLAINTEXT (every
connection is User:ANONYMOUS) and allow.everyone.if.no.acl.found=true. ACLs written with
confluent-kafka's admin client:

  no-write   ALLOW READ, DENY WRITE   a producer gets TOPIC_AUTHORIZATION_FAILED, nothing is written
  no-read    ALLOW WRITE, DENY READ   a consumer gets TOPIC_AUTHORIZATION_FAILED, reads nothing
  open       no ACL                   both work

Each client reports the denial in its own words (asserted per client below: the Java client's
TopicAuthorizationException, franz-go's TOPIC_AUTHORIZATION_FAILED, librdkafka's "Topic
authorization failed")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.serve.clients.driver import Driver, DriverError, driver_missing
from tests.serve.conftest import ACL_CONFIGS, ServedBroker, anonymous_topic_acl, served_broker

pytestmark = pytest.mark.real

CLIENTS = ["java", "franz-go", "kcat"]
# What each client says when the broker answers TOPIC_AUTHORIZATION_FAILED.
DENIED = {"java": "TopicAuthorizationException", "franz-go": "TOPIC_AUTHORIZATION_FAILED",
          "kcat": "Topic authorization failed"}


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedBroker]:
    from confluent_kafka.admin import AdminClient, NewTopic

    with served_broker(Path(tmp_path_factory.mktemp("acl")) / "logs", ACL_CONFIGS) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        for f in admin.create_topics([NewTopic(t, 1, 1) for t in ("open", "no-write", "no-read")]).values():
            f.result(30)
        bindings = [anonymous_topic_acl("no-write", "READ", "ALLOW"), anonymous_topic_acl("no-write", "WRITE", "DENY"),
                    anonymous_topic_acl("no-read", "WRITE", "ALLOW"), anonymous_topic_acl("no-read", "READ", "DENY")]
        for f in admin.create_acls(bindings).values():
            assert f.result(30) is None
        yield b


def _errors(call: Any) -> tuple[list[Any], str]:
    """(records acknowledged or consumed, the errors the client reported, joined)."""
    try:
        reply = call()
    except DriverError as exc:
        return [], exc.error
    return reply.get("acked", reply.get("records", [])), " | ".join(str(e) for e in reply.get("errors", []))


@pytest.mark.parametrize("client", CLIENTS)
def test_a_client_is_denied_where_the_acls_say(client: str, acl_broker: ServedBroker) -> None:
    reason = driver_missing(client)
    if reason:
        pytest.skip(reason)
    with Driver(client, acl_broker.bootstrap) as d:
        opened = d.produce("open", 3, f"{client}-open", acks="all", timeout_ms=15000)
        assert len(opened["acked"]) == 3 and not opened["errors"], opened
        written, write_error = _errors(lambda: d.produce("no-write", 3, f"{client}-w", acks="all",
                                                         timeout_ms=15000))
        assert written == [] and DENIED[client] in write_error, write_error
        allowed = d.produce("no-read", 2, f"{client}-r", acks="all", timeout_ms=15000)
        assert len(allowed["acked"]) == 2, allowed              # WRITE is allowed there
        read, read_error = _errors(lambda: d.consume("no-read", group=None, max=2, timeout_ms=15000))
        assert read == [] and DENIED[client] in read_error, read_error
        got = d.consume("open", group=None, max=100, timeout_ms=5000)["records"]   # other clients' too
        assert {f"{client}-open-{i}" for i in range(3)} <= {r[2] for r in got}, got
