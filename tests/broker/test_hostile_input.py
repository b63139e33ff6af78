"""What the fuzzer (tests/serve/test_fuzz.py) found in the broker, each pinned by a test that
fails without its fix: a produced batch whose CRC matches but whose records do not parse was
appended and then failed every reader of the log (ListOffsets by timestamp raised from the
connection task); a CreatePartitions/CreateTopics asking for 2**31-1 partitions built the
assignment until the broker ran out of memory. And ConnectionQuotas (max.connections.per.ip,
its overrides, max.connections) on a simulated node."""

from __future__ import annotations

import struct
from collections.abc import Awaitable, Callable

import pytest

from kafkasim.broker.admin_utils import AssignmentError, BrokerMetadata, assign_replicas_to_brokers
from kafkasim.broker.connection_quotas import ConnectionQuotas, parse_overrides
from kafkasim.broker.partition import AppendError, validate_produce_records
from kafkasim.config.types import ConfigValueError
from kafkasim.protocol import errors as E
from kafkasim.records import CompressionType, crc32c
from kafkasim.records.batch import RECORDS_OFFSET, Record, build_batch
from kafkasim.runtime.api import NodeRuntime
from kafkasim.runtime.sim.world import SimWorld
from kafkasim.storage.log import LogConfig

pytestmark = pytest.mark.unit


def _refresh_crc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    return bytes(batch)


def _batch(compression: CompressionType = CompressionType.NONE) -> bytearray:
    return bytearray(build_batch([Record(1_700_000_000_000, b"key", b"value", (("h", b"v"),))],
                                 compression=compression))


def test_a_batch_whose_records_do_not_parse_is_refused_with_invalid_record() -> None:
    batch = _batch()
    # record: length, attributes, ts delta, offset delta, key len (zigzag 3 = 6), key...: make
    # the key's length run past the record
    key_len_at = RECORDS_OFFSET + 4
    assert batch[key_len_at] == 6
    batch[key_len_at] = 0x7E  # zigzag 63
    with pytest.raises(AppendError) as exc:
        validate_produce_records(_refresh_crc(batch), LogConfig())
    assert exc.value.error_code == E.INVALID_RECORD


def test_a_compressed_batch_that_does_not_decompress_is_refused_with_corrupt_message() -> None:
    batch = _batch(CompressionType.GZIP)
    batch[RECORDS_OFFSET:] = b"\x1f\x8b" + bytes(len(batch) - RECORDS_OFFSET - 2)   # a gzip header, then zeros
    with pytest.raises(AppendError) as exc:
        validate_produce_records(_refresh_crc(batch), LogConfig())
    assert exc.value.error_code == E.CORRUPT_MESSAGE


def test_a_batch_that_decompresses_past_the_bound_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import kafkasim.broker.partition as partition
    monkeypatch.setattr(partition, "MAX_DECOMPRESSED_BATCH_BYTES", 64 << 10)
    bomb = build_batch([Record(1_700_000_000_000, None, bytes(1 << 20))], compression=CompressionType.GZIP)
    assert len(bomb) < 8 << 10
    with pytest.raises(AppendError) as exc:
        validate_produce_records(bomb, LogConfig())
    assert exc.value.error_code == E.CORRUPT_MESSAGE


def test_a_sound_batch_still_passes() -> None:
    for codec in CompressionType:
        assert len(validate_produce_records(bytes(_batch(codec)), LogConfig()).headers) == 1


def test_an_excessively_large_partition_count_is_a_policy_violation() -> None:
    brokers = [BrokerMetadata(0, None)]
    with pytest.raises(AssignmentError) as exc:
        assign_replicas_to_brokers(brokers, 10_001, 1, lambda n: 0)
    assert exc.value.error_code == E.POLICY_VIOLATION
    with pytest.raises(AssignmentError):   # what the fuzzer sent: answered at once
        assign_replicas_to_brokers(brokers, 2**31 - 1, 1, lambda n: 0)
    assert len(assign_replicas_to_brokers(brokers, 10_000, 1, lambda n: 0)) == 10_000


# ------------------------------------------------------------------ ConnectionQuotas


def _run(body: Callable[[NodeRuntime], Awaitable[None]]) -> None:
    world = SimWorld(1)
    node = world.add_node("b")
    raised: list[BaseException] = []

    async def main(rt: NodeRuntime) -> None:
        try:
            await body(rt)
        except BaseException as exc:  # re-raised below, outside the simulation
            raised.append(exc)

    task = node.runtime.spawn(main(node.runtime), name="test")
    while not task.done():
        assert world.now_ms() < 100_000, "test hung"
        world.run(world.now_ms() + 100)
    if raised:
        raise raised[0]


def test_max_connections_per_ip_refuses_the_connection_over_the_limit() -> None:
    async def body(rt: NodeRuntime) -> None:
        q = ConnectionQuotas(rt, 2, parse_overrides("10.0.0.9:0, 10.0.0.7:3"), 2**31 - 1)
        assert [await q.inc("10.0.0.1") for _ in range(3)] == [True, True, False]
        q.dec("10.0.0.1")                        # the refused one is closed ...
        assert await q.inc("10.0.0.1") is False  # ... and the address is still at its limit
        q.dec("10.0.0.1")
        q.dec("10.0.0.1")
        assert await q.inc("10.0.0.1") is True   # one closed: room again
        assert [await q.inc("10.0.0.7") for _ in range(4)] == [True, True, True, False]
        assert await q.inc("10.0.0.9") is False  # an override of 0: never
    _run(body)


def test_max_connections_holds_a_new_connection_until_one_closes() -> None:
    async def body(rt: NodeRuntime) -> None:
        q = ConnectionQuotas(rt, 2**31 - 1, {}, 2)
        assert await q.inc("a") and await q.inc("b")
        admitted: list[str] = []

        async def third(name: str) -> None:
            await q.inc(name)
            admitted.append(name)

        rt.spawn(third("c"))
        rt.spawn(third("d"))
        await rt.sleep(10)
        assert admitted == [] and q.total == 2
        q.dec("a")
        await rt.sleep(10)
        assert admitted == ["c"] and q.total == 2   # the slot went to the oldest waiter
        q.dec("b")
        await rt.sleep(10)
        assert admitted == ["c", "d"]
        q.dec("c")
        q.dec("d")
        assert q.total == 0 and q.counts == {}
    _run(body)


def test_overrides_that_are_not_host_count_are_refused() -> None:
    assert parse_overrides("") == {}
    assert parse_overrides("127.0.0.1:5,::1:7") == {"127.0.0.1": 5, "::1": 7}
    for bad in ("127.0.0.1", "127.0.0.1:x", ":5", "a:-1"):
        with pytest.raises(ConfigValueError):
            parse_overrides(bad)
