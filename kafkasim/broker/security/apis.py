"""SaslHandshake (17, v0-1) and SaslAuthenticate (36, v0-2) as KafkaApis answers them: only a
request the listener's authenticator did not take reaches here — one on a PLAINTEXT or SSL
listener, or on an authenticated SASL connection that may not re-authenticate now — and Kafka
answers it ILLEGAL_SASL_STATE (KafkaApis.handleSaslHandshakeRequest /
handleSaslAuthenticateRequest). The exchange itself is the authenticator's (authenticator.py)."""

from __future__ import annotations

from kafkasim.broker.api_registry import ApiRegistry
from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.headers import RequestHeader
from kafkasim.protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from kafkasim.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from kafkasim.protocol.primitives import Message

VERSIONS = {A.SASL_HANDSHAKE: (0, 1), A.SASL_AUTHENTICATE: (0, 2)}   # Kafka 3.9.1's
AFTER_AUTHENTICATION = "SaslAuthenticate request received after successful authentication"


async def sasl_handshake(header: RequestHeader, req: SaslHandshakeRequest) -> Message:
    return SaslHandshakeResponse(error_code=E.ILLEGAL_SASL_STATE, mechanisms=[])


async def sasl_authenticate(header: RequestHeader, req: SaslAuthenticateRequest) -> Message:
    return SaslAuthenticateResponse(error_code=E.ILLEGAL_SASL_STATE, error_message=AFTER_AUTHENTICATION)


def register(registry: ApiRegistry) -> None:
    registry.register(A.SASL_HANDSHAKE, *VERSIONS[A.SASL_HANDSHAKE], sasl_handshake)
    registry.register(A.SASL_AUTHENTICATE, *VERSIONS[A.SASL_AUTHENTICATE], sasl_authenticate)
