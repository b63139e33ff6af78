"""The server side of a SASL connection: Kafka's SaslServerAuthenticator, without I/O (the socket
server reads the frames and writes what this returns).

  HANDSHAKE_OR_VERSIONS_REQUEST --ApiVersions--> HANDSHAKE_REQUEST --SaslHandshake--> AUTHENTICATE
  AUTHENTICATE --tokens...--> COMPLETE       (v1+ handshake: each token in a SaslAuthenticate request;
                                              v0: raw size-prefixed tokens, answered the same way)
  COMPLETE --SaslHandshake, session set, >= 1 s since the last--> re-authentication (KIP-368)

Anything else before COMPLETE closes the connection ("Unexpected Kafka request of type X during
SASL handshake."). A mechanism the listener does not enable is answered
UNSUPPORTED_SASL_MECHANISM with the enabled list, then closed; a failed exchange is answered
SASL_AUTHENTICATION_FAILED with Kafka's message (SaslAuthenticate) or nothing (raw tokens), then
closed. With connections.max.reauth.ms set, SaslAuthenticate v1+ tells the client its session
lifetime; a connection that goes past it without re-authenticating is closed at its next request.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from typing import Any, NamedTuple

from kafkasim.broker.request_context import KafkaPrincipal
from kafkasim.broker.security.sasl import PlainSaslServer, SaslAuthenticationError, SaslError, SaslServer
from kafkasim.broker.security.scram import HASHES, CredentialLookup, ScramSaslServer
from kafkasim.broker.security.settings import PLAIN, ListenerSecurity
from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.errors import ProtocolError
from kafkasim.protocol.framing import parse_request_frame, peek_request_ids
from kafkasim.protocol.messages.headers import ResponseHeader
from kafkasim.protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from kafkasim.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse

_SIZE = struct.Struct(">i")
MIN_REAUTH_INTERVAL_MS = 1000.0   # KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS
HANDSHAKE_OR_VERSIONS, HANDSHAKE, AUTHENTICATE, COMPLETE, FAILED = (
    "HANDSHAKE_OR_VERSIONS_REQUEST", "HANDSHAKE_REQUEST", "AUTHENTICATE", "COMPLETE", "FAILED")


class Outcome(NamedTuple):
    reply: bytes | None = None   # a size-prefixed frame to write
    close: bool = False          # then close the connection
    forward: bool = False        # process the frame as an ordinary request (ApiVersions)
    reason: str = ""             # why it closes (the trace)
    # An authentication failure (Kafka's AuthenticationException): the answer and the close wait
    # connection.failed.authentication.delay.ms, as Kafka delays them to slow down password guessing.
    auth_failure: bool = False


def api_name(api_key: int) -> str:
    """Kafka's ApiKeys constant name (METADATA, API_VERSIONS, ...)."""
    try:
        return re.sub(r"(?<!^)(?=[A-Z])", "_", A.api_info(api_key).name).upper()
    except ProtocolError:
        return str(api_key)


def encode_response(api_key: int, version: int, correlation_id: int, body: Any) -> bytes:
    parts: list[Any] = []
    ResponseHeader(correlation_id=correlation_id).write(parts.append, A.response_header_version(api_key, version))
    body.write(parts.append, version)
    data = b"".join(bytes(p) for p in parts)
    return _SIZE.pack(len(data)) + data


