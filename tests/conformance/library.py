"""The library of request sequences. Each scenario is a function (topic/group names come from the
case, so every case has its own) returning the steps; SCENARIOS lists, per API, its scenarios and
`cases()` expands each over the API's lowest, middle and highest version in Kafka 3.9.1's
ZooKeeper-mode ApiVersions table (kafka_api_versions.json, checked against the live broker).

Setup steps (create a topic, produce, join a group) use versions both brokers advertise and are not
compared; the subject step(s) are. Timestamps in produced records are fixed, so records compare
byte-for-byte apart from the normalisations in normalize.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Optional

from kafkasim.protocol.api import API_BY_NAME
from kafkasim.protocol.messages.consumer_protocol import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from kafkasim.records.batch import Record, build_batch
from kafkasim.records.compression import CompressionType
from kafkasim.records.legacy import build_legacy_message_set
from tests.conformance.model import Case, Ctx, Step

HERE = Path(__file__).resolve().parent
KAFKA_VERSIONS: dict[int, tuple[int, int]] = {
    int(k): (v[0], v[1]) for k, v in json.loads((HERE / "kafka_api_versions.json").read_text())["api_keys"].items()}
T0 = 1_700_000_000_000
UNKNOWN_ID = bytes(range(1, 17))


def req(api: str, **fields: Any) -> Any:
    return API_BY_NAME[api].request(**fields)


def sub(api: str, path: str, **fields: Any) -> Any:
    """A nested request struct, e.g. sub("Produce", "TopicProduceData", name=...)."""
    cls: Any = API_BY_NAME[api].request
    for part in path.split("."):
        cls = getattr(cls, part)
    return cls(**fields)


# ------------------------------------------------------------------ setup steps (fixed versions)

def create(ctx_topic: Callable[[Ctx], str], partitions: int = 1, configs: Optional[dict[str, str]] = None) -> Step:
    def build(ctx: Ctx) -> Any:
        cfgs = [sub("CreateTopics", "CreatableTopic.CreatableTopicConfig", name=k, value=v)
                for k, v in (configs or {}).items()]
        return req("CreateTopics", timeout_ms=30000, topics=[sub(
            "CreateTopics", "CreatableTopic", name=ctx_topic(ctx), num_partitions=partitions,
            replication_factor=1, configs=cfgs)])
    return Step(build, version=5, check=False)


def topic0(ctx: Ctx) -> str:
    return ctx.topic(0)


def records(n: int = 3, magic: int = 2, codec: int = 0, size: int = 5, pid: int = -1, epoch: int = -1,
            seq: int = -1, first: int = 0) -> bytes:
    recs = [Record(T0 + first + i, f"k{first + i}".encode(), (f"v{first + i}-" * size).encode()[:max(size, 3)])
            for i in range(n)]
    if magic < 2:
        return build_legacy_message_set(recs, magic=magic, compression=codec)
    return build_batch(recs, compression=codec, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def produce_req(topic: str, data: bytes, partition: int = 0, acks: int = -1) -> Any:
    return req("Produce", acks=acks, timeout_ms=30000, topic_data=[sub(
        "Produce", "TopicProduceData", name=topic,
        partition_data=[sub("Produce", "TopicProduceData.PartitionProduceData", index=partition, records=data)])])


def produce(n: int = 3, codec: int = 0) -> Step:
    return Step(lambda c: produce_req(c.topic(0), records(n, codec=codec)), version=8, check=False)


def metadata_save() -> Step:
    return Step(lambda c: req("Metadata", topics=[sub("Metadata", "MetadataRequestTopic", name=c.topic(0))],
                              allow_auto_topic_creation=False), version=12, check=False, save="meta")


def coordinator_ready(key_type: int = 0) -> Step:
    def build(c: Ctx) -> Any:
        return req("FindCoordinator", key=c.group(0) if key_type == 0 else c.topic(0), key_type=key_type)
    return Step(build, version=3, check=False, retry_until=lambda r: r.error_code == 0)


def subject(build: Callable[[Ctx], Any]) -> Step:
    return Step(build)


# ------------------------------------------------------------------ Produce

def produce_scenarios() -> dict[str, Callable[[int], Optional[list[Step]]]]:
    def magic(v: int) -> int:
        return 2 if v >= 3 else (1 if v == 2 else 0)

    def ok(codec: int) -> Callable[[int], Optional[list[Step]]]:
        return lambda v: [create(topic0), Step(lambda c: produce_req(c.topic(0), records(3, magic(v), codec)))]
    return {
        "ok": ok(0), "gzip": ok(int(CompressionType.GZIP)), "lz4": ok(int(CompressionType.LZ4)),
        "zstd": lambda v: [create(topic0), Step(lambda c: produce_req(c.topic(0), records(3, 2, int(CompressionType.ZSTD))))],
        "unknown_topic": lambda v: [Step(lambda c: produce_req(c.topic(0), records(1, magic(v))))],
        "bad_partition": lambda v: [create(topic0), Step(lambda c: produce_req(c.topic(0), records(1, magic(v)), partition=7))],
        "bad_acks": lambda v: [create(topic0), Step(lambda c: produce_req(c.topic(0), records(1, magic(v)), acks=2))],
        "oversized": lambda v: [create(topic0, configs={"max.message.bytes": "1000"}),
                                Step(lambda c: produce_req(c.topic(0), records(1, magic(v), size=3000)))],
        "log_append_time": lambda v: [create(topic0, configs={"message.timestamp.type": "LogAppendTime"}),
                                      Step(lambda c: produce_req(c.topic(0), records(2, magic(v))))],
        "corrupt_crc": lambda v: [create(topic0), Step(lambda c: produce_req(c.topic(0), _corrupt(records(2, magic(v)))))],
        # InitProducerId is retried until it gives a producer id: a fresh Kafka's first answer
        # can be an error with producer id -1, and batches with pid -1 are not idempotent at all
        # (that made Produce.v0.idempotent_seq differ: Kafka appended every batch).
        "idempotent_seq": lambda v: [create(topic0), Step(lambda c: req("InitProducerId", transactional_id=None,
                                                                          transaction_timeout_ms=60000), version=4, save="pid", check=False,
                                                          retry_until=lambda r: r.error_code == 0 and r.producer_id >= 0),
                                     Step(lambda c: produce_req(c.topic(0), _idem(c, 0))),
                                     Step(lambda c: produce_req(c.topic(0), _idem(c, 0))),
                                     Step(lambda c: produce_req(c.topic(0), _idem(c, 9)))],
    }


def _corrupt(data: bytes) -> bytes:
    b = bytearray(data)
    b[-1] ^= 0xFF
    return bytes(b)


def _idem(c: Ctx, seq: int) -> bytes:
    p = c.saved["pid"]
    return records(2, pid=p.producer_id, epoch=p.producer_epoch, seq=seq, first=seq)


# ------------------------------------------------------------------ Fetch / ListOffsets / OffsetForLeaderEpoch

def fetch_req(c: Ctx, v: int, offset: int = 0, epoch: int = -1, last_epoch: int = -1, topic_id: Optional[bytes] = None,
              name: Optional[str] = None, max_bytes: int = 1 << 20, partition: int = 0) -> Any:
    tid = topic_id if topic_id is not None else (c.topic_id() if "meta" in c.saved else bytes(16))
    part = sub("Fetch", "FetchTopic.FetchPartition", partition=partition, fetch_offset=offset, current_leader_epoch=epoch,
               last_fetched_epoch=last_epoch, log_start_offset=-1, partition_max_bytes=max_bytes)
    return req("Fetch", replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes, isolation_level=0,
               session_id=0, session_epoch=-1, topics=[sub("Fetch", "FetchTopic", topic=name or c.topic(0), topic_id=tid,
                                                          partitions=[part])])


def fetch_scenarios() -> dict[str, Callable[[int], Optional[list[Step]]]]:
    base = [create(topic0), produce(3), metadata_save()]
    gz = [create(topic0), produce(3, codec=int(CompressionType.GZIP)), metadata_save()]
    return {
        "ok": lambda v: base + [Step(lambda c: fetch_req(c, v))],
        "compressed": lambda v: gz + [Step(lambda c: fetch_req(c, v, offset=1))],
        "middle_offset": lambda v: base + [Step(lambda c: fetch_req(c, v, offset=2))],
        "out_of_range": lambda v: base + [Step(lambda c: fetch_req(c, v, offset=100))],
        "unknown_topic": lambda v: [Step(lambda c: fetch_req(c, v, topic_id=UNKNOWN_ID))],
        "unknown_leader_epoch": lambda v: base + [Step(lambda c: fetch_req(c, v, epoch=7))],
        "diverging_epoch": lambda v: base + [Step(lambda c: fetch_req(c, v, offset=2, last_epoch=3))],
        "small_max_bytes": lambda v: base + [Step(lambda c: fetch_req(c, v, max_bytes=10))],
        "bad_partition": lambda v: base + [Step(lambda c: fetch_req(c, v, partition=3))],
    }


# ------------------------------------------------------------------ Fetch sessions (KIP-227, v7+)

def session_req(c: Ctx, session: Optional[str], epoch: int, parts: dict[int, int],
                forget: tuple[int, ...] = ()) -> Any:
    """A Fetch in a session: `session` names the saved response whose session_id is used (None:
    0), `parts` partition -> fetch offset, `forget` the partitions to drop from the session."""
    tid = c.topic_id() if "meta" in c.saved else bytes(16)
    sid = c.saved[session].session_id if session else 0
    topics = [sub("Fetch", "FetchTopic", topic=c.topic(0), topic_id=tid, partitions=[
        sub("Fetch", "FetchTopic.FetchPartition", partition=p, fetch_offset=o, current_leader_epoch=-1,
            last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20) for p, o in parts.items()])] \
        if parts else []
    forgotten = [sub("Fetch", "ForgottenTopic", topic=c.topic(0), topic_id=tid, partitions=list(forget))] if forget else []
    return req("Fetch", replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
               session_id=sid, session_epoch=epoch, topics=topics, forgotten_topics_data=forgotten, rack_id="")


def produce_to(partition: int, n: int = 2, first: int = 0) -> Step:
    return Step(lambda c: produce_req(c.topic(0), records(n, first=first), partition=partition), version=8, check=False)


def fetch_session_scenarios() -> dict[str, Callable[[int], Optional[list[Step]]]]:
    base = [create(topic0), produce(3), metadata_save()]
    two = [create(topic0, partitions=2), produce(3), metadata_save()]

    def s(build: Callable[[int], list[Step]]) -> Callable[[int], Optional[list[Step]]]:
        return lambda v: build(v) if v >= 7 else None   # sessions are v7+

    def full(parts: dict[int, int], version: Optional[int] = None) -> Step:
        return Step(lambda c: session_req(c, None, 0, parts), version=version, save="full")

    def incr(epoch: int, parts: Optional[dict[int, int]] = None, forget: tuple[int, ...] = (),
             session: str = "full") -> Step:
        return Step(lambda c: session_req(c, session, epoch, parts or {}, forget))
    other = {8: 13, 17: 12}   # Fetch's middle and highest versions -> one on the other side of v13
    return {
        "session_full": s(lambda v: base + [full({0: 0})]),
        # Only partitions with news are answered: none, then the new records and high watermark.
        "session_incremental": s(lambda v: base + [full({0: 3}), incr(1), produce_to(0), incr(2), incr(3, {0: 5})]),
        "session_bad_epoch": s(lambda v: base + [full({0: 3}), incr(5)]),
        "session_unknown_id": s(lambda v: base + [Step(lambda c: _with_session(session_req(c, None, 1, {0: 0}),
                                                                                12345))]),
        "session_id_out_of_range": s(lambda v: base + [Step(lambda c: _with_session(session_req(c, None, 1, {0: 0}),
                                                                                     2**31 - 1))]),
        # A forgotten partition is not answered however it changes; asked again, it is.
        "session_forget": s(lambda v: two + [full({0: 3, 1: 0}), produce_to(1), incr(1, forget=(1,)),
                                             incr(2, {1: 0})]),
        # A full fetch (epoch 0) or a final one (-1) naming the session closes it.
        "session_close_final": s(lambda v: base + [full({0: 3}), Step(lambda c: session_req(c, "full", -1, {0: 3})),
                                                   incr(1)]),
        "session_reopen_full": s(lambda v: base + [full({0: 3}), Step(lambda c: session_req(c, "full", 0, {0: 3})),
                                                   incr(1)]),
        "session_topic_id_switch": s(lambda v: base + [full({0: 3}, version=other[v]), incr(1)]),
    }


def _with_session(request: Any, session_id: int) -> Any:
    request.session_id = session_id
    return request


def list_offsets_req(c: Ctx, ts: int, epoch: int = -1, partition: int = 0, topic: Optional[str] = None) -> Any:
    return req("ListOffsets", replica_id=-1, isolation_level=0, topics=[sub(
        "ListOffsets", "ListOffsetsTopic", name=topic or c.topic(0), partitions=[sub(
            "ListOffsets", "ListOffsetsTopic.ListOffsetsPartition", partition_index=partition, timestamp=ts,
            current_leader_epoch=epoch, max_num_offsets=1)])])


def list_offsets_scenarios() -> dict[str, Callable[[int], Optional[list[Step]]]]:
    base = [create(topic0), produce(3)]
    return {
        "latest": lambda v: base + [Step(lambda c: list_offsets_req(c, -1))],
        "earliest": lambda v: base + [Step(lambda c: list_offsets_req(c, -2))],
        "by_timestamp": lambda v: base + [Step(lambda c: list_offsets_req(c, T0 + 1))],
        "max_timestamp": lambda v: base + [Step(lambda c: list_offsets_req(c, -3))],
        "future_timestamp": lambda v: base + [Step(lambda c: list_offsets_req(c, T0 + 10**9))],
        "unknown_topic": lambda v: [Step(lambda c: list_offsets_req(c, -1))],
        "unknown_leader_epoch": lambda v: base + [Step(lambda c: list_offsets_req(c, -1, epoch=5))],
        "bad_partition": lambda v: base + [Step(lambda c: list_offsets_req(c, -1, partition=4))],
    }


def olep_req(c: Ctx, leader_epoch: int, current: int = -1, topic: Optional[str] = None) -> Any:
    return req("OffsetForLeaderEpoch", replica_id=-1, topics=[sub(
        "OffsetForLeaderEpoch", "OffsetForLeaderTopic", topic=topic or c.topic(0), partitions=[sub(
            "OffsetForLeaderEpoch", "OffsetForLeaderTopic.OffsetForLeaderPartition", partition=0,
            current_leader_epoch=current, leader_epoch=leader_epoch)])])


def olep_scenarios() -> dict[str, Callable[[int], Optional[list[Step]]]]:
    base = [create(topic0), produce(3)]
    return {
        "epoch0": lambda v: base + [Step(lambda c: olep_req(c, 0))],
        "future_epoch": lambda v: base + [Step(lambda c: olep_req(c, 4))],
        "unknown_current_epoch": lambda v: base + [Step(lambda c: olep_req(c, 0, current=9))],
        "unknown_topic": lambda v: [Step(lambda c: olep_req(c, 0))],
    }


# ------------------------------------------------------------------ Metadata / topics admin

def metadata_req(names: Optional[list[str]], auto: bool = False, ids: Optional[list[bytes]] = None) -> Any:
    if names is None and ids is None:
        return req("Metadata", topics=None, allow_auto_topic_creation=auto)
    topics = [sub("Metadata", "MetadataRequestTopic", name=n) for n in names or []]
    topics += [sub("Metadata", "MetadataRequestTopic", name=None, topic_id=i) for i in ids or []]
    return req("Metadata", topics=topics, allow_auto_topic_creation=auto)


def metadata_scenarios() -> dict[str, Callable[[int], Optional[list[Step]]]]:
    return {
        "topic": lambda v: [create(topic0, partitions=3), Step(lambda c: metadata_req([c.topic(0)]))],
        "brokers_only": lambda v: [Step(lambda c: metadata_req([]))] if v >= 1 else None,  # v0: [] = all topics
        "unknown_no_autocreate": lambda v: [Step(lambda c: metadata_req([c.topic(0)]))],
        "autocreate": lambda v: [Step(lambda c: metadata_req([c.topic(0)], auto=True))],
        "invalid_name": lambda v: [Step(lambda c: metadata_req(["bad name!"]))],
        "by_unknown_topic_id": lambda v: [Step(lambda c: metadata_req(None, ids=[UNKNOWN_ID]))],
    }


def create_topics_req(name: str, partitions: int = 1, rf: int = 1, configs: Optional[dict[str, Optional[str]]] = None,
                      validate_only: bool = False, assignments: Optional[list[list[int]]] = None,
                      extra: Optional[list[Any]] = None, timeout_ms: int = 30000) -> Any:
    cfgs = [sub("CreateTopics", "CreatableTopic.CreatableTopicConfig", name=k, value=v) for k, v in (configs or {}).items()]
    assign = [sub("CreateTopics", "CreatableTopic.CreatableReplicaAssignment", partition_index=i, broker_ids=b)
              for i, b in enumerate(assignments or [])]
    topic = sub("CreateTopics", "CreatableTopic", name=name, num_partitions=partitions, replication_factor=rf,
                configs=cfgs, assignments=assign)
    return req("CreateTopics", timeout_ms=timeout_ms, validate_only=validate_only, topics=[topic] + (extra or []))


def create_topics_scenarios() -> dict[str, Callable[[int], Optional[list[Step]]]]:
    return {
        "ok": lambda v: [Step(lambda c: create_topics_req(c.topic(0), 2, configs={"cleanup.policy": "compact"}))],
        "defaults": lambda v: [Step(lambda c: create_topics_req(c.topic(0), -1, -1))],
        "exists": lambda v: [create(topic0), Step(lambda c: create_topics_req(c.topic(0)))],
        "bad_config_value": lambda v: [Step(lambda c: create_topics_req(c.topic(0), configs={"retention.ms": "abc"}))],
        "unknown_config": lambda v: [Step(lambda c: create_topics_req(c.topic(0), configs={"no.such.config": "1"}))],
        "rf_too_high": lambda v: [Step(lambda c: create_topics_req(c.topic(0), rf=3))],
        "zero_partitions": lambda v: [Step(lambda c: create_topics_req(c.topic(0), partitions=0))],
        "validate_only": lambda v: [Step(lambda c: create_topics_req(c.topic(0), 2, validate_only=True)),
                                    Step(lambda c: metadata_req([c.topic(0)]), version=1)],
        "invalid_name": lambda v: [Step(lambda c: create_topics_req("bad name!"))],
        "manual_assignment": lambda v: [Step(lambda c: create_topics_req(c.topic(0), -1, -1, assignments=[[0], [0]]))],
        "assignment_unknown_broker": lambda v: [Step(lambda c: create_topics_req(c.topic(0), -1, -1, assignments=[[5]], timeout_ms=500))],
        # ZkAdminManager.createTopics / AdminZkClient.validateTopicCreate / LogConfig.validate:
        "null_config": lambda v: [Step(lambda c: create_topics_req(c.topic(0), configs={"retention.ms": None}))],
        "config_below_min": lambda v: [Step(lambda c: create_topics_req(c.topic(0), configs={"min.insync.replicas": "0"}))],
        "duplicate_replicas": lambda v: [Step(lambda c: create_topics_req(c.topic(0), -1, -1, assignments=[[0, 0]]))],
        "uneven_assignment": lambda v: [Step(lambda c: create_topics_req(c.topic(0), -1, -1, assignments=[[0], [0, 0]]))],
        "zero_timeout": lambda v: [Step(lambda c: create_topics_req(c.topic(0), timeout_ms=0))],
        "duplicate_in_request": lambda v: [Step(lambda c: create_topics_req(c.topic(0), extra=[sub(
            "CreateTopics", "CreatableTopic", name=c.topic(0), num_partitions=1, replication_factor=1)]))],
    }


def delete_topics_req(v: int, names: list[str], ids: Optional[list[bytes]] = None) -> Any:
    states = [sub("DeleteTopics", "DeleteTopicState", name=n) for n in names]
    states += [sub("DeleteTopics", "DeleteTopicState", name=None, topic_id=i) for i in ids or []]
    return req("DeleteTopics", timeout_ms=30000, topic_names=names, topics=states)


def delete_topics_scenarios() -> dict[str, Callable[[int], Optional[list[Step]]]]:
    return {
        "ok": lambda v: [create(topic0), Step(lambda c: delete_topics_req(v, [c.topic(0)]))],
        "unknown": lambda v: [Step(lambda c: delete_topics_req(v, [c.topic(0)]))],
        "unknown_topic_id": lambda v: [Step(lambda c: delete_topics_req(v, [], [UNKNOWN_ID]))] if v >= 6 else
        [Step(lambda c: delete_topics_req(v, ["bad name!"]))],
    }


def create_partitions_req(name: str, count: int, validate_only: bool = False, assignments: Any = None) -> Any:
    return req("CreatePartitions", timeout_ms=30000, validate_only=validate_only, topics=[sub(
        "CreatePartitions", "CreatePartitionsTopic", name=name, count=count, assignments=assignments)])


def create_partitions_scenarios() -> dict[str, Callable[[int], Optional[list[Step]]]]:
    return {
        "ok": lambda v: [create(topic0), Step(lambda c: create_partitions_req(c.topic(0), 3)),
                         Step(lambda c: metadata_req([c.topic(0)]), version=1)],
        "decrease": lambda v: [create(topic0, partitions=2), Step(lambda c: create_partitions_req(c.topic(0), 1))],
        "same_count": lambda v: [create(topic0, partitions=2), Step(lambda c: create_partitions_req(c.topic(0), 2))],
        "unknown_topic": lambda v: [Step(lambda c: create_partitions_req(c.topic(0), 2))],
        "validate_only": lambda v: [create(topic0), Step(lambda c: create_partitions_req(c.topic(0), 4, True))],
        "bad_assignment": lambda v: [create(topic0), Step(lambda c: create_partitions_req(c.topic(0), 2, assignments=[
            sub("CreatePartitions", "CreatePartitionsTopic.CreatePartitionsAssignment", broker_ids=[9])]))],
    }


def delete_records_req(c: Ctx, offset: int, topic: Optional[str] = None) -> Any:
    return req("DeleteRecords", timeout_ms=30000, topics=[sub(
        "DeleteRecords", "DeleteRecordsTopic", name=topic or c.topic(0), partitions=[sub(
            "DeleteRecords", "DeleteRecordsTopic.DeleteRecordsPartition", partition_index=0, offset=offset)])])


def delete_records_scenarios() -> dict[str, Callable[[int], Optional[list[Step]]]]:
    base = [create(topic0), produce(3)]
    return {
        "ok": lambda v: base + [Step(lambda c: delete_records_req(c, 2)), Step(lambda c: list_offsets_req(c, -2), version=1)],
        "to_high_watermark": lambda v: base + [Step(lambda c: delete_records_req(c, -1))],
        "out_of_range": lambda v: base + [Step(lambda c: delete_records_req(c, 10))],
        "unknown_topic": lambda v: [Step(lambda c: delete_records_req(c, 1))],
    }


# ------------------------------------------------------------------ configs

TOPIC, BROKER = 2, 4


def describe_configs_req(rtype: int, name: str, keys: Optional[list[str]]) -> Any:
    return req("DescribeConfigs", include_synonyms=True, include_documentation=False, resources=[sub(
        "DescribeConfigs", "DescribeConfigsResource", resource_type=rtype, resource_name=name, configuration_keys=keys)])


def alter_configs_req(rtype: int, name: str, configs: dict[str, Optional[str]], validate_only: bool = False) -> Any:
    return req("AlterConfigs", validate_only=validate_only, resources=[sub(
        "AlterConfigs", "AlterConfigsResource", resource_type=rtype, resource_name=name, configs=[
            sub("AlterConfigs", "AlterConfigsResource.AlterableConfig", name=k, value=val) for k, val in configs.items()])])


def incremental_req(rtype: int, name: str, ops: list[tuple[str, int, Optional[str]]], validate_only: bool = False) -> Any:
    return req("IncrementalAlterConfigs", validate_only=validate_only, resources=[sub(
        "IncrementalAlterConfigs", "AlterConfigsResource", resource_type=rtype, resource_name=name, configs=[
            sub("IncrementalAlterConfigs", "AlterConfigsResource.AlterableConfig", name=k, config_operation=op, value=val)
            for k, op, val in ops])])


def describe_configs_scenarios() -> dict[str, Callable[[int], Optional[list[Step]]]]:
    keys = ["cleanup.policy", "retention.ms", "max.message.bytes", "min.insync.replicas"]
    return {
        "topic_keys": lambda v: [create(topic0, configs={"retention.ms": "12345"}),
                                 Step(lambda c: describe_configs_req(TOPIC, c.topic(0), keys))],
        "topic_all": lambda v: [create(topic0, configs={"cleanup.policy": "compact"}),
                                Step(lambda c: describe_configs_req(TOPIC, c.topic(0), None))],
        "unknown_topic": lambda v: [Step(lambda c: describe_configs_req(TOPIC, c.topic(0), keys))],
        "broker_keys": lambda v: [Step(lambda c: describe_configs_req(
            BROKER, "0", ["num.partitions", "log.retention.hours", "message.max.bytes", "auto.create.topics.enable"]))],
        "unknown_broker": lambda v: [Step(lambda c: describe_configs_req(BROKER, "42", ["num.partitions"]))],
        "bad_resource_type": lambda v: [Step(lambda c: describe_configs_req(9, "x", None))],
    }


def alter_configs_scenarios() -> dict[str, Callable[[int], Optional[list[Step]]]]:
    return {
        "ok": lambda v: [create(topic0), Step(lambda c: alter_configs_req(TOPIC, c.topic(0), {"retention.ms": "5000"})),
                         Step(lambda c: describe_configs_req(TOPIC, c.topic(0), ["retention.ms"]), version=1)],
        "bad_value": lambda v: [create(topic0), Step(lambda c: alter_configs_req(TOPIC, c.topic(0), {"retention.ms": "x"}))],
        "unknown_config": lambda v: [create(topic0), Step(lambda c: alter_configs_req(TOPIC, c.topic(0), {"nope.nope": "1"}))],
        "unknown_topic": lambda v: [Step(lambda c: alter_configs_req(TOPIC, c.topic(0), {"retention.ms": "5000"}))],
        "validate_only": lambda v: [create(topic0), Step(lambda c: alter_configs_req(TOPIC, c.topic(0), {"retention.ms": "7"}, True)),
                                    Step(lambda c: describe_configs_req(TOPIC, c.topic(0), ["retention.ms"]), version=1)],
    }


def incremental_scenarios() -> dict[str, Callable[[int], Optional[list[Step]]]]:
    return {
        "set_delete": lambda v: [create(topic0, configs={"retention.ms": "999"}), Step(lambda c: incremental_req(
            TOPIC, c.topic(0), [("retention.ms", 1, None), ("segment.ms", 0, "100000")])),
            Step(lambda c: describe_configs_req(TOPIC, c.topic(0), ["retention.ms", "segment.ms"]), version=1)],
        "append_list": lambda v: [create(topic0), Step(lambda c: incremental_req(
            TOPIC, c.topic(0), [("cleanup.policy", 2, "compact")])),
            Step(lambda c: describe_configs_req(TOPIC, c.topic(0), ["cleanup.policy"]), version=1)],
        "bad_value": lambda v: [create(topic0), Step(lambda c: incremental_req(TOPIC, c.topic(0), [("retention.ms", 0, "x")]))],
        "bad_operation": lambda v: [create(topic0), Step(lambda c: incremental_req(TOPIC, c.topic(0), [("retention.ms", 7, "1")]))],
        "unknown_topic": lambda v: [Step(lambda c: incremental_req(TOPIC, c.topic(0), [("retention.ms", 0, "1")]))],
        "broker_dynamic": lambda v: [Step(lambda c: incremental_req(BROKER, "0", [("log.cleaner.threads", 0, "1")], True))],
    }


# ------------------------------------------------------------------ groups

def join_req(c: Ctx, member: str = "", session_ms: int = 10000, ptype: str = "consumer", reason: Optional[str] = None) -> Any:
    return req("JoinGroup", group_id=c.group(0), session_timeout_ms=session_ms, rebalance_timeout_ms=10000,
               member_id=member, group_instance_id=None, protocol_type=ptype, reason=reason, protocols=[
                   sub("JoinGroup", "JoinGroupRequestProtocol", name="range", metadata=subscription(c.topic(0)))])


def subscription(topic: str) -> bytes:
    """A valid ConsumerProtocolSubscription v0 (int16 version + body): Kafka's coordinator parses
    it when a "consumer" group's join completes, and never answers the join if it cannot."""
    return b"\x00\x00" + ConsumerProtocolSubscription(topics=[topic], user_data=None).encode(0)


