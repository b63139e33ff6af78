"""SCRAM credential APIs — DescribeUserScramCredentials 0, AlterUserScramCredentials 0 — as a
Kafka 3.9.1 broker in ZooKeeper mode answers them (ZkAdminManager, checked with `realkafka`).

Storage: the credential is a key of the user's entity config, beside its quotas
(zk.entity_config):

  /config/users/<sanitized user>   {"version":1,"config":{"SCRAM-SHA-256":"<credential>",...}}
    credential (ScramCredentialUtils.credentialToString, base64 standard with padding):
      salt=<salt>,stored_key=<H(HMAC(salted, "Client Key"))>,server_key=<HMAC(salted, "Server Key")>,iterations=<n>
    with H / HMAC the mechanism's hash (SHA-256 or SHA-512). The client sends the salted
    password; the broker keeps only the derived keys.

Alter: first every illegal request (empty user, unknown mechanism, iterations outside
[4096, 16384]) fails its user; then a user naming one (user, mechanism) twice fails; then a
deletion of a credential the user lacks; the rest are applied (deletions, then upsertions) and
written, one znode (and one change notification) per user. Answers in that order; a user's
answer appears once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafkasim.broker.security import scram
from kafkasim.broker.zk.entity_config import USERS, EntityConfigStore
from kafkasim.broker.zk.java_compat import desanitize, sanitize
from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
)
from kafkasim.protocol.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from kafkasim.protocol.messages.headers import RequestHeader
from kafkasim.protocol.primitives import Message

if TYPE_CHECKING:
    from kafkasim.runtime.api import NodeRuntime

VERSIONS: dict[int, tuple[int, int]] = {A.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
                                        A.ALTER_USER_SCRAM_CREDENTIALS: (0, 0)}
# ScramMechanism type -> (mechanism name, hash); UNKNOWN is 0.
MECHANISMS: dict[int, tuple[str, str]] = {1: ("SCRAM-SHA-256", "sha256"), 2: ("SCRAM-SHA-512", "sha512")}
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384
USERNAME_EMPTY = "Username must not be empty"
UNKNOWN_MECHANISM = "Unknown SCRAM mechanism"
DESCRIBE_MISSING = "Attempt to describe a user credential that does not exist"


def credential_string(mechanism: int, salt: bytes, salted_password: bytes, iterations: int) -> str:
    """ScramFormatter.generateCredential + ScramCredentialUtils.credentialToString."""
    return scram.credential_string(MECHANISMS[mechanism][0], salt, salted_password, iterations)


def credential_iterations(text: str) -> int:
    """ScramCredentialUtils.credentialFromString's iterations."""
    fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
    return int(fields["iterations"])


def _illegal(name: str, mechanism: int, iterations: int | None) -> str | None:
    """Why an upsertion (iterations given) or a deletion is illegal, or None."""
    if name == "":
        return USERNAME_EMPTY
    if mechanism not in MECHANISMS:
        return UNKNOWN_MECHANISM
    if iterations is not None and iterations > MAX_ITERATIONS:
        return "Too many iterations"
    if iterations is not None and iterations < MIN_ITERATIONS:
        return "Too few iterations"
    return None


