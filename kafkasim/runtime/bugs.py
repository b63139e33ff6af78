"""Seeded bugs: a test-only switchboard that turns on known-wrong behaviour in the broker, so
the checkers can be shown to catch what they claim to catch.

    KAFKASIM_SEEDED_BUGS=hw-before-isr,skip-recovery-crc kafkasim run scenarios/...

The variable is read once, at import; tests switch bugs in-process with `seeded(...)`. Every
hook in broker/storage/client code is one line, `if bugs.on("name"): ...`, so a reader can find
each bug by its name. The runner writes the enabled bugs into run.json (`seeded_bugs`) and the
trace, so a run with a bug can never pass for a clean one.

It lives under runtime/ because storage, broker and client code consult it and imports point
down: the lowest layer is the one every other may use.

An unknown name is an error, not a silent no-op: a typo would otherwise "prove" that a checker
finds nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

ENV_VAR = "KAFKASIM_SEEDED_BUGS"

KNOWN: dict[str, str] = {
    "hw-before-isr": "the leader moves the high watermark to its own log end offset without waiting for the ISR",
    "skip-recovery-crc": "log recovery does not check batch CRCs: a torn batch with an intact header is kept",
    "skip-follower-truncation": "a follower skips OffsetsForLeaderEpoch truncation and fetches from its log end",
    "commit-before-replicated": "the group coordinator acknowledges an offset commit once appended locally "
                                "(acks=1), not once the high watermark covers it",
    "two-owners": "the consumer range assignor gives one partition to two members",
}


def parse(spec: str) -> frozenset[str]:
    names = frozenset(n.strip() for n in spec.split(",") if n.strip())
    unknown = sorted(names - KNOWN.keys())
    if unknown:
        raise ValueError(f"{ENV_VAR}: unknown seeded bug(s) {unknown}; known: {sorted(KNOWN)}")
    return names


_enabled: frozenset[str] = parse(os.environ.get(ENV_VAR, ""))


def on(name: str) -> bool:
    """Whether seeded bug `name` is switched on (a set lookup: hooks sit on hot paths)."""
    return name in _enabled


def enabled() -> list[str]:
    """The bugs switched on, sorted (what run.json records)."""
    return sorted(_enabled)


@contextmanager
def seeded(*names: str) -> Iterator[None]:
    """Switch exactly these bugs on for the block (and everything else off), then restore."""
    global _enabled
    previous = _enabled
    _enabled = parse(",".join(names))
    try:
        yield
    finally:
        _enabled = previous