def assignment(topic: str) -> bytes:
    tp = ConsumerProtocolAssignment.TopicPartition(topic=topic, partitions=[0])
    return b"\x00\x00" + ConsumerProtocolAssignment(assigned_partitions=[tp], user_data=None).encode(0)


def joined(v: int) -> list[Step]:
    """Join as one member at the case's version: v4+ first hears MEMBER_ID_REQUIRED with the id to use."""
    steps = [create(topic0), coordinator_ready()]
    if v >= 4:
        steps.append(Step(lambda c: join_req(c), version=v, check=False, save="join0"))
        steps.append(Step(lambda c: join_req(c, c.saved["join0"].member_id), version=v, check=False, save="join"))
    else:
        steps.append(Step(lambda c: join_req(c), version=v, check=False, save="join"))
    return steps


def synced(v: int, jv: int) -> list[Step]:
    return joined(jv) + [Step(lambda c: sync_req(c), version=min(v, 5), check=False)]


def gen(c: Ctx) -> int:
    return int(c.saved["join"].generation_id)


def mid(c: Ctx) -> str:
    return str(c.saved["join"].member_id)


def sync_req(c: Ctx, generation: Optional[int] = None, member: Optional[str] = None) -> Any:
    m = mid(c) if member is None else member
    return req("SyncGroup", group_id=c.group(0), generation_id=gen(c) if generation is None else generation,
               member_id=m, protocol_type="consumer", protocol_name="range", assignments=[
                   sub("SyncGroup", "SyncGroupRequestAssignment", member_id=m, assignment=assignment(c.topic(0)))])


