"""SCRAM credentials where Kafka keeps them in ZooKeeper mode: the mechanism's key in the user's
entity config (/config/users/<sanitized user>), read at each authentication — so a credential
AlterUserScramCredentials writes (on any broker) takes effect at the next login, as Kafka's
change notifications make it."""

from __future__ import annotations

from kafkasim.broker.security.scram import CredentialLookup
from kafkasim.broker.zk.entity_config import USERS, EntityConfigStore
from kafkasim.broker.zk.java_compat import sanitize
from kafkasim.runtime.api import CoordinationError, ZkClient


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
