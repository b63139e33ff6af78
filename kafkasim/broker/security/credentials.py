"""SCRAM credentials where Kafka keeps them in ZooKeeper mode: the mechanism's key in the user's
entity config (/config/users/<sanitized user>), read at each authentication — so a credential
AlterUserScramCredentials writes (on any broker) takes effect at the next login, as Kafka's
change notifications make it."""

from __future__ import annotations

from kafkasim.broker.security.scram import (
    HASHES,
    MIN_ITERATIONS,
    CredentialLookup,
    credential_string,
    salted_password,
)
from kafkasim.broker.zk.entity_config import USERS, EntityConfigStore, entity_path
from kafkasim.broker.zk.java_compat import sanitize
from kafkasim.runtime.api import CoordinationError, Rng, ZkClient


def zk_credentials(zk: ZkClient) -> CredentialLookup:
    store = EntityConfigStore(zk)

    async def lookup(user: str, mechanism: str) -> str | None:
        try:
            return (await store.fetch(USERS, sanitize(user))).get(mechanism)
        except CoordinationError as exc:
            raise ValueError(f"cannot read the credentials of {user}: {exc}") from exc

    return lookup


async def no_credentials(user: str, mechanism: str) -> str | None:
    """For a socket server built without ZooKeeper (tests): no SCRAM user exists."""
    return None


def scram_salt(rng: Rng) -> bytes:
    """ScramFormatter.secureRandomBytes: a 130-bit random number written in base 36, as bytes."""
    n, digits = rng.randint(0, 2**130 - 1), "0123456789abcdefghijklmnopqrstuvwxyz"
    text = ""
    while True:
        n, d = divmod(n, 36)
        text = digits[d] + text
        if n == 0:
            return text.encode()


def check_scram_request(user: str, mechanism: str, iterations: int) -> str | None:
    """Why ConfigCommand refuses to add this credential, in its words where it has them (None:
    it adds it)."""
    if not user:
        return "the user name must not be empty"
    if mechanism not in HASHES:
        return f"unknown SCRAM mechanism {mechanism} (valid: {', '.join(sorted(HASHES))})"
    if iterations < MIN_ITERATIONS:   # no maximum: ConfigCommand checks only the minimum
        return (f"Iterations {iterations} is less than the minimum {MIN_ITERATIONS} required for "
                f"{mechanism.replace('-', '_')}")
    return None


async def add_scram_credential(zk: ZkClient, user: str, mechanism: str, password: str, iterations: int,
                               salt: bytes) -> str:
    """What `kafka-configs --zookeeper ... --alter --add-config '<mechanism>=[iterations=N,
    password=P]' --entity-type users --entity-name <user>` does (ConfigCommand with an
    AdminZkClient): the user's entity config read, the credential added to it (other keys kept),
    written to /config/users/<sanitized user> with a change notification. Returns the znode path."""
    store, name = EntityConfigStore(zk), sanitize(user)
    config = await store.fetch(USERS, name)
    config[mechanism] = credential_string(mechanism, salt, salted_password(mechanism, password, salt, iterations),
                                          iterations)
    await store.change(USERS, name, config)
    return entity_path(USERS, name)