def heartbeat_req(c: Ctx, generation: Optional[int] = None, member: Optional[str] = None) -> Any:
    return req("Heartbeat", group_id=c.group(0), generation_id=gen(c) if generation is None else generation,
               member_id=mid(c) if member is None else member)


def leave_req(c: Ctx, member: Optional[str] = None) -> Any:
    m = mid(c) if member is None else member
    return req("LeaveGroup", group_id=c.group(0), member_id=m, members=[
        sub("LeaveGroup", "MemberIdentity", member_id=m, reason="bye")])


def commit_req(c: Ctx, generation: int = -1, member: str = "", topic: Optional[str] = None, offset: int = 2) -> Any:
    return req("OffsetCommit", group_id=c.group(0), generation_id_or_member_epoch=generation, member_id=member,
               retention_time_ms=-1, topics=[sub("OffsetCommit", "OffsetCommitRequestTopic", name=topic or c.topic(0), partitions=[
                   sub("OffsetCommit", "OffsetCommitRequestTopic.OffsetCommitRequestPartition", partition_index=0,
                       committed_offset=offset, committed_metadata="m", commit_timestamp=-1)])])


def offset_fetch_req(c: Ctx, group: Optional[str] = None, all_topics: bool = False) -> Any:
    g = group or c.group(0)
    topics = None if all_topics else [sub("OffsetFetch", "OffsetFetchRequestTopic", name=c.topic(0), partition_indexes=[0])]
    groups = [sub("OffsetFetch", "OffsetFetchRequestGroup", group_id=g, member_id=None, member_epoch=-1, topics=None if all_topics else [
        sub("OffsetFetch", "OffsetFetchRequestGroup.OffsetFetchRequestTopics", name=c.topic(0), partition_indexes=[0])])]
    return req("OffsetFetch", group_id=g, topics=topics, groups=groups, require_stable=False)


