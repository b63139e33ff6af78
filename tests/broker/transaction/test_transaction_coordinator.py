"""The transaction coordinator through the wire, one simulated broker: FindCoordinator for a
transactional id, InitProducerId (new id, epoch bump, fencing), AddPartitionsToTxn, EndTxn
writing markers to every partition of the transaction and CompleteCommit/CompleteAbort to
`__transaction_state`, TxnOffsetCommit visible only once the commit marker lands, the coordinator
reloading PrepareCommit after a crash and finishing it, and a timed-out transaction aborted."""

from __future__ import annotations

from typing import Any

import pytest

from kafkasim.broker.partition import PartitionState
from kafkasim.broker.replica_manager import LeaderAndIsrPartition
from kafkasim.broker.transaction.transaction_log import (
    TRANSACTION_STATE_TOPIC_NAME,
    TxnKey,
    partition_for,
    read_txn_record_key,
    read_txn_record_value,
)
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from kafkasim.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from kafkasim.protocol.messages.describe_transactions import DescribeTransactionsRequest
from kafkasim.protocol.messages.end_txn import EndTxnRequest
from kafkasim.protocol.messages.find_coordinator import FindCoordinatorRequest
from kafkasim.protocol.messages.init_producer_id import InitProducerIdRequest
from kafkasim.protocol.messages.list_transactions import ListTransactionsRequest
from kafkasim.protocol.messages.metadata import MetadataRequest
from kafkasim.protocol.messages.offset_fetch import OffsetFetchRequest
from kafkasim.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from kafkasim.records.batch import decode_batch_records, iter_batches, parse_control_key
from kafkasim.runtime.api import NodeRuntime
from tests.broker.group.group_sim import SimCluster, call, connect, find_coordinator

pytestmark = pytest.mark.sim

TOPIC = "txn-topic"
TXN_PARTITIONS = 5
CONFIG: dict[str, Any] = {"transaction_state_log_num_partitions": TXN_PARTITIONS}


async def find_txn_coordinator(rt: NodeRuntime, conn: Any, txn_id: str) -> list[int]:
    codes = []
    for _ in range(200):
        resp = await call(conn, FindCoordinatorRequest(key=txn_id, key_type=1), 1)
        codes.append(resp.error_code)
        if resp.error_code == E.NONE:
            return codes
        await rt.sleep(50)
    raise AssertionError(f"no transaction coordinator: {codes}")


async def init(conn: Any, txn_id: str, version: int = 4, pid: int = -1, epoch: int = -1,
               timeout_ms: int = 60000) -> Any:
    return await call(conn, InitProducerIdRequest(transactional_id=txn_id, transaction_timeout_ms=timeout_ms,
                                                  producer_id=pid, producer_epoch=epoch), version)


async def add_partitions(conn: Any, txn_id: str, pid: int, epoch: int, parts: list[int], version: int = 3) -> set[int]:
    T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    resp = await call(conn, AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[T(name=TOPIC, partitions=parts)]), version)
    return {p.partition_error_code for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition}


async def end(conn: Any, txn_id: str, pid: int, epoch: int, committed: bool, version: int = 3) -> int:
    resp = await call(conn, EndTxnRequest(transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                                          committed=committed), version)
    return int(resp.error_code)


async def describe(conn: Any, txn_id: str) -> Any:
    resp = await call(conn, DescribeTransactionsRequest(transactional_ids=[txn_id]), 0)
    return resp.transaction_states[0]


async def setup(rt: NodeRuntime, txn_id: str) -> Any:
    conn = await connect(rt)
    await call(conn, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)],
                                     allow_auto_topic_creation=True), 4)
    await find_txn_coordinator(rt, conn, txn_id)
    await rt.sleep(500)
    return conn


async def await_state(rt: NodeRuntime, conn: Any, txn_id: str, state: str) -> Any:
    for _ in range(100):
        d = await describe(conn, txn_id)
        if d.transaction_state == state:
            return d
        await rt.sleep(50)
    raise AssertionError(f"{txn_id} never reached {state}: {d}")


def markers(cluster: SimCluster, topic: str, partition: int) -> list[tuple[int, int, int]]:
    """(producer id, producer epoch, control type) of every control batch of a partition's log."""
    p = cluster.server.replica_manager.get_partition(topic, partition)  # type: ignore[union-attr]
    assert p is not None
    data = p.log.read(0, 1 << 20, max_offset=p.log_end_offset)
    out = []
    for pos, h in iter_batches(data):
        if h.is_control:
            key = decode_batch_records(data, pos, validate=False)[0].key
            out.append((h.producer_id, h.producer_epoch, int(parse_control_key(key)[1])))
    return out


