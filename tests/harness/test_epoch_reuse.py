"""EpochReuseWatch: a leader that lost power and led the same epoch again (crash-swarm seeds 817
and 842 of power-loss-default-flush-swarm: broker-0 led events-0 in epoch 0, lost 47-311 to a
power loss, was sent leader 0 in epoch 0 again by a controller whose failover read /brokers/ids
after it re-registered; broker-1, whose fetch hung 30 s on the dead connection, fetched at 312
once the leader had written past it in epoch 0 and kept its old 47-311)."""

from __future__ import annotations

from typing import Any

import pytest

from kafkasim.harness.epoch_reuse import EpochReuseWatch

pytestmark = pytest.mark.unit

TP = ("events", 0)


def _leader(watch: EpochReuseWatch, node: str, epoch: int, log_end: int, partition: int = 0) -> None:
    watch.on_event(node, "become_leader", {"topic": "events", "partition": partition, "leader_epoch": epoch,
                                           "log_end_offset": log_end, "isr": [0, 1, 2], "high_watermark": 0})


def _crash(watch: EpochReuseWatch, node: str, mode: str) -> None:
    fields: dict[str, Any] = {"mode": mode, "incarnation": 0}
    watch.on_event(node, "node_crash", fields)


def test_a_power_lost_leader_leading_its_epoch_again_explains_that_epochs_batches_from_its_restart_end() -> None:
    w = EpochReuseWatch()
    _leader(w, "broker-0", 0, 0)
    _crash(w, "broker-0", "power")
    _leader(w, "broker-0", 0, 47)
    assert w.reused == {TP: {0: 47}}
    assert w.explains(TP, [47, 47, 0, 3610070877]) == 47
    assert w.explains(TP, [300, 311, 0, 1]) == 47
    assert w.explains(TP, [46, 46, 0, 1]) is None        # below where it resumed: both had it
    assert w.explains(TP, [47, 47, 1, 1]) is None        # another epoch: not this
    assert w.explains(("events", 1), [47, 47, 0, 1]) is None


@pytest.mark.parametrize("story", ["kill", "new-epoch", "other-node", "other-partition"])
def test_anything_else_explains_nothing(story: str) -> None:
    w = EpochReuseWatch()
    _leader(w, "broker-0", 3, 10)
    _crash(w, "broker-1" if story == "other-node" else "broker-0", "kill" if story == "kill" else "power")
    if story == "new-epoch":
        _leader(w, "broker-0", 4, 47)   # a new epoch: followers truncate against it (KIP-101/279)
    elif story == "other-partition":
        _leader(w, "broker-0", 3, 47, partition=1)
    else:
        _leader(w, "broker-0", 3, 47)
    assert w.reused == {}
    assert w.explains(TP, [47, 50, 3, 1]) is None


def test_the_lowest_restart_end_wins_over_several_power_losses() -> None:
    w = EpochReuseWatch()
    _leader(w, "broker-0", 2, 0)
    _crash(w, "broker-0", "power")
    _leader(w, "broker-0", 2, 80)
    _crash(w, "broker-0", "power")
    _leader(w, "broker-0", 2, 60)
    assert w.reused == {TP: {2: 60}}


def test_an_older_epochs_batch_above_where_the_leader_resumed_counts_only_with_the_reused_epoch_after_it() -> None:
    # Seed 1184: broker-1 began epoch 3 at 293, lost power, came back leading 3 from 266; broker-2
    # (last fetched epoch 3) kept its epoch-2 batches 266-292 and its epoch-3 ones above.
    w = EpochReuseWatch()
    _leader(w, "broker-1", 3, 293)
    _crash(w, "broker-1", "power")
    _leader(w, "broker-1", 3, 266)
    assert w.explains(TP, [266, 266, 2, 1], {2, 3}) == 266
    assert w.explains(TP, [266, 266, 2, 1], {2}) is None      # never fetched epoch 3: it should have truncated
    assert w.explains(TP, [266, 266, 2, 1]) is None
    assert w.explains(TP, [265, 265, 2, 1], {3}) is None      # below the resume offset: both had it
    assert w.explains(TP, [266, 266, 4, 1], {4}) is None      # a newer epoch: not this


def test_led_after_power_loss_is_where_a_broker_first_led_each_partition_after_losing_power() -> None:
    # Seed 1480: broker-2 lost power, restarted with events-2 at 32 and was elected leader of a
    # new epoch (4) from there; broker-0 had not truncated against it yet.
    w = EpochReuseWatch()
    _leader(w, "broker-2", 1, 0, partition=2)
    assert w.led_after_power_loss("broker-2", ("events", 2)) is None    # no power loss yet
    _crash(w, "broker-2", "power")
    _leader(w, "broker-2", 4, 32, partition=2)
    _leader(w, "broker-2", 5, 90, partition=2)                          # later elections: not a restart
    assert w.led_after_power_loss("broker-2", ("events", 2)) == 32
    assert w.led_after_power_loss("broker-2", ("events", 0)) is None    # another partition
    assert w.led_after_power_loss("broker-0", ("events", 2)) is None    # another broker
    assert w.reused == {}                                                # a new epoch is no reuse


def test_led_after_power_loss_keeps_the_lowest_over_several_losses_and_ignores_kills() -> None:
    w = EpochReuseWatch()
    _crash(w, "broker-1", "kill")
    _leader(w, "broker-1", 1, 10)
    assert w.led_after_power_loss("broker-1", TP) is None               # a kill loses nothing written
    _crash(w, "broker-1", "power")
    _leader(w, "broker-1", 2, 80)
    _crash(w, "broker-1", "power")
    _leader(w, "broker-1", 3, 60)
    _crash(w, "broker-1", "power")
    _leader(w, "broker-1", 4, 70)
    assert w.led_after_power_loss("broker-1", TP) == 60


def test_an_epoch_the_replicas_cache_began_above_counts_when_a_truncation_cut_its_batches() -> None:
    # Seed 4251: broker-0 followed broker-1's epoch 2 from 275; broker-1 lost power and led epoch 2
    # again from 0; broker-0, fetching in epoch 2 at 499, was truncated to 399 inside its batch
    # 275-412, keeping only 0-274 of epochs 0 and 1. Its epoch cache still says it followed 2.
    from kafkasim.harness.godseye import _epochs_begun_above

    class Cache:
        entries = [(0, 0), (1, 95), (2, 275)]

    class Log:
        leader_epoch_cache = Cache()

    w = EpochReuseWatch()
    _leader(w, "broker-1", 2, 275)
    _crash(w, "broker-1", "power")
    _leader(w, "broker-1", 2, 0)
    above = _epochs_begun_above(Log(), 0)
    assert above == {1, 2}
    assert w.explains(TP, [0, 0, 0, 1], {1} | above) == 0
    assert w.explains(TP, [0, 0, 0, 1], {1}) is None   # what the batches alone said
    assert _epochs_begun_above(Log(), 275) == set()
