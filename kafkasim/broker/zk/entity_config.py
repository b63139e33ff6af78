"""Entity config znodes and their change notifications, as Kafka's AdminZkClient and
KafkaZkClient keep them (ZooKeeper mode):

  /config/topics/<topic>                         topic overrides
  /config/brokers/<id>|<default>                 dynamic broker configs
  /config/users/<user>                           user quotas and SCRAM credentials
  /config/users/<user>/clients/<client-id>       <user, client-id> quotas
  /config/clients/<client-id>                    client-id quotas
  /config/ips/<ip>                               connection-rate quotas
    data: {"version":1,"config":{...}} — the keys in java.util.Properties iteration order
    (java_compat.java_hash_order), every value a string; user and client ids sanitized
    (java_compat.sanitize), `<default>` for the default entity.
  /config/changes/config_change_<10-digit seq>   {"version":2,"entity_path":"<type>/<name>"}
    (persistent sequential), written after every change so each broker re-reads the entity.

A quota entity whose config becomes empty is deleted instead of written, when it has no
children (AdminZkClient.tryCleanQuotaNodes): for <user, client-id> the `clients` node goes too
when that client was its only child, and the user node with it when it holds no config and no
other child. Parents created on the way (`/config/users/<u>/clients`) hold no data.
"""

from __future__ import annotations

import json
from typing import Any

from kafkasim.broker.zk.java_compat import java_hash_order
from kafkasim.runtime.api import NoNodeError, NotEmptyError, ZkClient

CONFIG_ROOT = "/config"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
DEFAULT_ENTITY = "<default>"
TOPICS, BROKERS, USERS, CLIENTS, IPS = "topics", "brokers", "users", "clients", "ips"
QUOTA_TYPES = frozenset({USERS, CLIENTS, IPS})


def _dump(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def entity_config_json(config: dict[str, str]) -> bytes:
    """ConfigEntityZNode.encode: the Properties as Jackson writes them."""
    return _dump({"version": 1, "config": {k: config[k] for k in java_hash_order(config, concurrent=True)}})


def config_change_json(entity_path: str) -> bytes:
    return _dump({"version": 2, "entity_path": entity_path})


def entity_path(entity_type: str, sanitized_name: str) -> str:
    return f"{CONFIG_ROOT}/{entity_type}/{sanitized_name}"


class EntityConfigStore:
    """AdminZkClient's entity-config half: fetch, change (with the notification), clean."""

    def __init__(self, zk: ZkClient) -> None:
        self.zk = zk

    async def fetch(self, entity_type: str, sanitized_name: str) -> dict[str, str]:
        """fetchEntityConfig: the config in stored order ({} when absent or empty)."""
        try:
            data, _ = await self.zk.get(entity_path(entity_type, sanitized_name))
        except NoNodeError:
            return {}
        if not data:
            return {}
        config = json.loads(data).get("config") or {}
        return {str(k): str(v) for k, v in config.items()}

    async def children(self, path: str) -> list[str]:
        try:
            return sorted(await self.zk.get_children(path))
        except NoNodeError:
            return []

    async def fetch_all(self, entity_type: str) -> dict[str, dict[str, str]]:
        """fetchAllEntityConfigs: every child of /config/<type> (sanitized name -> config)."""
        return {name: await self.fetch(entity_type, name)
                for name in await self.children(f"{CONFIG_ROOT}/{entity_type}")}

    async def fetch_all_user_clients(self) -> dict[str, dict[str, str]]:
        """fetchAllChildEntityConfigs(users, clients): '<user>/clients/<client>' -> config."""
        out: dict[str, dict[str, str]] = {}
        for user in await self.children(f"{CONFIG_ROOT}/{USERS}"):
            for client in await self.children(f"{CONFIG_ROOT}/{USERS}/{user}/{CLIENTS}"):
                name = f"{user}/{CLIENTS}/{client}"
                out[name] = await self.fetch(USERS, name)
        return out

    async def change(self, entity_type: str, sanitized_name: str, config: dict[str, str],
                     is_user_client_id: bool = False) -> None:
        """changeEntityConfig: write (or, for an emptied quota entity, clean) the znode, then
        the change notification."""
        cleaned = False
        if entity_type in QUOTA_TYPES and not config:
            cleaned = await self._try_clean_quota_nodes(entity_type, sanitized_name, is_user_client_id)
        if not cleaned:
            await self._set_or_create(entity_path(entity_type, sanitized_name), entity_config_json(config))
        await self.zk.create(f"{CONFIG_CHANGES}/{CONFIG_CHANGE_PREFIX}",
                             config_change_json(f"{entity_type}/{sanitized_name}"), sequential=True, makepath=True)

    async def _set_or_create(self, path: str, data: bytes) -> None:
        try:
            await self.zk.set(path, data)
            return
        except NoNodeError:
            pass  # (no await in an except block: kafka_zk_client._get_or_none says why)
        await self.zk.create(path, data, makepath=True)

    async def _try_clean_quota_nodes(self, entity_type: str, name: str, is_user_client_id: bool) -> bool:
        path = entity_path(entity_type, name)
        if await self.children(path):
            return False
        to_delete = path
        if is_user_client_id:
            user, client = name.split("/", 1)[0], name.rsplit("/", 1)[1]
            clients_path = entity_path(USERS, f"{user}/{CLIENTS}")
            if await self.children(clients_path) == [client]:
                to_delete = clients_path
                user_path = entity_path(USERS, user)
                if not await self.fetch(USERS, user) and await self.children(user_path) == [CLIENTS]:
                    to_delete = user_path
        try:
            await self.zk.delete(to_delete, recursive=True)
        except (NoNodeError, NotEmptyError):
            pass  # KafkaZkClient.deletePath ignores a missing node
        return True
