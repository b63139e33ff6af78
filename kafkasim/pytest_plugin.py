"""kafkasim's pytest plugin (installed with the package: the `pytest11` entry point `kafkasim`).

A Kafka cluster for a test, and its faults:

    def test_my_producer_survives_a_leader_power_loss(kafkasim_cluster):
        kafkasim_cluster.create_topic("orders", partitions=1, replication_factor=3,
                                      config={"min.insync.replicas": "2"})
        producer = Producer({"bootstrap.servers": kafkasim_cluster.bootstrap_servers, "acks": "all"})
        ...
        kafkasim_cluster.power_loss("leader:orders-0")   # the machine leading orders-0 loses power
        ...

Fixtures: `kafkasim_cluster` (a fresh cluster per test) and `kafkasim_session_cluster` (one per
session). By default the cluster is the live world: kafkasim's simulated cluster paced to the wall
clock on real 127.0.0.1 ports (`kafkasim serve --sim`), where every fault of the simulation acts
— power loss with its disk crash modes, partitions (client links included), clogs, pauses,
ZooKeeper expiry, disk faults. `world="real"` starts real processes instead (Debian's ZooKeeper
and `kafkasim serve` brokers, as `kafkasim cluster up`; needs a repository checkout): kill,
restart and pause, by node name.

Settings, per test with the marker or indirect parametrization, per session with options:

    @pytest.mark.kafkasim(brokers=3, seed=7, world="live", config={"zookeeper.session.timeout.ms": "6000"})
    @pytest.mark.parametrize("kafkasim_cluster", [{"world": "real"}], indirect=True)
    pytest --kafkasim-brokers 3 --kafkasim-seed 1 --kafkasim-world live

Faults: `fault(spec)` takes the control plane's JSON spec (a scenario's [[faults]] table without
at_ms) and answers the applied fault (its id, the nodes its roles resolved to); `power_loss`,
`kill`, `restart`, `pause`, `isolate`, `partition` are shorthands; `heal()` lifts them all. A
refused fault raises kafkasim.runtime.control_api.FaultError with the reason.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from kafkasim.runtime.control_api import FaultError

# The cluster code is imported when a fixture first starts one, not when pytest loads the plugin:
# every pytest run of an environment with kafkasim installed loads it.

READY_TIMEOUT_S = 120.0
TOPIC_TIMEOUT_S = 120.0


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("kafkasim", "kafkasim clusters (kafkasim_cluster, kafkasim_session_cluster)")
    g.addoption("--kafkasim-brokers", type=int, default=3, help="brokers per cluster (default 3)")
    g.addoption("--kafkasim-seed", type=int, default=1, help="the live world's seed (default 1)")
    g.addoption("--kafkasim-world", choices=["live", "real"], default="live",
                help="live: the simulated cluster on real sockets (default); real: real processes")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kafkasim(brokers=3, seed=1, world='live', config={}): the settings of "
                                       "this test's kafkasim_cluster")


class KafkasimCluster:
    """What a test holds: bootstrap servers and the fault methods, for either world."""

    bootstrap_servers: str
    world: str
    out_dir: str

    def fault(self, spec: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def heal(self, fault_id: str | None = None) -> list[dict[str, Any]]:
        raise NotImplementedError

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     config: dict[str, str] | None = None) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------ shorthands
    def power_loss(self, target: str, duration_ms: float | None = None,
                   disk_modes: list[str] | None = None) -> dict[str, Any]:
        """The target's machine loses power: unsynced writes resolve by the disk's crash model,
        peers hear nothing. Back (restarted, its log recovered) after duration_ms, or on heal()."""
        spec: dict[str, Any] = {"kind": "crash", "mode": "power", "targets": [target]}
        if disk_modes:
            spec["disk_modes"] = disk_modes
        return self.fault(_timed(spec, duration_ms))

    def kill(self, target: str, duration_ms: float | None = None) -> dict[str, Any]:
        return self.fault(_timed({"kind": "crash", "mode": "kill", "targets": [target]}, duration_ms))

    def restart(self, target: str) -> dict[str, Any]:
        return self.fault({"kind": "restart", "targets": [target]})

    def pause(self, target: str, duration_ms: float) -> dict[str, Any]:
        return self.fault({"kind": "pause", "targets": [target], "duration_ms": duration_ms})

    def isolate(self, target: str, duration_ms: float | None = None) -> dict[str, Any]:
        return self.fault(_timed({"kind": "isolate", "targets": [target]}, duration_ms))

    def partition(self, side_a: list[str], side_b: list[str], duration_ms: float | None = None) -> dict[str, Any]:
        return self.fault(_timed({"kind": "partition", "sides": [side_a, side_b]}, duration_ms))


def _timed(spec: dict[str, Any], duration_ms: float | None) -> dict[str, Any]:
    return {**spec, "duration_ms": duration_ms} if duration_ms else spec


class LiveKafkasimCluster(KafkasimCluster):
    """The live world on a thread of this process; every call is marshalled onto it."""

    world = "live"

    def __init__(self, brokers: int, seed: int, configs: dict[str, str], out_dir: str) -> None:
        from kafkasim.harness.live import LiveCluster, LiveOptions

        self.live = LiveCluster(LiveOptions(brokers=brokers, seed=seed, configs=configs, out_dir=out_dir,
                                            control_port=0))
        self.out_dir = out_dir
        self.bootstrap_servers = self.live.bootstrap_servers
        self.live.start()
        self.control_address = self.live.control_address  # for a client in another process
        if not self.live.loop.wait_for(self.live.ready, READY_TIMEOUT_S):
            self.close()
            raise RuntimeError(f"the live cluster was not ready within {READY_TIMEOUT_S} s (see {out_dir})")

    def fault(self, spec: dict[str, Any]) -> dict[str, Any]:
        return dict(self.live.loop.call(lambda: self.live.backend.apply(spec)).describe())

    def heal(self, fault_id: str | None = None) -> list[dict[str, Any]]:
        return [f.describe() for f in self.live.loop.call(lambda: self.live.backend.heal(fault_id))]

    def active(self) -> list[dict[str, Any]]:
        return [f.describe() for f in self.live.loop.call(self.live.backend.active)]

    def history(self) -> list[dict[str, Any]]:
        return list(self.live.loop.call(self.live.backend.history))

    def leader(self, topic: str, partition: int) -> str | None:
        """God's eye: which broker node leads topic-partition now."""
        return self.live.loop.call(lambda: self.live.leader_of(topic, partition))  # type: ignore[no-any-return]

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     config: dict[str, str] | None = None) -> None:
        from kafkasim.harness.scenario import TopicSpec

        spec = TopicSpec(name, partitions, replication_factor, dict(config or {}))
        box = self.live.loop.call(lambda: self.live.create_topic(spec))
        if not self.live.loop.wait_for(lambda: bool(box), TOPIC_TIMEOUT_S):
            raise RuntimeError(f"creating topic {name!r} did not finish within {TOPIC_TIMEOUT_S} s")
        if box[0] not in (0, 36):  # NONE, TOPIC_ALREADY_EXISTS
            raise RuntimeError(f"creating topic {name!r} failed with Kafka error code {box[0]}")

    def close(self) -> None:
        self.run = self.live.stop()


