"""The data path at old and new versions, over the simulated network, with the answers a Kafka
3.9.1 ZooKeeper-mode broker gives (each checked against `realkafka` when written):

- Produce v0/v2 take magic 0/1 message sets and store one record batch v2; v3+ refuse them
  (INVALID_RECORD) and v3-v6 refuse zstd (UNSUPPORTED_COMPRESSION_TYPE);
- Fetch v0/v3 down-convert, v13+ go by topic id (UNKNOWN_TOPIC_ID), v12 answers a diverged
  fetcher with diverging_epoch at once, a read error carries no offsets;
- ListOffsets v0 lists segment offsets newest first;
- OffsetCommit/OffsetFetch v0 keep offsets in ZooKeeper; the KIP-848 APIs are refused;
  AllocateProducerIds hands out a block; Envelope closes the connection.
"""

from __future__ import annotations

from typing import Any

import pytest

from kafkasim.broker.config import BrokerConfig
from kafkasim.broker.server import KafkaServer
from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.framing import encode_request
from kafkasim.protocol.messages.allocate_producer_ids import AllocateProducerIdsRequest
from kafkasim.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from kafkasim.protocol.messages.create_topics import CreateTopicsRequest
from kafkasim.protocol.messages.envelope import EnvelopeRequest
from kafkasim.protocol.messages.fetch import FetchRequest
from kafkasim.protocol.messages.find_coordinator import FindCoordinatorRequest
from kafkasim.protocol.messages.headers import RequestHeader, ResponseHeader
from kafkasim.protocol.messages.list_offsets import ListOffsetsRequest
from kafkasim.protocol.messages.metadata import MetadataRequest
from kafkasim.protocol.messages.offset_commit import OffsetCommitRequest
from kafkasim.protocol.messages.offset_fetch import OffsetFetchRequest
from kafkasim.protocol.messages.produce import ProduceRequest
from kafkasim.protocol.primitives import Message
from kafkasim.records.batch import Record, build_batch, iter_batches, read_header
from kafkasim.records.compression import CompressionType
from kafkasim.records.legacy import build_legacy_message_set, iter_legacy_entries, iter_legacy_messages
from kafkasim.runtime.api import ConnectionClosed, NodeRuntime, Stream
from kafkasim.runtime.sim.world import SimWorld

pytestmark = pytest.mark.sim

TOPIC = "data"
RECORDS = [Record(1_700_000_000_000 + i, b"k%d" % i, b"v%d" % i) for i in range(3)]


class Conn:
    def __init__(self, stream: Stream, rt: NodeRuntime) -> None:
        self.stream, self.rt, self.corr = stream, rt, 0

    async def call(self, req: Message, version: int) -> Any:
        self.corr += 1
        header = RequestHeader(request_api_key=req.API_KEY, request_api_version=version, correlation_id=self.corr,
                               client_id="t")
        await self.stream.write(encode_request(header, req))
        frame = memoryview(await self.stream.read_frame(1 << 22))   # no size prefix
        _, pos = ResponseHeader.read(frame, 0, A.response_header_version(req.API_KEY, version))
        return A.api_info(req.API_KEY).response.read(frame, pos, version)[0]


def _run(body: Any, brokers: int = 1) -> Any:
    """`body(conn, server)` against broker 0, once TOPIC exists — one partition on the last broker."""
    world = SimWorld(7)
    servers = []
    for i in range(brokers):
        node = world.add_node(f"broker-{i}")
        servers.append(KafkaServer(node.runtime, BrokerConfig(host=f"broker-{i}", port=9092, log_dir="logs",
                                                              broker_id=i)))
        node.runtime.spawn(servers[-1].startup())
    server = servers[0]
    c = world.add_node("client")
    out: dict[str, Any] = {}

    async def main() -> None:
        await c.runtime.sleep(100)
        conn = Conn(await c.runtime.net.connect("broker-0", 9092, 1000), c.runtime)
        T = CreateTopicsRequest.CreatableTopic
        where = [T.CreatableReplicaAssignment(partition_index=0, broker_ids=[brokers - 1])]
        for _ in range(50):   # until every broker has registered and broker 0 knows the leader
            resp = await conn.call(CreateTopicsRequest(topics=[T(name=TOPIC, num_partitions=-1, replication_factor=-1,
                                                                 assignments=where)], timeout_ms=5000), 4)
            meta = server.metadata_cache.topic(TOPIC)
            if meta is not None and meta.partitions[0].leader == brokers - 1:
                break
            assert resp.topics[0].error_code in (E.NONE, E.TOPIC_ALREADY_EXISTS, E.INVALID_REPLICA_ASSIGNMENT,
                                                 E.NOT_CONTROLLER), resp
            await c.runtime.sleep(200)
        out["result"] = await body(conn, server)

    task = c.runtime.spawn(main())
    world.run(60_000)
    assert task.done(), "client did not finish"
    assert world.failures == [], world.failures
    return out["result"]