def txn_log(cluster: SimCluster, txn_id: str) -> list[tuple[str, int, list[tuple[str, int]]]]:
    """(state, epoch, partitions) of every record of txn_id in its __transaction_state partition."""
    part = partition_for(txn_id, TXN_PARTITIONS)
    p = cluster.server.replica_manager.get_partition(TRANSACTION_STATE_TOPIC_NAME, part)  # type: ignore[union-attr]
    assert p is not None
    data = p.log.read(0, 1 << 20, max_offset=p.log_end_offset)
    out = []
    for pos, _ in iter_batches(data):
        for r in decode_batch_records(data, pos, validate=False):
            key = read_txn_record_key(r.key or b"")
            if isinstance(key, TxnKey) and key.transactional_id == txn_id:
                md = read_txn_record_value(txn_id, r.value)
                assert md is not None
                out.append((md.state.state_name, md.producer_epoch,
                            [(tp.topic, tp.partition) for tp in md.topic_partitions]))
    return out


def test_find_coordinator_creates_the_transaction_log_with_kafkas_configs() -> None:
    cluster = SimCluster(seed=3, **CONFIG)

    async def main(rt: NodeRuntime) -> list[int]:
        conn = await connect(rt)
        return await find_txn_coordinator(rt, conn, "t1")

    codes = cluster.run(main, until_ms=20000)
    assert codes[0] == E.COORDINATOR_NOT_AVAILABLE and codes[-1] == E.NONE
    meta = cluster.server.metadata_cache.topic(TRANSACTION_STATE_TOPIC_NAME)  # type: ignore[union-attr]
    assert meta is not None and len(meta.partitions) == TXN_PARTITIONS and meta.is_internal


def test_init_bumps_the_epoch_and_fences_the_old_producer() -> None:
    cluster = SimCluster(seed=4, **CONFIG)

    async def main(rt: NodeRuntime) -> Any:
        conn = await setup(rt, "fence")
        first = await init(conn, "fence")
        second = await init(conn, "fence")
        fenced_v3 = await add_partitions(conn, "fence", first.producer_id, first.producer_epoch, [0], version=3)
        fenced_v1 = await add_partitions(conn, "fence", first.producer_id, first.producer_epoch, [0], version=1)
        ok = await add_partitions(conn, "fence", second.producer_id, second.producer_epoch, [0, 1])
        # InitProducerId during an open transaction: abort it first, the client retries.
        during = await init(conn, "fence")
        await rt.sleep(1000)
        third = await init(conn, "fence")
        big = await init(conn, "other", timeout_ms=900_001)
        kip360_wrong = await init(conn, "fence", pid=third.producer_id, epoch=third.producer_epoch - 5)
        return first, second, fenced_v3, fenced_v1, ok, during, third, big, kip360_wrong

    first, second, fenced_v3, fenced_v1, ok, during, third, big, kip360_wrong = cluster.run(main, until_ms=30000)
    assert first.error_code == E.NONE and first.producer_epoch == 0
    assert second.producer_id == first.producer_id and second.producer_epoch == 1
    assert fenced_v3 == {E.PRODUCER_FENCED} and fenced_v1 == {E.INVALID_PRODUCER_EPOCH}
    assert ok == {E.NONE}
    assert during.error_code == E.CONCURRENT_TRANSACTIONS
    # 1 -> 2 by the fence of the open transaction (aborted with epoch 2), -> 3 by the retry.
    assert third.error_code == E.NONE and third.producer_epoch == 3
    assert markers(cluster, TOPIC, 0) == [(first.producer_id, 2, 0)]
    assert big.error_code == E.INVALID_TRANSACTION_TIMEOUT
    assert kip360_wrong.error_code == E.PRODUCER_FENCED