class RealKafkasimCluster(KafkasimCluster):
    """Real ZooKeeper and `kafkasim serve` processes (real/cluster/cluster.py). Faults by node name
    (broker-<id>): kill (SIGKILL), restart, pause (SIGSTOP; its duration is not timed here: the
    broker stays stopped until heal() sends SIGCONT). Roles and the other kinds need the live world."""

    world = "real"

    def __init__(self, brokers: int, configs: dict[str, str], out_dir: str) -> None:
        self._mod = _cluster_launcher()
        self.out_dir = out_dir
        self.cluster = self._mod.up(out_dir, brokers, configs)
        self.bootstrap_servers = str(self.cluster.bootstrap)
        self._paused: list[int] = []
        self._next = 0

    def _broker(self, target: str) -> Any:
        ids = {f"broker-{b.broker_id}": b for b in self.cluster.brokers}
        if target not in ids:
            raise FaultError(404, f"unknown node {target!r} in the real world (nodes: {', '.join(ids)}; roles "
                                  f"need the live world)")
        return ids[target]

    def fault(self, spec: dict[str, Any]) -> dict[str, Any]:
        kind, targets = spec.get("kind"), list(spec.get("targets") or [])
        if spec.get("duration_ms") and kind != "pause":
            raise FaultError(400, "duration_ms is not available for real processes here; call heal() or restart()")
        if kind == "crash" and spec.get("mode", "kill") != "kill":
            raise FaultError(409, "a real process cannot lose power: mode 'power' needs the live world")
        if kind not in ("crash", "restart", "pause"):
            raise FaultError(409, f"{kind!r}: the real world here offers crash (kill), restart and pause")
        brokers = [self._broker(t) for t in targets]  # every target checked before anything acts
        for b in brokers:
            if kind == "crash":
                b.kill()
            elif kind == "restart":
                self.cluster.restart(b.broker_id)
            else:
                os.kill(b.pid, signal.SIGSTOP)  # not Broker.kill: that waits for the process to end
                self._paused.append(b.broker_id)
        self._next += 1
        return {"id": f"r{self._next}", "spec": spec, "targets": targets}

    def heal(self, fault_id: str | None = None) -> list[dict[str, Any]]:
        """Resume paused brokers and restart killed ones."""
        healed = []
        for b in self.cluster.brokers:
            if b.broker_id in self._paused:
                if b.alive():
                    os.kill(b.pid, signal.SIGCONT)
                healed.append({"node": f"broker-{b.broker_id}", "resumed": True})
            elif not b.alive():
                self.cluster.restart(b.broker_id)
                healed.append({"node": f"broker-{b.broker_id}", "restarted": True})
        self._paused.clear()
        return healed

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     config: dict[str, str] | None = None) -> None:
        raise FaultError(409, "create_topic needs the live world; use your client's admin API on a real cluster")

    def close(self) -> None:
        for b in self.cluster.brokers:
            if b.broker_id in self._paused and b.alive():
                os.kill(b.pid, signal.SIGCONT)
        self.cluster.down()


