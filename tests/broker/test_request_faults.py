"""Request-level faults (broker/request_faults.py): spec validation, an error response of the
right shape for every API and version it is offered for, and the three kinds acting on a
broker in the simulated world — with raw requests and with kafkasim's own producer."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from kafkasim.broker.request_faults import (
    RequestFaults,
    error_response,
    parse_request_fault,
    request_topics,
)
from kafkasim.client.producer import Producer, ProducerConfig
from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from kafkasim.protocol.messages.fetch import FetchRequest
from kafkasim.protocol.messages.find_coordinator import FindCoordinatorRequest
from kafkasim.protocol.messages.list_offsets import ListOffsetsRequest
from kafkasim.protocol.messages.metadata import MetadataRequest
from kafkasim.protocol.messages.offset_commit import OffsetCommitRequest
from kafkasim.protocol.messages.offset_fetch import OffsetFetchRequest
from kafkasim.protocol.messages.produce import ProduceRequest
from kafkasim.runtime.api import ConnectionClosed, NodeRuntime
from kafkasim.runtime.control_api import FaultError
from kafkasim.runtime.sim.world import SimWorld

sys.path.insert(0, str(Path(__file__).parents[1] / "cluster"))
from cluster_sim import Cluster, run_cluster  # noqa: E402

pytestmark = pytest.mark.sim


def _sample_requests() -> dict[int, Any]:
    P = ProduceRequest.TopicProduceData
    F = FetchRequest.FetchTopic
    L = ListOffsetsRequest.ListOffsetsTopic
    C = OffsetCommitRequest.OffsetCommitRequestTopic
    return {
        A.PRODUCE: ProduceRequest(acks=-1, topic_data=[P(name="t", partition_data=[P.PartitionProduceData(index=0)])]),
        A.FETCH: FetchRequest(topics=[F(topic="t", topic_id=b"\x01" * 16, partitions=[F.FetchPartition(partition=0)])]),
        A.LIST_OFFSETS: ListOffsetsRequest(topics=[L(name="t", partitions=[L.ListOffsetsPartition(partition_index=0)])]),
        A.METADATA: MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t")]),
        A.OFFSET_COMMIT: OffsetCommitRequest(group_id="g", topics=[C(name="t", partitions=[
            C.OffsetCommitRequestPartition(partition_index=0)])]),
        A.OFFSET_FETCH: OffsetFetchRequest(group_id="g", topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[0])], groups=[
            OffsetFetchRequest.OffsetFetchRequestGroup(group_id="g", topics=[
                OffsetFetchRequest.OffsetFetchRequestTopics(name="t", partition_indexes=[0])])]),
        A.FIND_COORDINATOR: FindCoordinatorRequest(key="g", coordinator_keys=["g"]),
        A.ADD_PARTITIONS_TO_TXN: AddPartitionsToTxnRequest(v3_and_below_topics=[
            AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="t", partitions=[0])]),
    }


def _codes(obj: Any) -> list[int]:
    """Every error code anywhere in a decoded response."""
    out: list[int] = []
    for name in getattr(obj, "_FIELD_NAMES", ()):
        value = getattr(obj, name)
        if name in ("error_code", "partition_error_code"):
            out.append(int(value))
        elif isinstance(value, list):
            for item in value:
                out.extend(_codes(item))
    return out


def _roundtrip(key: int, version: int, response: Any) -> Any:
    parts: list[Any] = []
    response.write(parts.append, version)
    return A.api_info(key).response.decode(memoryview(b"".join(bytes(p) for p in parts)), version)


def test_every_offered_api_and_version_gets_a_decodable_error_response() -> None:
    samples = _sample_requests()
    checked = 0
    for key, info in A.API_BY_KEY.items():
        try:
            parse_request_fault("f", {"kind": "request_error", "api_key": key, "error_code": 7})
        except FaultError as exc:
            assert exc.status == 400 and "has no error response" in exc.message
            continue
        request = samples.get(key, info.request())
        for v in range(info.min_version, info.max_version + 1):
            decoded = _roundtrip(key, v, error_response(key, v, request, E.REQUEST_TIMED_OUT))
            assert E.REQUEST_TIMED_OUT in _codes(decoded), (info.name, v)
            checked += 1
    required = [A.PRODUCE, A.FETCH, A.LIST_OFFSETS, A.METADATA, A.OFFSET_COMMIT, A.OFFSET_FETCH, A.JOIN_GROUP,
                A.SYNC_GROUP, A.HEARTBEAT, A.FIND_COORDINATOR, A.INIT_PRODUCER_ID, A.ADD_PARTITIONS_TO_TXN, A.END_TXN]
    for key in required:
        parse_request_fault("f", {"kind": "request_error", "api_key": key, "error_code": 7})
    assert checked > 200


def test_produce_error_names_every_partition_of_the_request() -> None:
    req = ProduceRequest(acks=1, topic_data=[ProduceRequest.TopicProduceData(name="t", partition_data=[
        ProduceRequest.TopicProduceData.PartitionProduceData(index=i) for i in (0, 3)])])
    resp = _roundtrip(A.PRODUCE, 9, error_response(A.PRODUCE, 9, req, E.NOT_LEADER_OR_FOLLOWER))
    parts = resp.responses[0].partition_responses
    assert [(p.index, p.error_code, p.base_offset) for p in parts] == [(0, 6, -1), (3, 6, -1)]


@pytest.mark.parametrize("spec, message", [
    ({"kind": "request_error", "error_code": 6}, "needs an api_key"),
    ({"kind": "request_error", "api_key": "Produce"}, "needs an error_code"),
    ({"kind": "request_error", "api_key": "Nope", "error_code": 6}, "unknown api 'Nope'"),
    ({"kind": "request_error", "api_key": 0, "error_code": "NOT_AN_ERROR"}, "unknown error"),
    ({"kind": "request_error", "api_key": 0, "error_code": 0}, "not one of Kafka's errors"),
    ({"kind": "request_error", "api_key": 0, "error_code": 6, "count": 0}, "count must be"),
    ({"kind": "request_delay", "api_key": 1}, "delay_ms > 0"),
    ({"kind": "close_connection", "partition": 1}, "partition needs a topic"),
    ({"kind": "power_loss"}, "not a request-level fault kind"),
])
def test_bad_specs_are_refused_with_a_clear_message(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(FaultError) as e:
        parse_request_fault("f", spec)
    assert e.value.status == 400 and message in e.value.message


def test_names_are_accepted_for_api_and_error() -> None:
    rule = parse_request_fault("f", {"kind": "request_error", "api_key": "Produce", "error_code": "NOT_LEADER_OR_FOLLOWER",
                                     "count": 5, "topic": "t", "partition": 0})
    assert (rule.api_key, rule.error_code, rule.remaining, rule.topic, rule.partition) == (0, 6, 5, "t", 0)


def test_topic_filter_and_count() -> None:
    world = SimWorld(1)
    faults = RequestFaults(world.add_node("b").runtime)
    faults.add(parse_request_fault("f1", {"kind": "request_error", "api_key": 0, "error_code": 6, "count": 2,
                                          "topic": "t", "partition": 1}))
    samples = _sample_requests()
    other = samples[A.PRODUCE]                                     # t-0: not the filtered partition
    assert request_topics(A.PRODUCE, other) == [("t", None, [0])]
    assert not faults.on_request(A.PRODUCE, 9, other).skip_handler
    hit = ProduceRequest(acks=-1, topic_data=[ProduceRequest.TopicProduceData(name="t", partition_data=[
        ProduceRequest.TopicProduceData.PartitionProduceData(index=1)])])
    assert faults.on_request(A.PRODUCE, 9, hit).skip_handler
    assert not faults.on_request(A.FETCH, 12, samples[A.FETCH]).skip_handler   # another api key
    assert faults.on_request(A.PRODUCE, 9, hit).skip_handler
    assert not faults.on_request(A.PRODUCE, 9, hit).skip_handler   # count exhausted: the rule is gone
    assert faults.rules == []


def test_produce_errors_then_the_own_producer_retries_and_succeeds() -> None:
    """5 NOT_LEADER_OR_FOLLOWER answers on the leader: the producer retries through them, every
    record is acknowledged once, and the fault fired exactly 5 times."""

    async def body(c: Cluster, rt: NodeRuntime) -> Any:
        assert await c.create_topic(rt, "t", 1, 3) == E.NONE
        assert await c.wait_until(rt, lambda: c.leader_id("t", 0) >= 0)
        faults = c.server(c.leader_id("t", 0)).request_faults
        faults.add(parse_request_fault("f1", {"kind": "request_error", "api_key": "Produce",
                                              "error_code": "NOT_LEADER_OR_FOLLOWER", "count": 5}))
        rule = faults.rules[0]
        producer = Producer(rt, "broker-0:9092,broker-1:9092,broker-2:9092",
                            ProducerConfig(acks=-1, linger_ms=0, retry_backoff_ms=10))
        await producer.start(["t"])
        offsets = [(await producer.send("t", f"v{i}".encode(), partition=0)).offset for i in range(10)]
        producer.close()
        return rule.fired, faults.rules, offsets

    fired, left, offsets = run_cluster(body)
    assert fired == 5 and left == []
    assert offsets == list(range(10))


def test_delay_and_close_connection_on_the_wire() -> None:
    async def body(c: Cluster, rt: NodeRuntime) -> Any:
        faults = c.server(0).request_faults
        faults.add(parse_request_fault("d", {"kind": "request_delay", "api_key": "Metadata", "delay_ms": 700,
                                             "count": 1}))
        t0 = rt.monotonic_ms()
        await c.metadata(rt, 0, None)
        delayed = rt.monotonic_ms() - t0
        t0 = rt.monotonic_ms()
        await c.metadata(rt, 0, None)
        undelayed = rt.monotonic_ms() - t0
        faults.add(parse_request_fault("c", {"kind": "close_connection", "after_requests": 1}))
        w = await c.wire(rt, 0)
        first = await w.call(A.METADATA, 12, MetadataRequest(topics=None))
        try:
            await w.call(A.METADATA, 12, MetadataRequest(topics=None))
            closed = False
        except ConnectionClosed:
            closed = True
        w.close()
        again = await c.metadata(rt, 0, None)                       # the fault is spent: answered
        return delayed, undelayed, len(first.brokers), closed, len(again.brokers), faults.rules

    delayed, undelayed, first, closed, again, left = run_cluster(body)
    assert delayed >= 700 > undelayed
    assert first == 3 and closed and again == 3 and left == []


def test_injected_not_leader_on_produce_v10_plus_names_the_current_leader() -> None:
    """KafkaApis.handleProduceRequest fills KIP-951's CurrentLeader and NodeEndpoints for every
    NOT_LEADER_OR_FOLLOWER at v10+; an injected one must too (franz-go, without the hint, holds
    the partition until its next metadata refresh, 5 s apart). Older versions and other errors
    carry no hint."""

    async def body(c: Cluster, rt: NodeRuntime) -> Any:
        assert await c.create_topic(rt, "t", 1, 3) == E.NONE
        assert await c.wait_until(rt, lambda: c.leader_id("t", 0) >= 0)
        leader = c.leader_id("t", 0)
        server = c.server(leader)
        epoch = server.replica_manager.get_partition("t", 0).leader_epoch
        faults = server.request_faults
        req = _sample_requests()[A.PRODUCE]
        out = []
        for version, code in ((11, "NOT_LEADER_OR_FOLLOWER"), (9, "NOT_LEADER_OR_FOLLOWER"), (11, "REQUEST_TIMED_OUT")):
            faults.add(parse_request_fault("f", {"kind": "request_error", "api_key": "Produce", "error_code": code}))
            out.append(_roundtrip(A.PRODUCE, version, faults.on_request(A.PRODUCE, version, req, "PLAINTEXT").response))
        return leader, epoch, out

    leader, epoch, (hinted, old, timed_out) = run_cluster(body)
    part = hinted.responses[0].partition_responses[0]
    assert part.error_code == E.NOT_LEADER_OR_FOLLOWER
    assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (leader, epoch)
    assert [e.node_id for e in hinted.node_endpoints] == [leader] and hinted.node_endpoints[0].port > 0
    for resp in (old, timed_out):
        assert resp.node_endpoints == [] and resp.responses[0].partition_responses[0].current_leader.leader_id == -1
