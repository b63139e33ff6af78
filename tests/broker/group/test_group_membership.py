"""Group membership in the simulated world, over the wire: Join/Sync/Heartbeat generations as
members come and go, session timeouts, static membership, and the error answers of Kafka's
GroupCoordinator."""

from __future__ import annotations

from typing import Any

import pytest

from kafkasim.broker.group.metadata import GroupState
from kafkasim.client.group import GroupConfig, GroupMember, encode_subscription
from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.api_versions import ApiVersionsRequest
from kafkasim.protocol.messages.describe_groups import DescribeGroupsRequest
from kafkasim.protocol.messages.heartbeat import HeartbeatRequest
from kafkasim.protocol.messages.join_group import JoinGroupRequest
from kafkasim.protocol.messages.leave_group import LeaveGroupRequest
from kafkasim.protocol.messages.list_groups import ListGroupsRequest
from kafkasim.protocol.messages.sync_group import SyncGroupRequest
from kafkasim.runtime.api import NodeRuntime
from tests.broker.group.group_sim import BOOTSTRAP, MemberRunner, SimCluster, call, connect, find_coordinator

pytestmark = pytest.mark.sim

TOPIC = "orders"
PARTITIONS = 8
ALL = [(TOPIC, p) for p in range(PARTITIONS)]


def _member(rt: NodeRuntime, name: str, group: str = "g", **cfg: Any) -> GroupMember:
    config = GroupConfig(group, session_timeout_ms=cfg.pop("session_timeout_ms", 3000),
                         heartbeat_interval_ms=cfg.pop("heartbeat_interval_ms", 300),
                         rebalance_timeout_ms=cfg.pop("rebalance_timeout_ms", 5000), **cfg)
    return GroupMember(rt, BOOTSTRAP, config, client_id=name)


async def _settle(rt: NodeRuntime, runners: list[MemberRunner], after: int = 0,
                  ms: float = 5000) -> tuple[int, dict[str, list[Any]]]:
    """Wait until every runner is in the same generation, newer than `after`; that generation
    and its assignment."""
    for _ in range(int(ms / 100)):
        await rt.sleep(100)
        gens = {r.member.generation.generation_id for r in runners}
        if len(gens) == 1 and min(gens) > after and not any(r.member.rejoin_needed for r in runners):
            return gens.pop(), {r.member.client_id: r.member.assignment for r in runners}
    raise AssertionError([(r.member.client_id, r.member.generation, r.member.rejoin_needed) for r in runners])


def _assert_partitioned(assignment: dict[str, list[Any]]) -> None:
    owned = [tp for tps in assignment.values() for tp in tps]
    assert sorted(owned) == ALL, f"not disjoint and complete: {assignment}"
    assert all(tps for tps in assignment.values()), f"a member got nothing: {assignment}"


def test_three_members_then_a_fourth_joins_and_one_leaves() -> None:
    cluster = SimCluster(seed=11, num_partitions=PARTITIONS)
    async def main(rt: NodeRuntime) -> Any:
        coordinator = cluster.server.group_coordinator
        assert coordinator is not None
        members = [_member(rt, f"c{i}") for i in range(4)]
        await members[0].cluster.wait_for_topic(TOPIC)
        runners = [MemberRunner(rt, m, [TOPIC]) for m in members[:3]]
        gen1, a1 = await _settle(rt, runners)
        runners.append(MemberRunner(rt, members[3], [TOPIC]))
        gen2, a2 = await _settle(rt, runners, after=gen1)
        assert await runners[1].leave() == E.NONE
        rest = [runners[0], runners[2], runners[3]]
        gen3, a3 = await _settle(rt, rest, after=gen2)
        await rt.sleep(2000)  # heartbeats keep the stable group as it is
        gen_after, a_after = await _settle(rt, rest, after=gen3 - 1)
        g = coordinator.group_manager.get_group("g")
        group = (g.state, g.generation_id, len(g.members))
        for r in runners:
            r.silence()
        return gen1, a1, gen2, a2, gen3, a3, gen_after, a_after, group, [r.history for r in runners]

    gen1, a1, gen2, a2, gen3, a3, gen_after, a_after, group, histories = cluster.run(main)
    assert len(a1) == 3 and len(a2) == 4 and len(a3) == 3
    for assignment in (a1, a2, a3):
        _assert_partitioned(assignment)
    assert gen1 < gen2 < gen3 == gen_after and a3 == a_after
    # Range assignment over sorted member ids: 8 partitions over 4 members is 2 each.
    assert sorted(len(tps) for tps in a2.values()) == [2, 2, 2, 2]
    # In every generation any member synced, no partition had two owners.
    by_generation: dict[int, list[Any]] = {}
    for history in histories:
        for generation, tps in history:
            by_generation.setdefault(generation, []).extend(tps)
    for generation, tps in by_generation.items():
        assert len(tps) == len(set(tps)), f"generation {generation} assigned a partition twice"
    assert group == (GroupState.STABLE, gen3, 3)


