"""The client side of SASL (kafkasim's inter-broker clients): PLAIN and SCRAM-SHA-256 logins to a
simulated broker's SASL_PLAINTEXT listener through NetworkClient, a request answered after them,
and a wrong password, an unknown user or a mechanism the listener lacks refused with
AuthenticationFailed."""

from __future__ import annotations

from typing import Any

import pytest

from kafkasim.broker.server import KafkaServer
from kafkasim.client.channel_security import AuthenticationFailed, ChannelSecurity, SaslCredentials
from kafkasim.client.network_client import NetworkClient
from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.metadata import MetadataRequest
from kafkasim.runtime.api import NodeRuntime
from tests.broker.security.test_sim_listeners import _add_scram_user, _with_broker

pytestmark = pytest.mark.sim


async def _login(rt: NodeRuntime, mechanism: str, user: str, password: str) -> Any:
    client = NetworkClient(rt, "broker-0", 9093, "inter-broker-test",
                           security=ChannelSecurity(sasl=SaslCredentials(mechanism, user, password)))
    try:
        await client.connect(1000)
    except AuthenticationFailed as exc:
        return f"refused: {exc}"
    resp = await client.send(MetadataRequest(topics=None), 9, 5000)
    client.close()
    return [b.port for b in resp.brokers]


def test_plain_and_scram_logins_and_refusals() -> None:
    async def body(rt: NodeRuntime, server: KafkaServer) -> Any:
        assert await _add_scram_user(rt) == E.NONE
        return [await _login(rt, "PLAIN", "alice", "alice-secret"),
                await _login(rt, "SCRAM-SHA-256", "bob", "bob-secret"),
                await _login(rt, "SCRAM-SHA-256", "bob", "wrong"),
                await _login(rt, "SCRAM-SHA-256", "nobody", "x"),
                await _login(rt, "SCRAM-SHA-512", "bob", "bob-secret")]

    (plain, scram, wrong, unknown, not_enabled), trace = _with_broker(body)
    assert plain == [9093] and scram == [9093]
    assert wrong.startswith("refused") and f"error {E.SASL_AUTHENTICATION_FAILED}" in wrong
    assert unknown.startswith("refused") and f"error {E.SASL_AUTHENTICATION_FAILED}" in unknown
    assert not_enabled.startswith("refused") and f"error {E.UNSUPPORTED_SASL_MECHANISM}" in not_enabled
    assert '"principal": "User:bob"' in trace or '"principal":"User:bob"' in trace
