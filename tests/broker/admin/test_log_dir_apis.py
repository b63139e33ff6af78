"""DescribeLogDirs / AlterReplicaLogDirs on a broker with two log dirs, in the simulated world:
the answers Kafka 3.9.1 gave for the same requests (`realkafka`, two log.dirs), and the replica
really moving — its records still served after the swap."""

from __future__ import annotations

from typing import Any

import pytest

from kafkasim.broker.config import BrokerConfig
from kafkasim.broker.server import KafkaServer
from kafkasim.protocol import api as A
from kafkasim.protocol.messages.alter_replica_log_dirs import AlterReplicaLogDirsRequest as AL
from kafkasim.protocol.messages.create_topics import CreateTopicsRequest as CT
from kafkasim.protocol.messages.describe_log_dirs import DescribeLogDirsRequest as DL
from kafkasim.runtime.api import NodeRuntime
from kafkasim.runtime.sim.world import SimWorld
from kafkasim.storage.log_dir_mover import ALTER_LOG_DIRS_DELAY_MS
from tests.broker.test_idempotence import BROKER, Wire, _connect

pytestmark = pytest.mark.sim


def _run(body: Any) -> Any:
    world = SimWorld(5)
    node = world.add_node(BROKER)
    cfg = BrokerConfig(host=BROKER, port=9092, log_dir="d1,d2", zookeeper_session_timeout_ms=4000)
    server = KafkaServer(node.runtime, cfg)
    node.runtime.spawn(server.startup())
    client = world.add_node("client")
    out: dict[str, Any] = {}

    async def main() -> None:
        await client.runtime.sleep(100)
        out["r"] = await body(client.runtime, server)
    task = client.runtime.spawn(main())
    world.run(120_000)
    assert task.done() and world.failures == [], world.failures
    return out["r"]


async def describe(w: Wire, topics: list[tuple[str, list[int]]] | None, version: int = 4) -> Any:
    req = DL(topics=None if topics is None else [DL.DescribableLogDirTopic(topic=t, partitions=p) for t, p in topics])
    r = await w.call(A.DESCRIBE_LOG_DIRS, version, req)
    return [(x.error_code, x.log_dir, [(t.name, [(p.partition_index, p.partition_size > 0, p.offset_lag,
                                                  p.is_future_key) for p in t.partitions]) for t in x.topics])
            for x in r.results]


async def alter(w: Wire, entries: list[tuple[str, list[tuple[str, list[int]]]]], version: int = 2) -> Any:
    D = AL.AlterReplicaLogDir
    r = await w.call(A.ALTER_REPLICA_LOG_DIRS, version, AL(dirs=[
        D(path=p, topics=[D.AlterReplicaLogDirTopic(name=t, partitions=ps) for t, ps in tl]) for p, tl in entries]))
    return [(t.topic_name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in r.results]


def test_log_dirs_as_kafka_answers_and_a_replica_moves_with_its_records() -> None:
    async def body(rt: NodeRuntime, server: KafkaServer) -> Any:
        w = await _connect(rt)
        T = CT.CreatableTopic
        A_ = T.CreatableReplicaAssignment
        await w.call(A.CREATE_TOPICS, 7, CT(topics=[T(name="ld", num_partitions=-1, replication_factor=-1, configs=[],
                                                       assignments=[A_(partition_index=i, broker_ids=[0])
                                                                    for i in range(4)])], timeout_ms=10000))
        for _ in range(3):
            await w.produce("ld", -1, -1, -1)       # partition 0 gets records
        out: dict[str, Any] = {}
        out["all"] = await describe(w, None)
        out["some"] = await describe(w, [("ld", [0, 1, 9]), ("nope", [0])])
        out["none"] = await describe(w, [])
        out["v0"] = await describe(w, [("ld", [0])], version=0)
        out["bad"] = [await alter(w, [("/nonexistent", [("ld", [0])])]), await alter(w, [("d2", [("nope", [0])])]),
                      await alter(w, [("d2", [("ld", [9])])]), await alter(w, [("data2", [("ld", [0])])])]
        out["move"] = await alter(w, [("d2", [("ld", [0, 1, 2, 3])])])
        out["after"] = await describe(w, [("ld", [0, 1, 2, 3])])
        await rt.sleep(ALTER_LOG_DIRS_DELAY_MS + 2000)
        out["later"] = await describe(w, [("ld", [0, 1, 2, 3])])
        out["dup"] = await alter(w, [("d1", [("ld", [0])]), ("d2", [("ld", [0])])])
        out["leo"] = await w.log_end_offset("ld")
        part = server.replica_manager.get_partition("ld", 0)
        out["log"] = part.log.dir if part is not None else None
        return out

    out = _run(body)
    assert out["all"] == [(0, "d1", [("ld", [(2, False, 0, False), (0, True, 0, False)])]),
                          (0, "d2", [("ld", [(3, False, 0, False), (1, False, 0, False)])])]
    assert out["some"] == [(0, "d1", [("ld", [(0, True, 0, False)])]), (0, "d2", [("ld", [(1, False, 0, False)])])]
    assert out["none"] == [(0, "d1", []), (0, "d2", [])]
    assert out["v0"] == [(0, "d1", [("ld", [(0, True, 0, False)])]), (0, "d2", [])]
    assert out["bad"] == [[("ld", [(0, 57)])], [("nope", [(0, 3)])], [("ld", [(9, 3)])], [("ld", [(0, 57)])]]
    assert out["move"] == [("ld", [(3, 0), (2, 0), (1, 0), (0, 0)])]
    # Right after the request: partitions 0 and 2 have future logs in d2 (not filled yet).
    assert out["after"] == [(0, "d1", [("ld", [(2, False, 0, False), (0, True, 0, False)])]),
                            (0, "d2", [("ld", [(3, False, 0, False), (1, False, 0, False), (2, False, 0, True),
                                               (0, False, 3, True)])])]
    assert out["later"] == [(0, "d1", []), (0, "d2", [("ld", [(3, False, 0, False), (2, False, 0, False),
                                                              (1, False, 0, False), (0, True, 0, False)])])]
    assert out["dup"] == [("ld", [(0, 0)])]
    assert out["leo"] == 3 and out["log"] == "d2/ld-0"
