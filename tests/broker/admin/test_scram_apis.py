"""Describe/AlterUserScramCredentials in the simulated world, against what Kafka 3.9.1 (ZooKeeper
mode) answered and stored for the same requests (`realkafka`, the project's codec)."""

from __future__ import annotations

from typing import Any

import pytest

from kafkasim.broker.admin.scram_apis import credential_string
from kafkasim.protocol import api as A
from kafkasim.protocol.messages.alter_client_quotas import AlterClientQuotasRequest as Q
from kafkasim.protocol.messages.alter_user_scram_credentials import AlterUserScramCredentialsRequest as S
from kafkasim.protocol.messages.describe_user_scram_credentials import DescribeUserScramCredentialsRequest as D
from kafkasim.runtime.api import NodeRuntime, NoNodeError
from kafkasim.runtime.sim.world import SimWorld
from tests.broker.test_idempotence import Wire, _connect, _run

pytestmark = pytest.mark.sim

U, X = S.ScramCredentialUpsertion, S.ScramCredentialDeletion
SALT, SALTED = bytes(range(16)), bytes(range(32, 64))
# Kafka's credential for (SHA-256, SALT, SALTED, 4096), from /config/users/alice.
ALICE_256 = ("salt=AAECAwQFBgcICQoLDA0ODw==,stored_key=N8GbectG6c37zfCk0JmbIYDUFSoWQ+33DWta7y2NcPk=,"
             "server_key=WdqwubR5HAcK4TBloWoJMuacdY038KS9f4P979QOM9g=,iterations=4096")


def up(name: str, mech: int = 1, iterations: int = 4096, salted: bytes = SALTED) -> Any:
    return U(name=name, mechanism=mech, iterations=iterations, salt=SALT, salted_password=salted)


async def alter(w: Wire, ups: list[Any] = (), dels: list[Any] = ()) -> list[Any]:  # type: ignore[assignment]
    r = await w.call(A.ALTER_USER_SCRAM_CREDENTIALS, 0, S(upsertions=list(ups), deletions=list(dels)))
    return [(x.user, x.error_code, x.error_message) for x in r.results]


async def describe(w: Wire, users: list[str] | None) -> Any:
    r = await w.call(A.DESCRIBE_USER_SCRAM_CREDENTIALS, 0,
                     D(users=None if users is None else [D.UserName(name=u) for u in users]))
    return r.error_code, r.error_message, [(x.user, x.error_code, x.error_message,
                                            [(c.mechanism, c.iterations) for c in x.credential_infos])
                                           for x in r.results]


ALTERS = [
    (([up("alice"), up("carol", 2, 8192, SALTED + SALTED)], []), [("alice", 0, ""), ("carol", 0, "")]),
    (([up("zoe"), up("yan", 1, 5000), up("bea", 2, 5000)], []), [("zoe", 0, ""), ("yan", 0, ""), ("bea", 0, "")]),
    (([up("u1", 1, 100)], []), [("u1", 93, "Too few iterations")]),
    (([up("u2", 1, 20000)], []), [("u2", 93, "Too many iterations")]),
    (([up("u3", 9)], []), [("u3", 33, "Unknown SCRAM mechanism")]),
    (([up("")], []), [("", 93, "Username must not be empty")]),
    (([up("u4"), up("u4")], []), [("u4", 92, "A user credential cannot be altered twice in the same request")]),
    (([], [X(name="u5", mechanism=1)]), [("u5", 91, "Attempt to delete a user credential that does not exist")]),
    (([], [X(name="u6", mechanism=0)]), [("u6", 33, "Unknown SCRAM mechanism")]),
    (([up("u7")], [X(name="u7", mechanism=1)]),
     [("u7", 92, "A user credential cannot be altered twice in the same request")]),
    (([], [X(name="carol", mechanism=2)]), [("carol", 0, "")]),
]


def test_alter_and_describe_scram_credentials_as_kafka() -> None:
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        w = await _connect(rt)
        E = Q.EntryData
        await w.call(A.ALTER_CLIENT_QUOTAS, 1, Q(entries=[E(entity=[E.EntityData(entity_type="user", entity_name="alice")],
                                                            ops=[E.OpData(key="producer_byte_rate", value=1024)])]))
        answers = [await alter(w, ups, dels) for (ups, dels), _ in ALTERS]
        zk = servers["broker"].zk
        alice, _ = await zk.get("/config/users/alice")
        try:
            await zk.get("/config/users/carol")
            carol_gone = False
        except NoNodeError:
            carol_gone = True
        described = [await describe(w, None), await describe(w, []),
                     await describe(w, ["alice", "nobody", "", "alice", "bob"])]
        return answers, alice, carol_gone, described
    answers, alice, carol_gone, described = _run(body)
    for ((ups, dels), expected), got in zip(ALTERS, answers, strict=True):
        assert got == expected, (ups, dels)
    # The credential beside the quota, in Properties order, as Kafka keeps it.
    assert alice == ('{"version":1,"config":{"SCRAM-SHA-256":"%s","producer_byte_rate":"1024"}}' % ALICE_256).encode()
    assert carol_gone  # its only credential deleted: the user's znode is cleaned away
    everyone = [("alice", 0, "", [(1, 4096)]), ("bea", 0, "", [(2, 5000)]), ("yan", 0, "", [(1, 5000)]),
                ("zoe", 0, "", [(1, 4096)])]
    assert described[0] == described[1] == (0, "", everyone)
    assert described[2] == (0, "", [
        ("alice", 92, "Cannot describe SCRAM credentials for the same user twice in a single request: alice", []),
        ("nobody", 91, "Attempt to describe a user credential that does not exist: nobody", []),
        ("", 91, "Username must not be empty", []),
        ("bob", 91, "Attempt to describe a user credential that does not exist: bob", [])])


def test_credential_string_is_kafkas_scram_formatter() -> None:
    assert credential_string(1, SALT, SALTED, 4096) == ALICE_256
    assert credential_string(2, SALT, SALTED, 4096).startswith("salt=AAECAwQFBgcICQoLDA0ODw==,stored_key=")
    assert credential_string(2, SALT, SALTED, 4096) != credential_string(1, SALT, SALTED, 4096)