def group_scenarios() -> dict[str, dict[str, Callable[[int], Optional[list[Step]]]]]:
    return {
        "FindCoordinator": {
            "group": lambda v: [Step(lambda c: req("FindCoordinator", key=c.group(0), key_type=0, coordinator_keys=[c.group(0)]),
                                     retry_until=_coordinator_loaded)],
            "transaction": lambda v: [Step(lambda c: req("FindCoordinator", key="txn-" + c.case.name, key_type=1,
                                                         coordinator_keys=["txn-" + c.case.name]), retry_until=_coordinator_loaded)],
            "bad_key_type": lambda v: [Step(lambda c: req("FindCoordinator", key="x", key_type=5, coordinator_keys=["x"]))],
        },
        "JoinGroup": {
            "new_member": lambda v: [create(topic0), coordinator_ready(), Step(lambda c: join_req(c), save="join0")] + (
                [Step(lambda c: join_req(c, c.saved["join0"].member_id))] if v >= 4 else []),
            "unknown_member": lambda v: [create(topic0), coordinator_ready(), Step(lambda c: join_req(c, "nobody-1"))],
            "bad_session_timeout": lambda v: [create(topic0), coordinator_ready(), Step(lambda c: join_req(c, session_ms=1))],
            "wrong_protocol_type": lambda v: joined(v) + [Step(lambda c: join_req(c, ptype="connect"))],
            "empty_protocol_type": lambda v: [create(topic0), coordinator_ready(), Step(lambda c: join_req(c, ptype=""))],
        },
        "SyncGroup": {
            "ok": lambda v: joined(5) + [Step(lambda c: sync_req(c))],
            "wrong_generation": lambda v: joined(5) + [Step(lambda c: sync_req(c, generation=gen(c) + 5))],
            "unknown_member": lambda v: joined(5) + [Step(lambda c: sync_req(c, member="nobody-2"))],
            "unknown_group": lambda v: [coordinator_ready(), Step(lambda c: req("SyncGroup", group_id=c.group(0), generation_id=1,
                                                                              member_id="m", assignments=[]))],
        },
        "Heartbeat": {
            "ok": lambda v: synced(5, 5) + [Step(lambda c: heartbeat_req(c))],
            "wrong_generation": lambda v: synced(5, 5) + [Step(lambda c: heartbeat_req(c, generation=gen(c) + 1))],
            "unknown_member": lambda v: synced(5, 5) + [Step(lambda c: heartbeat_req(c, member="nobody-3"))],
            "unknown_group": lambda v: [coordinator_ready(), Step(lambda c: req("Heartbeat", group_id=c.group(0), generation_id=1, member_id="m"))],
        },
        "LeaveGroup": {
            "ok": lambda v: synced(5, 5) + [Step(lambda c: leave_req(c))],
            "unknown_member": lambda v: synced(5, 5) + [Step(lambda c: leave_req(c, member="nobody-4"))],
            "unknown_group": lambda v: [coordinator_ready(), Step(lambda c: req("LeaveGroup", group_id=c.group(0), member_id="m", members=[
                sub("LeaveGroup", "MemberIdentity", member_id="m")]))],
        },
        "OffsetCommit": {
            "simple": lambda v: [create(topic0), coordinator_ready(), Step(lambda c: commit_req(c)),
                                 Step(lambda c: offset_fetch_req(c), version=5)],
            "member": lambda v: synced(5, 5) + [Step(lambda c: commit_req(c, gen(c), mid(c)))],
            "wrong_generation": lambda v: synced(5, 5) + [Step(lambda c: commit_req(c, gen(c) + 3, mid(c)))],
            "unknown_member": lambda v: synced(5, 5) + [Step(lambda c: commit_req(c, gen(c), "nobody-5"))],
            "unknown_topic": lambda v: [coordinator_ready(), Step(lambda c: commit_req(c))],
        },
        "OffsetFetch": {
            "committed": lambda v: [create(topic0), coordinator_ready(), Step(lambda c: commit_req(c), version=5, check=False),
                                    Step(lambda c: offset_fetch_req(c))],
            "all_topics": lambda v: [create(topic0), coordinator_ready(), Step(lambda c: commit_req(c), version=5, check=False),
                                     Step(lambda c: offset_fetch_req(c, all_topics=True))] if v >= 2 else None,  # null topics: v2+
            "unknown_group": lambda v: [create(topic0), coordinator_ready(), Step(lambda c: offset_fetch_req(c))],
        },
        "DescribeGroups": {
            "stable": lambda v: synced(5, 5) + [Step(lambda c: req("DescribeGroups", groups=[c.group(0)]))],
            "unknown": lambda v: [coordinator_ready(), Step(lambda c: req("DescribeGroups", groups=[c.group(0)]))],
            "empty_after_commit": lambda v: [create(topic0), coordinator_ready(), Step(lambda c: commit_req(c), version=5, check=False),
                                             Step(lambda c: req("DescribeGroups", groups=[c.group(0)]))],
        },
        "ListGroups": {
            "filtered": lambda v: synced(5, 5) + [Step(lambda c: req("ListGroups", states_filter=["CompletingRebalance"],
                                                                      types_filter=[]), only=own_groups)],
            "no_such_state": lambda v: [Step(lambda c: req("ListGroups", states_filter=["Dead"], types_filter=["classic"]),
                                             only=own_groups)],
        },
        "DeleteGroups": {
            "empty": lambda v: [create(topic0), coordinator_ready(), Step(lambda c: commit_req(c), version=5, check=False),
                                Step(lambda c: req("DeleteGroups", groups_names=[c.group(0)]))],
            "non_empty": lambda v: synced(5, 5) + [Step(lambda c: req("DeleteGroups", groups_names=[c.group(0)]))],
            "unknown": lambda v: [coordinator_ready(), Step(lambda c: req("DeleteGroups", groups_names=[c.group(0)]))],
        },
        "OffsetDelete": {
            "ok": lambda v: [create(topic0), coordinator_ready(), Step(lambda c: commit_req(c), version=5, check=False),
                             Step(lambda c: offset_delete_req(c))],
            "subscribed": lambda v: synced(5, 5) + [Step(lambda c: commit_req(c, gen(c), mid(c)), version=5, check=False),
                                                    Step(lambda c: offset_delete_req(c))],
            "unknown_group": lambda v: [coordinator_ready(), Step(lambda c: offset_delete_req(c))],
        },
    }


