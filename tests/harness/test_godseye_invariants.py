"""The run-time invariants (kafkasim/harness/invariants.py) on hand-built broker states, and the
watchers' promise: checking never changes a run (same trace hash with and without them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kafkasim.harness import runner
from kafkasim.harness.invariants import InvariantMonitor
from kafkasim.harness.scenario import parse_scenario

pytestmark = pytest.mark.sim

TP = ("events", 0)


@dataclass
class FakeLog:
    log_end_offset: int


@dataclass
class FakeRecord:
    log_end_offset: int


@dataclass
class FakePartition:
    leader_epoch: int
    is_leader: bool
    high_watermark: int = 0
    leo: int = 0
    maximal_isr: list[int] = field(default_factory=lambda: [0, 1, 2])
    assignment: list[int] = field(default_factory=lambda: [0, 1, 2])
    offline: bool = False
    remote_replicas: dict[int, FakeRecord] = field(default_factory=dict)  # the leader's records

    @property
    def log(self) -> FakeLog:
        return FakeLog(self.leo)


class FakeReplicaManager:
    def __init__(self, p: FakePartition) -> None:
        self.partitions = {TP: p}
        self.controller_epoch = 1


class FakeServer:
    def __init__(self, p: FakePartition) -> None:
        self.replica_manager = FakeReplicaManager(p)


@dataclass
class FakeNode:
    alive: bool = True
    incarnation: int = 0


class FakeWorld:
    def __init__(self, names: list[str]) -> None:
        self.nodes = {n: FakeNode() for n in names}
        self.t = 0.0

    def now_ms(self) -> float:
        return self.t


class FakeCluster:
    def __init__(self, world: FakeWorld, parts: dict[str, FakePartition]) -> None:
        self.world = world
        self.servers = {n: FakeServer(p) for n, p in parts.items()}

    def live_servers(self) -> list[tuple[str, Any]]:
        return [(n, s) for n, s in sorted(self.servers.items()) if self.world.nodes[n].alive]

    def replica_manager(self, name: str) -> Any:
        server = self.servers.get(name)
        return server.replica_manager if server is not None and self.world.nodes[name].alive else None

    def live_replica_managers(self) -> list[tuple[str, Any]]:
        return [(n, s.replica_manager) for n, s in self.live_servers()]


def _monitor(**parts: FakePartition) -> tuple[InvariantMonitor, FakeWorld, dict[str, FakePartition]]:
    named = {k.replace("_", "-"): v for k, v in parts.items()}
    world = FakeWorld(sorted(named))
    return InvariantMonitor(world, FakeCluster(world, named)), world, named  # type: ignore[arg-type]


def _power_loss(m: InvariantMonitor, world: FakeWorld, node: str, back_at: float = 5.0) -> None:
    """`node` loses power now and is back at `back_at`, as the monitor sees it (having checked the
    partition just before, as it does between any two simulation steps)."""
    m.check_partition(TP)
    m.on_event(node, "node_crash", {"mode": "power"})
    world.t = back_at
    m.on_event(node, "node_restart", {})


def _count(m: InvariantMonitor, name: str) -> int:
    return next(len(r.anomalies) for r in m.results() if r.name == name)


def test_high_watermark_above_an_isr_follower_is_caught_unless_it_lost_power() -> None:
    m, world, p = _monitor(broker_0=FakePartition(3, True, high_watermark=10, leo=12),
                           broker_1=FakePartition(3, False, leo=12), broker_2=FakePartition(3, False, leo=8))
    m.check_partition(TP)
    [a] = next(r for r in m.results() if r.name == "hw-above-isr-replica").anomalies
    assert a.detail["replica"] == "broker-2" and a.detail["high_watermark"] == 10
    assert a.detail["replica_log_end_offset"] == 8
    # A follower that restarted after a power loss may be behind while still in the ISR ...
    m2, world2, p2 = _monitor(broker_0=FakePartition(3, True, high_watermark=10, leo=12),
                              broker_1=FakePartition(3, False, leo=12), broker_2=FakePartition(3, False, leo=12))
    _power_loss(m2, world2, "broker-2")
    p2["broker-2"].leo = 4
    m2.check_partition(TP)
    assert _count(m2, "hw-above-isr-replica") == 0
    # ... until it has caught up once: then falling behind again is a violation.
    p2["broker-2"].leo, world2.t = 10, 6.0
    m2.check_partition(TP)
    p2["broker-2"].leo = 9
    m2.check_partition(TP)
    assert _count(m2, "hw-above-isr-replica") == 1


def test_a_power_lost_follower_stays_exempt_until_the_leader_has_heard_from_it() -> None:
    # Seed 4169: broker-2 lost its tail (back at 103) but stayed in the ISR; before it fetched
    # again the leader, still recording it at 110, raised the high watermark from 103 to 104.
    m, world, p = _monitor(broker_0=FakePartition(1, True, high_watermark=103, leo=110,
                                                   remote_replicas={1: FakeRecord(110), 2: FakeRecord(110)}),
                           broker_1=FakePartition(1, False, leo=110), broker_2=FakePartition(1, False, leo=110))
    _power_loss(m, world, "broker-2")
    p["broker-2"].leo = 103
    m.check_partition(TP)                      # at the old high watermark: not yet heard from
    p["broker-0"].high_watermark, world.t = 104, 6.0
    m.check_partition(TP)
    assert _count(m, "hw-above-isr-replica") == 0
    # Once the leader has taken its fetch (its record is the real end), catching up ends it.
    p["broker-0"].remote_replicas[2] = FakeRecord(103)
    p["broker-0"].high_watermark = 103
    m.check_partition(TP)
    p["broker-0"].high_watermark, world.t = 104, 7.0
    m.check_partition(TP)
    assert _count(m, "hw-above-isr-replica") == 1


def test_a_power_lost_follower_out_of_the_isr_stays_exempt_until_the_leader_hears_from_its_new_life() -> None:
    # Seed 5005: broker-2 lost power (157 -> 144) and was out of the ISR while down; its fetch at
    # 157 from before the loss, held while the leader was paused, put it back in the ISR.
    m, world, p = _monitor(broker_0=FakePartition(1, True, high_watermark=157, leo=157, maximal_isr=[0, 1],
                                                   remote_replicas={1: FakeRecord(157), 2: FakeRecord(157)}),
                           broker_1=FakePartition(1, False, leo=157), broker_2=FakePartition(1, False, leo=157))
    _power_loss(m, world, "broker-2")
    world.nodes["broker-2"].alive = False      # restarted, not yet a replica
    world.t = 6.0
    m.check_partition(TP)                      # out of the ISR, but the leader has not heard from it
    p["broker-0"].maximal_isr = [0, 1, 2]      # the stale fetch
    world.nodes["broker-2"].alive, p["broker-2"].leo, world.t = True, 144, 7.0
    m.check_partition(TP)
    assert _count(m, "hw-above-isr-replica") == 0
    # Its first fetch: the leader records 144; still behind, still exempt, until it catches up.
    p["broker-0"].remote_replicas[2] = FakeRecord(144)
    world.t = 8.0
    m.check_partition(TP)
    assert _count(m, "hw-above-isr-replica") == 0
    p["broker-0"].remote_replicas[2], p["broker-2"].leo, world.t = FakeRecord(157), 157, 9.0
    m.check_partition(TP)
    p["broker-2"].leo, world.t = 150, 10.0
    m.check_partition(TP)
    assert _count(m, "hw-above-isr-replica") == 1
    # Out of the ISR while running and known to the leader: that ends an exemption, as before.
    m2, world2, p2 = _monitor(broker_0=FakePartition(1, True, high_watermark=157, leo=157, maximal_isr=[0, 1],
                                                     remote_replicas={1: FakeRecord(157), 2: FakeRecord(144)}),
                              broker_1=FakePartition(1, False, leo=157), broker_2=FakePartition(1, False, leo=157))
    _power_loss(m2, world2, "broker-2")
    p2["broker-2"].leo, world2.t = 144, 6.0
    m2.check_partition(TP)
    p2["broker-0"].maximal_isr, world2.t = [0, 1, 2], 7.0
    m2.check_partition(TP)
    assert _count(m2, "hw-above-isr-replica") == 1


def test_a_follower_truncated_to_a_power_lost_leader_inherits_its_exemption() -> None:
    """power-loss-default-flush-swarm seed 210: broker-0 lost power (its tail 8-9 gone), restarted
    and led again in the same epoch; broker-2 truncated 10 -> 8 to follow it; broker-1, which had
    not fetched since, kept 8-9 and its high watermark 10 and became leader of epoch 15. Kafka
    reaches that state, so broker-2 at 8 is excused — until it catches up to a leader that did not
    lose power. A truncation to a leader that never lost power excuses nothing."""
    m, world, p = _monitor(broker_0=FakePartition(14, True, high_watermark=8, leo=8),
                           broker_1=FakePartition(14, False, high_watermark=10, leo=10),
                           broker_2=FakePartition(14, False, leo=10))
    _power_loss(m, world, "broker-0")
    world.t = 6.0
    p["broker-2"].leo = 8
    m.on_event("broker-2", "follower_truncated", {"topic": TP[0], "partition": TP[1], "leader": 0})
    p["broker-1"].leo = 10
    m.check_partition(TP)                 # broker-1 at 10 is above broker-0's HW 8: fine
    world.t = 7.0
    p["broker-0"].is_leader, p["broker-0"].leader_epoch = False, 15
    p["broker-1"].is_leader, p["broker-1"].leader_epoch = True, 15
    p["broker-2"].leader_epoch = 15
    m.on_event("broker-1", "become_leader", {"topic": TP[0], "partition": TP[1], "leader_epoch": 15})
    assert _count(m, "hw-above-isr-replica") == 0
    p["broker-2"].leo, world.t = 10, 8.0  # caught up to a leader that kept its data ...
    m.check_partition(TP)
    p["broker-2"].leo, world.t = 9, 9.0   # ... so falling behind again is a violation
    m.check_partition(TP)
    assert _count(m, "hw-above-isr-replica") == 1
    # No power loss: the same truncation excuses nothing.
    m2, world2, p2 = _monitor(broker_0=FakePartition(3, True, high_watermark=10, leo=10),
                              broker_1=FakePartition(3, False, leo=10), broker_2=FakePartition(3, False, leo=8))
    m2.on_event("broker-2", "follower_truncated", {"topic": TP[0], "partition": TP[1], "leader": 0})
    m2.check_partition(TP)
    assert _count(m2, "hw-above-isr-replica") == 1


def test_a_follower_of_a_power_lost_leader_inherits_its_exemption_even_when_it_only_appends() -> None:
    """power-loss-default-flush-swarm seed 1607: broker-1 lost power (its tail 8-9 gone) and led
    again; broker-0, further behind, followed it (appending only: no truncation) and joined the
    ISR; broker-2 kept 8-9 and its high watermark 10 and was elected next. broker-0 at 8 is
    excused, as one that truncated to broker-1 would be; a follower of a leader that never lost
    power is not."""
    m, world, p = _monitor(broker_0=FakePartition(4, False, leo=8),
                           broker_1=FakePartition(4, True, high_watermark=8, leo=8),
                           broker_2=FakePartition(4, False, leo=10))
    _power_loss(m, world, "broker-1")
    world.t = 6.0
    m.on_event("broker-0", "become_follower", {"topic": TP[0], "partition": TP[1], "leader": 1, "leader_epoch": 4})
    world.t = 7.0
    p["broker-1"].is_leader, p["broker-1"].leader_epoch = False, 5
    p["broker-2"].is_leader, p["broker-2"].leader_epoch, p["broker-2"].high_watermark = True, 5, 10
    p["broker-2"].maximal_isr = [2, 0]
    p["broker-0"].leader_epoch = 5
    m.on_event("broker-2", "become_leader", {"topic": TP[0], "partition": TP[1], "leader_epoch": 5})
    assert _count(m, "hw-above-isr-replica") == 0
    m2, world2, p2 = _monitor(broker_0=FakePartition(4, False, leo=8),
                              broker_1=FakePartition(4, True, high_watermark=8, leo=8),
                              broker_2=FakePartition(4, False, leo=10))
    m2.on_event("broker-0", "become_follower", {"topic": TP[0], "partition": TP[1], "leader": 1, "leader_epoch": 4})
    p2["broker-1"].is_leader, p2["broker-1"].leader_epoch = False, 5
    p2["broker-2"].is_leader, p2["broker-2"].leader_epoch, p2["broker-2"].high_watermark = True, 5, 10
    p2["broker-2"].maximal_isr = [2, 0]
    p2["broker-0"].leader_epoch = 5
    m2.on_event("broker-2", "become_leader", {"topic": TP[0], "partition": TP[1], "leader_epoch": 5})
    assert _count(m2, "hw-above-isr-replica") == 1


def test_leaving_the_isr_of_a_power_lost_leader_ends_no_inherited_exemption() -> None:
    """power-loss-default-flush-swarm seed 3307: broker-1 lost power and led its epoch again from 8;
    broker-0 truncated to it, was out of the ISR a while, and rejoined by catching up to broker-1's
    short log; broker-2 kept 8-9 and the high watermark 10 and was elected next. broker-0 at 8 is
    still excused; out of the ISR of a leader that never lost power, the exemption ends."""
    for leader_lost_power, expected in ((True, 0), (False, 1)):
        m, world, p = _monitor(broker_0=FakePartition(4, False, leo=8),
                               broker_1=FakePartition(4, True, high_watermark=8, leo=8, maximal_isr=[1, 2]),
                               broker_2=FakePartition(4, False, leo=10))
        m.check_partition(TP)                                     # as between any two steps
        m.on_event("broker-2", "node_crash", {"mode": "power"})   # the other broker, so the
        m.on_event("broker-2", "node_restart", {})                # world has had a power loss
        world.t = 6.0
        m.on_event("broker-0", "follower_truncated", {"topic": TP[0], "partition": TP[1], "leader": 1})
        if leader_lost_power:
            m.on_event("broker-1", "node_crash", {"mode": "power"})
            m.on_event("broker-1", "node_restart", {})
            world.t = 6.5
            m.on_event("broker-0", "follower_truncated", {"topic": TP[0], "partition": TP[1], "leader": 1})
        world.t = 7.0
        m.check_partition(TP)                  # broker-0 out of broker-1's ISR
        p["broker-1"].maximal_isr = [1, 2, 0]  # ... and back in
        world.t = 8.0
        p["broker-1"].is_leader, p["broker-1"].leader_epoch = False, 5
        p["broker-2"].is_leader, p["broker-2"].leader_epoch, p["broker-2"].high_watermark = True, 5, 10
        p["broker-2"].maximal_isr = [2, 0]
        p["broker-0"].leader_epoch = 5
        m.on_event("broker-2", "become_leader", {"topic": TP[0], "partition": TP[1], "leader_epoch": 5})
        assert _count(m, "hw-above-isr-replica") == expected, leader_lost_power


def test_catching_up_to_a_power_lost_leader_ends_no_exemption() -> None:
    """power-loss-default-flush-swarm seed 252: broker-0 and broker-2 both lost power; broker-2 came
    back leading the same epoch with a short log (8) and high watermark 0, and broker-0 fetched up
    to it. broker-1, which had not fetched since, kept the old tail and high watermark 10 and was
    then elected (epoch 15), with broker-0 at 8 in its ISR. Kafka reaches that state: broker-0's
    catch-up to broker-2's high watermark 0 proved nothing, so its own exemption holds until it
    catches up to a leader that kept its data."""
    m, world, p = _monitor(broker_0=FakePartition(14, False, leo=5),
                           broker_1=FakePartition(14, False, high_watermark=10, leo=10),
                           broker_2=FakePartition(14, True, high_watermark=0, leo=8))
    m.check_partition(TP)  # as between any two steps: the logs before the losses
    for name in ("broker-0", "broker-2"):
        m.on_event(name, "node_crash", {"mode": "power"})
    world.t = 5.0
    for name in ("broker-0", "broker-2"):
        m.on_event(name, "node_restart", {})
    world.t, p["broker-0"].leo = 6.0, 8
    m.check_partition(TP)                 # broker-0 at 8 >= broker-2's high watermark 0
    world.t = 7.0
    p["broker-2"].is_leader = False
    p["broker-1"].is_leader = True
    for part in p.values():
        part.leader_epoch = 15
    m.on_event("broker-1", "become_leader", {"topic": TP[0], "partition": TP[1], "leader_epoch": 15})
    assert _count(m, "hw-above-isr-replica") == 0
    p["broker-0"].leo = p["broker-2"].leo = 10   # caught up to a leader that kept its data ...
    world.t = 8.0
    m.check_partition(TP)
    p["broker-0"].leo, world.t = 9, 9.0         # ... so falling behind again is a violation
    m.check_partition(TP)
    assert _count(m, "hw-above-isr-replica") == 1


def _seed_5528(m: InvariantMonitor, world: FakeWorld, p: dict[str, FakePartition], inherit: bool) -> None:
    """broker-0 led events-0 in epoch 2 (high watermark 101, log end 102) and lost power, back
    empty; broker-1 truncated to it (when `inherit`) and led epoch 4 from 0; broker-0 followed
    broker-1 and rejoined its ISR, caught up to its high watermark 0; broker-2, cut off and paused
    through epochs 4-5, kept 0-101 and its high watermark 101 and was elected when broker-1 failed."""
    _power_loss(m, world, "broker-0")
    p["broker-0"].leo = p["broker-0"].high_watermark = 0
    world.t = 6.0
    if inherit:
        m.on_event("broker-1", "follower_truncated", {"topic": TP[0], "partition": TP[1], "leader": 0})
    p["broker-1"].leo = 0
    world.t = 7.0
    p["broker-0"].is_leader, p["broker-0"].leader_epoch = False, 4
    p["broker-1"].is_leader, p["broker-1"].leader_epoch, p["broker-1"].maximal_isr = True, 4, [2, 1]
    m.on_event("broker-1", "become_leader", {"topic": TP[0], "partition": TP[1], "leader_epoch": 4})
    world.t = 8.0
    p["broker-1"].maximal_isr = [2, 1, 0]
    m.on_event("broker-0", "become_follower", {"topic": TP[0], "partition": TP[1], "leader": 1, "leader_epoch": 4})
    world.t, world.nodes["broker-1"].alive = 9.0, False
    p["broker-2"].is_leader, p["broker-2"].leader_epoch, p["broker-2"].maximal_isr = True, 6, [2, 0]
    p["broker-0"].leader_epoch = 6
    m.on_event("broker-2", "become_leader", {"topic": TP[0], "partition": TP[1], "leader_epoch": 6})


def test_catching_up_to_a_leader_that_inherited_a_loss_ends_no_exemption() -> None:
    """power-loss-default-flush-swarm seed 5528: broker-0's catch-up to broker-1, whose log was its
    own short one by truncation, proved nothing about 0-101, which broker-2 kept; Kafka elects
    broker-2 with broker-0 at 0 in its ISR. Had broker-1's log been its own, catching up to it
    would have ended broker-0's exemption."""
    for inherit, expected in ((True, 0), (False, 1)):
        m, world, p = _monitor(broker_0=FakePartition(2, True, high_watermark=101, leo=102, maximal_isr=[0, 2]),
                               broker_1=FakePartition(2, False, leo=59),
                               broker_2=FakePartition(2, False, high_watermark=101, leo=102))
        _seed_5528(m, world, p, inherit)
        assert _count(m, "hw-above-isr-replica") == expected, inherit


