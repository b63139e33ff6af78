"""The per-API authorization rules on a running broker (simulated world): requests handed to
KafkaApis with RequestContexts built here (User:alice, User:bob), as the socket server hands
them after authentication; the setup goes over the wire as User:ANONYMOUS, a super user."""

from __future__ import annotations

from typing import Any

import pytest

from kafkasim.broker.request_context import KafkaPrincipal, RequestContext
from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.create_acls import CreateAclsRequest as C
from kafkasim.protocol.messages.create_topics import CreateTopicsRequest
from kafkasim.protocol.messages.delete_acls import DeleteAclsRequest as X
from kafkasim.protocol.messages.delete_topics import DeleteTopicsRequest
from kafkasim.protocol.messages.fetch import FetchRequest
from kafkasim.protocol.messages.find_coordinator import FindCoordinatorRequest
from kafkasim.protocol.messages.headers import RequestHeader
from kafkasim.protocol.messages.init_producer_id import InitProducerIdRequest
from kafkasim.protocol.messages.join_group import JoinGroupRequest
from kafkasim.protocol.messages.metadata import MetadataRequest
from kafkasim.protocol.messages.offset_commit import OffsetCommitRequest
from kafkasim.protocol.messages.produce import ProduceRequest
from kafkasim.protocol.messages.update_metadata import UpdateMetadataRequest
from kafkasim.records.batch import Record, build_batch
from kafkasim.runtime.api import NodeRuntime
from kafkasim.runtime.sim.world import SimWorld
from tests.broker.security.test_acl_apis import AUTH, any_filter, creation
from tests.broker.test_idempotence import _connect, _run

pytestmark = pytest.mark.sim