class SaslAuthenticator:
    def __init__(self, security: ListenerSecurity, credentials: CredentialLookup, nonce: Callable[[], str],
                 now_ms: Callable[[], float]) -> None:
        self.security, self.credentials, self.nonce, self.now_ms = security, credentials, nonce, now_ms
        self.state = HANDSHAKE_OR_VERSIONS
        self.kafka_headers = True
        self.mechanism = ""
        self.server: SaslServer | None = None
        self.principal: KafkaPrincipal | None = None
        self.expires_at: float | None = None
        self.reauth_started: float | None = None
        self.previous: tuple[str, KafkaPrincipal] | None = None   # re-authenticating: (mechanism, principal)
        self.bad_mechanism = ""

    @property
    def complete(self) -> bool:
        return self.state == COMPLETE

    def expired(self) -> bool:
        return self.expires_at is not None and self.now_ms() > self.expires_at

    def begin_reauthentication(self) -> bool:
        """A SaslHandshake on an authenticated connection: re-authenticate if the session has a
        lifetime and the last re-authentication began >= 1 s ago (else KafkaApis answers it)."""
        now = self.now_ms()
        if self.expires_at is None or (self.reauth_started is not None and
                                       now - self.reauth_started < MIN_REAUTH_INTERVAL_MS):
            return False
        assert self.principal is not None
        self.reauth_started, self.previous = now, (self.mechanism, self.principal)
        self.state, self.server, self.kafka_headers = HANDSHAKE, None, True
        return True

    async def receive(self, frame: bytes) -> Outcome:
        if self.state == AUTHENTICATE and not self.kafka_headers:
            return await self._raw_token(frame)
        try:
            ids = peek_request_ids(frame)
        except ProtocolError as exc:
            return self._fail(f"bad request during SASL: {exc}", auth_failure=False)
        if self.state == AUTHENTICATE:
            if ids.api_key != A.SASL_AUTHENTICATE:
                return self._fail(f"Unexpected Kafka request of type {api_name(ids.api_key)} during SASL "
                                  f"authentication.", _illegal_state_response(frame))
            return await self._authenticate(frame)
        if ids.api_key == A.API_VERSIONS and self.state == HANDSHAKE_OR_VERSIONS:
            # Answered by KafkaApis. Only a supported version moves on to the handshake: a client
            # told UNSUPPORTED_VERSION asks again at a lower one (franz-go starts at v5).
            if 0 <= ids.api_version <= A.api_info(A.API_VERSIONS).max_version:
                self.state = HANDSHAKE
            return Outcome(forward=True)
        if ids.api_key == A.API_VERSIONS:
            return self._fail(f"Unexpected ApiVersions request received during SASL authentication state "
                              f"{self.state}", auth_failure=False)
        if ids.api_key != A.SASL_HANDSHAKE:
            return self._fail(f"Unexpected Kafka request of type {api_name(ids.api_key)} during SASL handshake.")
        return self._handshake(frame)

    def _fail(self, reason: str, reply: bytes | None = None, auth_failure: bool = True) -> Outcome:
        self.state = FAILED
        return Outcome(reply=reply, close=True, reason=reason, auth_failure=auth_failure)

    def _parse(self, frame: bytes) -> tuple[Any, Any] | None:
        try:
            header, body = parse_request_frame(frame)
            if not 0 <= header.request_api_version <= A.api_info(header.request_api_key).max_version:
                return None
            request, _ = A.api_info(header.request_api_key).request.read(body, 0, header.request_api_version)
            return header, request
        except ProtocolError:
            return None

    def _handshake(self, frame: bytes) -> Outcome:
        parsed = self._parse(frame)
        if parsed is None or parsed[0].request_api_version > 1:
            return self._fail("malformed or unsupported SaslHandshake request")
        header, req = parsed
        assert isinstance(req, SaslHandshakeRequest)
        version, enabled = header.request_api_version, list(self.security.mechanisms)
        self.kafka_headers = version >= 1
        if req.mechanism not in enabled:
            reply = encode_response(A.SASL_HANDSHAKE, version, header.correlation_id, SaslHandshakeResponse(
                error_code=E.UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled))
            return self._fail(f"Unsupported SASL mechanism {req.mechanism}", reply)
        reply = encode_response(A.SASL_HANDSHAKE, version, header.correlation_id,
                                SaslHandshakeResponse(error_code=E.NONE, mechanisms=enabled))
        if self.previous is not None and req.mechanism != self.previous[0]:
            self.bad_mechanism = (f"SASL mechanism '{req.mechanism}' requested by client is not supported for "
                                  f"re-authentication of mechanism '{self.previous[0]}'")
        self.mechanism, self.state = req.mechanism, AUTHENTICATE
        self.server = self._server(req.mechanism)
        return Outcome(reply=reply)

    def _server(self, mechanism: str) -> SaslServer:
        if mechanism == PLAIN:
            return PlainSaslServer(self.security.plain_users)
        assert mechanism in HASHES
        return ScramSaslServer(mechanism, self.credentials, self.nonce)

    async def _evaluate(self, token: bytes) -> tuple[bytes, int]:
        """The server's answer and, once complete, the session lifetime (raises on failure)."""
        if self.bad_mechanism:
            raise SaslAuthenticationError(self.bad_mechanism)
        assert self.server is not None
        challenge = await self.server.evaluate(token)
        if not self.server.complete:
            return challenge, 0
        principal = KafkaPrincipal("User", self.server.authorization_id)
        if self.previous is not None and self.previous[1] != principal:
            old = self.previous[1]
            raise SaslAuthenticationError(f"Cannot change principals during re-authentication from "
                                          f"{old.principal_type}.{old.name}: {principal.principal_type}."
                                          f"{principal.name}")
        lifetime = max(0, self.security.reauth_ms.get(self.mechanism, 0))
        self.expires_at = self.now_ms() + lifetime if lifetime > 0 else None
        self.principal, self.state, self.previous = principal, COMPLETE, None
        return challenge, lifetime

    def _failure_text(self, exc: SaslError) -> str:
        if isinstance(exc, SaslAuthenticationError):
            return str(exc)
        what = "re-authentication" if self.previous is not None else "authentication"
        return f"Authentication failed during {what} due to invalid credentials with SASL mechanism {self.mechanism}"

    async def _authenticate(self, frame: bytes) -> Outcome:
        parsed = self._parse(frame)
        if parsed is None:
            return self._fail("malformed or unsupported SaslAuthenticate request")
        header, req = parsed
        assert isinstance(req, SaslAuthenticateRequest)
        version, cid = header.request_api_version, header.correlation_id
        try:
            challenge, lifetime = await self._evaluate(bytes(req.auth_bytes))
        except SaslError as exc:
            text = self._failure_text(exc)
            reply = encode_response(A.SASL_AUTHENTICATE, version, cid, SaslAuthenticateResponse(
                error_code=E.SASL_AUTHENTICATION_FAILED, error_message=text))
            return self._fail(f"{text} ({exc})", reply)
        return Outcome(reply=encode_response(A.SASL_AUTHENTICATE, version, cid, SaslAuthenticateResponse(
            error_code=E.NONE, auth_bytes=challenge, session_lifetime_ms=lifetime)))

    async def _raw_token(self, token: bytes) -> Outcome:
        """SaslHandshake v0: bare tokens, no Kafka header; a failure just closes."""
        try:
            challenge, _ = await self._evaluate(token)
        except SaslError as exc:
            return self._fail(f"{self._failure_text(exc)} ({exc})")
        return Outcome(reply=_SIZE.pack(len(challenge)) + challenge)


def _illegal_state_response(frame: bytes) -> bytes | None:
    """The request's error response with ILLEGAL_SASL_STATE (Kafka's getErrorResponse): its
    top-level error code where it has one; nothing for a request that cannot be read."""
    try:
        header, _ = parse_request_frame(frame)
        response = A.api_info(header.request_api_key).response()
    except (ProtocolError, TypeError):
        return None
    if "error_code" in type(response)._FIELD_NAMES:
        setattr(response, "error_code", E.ILLEGAL_SASL_STATE)  # noqa: B010 (a generated field, per message)
    return encode_response(header.request_api_key, header.request_api_version, header.correlation_id, response)
