"""Admin APIs in the simulated world, answered as a Kafka 3.9.1 broker answers them (expected
values below were captured from one with `realkafka`), plus what they leave in ZooKeeper and on
disk."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from kafkasim.broker import config_helper as C
from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.alter_configs import AlterConfigsRequest as AC
from kafkasim.protocol.messages.create_partitions import CreatePartitionsRequest as CP
from kafkasim.protocol.messages.delete_records import DeleteRecordsRequest as DR
from kafkasim.protocol.messages.delete_topics import DeleteTopicsRequest as DT
from kafkasim.protocol.messages.describe_cluster import DescribeClusterRequest as DCL
from kafkasim.protocol.messages.describe_configs import DescribeConfigsRequest as DC
from kafkasim.protocol.messages.describe_log_dirs import DescribeLogDirsRequest as DLD
from kafkasim.protocol.messages.fetch import FetchRequest
from kafkasim.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest as IAC
from kafkasim.protocol.messages.list_offsets import ListOffsetsRequest
from kafkasim.protocol.messages.metadata import MetadataRequest
from kafkasim.protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest as OFLE
from kafkasim.runtime.api import NodeRuntime
from kafkasim.runtime.sim.world import SimWorld
from tests.broker.test_idempotence import BROKER, Wire, _connect, _restart_broker, _run

pytestmark = pytest.mark.sim

Body = Callable[[SimWorld, NodeRuntime, dict[str, Any]], Awaitable[Any]]

# Kafka 3.9.1, DescribeConfigs v4 of a topic without overrides (include_synonyms):
# name, value, source, type, synonyms.
KAFKA_TOPIC_DEFAULTS = [
    ("compression.type", "producer", 5, 2, [("compression.type", "producer", 5)]),
    ("remote.log.delete.on.disable", "false", 5, 1, []),
    ("leader.replication.throttled.replicas", "", 5, 7, []),
    ("remote.storage.enable", "false", 5, 1, []),
    ("message.downconversion.enable", "true", 5, 1, [("log.message.downconversion.enable", "true", 5)]),
    ("min.insync.replicas", "1", 5, 3, [("min.insync.replicas", "1", 5)]),
    ("segment.jitter.ms", "0", 5, 5, []),
    ("remote.log.copy.disable", "false", 5, 1, []),
    ("local.retention.ms", "-2", 5, 5, [("log.local.retention.ms", "-2", 5)]),
    ("cleanup.policy", "delete", 5, 7, [("log.cleanup.policy", "delete", 5)]),
    ("flush.ms", "9223372036854775807", 5, 5, []),
    ("follower.replication.throttled.replicas", "", 5, 7, []),
    ("compression.lz4.level", "9", 5, 3, [("compression.lz4.level", "9", 5)]),
    ("segment.bytes", "1073741824", 5, 3, [("log.segment.bytes", "1073741824", 5)]),
    ("retention.ms", "604800000", 5, 5, []),
    ("compression.gzip.level", "-1", 5, 3, [("compression.gzip.level", "-1", 5)]),
    ("flush.messages", "9223372036854775807", 5, 5, [("log.flush.interval.messages", "9223372036854775807", 5)]),
    ("compression.zstd.level", "3", 5, 3, [("compression.zstd.level", "3", 5)]),
    ("message.format.version", "3.0-IV1", 5, 2, [("log.message.format.version", "3.0-IV1", 5)]),
    ("max.compaction.lag.ms", "9223372036854775807", 5, 5,
     [("log.cleaner.max.compaction.lag.ms", "9223372036854775807", 5)]),
    ("file.delete.delay.ms", "60000", 5, 5, [("log.segment.delete.delay.ms", "60000", 5)]),
    ("max.message.bytes", "1048588", 5, 3, [("message.max.bytes", "1048588", 5)]),
    ("min.compaction.lag.ms", "0", 5, 5, [("log.cleaner.min.compaction.lag.ms", "0", 5)]),
    ("message.timestamp.type", "CreateTime", 5, 2, [("log.message.timestamp.type", "CreateTime", 5)]),
    ("local.retention.bytes", "-2", 5, 5, [("log.local.retention.bytes", "-2", 5)]),
    ("preallocate", "false", 5, 1, [("log.preallocate", "false", 5)]),
    ("min.cleanable.dirty.ratio", "0.5", 5, 6, [("log.cleaner.min.cleanable.ratio", "0.5", 5)]),
    ("index.interval.bytes", "4096", 5, 3, [("log.index.interval.bytes", "4096", 5)]),
    ("unclean.leader.election.enable", "false", 5, 1, [("unclean.leader.election.enable", "false", 5)]),
    ("retention.bytes", "-1", 5, 5, [("log.retention.bytes", "-1", 5)]),
    ("delete.retention.ms", "86400000", 5, 5, [("log.cleaner.delete.retention.ms", "86400000", 5)]),
    ("message.timestamp.after.max.ms", "9223372036854775807", 5, 5,
     [("log.message.timestamp.after.max.ms", "9223372036854775807", 5)]),
    ("message.timestamp.before.max.ms", "9223372036854775807", 5, 5,
     [("log.message.timestamp.before.max.ms", "9223372036854775807", 5)]),
    ("segment.ms", "604800000", 5, 5, []),
    ("message.timestamp.difference.max.ms", "9223372036854775807", 5, 5,
     [("log.message.timestamp.difference.max.ms", "9223372036854775807", 5)]),
    ("segment.index.bytes", "10485760", 5, 3, [("log.index.size.max.bytes", "10485760", 5)]),
]


async def describe(w: Wire, rtype: int, name: str, keys: Any = None, version: int = 4, synonyms: bool = True) -> Any:
    kw = {"include_synonyms": synonyms} if version >= 1 else {}
    r = await w.call(A.DESCRIBE_CONFIGS, version, DC(
        resources=[DC.DescribeConfigsResource(resource_type=rtype, resource_name=name, configuration_keys=keys)],
        **kw))
    return r.results[0]


def rows(result: Any) -> list[tuple[Any, ...]]:
    return [(c.name, c.value, c.config_source, c.config_type, [(s.name, s.value, s.source) for s in c.synonyms])
            for c in result.configs]


async def alter(w: Wire, rtype: int, name: str, configs: dict[str, Any], validate: bool = False) -> tuple[int, Any]:
    R = AC.AlterConfigsResource
    r = await w.call(A.ALTER_CONFIGS, 1, AC(resources=[R(resource_type=rtype, resource_name=name, configs=[
        R.AlterableConfig(name=k, value=v) for k, v in configs.items()])], validate_only=validate))
    return r.responses[0].error_code, r.responses[0].error_message


async def incremental(w: Wire, rtype: int, name: str, ops: list[tuple[str, int, Any]]) -> tuple[int, Any]:
    R = IAC.AlterConfigsResource
    r = await w.call(A.INCREMENTAL_ALTER_CONFIGS, 1, IAC(resources=[R(resource_type=rtype, resource_name=name, configs=[
        R.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops])], validate_only=False))
    return r.responses[0].error_code, r.responses[0].error_message


async def zk_json(servers: dict[str, Any], path: str) -> Any:
    data, _ = await servers["broker"].zk.get(path)
    return json.loads(data) if data else None


# ---------------------------------------------------------------- DescribeConfigs
def test_describe_topic_configs_are_kafkas_defaults() -> None:
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        w = await _connect(rt, "t")
        full = await describe(w, C.RESOURCE_TOPIC, "t")
        v0 = await describe(w, C.RESOURCE_TOPIC, "t", ["retention.ms", "segment.bytes", "nope"], version=0)
        no_syn = await describe(w, C.RESOURCE_TOPIC, "t", ["segment.bytes"], synonyms=False)
        missing = await describe(w, C.RESOURCE_TOPIC, "nope")
        empty = await describe(w, C.RESOURCE_TOPIC, "")
        other_broker = await describe(w, C.RESOURCE_BROKER, "5", ["log.segment.bytes"])
        bad_type = await describe(w, 7, "x")
        return full, v0, no_syn, missing, empty, other_broker, bad_type

    full, v0, no_syn, missing, empty, other_broker, bad_type = _run(body)
    assert (full.error_code, full.error_message) == (0, "")
    assert rows(full) == KAFKA_TOPIC_DEFAULTS
    assert [(c.name, c.value, c.config_source, c.is_default, c.synonyms) for c in v0.configs] == [
        ("segment.bytes", "1073741824", -1, False, []), ("retention.ms", "604800000", -1, False, [])]
    assert rows(no_syn) == [("segment.bytes", "1073741824", 5, 3, [])]
    assert (missing.error_code, missing.error_message, missing.configs) == (E.UNKNOWN_TOPIC_OR_PARTITION, "", [])
    assert (empty.error_code, empty.error_message) == (E.INVALID_TOPIC_EXCEPTION,
                                                       "Topic name is invalid: the empty string is not allowed")
    assert (other_broker.error_code, other_broker.error_message) == (
        E.INVALID_REQUEST, "Unexpected broker id, expected 0 or empty string, but received 5")
    assert bad_type.error_code == E.INVALID_REQUEST


def test_describe_broker_configs_static_and_default_sources() -> None:
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        w = await _connect(rt, "t")
        res = await describe(w, C.RESOURCE_BROKER, "0", ["broker.id", "log.segment.bytes", "num.partitions",
                                                          "log.retention.ms", "log.retention.hours", "log.dirs"])
        topic = await describe(w, C.RESOURCE_TOPIC, "t", ["segment.bytes"])
        cluster_default = await describe(w, C.RESOURCE_BROKER, "")
        return res, topic, cluster_default

    res, topic, cluster_default = _run(body, log_segment_bytes=4096, num_partitions=3)
    assert [(c.name, c.value, c.read_only, c.config_source, c.config_type,
             [(s.name, s.value, s.source) for s in c.synonyms]) for c in res.configs] == [
        ("broker.id", "0", True, 4, 3, [("broker.id", "0", 4), ("broker.id", "-1", 5)]),
        ("log.dirs", "logs", True, 4, 2, [("log.dirs", "logs", 4)]),
        ("num.partitions", "3", True, 4, 3, [("num.partitions", "3", 4), ("num.partitions", "1", 5)]),
        ("log.segment.bytes", "4096", False, 4, 3, [("log.segment.bytes", "4096", 4),
                                                     ("log.segment.bytes", "1073741824", 5)]),
        ("log.retention.ms", None, False, 5, 5, []),
        ("log.retention.hours", "168", True, 5, 3, [("log.retention.hours", "168", 5)]),
    ]
    # A topic inherits the static broker value: source STATIC_BROKER_CONFIG, both synonyms.
    assert rows(topic) == [("segment.bytes", "4096", 4, 3, [("log.segment.bytes", "4096", 4),
                                                            ("log.segment.bytes", "1073741824", 5)])]
    assert cluster_default.error_code == 0 and cluster_default.configs == []


# ---------------------------------------------------------------- AlterConfigs / IncrementalAlterConfigs
def test_alter_configs_validate_persist_notify_and_reach_the_log() -> None:
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        w = await _connect(rt, "t")
        out: dict[str, Any] = {}
        out["ok"] = await alter(w, C.RESOURCE_TOPIC, "t", {"retention.ms": "2000", "segment.bytes": "1048576"})
        out["bogus"] = await alter(w, C.RESOURCE_TOPIC, "t", {"bogus.cfg": "1"})
        out["nan"] = await alter(w, C.RESOURCE_TOPIC, "t", {"retention.ms": "abc"})
        out["small"] = await alter(w, C.RESOURCE_TOPIC, "t", {"segment.bytes": "10"})
        out["policy"] = await alter(w, C.RESOURCE_TOPIC, "t", {"cleanup.policy": "foo"})
        out["ratio"] = await alter(w, C.RESOURCE_TOPIC, "t", {"min.cleanable.dirty.ratio": "2"})
        out["bool"] = await alter(w, C.RESOURCE_TOPIC, "t", {"preallocate": "maybe"})
        out["int_range"] = await alter(w, C.RESOURCE_TOPIC, "t", {"segment.bytes": "99999999999"})
        out["missing"] = await alter(w, C.RESOURCE_TOPIC, "nope", {"retention.ms": "1"})
        out["validate_only"] = await alter(w, C.RESOURCE_TOPIC, "t", {"retention.ms": "5"}, validate=True)
        out["described"] = rows(await describe(w, C.RESOURCE_TOPIC, "t", ["retention.ms", "segment.bytes"]))
        out["znode"] = await zk_json(servers, "/config/topics/t")
        zk = servers["broker"].zk
        changes = await zk.get_children("/config/changes")
        out["changes"] = [(c, await zk_json(servers, f"/config/changes/{c}")) for c in changes]
        out["log_segment_bytes"] = servers["broker"].replica_manager.get_partition("t", 0).log.config.segment_bytes
        return out

    out = _run(body)
    assert out["ok"] == (0, None)
    assert out["bogus"] == (E.INVALID_CONFIG, "Unknown topic config name: bogus.cfg")
    prefix = "Invalid config value for resource ConfigResource(type=TOPIC, name='t'): "
    assert out["nan"] == (E.INVALID_CONFIG, prefix + "Invalid value abc for configuration retention.ms: "
                                                      "Not a number of type LONG")
    assert out["small"] == (E.INVALID_CONFIG, prefix + "Invalid value 10 for configuration segment.bytes: "
                                                        "Value must be at least 14")
    assert out["policy"] == (E.INVALID_CONFIG, prefix + "Invalid value foo for configuration cleanup.policy: "
                                                         "String must be one of: compact, delete")
    assert out["ratio"] == (E.INVALID_CONFIG, prefix + "Invalid value 2.0 for configuration "
                                                        "min.cleanable.dirty.ratio: Value must be no more than 1")
    assert out["bool"] == (E.INVALID_CONFIG, prefix + "Invalid value maybe for configuration preallocate: "
                                                       "Expected value to be either true or false")
    assert out["int_range"] == (E.INVALID_CONFIG, prefix + "Invalid value 99999999999 for configuration "
                                                            "segment.bytes: Not a number of type INT")
    assert out["missing"] == (E.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'nope' does not exist.")
    assert out["validate_only"] == (0, None)
    assert out["described"] == [
        ("segment.bytes", "1048576", 1, 3, [("segment.bytes", "1048576", 1), ("log.segment.bytes", "1073741824", 5)]),
        ("retention.ms", "2000", 1, 5, [("retention.ms", "2000", 1)])]
    assert out["znode"] == {"version": 1, "config": {"retention.ms": "2000", "segment.bytes": "1048576"}}
    assert out["changes"] == [("config_change_0000000000", {"version": 2, "entity_path": "topics/t"})]
    assert out["log_segment_bytes"] == 1048576


def test_incremental_alter_configs_set_delete_append_subtract() -> None:
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        w = await _connect(rt, "t")
        steps: list[Any] = []
        for i, ops in enumerate(([("cleanup.policy", C.OP_APPEND, "compact")],         # default "delete" + compact
                    [("cleanup.policy", C.OP_SUBTRACT, "delete")],
                    [("retention.ms", C.OP_SET, "7"), ("segment.bytes", C.OP_SET, "2000")],
                    [("retention.ms", C.OP_DELETE, None)],
                    [("retention.ms", C.OP_APPEND, "7")],
                    [("retention.ms", C.OP_SET, "9"), ("retention.ms", C.OP_SET, "10")],
                    [("bogus", C.OP_SET, "9")],
                    [("retention.ms", 9, "9")],
                    [("retention.ms", C.OP_SET, None)],
                    [("retention.ms", C.OP_SET, "abc")])):
            steps.append(await incremental(w, C.RESOURCE_TOPIC, "t", ops))
            if i < 2:
                steps.append(rows(await describe(w, C.RESOURCE_TOPIC, "t", ["cleanup.policy"])))
        steps.append(await zk_json(servers, "/config/topics/t"))
        steps.append(servers["broker"].replica_manager.get_partition("t", 0).log.config.segment_bytes)
        return steps

    s = _run(body)
    assert s[0] == (0, None)
    assert s[1] == [("cleanup.policy", "delete,compact", 1, 7, [("cleanup.policy", "delete,compact", 1),
                                                                ("log.cleanup.policy", "delete", 5)])]
    assert s[2] == (0, None)
    assert s[3] == [("cleanup.policy", "compact", 1, 7, [("cleanup.policy", "compact", 1),
                                                         ("log.cleanup.policy", "delete", 5)])]
    assert s[4:6] == [(0, None), (0, None)]
    assert s[6] == (E.INVALID_CONFIG, "Config value append is not allowed for config key: retention.ms")
    assert s[7] == (E.INVALID_REQUEST, "Error due to duplicate config keys")
    assert s[8] == (E.INVALID_CONFIG, "Unknown topic config name: bogus")
    assert s[9] == (E.UNKNOWN_SERVER_ERROR, None)
    assert s[10] == (E.INVALID_REQUEST, "Null value not supported for : retention.ms")
    assert s[11][0] == E.INVALID_CONFIG and s[11][1].endswith("Not a number of type LONG")
    assert s[12] == {"version": 1, "config": {"cleanup.policy": "compact", "segment.bytes": "2000"}}
    assert s[13] == 2000


def test_dynamic_broker_configs_layer_under_topic_overrides_and_survive_restart() -> None:
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        w = await _connect(rt, "t")
        assert await w.create_topic("u") == 0
        out: dict[str, Any] = {}
        out["readonly"] = await incremental(w, C.RESOURCE_BROKER, "0", [("num.partitions", C.OP_SET, "3")])
        out["default"] = await incremental(w, C.RESOURCE_BROKER, "", [("log.segment.bytes", C.OP_SET, "3000")])
        out["broker"] = await incremental(w, C.RESOURCE_BROKER, "0", [("log.retention.ms", C.OP_SET, "2000000")])
        out["topic"] = await incremental(w, C.RESOURCE_TOPIC, "u", [("segment.bytes", C.OP_SET, "5000")])
        out["t"] = rows(await describe(w, C.RESOURCE_TOPIC, "t", ["segment.bytes", "retention.ms"]))
        out["cluster"] = rows(await describe(w, C.RESOURCE_BROKER, ""))
        out["znodes"] = [await zk_json(servers, "/config/brokers/<default>"),
                         await zk_json(servers, "/config/brokers/0")]
        w = await _restart_broker(world, rt, servers)
        rm = servers["broker"].replica_manager
        out["logs"] = (rm.get_partition("t", 0).log.config.segment_bytes,
                       rm.get_partition("u", 0).log.config.segment_bytes)
        return out

    out = _run(body)
    assert out["readonly"] == (E.INVALID_REQUEST, "Cannot update these configs dynamically: Set(num.partitions)")
    assert out["default"] == (0, None) and out["broker"] == (0, None) and out["topic"] == (0, None)
    assert out["t"] == [
        ("segment.bytes", "3000", 3, 3, [("log.segment.bytes", "3000", 3), ("log.segment.bytes", "1073741824", 5)]),
        ("retention.ms", "2000000", 2, 5, [("log.retention.ms", "2000000", 2), ("log.retention.hours", "168", 5)])]
    assert out["cluster"] == [("log.segment.bytes", "3000", 3, 3, [("log.segment.bytes", "3000", 3)])]
    assert out["znodes"] == [{"version": 1, "config": {"log.segment.bytes": "3000"}},
                             {"version": 1, "config": {"log.retention.ms": "2000000"}}]
    assert out["logs"] == (3000, 5000)


# ---------------------------------------------------------------- topics and partitions
def test_create_partitions_answers_and_znodes() -> None:
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        w = await _connect(rt)
        assert await w.create_topic("d", partitions=2) == 0
        T = CP.CreatePartitionsTopic

        async def cp(name: str, count: int, assign: Any = None, validate: bool = False, version: int = 3) -> Any:
            r = await w.call(A.CREATE_PARTITIONS, version, CP(topics=[T(name=name, count=count, assignments=assign)],
                                                              timeout_ms=5000, validate_only=validate))
            return [(x.name, x.error_code, x.error_message) for x in r.results]

        out = [await cp("d", 2), await cp("d", 1), await cp("d", 4, validate=True),
               await cp("d", 4, [T.CreatePartitionsAssignment(broker_ids=[0])]),
               await cp("d", 4, [T.CreatePartitionsAssignment(broker_ids=[5]),
                                 T.CreatePartitionsAssignment(broker_ids=[0])]),
               await cp("d", 3), await cp("nope", 3), await cp("d", 5, version=0)]
        meta = await w.call(A.METADATA, 12, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="d")],
                                                            allow_auto_topic_creation=False))
        parts = [(p.partition_index, p.leader_id, p.leader_epoch) for p in meta.topics[0].partitions]
        assignment = await zk_json(servers, "/brokers/topics/d")
        state = await zk_json(servers, "/brokers/topics/d/partitions/4/state")
        return out, parts, assignment, state

    out, parts, assignment, state = _run(body)
    assert out == [
        [("d", E.INVALID_PARTITIONS, "Topic already has 2 partitions.")],
        [("d", E.INVALID_PARTITIONS, "Topic currently has 2 partitions, which is higher than the requested 1.")],
        [("d", 0, None)],
        [("d", E.INVALID_REPLICA_ASSIGNMENT, "Increasing the number of partitions by 2 but 1 assignments provided.")],
        [("d", E.INVALID_REPLICA_ASSIGNMENT, "Unknown broker(s) in replica assignment: 5.")],
        [("d", 0, None)],
        [("nope", E.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'nope' does not exist.")],
        [("d", 0, None)],
    ]
    assert parts == [(i, 0, 0) for i in range(5)]
    assert assignment["partitions"] == {str(i): [0] for i in range(5)} and assignment["version"] == 3
    assert state == {"controller_epoch": 1, "leader": 0, "version": 1, "leader_epoch": 0, "isr": [0]}


def test_delete_topics_removes_znodes_logs_and_metadata() -> None:
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        w = await _connect(rt)
        for t in ("a", "b", "c"):
            assert await w.create_topic(t) == 0
        await w.produce("a", -1, -1, -1)
        fs = servers["broker"].rt.fs
        before = fs.exists("logs/a-0")
        b_id = servers["broker"].metadata_cache.topic("b").topic_id
        r5 = await w.call(A.DELETE_TOPICS, 5, DT(topic_names=["nope", "a"], timeout_ms=5000))
        S = DT.DeleteTopicState
        r6 = await w.call(A.DELETE_TOPICS, 6, DT(topics=[S(name=None, topic_id=b_id),
                                                         S(name=None, topic_id=bytes(range(16))),
                                                         S(name=None, topic_id=bytes(16)),
                                                         S(name="c", topic_id=bytes(16))],
                                                 timeout_ms=5000))
        zk = servers["broker"].zk
        paths = ("/brokers/topics/a", "/config/topics/a", "/admin/delete_topics/a", "/brokers/topics/b")
        # The answer comes when the topics left the metadata cache; the controller finishes the
        # deletion (StopReplica, then the znodes) right after, as Kafka's TopicDeletionManager does.
        for _ in range(100):
            left = [p for p in paths if await zk.exists(p) is not None]
            if not left:
                break
            await rt.sleep(50)
        after = (fs.exists("logs/a-0"), fs.exists("logs/b-0"))
        assert await w.create_topic("a") == 0
        leo = await w.log_end_offset("a")
        return before, r5, r6, left, after, leo, b_id

    before, r5, r6, left, after, leo, b_id = _run(body)
    assert before is True
    assert [(x.name, x.error_code, x.error_message) for x in r5.responses] == [
        ("nope", E.UNKNOWN_TOPIC_OR_PARTITION, None), ("a", 0, None)]
    assert [(x.name, x.topic_id, x.error_code) for x in r6.responses] == [
        ("b", b_id, 0), (None, bytes(range(16)), E.UNKNOWN_TOPIC_ID), (None, bytes(16), E.TOPIC_AUTHORIZATION_FAILED),
        ("c", bytes(16), 0)]
    assert left == [] and after == (False, False)
    assert leo == 0  # re-created: a new, empty log


def test_a_deletion_interrupted_by_a_crash_finishes_at_startup() -> None:
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        w = await _connect(rt, "t")
        await w.produce("t", -1, -1, -1)
        await servers["broker"].zk.create("/admin/delete_topics/t", b"")  # marked, then the crash
        w = await _restart_broker_without_topic(world, rt, servers)
        zk = servers["broker"].zk
        for _ in range(100):  # the new controller resumes the deletion at failover
            if await zk.exists("/admin/delete_topics/t") is None:
                break
            await rt.sleep(50)
        return (await zk.exists("/brokers/topics/t"), await zk.exists("/admin/delete_topics/t"),
                servers["broker"].rt.fs.exists("logs/t-0"), servers["broker"].metadata_cache.topic("t"))

    assert _run(body) == (None, None, False, None)


async def _restart_broker_without_topic(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Wire:
    from kafkasim.broker.server import KafkaServer
    from tests.broker.test_idempotence import _config
    node = world.nodes[BROKER]
    node.crash("kill")
    new_rt = node.restart()
    servers["broker"] = KafkaServer(new_rt, _config())
    task = new_rt.spawn(servers["broker"].startup())
    for _ in range(200):
        await rt.sleep(100)
        if task.done():
            return await _connect(rt)
    raise AssertionError("broker did not come back")


# ---------------------------------------------------------------- records and log dirs
def test_delete_records_moves_the_log_start_offset() -> None:
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        w = await _connect(rt)
        assert await w.create_topic("d", partitions=2) == 0
        assert await w.create_topic("compacted") == 0
        await incremental(w, C.RESOURCE_TOPIC, "compacted", [("cleanup.policy", C.OP_SET, "compact")])
        for _ in range(10):
            await w.produce("d", -1, -1, -1)
        T = DR.DeleteRecordsTopic

        async def dr(topic: str, parts: list[tuple[int, int]], version: int = 2) -> Any:
            r = await w.call(A.DELETE_RECORDS, version, DR(topics=[T(name=topic, partitions=[
                T.DeleteRecordsPartition(partition_index=i, offset=o) for i, o in parts])], timeout_ms=5000))
            return [(p.partition_index, p.low_watermark, p.error_code) for p in r.topics[0].partitions]

        out = [await dr("d", [(0, 3), (1, -1)]), await dr("d", [(0, 2)]), await dr("d", [(0, 11), (5, 1)]),
               await dr("d", [(0, 10)], version=0), await dr("nope", [(0, 0)]), await dr("compacted", [(0, 0)])]
        LO = ListOffsetsRequest.ListOffsetsTopic
        earliest = await w.call(A.LIST_OFFSETS, 5, ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
            LO(name="d", partitions=[LO.ListOffsetsPartition(partition_index=0, timestamp=-2)])]))
        FT = FetchRequest.FetchTopic
        fetch = await w.call(A.FETCH, 11, FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                                                      isolation_level=0, topics=[FT(topic="d", partitions=[
                                                          FT.FetchPartition(partition=0, fetch_offset=5,
                                                                            partition_max_bytes=1 << 20)])]))
        return out, earliest.topics[0].partitions[0].offset, fetch.responses[0].partitions[0].error_code

    out, earliest, fetch_error = _run(body)
    assert out == [[(0, 3, 0), (1, 0, 0)], [(0, 3, 0)],
                   [(0, -1, E.OFFSET_OUT_OF_RANGE), (5, -1, E.UNKNOWN_TOPIC_OR_PARTITION)],
                   [(0, 10, 0)], [(0, -1, E.UNKNOWN_TOPIC_OR_PARTITION)], [(0, -1, E.POLICY_VIOLATION)]]
    assert earliest == 10 and fetch_error == E.OFFSET_OUT_OF_RANGE


def test_describe_log_dirs_reports_the_segment_sizes() -> None:
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        w = await _connect(rt)
        assert await w.create_topic("d", partitions=2) == 0
        for _ in range(4):
            await w.produce("d", -1, -1, -1)
        fs = servers["broker"].rt.fs
        sizes = {}
        for p in (0, 1):
            f = fs.open(f"logs/d-{p}/00000000000000000000.log", create=False)
            sizes[p] = f.size()
            f.close()
        T = DLD.DescribableLogDirTopic
        r4 = await w.call(A.DESCRIBE_LOG_DIRS, 4, DLD(topics=[T(topic="d", partitions=[0, 1, 7]),
                                                              T(topic="nope", partitions=[0])]))
        r0 = await w.call(A.DESCRIBE_LOG_DIRS, 0, DLD(topics=[T(topic="d", partitions=[0])]))
        every = await w.call(A.DESCRIBE_LOG_DIRS, 1, DLD(topics=None))
        return sizes, r4, r0, every

    sizes, r4, r0, every = _run(body)
    assert sizes[0] > 0 and sizes[1] == 0
    res = r4.results[0]
    assert (r4.error_code, res.error_code, res.log_dir, res.total_bytes, res.usable_bytes) == (0, 0, "logs", -1, -1)
    assert [(t.name, [(p.partition_index, p.partition_size, p.offset_lag, p.is_future_key) for p in t.partitions])
            for t in res.topics] == [("d", [(1, 0, 0, False), (0, sizes[0], 0, False)])]  # Kafka's hash order
    assert [(p.partition_index, p.partition_size) for p in r0.results[0].topics[0].partitions] == [(0, sizes[0])]
    assert {t.name for t in every.results[0].topics} == {"d"}


# ---------------------------------------------------------------- cluster and leader epochs
def test_describe_cluster() -> None:
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        w = await _connect(rt)
        v1 = await w.call(A.DESCRIBE_CLUSTER, 1, DCL(include_cluster_authorized_operations=False, endpoint_type=1))
        v0 = await w.call(A.DESCRIBE_CLUSTER, 0, DCL(include_cluster_authorized_operations=True))
        controller = await w.call(A.DESCRIBE_CLUSTER, 1, DCL(endpoint_type=2, include_cluster_authorized_operations=True))
        unknown = await w.call(A.DESCRIBE_CLUSTER, 1, DCL(endpoint_type=7))
        return v1, v0, controller, unknown, servers["broker"].metadata_cache.cluster_id

    v1, v0, controller, unknown, cluster_id = _run(body)
    assert (v1.error_code, v1.error_message, v1.endpoint_type, v1.cluster_id, v1.controller_id) == (0, None, 1,
                                                                                                   cluster_id, 0)
    assert [(b.broker_id, b.host, b.port, b.rack) for b in v1.brokers] == [(0, BROKER, 9092, None)]
    assert v1.cluster_authorized_operations == -2147483648 and v0.cluster_authorized_operations == 8096
    # Kafka 3.9.1's answers (realkafka): the error and nothing else.
    assert (controller.error_code, controller.error_message, controller.endpoint_type, controller.cluster_id,
            controller.controller_id, controller.brokers, controller.cluster_authorized_operations) == (
        E.MISMATCHED_ENDPOINT_TYPE, "The request was sent to an endpoint of type BROKER, but we wanted an endpoint "
        "of type CONTROLLER", 1, "", -1, [], -2147483648)
    assert (unknown.error_code, unknown.error_message, unknown.controller_id) == (
        E.UNSUPPORTED_ENDPOINT_TYPE, "Unsupported endpoint type 7", -1)


def test_offset_for_leader_epoch_matches_kafka() -> None:
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        w = await _connect(rt)
        assert await w.create_topic("d", partitions=2) == 0
        for _ in range(10):
            await w.produce("d", -1, -1, -1)
        P = OFLE.OffsetForLeaderTopic.OffsetForLeaderPartition
        cases = [(0, 0, 0), (0, -1, 0), (0, 1, 0), (0, 0, 1), (0, 0, -1), (1, 0, 0), (9, 0, 0)]
        out = []
        for version in (2, 3, 4):
            kw = {"replica_id": -1} if version >= 3 else {}
            r = await w.call(A.OFFSET_FOR_LEADER_EPOCH, version, OFLE(topics=[OFLE.OffsetForLeaderTopic(
                topic="d", partitions=[P(partition=p, current_leader_epoch=c, leader_epoch=e) for p, c, e in cases])],
                **kw))
            out.append([(x.partition, x.error_code, x.leader_epoch, x.end_offset) for x in r.topics[0].partitions])
        servers["broker"].replica_manager.get_partition("d", 0).leader_epoch = 3  # as after two elections
        r = await w.call(A.OFFSET_FOR_LEADER_EPOCH, 4, OFLE(replica_id=-1, topics=[OFLE.OffsetForLeaderTopic(
            topic="d", partitions=[P(partition=0, current_leader_epoch=3, leader_epoch=e) for e in (0, 2, 3)]
            + [P(partition=0, current_leader_epoch=2, leader_epoch=0)])]))
        out.append([(x.partition, x.error_code, x.leader_epoch, x.end_offset) for x in r.topics[0].partitions])
        return out

    *same, moved = _run(body)
    # Kafka 3.9.1's answers for the same partition states (partition 1 empty, 9 absent).
    kafka = [(0, 0, 0, 10), (0, 0, 0, 10), (0, E.UNKNOWN_LEADER_EPOCH, -1, -1), (0, 0, -1, -1), (0, 0, -1, -1),
             (1, 0, 0, 0), (9, E.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)]
    assert same == [kafka, kafka, kafka]
    assert moved == [(0, 0, 0, 10), (0, 0, 0, 10), (0, 0, 3, 10), (0, E.FENCED_LEADER_EPOCH, -1, -1)]


def test_advertised_admin_versions() -> None:
    from kafkasim.protocol.messages.api_versions import ApiVersionsRequest

    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        w = await _connect(rt)
        r = await w.call(A.API_VERSIONS, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        return {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}

    keys = _run(body)
    assert {k: keys[k] for k in (20, 21, 22, 23, 32, 33, 35, 37, 44, 60)} == {
        20: (0, 6), 21: (0, 2), 22: (0, 5), 23: (0, 4), 32: (0, 4), 33: (0, 2), 35: (0, 4), 37: (0, 3), 44: (0, 1),
        60: (0, 1)}


def test_topic_configs_are_honoured_by_the_log() -> None:
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        w = await _connect(rt, "t")
        assert await w.create_topic("other") == 0
        await incremental(w, C.RESOURCE_TOPIC, "t", [("max.message.bytes", C.OP_SET, "300"),
                                                     ("segment.bytes", C.OP_SET, "1000")])
        big = await w.produce("t", -1, -1, -1, tag="x" * 400)
        elsewhere = await w.produce("other", -1, -1, -1, tag="x" * 400)
        for _ in range(12):
            await w.produce("t", -1, -1, -1, tag="y" * 100)
        segments = len(servers["broker"].replica_manager.get_partition("t", 0).log.segments)
        return big, elsewhere, segments

    big, elsewhere, segments = _run(body)
    assert big[0] == E.MESSAGE_TOO_LARGE and elsewhere == (E.NONE, 0)
    assert segments >= 2  # rolled at the topic's segment.bytes, not the broker's 1 GiB


def test_describe_broker_group_configs() -> None:
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        w = await _connect(rt)
        return rows(await describe(w, C.RESOURCE_BROKER, "0", ["offsets.topic.replication.factor",
                                                               "group.initial.rebalance.delay.ms"]))

    # As a Kafka 3.9.1 broker whose server.properties sets the two (realkafka's does).
    assert _run(body, group_initial_rebalance_delay_ms=0) == [
        ("group.initial.rebalance.delay.ms", "0", 4, 3, [("group.initial.rebalance.delay.ms", "0", 4),
                                                         ("group.initial.rebalance.delay.ms", "3000", 5)]),
        ("offsets.topic.replication.factor", "1", 4, 4, [("offsets.topic.replication.factor", "1", 4),
                                                         ("offsets.topic.replication.factor", "3", 5)])]


def test_describe_broker_advertised_listeners_is_a_null_default() -> None:
    """As a Kafka 3.x (ZooKeeper mode) broker without advertised.listeners in server.properties:
    listed, null, STRING, dynamically updatable (kafka-python's test_describe_configs_broker_*)."""
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        w = await _connect(rt)
        return await describe(w, C.RESOURCE_BROKER, "0")

    res = _run(body)
    entry = next(c for c in res.configs if c.name == "advertised.listeners")
    assert (entry.value, entry.read_only, entry.config_source, entry.config_type, entry.is_sensitive,
            entry.synonyms) == (None, False, C.DEFAULT_CONFIG, C.STRING, False, [])
