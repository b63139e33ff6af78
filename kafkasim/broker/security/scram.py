"""SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka's ScramSaslServer runs them, with
the credentials ZooKeeper holds (/config/users/<user>, key = mechanism name):

  salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=<n>

  client-first   gs2-header client-first-bare        "n,," "n=<user>,r=<client nonce>[,ext=...]"
  server-first   "r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>"
  client-final   "c=<base64 gs2-header>,r=<nonce>[,...],p=<base64 proof>"
  server-final   "v=<base64 server signature>"

  AuthMessage     = client-first-bare "," server-first "," client-final-without-proof
  ClientSignature = HMAC(StoredKey, AuthMessage);  ClientKey = proof XOR ClientSignature
  valid when H(ClientKey) == StoredKey;            ServerSignature = HMAC(ServerKey, AuthMessage)

A user in the SASL name escapes ',' and '=' as =2C and =3D (ScramFormatter.username).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from kafkasim.broker.security.sasl import SaslAuthenticationError, SaslError, SaslServer

HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS = 4096
_CLIENT_FIRST = re.compile(r"^n,(?:a=([^,]*))?,(n=([^,]*),r=([^,]+)(?:,.*)?)$", re.S)
_CLIENT_FINAL = re.compile(r"^(c=([^,]*),r=([^,]*)(?:,[^p][^,]*)*),p=([^,]+)$", re.S)

# (user, mechanism) -> the credential string ZooKeeper holds, or None.
CredentialLookup = Callable[[str, str], Awaitable[str | None]]


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @staticmethod
    def parse(text: str) -> ScramCredential:
        """ScramCredentialUtils.credentialFromString; ValueError for a malformed one."""
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        try:
            return ScramCredential(base64.b64decode(fields["salt"]), base64.b64decode(fields["stored_key"]),
                                   base64.b64decode(fields["server_key"]), int(fields["iterations"]))
        except (KeyError, ValueError, binascii.Error) as exc:
            raise ValueError(f"invalid SCRAM credential: {exc}") from exc


def credential_string(mechanism: str, salt: bytes, salted_password: bytes, iterations: int) -> str:
    """ScramFormatter.generateCredential + ScramCredentialUtils.credentialToString, from the
    salted password (`mechanism`: SCRAM-SHA-256 or SCRAM-SHA-512)."""
    digest = HASHES[mechanism]
    client_key = hmac.new(salted_password, b"Client Key", digest).digest()
    stored_key = hashlib.new(digest, client_key).digest()
    server_key = hmac.new(salted_password, b"Server Key", digest).digest()
    b64 = base64.b64encode
    return (f"salt={b64(salt).decode()},stored_key={b64(stored_key).decode()},"
            f"server_key={b64(server_key).decode()},iterations={iterations}")


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """ScramFormatter.hi: PBKDF2 with the mechanism's HMAC."""
    return hashlib.pbkdf2_hmac(HASHES[mechanism], password.encode(), salt, iterations)


def sasl_name_to_user(name: str) -> str:
    return name.replace("=2C", ",").replace("=3D", "=")


class ScramSaslServer(SaslServer):
    def __init__(self, mechanism: str, lookup: CredentialLookup, nonce: Callable[[], str]) -> None:
        self.mechanism, self.lookup, self.nonce = mechanism, lookup, nonce
        self.digest = HASHES[mechanism]
        self.state = "first"
        self.credential: ScramCredential | None = None
        self.client_first_bare = self.server_first = ""

    async def evaluate(self, token: bytes) -> bytes:
        text = token.decode("utf-8", errors="replace")
        if self.state == "first":
            return await self._first(text)
        if self.state == "final":
            return self._final(text)
        raise SaslAuthenticationError(f"Unexpected challenge in Sasl server state {self.state.upper()}")

    async def _first(self, text: str) -> bytes:
        self.state = "failed"
        m = _CLIENT_FIRST.match(text)
        if m is None:
            raise SaslError(f"Invalid SCRAM client first message format: {text}")
        authzid, self.client_first_bare, sasl_name, client_nonce = m.groups()
        user = sasl_name_to_user(sasl_name)
        try:
            raw = await self.lookup(user, self.mechanism)
            self.credential = ScramCredential.parse(raw) if raw is not None else None
        except ValueError as exc:
            raise SaslError("Authentication failed: Credentials could not be obtained") from exc
        if self.credential is None:
            raise SaslError("Authentication failed: Invalid user credentials")
        if authzid and authzid != user:
            raise SaslAuthenticationError("Authentication failed: Client requested an authorization id that is "
                                          "different from username")
        if self.credential.iterations < MIN_ITERATIONS:
            raise SaslError(f"Iterations {self.credential.iterations} is less than the minimum {MIN_ITERATIONS} "
                            f"for {self.mechanism}")
        self.authorization_id = user
        salt = base64.b64encode(self.credential.salt).decode()
        self.server_first = f"r={client_nonce}{self.nonce()},s={salt},i={self.credential.iterations}"
        self.state = "final"
        return self.server_first.encode()

    def _final(self, text: str) -> bytes:
        self.state = "failed"
        m = _CLIENT_FINAL.match(text)
        if m is None:
            raise SaslError(f"Invalid SCRAM client final message format: {text}")
        without_proof, _channel, nonce, proof_b64 = m.groups()
        if not nonce.endswith(self.server_first[2:].split(",", 1)[0]):
            raise SaslError("Invalid client nonce in the final client message.")
        cred = self.credential
        assert cred is not None
        auth_message = f"{self.client_first_bare},{self.server_first},{without_proof}".encode()
        try:
            proof = base64.b64decode(proof_b64, validate=True)
        except binascii.Error as exc:
            raise SaslError("Authentication failed: Invalid client final message") from exc
        signature = hmac.new(cred.stored_key, auth_message, self.digest).digest()
        if len(proof) != len(signature):
            raise SaslError("Sasl client verification failed")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self.digest, client_key).digest(), cred.stored_key):
            raise SaslError("Invalid client credentials")
        server_signature = hmac.new(cred.server_key, auth_message, self.digest).digest()
        self.state, self.complete = "complete", True
        return b"v=" + base64.b64encode(server_signature)
