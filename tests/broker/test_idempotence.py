"""The idempotent producer in the simulated world: producer ids from ZooKeeper blocks, the
sequence/epoch rules of Kafka 3.9's ProducerStateManager, and producer state that survives a
crash (snapshot + log replay)."""

from __future__ import annotations

import struct
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from kafkasim.broker import producer_id_manager as PIM
from kafkasim.broker.config import BrokerConfig
from kafkasim.broker.server import KafkaServer
from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.framing import encode_request
from kafkasim.protocol.messages.create_topics import CreateTopicsRequest
from kafkasim.protocol.messages.headers import RequestHeader
from kafkasim.protocol.messages.init_producer_id import InitProducerIdRequest
from kafkasim.protocol.messages.list_offsets import ListOffsetsRequest
from kafkasim.protocol.messages.produce import ProduceRequest
from kafkasim.records.batch import Record, build_batch
from kafkasim.runtime.api import NodeRuntime, Stream
from kafkasim.runtime.sim.world import SimWorld
from kafkasim.storage import producer_state as PS

pytestmark = pytest.mark.sim

BROKER = "broker-0"


class Wire:
    """One connection speaking raw requests (the codec is the project's own)."""

    def __init__(self, stream: Stream) -> None:
        self.stream, self.corr = stream, 0

    async def call(self, key: int, version: int, body: Any) -> Any:
        self.corr += 1
        await self.stream.write(encode_request(RequestHeader(request_api_key=key, request_api_version=version,
                                                             correlation_id=self.corr, client_id="t"), body))
        frame = await self.stream.read_frame(1 << 22)
        assert struct.unpack_from(">i", frame, 0)[0] == self.corr
        skip = 4 if A.response_header_version(key, version) == 0 else 5
        return A.api_info(key).response.decode(memoryview(frame)[skip:], version)

    async def produce(self, topic: str, pid: int, epoch: int, seq: int, n: int = 1, tag: str = "v",
                      transactional: bool = False) -> tuple[int, int]:
        records = build_batch([Record(1000 + i, None, f"{tag}{seq + i}".encode()) for i in range(n)],
                              producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                              is_transactional=transactional)
        PD = ProduceRequest.TopicProduceData.PartitionProduceData
        req = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
            ProduceRequest.TopicProduceData(name=topic, partition_data=[PD(index=0, records=records)])])
        pr = (await self.call(A.PRODUCE, 9, req)).responses[0].partition_responses[0]
        return pr.error_code, pr.base_offset

    async def init_producer_id(self, version: int = 4, transactional_id: str | None = None) -> tuple[int, int, int]:
        r = await self.call(A.INIT_PRODUCER_ID, version, InitProducerIdRequest(
            transactional_id=transactional_id, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1))
        return r.error_code, r.producer_id, r.producer_epoch

    async def create_topic(self, topic: str, partitions: int = 1) -> int:
        T = CreateTopicsRequest.CreatableTopic
        req = CreateTopicsRequest(topics=[T(name=topic, num_partitions=partitions, replication_factor=1,
                                            assignments=[], configs=[])], timeout_ms=5000, validate_only=False)
        return int((await self.call(A.CREATE_TOPICS, 4, req)).topics[0].error_code)

    async def log_end_offset(self, topic: str) -> int:
        T = ListOffsetsRequest.ListOffsetsTopic
        req = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
            T(name=topic, partitions=[T.ListOffsetsPartition(partition_index=0, timestamp=-1)])])
        return int((await self.call(A.LIST_OFFSETS, 5, req)).topics[0].partitions[0].offset)


def _config(**cfg: Any) -> BrokerConfig:
    return BrokerConfig(host=BROKER, port=9092, log_dir="logs", zookeeper_session_timeout_ms=4000, **cfg)


