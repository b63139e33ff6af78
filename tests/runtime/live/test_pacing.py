"""LiveLoop: the simulated clock paced to the wall clock (never ahead of it), calls from other
threads run on the loop's thread, and the lateness histogram it reports."""

from __future__ import annotations

import threading
import time

import pytest

from kafkasim.runtime.live.pacing import LiveLoop, PacingStats
from kafkasim.runtime.sim.kernel import SimKernel

pytestmark = pytest.mark.real


def test_simulated_time_never_runs_ahead_of_wall_time() -> None:
    kernel = SimKernel()
    loop = LiveLoop(kernel)
    seen: list[tuple[float, float]] = []  # (simulated ms, wall ms) when each entry ran
    for at in (0.0, 50.0, 120.0, 300.0, 301.0, 600.0):
        kernel.schedule(at, lambda _a: seen.append((kernel.now(), loop.wall_ms())))
    loop.start_thread()
    try:
        assert loop.wait_for(lambda: len(seen) == 6, timeout_s=10)
    finally:
        loop.stop()
        loop.close()
    assert [round(s) for s, _ in seen] == [0, 50, 120, 300, 301, 600]
    for sim, wall in seen:
        assert sim <= wall, "the simulation ran ahead of the wall clock"
        assert wall - sim < 250, f"an entry due at {sim} ran at wall {wall}"
    assert loop.pacing.n == 6


def test_calls_from_other_threads_run_on_the_loop_thread() -> None:
    loop = LiveLoop(SimKernel())
    loop.start_thread()
    try:
        assert loop.wait_for(lambda: loop._thread_id != -1, 5)
        ident = loop.call(threading.get_ident)
        assert ident not in (threading.get_ident(), None)
        with pytest.raises(ZeroDivisionError):
            loop.call(lambda: 1 // 0)
        # The idle loop still answers at once (a call wakes select(), it does not wait for a timer).
        t0 = time.monotonic()
        loop.call(lambda: None)
        assert time.monotonic() - t0 < 1.0
    finally:
        loop.stop()
        loop.close()


def test_pacing_quantiles_are_upper_bucket_edges() -> None:
    stats = PacingStats()
    for ms in [0.001] * 98 + [5.0, 40.0]:
        stats.add(ms)
    assert stats.quantile(0.5) == 0.01
    assert stats.quantile(0.99) == 5.01
    assert stats.summary() == {"instants": 100, "p50_ms": 0.01, "p99_ms": 5.01, "max_ms": 40.0}
    stats.add(-3.0)  # an instant run early would be a bug; counted as on time, never negative
    assert stats.quantile(0.0001) == 0.01
