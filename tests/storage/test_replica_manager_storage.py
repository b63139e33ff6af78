"""The broker's use of the storage (ReplicaManager + Partition over the LogManager): leading a
partition writes its leader epoch and topic id, flush.messages makes an acknowledged append
durable before the ack, a clean shutdown marks the log dir, a disk error answers
KAFKA_STORAGE_ERROR, and ListOffsets by timestamp goes through the time index."""

from __future__ import annotations

from typing import Any

import pytest
from storage_helpers import run_sim

from kafkasim.broker.metadata_cache import MetadataCache
from kafkasim.broker.replica_manager import FetchSpec, ReplicaManager
from kafkasim.protocol import errors as E
from kafkasim.records.batch import Record, build_batch
from kafkasim.runtime.api import NodeRuntime
from kafkasim.storage.checkpoints import CLEAN_SHUTDOWN_FILE
from kafkasim.storage.log import LogConfig
from kafkasim.storage.log_manager import LogManager

pytestmark = pytest.mark.unit


def _replica_manager(rt: NodeRuntime, config: LogConfig) -> ReplicaManager:
    """A single broker's ReplicaManager (id 0) without a controller or ZooKeeper."""
    return ReplicaManager(rt, LogManager(rt, "kafka-logs", config), broker_id=0, metadata_cache=MetadataCache(),
                          broker_epoch=lambda: -1)


def _produce(i: int, ts: int) -> bytes:
    return build_batch([Record(ts, f"k{i}".encode(), f"v{i}".encode())])


def _read(rt: NodeRuntime, path: str) -> bytes:
    f = rt.fs.open(path, create=False)
    return f.read(0, f.size())


def test_leading_producing_power_loss_and_restart() -> None:
    async def body(rt: NodeRuntime, world: Any) -> Any:
        rm = _replica_manager(rt, LogConfig(flush_messages=1))
        p = await rm.make_leader("t", 0, 5, topic_id=bytes(range(16)))
        acks = []
        for i in range(5):
            res = await rm.append_records("t", 0, _produce(i, rt.now_ms() + i))
            acks.append((res.error_code, res.base_offset))
        epoch = _read(rt, "kafka-logs/t-0/leader-epoch-checkpoint")
        meta = _read(rt, "kafka-logs/t-0/partition.metadata")
        assert p.log.recovery_point == 5  # flush.messages=1: durable before each ack
        world.nodes["b"].crash("power")
        rt2 = world.nodes["b"].restart()
        rm2 = _replica_manager(rt2, LogConfig(flush_messages=1))
        p2 = await rm2.make_leader("t", 0, 6)
        results, _ = rm2.read_once([FetchSpec("t", 0, 0, 1 << 20)], 1 << 20, False)
        return acks, epoch, meta, p2.log.log_end_offset, results[0].error_code, len(results[0].records), \
            _read(rt2, "kafka-logs/t-0/leader-epoch-checkpoint")

    acks, epoch, meta, leo, err, size, epoch2 = run_sim(body)
    assert acks == [(E.NONE, i) for i in range(5)]
    assert epoch == b"0\n1\n5 0\n" and meta == b"version: 0\ntopic_id: AAECAwQFBgcICQoLDA0ODw"
    assert leo == 5 and err == E.NONE and size > 0  # every acknowledged write survived
    assert epoch2 == b"0\n2\n5 0\n6 5\n"


def test_clean_shutdown_marks_the_log_dir() -> None:
    async def body(rt: NodeRuntime, world: Any) -> Any:
        rm = _replica_manager(rt, LogConfig())
        await rm.make_leader("t", 0, 1)
        await rm.append_records("t", 0, _produce(0, rt.now_ms()))
        await rm.shutdown()
        return _read(rt, f"kafka-logs/{CLEAN_SHUTDOWN_FILE}"), _read(rt, "kafka-logs/recovery-point-offset-checkpoint")

    assert run_sim(body) == (b'{"version":0,"brokerEpoch":-1}', b"0\n1\nt 0 1\n")


