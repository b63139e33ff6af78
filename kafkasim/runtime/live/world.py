"""Building a live world: a SimWorld whose trace records wall time too, and the loop that paces it.

Every trace line of a live world carries `wall` (ms since the loop started) beside `t` (the
simulated ms), so a fault or a broker's decision can be placed on both timelines. The cluster's
side stays seeded (the same rng streams as `kafkasim run`), but the real clients' timing is not
replayable, so neither is the trace hash.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import IO, Any

from kafkasim.runtime.live.bridge import LiveBridge
from kafkasim.runtime.live.pacing import LiveLoop
from kafkasim.runtime.sim.world import SimWorld, Trace


class WallClockTrace(Trace):
    def __init__(self, out: IO[str] | None, wall_ms: Callable[[], float]) -> None:
        super().__init__(out)
        self._wall_ms = wall_ms

    def emit(self, record: dict[str, Any]) -> None:
        record["wall"] = round(self._wall_ms(), 3)
        super().emit(record)


def live_world(seed: int, trace_out: IO[str] | None, latency_ms: tuple[float, float] = (0.1, 0.8),
               seeded_bugs: Iterable[str] = ()) -> tuple[SimWorld, LiveLoop, LiveBridge]:
    world = SimWorld(seed, trace_out, latency_ms=latency_ms, seeded_bugs=seeded_bugs)
    loop = LiveLoop(world.kernel)
    world.trace = WallClockTrace(trace_out, loop.wall_ms)  # before anything is traced
    return world, loop, LiveBridge(loop, world)
