"""client_host: how a member's address is recorded (and described by DescribeGroups) — as Kafka
prints the accepted socket's InetAddress, "/127.0.0.1" (Kafka 3.9.1's DescribeGroups answer in
the conformance suite)."""

from __future__ import annotations

import pytest

from kafkasim.broker.group.apis import client_host
from kafkasim.broker.request_context import RequestContext
from kafkasim.protocol.messages.headers import RequestHeader

pytestmark = pytest.mark.unit


def _header() -> RequestHeader:
    return RequestHeader(request_api_key=11, request_api_version=5, correlation_id=1, client_id="c")


def test_the_senders_address_is_printed_as_java_does() -> None:
    assert client_host(RequestContext.of(_header(), client_address="127.0.0.1")) == "/127.0.0.1"


def test_a_request_without_a_sender_records_nothing() -> None:
    assert client_host(_header()) == ""
