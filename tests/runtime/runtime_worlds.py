"""One harness, two worlds: run the same `async def main(ctx)` against the simulated runtime or
the real one, so a contract test is written once and must pass in both.

`ctx.rt` is the runtime of a driver node ("test") that is never killed, so a test can kill
other nodes (`ctx.node(name)` creates them on first use) and keep observing. Each `run()` builds
a fresh universe from the same seed, which is what lets the rng tests compare two runs.
"""

from __future__ import annotations

import asyncio
import importlib.util
import io
import itertools
import json
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from kafkasim.runtime.api import Coordination, NodeRuntime
from kafkasim.runtime.real.world import RealNode
from kafkasim.runtime.real.zk import EmbeddedCoordination
from kafkasim.runtime.sim.world import SimNode, SimWorld

DRIVER = "test"
SIM_LIMIT_MS = 600_000.0  # virtual time a sim test may take before it counts as hung
SIM_STEP_MS = 1_000.0
REAL_TIMEOUT_S = 20.0

_roots = itertools.count(1)

REPO = Path(__file__).resolve().parents[2]
ZK_SCRIPT = REPO / "real" / "zookeeper" / "zk.py"


def load_script(name: str, path: Path) -> ModuleType:
    """real/ is a kit of scripts, not a package: load one by path, once, under `name`."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(mod)
    return mod


def load_zk_launcher() -> ModuleType:
    return load_script("kafkasim_real_zookeeper", ZK_SCRIPT)


class HarnessTimeout(AssertionError):
    pass


@dataclass
class Ctx:
    """What a test body sees. Only `rt`/`node()`/`kill()`/`root` are world-agnostic; `sim`
    is the SimWorld for sim-only tests (None in the real world)."""

    kind: str
    rt: NodeRuntime
    root: str  # a znode path unique to this run: real ZooKeeper is shared by the session
    _node: Callable[[str], NodeRuntime]
    _kill: Callable[[str], None]
    sim: SimWorld | None = None

    def node(self, name: str) -> NodeRuntime:
        return self._node(name)

    def kill(self, name: str) -> None:
        """kill -9 of the node's process: sim SimNode.crash("kill"), real RealNode.kill()."""
        self._kill(name)


Main = Callable[[Ctx], Awaitable[Any]]


class World:
    """Base: `run(main)` returns main's result or raises its exception."""

    kind: str = ""

    def run(self, main: Main) -> Any:
        raise NotImplementedError


@dataclass
class SimHarness(World):
    seed: int = 7
    limit_ms: float = SIM_LIMIT_MS
    kind: str = "sim"
    last: SimWorld | None = None
    _trace: io.StringIO = field(default_factory=io.StringIO)

    def trace_events(self, ev: str) -> list[dict[str, Any]]:
        """The last run's trace records of one event type (what the fault model decided)."""
        records = [json.loads(line) for line in self._trace.getvalue().splitlines()]
        return [r for r in records if r["ev"] == ev]

    def run(self, main: Main) -> Any:
        self._trace = io.StringIO()
        world = self.last = SimWorld(self.seed, trace_out=self._trace)
        nodes: dict[str, SimNode] = {}

        def node(name: str) -> NodeRuntime:
            if name not in nodes:
                nodes[name] = world.add_node(name)
            return nodes[name].runtime

        def kill(name: str) -> None:
            nodes[name].crash("kill")

        ctx = Ctx("sim", node(DRIVER), "/t", node, kill, sim=world)
        task = ctx.rt.spawn(_call(main, ctx), name="main")
        # ZooKeeper's session ticker keeps the event queue non-empty forever, so run in steps
        # and stop as soon as main is done rather than waiting for an empty queue.
        while not task.done():
            if world.now_ms() >= self.limit_ms:
                raise HarnessTimeout(f"sim test still running after {self.limit_ms} virtual ms")
            world.run(world.now_ms() + SIM_STEP_MS)
        return task._done.result()  # type: ignore[attr-defined]


@dataclass
class RealHarness(World):
    tmp: Path = field(default_factory=Path)
    zookeeper: str | None = None  # a connect string: kazoo against that ZooKeeper
    durable: bool = False  # the embedded store with its WAL and snapshots (kafkasim serve's)
    seed: int = 7
    timeout_s: float = REAL_TIMEOUT_S
    kind: str = "real"

    def run(self, main: Main) -> Any:
        return asyncio.run(self._run(main))

    async def _run(self, main: Main) -> Any:
        run_id = next(_roots)
        base = self.tmp / f"run{run_id}"
        shared: str | Coordination = self.zookeeper if self.zookeeper else (
            EmbeddedCoordination.durable(str(base / "zookeeper"), snapshot_bytes=2048) if self.durable
            else EmbeddedCoordination())
        nodes: dict[str, RealNode] = {}

        def node(name: str) -> NodeRuntime:
            if name not in nodes:
                nodes[name] = RealNode(name, str(base / name), zookeeper=shared, seed=self.seed)
            return nodes[name]

        def kill(name: str) -> None:
            nodes[name].kill()

        # Unique per run because every test of the session shares one real ZooKeeper.
        root = f"/t{run_id}-{base.parent.name}"[:200] if self.zookeeper else "/t"
        ctx = Ctx("real", node(DRIVER), root, node, kill)
        try:
            return await asyncio.wait_for(main(ctx), self.timeout_s)
        except TimeoutError as exc:
            raise HarnessTimeout(f"real test still running after {self.timeout_s} s") from exc
        finally:
            for n in nodes.values():
                n.kill()


async def _call(main: Main, ctx: Ctx) -> Any:
    return await main(ctx)