def _cluster_launcher() -> Any:
    """real/cluster/cluster.py, the real-world kit (it ships with the repository, not the wheel)."""
    script = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "real", "cluster",
                          "cluster.py")
    spec = importlib.util.spec_from_file_location("kafkasim_real_cluster", script)
    if spec is None or spec.loader is None or not os.path.isfile(script):
        raise RuntimeError(f"world='real' needs a kafkasim checkout ({script} is missing)")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["kafkasim_real_cluster"] = mod
    spec.loader.exec_module(mod)
    return mod


def _settings(request: pytest.FixtureRequest) -> dict[str, Any]:
    opts = request.config
    out: dict[str, Any] = {"brokers": opts.getoption("--kafkasim-brokers"), "seed": opts.getoption("--kafkasim-seed"),
                           "world": opts.getoption("--kafkasim-world"), "config": {}}
    marker = request.node.get_closest_marker("kafkasim") if request.scope == "function" else None
    if marker is not None:
        out.update(marker.kwargs)
    out.update(getattr(request, "param", None) or {})
    unknown = set(out) - {"brokers", "seed", "world", "config"}
    if unknown or out["world"] not in ("live", "real"):
        raise pytest.UsageError(f"kafkasim settings: unknown {sorted(unknown)} or world {out['world']!r} "
                                f"(brokers, seed, world='live'|'real', config)")
    return out


def _start(settings: dict[str, Any], out_dir: str) -> KafkasimCluster:
    configs = {str(k): str(v) for k, v in dict(settings["config"]).items()}
    if settings["world"] == "real":
        return RealKafkasimCluster(int(settings["brokers"]), configs, out_dir)
    return LiveKafkasimCluster(int(settings["brokers"]), int(settings["seed"]), configs, out_dir)


@pytest.fixture
def kafkasim_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
                     ) -> Iterator[KafkasimCluster]:
    """A cluster for this test alone (stopped after it; run.json and trace in `out_dir`)."""
    cluster = _start(_settings(request), str(tmp_path_factory.mktemp("kafkasim")))
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(scope="session")
def kafkasim_session_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
                             ) -> Iterator[KafkasimCluster]:
    """One cluster for the whole session (faults a test leaves behind stay: heal() in teardown)."""
    cluster = _start(_settings(request), str(tmp_path_factory.mktemp("kafkasim-session")))
    try:
        yield cluster
    finally:
        cluster.close()