def test_no_exemption_covers_a_high_watermark_above_every_log_end_before_the_loss() -> None:
    """A power loss takes records below the log ends it found (at most 12 here); a high watermark
    above those counted the follower for records written since, so its being short is a violation
    whatever it lost."""
    m, world, p = _monitor(broker_0=FakePartition(3, True, high_watermark=10, leo=12),
                           broker_1=FakePartition(3, False, leo=12), broker_2=FakePartition(3, False, leo=12))
    _power_loss(m, world, "broker-2")
    p["broker-2"].leo = 4
    p["broker-0"].high_watermark = p["broker-0"].leo = 12   # the most a stale record of it allows
    m.check_partition(TP)
    assert _count(m, "hw-above-isr-replica") == 0
    p["broker-0"].leo = p["broker-1"].leo = 16
    world.t = 6.0
    m.check_partition(TP)                                      # appended since: the bound stays 12
    p["broker-0"].high_watermark, world.t = 13, 7.0
    m.check_partition(TP)
    [a] = next(r for r in m.results() if r.name == "hw-above-isr-replica").anomalies
    assert a.detail["replica"] == "broker-2" and a.detail["high_watermark"] == 13


def test_a_leader_seen_but_never_traced_deposes_the_older_one() -> None:
    """power-loss-default-flush-swarm seed 702: broker-0 took leader epoch 4 (ISR [0]) but paused
    before tracing become_leader, then lost power. broker-1, whose session had expired, still
    believed it led epoch 1 with ISR [1, 2, 0] (Kafka's makeFollowers ignores a LeaderAndIsr naming
    no live leader), and broker-2 had come back short. broker-1 is a deposed leader: not judged."""
    m, world, p = _monitor(broker_0=FakePartition(4, True, high_watermark=10, leo=10, maximal_isr=[0]),
                           broker_1=FakePartition(1, True, high_watermark=10, leo=10),
                           broker_2=FakePartition(-1, False, leo=7))
    m.on_event("broker-1", "become_leader", {"topic": TP[0], "partition": TP[1], "leader_epoch": 1})
    m.check_partition(TP)                 # broker-0 leads epoch 4; broker-2 is out of its ISR
    world.nodes["broker-0"].alive = False
    m.check_partition(TP)
    assert _count(m, "hw-above-isr-replica") == 0
    # The same stale ISR with no newer leader ever seen is judged.
    m2, world2, _ = _monitor(broker_0=FakePartition(0, False, leo=10), broker_1=FakePartition(1, True,
                             high_watermark=10, leo=10), broker_2=FakePartition(-1, False, leo=7))
    m2.check_partition(TP)
    assert _count(m2, "hw-above-isr-replica") == 1


