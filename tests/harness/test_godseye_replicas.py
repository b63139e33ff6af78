"""check_replicas' rules that issue 18 made precise: a replica not yet reconciled with the
current leader (KIP-101/279) is compared only below its own high watermark, and a batch whose
partition leader epoch (not covered by the CRC) is one flipped bit away from the leader's is
leader-epoch-bit-flip — only in a run that flipped bits, and never hiding what follows it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kafkasim.broker.replica_fetcher import PartitionFetchState
from kafkasim.broker.partition import Replica
from kafkasim.harness.godseye import BatchId, BitFlipWatch, _differences, _fetched_from, _reconciled

pytestmark = pytest.mark.unit

LEADER = {0: BatchId(0, 0, 0, 11), 1: BatchId(1, 1, 0, 22), 2: BatchId(2, 2, 0, 33)}


def test_an_epoch_one_bit_off_with_the_same_crc_is_a_bit_flip_when_bits_were_flipped() -> None:
    theirs = [BatchId(0, 0, 0, 11), BatchId(1, 1, 8192, 22), BatchId(2, 2, 0, 33)]
    flips, _, first = _differences(LEADER, theirs, 0, flips_possible=True)
    assert [(b.base_offset, ref.leader_epoch, b.leader_epoch) for b, ref in flips] == [(1, 0, 8192)]
    assert first is None
    # No bit flips in the run: the very same difference is a replication bug.
    flips, _, first = _differences(LEADER, theirs, 0, flips_possible=False)
    assert flips == [] and first == (1, [1, 1, 0, 22], [1, 1, 8192, 22])


def test_what_follows_a_flipped_epoch_is_still_divergence() -> None:
    theirs = [BatchId(0, 0, 0, 11), BatchId(1, 1, 8192, 22), BatchId(2, 2, 8192, 99)]
    flips, _, first = _differences(LEADER, theirs, 0, flips_possible=True)
    assert len(flips) == 1 and first == (2, [2, 2, 0, 33], [2, 2, 8192, 99])
    # Two bits apart, or another CRC: not a single flip of the epoch field.
    assert _differences(LEADER, [BatchId(1, 1, 3, 22)], 0, True)[2] is not None
    assert _differences(LEADER, [BatchId(1, 1, 8192, 23)], 0, True)[2] is not None


LONG = {b: BatchId(b, b, 0, 100 + b) for b in range(8)}


def test_a_batch_one_offset_bit_away_is_a_propagated_flip_only_when_bits_were_flipped() -> None:
    # The replica stored the leader's batch 2 (crc 102) at 6 = 2 ^ 4: a flipped base offset.
    theirs = [LONG[0], LONG[1], BatchId(6, 6, 0, 102)]
    _, offset_flips, first = _differences(LONG, theirs, 0, flips_possible=True)
    assert offset_flips == [(6, [6, 6, 0, 106], [6, 6, 0, 102])] and first is None
    assert _differences(LONG, theirs, 0, flips_possible=False)[2] is not None
    # Same records two bits away (2 -> 7), or another span: divergence.
    assert _differences(LONG, [BatchId(7, 7, 0, 102)], 0, True)[2] is not None
    assert _differences(LONG, [BatchId(6, 7, 0, 102)], 0, True)[2] is not None


def test_a_hole_in_the_leader_is_a_propagated_flip_but_an_overlapping_batch_is_not() -> None:
    leader = {b: LONG[b] for b in (0, 1, 3)}           # nothing at 2: a hole
    _, offset_flips, first = _differences(leader, [LONG[2]], 0, flips_possible=True)
    assert len(offset_flips) == 1 and first is None
    leader_wide = {0: LONG[0], 1: BatchId(1, 3, 0, 7)}  # 1..3 in one batch: the replica's 2 differs
    assert _differences(leader_wide, [LONG[2]], 0, flips_possible=True)[2] is not None


def test_bit_flip_watch_maps_a_segment_path_to_its_partition() -> None:
    w = BitFlipWatch()
    w.on_event("broker-1", "disk_fault", {"fault": "bitflip", "op": "read",
                                          "path": "kafka-logs/events-0/00000000000000000000.log"})
    w.on_event("broker-1", "disk_fault", {"fault": "torn", "path": "kafka-logs/events-1/0.log"})
    assert w.partitions == {("events", 0)}


def _server(leader_epoch: int, fetching: dict[int, PartitionFetchState]) -> SimpleNamespace:
    p = SimpleNamespace(leader_epoch=leader_epoch)
    threads = {leader: SimpleNamespace(partitions={("events", 2): st}) for leader, st in fetching.items()}
    rm = SimpleNamespace(get_partition=lambda t, i: p, fetcher_manager=SimpleNamespace(threads=threads))
    return SimpleNamespace(replica_manager=rm)


def test_a_replica_is_reconciled_once_its_fetcher_is_past_truncation_in_the_leaders_epoch() -> None:
    done = PartitionFetchState(b"", 870, 5, truncating=False)
    assert _reconciled(_server(5, {1: done}), ("events", 2), 1, 5)
    # nemesis-mixed seed 25: broker-0 follows broker-1 in epoch 5 but never reached it.
    assert not _reconciled(_server(5, {1: PartitionFetchState(b"", 868, 5)}), ("events", 2), 1, 5)
    assert not _reconciled(_server(4, {1: done}), ("events", 2), 1, 5)   # an older LeaderAndIsr
    assert not _reconciled(_server(5, {}), ("events", 2), 1, 5)          # no fetcher at all


def test_a_follower_counts_as_fetched_only_once_the_leader_as_it_is_now_has_seen_it_fetch() -> None:
    # power-loss-default-flush-swarm seed 1005: broker-0 lost power leading epoch 6 and led
    # epoch 6 again after its restart; broker-2's fetcher, still waiting on broker-0's previous
    # incarnation, had truncated against epoch 6 before the loss, so its own state says done.
    remote = Replica(2)
    remote.update_fetch_state(269, 0, 10_000.0, 269)
    leader = SimpleNamespace(remote_replicas={2: remote})
    assert _fetched_from(leader, 2)
    remote.reset_replica_state(17_530.0, 249, is_new_leader=True, in_sync=True)  # makeLeader after the restart
    assert not _fetched_from(leader, 2)
    assert not _fetched_from(leader, 1)  # not a replica of this leader at all
    remote.update_fetch_state(249, 0, 18_000.0, 260)
    assert _fetched_from(leader, 2)
