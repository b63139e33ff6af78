"""A progress line for long commands, on stderr: overwritten in place on a terminal, plain lines
(at most one every PLAIN_EVERY_S) when stderr is a file or a pipe, and nothing at all for work
done within the first QUIET_S seconds. The clock is passed in (kafkasim/harness/host.py owns
the wall clock)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

QUIET_S = 3.0
TTY_EVERY_S = 0.2
PLAIN_EVERY_S = 10.0


def duration(seconds: float) -> str:
    """72 -> "1m12s"; 3700 -> "1h01m"; 9 -> "9s"."""
    s = int(max(0.0, seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class ProgressLine:
    def __init__(self, stream: TextIO, clock: Callable[[], float]) -> None:
        self.stream, self.clock = stream, clock
        self.tty = stream.isatty()
        self.start = clock()
        self._last_shown = -1e9
        self._width = 0  # of the line on screen (tty), to blank what a shorter one leaves

    def elapsed(self) -> float:
        return self.clock() - self.start

    def show(self, text: str, force: bool = False) -> None:
        now = self.clock()
        if now - self.start < QUIET_S and not (force and self._width):
            return
        if not force and now - self._last_shown < (TTY_EVERY_S if self.tty else PLAIN_EVERY_S):
            return
        self._last_shown = now
        if self.tty:
            self.stream.write("\r" + text.ljust(self._width))
            self._width = len(text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        """End the in-place line (so what is printed next starts on a fresh one)."""
        if self.tty and self._width:
            self.stream.write("\n")
            self.stream.flush()
            self._width = 0


def sweep_text(done: int, total: int, failed: int, elapsed_s: float) -> str:
    left = f", ~{duration(elapsed_s / done * (total - done))} left" if 0 < done < total else ""
    return f"sweep {done}/{total} runs, {failed} failed, {duration(elapsed_s)}{left}"


def run_text(name: str, seed: int, sim_ms: float, deadline_ms: float, elapsed_s: float) -> str:
    return (f"run {name} seed {seed}: sim {sim_ms / 1000:.0f}/{deadline_ms / 1000:.0f} s "
            f"(at most; ends when the workload does), {duration(elapsed_s)}")
