"""The names of the seeded bugs: test-only known-wrong behaviour in the broker, switched on per
world so the checkers can be shown to catch what they claim to catch.

A world (SimWorld, RealNode) is built with its set of seeded bugs and every node's runtime
answers `rt.seeded_bug("name")`; there is no process-wide switch. Every hook in broker, storage
and client code is one line naming its bug, so a reader can find each by its name. The harness
takes the set from KAFKASIM_SEEDED_BUGS where the CLI builds a run, and writes it into run.json
(`seeded_bugs`) and the trace, so a run with a bug can never pass for a clean one.

It sits beside the worlds because they refuse unknown names when they are built: a typo would
otherwise "prove" that a checker finds nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

KNOWN: dict[str, str] = {
    "hw-before-isr": "the leader moves the high watermark to its own log end offset without waiting for the ISR",
    "skip-recovery-crc": "log recovery does not check batch CRCs: a torn batch with an intact header is kept",
    "skip-follower-truncation": "a follower skips OffsetsForLeaderEpoch truncation and fetches from its log end",
    "commit-before-replicated": "the group coordinator acknowledges an offset commit once appended locally "
                                "(acks=1), not once the high watermark covers it",
    "two-owners": "the consumer range assignor gives one partition to two members",
    "txn-end-ignores-epoch": "the transaction coordinator does not check the producer epoch of an EndTxn: a fenced "
                             "producer's late EndTxn ends its successor's open transaction (KAFKA-17754)",
}


def check(names: Iterable[str]) -> frozenset[str]:
    """The names as a set; ValueError naming any that is not a known seeded bug."""
    chosen = frozenset(names)
    unknown = sorted(chosen - KNOWN.keys())
    if unknown:
        raise ValueError(f"unknown seeded bug(s) {unknown}; known: {sorted(KNOWN)}")
    return chosen


def parse(spec: str) -> frozenset[str]:
    """A comma-separated list ("hw-before-isr,two-owners"), as KAFKASIM_SEEDED_BUGS holds it."""
    return check(n.strip() for n in spec.split(",") if n.strip())