def own_groups(c: Ctx, tree: Any) -> Any:
    """ListGroups lists every group of the cluster: compare the ones this case made."""
    tree["groups"] = [g for g in tree["groups"] if g["group_id"].startswith(f"g-{c.case.name}-")]
    return tree


def _coordinator_loaded(r: Any) -> bool:
    errs = [r.error_code] + [x.error_code for x in getattr(r, "coordinators", [])]
    return all(e != 15 for e in errs)  # COORDINATOR_NOT_AVAILABLE while __consumer_offsets loads


def offset_delete_req(c: Ctx) -> Any:
    return req("OffsetDelete", group_id=c.group(0), topics=[sub("OffsetDelete", "OffsetDeleteRequestTopic", name=c.topic(0), partitions=[
        sub("OffsetDelete", "OffsetDeleteRequestTopic.OffsetDeleteRequestPartition", partition_index=0)])])


# ------------------------------------------------------------------ producers and transactions

def init_pid(tid: Optional[str], timeout: int = 60000) -> Callable[[Ctx], Any]:
    return lambda c: req("InitProducerId", transactional_id=tid and f"{tid}-{c.case.name}", transaction_timeout_ms=timeout,
                         producer_id=-1, producer_epoch=-1)


def txn_scenarios() -> dict[str, dict[str, Callable[[int], Optional[list[Step]]]]]:
    def tid(c: Ctx) -> str:
        return f"tx-{c.case.name}"

    def txn_ready() -> Step:
        return Step(lambda c: req("FindCoordinator", key=tid(c), key_type=1), version=3, check=False,
                    retry_until=lambda r: r.error_code == 0)

    def begun() -> list[Step]:
        return [create(topic0), txn_ready(), Step(init_pid("tx"), version=4, check=False, save="pid")]

    def pid(c: Ctx) -> tuple[int, int]:
        return int(c.saved["pid"].producer_id), int(c.saved["pid"].producer_epoch)

    def add_parts(c: Ctx, pid_epoch: Optional[tuple[int, int]] = None) -> Any:
        p, e = pid_epoch or pid(c)
        topics = [sub("AddPartitionsToTxn", "AddPartitionsToTxnTopic", name=c.topic(0), partitions=[0])]
        return req("AddPartitionsToTxn", v3_and_below_transactional_id=tid(c), v3_and_below_producer_id=p,
                   v3_and_below_producer_epoch=e, v3_and_below_topics=topics, transactions=[sub(
                       "AddPartitionsToTxn", "AddPartitionsToTxnTransaction", transactional_id=tid(c), producer_id=p,
                       producer_epoch=e, verify_only=False, topics=topics)])

    def end(c: Ctx, commit: bool, epoch_bump: int = 0) -> Any:
        p, e = pid(c)
        return req("EndTxn", transactional_id=tid(c), producer_id=p, producer_epoch=e + epoch_bump, committed=commit)

    return {
        "InitProducerId": {
            "idempotent": lambda v: [Step(init_pid(None))],
            "transactional": lambda v: [txn_ready(), Step(init_pid("tx"))],
            "bad_timeout": lambda v: [txn_ready(), Step(init_pid("tx", timeout=10**9))],
        },
        "AddPartitionsToTxn": {
            "ok": lambda v: begun() + [Step(add_parts)],
            "bad_epoch": lambda v: begun() + [Step(lambda c: add_parts(c, (pid(c)[0], pid(c)[1] + 3)))],
            "unknown_pid": lambda v: [create(topic0), txn_ready(), Step(lambda c: add_parts(c, (424242, 0)))],
        },
        "AddOffsetsToTxn": {
            "ok": lambda v: begun() + [Step(lambda c: req("AddOffsetsToTxn", transactional_id=tid(c), producer_id=pid(c)[0],
                                                         producer_epoch=pid(c)[1], group_id=c.group(0)))],
            "unknown_pid": lambda v: [txn_ready(), Step(lambda c: req("AddOffsetsToTxn", transactional_id=tid(c), producer_id=5,
                                                                      producer_epoch=0, group_id=c.group(0)))],
        },
        "EndTxn": {
            "commit": lambda v: begun() + [Step(add_parts, version=3, check=False),
                                           Step(lambda c: produce_req(c.topic(0), build_batch(
                                               [Record(T0, b"k", b"v")], producer_id=pid(c)[0], producer_epoch=pid(c)[1],
                                               base_sequence=0, is_transactional=True)), version=8, check=False),
                                           Step(lambda c: end(c, True))],
            # (No read-back here: EndTxn answers once PrepareCommit is written and the markers go
            # out after it, so what a ListOffsets right after sees races on both sides — Kafka's
            # own answer varied 0/1 between runs.)
            "abort_empty": lambda v: begun() + [Step(lambda c: end(c, False))],
            "fenced_epoch": lambda v: begun() + [Step(lambda c: end(c, True, epoch_bump=-1))],
            "unknown_txn": lambda v: [txn_ready(), Step(lambda c: req("EndTxn", transactional_id=tid(c), producer_id=77,
                                                                      producer_epoch=0, committed=True))],
        },
        "TxnOffsetCommit": {
            "no_add_offsets": lambda v: begun() + [coordinator_ready(), Step(lambda c: txn_commit_req(c, *pid(c)))],
            "unknown_pid": lambda v: [create(topic0), coordinator_ready(), Step(lambda c: txn_commit_req(c, 99, 0))],
        },
        "DescribeTransactions": {
            "unknown": lambda v: [Step(lambda c: req("DescribeTransactions", transactional_ids=[tid(c)]))],
            "ongoing": lambda v: begun() + [Step(add_parts, version=3, check=False),
                                            Step(lambda c: req("DescribeTransactions", transactional_ids=[tid(c)]))],
        },
        "ListTransactions": {
            "filter_pid": lambda v: begun() + [Step(lambda c: req("ListTransactions", state_filters=[],
                                                                producer_id_filters=[pid(c)[0]], duration_filter=-1))],
            "bad_state": lambda v: [Step(lambda c: req("ListTransactions", state_filters=["NoSuchState"], producer_id_filters=[]))],
        },
        "DescribeProducers": {
            "idempotent": lambda v: [create(topic0), Step(init_pid(None), version=4, check=False, save="pid"),
                                     Step(lambda c: produce_req(c.topic(0), _idem(c, 0)), version=8, check=False),
                                     Step(lambda c: describe_producers_req(c))],
            "unknown_topic": lambda v: [Step(lambda c: describe_producers_req(c))],
        },
    }


