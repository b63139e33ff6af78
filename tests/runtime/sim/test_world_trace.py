"""The trace's line encoder: the text json.dumps(sort_keys=True, separators=(",", ":")) gives, for
every kind of value a trace record holds — the trace hash of every run depends on it."""

from __future__ import annotations

import hashlib
import io
import json
import random
from typing import Any

import pytest

from kafkasim.runtime.sim.world import Trace, _line_encoder

pytestmark = pytest.mark.unit

REFERENCE = json.JSONEncoder(sort_keys=True, separators=(",", ":")).encode


def _records() -> list[dict[str, Any]]:
    fixed: list[dict[str, Any]] = [
        {},
        {"t": 0.1 + 0.2, "node": "broker-1", "ev": "produce", "error": 0, "base_offset": 2**40},
        {"z": [1, 2.25, None, True, False, "é✓\n\"\\\x00\x1f"], "a": {"k": 1e300, "j": -0.0, "i": 5e-324}},
        {"nan": float("nan"), "inf": float("inf"), "ninf": -float("inf"), "big": -(2**70)},
        {"nested": [[{"b": 1, "a": [2, "x"]}], []], "unicode": "\u2028\ud7ff"},
    ]
    rng = random.Random(7)
    values = [lambda: rng.random() * 10 ** rng.randint(-8, 20), lambda: rng.randint(-2**62, 2**62),
              lambda: "k" * rng.randint(0, 4), lambda: None, lambda: [rng.random(), "v"], lambda: rng.random() < 0.5]
    for _ in range(500):
        fixed.append({f"f{rng.randint(0, 40)}": rng.choice(values)() for _ in range(rng.randint(0, 7))})
    return fixed


def test_the_line_encoder_writes_what_json_dumps_writes() -> None:
    encode = _line_encoder()
    for record in _records():
        assert encode(record) == REFERENCE(record)


def test_the_trace_hashes_and_writes_those_lines() -> None:
    out = io.StringIO()
    trace = Trace(out)
    records = _records()
    for r in records:
        trace.emit(r)
    expected = "".join(REFERENCE(r) + "\n" for r in records)
    assert out.getvalue() == expected
    assert trace.hexdigest() == hashlib.sha256(expected.encode()).hexdigest()
    assert trace.count == len(records)


def test_what_json_cannot_encode_is_still_refused() -> None:
    with pytest.raises(TypeError):
        _line_encoder()({"bad": object()})