def test_a_follower_already_in_a_newer_epoch_and_a_replica_out_of_the_isr_are_not_held_to_it() -> None:
    m, _, _ = _monitor(broker_0=FakePartition(3, True, high_watermark=10, leo=12, maximal_isr=[0, 1]),
                       broker_1=FakePartition(4, False, leo=2), broker_2=FakePartition(3, False, leo=0))
    m.check_partition(TP)
    assert _count(m, "hw-above-isr-replica") == 0


def test_two_leaders_with_one_epoch_and_a_high_watermark_going_back() -> None:
    m, _, p = _monitor(broker_0=FakePartition(3, True, high_watermark=10, leo=10),
                       broker_1=FakePartition(3, True, high_watermark=10, leo=10),
                       broker_2=FakePartition(2, True, high_watermark=10, leo=10))
    m.check_partition(TP)
    assert _count(m, "two-leaders-one-epoch") == 1
    p["broker-1"].is_leader = False
    p["broker-0"].high_watermark = 7
    m.check_partition(TP)
    assert _count(m, "hw-regression") == 1
    assert _count(m, "two-leaders-one-epoch") == 1  # reported once per partition and epoch


def test_epochs_that_go_backwards() -> None:
    m, _, _ = _monitor(broker_0=FakePartition(3, False), broker_1=FakePartition(3, False))
    for epoch in (2, 3, 1):
        m.on_event("broker-0", "become_follower", {"topic": "events", "partition": 0, "leader_epoch": epoch})
    assert _count(m, "leader-epoch-regression") == 1
    for epoch in (1, 2, 2):
        m.on_event("broker-1", "controller_elected", {"epoch": epoch})
    assert _count(m, "controller-epoch-regression") == 1


