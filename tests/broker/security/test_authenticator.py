"""The SASL state machine without a network: frames in, Kafka's answers (or a close) out."""

from __future__ import annotations

import asyncio
import base64
import hashlib
from typing import Any

import pytest

from kafkasim.broker.admin.scram_apis import credential_string
from kafkasim.broker.request_context import KafkaPrincipal
from kafkasim.broker.security.authenticator import SaslAuthenticator
from kafkasim.broker.security.listeners import EndPoint
from kafkasim.broker.security.settings import ListenerSecurity
from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.api_versions import ApiVersionsRequest
from kafkasim.protocol.messages.metadata import MetadataRequest
from kafkasim.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from kafkasim.protocol.messages.sasl_handshake import SaslHandshakeRequest
from tests.broker.security.sasl_client import ScramClient, decode_response, plain_token, request

pytestmark = pytest.mark.unit

SALT = b"0123456789abcdef"
MECHS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def _credential(mechanism: int, password: str, iterations: int = 4096) -> str:
    digest = "sha256" if mechanism == 1 else "sha512"
    return credential_string(mechanism, SALT, hashlib.pbkdf2_hmac(digest, password.encode(), SALT, iterations),
                             iterations)


CREDENTIALS = {("bob", "SCRAM-SHA-256"): _credential(1, "bob-secret"),
               ("bob", "SCRAM-SHA-512"): _credential(2, "bob-secret"),
               ("weak", "SCRAM-SHA-256"): "salt=MDEy,stored_key=AA==,server_key=AA==,iterations=100"}


async def _lookup(user: str, mechanism: str) -> str | None:
    return CREDENTIALS.get((user, mechanism))


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _auth(reauth_ms: int = 0, mechanisms: tuple[str, ...] = MECHS, clock: Clock | None = None) -> SaslAuthenticator:
    security = ListenerSecurity(EndPoint("SASL_PLAINTEXT", "h", 9093, "SASL_PLAINTEXT"), None, mechanisms,
                                {"alice": "alice-secret"}, {m: reauth_ms for m in mechanisms})
    return SaslAuthenticator(security, _lookup, lambda: "servernonce", clock or Clock())


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def _body(frame: bytes | None, api_key: int, version: int) -> Any:
    assert frame is not None
    return decode_response(frame[4:], api_key, version)


def _handshake(auth: SaslAuthenticator, mechanism: str, version: int = 1) -> Any:
    out = _run(auth.receive(request(A.SASL_HANDSHAKE, version, SaslHandshakeRequest(mechanism=mechanism))[4:]))
    return out, _body(out.reply, A.SASL_HANDSHAKE, version)


def _token(auth: SaslAuthenticator, token: bytes, version: int = 2) -> Any:
    out = _run(auth.receive(request(A.SASL_AUTHENTICATE, version, SaslAuthenticateRequest(auth_bytes=token))[4:]))
    return out, _body(out.reply, A.SASL_AUTHENTICATE, version)


def test_api_versions_then_plain_login_sets_the_principal() -> None:
    auth = _auth()
    out = _run(auth.receive(request(A.API_VERSIONS, 3, ApiVersionsRequest(client_software_name="x",
                                                                          client_software_version="1"))[4:]))
    assert out.forward and not out.close          # KafkaApis answers ApiVersions
    out, hs = _handshake(auth, "PLAIN")
    assert hs.error_code == 0 and hs.mechanisms == list(MECHS) and not out.close
    out, resp = _token(auth, plain_token("alice", "alice-secret"))
    assert resp.error_code == 0 and resp.session_lifetime_ms == 0 and not out.close
    assert auth.complete and auth.principal == KafkaPrincipal("User", "alice") and not auth.expired()


def test_wrong_plain_password_answers_58_with_kafkas_message_and_closes() -> None:
    auth = _auth()
    _handshake(auth, "PLAIN")
    out, resp = _token(auth, plain_token("alice", "nope"))
    assert out.close and resp.error_code == E.SASL_AUTHENTICATION_FAILED
    assert resp.error_message == "Authentication failed: Invalid username or password"
    assert auth.principal is None


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_login_proves_both_ways(mechanism: str) -> None:
    auth, client = _auth(), ScramClient(mechanism, "bob", "bob-secret")
    _handshake(auth, mechanism)
    out, first = _token(auth, client.first())
    assert first.error_code == 0 and bytes(first.auth_bytes).startswith(b"r=clientnonce123servernonce,s=")
    out, final = _token(auth, client.final(bytes(first.auth_bytes)))
    assert final.error_code == 0 and not out.close
    assert bytes(final.auth_bytes) == b"v=" + base64.b64encode(client.server_signature)
    assert auth.principal == KafkaPrincipal("User", "bob")