def txn_commit_req(c: Ctx, producer_id: int, epoch: int) -> Any:
    return req("TxnOffsetCommit", transactional_id=f"tx-{c.case.name}", group_id=c.group(0), producer_id=producer_id,
               producer_epoch=epoch, generation_id=-1, member_id="", topics=[sub(
                   "TxnOffsetCommit", "TxnOffsetCommitRequestTopic", name=c.topic(0), partitions=[sub(
                       "TxnOffsetCommit", "TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition",
                       partition_index=0, committed_offset=1, committed_metadata=None)])])


def describe_producers_req(c: Ctx) -> Any:
    return req("DescribeProducers", topics=[sub("DescribeProducers", "TopicRequest", name=c.topic(0), partition_indexes=[0])])


# ------------------------------------------------------------------ cluster, log dirs, security, misc

def misc_scenarios() -> dict[str, dict[str, Callable[[int], Optional[list[Step]]]]]:
    acl_filter = dict(resource_type_filter=2, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
                      host_filter=None, operation=1, permission_type=1)
    return {
        "ApiVersions": {
            "ok": lambda v: [Step(lambda c: req("ApiVersions", client_software_name="conformance", client_software_version="1.0"))],
            "bad_software_name": lambda v: [Step(lambda c: req("ApiVersions", client_software_name="bad name!",
                                                               client_software_version="1.0"))],
        },
        "DescribeCluster": {"ok": lambda v: [Step(lambda c: req("DescribeCluster", endpoint_type=1))],
                            "controllers": lambda v: [Step(lambda c: req("DescribeCluster", endpoint_type=2))]},
        "DescribeLogDirs": {
            "topic": lambda v: [create(topic0), produce(2), Step(lambda c: req("DescribeLogDirs", topics=[sub(
                "DescribeLogDirs", "DescribableLogDirTopic", topic=c.topic(0), partitions=[0])]))],
            "unknown_topic": lambda v: [Step(lambda c: req("DescribeLogDirs", topics=[sub(
                "DescribeLogDirs", "DescribableLogDirTopic", topic=c.topic(0), partitions=[0])]))],
        },
        "AlterReplicaLogDirs": {
            "unknown_dir": lambda v: [create(topic0), Step(lambda c: req("AlterReplicaLogDirs", dirs=[sub(
                "AlterReplicaLogDirs", "AlterReplicaLogDir", path="/nonexistent/dir", topics=[sub(
                    "AlterReplicaLogDirs", "AlterReplicaLogDir.AlterReplicaLogDirTopic", name=c.topic(0), partitions=[0])])]))],
        },
        "ElectLeaders": {
            "preferred_not_needed": lambda v: [create(topic0), Step(lambda c: elect_req(c, c.topic(0)))],
            "unknown_partition": lambda v: [Step(lambda c: elect_req(c, c.topic(0)))],
            "unclean": lambda v: [create(topic0), Step(lambda c: elect_req(c, c.topic(0), election_type=1))],
        },
        "AlterPartitionReassignments": {
            "unknown_topic": lambda v: [Step(lambda c: reassign_req(c, [0]))],
            "unknown_broker": lambda v: [create(topic0), Step(lambda c: reassign_req(c, [7]))],
            "cancel_none": lambda v: [create(topic0), Step(lambda c: reassign_req(c, None))],
        },
        "ListPartitionReassignments": {
            "topic": lambda v: [create(topic0), Step(lambda c: req("ListPartitionReassignments", timeout_ms=30000, topics=[
                sub("ListPartitionReassignments", "ListPartitionReassignmentsTopics", name=c.topic(0), partition_indexes=[0])]))],
        },
        "DescribeAcls": {"no_authorizer": lambda v: [Step(lambda c: req("DescribeAcls", **acl_filter))]},
        "CreateAcls": {"no_authorizer": lambda v: [Step(lambda c: req("CreateAcls", creations=[sub(
            "CreateAcls", "AclCreation", resource_type=2, resource_name="t", resource_pattern_type=3, principal="User:a",
            host="*", operation=3, permission_type=3)]))]},
        "DeleteAcls": {"no_authorizer": lambda v: [Step(lambda c: req("DeleteAcls", filters=[sub(
            "DeleteAcls", "DeleteAclsFilter", **acl_filter)]))]},
        "CreateDelegationToken": {"plaintext": lambda v: [Step(lambda c: req("CreateDelegationToken", renewers=[],
                                                                             max_lifetime_ms=-1))]},
        "RenewDelegationToken": {"plaintext": lambda v: [Step(lambda c: req("RenewDelegationToken", hmac=b"x", renew_period_ms=1))]},
        "ExpireDelegationToken": {"plaintext": lambda v: [Step(lambda c: req("ExpireDelegationToken", hmac=b"x", expiry_time_period_ms=1))]},
        "DescribeDelegationToken": {"plaintext": lambda v: [Step(lambda c: req("DescribeDelegationToken", owners=None))]},
        "DescribeClientQuotas": {
            "none": lambda v: [Step(lambda c: req("DescribeClientQuotas", strict=False, components=[sub(
                "DescribeClientQuotas", "ComponentData", entity_type="client-id", match_type=0, match=f"cid-{c.case.name}")]))],
            "bad_match_type": lambda v: [Step(lambda c: req("DescribeClientQuotas", strict=False, components=[sub(
                "DescribeClientQuotas", "ComponentData", entity_type="client-id", match_type=9, match=None)]))],
        },
        "AlterClientQuotas": {
            "validate_only": lambda v: [Step(lambda c: quota_req(c, "producer_byte_rate", 1024.0))],
            "unknown_key": lambda v: [Step(lambda c: quota_req(c, "no_such_quota", 1.0))],
        },
        "DescribeUserScramCredentials": {
            "unknown_user": lambda v: [Step(lambda c: req("DescribeUserScramCredentials", users=[sub(
                "DescribeUserScramCredentials", "UserName", name=f"u-{c.case.name}")]))],
            "all": lambda v: [Step(lambda c: req("DescribeUserScramCredentials", users=None))],
        },
        "AlterUserScramCredentials": {
            "bad_iterations": lambda v: [Step(lambda c: req("AlterUserScramCredentials", deletions=[], upsertions=[sub(
                "AlterUserScramCredentials", "ScramCredentialUpsertion", name=f"u-{c.case.name}", mechanism=1, iterations=1,
                salt=b"salt", salted_password=b"p" * 32)]))],
            "delete_unknown": lambda v: [Step(lambda c: req("AlterUserScramCredentials", upsertions=[], deletions=[sub(
                "AlterUserScramCredentials", "ScramCredentialDeletion", name=f"u-{c.case.name}", mechanism=1)]))],
        },
        "SaslHandshake": {"plain": lambda v: [Step(lambda c: req("SaslHandshake", mechanism="PLAIN"))]},
        "SaslAuthenticate": {"unexpected": lambda v: [Step(lambda c: req("SaslAuthenticate", auth_bytes=b"\x00u\x00p"))]},
        "ConsumerGroupDescribe": {"unknown": lambda v: [Step(lambda c: req("ConsumerGroupDescribe", group_ids=[c.group(0)]))]},
        "ConsumerGroupHeartbeat": {"join": lambda v: [Step(lambda c: req(
            "ConsumerGroupHeartbeat", group_id=c.group(0), member_id="", member_epoch=0, rebalance_timeout_ms=10000,
            subscribed_topic_names=[c.topic(0)], topic_partitions=[]))]},
        "UpdateFeatures": {"unknown_feature": lambda v: [Step(lambda c: req("UpdateFeatures", timeout_ms=30000, validate_only=True,
            feature_updates=[sub("UpdateFeatures", "FeatureUpdateKey", feature="no.such.feature", max_version_level=1,
                                 allow_downgrade=False, upgrade_type=1)]))]},
    }