def _produce(records: bytes, acks: int = 1) -> ProduceRequest:
    P = ProduceRequest.TopicProduceData
    return ProduceRequest(acks=acks, timeout_ms=5000, topic_data=[
        P(name=TOPIC, partition_data=[P.PartitionProduceData(index=0, records=records)])])


def _fetch(offset: int, topic_id: bytes = bytes(16), last_fetched_epoch: int = -1, max_bytes: int = 1 << 20,
           topic: str = TOPIC, max_wait_ms: int = 10) -> FetchRequest:
    T = FetchRequest.FetchTopic
    return FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20, topics=[
        T(topic=topic, topic_id=topic_id, partitions=[T.FetchPartition(
            partition=0, fetch_offset=offset, partition_max_bytes=max_bytes, last_fetched_epoch=last_fetched_epoch)])])


def _code(resp: Any) -> tuple[int, int]:
    p = resp.responses[0].partition_responses[0]
    return p.error_code, p.base_offset


def test_a_follower_names_the_leader_from_fetch_v16_and_produce_v10() -> None:
    async def body(conn: Conn, server: KafkaServer) -> Any:
        meta = server.metadata_cache.topic(TOPIC)
        assert meta is not None
        fetched = [await conn.call(_fetch(0, meta.topic_id), v) for v in (12, 16, 17)]
        produced = [await conn.call(_produce(build_batch(RECORDS)), v) for v in (9, 10)]
        return fetched, produced

    fetched, produced = _run(body, brokers=2)
    for resp, hinted in zip(fetched, (False, True, True), strict=True):
        p = resp.responses[0].partitions[0]
        assert p.error_code == E.NOT_LEADER_OR_FOLLOWER   # the topic exists, broker 0 is no replica
        assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == ((1, 0) if hinted else (-1, -1))
        assert [(n.node_id, n.host, n.port) for n in resp.node_endpoints] == ([(1, "broker-1", 9092)] if hinted else [])
    for resp, hinted in zip(produced, (False, True), strict=True):
        p = resp.responses[0].partition_responses[0]
        assert p.error_code == E.NOT_LEADER_OR_FOLLOWER
        assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == ((1, 0) if hinted else (-1, -1))
        assert [n.node_id for n in resp.node_endpoints] == ([1] if hinted else [])


def test_produce_versions_take_what_kafka_takes() -> None:
    async def body(conn: Conn, server: KafkaServer) -> Any:
        answers = [
            _code(await conn.call(_produce(build_legacy_message_set(RECORDS, magic=0)), 0)),
            _code(await conn.call(_produce(build_legacy_message_set(RECORDS, magic=1,
                                                                    compression=CompressionType.GZIP)), 2)),
            _code(await conn.call(_produce(build_batch(RECORDS)), 0)),   # magic 2 in v0: accepted
            _code(await conn.call(_produce(build_legacy_message_set(RECORDS, magic=1)), 3)),
            _code(await conn.call(_produce(build_batch(RECORDS, compression=CompressionType.ZSTD)), 6)),
            _code(await conn.call(_produce(build_batch(RECORDS, compression=CompressionType.ZSTD)), 7)),
        ]
        log = (await conn.call(_fetch(0), 4)).responses[0].partitions[0].records
        return answers, bytes(log)

    answers, log = _run(body)
    assert answers == [(0, 0), (0, 3), (0, 6), (E.INVALID_RECORD, -1), (E.UNSUPPORTED_COMPRESSION_TYPE, -1), (0, 9)]
    headers = [h for _, h in iter_batches(log)]   # the log holds v2 batches only, one per produce
    assert [(h.base_offset, h.records_count, h.compression) for h in headers] == [
        (0, 3, CompressionType.NONE), (3, 3, CompressionType.GZIP), (6, 3, CompressionType.NONE),
        (9, 3, CompressionType.ZSTD)]
    assert headers[0].max_timestamp == -1 and headers[1].max_timestamp == RECORDS[-1].timestamp_ms