def test_commit_and_abort_write_markers_to_every_partition_and_complete() -> None:
    cluster = SimCluster(seed=5, **CONFIG)

    async def main(rt: NodeRuntime) -> Any:
        conn = await setup(rt, "ca")
        r = await init(conn, "ca")
        pid, epoch = r.producer_id, r.producer_epoch
        assert await add_partitions(conn, "ca", pid, epoch, [0, 1, 2]) == {E.NONE}
        commit = await end(conn, "ca", pid, epoch, True)
        done = await await_state(rt, conn, "ca", "CompleteCommit")
        assert await add_partitions(conn, "ca", pid, epoch, [3]) == {E.NONE}
        abort = await end(conn, "ca", pid, epoch, False)
        await await_state(rt, conn, "ca", "CompleteAbort")
        again = await end(conn, "ca", pid, epoch, False)      # retry of a completed abort: fine
        wrong = await end(conn, "ca", pid, epoch, True)       # commit after an abort: invalid
        listed = await call(conn, ListTransactionsRequest(state_filters=["CompleteAbort", "Bogus"],
                                                          producer_id_filters=[], duration_filter=-1), 1)
        return pid, commit, done, abort, again, wrong, listed

    pid, commit, done, abort, again, wrong, listed = cluster.run(main, until_ms=30000)
    assert (commit, abort, again, wrong) == (E.NONE, E.NONE, E.NONE, E.INVALID_TXN_STATE)
    assert done.topics == [] and done.producer_id == pid
    for part in (0, 1, 2):
        assert markers(cluster, TOPIC, part) == [(pid, 0, 1)]
    assert markers(cluster, TOPIC, 3) == [(pid, 0, 0)]
    states = [s for s, _, _ in txn_log(cluster, "ca")]
    assert states == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit", "Ongoing", "PrepareAbort",
                      "CompleteAbort"]
    assert txn_log(cluster, "ca")[2][2] == [(TOPIC, 0), (TOPIC, 1), (TOPIC, 2)]
    assert listed.unknown_state_filters == ["Bogus"]
    assert [(s.transactional_id, s.transaction_state) for s in listed.transaction_states] == [("ca", "CompleteAbort")]


def test_txn_offset_commit_is_visible_only_after_the_commit_marker() -> None:
    cluster = SimCluster(seed=6, **CONFIG)
    group = "txn-group"

    async def fetch(conn: Any) -> int:
        T = OffsetFetchRequest.OffsetFetchRequestTopic
        resp = await call(conn, OffsetFetchRequest(group_id=group, topics=[T(name=TOPIC, partition_indexes=[0])]), 3)
        return int(resp.topics[0].partitions[0].committed_offset)

    async def commit_offset(conn: Any, pid: int, epoch: int, offset: int) -> int:
        T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
        P = T.TxnOffsetCommitRequestPartition
        resp = await call(conn, TxnOffsetCommitRequest(
            transactional_id="to", group_id=group, producer_id=pid, producer_epoch=epoch,
            topics=[T(name=TOPIC, partitions=[P(partition_index=0, committed_offset=offset)])]), 3)
        return int(resp.topics[0].partitions[0].error_code)

    async def main(rt: NodeRuntime) -> Any:
        conn = await setup(rt, "to")
        await find_coordinator(rt, conn, group)
        r = await init(conn, "to")
        pid, epoch = r.producer_id, r.producer_epoch
        seen = []
        for offset, committed in ((7, False), (11, True)):
            add = await call(conn, AddOffsetsToTxnRequest(transactional_id="to", producer_id=pid,
                                                          producer_epoch=epoch, group_id=group), 3)
            assert add.error_code == E.NONE
            assert await commit_offset(conn, pid, epoch, offset) == E.NONE
            seen.append(await fetch(conn))            # pending: not visible
            assert await end(conn, "to", pid, epoch, committed) == E.NONE
            await await_state(rt, conn, "to", "CompleteCommit" if committed else "CompleteAbort")
            seen.append(await fetch(conn))
        return seen

    assert cluster.run(main, until_ms=30000) == [-1, -1, -1, 11]


