"""The client side of a secured connection: TLS (the runtime's seam wraps the stream) and SASL as
Kafka's SaslClientAuthenticator speaks it — SaslHandshake v1 naming the mechanism, then each token
in a SaslAuthenticate v2 — for PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802/7677). What the
broker's inter-broker clients use on a secured inter-broker listener (replica fetchers, the
controller's channels, the transaction marker sender), with the broker's own credentials.

A refused login raises AuthenticationFailed (a NetworkError: callers back off and reconnect, as
Kafka's NetworkClient does on an authentication failure).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass
from typing import Any

from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.framing import encode_request
from kafkasim.protocol.messages.headers import RequestHeader, ResponseHeader
from kafkasim.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from kafkasim.protocol.messages.sasl_handshake import SaslHandshakeRequest
from kafkasim.runtime.api import NetworkError, Stream, TlsSettings

SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MAX_RESPONSE_BYTES = 1 << 20


class AuthenticationFailed(NetworkError):
    """The broker refused the login (SASL_AUTHENTICATION_FAILED, an unsupported mechanism, a
    SCRAM server signature that does not verify)."""


@dataclass(frozen=True)
class SaslCredentials:
    mechanism: str   # PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
    username: str
    password: str


@dataclass(frozen=True)
class ChannelSecurity:
    """How to open a connection: TLS material (None: plaintext), SASL credentials (None: no
    SASL), and which of a broker's listeners to connect to."""

    tls: TlsSettings | None = None
    sasl: SaslCredentials | None = None
    listener: str = ""   # the listener these connect to (the broker's inter-broker listener name)


class _Exchange:
    """Request/response on a stream before anything else uses it (no pipelining)."""

    def __init__(self, stream: Stream, client_id: str) -> None:
        self.stream, self.client_id, self.corr = stream, client_id, 0

    async def call(self, api_key: int, version: int, body: Any) -> Any:
        self.corr += 1
        header = RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=self.corr,
                               client_id=self.client_id)
        await self.stream.write(encode_request(header, body))
        frame = memoryview(await self.stream.read_frame(MAX_RESPONSE_BYTES))
        rh, end = ResponseHeader.read(frame, 0, A.response_header_version(api_key, version))
        if rh.correlation_id != self.corr:
            raise AuthenticationFailed(f"SASL: correlation id {rh.correlation_id} != {self.corr}")
        return A.api_info(api_key).response.decode(frame[end:], version)


async def authenticate(stream: Stream, creds: SaslCredentials, client_id: str, nonce: str) -> None:
    """Log in on a fresh connection; AuthenticationFailed if the broker refuses."""
    ex = _Exchange(stream, client_id)
    hs = await ex.call(A.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism=creds.mechanism))
    if hs.error_code != E.NONE:
        raise AuthenticationFailed(f"SASL mechanism {creds.mechanism} refused (error {hs.error_code}); the broker "
                                   f"enables {', '.join(hs.mechanisms)}")
    if creds.mechanism == "PLAIN":
        await _token(ex, f"\x00{creds.username}\x00{creds.password}".encode())
        return
    if creds.mechanism not in SCRAM_HASHES:
        raise AuthenticationFailed(f"SASL mechanism {creds.mechanism}: kafkasim's clients speak PLAIN and SCRAM")
    scram = _ScramClient(SCRAM_HASHES[creds.mechanism], creds.username, creds.password, nonce)
    server_first = await _token(ex, scram.first())
    server_final = await _token(ex, scram.final(server_first))
    scram.verify(server_final)


async def _token(ex: _Exchange, token: bytes) -> bytes:
    resp = await ex.call(A.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=token))
    if resp.error_code != E.NONE:
        raise AuthenticationFailed(f"SASL authentication failed (error {resp.error_code}): {resp.error_message}")
    return bytes(resp.auth_bytes)


class _ScramClient:
    """RFC 5802's client: first message, final message with the proof, server signature check."""

    def __init__(self, digest: str, user: str, password: str, nonce: str) -> None:
        self.digest, self.password, self.nonce = digest, password, nonce
        self.first_bare = f"n={user.replace('=', '=3D').replace(',', '=2C')},r={nonce}"
        self.server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self.first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        fields = dict(p.split("=", 1) for p in server_first.decode().split(",") if "=" in p)
        if not fields.get("r", "").startswith(self.nonce) or "s" not in fields or "i" not in fields:
            raise AuthenticationFailed(f"SCRAM: unexpected server-first-message {server_first!r}")
        salted = hashlib.pbkdf2_hmac(self.digest, self.password.encode(), base64.b64decode(fields["s"]),
                                     int(fields["i"]))
        client_key = hmac.new(salted, b"Client Key", self.digest).digest()
        stored_key = hashlib.new(self.digest, client_key).digest()
        without_proof = f"c=biws,r={fields['r']}"
        auth_message = f"{self.first_bare},{server_first.decode()},{without_proof}".encode()
        signature = hmac.new(stored_key, auth_message, self.digest).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac.new(salted, b"Server Key", self.digest).digest()
        self.server_signature = hmac.new(server_key, auth_message, self.digest).digest()
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        text = server_final.decode(errors="replace")
        if not text.startswith("v=") or base64.b64decode(text[2:]) != self.server_signature:
            raise AuthenticationFailed(f"SCRAM: the server's signature does not verify ({text!r})")