def test_session_timeout_evicts_a_silent_member() -> None:
    cluster = SimCluster(seed=12, num_partitions=PARTITIONS)

    async def main(rt: NodeRuntime) -> Any:
        members = [_member(rt, f"c{i}", session_timeout_ms=2000) for i in range(3)]
        await members[0].cluster.wait_for_topic(TOPIC)
        runners = [MemberRunner(rt, m, [TOPIC]) for m in members]
        gen1, _ = await _settle(rt, runners)
        silent = runners[2].member.member_id
        runners[2].silence()
        t0 = rt.monotonic_ms()
        gen2, a2 = await _settle(rt, runners[:2], after=gen1, ms=10_000)
        evicted_after = rt.monotonic_ms() - t0
        conn = await connect(rt)
        described = await call(conn, DescribeGroupsRequest(groups=["g"]), 4)
        return gen1, gen2, a2, silent, evicted_after, described

    gen1, gen2, a2, silent, evicted_after, described = cluster.run(main)
    assert gen2 > gen1
    _assert_partitioned(a2)
    assert evicted_after >= 1500, "evicted before its session could have timed out"
    g = described.groups[0]
    assert g.error_code == E.NONE and g.group_state == "Stable" and g.protocol_type == "consumer"
    assert g.protocol_data == "range" and len(g.members) == 2 and silent not in {m.member_id for m in g.members}


def test_static_member_rejoin_keeps_assignment_without_rebalance() -> None:
    cluster = SimCluster(seed=13, num_partitions=PARTITIONS)

    async def main(rt: NodeRuntime) -> Any:
        members = [_member(rt, f"c{i}", group_instance_id=f"instance-{i}") for i in range(3)]
        await members[0].cluster.wait_for_topic(TOPIC)
        runners = [MemberRunner(rt, m, [TOPIC]) for m in members]
        gen1, a1 = await _settle(rt, runners)
        old = runners[1]
        old_member_id = old.member.member_id
        old.silence()  # the process "restarts": a new client with the same group.instance.id
        reborn = _member(rt, "c1", group_instance_id="instance-1")
        assignment = await reborn.ensure_active_group([TOPIC])
        reborn.start_heartbeats()
        fenced = await old.member.heartbeat()  # the previous incarnation is fenced
        await rt.sleep(2000)
        others = [runners[0].member.generation.generation_id, runners[2].member.generation.generation_id]
        return gen1, a1, old_member_id, reborn, assignment, fenced, others, old.member.client_id

    gen1, a1, old_member_id, reborn, assignment, fenced, others, name = cluster.run(main)
    assert reborn.member_id != old_member_id and reborn.member_id.startswith("instance-1-")
    assert reborn.generation.generation_id == gen1 and others == [gen1, gen1], "a static rejoin must not rebalance"
    assert assignment == a1[name]
    assert fenced == E.FENCED_INSTANCE_ID


