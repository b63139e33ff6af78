"""kafkasim's own GroupConsumer (kafkasim/client/group.py) in the simulated world: two members
split a topic, consume and commit; a new pair resumes at the committed offsets. And a group run
is a pure function of the seed (same trace hash twice)."""

from __future__ import annotations

from typing import Any

import pytest

from kafkasim.client.consumer import ConsumerConfig
from kafkasim.client.group import GroupConfig, GroupConsumer, range_assign
from kafkasim.client.producer import Producer
from kafkasim.runtime.api import NodeRuntime
from tests.broker.group.group_sim import BOOTSTRAP, SimCluster

pytestmark = pytest.mark.sim

TOPIC = "work"
PARTITIONS = 4
PER_PARTITION = 30


def test_range_assign_matches_kafkas_range_assignor() -> None:
    plan = range_assign({"b": ["t", "u"], "a": ["t"], "c": ["t"]}, {"t": 7, "u": 2})
    assert plan == {"a": [("t", 0), ("t", 1), ("t", 2)], "b": [("t", 3), ("t", 4), ("u", 0), ("u", 1)],
                    "c": [("t", 5), ("t", 6)]}


async def _produce(rt: NodeRuntime, start: int, count: int) -> None:
    producer = Producer(rt, BOOTSTRAP, client_id="p")
    await producer.start([TOPIC])
    futures = [producer.send(TOPIC, f"{p}:{i}".encode(), partition=p)
               for i in range(start, start + count) for p in range(PARTITIONS)]
    for fut in futures:
        await fut
    producer.close()


async def _consume(rt: NodeRuntime, names: list[str], until: int) -> dict[str, list[Any]]:
    """Members poll and commit after every poll until `until` records were seen in total."""
    consumers = [GroupConsumer(rt, BOOTSTRAP, GroupConfig("workers", session_timeout_ms=3000,
                                                          heartbeat_interval_ms=300),
                               [TOPIC], ConsumerConfig(fetch_max_wait_ms=100), client_id=n) for n in names]
    seen: dict[str, list[Any]] = {n: [] for n in names}

    async def run(c: GroupConsumer, name: str) -> None:
        while sum(len(v) for v in seen.values()) < until:
            records = await c.poll()
            seen[name] += [(r.partition, r.offset, r.value) for r in records]
            if records:
                await c.commit()
        await c.commit()

    tasks = [rt.spawn(run(c, n)) for c, n in zip(consumers, names)]
    for t in tasks:
        await t
    for c in consumers:
        await c.close()
    return seen


def test_group_consumers_split_commit_and_resume() -> None:
    cluster = SimCluster(seed=31, num_partitions=PARTITIONS, group_initial_rebalance_delay_ms=300)

    async def main(rt: NodeRuntime) -> Any:
        await _produce(rt, 0, PER_PARTITION)
        first = await _consume(rt, ["a", "b"], PARTITIONS * PER_PARTITION)
        await _produce(rt, PER_PARTITION, 10)
        second = await _consume(rt, ["c", "d"], PARTITIONS * 10)
        return first, second

    first, second = cluster.run(main, until_ms=120_000)
    assert all(first.values()), f"both members consumed: {[len(v) for v in first.values()]}"
    by_partition: dict[int, list[int]] = {}
    for records in first.values():
        for p, off, value in records:
            assert value == f"{p}:{off}".encode()
            by_partition.setdefault(p, []).append(off)
    assert {p: sorted(offs) for p, offs in by_partition.items()} == \
        {p: list(range(PER_PARTITION)) for p in range(PARTITIONS)}
    # The second pair starts exactly at the committed offsets: nothing from the first round again.
    resumed = sorted((p, off) for records in second.values() for p, off, _ in records)
    assert resumed == [(p, off) for p in range(PARTITIONS) for off in range(PER_PARTITION, PER_PARTITION + 10)]


def test_group_run_is_deterministic() -> None:
    def once() -> str:
        cluster = SimCluster(seed=32, num_partitions=PARTITIONS)

        async def main(rt: NodeRuntime) -> Any:
            await _produce(rt, 0, 5)
            return await _consume(rt, ["a", "b", "c"], PARTITIONS * 5)

        cluster.run(main, until_ms=60_000)
        return cluster.world.trace.hexdigest()

    assert once() == once()
