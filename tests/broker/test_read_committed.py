"""READ_COMMITTED on a broker in simulated time: Fetch (isolation_level 1) reads to the last
stable offset and names the aborted transactions in what it returns, at every version with
those fields; READ_UNCOMMITTED reads to the high watermark with no list; ListOffsets(latest)
answers the LSO for read_committed; a client's control batch is INVALID_RECORD while the
coordinator origin (WriteTxnMarkers') appends markers; a READ_COMMITTED long poll waits on the
LSO, not the high watermark."""

from __future__ import annotations

from typing import Any

import pytest

from kafkasim.broker.config import BrokerConfig
from kafkasim.broker.partition import validate_produce_records
from kafkasim.broker.server import KafkaServer
from kafkasim.client.connection import BrokerConnection
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.fetch import FetchRequest
from kafkasim.protocol.messages.list_offsets import ListOffsetsRequest
from kafkasim.protocol.messages.produce import ProduceRequest
from kafkasim.records.batch import Record, build_batch, iter_batches
from kafkasim.records.control import end_txn_marker_batch
from kafkasim.runtime.sim.world import SimWorld
from kafkasim.storage.producer_state import AppendOrigin

pytestmark = pytest.mark.sim

A, B = 5000, 6000


def _fetch(offset: int, isolation: int, max_wait_ms: int = 0) -> FetchRequest:
    P = FetchRequest.FetchTopic.FetchPartition
    return FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
                        isolation_level=isolation, topics=[FetchRequest.FetchTopic(topic="t", partitions=[
                            P(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])])


def _list_latest(isolation: int) -> ListOffsetsRequest:
    T = ListOffsetsRequest.ListOffsetsTopic
    return ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=[T(name="t", partitions=[
        T.ListOffsetsPartition(partition_index=0, timestamp=-1)])])


def _world() -> tuple[SimWorld, KafkaServer, Any]:
    world = SimWorld(11)
    b = world.add_node("broker-0")
    server = KafkaServer(b.runtime, BrokerConfig(host="broker-0", port=9092, log_dir="logs"))
    b.runtime.spawn(server.startup())
    return world, server, world.add_node("client")


class Writer:
    """Transactional data straight to the partition (the KIP-890 check is the coordinator's),
    markers through ReplicaManager.append_records(origin=COORDINATOR) as WriteTxnMarkers does."""

    def __init__(self, server: KafkaServer) -> None:
        assert server.replica_manager is not None
        self.rm = server.replica_manager
        self.seq: dict[int, int] = {}

    async def data(self, pid: int, *, txn: bool = True) -> int:
        seq = self.seq.get(pid, 0)
        self.seq[pid] = seq + 1
        p = self.rm.get_partition("t", 0)
        assert p is not None
        buf = build_batch([Record(0, None, f"{pid}:{seq}".encode())], producer_id=pid, producer_epoch=0,
                          base_sequence=seq, is_transactional=txn)
        info = await p.append_records_to_leader(validate_produce_records(buf, p.log.config))
        return info.first_offset

    async def marker(self, pid: int, committed: bool) -> int:
        res = await self.rm.append_records("t", 0, end_txn_marker_batch(pid, 0, 0, committed, 0), -1,
                                           origin=AppendOrigin.COORDINATOR)
        assert res.error_code == E.NONE, res
        return res.base_offset


