"""When the workload's consumer may stop: not while an acknowledged record lies at or past its
position (partition-isolating-leader seed 54 with BUGGIFY: a cut-off leader that had not yet
learned it was replaced answered empty fetches, and the consumer quit 5 polls later)."""

from __future__ import annotations

import pytest

from kafkasim.harness.workload import History, Send, behind_acked

pytestmark = pytest.mark.unit


def _acked(partition: int, offset: int, ok: bool | None = True) -> Send:
    return Send("producer-0", f"producer-0-{partition}-{offset}", None, 0.0, 1.0, ok, partition, offset)


def test_a_consumer_is_behind_while_an_acknowledged_record_is_at_or_past_its_position() -> None:
    h = History(sends=[_acked(0, 349), _acked(0, 627), _acked(1, 10)])
    assert behind_acked(h, "events", {("events", 0): 351, ("events", 1): 11})
    assert behind_acked(h, "events", {("events", 0): 627, ("events", 1): 11}), "offset 627 itself is unread"
    assert not behind_acked(h, "events", {("events", 0): 628, ("events", 1): 11})
    assert behind_acked(h, "events", {("events", 0): 628, ("events", 1): 10})


def test_an_unpositioned_partition_is_behind_and_unacknowledged_sends_do_not_count() -> None:
    h = History(sends=[_acked(0, 5), _acked(0, 900, ok=False), _acked(0, 901, ok=None)])
    assert behind_acked(h, "events", {("events", 0): None})
    assert not behind_acked(h, "events", {("events", 0): 6}), "only acknowledged sends hold the consumer"
    assert not behind_acked(History(), "events", {("events", 0): None}), "nothing acknowledged: nothing to wait for"