@pytest.mark.parametrize("seed", [1])
def test_the_watchers_never_change_the_run(tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    scenario = parse_scenario("probe.toml", {
        "scenario": {"name": "watch-probe", "duration_ms": 60000},
        "cluster": {"brokers": 3, "config": {"zookeeper.session.timeout.ms": 3000}},
        "topics": [{"name": "events", "partitions": 2, "replication_factor": 3}],
        "workload": {"producer": {"messages": 300, "rate_per_s": 150}, "consumer": {"fetch_max_wait_ms": 100}},
        "faults": [{"at_ms": 1500, "kind": "crash", "targets": ["leader:events-0"], "mode": "power"},
                   {"at_ms": 6000, "kind": "restart", "targets": ["leader:events-0"]}],
        "heal": {"liveness_ms": 40000},
        "guarantees": {"expected": ["duplicate"]},
    })
    watched = runner.run_scenario(scenario, seed, str(tmp_path / "on")).run
    assert watched["stats"]["recoveries_checked"] == 1

    class Blind:
        def __init__(self, *_: Any) -> None:
            self.recovery = type("R", (), {"recoveries_checked": 0})()
            self.bit_flips = type("B", (), {"partitions": set(), "holes": set()})()
            self.epoch_reuse = None

        def step(self) -> None:
            pass

        def results(self) -> list[Any]:
            return []

    monkeypatch.setattr(runner, "GodsEye", Blind)
    blind = runner.run_scenario(scenario, seed, str(tmp_path / "off")).run
    assert blind["trace_hash"] == watched["trace_hash"]
    assert watched["verdict"] == "pass"