def _run(body: Callable[[SimWorld, NodeRuntime, dict[str, Any]], Awaitable[Any]], **cfg: Any) -> Any:
    world = SimWorld(11)
    node = world.add_node(BROKER)
    servers = {"broker": KafkaServer(node.runtime, _config(**cfg))}
    node.runtime.spawn(servers["broker"].startup())
    client = world.add_node("client")
    out: dict[str, Any] = {}

    async def main() -> None:
        await client.runtime.sleep(100)
        out["result"] = await body(world, client.runtime, servers)

    task = client.runtime.spawn(main())
    world.run(120_000)
    assert task.done(), "client did not finish"
    assert world.failures == [], world.failures
    return out["result"]


async def _connect(rt: NodeRuntime, topic: str | None = None) -> Wire:
    w = Wire(await rt.net.connect(BROKER, 9092, 1000))
    if topic is not None:
        assert await w.create_topic(topic) == E.NONE
    return w


async def _restart_broker(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Wire:
    node = world.nodes[BROKER]
    node.crash("kill")
    new_rt = node.restart()
    servers["broker"] = KafkaServer(new_rt, _config(log_segment_bytes=servers["broker"].config.log_segment_bytes))
    new_rt.spawn(servers["broker"].startup())
    for _ in range(200):
        await rt.sleep(100)
        if servers["broker"].replica_manager.get_partition("t", 0) is not None:
            try:
                return await _connect(rt)
            except OSError:
                continue
    raise AssertionError("broker did not come back")


# ---------------------------------------------------------------- producer ids
def test_init_producer_id_hands_out_ids_from_the_zookeeper_block() -> None:
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        w = await _connect(rt)
        answers = [await w.init_producer_id(v) for v in (0, 1, 2, 3, 4, 5)]
        txn = await w.init_producer_id(4, transactional_id="tx")
        zk = servers["broker"].zk
        data, _ = await zk.get(PIM.PRODUCER_ID_BLOCK_PATH)
        return answers, txn, data

    answers, txn, data = _run(body)
    assert answers == [(E.NONE, pid, 0) for pid in range(6)]
    # A transactional id goes to the transaction coordinator; without __transaction_state (no
    # FindCoordinator yet) this broker owns none of its partitions, as Kafka answers.
    assert txn == (E.NOT_COORDINATOR, -1, -1)
    assert data == b'{"version":1,"broker":0,"block_start":"0","block_end":"999"}'


def test_block_claims_continue_after_the_last_block_and_retry_on_a_lost_cas() -> None:
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        await rt.sleep(500)
        zk = servers["broker"].zk
        await zk.set(PIM.PRODUCER_ID_BLOCK_PATH, b'{"version":1,"broker":3,"block_start":"4000","block_end":"4999"}')
        manager = PIM.ZkProducerIdManager(servers["broker"].rt, 0, zk)
        # Two claims racing (as two brokers would): both must succeed with different blocks.
        first = servers["broker"].rt.spawn(PIM.claim_producer_id_block(zk, 0))
        second = servers["broker"].rt.spawn(PIM.claim_producer_id_block(zk, 7))
        blocks = sorted([await first, await second], key=lambda b: b.first_producer_id)
        ids = [await manager.generate_producer_id() for _ in range(3)]
        manager.next_producer_id = manager.block.last_producer_id + 1 if manager.block else 0  # use it all up
        rollover = await manager.generate_producer_id()
        data, stat = await zk.get(PIM.PRODUCER_ID_BLOCK_PATH)
        return blocks, ids, rollover, data

    blocks, ids, rollover, data = _run(body)
    assert [(b.first_producer_id, b.last_producer_id) for b in blocks] == [(5000, 5999), (6000, 6999)]
    assert ids == [7000, 7001, 7002] and rollover == 8000
    assert data == b'{"version":1,"broker":0,"block_start":"8000","block_end":"8999"}'


# ---------------------------------------------------------------- sequence rules
def test_duplicates_gaps_and_fencing() -> None:
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        w = await _connect(rt, "t")
        _, pid, epoch = await w.init_producer_id()
        r: dict[str, Any] = {}
        r["first"] = await w.produce("t", pid, epoch, 0, n=3)        # offsets 0..2
        r["second"] = await w.produce("t", pid, epoch, 3, n=2)       # offsets 3..4
        r["dup_first"] = await w.produce("t", pid, epoch, 0, n=3)    # a retry: original offset 0
        r["dup_second"] = await w.produce("t", pid, epoch, 3, n=2)
        r["leo_after_dups"] = await w.log_end_offset("t")
        r["gap"] = await w.produce("t", pid, epoch, 9)
        r["overlap"] = await w.produce("t", pid, epoch, 4)            # not an exact earlier range
        r["next"] = await w.produce("t", pid, epoch, 5)               # offset 5
        r["new_epoch_nonzero"] = await w.produce("t", pid, epoch + 1, 3)
        r["new_epoch"] = await w.produce("t", pid, epoch + 1, 0)      # offset 6
        r["zombie"] = await w.produce("t", pid, epoch, 6)             # the old epoch is fenced
        r["zombie_dup"] = await w.produce("t", pid, epoch, 5)         # even as a "duplicate"
        r["unknown_pid_any_seq"] = await w.produce("t", pid + 100, 0, 42)  # offset 7 (3.9: accepted)
        r["txn"] = await w.produce("t", pid, epoch + 1, 1, transactional=True)
        r["leo"] = await w.log_end_offset("t")
        return r

    r = _run(body)
    assert r["first"] == (E.NONE, 0) and r["second"] == (E.NONE, 3)
    assert r["dup_first"] == (E.NONE, 0) and r["dup_second"] == (E.NONE, 3)
    assert r["leo_after_dups"] == 5
    assert r["gap"][0] == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert r["overlap"][0] == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert r["next"] == (E.NONE, 5)
    assert r["new_epoch_nonzero"][0] == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert r["new_epoch"] == (E.NONE, 6)
    assert r["zombie"][0] == E.INVALID_PRODUCER_EPOCH and r["zombie_dup"][0] == E.INVALID_PRODUCER_EPOCH
    assert r["unknown_pid_any_seq"] == (E.NONE, 7)
    # The log takes a transactional batch in sequence (offset 8) and opens a transaction; checking
    # that the partition was added to one (KIP-890) is the transaction coordinator's.
    assert r["txn"] == (E.NONE, 8)
    assert r["leo"] == 9


def test_only_the_last_five_batches_are_recognised_as_duplicates() -> None:
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        w = await _connect(rt, "t")
        _, pid, epoch = await w.init_producer_id()
        offsets = [await w.produce("t", pid, epoch, i) for i in range(7)]
        window = [await w.produce("t", pid, epoch, i) for i in range(7)]
        return offsets, window

    offsets, window = _run(body)
    assert offsets == [(E.NONE, i) for i in range(7)]
    # The oldest two fell out of the window: OUT_OF_ORDER; the last five answer their offsets.
    assert [e for e, _ in window[:2]] == [E.OUT_OF_ORDER_SEQUENCE_NUMBER] * 2
    assert window[2:] == offsets[2:]


def test_sequence_wraps_from_int32_max_to_zero() -> None:
    assert PS.in_sequence(PS.INT32_MAX, 0) and not PS.in_sequence(PS.INT32_MAX, 1)
    assert PS.decrement_sequence(1, 3) == PS.INT32_MAX - 1
    b = PS.BatchMetadata(last_seq=1, last_offset=10, offset_delta=3, timestamp=0)
    assert (b.first_seq, b.first_offset) == (PS.INT32_MAX - 1, 7)


# ---------------------------------------------------------------- snapshots and recovery
def test_snapshot_bytes_are_kafkas_layout() -> None:
    e = PS.ProducerStateEntry(producer_id=0, producer_epoch=0, last_timestamp=0x1A2028314DF)
    e.batches.append(PS.BatchMetadata(last_seq=10, last_offset=10, offset_delta=0, timestamp=0x1A2028314DF))
    data = PS.encode_snapshot([e])
    # A Kafka 3.9.1 broker's 00000000000000000011.snapshot for the same state, byte for byte.
    kafka = bytes.fromhex("0001f0a4f983" "00000001" "0000000000000000" "0000" "0000000a" "000000000000000a"
                          "00000000" "000001a2028314df" "ffffffff" "ffffffffffffffff")
    assert data == kafka and len(data) == 56
    assert PS.decode_snapshot(data)[0].batches[0] == e.batches[0]
    for bad in (data[:-1], b"\x00" * len(data), data[:9] + bytes([data[9] ^ 1]) + data[10:]):
        try:
            PS.decode_snapshot(bad)
        except PS.CorruptSnapshotError:
            continue
        raise AssertionError("a corrupt snapshot was accepted")


def test_producer_state_survives_a_crash_via_snapshot_and_log_replay() -> None:
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        w = await _connect(rt, "t")
        _, pid, epoch = await w.init_producer_id()
        seq = 0
        offsets = []
        for _ in range(12):  # ~500-byte batches into 1500-byte segments: several rolls
            offsets.append(await w.produce("t", pid, epoch, seq, n=2, tag="x" * 200))
            seq += 2
        part = servers["broker"].replica_manager.get_partition("t", 0)
        snapshots_before = part.log.producer_state_manager.snapshot_offsets()
        leo = part.log_end_offset
        w = await _restart_broker(world, rt, servers)
        part = servers["broker"].replica_manager.get_partition("t", 0)
        loaded_from = part.log.producer_state_manager.loaded_snapshot_offset
        dup_last = await w.produce("t", pid, epoch, seq - 2, n=2, tag="x" * 200)
        gap = await w.produce("t", pid, epoch, seq + 3)
        nxt = await w.produce("t", pid, epoch, seq)
        return offsets, snapshots_before, leo, loaded_from, dup_last, gap, nxt

    offsets, snapshots, leo, loaded_from, dup_last, gap, nxt = _run(body, log_segment_bytes=1500)
    assert all(e == E.NONE for e, _ in offsets)
    assert len(snapshots) >= 3 and all(0 < s < leo for s in snapshots)
    # The restart loaded the newest snapshot (below the log end), then replayed the log after it.
    assert loaded_from is not None and loaded_from == max(snapshots) and loaded_from < leo
    assert dup_last == (E.NONE, offsets[-1][1])
    assert gap[0] == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert nxt == (E.NONE, leo)


def test_a_corrupt_latest_snapshot_falls_back_to_an_older_one_and_the_log() -> None:
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        w = await _connect(rt, "t")
        _, pid, epoch = await w.init_producer_id()
        seq = 0
        for _ in range(10):
            await w.produce("t", pid, epoch, seq, n=2, tag="y" * 200)
            seq += 2
        part = servers["broker"].replica_manager.get_partition("t", 0)
        snaps = part.log.producer_state_manager.snapshot_offsets()
        fs = servers["broker"].rt.fs
        f = fs.open(f"logs/t-0/{PS.snapshot_name(snaps[-1])}", create=False)
        f.pwrite(20, b"\xff\xff")  # flip bytes under the CRC
        f.close()
        w = await _restart_broker(world, rt, servers)
        part = servers["broker"].replica_manager.get_partition("t", 0)
        loaded_from = part.log.producer_state_manager.loaded_snapshot_offset
        return snaps, loaded_from, await w.produce("t", pid, epoch, seq - 2, n=2, tag="y" * 200), \
            await w.produce("t", pid, epoch, seq)

    snaps, loaded_from, dup, nxt = _run(body, log_segment_bytes=1500)
    assert len(snaps) >= 2 and loaded_from == snaps[-2]
    assert dup[0] == E.NONE and nxt[0] == E.NONE and nxt[1] == dup[1] + 2