def test_clients_cannot_write_internal_topics() -> None:
    async def body(conn: Conn, server: KafkaServer) -> Any:
        FC = FindCoordinatorRequest
        for _ in range(20):   # creates __consumer_offsets
            if (await conn.call(FC(key="g", key_type=0), 1)).error_code == E.NONE:
                break
            await conn.rt.sleep(200)
        req = _produce(build_batch(RECORDS))
        req.topic_data[0].name = "__consumer_offsets"
        return _code(await conn.call(req, 9))

    assert _run(body) == (E.INVALID_TOPIC_EXCEPTION, -1)


def test_a_failed_acks_0_produce_closes_the_connection() -> None:
    async def body(conn: Conn, server: KafkaServer) -> Any:
        header = RequestHeader(request_api_key=A.PRODUCE, request_api_version=9, correlation_id=1, client_id="t")
        await conn.stream.write(encode_request(header, _produce(build_batch(RECORDS), acks=0)))   # fine: no answer
        bad = _produce(build_batch(RECORDS), acks=0)
        bad.topic_data[0].name = "no-such-topic"
        await conn.stream.write(encode_request(header, bad))
        try:
            await conn.stream.read_frame(1 << 20)
            return "answered"
        except ConnectionClosed:
            return "closed"

    assert _run(body) == "closed"


def test_fetch_v0_and_v3_down_convert_and_refuse_zstd() -> None:
    async def body(conn: Conn, server: KafkaServer) -> Any:
        await conn.call(_produce(build_batch(RECORDS)), 9)
        await conn.call(_produce(build_batch(RECORDS, compression=CompressionType.ZSTD)), 9)
        v0 = (await conn.call(_fetch(1), 0)).responses[0].partitions[0]
        v3 = (await conn.call(_fetch(0), 3)).responses[0].partitions[0]
        zstd = (await conn.call(_fetch(3), 3)).responses[0].partitions[0]
        return v0, v3, zstd

    v0, v3, zstd = _run(body)
    assert v0.error_code == 0 and [(m.offset, m.magic) for m in iter_legacy_messages(bytes(v0.records))] == \
        [(1, 0), (2, 0)]
    entries = list(iter_legacy_entries(bytes(v3.records)))
    assert [(e.offset, e.magic, e.timestamp_ms) for e in entries[:3]] == [
        (i, 1, RECORDS[i].timestamp_ms) for i in range(3)]
    assert zstd.error_code == E.UNSUPPORTED_COMPRESSION_TYPE and zstd.records is None


def test_fetch_by_topic_id_and_the_diverging_epoch() -> None:
    async def body(conn: Conn, server: KafkaServer) -> Any:
        await conn.call(_produce(build_batch(RECORDS)), 9)
        T = MetadataRequest.MetadataRequestTopic
        topic_id = (await conn.call(MetadataRequest(topics=[T(name=TOPIC)]), 12)).topics[0].topic_id
        known = await conn.call(_fetch(0, topic_id), 13)
        unknown = await conn.call(_fetch(0, bytes(range(16))), 17)
        unplaced = await conn.call(_fetch(3, last_fetched_epoch=5), 12)
        start = conn.rt.monotonic_ms()
        diverged = await conn.call(_fetch(5, last_fetched_epoch=0, max_wait_ms=20_000), 12)
        waited = conn.rt.monotonic_ms() - start
        out_of_range = await conn.call(_fetch(99), 12)
        return topic_id, known, unknown, unplaced, (diverged, waited), out_of_range

    topic_id, known, unknown, unplaced, (diverged, waited), out_of_range = _run(body)
    assert known.responses[0].topic_id == topic_id and len(bytes(known.responses[0].partitions[0].records)) > 0
    assert [(p.error_code, p.high_watermark) for p in unknown.responses[0].partitions] == [(E.UNKNOWN_TOPIC_ID, -1)]
    # An epoch the leader does not know: the fetcher's position cannot be placed.
    assert unplaced.responses[0].partitions[0].error_code == E.OFFSET_OUT_OF_RANGE
    # Epoch 0 ends at 3 here, before the fetch offset: the fetcher must truncate (no error, no
    # data) — answered at once, not after max_wait_ms.
    assert waited < 1000
    d = diverged.responses[0].partitions[0]
    assert (d.error_code, d.diverging_epoch.epoch, d.diverging_epoch.end_offset, bytes(d.records)) == (0, 0, 3, b"")
    p = out_of_range.responses[0].partitions[0]
    assert (p.error_code, p.high_watermark, p.log_start_offset) == (E.OFFSET_OUT_OF_RANGE, -1, -1)