@pytest.mark.parametrize("user,password", [("bob", "wrong"), ("nobody", "x"), ("weak", "x")])
def test_scram_failures_hide_the_reason(user: str, password: str) -> None:
    auth, client = _auth(), ScramClient("SCRAM-SHA-256", user, password)
    _handshake(auth, "SCRAM-SHA-256")
    out, resp = _token(auth, client.first())
    if resp.error_code == 0:
        out, resp = _token(auth, client.final(bytes(resp.auth_bytes)))
    assert out.close and resp.error_code == E.SASL_AUTHENTICATION_FAILED
    assert resp.error_message == ("Authentication failed during authentication due to invalid credentials with "
                                  "SASL mechanism SCRAM-SHA-256")


def test_unsupported_mechanism_lists_the_enabled_ones_and_closes() -> None:
    auth = _auth(mechanisms=("SCRAM-SHA-512",))
    out, hs = _handshake(auth, "PLAIN")
    assert out.close and hs.error_code == E.UNSUPPORTED_SASL_MECHANISM and hs.mechanisms == ["SCRAM-SHA-512"]


def test_other_requests_before_authentication_close_without_an_answer() -> None:
    auth = _auth()
    out = _run(auth.receive(request(A.METADATA, 12, MetadataRequest(topics=None))[4:]))
    assert out.close and out.reply is None
    assert out.reason == "Unexpected Kafka request of type METADATA during SASL handshake."
    auth = _auth()
    _handshake(auth, "PLAIN")
    out = _run(auth.receive(request(A.METADATA, 12, MetadataRequest(topics=None))[4:]))
    assert out.close and "during SASL authentication" in out.reason


def test_a_second_api_versions_before_the_handshake_closes() -> None:
    auth = _auth()
    frame = request(A.API_VERSIONS, 0, ApiVersionsRequest())[4:]
    too_new = bytearray(frame)
    too_new[2:4] = (9).to_bytes(2, "big")       # answered UNSUPPORTED_VERSION: the client may ask again
    assert _run(auth.receive(bytes(too_new))).forward and auth.state == "HANDSHAKE_OR_VERSIONS_REQUEST"
    assert _run(auth.receive(frame)).forward
    assert _run(auth.receive(frame)).close


def test_handshake_v0_exchanges_raw_tokens() -> None:
    auth = _auth()
    out, hs = _handshake(auth, "PLAIN", version=0)
    assert hs.error_code == 0
    out = _run(auth.receive(plain_token("alice", "alice-secret")))
    assert out.reply == b"\x00\x00\x00\x00" and auth.complete           # PLAIN's empty answer, size-prefixed
    auth = _auth()
    _handshake(auth, "PLAIN", version=0)
    out = _run(auth.receive(plain_token("alice", "bad")))
    assert out.close and out.reply is None                               # no Kafka header to answer in


def test_session_lifetime_expiry_and_reauthentication() -> None:
    clock = Clock()
    auth = _auth(reauth_ms=10_000, clock=clock)
    _handshake(auth, "PLAIN")
    _, resp = _token(auth, plain_token("alice", "alice-secret"))
    assert resp.session_lifetime_ms == 10_000
    clock.now = 10_001
    assert auth.expired()
    assert auth.begin_reauthentication()
    assert not auth.begin_reauthentication()        # at most once a second
    _handshake(auth, "PLAIN")
    out, resp = _token(auth, plain_token("alice", "alice-secret"))
    assert resp.error_code == 0 and not auth.expired() and auth.expires_at == 20_001


def test_reauthentication_cannot_change_principal_or_mechanism() -> None:
    clock = Clock()
    auth = _auth(reauth_ms=5000, clock=clock)
    _handshake(auth, "PLAIN")
    _token(auth, plain_token("alice", "alice-secret"))
    clock.now = 2000
    assert auth.begin_reauthentication()
    _handshake(auth, "SCRAM-SHA-256")
    out, resp = _token(auth, b"n,,n=bob,r=x")
    assert out.close and resp.error_message == ("SASL mechanism 'SCRAM-SHA-256' requested by client is not "
                                                "supported for re-authentication of mechanism 'PLAIN'")
    CREDENTIALS_PLAIN = {"alice": "alice-secret", "eve": "eve-secret"}
    auth = _auth(reauth_ms=5000, clock=clock)
    auth.security.plain_users.update(CREDENTIALS_PLAIN)
    _handshake(auth, "PLAIN")
    _token(auth, plain_token("alice", "alice-secret"))
    clock.now = 4000
    assert auth.begin_reauthentication()
    _handshake(auth, "PLAIN")
    out, resp = _token(auth, plain_token("eve", "eve-secret"))
    assert out.close and resp.error_message == ("Cannot change principals during re-authentication from "
                                                "User.alice: User.eve")


def test_without_reauth_ms_there_is_no_session_to_renew() -> None:
    auth = _auth()
    _handshake(auth, "PLAIN")
    _token(auth, plain_token("alice", "alice-secret"))
    assert not auth.begin_reauthentication() and not auth.expired()
