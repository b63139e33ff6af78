"""Reading epoch reuse off a trace: a broker that, after a crash, leads a partition in a leader
epoch it had already led before that crash (the controller handed it back its old state)."""

from __future__ import annotations

from typing import Any


def old_epochs_led_again(events: list[dict[str, Any]], crash: dict[str, Any]) -> tuple[set[Any], list[Any]]:
    """The (topic, partition, epoch) the crashed node led before `crash` (a node_crash event),
    and the become_leader events after it that lead one of those again."""
    led = [e for e in events if e["ev"] == "become_leader" and e["node"] == crash["node"]]
    before = {(e["topic"], e["partition"], e["leader_epoch"]) for e in led if e["t"] < crash["t"]}
    again = [e for e in led if e["t"] > crash["t"] and (e["topic"], e["partition"], e["leader_epoch"]) in before]
    return before, again
