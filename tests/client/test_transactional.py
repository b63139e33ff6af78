"""kafkasim's own TransactionalProducer and read_committed Consumer against a simulated broker:
committed transactions are read, aborted ones are not (read_uncommitted sees both); offsets sent
to a transaction become the group's committed offsets only with the commit; a second producer
with the same transactional id fences the first."""

from __future__ import annotations

from typing import Any

import pytest

from kafkasim.client.consumer import Consumer, ConsumerConfig
from kafkasim.client.transactional import ProducerFencedError, TransactionalConfig, TransactionalProducer
from kafkasim.client.txn_coordinator_client import GROUP_KEY_TYPE, CoordinatorClient
from kafkasim.protocol.messages.offset_fetch import OffsetFetchRequest
from kafkasim.runtime.api import NodeRuntime
from tests.broker.group.group_sim import BOOTSTRAP, SimCluster

pytestmark = pytest.mark.sim

TOPIC = "t"
TXN_CONFIG = {"transaction_state_log_replication_factor": 1, "transaction_state_log_num_partitions": 3,
              "num_partitions": 2}


async def _read_all(rt: NodeRuntime, isolation: int, expect: int) -> list[bytes]:
    c = Consumer(rt, BOOTSTRAP, ConsumerConfig(fetch_max_wait_ms=100, isolation_level=isolation), client_id="c")
    await c.assign_all(TOPIC)
    got: list[bytes] = []
    for _ in range(30):
        got += [r.value or b"" for r in await c.poll()]
        if len(got) >= expect:
            break
    for _ in range(3):  # nothing more arrives
        got += [r.value or b"" for r in await c.poll()]
    c.close()
    return sorted(got)


def _producer(rt: NodeRuntime, name: str = "p") -> TransactionalProducer:
    return TransactionalProducer(rt, BOOTSTRAP, TransactionalConfig("tx-1", request_timeout_ms=5000,
                                                                    max_block_ms=20000), client_id=name)


def test_commit_visible_abort_hidden_under_read_committed() -> None:
    cluster = SimCluster(seed=5, **TXN_CONFIG)

    async def main(rt: NodeRuntime) -> Any:
        p = _producer(rt)
        await p.start([TOPIC])
        await p.init_transactions()
        for n, commit in ((0, True), (1, False), (2, True), (3, False)):
            p.begin_transaction()
            futs = [p.send(TOPIC, f"{n}-{i}".encode(), partition=i % 2) for i in range(4)]
            await p.flush()
            assert [(await f).error_code for f in futs] == [0, 0, 0, 0]
            await (p.commit_transaction() if commit else p.abort_transaction())
        committed = await _read_all(rt, 1, 8)
        everything = await _read_all(rt, 0, 16)
        return committed, everything

    committed, everything = cluster.run(main, until_ms=120_000)
    assert committed == sorted(f"{n}-{i}".encode() for n in (0, 2) for i in range(4))
    assert everything == sorted(f"{n}-{i}".encode() for n in range(4) for i in range(4))


def test_offsets_commit_with_the_transaction_and_zombie_is_fenced() -> None:
    cluster = SimCluster(seed=6, **TXN_CONFIG)

    async def committed_offset(rt: NodeRuntime, p: TransactionalProducer) -> int:
        group = CoordinatorClient(rt, p.cluster, "g", GROUP_KEY_TYPE, request_timeout_ms=5000,
                                  retry_backoff_ms=100, max_block_ms=20000)
        T = OffsetFetchRequest.OffsetFetchRequestTopic
        _, resp = await group.call(lambda: OffsetFetchRequest(group_id="g", topics=[
            T(name=TOPIC, partition_indexes=[0])], require_stable=True), lambda r: int(r.error_code))
        return int(resp.topics[0].partitions[0].committed_offset)

    async def main(rt: NodeRuntime) -> Any:
        p = _producer(rt)
        await p.start([TOPIC])
        await p.init_transactions()
        p.begin_transaction()
        p.send(TOPIC, b"a", partition=0)
        await p.send_offsets_to_transaction({(TOPIC, 0): 7}, "g")
        await p.abort_transaction()
        after_abort = await committed_offset(rt, p)
        p.begin_transaction()
        p.send(TOPIC, b"b", partition=0)
        await p.send_offsets_to_transaction({(TOPIC, 0): 9}, "g")
        await p.commit_transaction()
        after_commit = await committed_offset(rt, p)
        zombie_begun = p.begin_transaction()
        p.send(TOPIC, b"z", partition=1)
        await p.flush()
        fresh = _producer(rt, "p2")
        await fresh.start([TOPIC])
        await fresh.init_transactions()   # fences p and aborts its open transaction
        try:
            await p.commit_transaction()
            fenced = None
        except ProducerFencedError as exc:
            fenced = exc.code
        return after_abort, after_commit, zombie_begun, fenced, fresh.epoch, await _read_all(rt, 1, 1)

    after_abort, after_commit, _, fenced, epoch, visible = cluster.run(main, until_ms=120_000)
    assert after_abort == -1
    assert after_commit == 9
    assert fenced is not None
    assert epoch == 2  # Kafka: the fence bumps the epoch to abort, the retried InitProducerId bumps again
    assert visible == [b"b"]
