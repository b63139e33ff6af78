"""kafkasim's idempotent producer against a scripted broker: a retried batch keeps its
(producer id, epoch, sequence); OUT_OF_ORDER_SEQUENCE_NUMBER bumps the epoch and restarts the
partition at sequence 0; DUPLICATE_SEQUENCE_NUMBER is a success; other partitions move to
the new epoch at their next batch."""

from __future__ import annotations

from typing import Any

import pytest

from kafkasim.client.producer import Producer, ProducerConfig
from kafkasim.protocol import errors as E
from kafkasim.records.batch import iter_batches
from kafkasim.runtime.sim.world import SimWorld

pytestmark = pytest.mark.sim


def _run(answers: list[int], sends: list[int]) -> tuple[list[tuple[int, int, int, int]], list[Any]]:
    """Send one record to each partition in `sends` (waiting for each); the scripted broker
    answers `answers` in turn (then NONE). Returns (partition, epoch, base sequence, count) per
    attempt and the record metadata."""
    world = SimWorld(1)
    rt = world.add_node("p").runtime
    producer = Producer(rt, "b:9092", ProducerConfig(idempotence=True, linger_ms=0, retry_backoff_ms=1))
    producer.cluster.partition_counts["t"] = 2
    producer.producer_id, producer.epoch = 7, 0
    attempts: list[tuple[int, int, int, int]] = []
    script = list(answers)

    async def produce_once(topic: str, partition: int, records: bytes) -> tuple[int, int]:
        h = next(iter_batches(records))[1]
        assert h.producer_id == 7
        attempts.append((partition, h.producer_epoch, h.base_sequence, h.last_offset_delta + 1))
        return (script.pop(0) if script else E.NONE), 100 + len(attempts)

    async def refresh(*_: Any, **__: Any) -> dict[str, int]:
        return {}

    producer._produce_once = produce_once  # type: ignore[method-assign]
    producer.cluster.refresh_metadata = refresh  # type: ignore[method-assign]
    results: list[Any] = []

    async def main() -> None:
        for p in sends:
            results.append(await producer.send("t", b"v", partition=p))

    rt.spawn(main())
    world.run(10_000)
    return attempts, results


def test_retry_keeps_sequence_and_out_of_order_bumps_epoch() -> None:
    attempts, results = _run([E.NOT_LEADER_OR_FOLLOWER, E.NONE, E.OUT_OF_ORDER_SEQUENCE_NUMBER],
                             [0, 0, 0, 1])
    assert attempts == [
        (0, 0, 0, 1), (0, 0, 0, 1),   # a retry resends the same (epoch, sequence)
        (0, 0, 1, 1),                 # next batch: sequence 1 ... answered OUT_OF_ORDER
        (0, 1, 0, 1),                 # epoch bumped, the partition restarts at 0
        (0, 1, 1, 1),                 # and goes on from there
        (1, 1, 0, 1),                 # partition 1 starts under the new epoch
    ]
    assert all(r.error_code == E.NONE for r in results)


def test_duplicate_sequence_is_success_and_fatal_error_bumps_epoch() -> None:
    attempts, results = _run([E.DUPLICATE_SEQUENCE_NUMBER, E.INVALID_PRODUCER_EPOCH], [0, 0, 0])
    assert [r.error_code for r in results] == [E.NONE, E.INVALID_PRODUCER_EPOCH, E.NONE]
    assert results[0].offset == -1   # a duplicate's offsets are unknown
    # the failed batch's sequence may or may not be written: the next batch uses a new epoch
    assert attempts == [(0, 0, 0, 1), (0, 0, 1, 1), (0, 1, 0, 1)]