class ScramApis:
    def __init__(self, rt: NodeRuntime, store: EntityConfigStore) -> None:
        self.rt = rt
        self.store = store

    def handlers(self) -> dict[int, Any]:
        return {A.DESCRIBE_USER_SCRAM_CREDENTIALS: self.describe, A.ALTER_USER_SCRAM_CREDENTIALS: self.alter}

    # ---------------------------------------------------------------- Alter
    async def alter(self, header: RequestHeader, req: AlterUserScramCredentialsRequest) -> Message:
        results: list[tuple[str, int, str | None]] = []
        illegal: dict[str, str] = {}
        for d in req.deletions:
            msg = _illegal(d.name, d.mechanism, None)
            if msg is not None:
                illegal[d.name] = msg
        for u in req.upsertions:
            msg = _illegal(u.name, u.mechanism, u.iterations)
            if msg is not None:
                illegal[u.name] = msg
        for user, msg in illegal.items():
            code = E.UNSUPPORTED_SASL_MECHANISM if msg == UNKNOWN_MECHANISM else E.UNACCEPTABLE_CREDENTIAL
            results.append((user, code, msg))
        pairs = [(u.name, u.mechanism) for u in req.upsertions if u.name not in illegal] + \
                [(d.name, d.mechanism) for d in req.deletions if d.name not in illegal]
        duplicated = list(dict.fromkeys(p[0] for p in pairs if pairs.count(p) > 1))
        results += [(user, E.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
                    for user in duplicated]
        users = list(dict.fromkeys(p[0] for p in pairs if p[0] not in duplicated))
        configs = {user: await self.store.fetch(USERS, sanitize(user)) for user in users}
        missing = list(dict.fromkeys(d.name for d in req.deletions
                                     if d.name in configs and MECHANISMS[d.mechanism][0] not in configs[d.name]))
        results += [(user, E.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
                    for user in missing]
        to_alter = [user for user in users if user not in missing]
        for d in req.deletions:
            if d.name in to_alter:
                configs[d.name].pop(MECHANISMS[d.mechanism][0], None)
        for u in req.upsertions:
            if u.name in to_alter:
                configs[u.name][MECHANISMS[u.mechanism][0]] = credential_string(
                    u.mechanism, u.salt, u.salted_password, u.iterations)
        for user in to_alter:
            await self.store.change(USERS, sanitize(user), configs[user])
            self.rt.trace("scram_credentials_changed", user=user,
                          mechanisms=sorted(k for k in configs[user] if k.startswith("SCRAM-")))
        results += [(user, E.NONE, "") for user in to_alter]
        R = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
        return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=[
            R(user=user, error_code=code, error_message=msg) for user, code, msg in results])

    # ---------------------------------------------------------------- Describe
    async def describe(self, header: RequestHeader, req: DescribeUserScramCredentialsRequest) -> Message:
        R = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
        names = None if not req.users else [u.name for u in req.users]
        found: dict[str, Any] = {}
        if names is None:
            for sanitized, props in (await self.store.fetch_all(USERS)).items():
                user = desanitize(sanitized)
                if _has_credential(props):
                    found[user] = R(user=user, error_code=E.NONE, error_message="", credential_infos=_infos(props))
            results = [found[user] for user in sorted(found)]
        else:
            for user in dict.fromkeys(n for n in names if n == ""):
                found[user] = R(user=user, error_code=E.RESOURCE_NOT_FOUND, error_message=USERNAME_EMPTY)
            for user in dict.fromkeys(n for n in names if names.count(n) > 1 and n != ""):
                found[user] = R(user=user, error_code=E.DUPLICATE_RESOURCE, error_message="Cannot describe SCRAM "
                                f"credentials for the same user twice in a single request: {user}")
            for user in names:
                if user in found:
                    continue
                props = await self.store.fetch(USERS, sanitize(user))
                if _has_credential(props):
                    found[user] = R(user=user, error_code=E.NONE, error_message="", credential_infos=_infos(props))
                else:
                    found[user] = R(user=user, error_code=E.RESOURCE_NOT_FOUND,
                                    error_message=f"{DESCRIBE_MISSING}: {user}")
            results = [found[user] for user in dict.fromkeys(names)]
        return DescribeUserScramCredentialsResponse(throttle_time_ms=0, error_code=E.NONE, error_message="",
                                                    results=results)


def _has_credential(props: dict[str, str]) -> bool:
    return any(name in props for name, _ in MECHANISMS.values())


def _infos(props: dict[str, str]) -> list[Any]:
    I = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult.CredentialInfo  # noqa: E741
    return [I(mechanism=mech, iterations=credential_iterations(props[name]))
            for mech, (name, _) in sorted(MECHANISMS.items()) if name in props]
