"""The recovery checks' pieces: reading batches the way the checks compare them, what a crash
could bring back from a SimDisk, and the prefix rule (recovered-not-prefix / unwritten-bytes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkasim.harness.godseye import BatchId, _not_prefix, live_logs, restorable_batches, scan_batches
from kafkasim.harness.runner import run_scenario
from kafkasim.harness.scenario import parse_scenario
from kafkasim.records.batch import Record, build_batch
from kafkasim.runtime.sim.world import SimWorld

pytestmark = pytest.mark.sim

SEGMENT = "kafka-logs/events-0/00000000000000000000.log"


def _batch(base: int, n: int = 1, epoch: int = 0, value: bytes = b"v" * 50) -> bytes:
    return build_batch([Record(1000 + i, None, value) for i in range(n)], base_offset=base,
                       partition_leader_epoch=epoch)


def test_scan_batches_ids_and_a_torn_body_under_an_intact_header() -> None:
    a, b = _batch(0, 2), _batch(2, 1, epoch=3)
    ids = scan_batches(a + b, check_crc=True)
    assert [(x.base_offset, x.last_offset, x.leader_epoch) for x in ids] == [(0, 1, 0), (2, 2, 3)]
    torn = a + b[:40] + bytes(len(b) - 40)  # header intact, body zeros
    assert len(scan_batches(torn, check_crc=True)) == 1
    kept = scan_batches(torn, check_crc=False)
    assert len(kept) == 2 and kept[1] != ids[1] and kept[1].base_offset == 2  # same header, other CRC
    assert scan_batches(a + bytes(100), check_crc=False) == ids[:1]  # zeros do not parse


def test_a_truncation_not_yet_fsynced_keeps_the_cut_batches_restorable() -> None:
    world = SimWorld(1)
    node = world.add_node("broker-0")
    fs = node.runtime.fs
    fs.mkdir("kafka-logs")
    fs.mkdir("kafka-logs/events-0")
    old, new = _batch(0), _batch(1, epoch=0, value=b"old" * 20)
    f = fs.open(SEGMENT)
    f.append(old + new)
    node.disk.files[SEGMENT].sync()
    f.truncate(len(old))                      # a follower truncation, not fsynced
    replacement = _batch(1, epoch=1, value=b"new" * 20)
    f.append(replacement)
    live = live_logs(node.disk, "kafka-logs", check_crc=True)[("events", 0)]
    ids = {b.leader_epoch: b for b in scan_batches(old + new + replacement, check_crc=True) if b.base_offset == 1}
    assert live == scan_batches(old + replacement, check_crc=True)
    restorable = restorable_batches(node.disk, "kafka-logs")[("events", 0)]
    assert set(live) <= restorable and ids[0] in restorable  # the cut batch could come back


def _ids(*spec: tuple[int, int]) -> list[BatchId]:
    return [BatchId(base, base, epoch, base * 10 + epoch) for base, epoch in spec]


def test_the_prefix_rule() -> None:
    before = _ids((0, 0), (1, 0), (2, 1), (3, 1))
    assert _not_prefix(before, before) is None
    assert _not_prefix(before, before[:2]) is None                      # a lost tail
    assert _not_prefix(before, before[:2] + _ids((2, 0), (3, 0))) is None  # a cut tail came back
    assert _not_prefix(before, _ids((-1, 0)) + before) is None          # a deleted segment came back
    gap = _not_prefix(before, before[:1] + before[2:])                  # a middle batch lost
    assert gap is not None and gap["offset"] == 2 and gap["diverged_at"] == 2
    assert _not_prefix([], _ids((5, 0))) is None


def test_a_broker_that_lost_power_recovers_a_prefix_of_what_it_wrote(tmp_path: Path) -> None:
    scenario = parse_scenario("kill.toml", {
        "scenario": {"name": "kill-probe", "duration_ms": 60000},
        "cluster": {"brokers": 1, "config": {"zookeeper.session.timeout.ms": 3000}},
        "topics": [{"name": "events", "partitions": 2, "replication_factor": 1}],
        "workload": {"producer": {"messages": 300, "rate_per_s": 100}, "consumer": {"fetch_max_wait_ms": 100}},
        "faults": [{"at_ms": 1500, "kind": "crash", "targets": ["broker-0"], "mode": "power"},
                   {"at_ms": 2500, "kind": "restart", "targets": ["broker-0"]}],
        "heal": {"liveness_ms": 40000},
        "guarantees": {"expected": ["lost-write", "unseen", "inconsistent-offsets", "nonmonotonic-poll",
                                    "poll-skip", "duplicate", "reorder"]},
    })
    run = run_scenario(scenario, 1, str(tmp_path)).run
    assert run["stats"]["recoveries_checked"] == 1
    checks = {c["name"]: c for c in run["checks"]}
    assert checks["recovered-not-prefix"]["ok"] and checks["unwritten-bytes"]["ok"]
    assert checks["checker-error"]["ok"]
