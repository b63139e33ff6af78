"""The progress line: silent for short work, in place on a terminal, plain lines otherwise."""

from __future__ import annotations

import io

import pytest

from kafkasim.harness.progress import ProgressLine, duration, sweep_text

pytestmark = pytest.mark.unit


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_the_sweep_text() -> None:
    assert sweep_text(37, 440, 2, 72) == "sweep 37/440 runs, 2 failed, 1m12s, ~13m04s left"
    assert sweep_text(440, 440, 0, 3700) == "sweep 440/440 runs, 0 failed, 1h01m"
    assert duration(9.9) == "9s"


def test_quiet_at_first_then_in_place_on_a_tty() -> None:
    out, clock = Tty(), Clock()
    line = ProgressLine(out, clock)
    line.show("a")
    assert out.getvalue() == ""  # the first seconds: nothing
    clock.t += 5
    line.show("long text")
    clock.t += 1
    line.show("short")
    line.close()
    assert out.getvalue() == "\rlong text\rshort    \n"


def test_plain_lines_when_not_a_tty_at_most_every_few_seconds() -> None:
    out, clock = io.StringIO(), Clock()
    line = ProgressLine(out, clock)
    for _ in range(40):
        clock.t += 1
        line.show(f"t={clock.t:.0f}")
    line.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "t=103" and 3 <= len(lines) <= 5 and "\r" not in out.getvalue()