def test_join_protocol_errors_as_kafka_answers() -> None:
    cluster = SimCluster(seed=14)

    async def main(rt: NodeRuntime) -> Any:
        conn = await connect(rt)
        await find_coordinator(rt, conn, "errs")
        P = JoinGroupRequest.JoinGroupRequestProtocol
        protocols = [P(name="range", metadata=encode_subscription([TOPIC]))]

        def join(member_id: str = "", session: int = 3000, **kw: Any) -> JoinGroupRequest:
            return JoinGroupRequest(group_id="errs", session_timeout_ms=session, rebalance_timeout_ms=3000,
                                    member_id=member_id, protocol_type="consumer", protocols=protocols, **kw)

        out: dict[str, Any] = {}
        out["bad_session"] = (await call(conn, join(session=10), 4)).error_code
        out["bad_session_high"] = (await call(conn, join(session=10**9), 4)).error_code
        out["empty_group_id"] = (await call(conn, JoinGroupRequest(
            group_id="", session_timeout_ms=3000, rebalance_timeout_ms=3000, member_id="", protocol_type="consumer",
            protocols=protocols), 4)).error_code
        first = await call(conn, join(), 4)
        out["v4_first"] = (first.error_code, first.member_id)
        joined = await call(conn, join(first.member_id), 4)
        out["v4_second"] = (joined.error_code, joined.generation_id, joined.leader == joined.member_id,
                            [m.member_id for m in joined.members])
        # v3 has no MEMBER_ID_REQUIRED: a new member is admitted at once (and rebalances).
        conn2 = await connect(rt, "v3")
        v3_task = rt.spawn(call(conn2, join(), 3))
        await rt.sleep(50)  # let it reach the broker: the group is now PreparingRebalance
        hb = await call(conn, HeartbeatRequest(group_id="errs", generation_id=joined.generation_id,
                                               member_id=joined.member_id), 1)
        out["hb_during_rebalance"] = hb.error_code
        out["hb_unknown_member"] = (await call(conn, HeartbeatRequest(
            group_id="errs", generation_id=joined.generation_id, member_id="nobody"), 1)).error_code
        out["hb_illegal_generation"] = (await call(conn, HeartbeatRequest(
            group_id="errs", generation_id=joined.generation_id + 7, member_id=joined.member_id), 1)).error_code
        out["hb_unknown_group"] = (await call(conn, HeartbeatRequest(
            group_id="no-such-group", generation_id=1, member_id="x"), 1)).error_code
        rejoin = await call(conn, join(joined.member_id), 4)
        v3 = await v3_task
        out["rebalanced"] = (rejoin.error_code, v3.error_code, rejoin.generation_id, v3.generation_id,
                             len(rejoin.members) + len(v3.members))
        # Followers sync first and wait for the leader's assignment.
        leader, follower = (rejoin, v3) if rejoin.leader == rejoin.member_id else (v3, rejoin)
        lconn, fconn = (conn, conn2) if leader is rejoin else (conn2, conn)
        A_ = SyncGroupRequest.SyncGroupRequestAssignment
        f_task = rt.spawn(call(fconn, SyncGroupRequest(group_id="errs", generation_id=follower.generation_id,
                                                       member_id=follower.member_id, assignments=[]), 3))
        await rt.sleep(100)
        out["follower_waiting"] = not f_task.done()
        out["sync_wrong_generation"] = (await call(lconn, SyncGroupRequest(
            group_id="errs", generation_id=leader.generation_id - 1, member_id=leader.member_id,
            assignments=[]), 3)).error_code
        out["sync_v5_missing_protocol"] = (await call(lconn, SyncGroupRequest(
            group_id="errs", generation_id=leader.generation_id, member_id=leader.member_id, protocol_type=None,
            protocol_name=None, assignments=[]), 5)).error_code
        lsync = await call(lconn, SyncGroupRequest(group_id="errs", generation_id=leader.generation_id,
                                                   member_id=leader.member_id, assignments=[
                                                       A_(member_id=leader.member_id, assignment=b"L"),
                                                       A_(member_id=follower.member_id, assignment=b"F")]), 3)
        fsync = await f_task
        out["sync"] = (lsync.error_code, bytes(lsync.assignment), fsync.error_code, bytes(fsync.assignment))
        # LeaveGroup v0 answers the member's error at top level; v3+ per member.
        out["leave_v0_unknown"] = (await call(conn, LeaveGroupRequest(group_id="errs", member_id="ghost"), 0)).error_code
        M = LeaveGroupRequest.MemberIdentity
        v3_leave = await call(conn, LeaveGroupRequest(group_id="errs", members=[
            M(member_id=follower.member_id), M(member_id="ghost")]), 3)
        out["leave_v3"] = (v3_leave.error_code, [(m.member_id, m.error_code) for m in v3_leave.members])
        listed = await call(conn, ListGroupsRequest(states_filter=["PreparingRebalance"]), 4)
        out["listed"] = [(g.group_id, g.group_state, g.protocol_type) for g in listed.groups]
        return out

    out = cluster.run(main)
    assert out["bad_session"] == E.INVALID_SESSION_TIMEOUT and out["bad_session_high"] == E.INVALID_SESSION_TIMEOUT
    assert out["empty_group_id"] == E.INVALID_GROUP_ID
    code, member_id = out["v4_first"]
    assert code == E.MEMBER_ID_REQUIRED and member_id.startswith("t-")
    assert out["v4_second"] == (E.NONE, 1, True, [member_id])
    assert out["hb_during_rebalance"] == E.REBALANCE_IN_PROGRESS
    assert out["hb_unknown_member"] == E.UNKNOWN_MEMBER_ID
    assert out["hb_illegal_generation"] == E.ILLEGAL_GENERATION
    assert out["hb_unknown_group"] == E.UNKNOWN_MEMBER_ID
    assert out["rebalanced"] == (E.NONE, E.NONE, 2, 2, 2)
    assert out["follower_waiting"] is True
    assert out["sync_wrong_generation"] == E.ILLEGAL_GENERATION
    assert out["sync_v5_missing_protocol"] == E.INCONSISTENT_GROUP_PROTOCOL
    assert out["sync"] == (E.NONE, b"L", E.NONE, b"F")
    assert out["leave_v0_unknown"] == E.UNKNOWN_MEMBER_ID
    top, per_member = out["leave_v3"]
    assert top == E.NONE and [c for _, c in per_member] == [E.NONE, E.UNKNOWN_MEMBER_ID]
    assert out["listed"] == [("errs", "PreparingRebalance", "consumer")]


