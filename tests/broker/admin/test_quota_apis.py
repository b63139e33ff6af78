"""DescribeClientQuotas / AlterClientQuotas in the simulated world: the answers and the znodes
are those a Kafka 3.9.1 broker (ZooKeeper mode) gave for the same requests with `realkafka`
(captured with the project's codec over a raw socket; `realkafka zk DIR get ...` for the znodes)."""

from __future__ import annotations

from typing import Any

import pytest

from kafkasim.protocol import api as A
from kafkasim.protocol.messages.alter_client_quotas import AlterClientQuotasRequest as Q
from kafkasim.protocol.messages.describe_client_quotas import DescribeClientQuotasRequest as D
from kafkasim.runtime.api import NodeRuntime, NoNodeError
from kafkasim.runtime.sim.world import SimWorld
from tests.broker.test_idempotence import Wire, _connect, _run

pytestmark = pytest.mark.sim

EN = Q.EntryData


def ent(*pairs: tuple[str, str | None]) -> list[Any]:
    return [EN.EntityData(entity_type=t, entity_name=n) for t, n in pairs]


def op(key: str, value: float = 0.0, remove: bool = False) -> Any:
    return EN.OpData(key=key, value=value, remove=remove)


async def alter(w: Wire, entries: list[Any], version: int = 1, validate: bool = False) -> list[Any]:
    r = await w.call(A.ALTER_CLIENT_QUOTAS, version, Q(entries=entries, validate_only=validate))
    return [(e.error_code, e.error_message, [(x.entity_type, x.entity_name) for x in e.entity]) for e in r.entries]


async def describe(w: Wire, comps: list[tuple[str, int, str | None]], strict: bool = False) -> Any:
    r = await w.call(A.DESCRIBE_CLIENT_QUOTAS, 1, D(components=[
        D.ComponentData(entity_type=t, match_type=m, match=n) for t, m, n in comps], strict=strict))
    entries = None if r.entries is None else sorted((
        (tuple((x.entity_type, x.entity_name) for x in e.entity), tuple((v.key, v.value) for v in e.values))
        for e in r.entries), key=repr)
    return r.error_code, r.error_message, entries


async def znode(servers: dict[str, Any], path: str) -> bytes | None:
    try:
        data, _ = await servers["broker"].zk.get(path)
    except NoNodeError:
        return None
    return bytes(data)


