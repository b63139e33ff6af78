"""power-loss-default-flush-swarm seed 116 (scenarios/regressions/power-loss-default-flush-swarm-
seed-116.toml): kafkasim's consumer fetched from one leader at a time, so a leader that had lost
power (no RST: the Fetch waits out request.timeout.ms, 30 s) held up every partition, twice in
a row, and afterwards each poll paid every idle leader's fetch.max.wait.ms in turn. Kafka's
Fetcher.sendFetches sends one Fetch to every node with fetchable partitions and none in flight
(AbstractFetch.prepareFetchRequests), and the records of whichever answers are handed back."""

from __future__ import annotations

import io
from types import SimpleNamespace
from typing import Any

import pytest

from kafkasim.client.consumer import Consumer, ConsumerConfig
from kafkasim.protocol.messages.fetch import FetchResponse
from kafkasim.records.batch import Record, build_batch
from kafkasim.runtime.api import RuntimeTimeout
from kafkasim.runtime.sim.world import SimWorld

pytestmark = pytest.mark.sim

FTR = FetchResponse.FetchableTopicResponse


class Leader:
    """A leader's connection: answers each Fetch after `delay_ms` with `n` new records per
    partition from the fetch offset; None = a host without power (request.timeout.ms)."""

    def __init__(self, rt: Any, delay_ms: float | None, n: int) -> None:
        self.rt, self.delay_ms, self.n = rt, delay_ms, n
        self.asked: list[float] = []

    async def request_within(self, req: Any, timeout_ms: float) -> Any:
        self.asked.append(self.rt.monotonic_ms())
        if self.delay_ms is None:
            await self.rt.sleep(timeout_ms)
            raise RuntimeTimeout(f"timed out after {timeout_ms} ms")
        await self.rt.sleep(self.delay_ms)
        parts = []
        for t in req.topics:
            for p in t.partitions:
                data = b""
                if self.n:
                    batch = bytearray(build_batch([Record(1000, None, b"v%d" % i) for i in range(self.n)]))
                    batch[0:8] = p.fetch_offset.to_bytes(8, "big")   # base offset = the fetch offset
                    data = bytes(batch)
                parts.append(FTR.PartitionData(partition_index=p.partition, high_watermark=10**6, records=data))
        return FetchResponse(responses=[FTR(topic=req.topics[0].topic, partitions=parts)])


def _consumer(rt: Any, leaders: dict[int, Leader]) -> Consumer:
    consumer = Consumer(rt, "b:9092", ConsumerConfig(fetch_max_wait_ms=200))

    async def broker_connection(broker_id: int) -> Leader:
        return leaders[broker_id]

    async def refresh_metadata(*_: Any, **__: Any) -> None:
        return None

    consumer.cluster = SimpleNamespace(  # type: ignore[assignment]
        leaders={("t", p): SimpleNamespace(leader=p) for p in leaders}, broker_connection=broker_connection,
        refresh_metadata=refresh_metadata, client_id="consumer-0", close=lambda: None)
    consumer.positions = {("t", p): 0 for p in leaders}
    return consumer


def test_a_leader_that_does_not_answer_holds_up_only_its_own_partitions() -> None:
    world = SimWorld(1, trace_out=io.StringIO())
    rt = world.add_node("consumer-0").runtime
    dead, live = Leader(rt, None, 0), Leader(rt, 1.0, 2)
    consumer = _consumer(rt, {0: dead, 1: live})
    got: list[tuple[float, int, int]] = []

    async def main() -> None:
        for _ in range(5):
            for r in await consumer.poll():
                got.append((rt.monotonic_ms(), r.partition, r.offset))
        consumer.close()

    rt.spawn(main(), name="main")
    world.run(5000.0)
    # Before: the first poll waited 30.2 s on the dead leader before asking the live one.
    assert [(p, o) for _, p, o in got] == [(1, o) for o in range(10)]
    assert got[-1][0] < 100.0 and len(dead.asked) == 1   # one Fetch in flight to the dead leader


def test_an_empty_poll_means_every_leader_answered() -> None:
    world = SimWorld(1, trace_out=io.StringIO())
    rt = world.add_node("consumer-0").runtime
    slow, fast = Leader(rt, 200.0, 0), Leader(rt, 1.0, 0)
    consumer = _consumer(rt, {0: slow, 1: fast})
    out: dict[str, Any] = {}

    async def main() -> None:
        out["records"] = await consumer.poll()
        out["at"] = rt.monotonic_ms()
        consumer.close()

    rt.spawn(main(), name="main")
    world.run(1000.0)
    assert out["records"] == [] and out["at"] >= 200.0   # the slow leader's answer was waited for
    assert len(fast.asked) > 1                            # while the fast one was asked again


class FlippedControlBit(Leader):
    """Answers the first Fetch with a batch whose attributes byte a read-side bit flip turned into
    a control batch's (bit 5: its CRC no longer matches), later ones with the batch as stored."""

    async def request_within(self, req: Any, timeout_ms: float) -> Any:
        resp = await super().request_within(req, timeout_ms)
        if len(self.asked) == 1:
            part = resp.responses[0].partitions[0]
            data = bytearray(part.records)
            data[22] ^= 0x20  # attributes (bytes 21-22): isControl, as bit-rot seed 422 read it
            part.records = bytes(data)
        return resp


def test_a_batch_whose_crc_fails_is_never_skipped_as_a_control_batch() -> None:
    """bit-rot seed 422 (--buggify, with replica fetch sessions): the leader read a data batch with
    its control bit flipped; the consumer skipped it as a marker and lost an acknowledged record.
    Kafka's consumer checks the CRC first (check.crcs): the batch is corrupt, the position stays,
    and the next fetch reads it whole."""
    world = SimWorld(1, trace_out=io.StringIO())
    rt = world.add_node("consumer-0").runtime
    leader = FlippedControlBit(rt, 1.0, 2)
    consumer = _consumer(rt, {0: leader})
    polls: list[list[int]] = []

    async def main() -> None:
        for _ in range(2):
            polls.append([r.offset for r in await consumer.poll()])
        consumer.close()

    rt.spawn(main(), name="main")
    world.run(1000.0)
    assert consumer.corrupt_batches == 1
    assert polls == [[], [0, 1]]
