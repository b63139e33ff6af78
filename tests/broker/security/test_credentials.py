"""SCRAM credentials in ZooKeeper as `kafka-configs --zookeeper ... --add-config
'SCRAM-SHA-512=[password=...]'` writes them (what `kafkasim scram-credential` runs): the credential
string, the salt's form, ConfigCommand's refusals, the znode and its change notification."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kafkasim.broker.security.credentials import add_scram_credential, check_scram_request, scram_salt
from kafkasim.broker.security.scram import credential_string, salted_password
from kafkasim.broker.zk.entity_config import EntityConfigStore
from kafkasim.runtime.rng import SeededRng
from kafkasim.runtime.sim.world import SimWorld

pytestmark = pytest.mark.sim

# What Kafka 3.9.1's ConfigCommand wrote (realkafka, `--add-config 'SCRAM-SHA-512=[password=broker-secret]'`)
# with the salt its SecureRandom drew: b"oz1rh2fcd00t6s9998y1s0u99".
KAFKA_SALT = b"oz1rh2fcd00t6s9998y1s0u99"
KAFKA_CREDENTIAL = (
    "salt=b3oxcmgyZmNkMDB0NnM5OTk4eTFzMHU5OQ==,stored_key=cV6KqZMkITWwaxHKnhY/JDOGuLzntoc1I3UFPjPoLwTYv4RiDjcDV+7nw"
    "SfUzht9XFYC2xpHdBam+fr6Yv5dZg==,server_key=qhzM2dOaL/ZsKXy4quE/cvL29CAAg48Yy2qJ2NsoxDI9UJVrVOenFkdgAnHUheeiNx3o"
    "/PQXAPcxA7xGWQoB+A==,iterations=4096")


def test_the_credential_is_the_one_kafka_writes_for_the_same_salt() -> None:
    salted = salted_password("SCRAM-SHA-512", "broker-secret", KAFKA_SALT, 4096)
    assert credential_string("SCRAM-SHA-512", KAFKA_SALT, salted, 4096) == KAFKA_CREDENTIAL


def test_the_salt_is_a_130_bit_number_in_base_36() -> None:
    rng = SeededRng(1, "salt")
    salts = [scram_salt(rng) for _ in range(50)]
    assert len(set(salts)) == 50
    assert all(set(s.decode()) <= set("0123456789abcdefghijklmnopqrstuvwxyz") and 20 <= len(s) <= 26 for s in salts)
    assert max(int(s, 36) for s in salts) < 2**130


def test_configcommands_refusals() -> None:
    assert check_scram_request("u", "SCRAM-SHA-256", 4096) is None
    assert check_scram_request("u", "SCRAM-SHA-512", 100) == \
        "Iterations 100 is less than the minimum 4096 required for SCRAM_SHA_512"   # Kafka's words
    assert check_scram_request("u", "SCRAM-SHA-512", 20_000) is None               # no maximum, as Kafka
    assert "unknown SCRAM mechanism PLAIN" in (check_scram_request("u", "PLAIN", 4096) or "")
    assert check_scram_request("", "SCRAM-SHA-512", 4096) is not None


def test_the_credential_joins_the_users_config_with_a_change_notification() -> None:
    world = SimWorld(3)
    rt = world.add_node("admin").runtime
    out: dict[str, Any] = {}

    async def main() -> None:
        zk = await rt.coordination.connect(6_000)
        await EntityConfigStore(zk).change("users", "app%40corp", {"producer_byte_rate": "1000"})
        out["path"] = await add_scram_credential(zk, "app@corp", "SCRAM-SHA-512", "pw", 4096, KAFKA_SALT)
        out["znode"] = json.loads((await zk.get("/config/users/app%40corp"))[0])
        changes = sorted(await zk.get_children("/config/changes"))
        out["last_change"] = (await zk.get(f"/config/changes/{changes[-1]}"))[0]
        out["changes"] = len(changes)

    rt.spawn(main())
    world.run(10_000)
    assert out["path"] == "/config/users/app%40corp"   # sanitized, as Kafka's
    expected = credential_string("SCRAM-SHA-512", KAFKA_SALT, salted_password("SCRAM-SHA-512", "pw", KAFKA_SALT, 4096),
                                 4096)
    assert out["znode"] == {"version": 1, "config": {"producer_byte_rate": "1000", "SCRAM-SHA-512": expected}}
    assert out["changes"] == 2 and out["last_change"] == b'{"version":2,"entity_path":"users/app%40corp"}'