def test_a_disk_error_answers_kafka_storage_error() -> None:
    async def body(rt: NodeRuntime, world: Any) -> Any:
        rm = _replica_manager(rt, LogConfig(flush_messages=1))
        await rm.make_leader("t", 0, 1)
        world.nodes["b"].disk.fail_next_fsync()
        first = await rm.append_records("t", 0, _produce(0, rt.now_ms()))
        second = await rm.append_records("t", 0, _produce(1, rt.now_ms()))
        results, _ = rm.read_once([FetchSpec("t", 0, 0, 1 << 20)], 1 << 20, False)
        return first.error_code, second.error_code, results[0].error_code

    assert run_sim(body) == (E.KAFKA_STORAGE_ERROR, E.KAFKA_STORAGE_ERROR, E.KAFKA_STORAGE_ERROR)


def test_list_offsets_by_timestamp_and_max_timestamp() -> None:
    async def body(rt: NodeRuntime, world: Any) -> Any:
        rm = _replica_manager(rt, LogConfig(segment_bytes=300, index_interval_bytes=50))
        p = await rm.make_leader("t", 0, 1)
        base = rt.now_ms()
        for dt in [0, 10, 5, 30, 20, 40]:
            await rm.append_records("t", 0, build_batch([Record(base + dt, None, b"a"), Record(base + dt + 1, None, b"b")]))
        return [p.offset_for_timestamp(base + t) for t in (0, 6, 12, 41, 42)], p.log.max_timestamp_and_offset(), base

    found, max_ts, base = run_sim(body)
    assert found == [(0, base), (2, base + 10), (6, base + 30), (11, base + 41), None]
    assert max_ts == (base + 41, 11)


def test_topic_configs_are_read_at_startup_and_for_a_new_log_only() -> None:
    """Kafka reads a topic's configs from ZooKeeper at LogManager.startup (the logs on disk) and
    when it creates a log (getOrCreateLog's fetchLogConfig), never while a LeaderAndIsr brings up a
    log that exists: power-loss-fsync-swarm seed 8336 aborted a LeaderAndIsr on a read from an
    expired session after two followers had taken their epochs, and their fetchers never started.
    A failed read for a new log leaves the partition unhosted, so the next request applies it."""
    from kafkasim.runtime.api import SessionExpiredError
    reads: list[str] = []
    failing: set[str] = set()

    async def topic_configs(topic: str) -> tuple[LogConfig, int]:
        reads.append(topic)
        if topic in failing:
            raise SessionExpiredError("session expired")
        return LogConfig(segment_bytes=4096), 2

    def replica_manager(rt: NodeRuntime) -> ReplicaManager:
        return ReplicaManager(rt, LogManager(rt, "kafka-logs", LogConfig()), broker_id=0,
                              metadata_cache=MetadataCache(), broker_epoch=lambda: -1, topic_configs=topic_configs)

    async def body(rt: NodeRuntime, world: Any) -> Any:
        await replica_manager(rt).make_leader("t", 0, 1)
        created = list(reads)
        world.nodes["b"].crash("power")
        rm = replica_manager(world.nodes["b"].restart())
        await rm.startup()
        at_startup = list(reads)
        failing.update({"t", "u"})
        p = await rm.make_leader("t", 0, 2)   # the log exists: no read, the startup's configs
        with pytest.raises(SessionExpiredError):
            await rm.make_leader("u", 0, 1)   # a new log: read, and the read fails
        unhosted = rm.get_partition("u", 0) is None
        failing.clear()
        u = await rm.make_leader("u", 0, 1)
        return created, at_startup, (p.min_insync_replicas, p.log.config.segment_bytes), unhosted, \
            u.min_insync_replicas, reads

    created, at_startup, loaded, unhosted, u_min_isr, reads_in_all = run_sim(body)
    assert created == ["t"] and at_startup == ["t", "t"]
    assert loaded == (2, 4096) and unhosted and u_min_isr == 2
    assert reads_in_all == ["t", "t", "u", "u"]