def test_api_versions_advertise_the_group_apis() -> None:
    cluster = SimCluster(seed=15)

    async def main(rt: NodeRuntime) -> Any:
        conn = await connect(rt)
        resp = await call(conn, ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
        return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}

    keys = cluster.run(main)
    assert keys[A.FIND_COORDINATOR] == (0, 6) and keys[A.JOIN_GROUP] == (0, 9) and keys[A.SYNC_GROUP] == (0, 5)
    assert keys[A.HEARTBEAT] == (0, 4) and keys[A.LEAVE_GROUP] == (0, 5)
    assert keys[A.OFFSET_COMMIT] == (0, 9) and keys[A.OFFSET_FETCH] == (0, 9)
    assert keys[A.DESCRIBE_GROUPS] == (0, 5) and keys[A.LIST_GROUPS] == (0, 5)
    assert keys[A.DELETE_GROUPS] == (0, 2) and keys[A.OFFSET_DELETE] == (0, 0)
    # aiokafka picks the highest version it implements inside [min, max]: it must find one.
    aiokafka = {A.FIND_COORDINATOR: {0, 1}, A.JOIN_GROUP: {0, 1, 2, 5}, A.SYNC_GROUP: {0, 1, 3},
                A.HEARTBEAT: {0, 1}, A.LEAVE_GROUP: {0, 1}, A.OFFSET_COMMIT: {2, 3}, A.OFFSET_FETCH: {1, 2, 3}}
    for key, versions in aiokafka.items():
        lo, hi = keys[key]
        assert any(lo <= v <= hi for v in versions), key