def elect_req(c: Ctx, topic: str, election_type: int = 0) -> Any:
    return req("ElectLeaders", election_type=election_type, timeout_ms=30000, topic_partitions=[sub(
        "ElectLeaders", "TopicPartitions", topic=topic, partitions=[0])])


def reassign_req(c: Ctx, replicas: Optional[list[int]]) -> Any:
    return req("AlterPartitionReassignments", timeout_ms=30000, topics=[sub(
        "AlterPartitionReassignments", "ReassignableTopic", name=c.topic(0), partitions=[sub(
            "AlterPartitionReassignments", "ReassignableTopic.ReassignablePartition", partition_index=0, replicas=replicas)])])


def quota_req(c: Ctx, key: str, value: float) -> Any:
    return req("AlterClientQuotas", validate_only=True, entries=[sub("AlterClientQuotas", "EntryData", entity=[sub(
        "AlterClientQuotas", "EntryData.EntityData", entity_type="client-id", entity_name=f"cid-{c.case.name}")], ops=[sub(
            "AlterClientQuotas", "EntryData.OpData", key=key, value=value, remove=False)])])


# ------------------------------------------------------------------ controller-to-broker APIs (stale epochs only)

def controller_scenarios() -> dict[str, dict[str, Callable[[int], Optional[list[Step]]]]]:
    """Only requests a broker must refuse: a controller epoch or broker epoch older than the
    cluster's, so neither broker's state changes."""
    return {
        "LeaderAndIsr": {"stale_controller_epoch": lambda v: [Step(lambda c: req(
            "LeaderAndIsr", controller_id=0, controller_epoch=0, broker_epoch=-1, type=0, ungrouped_partition_states=[],
            topic_states=[], live_leaders=[]))]},
        "StopReplica": {"stale_controller_epoch": lambda v: [Step(lambda c: req(
            "StopReplica", controller_id=0, controller_epoch=0, broker_epoch=-1, delete_partitions=False,
            ungrouped_partitions=[], topics=[], topic_states=[]))]},
        "UpdateMetadata": {"stale_controller_epoch": lambda v: [Step(lambda c: req(
            "UpdateMetadata", controller_id=0, controller_epoch=0, broker_epoch=-1, type=0, ungrouped_partition_states=[],
            topic_states=[], live_brokers=[]))]},
        "ControlledShutdown": {"unknown_broker": lambda v: [Step(lambda c: req(
            "ControlledShutdown", broker_id=99, broker_epoch=-1))]},
        "WriteTxnMarkers": {"unknown_topic": lambda v: [Step(lambda c: req("WriteTxnMarkers", markers=[sub(
            "WriteTxnMarkers", "WritableTxnMarker", producer_id=31337, producer_epoch=0, transaction_result=True,
            coordinator_epoch=0, topics=[sub("WriteTxnMarkers", "WritableTxnMarker.WritableTxnMarkerTopic",
                                             name=c.topic(0), partition_indexes=[0])])]))]},
        "AlterPartition": {"stale_broker_epoch": lambda v: [Step(lambda c: req(
            "AlterPartition", broker_id=0, broker_epoch=1, topics=[]))]},
        "AllocateProducerIds": {"stale_broker_epoch": lambda v: [Step(lambda c: req(
            "AllocateProducerIds", broker_id=0, broker_epoch=1))]},
        "Envelope": {"not_forwarding": lambda v: [Step(lambda c: req(
            "Envelope", request_data=b"", request_principal=b"", client_host_address=b"\x7f\x00\x00\x01"))]},
    }