def test_new_coordinator_completes_a_prepared_commit_after_a_crash() -> None:
    cluster = SimCluster(seed=7, **CONFIG)
    out: dict[str, Any] = {}

    async def before(rt: NodeRuntime) -> None:
        conn = await setup(rt, "crash")
        r = await init(conn, "crash")
        out["pid"] = r.producer_id
        assert await add_partitions(conn, "crash", r.producer_id, r.producer_epoch, [0, 1]) == {E.NONE}
        # The markers never leave: the broker dies right after PrepareCommit is written.
        cluster.server.txn_coordinator.txn_marker_channel_manager.start = lambda: None  # type: ignore[union-attr]
        cluster.server.txn_coordinator.txn_marker_channel_manager._running = False  # type: ignore[union-attr]
        cluster.server.txn_coordinator.txn_marker_channel_manager.wakeup()  # type: ignore[union-attr]
        await rt.sleep(10)
        assert await end(conn, "crash", r.producer_id, r.producer_epoch, True) == E.NONE

    cluster.run(before, until_ms=20000, node="c1")
    assert markers(cluster, TOPIC, 0) == []
    cluster.restart_broker()

    async def after(rt: NodeRuntime) -> Any:
        conn = await connect(rt)
        await find_txn_coordinator(rt, conn, "crash")
        return await await_state(rt, conn, "crash", "CompleteCommit")

    cluster.run(after, until_ms=30000, node="c2")
    assert markers(cluster, TOPIC, 0) == [(out["pid"], 0, 1)] and markers(cluster, TOPIC, 1) == [(out["pid"], 0, 1)]


def test_a_timed_out_transaction_is_aborted_with_a_bumped_epoch() -> None:
    cluster = SimCluster(seed=8, transaction_abort_timed_out_transaction_cleanup_interval_ms=1000, **CONFIG)

    async def main(rt: NodeRuntime) -> Any:
        conn = await setup(rt, "slow")
        r = await init(conn, "slow", timeout_ms=2000)
        assert await add_partitions(conn, "slow", r.producer_id, r.producer_epoch, [0]) == {E.NONE}
        await rt.sleep(5000)
        d = await await_state(rt, conn, "slow", "CompleteAbort")
        late = await end(conn, "slow", r.producer_id, r.producer_epoch, True)
        return r, d, late

    r, d, late = cluster.run(main, until_ms=30000)
    assert d.producer_epoch == r.producer_epoch + 1
    assert markers(cluster, TOPIC, 0) == [(r.producer_id, r.producer_epoch + 1, 0)]
    assert late == E.PRODUCER_FENCED


def test_a_leader_and_isr_resent_at_the_same_epoch_does_not_reload_under_an_append() -> None:
    """txn-pipeline seed 2 (with a leader failover): the controller re-sent LeaderAndIsr at the
    current leader epoch to the broker leading the id's `__transaction_state` partition while an
    AddPartitionsToTxn append was in flight; the broker reloaded the partition at the same
    coordinator epoch, so the append's completion found fresh metadata (no pending state) and
    raised. Kafka calls onElection only for partitions that became leader."""
    cluster = SimCluster(seed=9, **CONFIG)
    txn_id = "resend"

    async def main(rt: NodeRuntime) -> Any:
        conn = await setup(rt, txn_id)
        r = await init(conn, txn_id)
        server = cluster.server
        rm, txn = server.replica_manager, server.txn_coordinator
        assert rm is not None and txn is not None
        part = partition_for(txn_id, TXN_PARTITIONS)
        p = rm.get_partition(TRANSACTION_STATE_TOPIC_NAME, part)
        assert p is not None
        before = txn.txn_manager.get_transaction_state(txn_id)[1]
        assert before is not None
        original = txn.txn_manager._append
        state = PartitionState(p.local_broker_id, p.leader_epoch, list(p.isr), list(p.assignment),
                               partition_epoch=p.partition_epoch)

        async def append_then_resend(partition: int, records: Any, timeout_ms: int) -> int:
            code = await original(partition, records, timeout_ms)
            # The same LeaderAndIsr again, as a controller re-sends it, before the append completes.
            await rm.become_leader_or_follower(
                rm.controller_epoch, [LeaderAndIsrPartition((TRANSACTION_STATE_TOPIC_NAME, part), bytes(16), state)],
                {})
            await rt.sleep(50)  # a (re)load, if one was started, has finished
            return code

        txn.txn_manager._append = append_then_resend  # type: ignore[method-assign]
        added = await add_partitions(conn, txn_id, r.producer_id, r.producer_epoch, [0])
        txn.txn_manager._append = original  # type: ignore[method-assign]
        after = txn.txn_manager.get_transaction_state(txn_id)[1]
        assert after is not None
        return added, after.transaction_metadata is before.transaction_metadata, await describe(conn, txn_id)

    added, same_metadata, d = cluster.run(main, until_ms=30000)
    assert added == {E.NONE}
    assert same_metadata
    assert d.transaction_state == "Ongoing" and [t.topic for t in d.topics] == [TOPIC]
