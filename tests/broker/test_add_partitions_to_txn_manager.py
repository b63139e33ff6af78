"""KIP-890 part 1 through the wire, one simulated broker: a transactional batch is appended only
to a partition the transaction coordinator has in the transaction. The hanging transaction it
prevents: a producer's batch that arrives after its transaction was aborted (a retry delayed in
the network) would open a transaction no coordinator knows of, which nothing ever ends, and the
partition's last stable offset would stay below it forever — read_committed consumers stall.
With transaction.partition.verification.enable=false (Kafka's behaviour before 3.6) the same
sequence does hang, which is what the check is for."""

from __future__ import annotations

from typing import Any

import pytest

from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.produce import ProduceRequest
from kafkasim.records.batch import Record, build_batch
from kafkasim.runtime.api import NodeRuntime
from tests.broker.group.group_sim import SimCluster, call
from tests.broker.transaction.test_transaction_coordinator import (
    CONFIG,
    TOPIC,
    add_partitions,
    await_state,
    end,
    init,
    setup,
)

pytestmark = pytest.mark.sim


async def produce(conn: Any, txn_id: str, pid: int, epoch: int, seq: int, partition: int,
                  version: int = 9) -> tuple[int, str | None]:
    batch = build_batch([Record(0, b"k", b"v")], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                        is_transactional=True)
    P = ProduceRequest.TopicProduceData.PartitionProduceData
    resp = await call(conn, ProduceRequest(transactional_id=txn_id, acks=-1, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[P(index=partition, records=bytes(batch))])]),
        version)
    part = resp.responses[0].partition_responses[0]
    return int(part.error_code), part.error_message


def run_late_batch(verify: bool) -> tuple[Any, ...]:
    """Add partition 0, write seq 0, abort; then seq 1 — the batch that was late — arrives."""
    cluster = SimCluster(seed=11, transaction_partition_verification_enable=verify, **CONFIG)

    async def main(rt: NodeRuntime) -> Any:
        conn = await setup(rt, "late")
        r = await init(conn, "late")
        pid, epoch = r.producer_id, r.producer_epoch
        assert await add_partitions(conn, "late", pid, epoch, [0]) == {E.NONE}
        first = await produce(conn, "late", pid, epoch, 0, 0)
        assert await end(conn, "late", pid, epoch, False) == E.NONE
        await await_state(rt, conn, "late", "CompleteAbort")
        late = await produce(conn, "late", pid, epoch, 1, 0)
        await rt.sleep(2000)
        p = cluster.server.replica_manager.get_partition(TOPIC, 0)  # type: ignore[union-attr]
        assert p is not None
        return first, late, p.last_stable_offset, p.high_watermark

    result: tuple[Any, ...] = cluster.run(main, until_ms=30000)
    return result


def test_a_late_batch_after_the_abort_is_refused_and_opens_no_transaction() -> None:
    first, late, lso, hw = run_late_batch(verify=True)
    assert first == (E.NONE, None)
    assert late == (E.INVALID_TXN_STATE, "Partition was not added to the transaction")
    assert lso == hw == 2  # the batch and its abort marker: nothing left open


def test_without_verification_the_late_batch_hangs_the_partition() -> None:
    first, late, lso, hw = run_late_batch(verify=False)
    assert first == (E.NONE, None) and late == (E.NONE, None)
    assert (lso, hw) == (2, 3)  # a transaction nobody will end holds the LSO at the late batch


def test_a_partition_never_added_is_refused_per_version() -> None:
    cluster = SimCluster(seed=12, **CONFIG)

    async def main(rt: NodeRuntime) -> Any:
        conn = await setup(rt, "never")
        r = await init(conn, "never")
        pid, epoch = r.producer_id, r.producer_epoch
        assert await add_partitions(conn, "never", pid, epoch, [0]) == {E.NONE}
        v10 = await produce(conn, "never", pid, epoch, 0, 1, version=10)
        v11 = await produce(conn, "never", pid, epoch, 0, 1, version=11)
        fenced = await produce(conn, "never", pid, epoch + 7, 0, 2, version=9)
        added = await produce(conn, "never", pid, epoch, 0, 0)
        again = await produce(conn, "never", pid, epoch, 1, 0)   # ongoing here: no second ask
        return v10, v11, fenced, added, again

    v10, v11, fenced, added, again = cluster.run(main, until_ms=30000)
    assert v10 == (E.INVALID_TXN_STATE, "Partition was not added to the transaction")
    assert v11 == (E.TRANSACTION_ABORTABLE, None)
    assert fenced == (E.INVALID_PRODUCER_EPOCH, None)  # the coordinator's PRODUCER_FENCED, as producers expect
    assert added == (E.NONE, None) and again == (E.NONE, None)
