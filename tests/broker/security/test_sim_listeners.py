"""The same listeners and SASL state machine in the simulated world: a broker with PLAINTEXT,
SASL_PLAINTEXT and SSL listeners, a SCRAM user written through AlterUserScramCredentials, logins
over the simulated network, Metadata per listener, and sessions that expire."""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from kafkasim.broker.config import BrokerConfig
from kafkasim.broker.server import KafkaServer
from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.alter_user_scram_credentials import AlterUserScramCredentialsRequest
from kafkasim.protocol.messages.api_versions import ApiVersionsRequest
from kafkasim.protocol.messages.metadata import MetadataRequest
from kafkasim.runtime.api import ConnectionClosed, NodeRuntime, TlsSettings
from kafkasim.runtime.sim.world import SimWorld
from tests.broker.security.sasl_client import exchange, login

pytestmark = pytest.mark.sim

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'
PROPS = {"host": "broker-0", "log.dirs": "logs",
         "listeners": "PLAINTEXT://broker-0:9092,SASL_PLAINTEXT://broker-0:9093,SSL://broker-0:9094",
         "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256", "sasl.jaas.config": JAAS,
         "ssl.keystore.type": "PEM", "ssl.keystore.location": "unused-in-the-sim.pem", "ssl.client.auth": "required",
         "offsets.topic.replication.factor": 1}


def _with_broker(body: Callable[[NodeRuntime, KafkaServer], Awaitable[Any]], **extra: Any) -> tuple[Any, str]:
    out_trace = io.StringIO()
    world = SimWorld(7, trace_out=out_trace)
    b = world.add_node("broker-0")
    server = KafkaServer(b.runtime, BrokerConfig.from_properties({**PROPS, **extra}))
    b.runtime.spawn(server.startup())
    c = world.add_node("client")
    out: dict[str, Any] = {}

    async def main() -> None:
        await c.runtime.sleep(1000)
        out["result"] = await body(c.runtime, server)

    task = c.runtime.spawn(main())
    world.run(60_000)
    assert task.done(), "client did not finish"
    assert world.failures == [], world.failures
    return out["result"], out_trace.getvalue()


async def _metadata_ports(rt: NodeRuntime, stream: Any) -> list[int]:
    resp = await exchange(stream, A.METADATA, 12, MetadataRequest(topics=None), 9)
    return [b.port for b in resp.brokers]


async def _add_scram_user(rt: NodeRuntime) -> int:
    plain = await rt.net.connect("broker-0", 9092, 1000)
    U = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
    salt = b"sim-salt-0123456"
    resp = await exchange(plain, A.ALTER_USER_SCRAM_CREDENTIALS, 0, AlterUserScramCredentialsRequest(upsertions=[
        U(name="bob", mechanism=1, iterations=4096, salt=salt,
          salted_password=hashlib.pbkdf2_hmac("sha256", b"bob-secret", salt, 4096))]))
    return int(resp.results[0].error_code)


def test_scram_and_plain_logins_and_metadata_per_listener() -> None:
    async def body(rt: NodeRuntime, server: KafkaServer) -> Any:
        assert await _add_scram_user(rt) == E.NONE
        sasl = await rt.net.connect("broker-0", 9093, 1000)
        versions = await exchange(sasl, A.API_VERSIONS, 3, ApiVersionsRequest(client_software_name="t",
                                                                               client_software_version="1"))
        scram = await login(sasl, "SCRAM-SHA-256", "bob", "bob-secret")
        ports_sasl = await _metadata_ports(rt, sasl)
        plain = await rt.net.connect("broker-0", 9092, 1000)
        ports_plain = await _metadata_ports(rt, plain)
        wrong = await rt.net.connect("broker-0", 9093, 1000)
        failed = await login(wrong, "PLAIN", "alice", "nope")
        try:
            await wrong.read_frame(1 << 20)
            closed = False
        except ConnectionClosed:
            closed = True
        assert server.kzk is not None
        data, _ = await server.kzk.zk.get("/brokers/ids/0")
        return versions.error_code, scram, ports_sasl, ports_plain, failed, closed, json.loads(data)

    (v_err, scram, ports_sasl, ports_plain, failed, closed, reg), trace = _with_broker(body)
    assert v_err == 0 and scram.error_code == 0
    assert ports_sasl == [9093] and ports_plain == [9092]     # each listener advertises itself
    assert failed.error_code == E.SASL_AUTHENTICATION_FAILED and closed
    assert failed.error_message == "Authentication failed: Invalid username or password"
    assert reg["endpoints"] == ["PLAINTEXT://broker-0:9092", "SASL_PLAINTEXT://broker-0:9093", "SSL://broker-0:9094"]
    assert reg["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT", "SASL_PLAINTEXT": "SASL_PLAINTEXT",
                                                     "SSL": "SSL"}
    events = [json.loads(line) for line in trace.splitlines()]
    assert any(e["ev"] == "sasl_authenticated" and e["principal"] == "User:bob" for e in events)