# (request entries, Kafka's answer) in the order they were sent to Kafka.
ALTERS: list[tuple[list[Any], list[Any]]] = [
    ([EN(entity=ent(("user", "alice")), ops=[op("producer_byte_rate", 1024), op("consumer_byte_rate", 2048.5)])],
     [(42, "Configuration consumer_byte_rate must be a LONG value", [("user", "alice")])]),
    ([EN(entity=ent(("client-id", "c1")), ops=[op("request_percentage", 50)])], [(0, None, [("client-id", "c1")])]),
    ([EN(entity=ent(("user", "alice"), ("client-id", "c1")), ops=[op("producer_byte_rate", 100)])],
     [(0, None, [("client-id", "c1"), ("user", "alice")])]),
    ([EN(entity=ent(("user", None)), ops=[op("producer_byte_rate", 7)])], [(0, None, [("user", None)])]),
    ([EN(entity=ent(("user", None), ("client-id", None)), ops=[op("producer_byte_rate", 8)])],
     [(0, None, [("client-id", None), ("user", None)])]),
    ([EN(entity=ent(("ip", "1.2.3.4")), ops=[op("connection_creation_rate", 10)])], [(0, None, [("ip", "1.2.3.4")])]),
    ([EN(entity=ent(("ip", None)), ops=[op("connection_creation_rate", 11)])], [(0, None, [("ip", None)])]),
    ([EN(entity=ent(("user", "bob")), ops=[op("nope", 1)])],
     [(42, "Invalid configuration key nope", [("user", "bob")])]),
    ([EN(entity=ent(("topic", "bob")), ops=[op("producer_byte_rate", 1)])],
     [(42, "Unhandled client quota entity type: topic", [("topic", "bob")])]),
    ([EN(entity=ent(("user", "bob"), ("user", "x")), ops=[op("producer_byte_rate", 1)])], [(0, None, [("user", "x")])]),
    ([EN(entity=ent(("user", "bob"), ("ip", "1.1.1.1")), ops=[op("producer_byte_rate", 1)])],
     [(42, "Invalid quota entity combination, IP entity should not be used with user/client ID entity.",
       [("user", "bob"), ("ip", "1.1.1.1")])]),
    ([EN(entity=ent(("user", "bob")), ops=[op("connection_creation_rate", 1)])],
     [(42, "Invalid configuration key connection_creation_rate", [("user", "bob")])]),
    ([EN(entity=ent(("ip", "1.1.1.1")), ops=[op("producer_byte_rate", 1)])],
     [(42, "Invalid configuration key producer_byte_rate", [("ip", "1.1.1.1")])]),
    ([EN(entity=ent(("ip", "not-an-ip")), ops=[op("connection_creation_rate", 1)])],
     [(42, "not-an-ip is not a valid IP or resolvable host.", [("ip", "not-an-ip")])]),
    ([EN(entity=ent(("user", "bob")), ops=[op("producer_byte_rate", -1)])],
     [(42, "Configuration producer_byte_rate must be a LONG value", [("user", "bob")])]),
    ([EN(entity=ent(("user", "bob")), ops=[op("producer_byte_rate", 1), op("producer_byte_rate", 2)])],
     [(0, None, [("user", "bob")])]),
    ([EN(entity=[], ops=[op("producer_byte_rate", 1)])], [(42, "Invalid empty client quota entity", [])]),
    ([EN(entity=ent(("user", "zed")), ops=[op("producer_byte_rate", remove=True)])], [(0, None, [("user", "zed")])]),
    ([EN(entity=ent(("user", "")), ops=[op("producer_byte_rate", 3)])],
     [(42, "Empty user not supported", [("user", "")])]),
    ([EN(entity=ent(("user", "m1")), ops=[op("producer_byte_rate", 1)]),
      EN(entity=ent(("user", "m2")), ops=[op("nope", 1)])],
     [(0, None, [("user", "m1")]), (42, "Invalid configuration key nope", [("user", "m2")])]),
    ([EN(entity=ent(("user", "alice")), ops=[op("producer_byte_rate", 1024), op("consumer_byte_rate", 2048),
                                             op("request_percentage", 12.5), op("controller_mutation_rate", 1e7)])],
     [(0, None, [("user", "alice")])]),
    ([EN(entity=ent(("user", "we ird*/x")), ops=[op("producer_byte_rate", 5), op("request_percentage", 0.0001)])],
     [(0, None, [("user", "we ird*/x")])]),
    ([EN(entity=ent(("client-id", "c1")), ops=[op("request_percentage", remove=True)])],
     [(0, None, [("client-id", "c1")])]),
    ([EN(entity=ent(("user", "m1")), ops=[op("consumer_byte_rate", 1)]),
      EN(entity=ent(("user", "m1")), ops=[op("request_percentage", 2)])], [(0, None, [("user", "m1")])]),
    ([EN(entity=ent(("ip", "::1")), ops=[op("connection_creation_rate", 1)])],
     [(42, "%3A%3A1 is not a valid IP or resolvable host.", [("ip", "::1")])]),
    ([EN(entity=ent(("user", "sc")), ops=[op("SCRAM-SHA-256", 1)])], [(-1, None, [("user", "sc")])]),
    ([EN(entity=ent(("user", ""), ("topic", "x")), ops=[op("producer_byte_rate", 1)])],
     [(42, "Empty user not supported", [("user", ""), ("topic", "x")])]),
    ([EN(entity=ent(("client-id", "q1"), ("user", "q2"), ("ip", "1.1.1.1")), ops=[op("producer_byte_rate", 1)])],
     [(42, "Invalid quota entity combination, IP entity should not be used with user/client ID entity.",
       [("client-id", "q1"), ("user", "q2"), ("ip", "1.1.1.1")])]),
    ([EN(entity=ent(("ip", "1.2.3.4")), ops=[op("connection_creation_rate", 3e9)])],
     [(42, "Configuration connection_creation_rate must be a INT value", [("ip", "1.2.3.4")])]),
]

# What Kafka kept (`realkafka zk DIR get PATH`) after the requests above; None: no znode.
ZNODES = {
    "/config/users/alice": b'{"version":1,"config":{"request_percentage":"12.5","producer_byte_rate":"1024",'
                           b'"consumer_byte_rate":"2048","controller_mutation_rate":"1.0E7"}}',
    "/config/users/alice/clients/c1": b'{"version":1,"config":{"producer_byte_rate":"100"}}',
    "/config/users/<default>": b'{"version":1,"config":{"producer_byte_rate":"7"}}',
    "/config/users/<default>/clients/<default>": b'{"version":1,"config":{"producer_byte_rate":"8"}}',
    "/config/ips/1.2.3.4": b'{"version":1,"config":{"connection_creation_rate":"10"}}',
    "/config/ips/<default>": b'{"version":1,"config":{"connection_creation_rate":"11"}}',
    "/config/users/x": b'{"version":1,"config":{"producer_byte_rate":"1"}}',
    "/config/users/bob": b'{"version":1,"config":{"producer_byte_rate":"2"}}',
    "/config/users/m1": b'{"version":1,"config":{"request_percentage":"2.0","producer_byte_rate":"1",'
                        b'"consumer_byte_rate":"1"}}',
    "/config/users/we%20ird%2A%2Fx": b'{"version":1,"config":{"request_percentage":"1.0E-4","producer_byte_rate":"5"}}',
    "/config/users/zed": None,       # removing from nothing: nothing written, the node cleaned
    "/config/clients/c1": None,      # its last quota removed: the node deleted
    "/config/users/m2": None,
}
CHANGES = ["clients/c1", "users/alice/clients/c1", "users/<default>", "users/<default>/clients/<default>",
           "ips/1.2.3.4", "ips/<default>", "users/x", "users/bob", "users/zed", "users/m1", "users/alice",
           "users/we%20ird%2A%2Fx", "clients/c1", "users/m1", "users/m1"]


