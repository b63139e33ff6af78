"""Committed offsets and `__consumer_offsets` in the simulated world: commits survive a broker
crash (the coordinator replays its partitions), COORDINATOR_LOAD_IN_PROGRESS while it does, the
records on disk are Kafka's formats, deletion writes tombstones, retention expires an empty
group's offsets — and Kafka's group -> partition mapping (Java's String.hashCode)."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from kafkasim.broker.group.manager import (
    GROUP_METADATA_TOPIC_NAME,
    GroupMetadataManager,
    java_string_hash_code,
    partition_for_group,
)
from kafkasim.broker.group.metadata import OffsetAndMetadata, TopicPartition
from kafkasim.broker.group.txn_offsets import handle_txn_completion, store_txn_offsets
from kafkasim.client.group import GroupConfig, GroupMember
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.consumer_offsets import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
)
from kafkasim.protocol.messages.delete_groups import DeleteGroupsRequest
from kafkasim.protocol.messages.describe_groups import DescribeGroupsRequest
from kafkasim.protocol.messages.list_groups import ListGroupsRequest
from kafkasim.protocol.messages.metadata import MetadataRequest
from kafkasim.protocol.messages.offset_commit import OffsetCommitRequest
from kafkasim.protocol.messages.offset_delete import OffsetDeleteRequest
from kafkasim.protocol.messages.offset_fetch import OffsetFetchRequest
from kafkasim.records.batch import decode_batch_records, iter_batches
from kafkasim.runtime.api import NetworkError, NodeDead, NodeRuntime
from tests.broker.group.group_sim import BOOTSTRAP, SimCluster, call, connect, find_coordinator

pytestmark = pytest.mark.sim

TOPIC = "events"
OFFSETS_PARTITIONS = 5


def _commit_request(group: str, offsets: dict[int, int], generation: int = -1, member: str = "",
                    topic: str = TOPIC, metadata: str = "") -> OffsetCommitRequest:
    P = OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    return OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=generation, member_id=member,
                               topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[
                                   P(partition_index=p, committed_offset=o, committed_leader_epoch=3,
                                     committed_metadata=metadata) for p, o in sorted(offsets.items())])])


def _fetch_request(group: str, partitions: list[int], topic: str = TOPIC) -> OffsetFetchRequest:
    return OffsetFetchRequest(group_id=group, topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=partitions)])


def _committed(resp: Any) -> dict[int, int]:
    return {p.partition_index: p.committed_offset for t in resp.topics for p in t.partitions}


def test_java_string_hashcode_and_partition_mapping() -> None:
    assert java_string_hash_code("") == 0
    assert java_string_hash_code("hello") == 99162322
    # Values printed by jshell ("...".hashCode()):
    assert java_string_hash_code("my-group") == -1906497762
    assert java_string_hash_code("\u00e9t\u00e9") == 227742   # UTF-16 code units, not UTF-8 bytes
    assert java_string_hash_code("\U0001F600") == 1772899     # a surrogate pair is two units
    # Integer.MIN_VALUE's abs is itself in Java; Kafka's Utils.abs maps it to 0.
    assert java_string_hash_code("polygenelubricants") == -(1 << 31)
    assert partition_for_group("polygenelubricants", 50) == 0
    assert partition_for_group("my-group", 50) == 12      # Math.abs(-1906497762) % 50
    assert partition_for_group("hello", 50) == 22


def test_commit_survives_broker_crash_and_reload_from_consumer_offsets() -> None:
    cluster = SimCluster(seed=21, offsets_topic_num_partitions=OFFSETS_PARTITIONS)
    group = "reload-group"

    async def before(rt: NodeRuntime) -> Any:
        member = GroupMember(rt, BOOTSTRAP, GroupConfig(group, session_timeout_ms=30000, heartbeat_interval_ms=500),
                             client_id="m")
        await member.cluster.wait_for_topic(TOPIC)
        assignment = await member.ensure_active_group([TOPIC])
        member.start_heartbeats()
        first = await member.commit({tp: 10 for tp in assignment})
        second = await member.commit({tp: 20 + tp[1] for tp in assignment})
        generation = member.generation
        member.stop_heartbeats()
        return assignment, first, second, generation

    assignment, first, second, generation = cluster.run(before, until_ms=5000, node="c1")
    assert set(first.values()) == {E.NONE} and set(second.values()) == {E.NONE}
    cluster.restart_broker("kill")

    async def after(rt: NodeRuntime) -> Any:
        conn = await connect(rt)
        await find_coordinator(rt, conn, group)
        fetched = await call(conn, _fetch_request(group, [p for _, p in assignment] + [99]), 5)
        described = await call(conn, DescribeGroupsRequest(groups=[group]), 3)
        return fetched, described

    fetched, described = cluster.run(after, until_ms=20_000, node="c2")
    assert fetched.error_code == E.NONE
    assert _committed(fetched) == {**{p: 20 + p for _, p in assignment}, 99: -1}
    assert all(p.committed_leader_epoch == -1 for t in fetched.topics for p in t.partitions)
    # The group's metadata came back too: the same generation, leader and member, still Stable
    # until that member's session runs out.
    g = described.groups[0]
    assert (g.group_state, g.protocol_data, [m.member_id for m in g.members]) == \
        ("Stable", "range", [generation.member_id])
    assert cluster.server.group_coordinator is not None
    loaded = cluster.server.group_coordinator.group_manager.get_group(group)
    assert loaded.generation_id == generation.generation_id


def test_coordinator_load_in_progress_while_replaying_the_log(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = SimCluster(seed=22, offsets_topic_num_partitions=OFFSETS_PARTITIONS, offsets_load_buffer_size=512)
    group = "loading-group"

    async def before(rt: NodeRuntime) -> Any:
        conn = await connect(rt)
        await find_coordinator(rt, conn, group)
        await call(conn, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)],
                                         allow_auto_topic_creation=True), 4)
        await rt.sleep(200)
        codes = set()
        for i in range(40):  # enough records for many 512-byte load chunks
            resp = await call(conn, _commit_request(group, {i % 4: i}), 3)
            codes |= {p.error_code for t in resp.topics for p in t.partitions}
        return codes

    assert cluster.run(before, until_ms=5000, node="c1") == {E.NONE}

    # The restarted broker's coordinator is built in its startup: slow every manager's disk.
    async def pause(manager: GroupMetadataManager) -> None:
        await manager.rt.sleep(30)   # each chunk of the load takes 30 ms of (simulated) disk time
    monkeypatch.setattr(GroupMetadataManager, "pause_between_load_chunks", pause)

    cluster.restart_broker("kill")

    async def after(rt: NodeRuntime) -> Any:
        conn = None
        while conn is None:
            try:
                conn = await connect(rt)
            except (NetworkError, NodeDead):
                await rt.sleep(5)
        seen = []
        while True:
            resp = await call(conn, _fetch_request(group, [0, 1, 2, 3]), 3)
            seen.append(resp.error_code)
            if resp.error_code == E.NONE:
                return seen, _committed(resp)
            await rt.sleep(10)

    seen, committed = cluster.run(after, until_ms=20_000, node="c2")
    assert E.COORDINATOR_LOAD_IN_PROGRESS in seen, seen
    assert seen[-1] == E.NONE and committed == {0: 36, 1: 37, 2: 38, 3: 39}
    assert set(seen) <= {E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS, E.NONE}


def test_consumer_offsets_records_decode_with_kafkas_schemas() -> None:
    cluster = SimCluster(seed=23, offsets_topic_num_partitions=OFFSETS_PARTITIONS)
    group = "format-group"

    async def main(rt: NodeRuntime) -> Any:
        member = GroupMember(rt, BOOTSTRAP, GroupConfig(group, session_timeout_ms=30000, heartbeat_interval_ms=500),
                             client_id="fmt")
        await member.cluster.wait_for_topic(TOPIC)
        assignment = await member.ensure_active_group([TOPIC])
        codes = await member.commit({assignment[0]: 42})
        conn = await connect(rt)
        # A v2 commit with retention_time_ms is written as OffsetCommitValue v1 (expire timestamp).
        req = _commit_request("retained-group", {1: 7}, metadata="meta")
        req.retention_time_ms = 60_000
        v2 = await call(conn, req, 2)
        return member.member_id, member.generation.generation_id, assignment, codes, v2, rt.now_ms()

    member_id, generation, assignment, codes, v2, now = cluster.run(main, until_ms=5000)
    assert set(codes.values()) == {E.NONE} and v2.topics[0].partitions[0].error_code == E.NONE
    fs = cluster.broker_node.runtime.fs
    records: dict[str, list[tuple[int, Any, int, Any]]] = {}
    for g in (group, "retained-group"):
        partition = partition_for_group(g, OFFSETS_PARTITIONS)
        path = f"logs/{GROUP_METADATA_TOPIC_NAME}-{partition}/00000000000000000000.log"
        f = fs.open(path, create=False)
        data = f.read(0, f.size())
        for pos, header in iter_batches(data, validate=True):
            assert header.producer_id == -1 and header.compression_id == 0
            for r in decode_batch_records(data, pos):
                (kv,) = struct.unpack_from(">h", r.key, 0)
                if kv == 2:
                    key = GroupMetadataKey.decode(r.key[2:], 2)
                else:
                    key = OffsetCommitKey.decode(r.key[2:], kv)
                if r.value is None:
                    records.setdefault(key.group, []).append((kv, key, -1, None))
                    continue
                (vv,) = struct.unpack_from(">h", r.value, 0)
                cls = GroupMetadataValue if kv == 2 else OffsetCommitValue
                records.setdefault(key.group, []).append((kv, key, vv, cls.decode(r.value[2:], vv)))
    kinds = [(kv, vv) for kv, _, vv, _ in records[group]]
    # Generation 1 is written at SyncGroup (group key v2 / value v3), then the commit (key v1 / value v3).
    assert kinds == [(2, 3), (1, 3)], kinds
    _, _, _, meta = records[group][0]
    assert (meta.protocol_type, meta.generation, meta.protocol, meta.leader) == ("consumer", generation, "range",
                                                                                  member_id)
    assert [(m.member_id, m.client_id, m.session_timeout, m.rebalance_timeout) for m in meta.members] == \
        [(member_id, "fmt", 30000, 30000)]
    assert meta.current_state_timestamp > 0 and len(meta.members[0].assignment) > 0
    _, key, _, value = records[group][1]
    assert (key.group, key.topic, key.partition) == (group, assignment[0][0], assignment[0][1])
    assert (value.offset, value.leader_epoch, value.metadata) == (42, -1, "")
    assert now - 5000 <= value.commit_timestamp <= now
    [(kv, key, vv, value)] = records["retained-group"]
    assert (kv, vv, key.topic, key.partition, value.offset, value.metadata) == (1, 1, TOPIC, 1, 7, "meta")
    assert value.expire_timestamp == value.commit_timestamp + 60_000


def test_delete_groups_and_offsets_write_tombstones() -> None:
    cluster = SimCluster(seed=24, offsets_topic_num_partitions=OFFSETS_PARTITIONS)

    async def main(rt: NodeRuntime) -> Any:
        conn = await connect(rt)
        await find_coordinator(rt, conn, "gone")
        await call(conn, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)],
                                         allow_auto_topic_creation=True), 4)
        await rt.sleep(200)
        out: dict[str, Any] = {}
        out["commit"] = await call(conn, _commit_request("gone", {0: 5, 1: 6}), 3)
        out["commit_unknown_topic"] = await call(conn, _commit_request("gone", {0: 1}, topic="nope"), 3)
        out["commit_bad_generation"] = await call(conn, _commit_request("nogroup", {0: 1}, generation=4,
                                                                        member="m"), 3)
        out["commit_big_metadata"] = await call(conn, _commit_request("gone", {2: 1}, metadata="x" * 5000), 3)
        await call(conn, _commit_request("partial", {0: 1, 1: 2}), 3)
        D = OffsetDeleteRequest.OffsetDeleteRequestTopic
        out["offset_delete"] = await call(conn, OffsetDeleteRequest(group_id="partial", topics=[
            D(name=TOPIC, partitions=[D.OffsetDeleteRequestPartition(partition_index=0)]),
            D(name="nope", partitions=[D.OffsetDeleteRequestPartition(partition_index=0)])]), 0)
        out["partial_after"] = _committed(await call(conn, _fetch_request("partial", [0, 1]), 3))
        listed = await call(conn, ListGroupsRequest(), 3)
        out["listed"] = sorted((g.group_id, g.protocol_type) for g in listed.groups)
        out["delete"] = await call(conn, DeleteGroupsRequest(groups_names=["gone", "never-existed", "gone"]), 1)
        out["gone_after"] = _committed(await call(conn, _fetch_request("gone", [0, 1]), 3))
        return out

    out = cluster.run(main, until_ms=5000)
    assert [p.error_code for p in out["commit"].topics[0].partitions] == [E.NONE, E.NONE]
    assert out["commit_unknown_topic"].topics[0].partitions[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    assert out["commit_bad_generation"].topics[0].partitions[0].error_code == E.ILLEGAL_GENERATION
    assert out["commit_big_metadata"].topics[0].partitions[0].error_code == E.OFFSET_METADATA_TOO_LARGE
    od = out["offset_delete"]
    assert od.error_code == E.NONE
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in od.topics] == \
        [(TOPIC, [(0, E.NONE)]), ("nope", [(0, E.UNKNOWN_TOPIC_OR_PARTITION)])]
    assert out["partial_after"] == {0: -1, 1: 2}
    assert out["listed"] == [("gone", ""), ("partial", "")]
    assert [(r.group_id, r.error_code) for r in out["delete"].results] == \
        [("gone", E.NONE), ("never-existed", E.GROUP_ID_NOT_FOUND)]
    assert out["gone_after"] == {0: -1, 1: -1}

    # After a crash the tombstones win: nothing of "gone" or of partial's partition 0 comes back.
    cluster.restart_broker("kill")

    async def after(rt: NodeRuntime) -> Any:
        conn = await connect(rt)
        await find_coordinator(rt, conn, "gone")
        return (_committed(await call(conn, _fetch_request("gone", [0, 1]), 3)),
                _committed(await call(conn, _fetch_request("partial", [0, 1]), 3)))

    assert cluster.run(after, until_ms=20_000, node="c2") == ({0: -1, 1: -1}, {0: -1, 1: 2})


def test_offsets_of_an_empty_group_expire_after_retention() -> None:
    cluster = SimCluster(seed=25, offsets_topic_num_partitions=OFFSETS_PARTITIONS, offsets_retention_minutes=1,
                         offsets_retention_check_interval_ms=5000)
    group = "expiring"

    async def main(rt: NodeRuntime) -> Any:
        member = GroupMember(rt, BOOTSTRAP, GroupConfig(group, session_timeout_ms=5000), client_id="x")
        await member.cluster.wait_for_topic(TOPIC)
        assignment = await member.ensure_active_group([TOPIC])
        await member.commit({tp: 3 for tp in assignment})
        assert await member.leave_group() == E.NONE  # the group is Empty from here on
        _, before = await member.fetch_committed(assignment)
        await rt.sleep(30_000)
        _, halfway = await member.fetch_committed(assignment)
        await rt.sleep(40_000)
        _, after = await member.fetch_committed(assignment)
        conn = await connect(rt)
        listed = await call(conn, ListGroupsRequest(), 3)
        return before, halfway, after, [g.group_id for g in listed.groups]

    before, halfway, after, listed = cluster.run(main, until_ms=120_000)
    assert set(before.values()) == {3} and set(halfway.values()) == {3}
    assert set(after.values()) == {-1}
    assert listed == [], "an Empty group with no offsets left is removed"


def test_offset_fetch_versions_and_batched_groups() -> None:
    cluster = SimCluster(seed=26, offsets_topic_num_partitions=OFFSETS_PARTITIONS)

    async def main(rt: NodeRuntime) -> Any:
        conn = await connect(rt)
        await find_coordinator(rt, conn, "a")
        await call(conn, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)],
                                         allow_auto_topic_creation=True), 4)
        await rt.sleep(200)
        await call(conn, _commit_request("a", {0: 11, 2: 12}), 3)
        await call(conn, _commit_request("b", {1: 21}), 8)
        G = OffsetFetchRequest.OffsetFetchRequestGroup
        v8 = await call(conn, OffsetFetchRequest(groups=[
            G(group_id="a", topics=None),
            G(group_id="b", topics=[G.OffsetFetchRequestTopics(name=TOPIC, partition_indexes=[1, 3])]),
            G(group_id="", topics=None)], require_stable=True), 8)
        all_v2 = await call(conn, OffsetFetchRequest(group_id="a", topics=None), 2)
        v1_bad = await call(conn, _fetch_request("", [0]), 1)
        return v8, all_v2, v1_bad

    v8, all_v2, v1_bad = cluster.run(main, until_ms=5000)
    got = {g.group_id: (g.error_code, {(t.name, p.partition_index): p.committed_offset
                                       for t in g.topics for p in t.partitions}) for g in v8.groups}
    assert got == {"a": (E.NONE, {(TOPIC, 0): 11, (TOPIC, 2): 12}),
                   "b": (E.NONE, {(TOPIC, 1): 21, (TOPIC, 3): -1}),
                   "": (E.NONE, {})}
    assert all_v2.error_code == E.NONE and _committed(all_v2) == {0: 11, 2: 12}
    # v1 has no group-level error field; the empty group id is valid for OffsetFetch.
    assert _committed(v1_bad) == {0: -1}


def test_offsets_of_deleted_partitions_are_removed() -> None:
    cluster = SimCluster(seed=27, offsets_topic_num_partitions=OFFSETS_PARTITIONS)
    async def main(rt: NodeRuntime) -> Any:
        coordinator = cluster.server.group_coordinator
        assert coordinator is not None
        conn = await connect(rt)
        await find_coordinator(rt, conn, "a")
        for topic in (TOPIC, "other"):
            await call(conn, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                             allow_auto_topic_creation=True), 4)
        await rt.sleep(200)
        await call(conn, _commit_request("a", {0: 5, 1: 6}), 3)
        await call(conn, _commit_request("b", {0: 7}), 3)
        await call(conn, _commit_request("b", {0: 8}, topic="other"), 3)
        removed = await coordinator.on_partitions_deleted([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)])
        return (removed, _committed(await call(conn, _fetch_request("a", [0, 1]), 3)),
                _committed(await call(conn, _fetch_request("b", [0], topic="other"), 3)),
                sorted(g.group_id for g in coordinator.group_manager.current_groups()))

    removed, a_after, b_other, groups = cluster.run(main, until_ms=5000)
    assert removed == 3 and a_after == {0: -1, 1: -1} and b_other == {0: 8}
    assert groups == ["b"], "a group left with no offsets and no members is gone"


def test_pending_transactional_offsets_survive_a_reload_and_complete_on_the_marker() -> None:
    """txn-pipeline seed 236 with BUGGIFY: a preferred-leader election moved the group's offsets
    partition while a copier's transaction had its offsets stored but not yet committed; the new
    coordinator's load dropped them (only markered offsets were kept), so the commit marker found
    nothing, OffsetFetch answered the older offset and the copier copied four records again.
    Kafka's doLoadGroupsAndOffsets keeps them pending: require_stable gets UNSTABLE_OFFSET_COMMIT
    until the marker, which makes them the committed offsets."""
    cluster = SimCluster(seed=23, offsets_topic_num_partitions=OFFSETS_PARTITIONS)
    group, tp = "txn-reload-group", TopicPartition(TOPIC, 0)

    def manager() -> GroupMetadataManager:
        assert cluster.server.group_coordinator is not None
        return cluster.server.group_coordinator.group_manager

    async def store(rt: NodeRuntime) -> Any:
        await find_coordinator(rt, await connect(rt), group)
        g = manager().get_or_maybe_create_group(group, True)
        assert g is not None
        return await store_txn_offsets(manager(), g, 7, 0, {tp: OffsetAndMetadata(44, -1, "", 0)})

    assert cluster.run(store, until_ms=5000, node="c1") == {tp: E.NONE}
    cluster.restart_broker("kill")  # the coordinator replays the partition: the batch has no marker yet

    async def after(rt: NodeRuntime) -> Any:
        await find_coordinator(rt, await connect(rt), group)
        stable_before = manager().get_offsets(group, True, [tp])[tp]
        handle_txn_completion(manager(), 7, [manager().partition_for(group)], True)
        return stable_before, manager().get_offsets(group, True, [tp])[tp]

    before, committed = cluster.run(after, until_ms=20_000, node="c2")
    assert before.error == E.UNSTABLE_OFFSET_COMMIT
    assert (committed.error, committed.offset) == (E.NONE, 44)