class As:
    """Requests from one principal, straight to the broker's KafkaApis."""

    def __init__(self, apis: Any, principal: str) -> None:
        self.apis, self.principal, self.corr = apis, KafkaPrincipal.parse(principal), 0

    async def call(self, key: int, version: int, body: Any) -> Any:
        self.corr += 1
        header = RequestHeader(request_api_key=key, request_api_version=version, correlation_id=self.corr,
                               client_id="c")
        return await self.apis.handle(RequestContext.of(header, principal=self.principal, client_address="client"),
                                      body)

    async def produce(self, *topics: str, txn: str | None = None) -> list[tuple[str, int]]:
        PD = ProduceRequest.TopicProduceData.PartitionProduceData
        req = ProduceRequest(transactional_id=txn, acks=-1, timeout_ms=5000, topic_data=[
            ProduceRequest.TopicProduceData(name=t, partition_data=[
                PD(index=0, records=build_batch([Record(0, None, b"v")]))]) for t in topics])
        r = await self.call(A.PRODUCE, 9, req)
        return sorted((t.name, t.partition_responses[0].error_code) for t in r.responses)

    async def fetch(self, topic: str) -> int:
        FT = FetchRequest.FetchTopic
        req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                           topics=[FT(topic=topic, partitions=[FT.FetchPartition(
                               partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
        r = await self.call(A.FETCH, 11, req)
        return int(r.responses[0].partitions[0].error_code)

    async def metadata(self, *topics: str, all_topics: bool = False) -> list[tuple[str, int, int]]:
        T = MetadataRequest.MetadataRequestTopic
        req = MetadataRequest(topics=None if all_topics else [T(name=t) for t in topics],
                              allow_auto_topic_creation=True, include_topic_authorized_operations=True)
        r = await self.call(A.METADATA, 9, req)
        return sorted((t.name, t.error_code, t.topic_authorized_operations) for t in r.topics)


async def setup(rt: NodeRuntime, servers: dict[str, Any]) -> tuple[As, As]:
    w = await _connect(rt)
    for t in ("orders", "secret"):
        assert await w.create_topic(t) == E.NONE
    r = await w.call(A.CREATE_ACLS, 1, C(creations=[
        creation("orders", op=3), creation("orders", op=4), creation("g", rtype=3, op=3),
        creation("tx", rtype=5, op=4, principal="User:bob")]))
    assert [x.error_code for x in r.results] == [0, 0, 0, 0]
    await rt.sleep(1000)
    apis = servers["broker"].apis
    return As(apis, "User:alice"), As(apis, "User:bob")


def test_produce_and_fetch_answer_per_topic() -> None:
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        alice, bob = await setup(rt, servers)
        return (await alice.produce("orders", "secret"), await bob.produce("orders"),
                await alice.produce("orders", txn="tx"), await alice.fetch("orders"), await bob.fetch("orders"),
                await alice.fetch("secret"))

    partial, bob, txn, fetch_ok, fetch_bob, fetch_secret = _run(body, **AUTH)
    assert partial == [("orders", E.NONE), ("secret", E.TOPIC_AUTHORIZATION_FAILED)]
    assert bob == [("orders", E.TOPIC_AUTHORIZATION_FAILED)]
    assert txn == [("orders", E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)]   # alice may not use bob's id
    assert (fetch_ok, fetch_bob, fetch_secret) == (E.NONE, E.TOPIC_AUTHORIZATION_FAILED,
                                                   E.TOPIC_AUTHORIZATION_FAILED)


async def _session_fetch(who: As, session_id: int, epoch: int, offset: int | None) -> Any:
    """A consumer's Fetch v11 in a fetch session: orders-0 from `offset`, or no partition at all
    (an incremental fetch that changes nothing: the session's partitions are read)."""
    FT = FetchRequest.FetchTopic
    topics = [] if offset is None else [FT(topic="orders", partitions=[FT.FetchPartition(
        partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])]
    req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                       session_id=session_id, session_epoch=epoch, topics=topics)
    r = await who.call(A.FETCH, 11, req)
    return r.error_code, r.session_id, [(t.topic, p.partition_index, p.error_code, len(p.records or b""))
                                        for t in r.responses for p in t.partitions]


def test_a_fetch_session_cannot_read_on_after_its_read_acl_is_revoked() -> None:
    """KafkaApis authorizes the fetch context's partitions, the session's included: once alice's
    READ on orders is gone, an incremental fetch that does not name orders-0 (its position did
    not move) gets TOPIC_AUTHORIZATION_FAILED for it, not the record written since. A check of
    the request's own topics let the session read on (the acl-revoke scenario, with fetch
    sessions in the consumer)."""
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        alice, _ = await setup(rt, servers)
        assert await alice.produce("orders") == [("orders", E.NONE)]
        full = await _session_fetch(alice, 0, 0, 1)             # full fetch: creates the session
        session = full[1]
        before = await _session_fetch(alice, session, 1, None)  # nothing new: answers nothing
        w = await _connect(rt)
        r = await w.call(A.DELETE_ACLS, 1, X(filters=[X.DeleteAclsFilter(**any_filter(
            resource_type_filter=2, resource_name_filter="orders", pattern_type_filter=3, operation=3))]))
        assert [len(f.matching_acls) for f in r.filter_results] == [1]
        await rt.sleep(1000)                                     # the brokers' ACL caches see it
        assert await alice.produce("orders") == [("orders", E.NONE)]   # alice may still WRITE
        after = await _session_fetch(alice, session, 2, None)
        return full, before, after

    full, before, after = _run(body, **AUTH)
    assert full[0] == E.NONE and full[1] != 0 and full[2] == [("orders", 0, E.NONE, 0)]
    assert before == (E.NONE, full[1], [])
    assert after == (E.NONE, full[1], [("orders", 0, E.TOPIC_AUTHORIZATION_FAILED, 0)])


def test_metadata_hides_what_the_principal_may_not_describe() -> None:
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        alice, bob = await setup(rt, servers)
        named = await alice.metadata("orders", "secret", "missing")
        await rt.sleep(1000)
        return (await alice.metadata(all_topics=True), await bob.metadata(all_topics=True), named,
                servers["broker"].metadata_cache.topic("missing"))

    alice_all, bob_all, named, missing = _run(body, **AUTH)
    read_write_describe = (1 << 3) | (1 << 4) | (1 << 8)
    assert alice_all == [("orders", E.NONE, read_write_describe)]
    assert bob_all == []
    omitted = -2147483648   # a denied topic keeps the schema's default, as Kafka answers
    assert named == [("missing", E.TOPIC_AUTHORIZATION_FAILED, omitted), ("orders", E.NONE, read_write_describe),
                     ("secret", E.TOPIC_AUTHORIZATION_FAILED, omitted)]
    assert missing is None                       # not auto-created for someone who may not describe it


def test_groups_transactions_admin_and_broker_apis() -> None:
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        alice, bob = await setup(rt, servers)
        out: dict[str, Any] = {}
        join = JoinGroupRequest(group_id="g", session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
                                protocol_type="consumer", protocols=[])
        out["join_bob"] = (await bob.call(A.JOIN_GROUP, 5, join)).error_code
        find = FindCoordinatorRequest(key="g", key_type=0)
        out["find"] = [(await p.call(A.FIND_COORDINATOR, 3, find)).error_code for p in (alice, bob)]
        OT = OffsetCommitRequest.OffsetCommitRequestTopic
        commit = OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=-1, member_id="", topics=[
            OT(name=t, partitions=[OT.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])
            for t in ("orders", "secret")])
        r = await alice.call(A.OFFSET_COMMIT, 8, commit)
        out["commit"] = sorted((t.name, t.partitions[0].error_code) for t in r.topics)
        idem = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1000)
        out["idempotent"] = [(await p.call(A.INIT_PRODUCER_ID, 4, idem)).error_code for p in (alice, bob)]
        CT = CreateTopicsRequest.CreatableTopic
        r = await alice.call(A.CREATE_TOPICS, 5, CreateTopicsRequest(topics=[
            CT(name="new", num_partitions=1, replication_factor=1)], timeout_ms=1000))
        out["create"] = (r.topics[0].error_code, r.topics[0].error_message)
        r = await bob.call(A.DELETE_TOPICS, 5, DeleteTopicsRequest(topic_names=["orders"], timeout_ms=1000))
        out["delete"] = [(x.name, x.error_code) for x in r.responses]
        r = await bob.call(A.UPDATE_METADATA, 7, UpdateMetadataRequest(controller_id=0, controller_epoch=99))
        out["update_metadata"] = r.error_code
        return out

    out = _run(body, **AUTH)
    assert out["join_bob"] == E.GROUP_AUTHORIZATION_FAILED
    assert out["find"][1] == E.GROUP_AUTHORIZATION_FAILED and out["find"][0] != E.GROUP_AUTHORIZATION_FAILED
    assert out["commit"][1] == ("secret", E.TOPIC_AUTHORIZATION_FAILED)
    assert out["commit"][0][1] != E.TOPIC_AUTHORIZATION_FAILED
    # Without a transactional id: IDEMPOTENT_WRITE on the cluster or WRITE on some topic.
    assert out["idempotent"] == [E.NONE, E.CLUSTER_AUTHORIZATION_FAILED]
    assert out["create"] == (E.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
    assert out["delete"] == [("orders", E.TOPIC_AUTHORIZATION_FAILED)]
    assert out["update_metadata"] == E.CLUSTER_AUTHORIZATION_FAILED


def test_every_rule_answers_a_denied_principal_with_an_encodable_response() -> None:
    """Each API with a rule, its default request at every advertised version, from a principal
    with no ACL at all: an answer of the API's response type that encodes at that version (no
    traceback, no half-built response)."""
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        _, bob = await setup(rt, servers)
        apis = servers["broker"].apis
        out = []
        for key in sorted(set(apis.request_authorizer.rules) | {A.FETCH}):   # Fetch: FetchApi's checks
            lo, hi = apis.supported[key]
            for version in range(lo, hi + 1):
                info = A.api_info(key)
                try:
                    resp = await bob.call(key, version, info.request())
                except Exception as exc:  # noqa: BLE001 - the failure is what the test reports
                    out.append((key, version, f"{type(exc).__name__}: {exc}"))
                    continue
                if resp is not None:
                    assert isinstance(resp, info.response), (key, version)
                    resp.encode(version)
        return out

    failures = _run(body, **AUTH)
    assert failures == []
