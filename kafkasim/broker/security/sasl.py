"""SASL server mechanisms: the interface the authenticator drives, its two failure kinds, and
PLAIN (RFC 4616, Kafka's PlainSaslServer).

Failures: a SaslAuthenticationError's message goes to the client as it is (Kafka's
SaslAuthenticationException); a SaslError's stays on the broker and the client reads Kafka's
generic "Authentication failed during authentication due to invalid credentials with SASL
mechanism <m>" (it may say whether a user exists).

PLAIN's one message: [authzid] NUL authcid NUL password (UTF-8).
"""

from __future__ import annotations

import abc
import hmac


class SaslError(Exception):
    """A failed exchange whose detail the client must not learn (javax SaslException)."""


class SaslAuthenticationError(SaslError):
    """A failed exchange whose message the client reads (SaslAuthenticationException)."""


class SaslServer(abc.ABC):
    mechanism: str
    complete: bool = False
    authorization_id: str = ""

    @abc.abstractmethod
    async def evaluate(self, token: bytes) -> bytes:
        """The challenge for the client's token (b"" when there is nothing to say); raises
        SaslError / SaslAuthenticationError on failure."""


class PlainSaslServer(SaslServer):
    mechanism = "PLAIN"

    def __init__(self, users: dict[str, str]) -> None:
        self.users = users

    async def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationError("Unexpected challenge in Sasl server state COMPLETE")
        parts = token.decode("utf-8", errors="replace").split("\x00", 3)
        if len(parts) != 3:
            raise SaslAuthenticationError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        authzid, username, password = parts
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self.users.get(username)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationError("Authentication failed: Client requested an authorization id that is "
                                          "different from username")
        self.authorization_id = username
        self.complete = True
        return b""