# ------------------------------------------------------------------ expansion

def all_scenarios() -> dict[str, dict[str, Callable[[int], Optional[list[Step]]]]]:
    out: dict[str, dict[str, Callable[[int], Optional[list[Step]]]]] = {
        "Produce": produce_scenarios(), "Fetch": {**fetch_scenarios(), **fetch_session_scenarios()}, "ListOffsets": list_offsets_scenarios(),
        "OffsetForLeaderEpoch": olep_scenarios(), "Metadata": metadata_scenarios(),
        "CreateTopics": create_topics_scenarios(), "DeleteTopics": delete_topics_scenarios(),
        "CreatePartitions": create_partitions_scenarios(), "DeleteRecords": delete_records_scenarios(),
        "DescribeConfigs": describe_configs_scenarios(), "AlterConfigs": alter_configs_scenarios(),
        "IncrementalAlterConfigs": incremental_scenarios(),
    }
    for table in (group_scenarios(), txn_scenarios(), misc_scenarios(), controller_scenarios()):
        out.update(table)
    return out


def versions_of(api: str) -> list[int]:
    lo, hi = KAFKA_VERSIONS[API_BY_NAME[api].key]
    return sorted({lo, (lo + hi) // 2, hi})


def cases() -> list[Case]:
    out: list[Case] = []
    for api, scenarios in all_scenarios().items():
        assert API_BY_NAME[api].key in KAFKA_VERSIONS, f"{api} is not in Kafka's ZooKeeper-mode table"
        for v in versions_of(api):
            for name, steps in scenarios.items():
                built = steps(v)
                if built is not None:  # None: the scenario cannot be said at this version
                    out.append(Case(f"{api}.v{v}.{name}", api, v, tuple(built)))
    return out