def test_list_offsets_v0_and_the_special_timestamps() -> None:
    async def body(conn: Conn, server: KafkaServer) -> Any:
        await conn.call(_produce(build_batch(RECORDS)), 9)
        T = ListOffsetsRequest.ListOffsetsTopic

        async def ask(version: int, timestamp: int, n: int = 1) -> Any:
            req = ListOffsetsRequest(replica_id=-1, topics=[T(name=TOPIC, partitions=[
                T.ListOffsetsPartition(partition_index=0, timestamp=timestamp, max_num_offsets=n)])])
            return (await conn.call(req, version)).topics[0].partitions[0]
        return [await ask(0, -1, 10), await ask(0, -2, 10), await ask(0, 0, 10), await ask(1, -3), await ask(7, -3),
                await ask(9, -5)]

    latest, earliest, before, max_v1, max_v7, tiered = _run(body)
    assert latest.old_style_offsets == [3, 0] and earliest.old_style_offsets == [0] and before.old_style_offsets == []
    assert max_v1.error_code == E.UNSUPPORTED_VERSION
    assert (max_v7.error_code, max_v7.offset, max_v7.timestamp) == (0, 2, RECORDS[2].timestamp_ms)
    assert (tiered.error_code, tiered.offset, tiered.leader_epoch) == (0, -1, -1)


def test_v0_offsets_live_in_zookeeper_and_kip848_is_refused() -> None:
    async def body(conn: Conn, server: KafkaServer) -> Any:
        C = OffsetCommitRequest.OffsetCommitRequestTopic
        commit = await conn.call(OffsetCommitRequest(group_id="old", topics=[C(name=TOPIC, partitions=[
            C.OffsetCommitRequestPartition(partition_index=0, committed_offset=42),
            C.OffsetCommitRequestPartition(partition_index=7, committed_offset=1)])]), 0)
        F = OffsetFetchRequest.OffsetFetchRequestTopic
        fetched = await conn.call(OffsetFetchRequest(group_id="old", topics=[F(name=TOPIC, partition_indexes=[0])]), 0)
        heartbeat = await conn.call(ConsumerGroupHeartbeatRequest(group_id="g", member_epoch=0), 0)
        stale = await conn.call(AllocateProducerIdsRequest(broker_id=0, broker_epoch=-5), 0)
        epoch = server.broker_epoch
        blocks = [await conn.call(AllocateProducerIdsRequest(broker_id=0, broker_epoch=epoch), 0) for _ in range(2)]
        try:
            await conn.call(EnvelopeRequest(request_data=b"x", client_host_address=b"\x7f\0\0\1"), 0)
            envelope = "answered"
        except ConnectionClosed:
            envelope = "closed"
        return commit, fetched, heartbeat, stale, blocks, envelope

    commit, fetched, heartbeat, stale, blocks, envelope = _run(body)
    # The refused partition first, as Kafka's OffsetCommitResponse.Builder lists them.
    assert [(p.partition_index, p.error_code) for p in commit.topics[0].partitions] == \
        [(7, E.UNKNOWN_TOPIC_OR_PARTITION), (0, E.NONE)]
    assert [(p.committed_offset, p.error_code) for p in fetched.topics[0].partitions] == [(42, E.NONE)]
    assert heartbeat.error_code == E.UNSUPPORTED_VERSION
    assert stale.error_code == E.STALE_BROKER_EPOCH
    # Blocks of 1000 claimed in ZooKeeper one after the other (the first may have gone to the
    # broker's own producer id manager already, so only the step is fixed).
    assert [b.error_code for b in blocks] == [0, 0] and [b.producer_id_len for b in blocks] == [1000, 1000]
    assert blocks[1].producer_id_start == blocks[0].producer_id_start + 1000
    assert envelope == "closed"


def test_read_header_of_stored_legacy_batch_is_v2() -> None:
    async def body(conn: Conn, server: KafkaServer) -> Any:
        await conn.call(_produce(build_legacy_message_set(RECORDS, magic=1, compression=CompressionType.SNAPPY)), 1)
        return bytes((await conn.call(_fetch(0), 12)).responses[0].partitions[0].records)

    log = _run(body)
    h = read_header(log)
    assert (h.magic, h.compression, h.records_count) == (2, CompressionType.SNAPPY, 3)
