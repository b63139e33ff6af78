"""A minimal SASL client for the tests: framing, PLAIN's token and SCRAM's client side (RFC 5802),
written from the RFC — not from the server under test — so the two can disagree."""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

from kafkasim.protocol import api as A
from kafkasim.protocol.framing import encode_request
from kafkasim.protocol.messages.headers import RequestHeader
from kafkasim.protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from kafkasim.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from kafkasim.runtime.api import Stream

HASH = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


def request(api_key: int, version: int, body: Any, corr: int = 1) -> bytes:
    return encode_request(RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=corr,
                                        client_id="sasl-test"), body)


def decode_response(frame: bytes, api_key: int, version: int) -> Any:
    """The body of a response frame (after its size), past the response header."""
    offset = 4 + (1 if A.response_header_version(api_key, version) >= 1 else 0)   # correlation id, tags
    return A.api_info(api_key).response.decode(frame[offset:], version)


def plain_token(user: str, password: str, authzid: str = "") -> bytes:
    return f"{authzid}\x00{user}\x00{password}".encode()


class ScramClient:
    def __init__(self, mechanism: str, user: str, password: str, nonce: str = "clientnonce123") -> None:
        self.digest, self.user, self.password, self.nonce = HASH[mechanism], user, password, nonce
        self.first_bare = f"n={user.replace('=', '=3D').replace(',', '=2C')},r={nonce}"
        self.server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self.first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        fields = dict(p.split("=", 1) for p in server_first.decode().split(","))
        salted = hashlib.pbkdf2_hmac(self.digest, self.password.encode(), base64.b64decode(fields["s"]),
                                     int(fields["i"]))
        client_key = hmac.new(salted, b"Client Key", self.digest).digest()
        stored_key = hashlib.new(self.digest, client_key).digest()
        without_proof = f"c=biws,r={fields['r']}"
        auth = f"{self.first_bare},{server_first.decode()},{without_proof}".encode()
        signature = hmac.new(stored_key, auth, self.digest).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac.new(salted, b"Server Key", self.digest).digest()
        self.server_signature = hmac.new(server_key, auth, self.digest).digest()
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


async def exchange(stream: Stream, api_key: int, version: int, body: Any, corr: int = 1) -> Any:
    await stream.write(request(api_key, version, body, corr))
    return decode_response(await stream.read_frame(1 << 20), api_key, version)


async def login(stream: Stream, mechanism: str, user: str, password: str, version: int = 2) -> Any:
    """Handshake (v1) then SaslAuthenticate at `version`; the last SaslAuthenticate response
    (an error one, or the final one). SCRAM's server signature is checked when it succeeds."""
    hs = await exchange(stream, A.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism=mechanism))
    assert isinstance(hs, SaslHandshakeResponse)
    if hs.error_code:
        return hs
    if mechanism == "PLAIN":
        return await exchange(stream, A.SASL_AUTHENTICATE, version, SaslAuthenticateRequest(
            auth_bytes=plain_token(user, password)), 2)
    client = ScramClient(mechanism, user, password)
    first = await exchange(stream, A.SASL_AUTHENTICATE, version, SaslAuthenticateRequest(auth_bytes=client.first()), 2)
    assert isinstance(first, SaslAuthenticateResponse)
    if first.error_code:
        return first
    final = await exchange(stream, A.SASL_AUTHENTICATE, version,
                           SaslAuthenticateRequest(auth_bytes=client.final(bytes(first.auth_bytes))), 3)
    if final.error_code == 0:
        assert bytes(final.auth_bytes) == b"v=" + base64.b64encode(client.server_signature)
    return final