def test_read_committed_fetch_and_list_offsets_at_every_version() -> None:
    world, server, c = _world()
    rt = c.runtime
    out: dict[str, Any] = {}

    async def main() -> None:
        await rt.sleep(50)
        from kafkasim.client.cluster import ClientCluster
        cluster = ClientCluster(rt, "broker-0:9092", "admin")
        assert await cluster.create_topic("t", 1, 1) == 0
        cluster.close()
        w = Writer(server)
        await w.data(A)                   # 0  A aborted
        await w.data(B)                   # 1  B ongoing at the end
        await w.data(A)                   # 2
        await w.marker(A, False)          # 3
        await w.data(-1, txn=False)       # 4  plain
        conn = BrokerConnection(rt, "broker-0", 9092, "c")
        await conn.connect()
        for v in (4, 11, 12):
            out[("rc", v)] = await conn.send_at(v, _fetch(0, 1))
            out[("ru", v)] = await conn.send_at(v, _fetch(0, 0))
        for v in (2, 7):
            out[("lo_rc", v)] = await conn.send_at(v, _list_latest(1))
            out[("lo_ru", v)] = await conn.send_at(v, _list_latest(0))
        out["client_marker"] = await conn.request(ProduceRequest(
            transactional_id=None, acks=1, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
                name="t", partition_data=[ProduceRequest.TopicProduceData.PartitionProduceData(
                    index=0, records=end_txn_marker_batch(B, 0, 0, True, 0))])]))
        await w.marker(B, True)           # 5: B commits, the LSO moves to the end
        out["after"] = await conn.send_at(12, _fetch(0, 1))

    task = rt.spawn(main())
    world.run(30_000)
    assert task.done() and world.failures == [], world.failures
    for v in (4, 11, 12):
        rc = out[("rc", v)].responses[0].partitions[0]
        ru = out[("ru", v)].responses[0].partitions[0]
        assert (rc.error_code, rc.high_watermark, rc.last_stable_offset) == (0, 5, 1), v
        assert [(a.producer_id, a.first_offset) for a in rc.aborted_transactions] == [(A, 0)], v
        assert [h.base_offset for _, h in iter_batches(bytes(rc.records))] == [0], v  # below the LSO only
        assert (ru.high_watermark, ru.last_stable_offset) == (5, 1), v
        assert ru.aborted_transactions is None, v
        assert [h.base_offset for _, h in iter_batches(bytes(ru.records))] == [0, 1, 2, 3, 4], v
    for v in (2, 7):
        assert out[("lo_rc", v)].topics[0].partitions[0].offset == 1, v
        assert out[("lo_ru", v)].topics[0].partitions[0].offset == 5, v
    assert out["client_marker"].responses[0].partition_responses[0].error_code == E.INVALID_RECORD
    after = out["after"].responses[0].partitions[0]
    assert (after.high_watermark, after.last_stable_offset) == (6, 6)
    assert [(a.producer_id, a.first_offset) for a in after.aborted_transactions] == [(A, 0)]
    assert [h.base_offset for _, h in iter_batches(bytes(after.records))] == [0, 1, 2, 3, 4, 5]


def test_a_read_committed_long_poll_waits_for_the_lso() -> None:
    world, server, c = _world()
    rt = c.runtime
    out: dict[str, Any] = {}

    async def main() -> None:
        await rt.sleep(50)
        from kafkasim.client.cluster import ClientCluster
        cluster = ClientCluster(rt, "broker-0:9092", "admin")
        assert await cluster.create_topic("t", 1, 1) == 0
        cluster.close()
        w = Writer(server)
        conn = BrokerConnection(rt, "broker-0", 9092, "c")
        await conn.connect()

        async def later() -> None:
            await rt.sleep(100)
            await w.data(A)               # 0: above the high watermark's reach for read_committed
            await rt.sleep(200)
            await w.marker(A, True)       # 1: now offset 0 is stable

        rt.spawn(later())
        t0 = rt.monotonic_ms()
        resp = await conn.send_at(12, _fetch(0, 1, max_wait_ms=5000))
        out["waited"] = rt.monotonic_ms() - t0
        out["resp"] = resp.responses[0].partitions[0]

    task = rt.spawn(main())
    world.run(30_000)
    assert task.done() and world.failures == [], world.failures
    assert 300 <= out["waited"] < 320, out["waited"]     # woken by the marker, not the data
    assert out["resp"].last_stable_offset == 2
    assert [h.base_offset for _, h in iter_batches(bytes(out["resp"].records))][0] == 0