def test_alter_client_quotas_answers_and_stores_as_kafka() -> None:
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        w = await _connect(rt)
        answers = [await alter(w, entries) for entries, _ in ALTERS]
        validate = await alter(w, [EN(entity=ent(("user", "val")), ops=[op("producer_byte_rate", 1)])], validate=True)
        v0 = await alter(w, [EN(entity=ent(("user", "v0u")), ops=[op("controller_mutation_rate", 3)])], version=0)
        nodes = {path: await znode(servers, path) for path in ZNODES}
        zk = servers["broker"].zk
        names = sorted(await zk.get_children("/config/changes"))
        changes = [(await znode(servers, f"/config/changes/{n}")) for n in names]
        return answers, validate, v0, nodes, await znode(servers, "/config/users/val"), changes
    answers, validate, v0, nodes, val, changes = _run(body)
    for (entries, expected), got in zip(ALTERS, answers, strict=True):
        assert got == expected, entries
    assert validate == [(0, None, [("user", "val")])] and val is None  # validate_only writes nothing
    assert v0 == [(0, None, [("user", "v0u")])]
    assert nodes == ZNODES
    assert changes[:len(CHANGES)] == [b'{"version":2,"entity_path":"%s"}' % c.encode() for c in CHANGES]
    assert changes[-1] == b'{"version":2,"entity_path":"users/v0u"}'


def _sorted(items: list[Any]) -> list[Any]:
    return sorted(items, key=repr)


ALICE = (("request_percentage", 12.5), ("producer_byte_rate", 1024.0), ("consumer_byte_rate", 2048.0),
         ("controller_mutation_rate", 1e7))


def test_describe_client_quotas_filters_as_kafka() -> None:
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        w = await _connect(rt)
        for entries, _ in ALTERS:
            await alter(w, entries)
        return [await describe(w, comps, strict) for comps, strict in [
            ([("user", 0, "alice")], False), ([("user", 0, "alice")], True), ([("user", 1, None)], False),
            ([("user", 0, "nobody")], False), ([("ip", 2, None)], False), ([], True),
            ([("client-id", 2, None)], False), ([("user", 2, None), ("user", 2, None)], False),
            ([("topic", 2, None)], False), ([("", 2, None)], False), ([("user", 2, None), ("ip", 2, None)], False),
            ([("user", 7, None)], False), ([("user", 0, None)], False), ([], False)]]
    got = _run(body)
    assert got[0] == (0, "", _sorted([((("user", "alice"),), ALICE),
                                     ((("user", "alice"), ("client-id", "c1")), (("producer_byte_rate", 100.0),))]))
    assert got[1] == (0, "", [((("user", "alice"),), ALICE)])
    assert got[2] == (0, "", _sorted([((("user", None),), (("producer_byte_rate", 7.0),)),
                                     ((("user", None), ("client-id", None)), (("producer_byte_rate", 8.0),))]))
    assert got[3] == (0, "", [])
    assert got[4] == (0, "", _sorted([((("ip", "1.2.3.4"),), (("connection_creation_rate", 10.0),)),
                                     ((("ip", None),), (("connection_creation_rate", 11.0),))]))
    assert got[5] == (0, "", [])
    assert got[6] == (0, "", _sorted([((("user", "alice"), ("client-id", "c1")), (("producer_byte_rate", 100.0),)),
                                     ((("user", None), ("client-id", None)), (("producer_byte_rate", 8.0),))]))
    assert got[7] == (42, "Duplicate user filter component entity type", None)
    assert got[8] == (35, "Custom entity type 'topic' not supported", None)
    assert got[9] == (42, "Unexpected empty filter component entity type", None)
    assert got[10] == (42, "Invalid entity filter component combination, IP filter component should not be used "
                           "with user or clientId filter component.", None)
    assert got[11] == (-1, None, None) and got[12] == (-1, None, None)
    everything = got[13][2]
    assert len(everything) == 10 and ((("user", "we ird*/x"),), (("request_percentage", 0.0001),
                                                                   ("producer_byte_rate", 5.0))) in everything