def test_requests_before_authentication_close_the_connection() -> None:
    async def body(rt: NodeRuntime, server: KafkaServer) -> Any:
        s = await rt.net.connect("broker-0", 9093, 1000)
        try:
            await _metadata_ports(rt, s)
        except ConnectionClosed:
            return True
        return False

    closed, trace = _with_broker(body)
    assert closed and "Unexpected Kafka request of type METADATA during SASL handshake." in trace


def test_ssl_listener_wants_tls_and_the_client_certificate() -> None:
    async def body(rt: NodeRuntime, server: KafkaServer) -> Any:
        results = []
        for tls in (None, TlsSettings(), TlsSettings(sim_subject="CN=client,O=kafkasim")):
            s = await rt.net.connect("broker-0", 9094, 1000, tls=tls)
            try:
                results.append(await _metadata_ports(rt, s))
            except ConnectionClosed:
                results.append(None)
        return results

    plain_client, no_cert, with_cert = _with_broker(body)[0]
    assert plain_client is None and no_cert is None and with_cert == [9094]


def test_session_past_connections_max_reauth_ms_is_closed() -> None:
    async def body(rt: NodeRuntime, server: KafkaServer) -> Any:
        s = await rt.net.connect("broker-0", 9093, 1000)
        resp = await login(s, "PLAIN", "alice", "alice-secret")
        before = await _metadata_ports(rt, s)
        await rt.sleep(6000)
        try:
            await _metadata_ports(rt, s)
            return resp.session_lifetime_ms, before, False
        except ConnectionClosed:
            return resp.session_lifetime_ms, before, True

    (lifetime, before, closed), trace = _with_broker(body, **{"connections.max.reauth.ms": 5000})
    assert lifetime == 5000 and before == [9093] and closed and "session expired" in trace


def test_failed_authentication_is_answered_after_the_delay() -> None:
    async def body(rt: NodeRuntime, server: KafkaServer) -> Any:
        times = []
        for password in ("alice-secret", "wrong"):
            s = await rt.net.connect("broker-0", 9093, 1000)
            started = rt.monotonic_ms()
            resp = await login(s, "PLAIN", "alice", password)
            times.append((resp.error_code, rt.monotonic_ms() - started))
        return times

    (ok, failed), _ = _with_broker(body, **{"connection.failed.authentication.delay.ms": 700})
    assert ok[0] == 0 and ok[1] < 100                       # connection.failed.authentication.delay.ms
    assert failed[0] == E.SASL_AUTHENTICATION_FAILED and failed[1] >= 700


def test_a_sasl_token_above_sasl_server_max_receive_size_closes_the_connection() -> None:
    """SaslServerAuthenticator reads with sasl.server.max.receive.size (Kafka's default 524288): a
    larger SaslAuthenticate closes the connection unanswered, after the failed-authentication
    delay; one just under it is read and answered (here: wrong password). Past authentication
    the limit is socket.request.max.bytes again."""
    from kafkasim.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
    from kafkasim.protocol.messages.sasl_handshake import SaslHandshakeRequest
    from tests.broker.security.sasl_client import plain_token, request

    async def attempt(rt: NodeRuntime, padding: int) -> tuple[str, float]:
        s = await rt.net.connect("broker-0", 9093, 1000)
        await exchange(s, A.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"))
        token = plain_token("alice", "x" * padding)
        frame = request(A.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=token), 2)
        started = rt.monotonic_ms()
        await s.write(frame)
        try:
            await s.read_frame(1 << 20)
            return f"answered {len(frame) - 4}", rt.monotonic_ms() - started
        except ConnectionClosed:
            return f"closed {len(frame) - 4}", rt.monotonic_ms() - started

    async def body(rt: NodeRuntime, server: KafkaServer) -> Any:
        small = await attempt(rt, 4000)
        big = await attempt(rt, 6000)
        s = await rt.net.connect("broker-0", 9093, 1000)
        await login(s, "PLAIN", "alice", "alice-secret")
        # Authenticated: a Metadata request bigger than the SASL limit is an ordinary request.
        from kafkasim.protocol.messages.metadata import MetadataRequest as M
        many = M(topics=[M.MetadataRequestTopic(name=f"t{i:05d}") for i in range(1000)],
                 allow_auto_topic_creation=False)
        resp = await exchange(s, A.METADATA, 9, many, 3)
        return small, big, len(resp.topics)

    (small, big, topics), trace = _with_broker(body, **{"sasl.server.max.receive.size": 5000,
                                                        "connection.failed.authentication.delay.ms": 300})
    assert small[0].startswith("answered") and int(small[0].split()[1]) < 5000
    assert big[0].startswith("closed") and int(big[0].split()[1]) > 5000 and big[1] >= 300
    assert "Failing SASL authentication due to invalid receive size" in trace
    assert topics == 1000
