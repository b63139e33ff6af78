"""`kafkasim serve --sim`: the simulated cluster on real sockets (the live world), and LiveCluster,
the same thing for a test (the pytest plugin).

The cluster side is built as `kafkasim run` builds it (SimWorld, SimCluster, the scenario's broker
configs, seeded rng streams, traced), in a world paced to the wall clock (runtime/live). Each
broker listens on a real 127.0.0.1 port and advertises it; real clients are the workload. With a
scenario, its topics are created and its `[[faults]]` fire on the wall-clock timeline (its
`[workload]` is not run). The control plane (control_server.py over LiveFaultBackend) injects
any fault now.

  <out>/run.json     world "live", which parts were live, brokers and ports, faults fired by the
                     schedule and by the control plane (simulated and wall ms), pacing error
  <out>/trace.jsonl  the world's trace; every line has `t` (simulated ms) and `wall` (wall ms)
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import IO, Any

from kafkasim.broker.config import BrokerConfig
from kafkasim.client.cluster import ClientCluster
from kafkasim.cluster.sim_cluster import SimCluster, broker_node_name
from kafkasim.harness.host import code_version
from kafkasim.harness.inject import schedule_faults
from kafkasim.harness.live_faults import LiveFaultBackend
from kafkasim.harness.nemesis import with_concrete_faults
from kafkasim.harness.scenario import Scenario, TopicSpec, load_scenario
from kafkasim.protocol import errors as E
from kafkasim.runtime.api import NodeRuntime
from kafkasim.runtime.live.bridge import HOST
from kafkasim.runtime.live.world import live_world
from kafkasim.runtime.real.control_server import ControlServer
from kafkasim.runtime.sim.kernel import Owner

LIVE_PARTS = {
    "clock": "simulated, paced to the wall clock (never ahead of it)",
    "cluster": "simulated and seeded as `kafkasim run`: brokers, network, disks, ZooKeeper",
    "clients": "real processes over 127.0.0.1, bridged into the simulated network as client-<n> nodes",
    "faults": "the scenario's schedule on the wall-clock timeline, and the control plane's",
    "replayable": "no: the real clients' bytes and timing are not replayed; the cluster's decisions and "
                  "faults are in trace.jsonl with simulated and wall time",
}


@dataclass
class LiveOptions:
    brokers: int = 0               # 0: the scenario's, else 1
    seed: int = 1
    scenario_path: str | None = None
    port_base: int = 0             # 0: any free ports
    configs: dict[str, str] = field(default_factory=dict)
    out_dir: str = ""
    control_port: int | None = 0   # None: no control server; 0: any free port
    schedule_faults: bool = True   # False: the caller fires the scenario's faults (client_workload.py)


def live_broker_props(brokers: int) -> dict[str, Any]:
    """Kafka's defaults, except what a cluster smaller than 3 brokers could not satisfy."""
    return {"offsets.topic.replication.factor": min(3, brokers),
            "transaction.state.log.replication.factor": min(3, brokers),
            "transaction.state.log.min.isr": min(2, brokers)}


class LiveCluster:
    """A live world, built and ready to run: `start()` paces it on a thread of its own (a test),
    `run_forever()` on the caller's (the CLI); `stop()` ends it and writes run.json."""

    def __init__(self, opts: LiveOptions) -> None:
        self.opts = opts
        self.scenario: Scenario | None = None
        if opts.scenario_path:
            self.scenario = with_concrete_faults(load_scenario(opts.scenario_path), opts.seed)
        n = self.scenario.brokers if self.scenario is not None else (opts.brokers or 1)
        if self.scenario is not None and opts.brokers and opts.brokers != n:
            raise ValueError(f"--brokers {opts.brokers} but {opts.scenario_path} has brokers = {n}")
        name = self.scenario.name if self.scenario is not None else "live"
        self.out_dir = opts.out_dir or os.path.join("reports", "live", f"{name}-seed-{opts.seed}")
        os.makedirs(self.out_dir, exist_ok=True)
        self._trace_out: IO[str] = open(os.path.join(self.out_dir, "trace.jsonl"), "w")
        latency = self.scenario.latency_ms if self.scenario is not None else (0.1, 0.8)
        self.world, self.loop, self.bridge = live_world(opts.seed, self._trace_out, latency)
        props = {**live_broker_props(n), **(self.scenario.broker_config if self.scenario else {}), **opts.configs}
        BrokerConfig.from_properties(dict(props))  # names and values checked before anything starts
        self._props = props
        try:
            for i in range(n):
                self.bridge.bind(broker_node_name(i), opts.port_base + i if opts.port_base else 0)
        except OSError:
            self.close()
            raise
        self.cluster = SimCluster(self.world, self._config_for, self.scenario.racks if self.scenario else None)
        for i in range(n):
            self.cluster.add_broker(i)
        self.fired: list[dict[str, Any]] = []
        self._admins = 0
        self._topics_ready = self.scenario is None or not self.scenario.topics
        if self.scenario is not None:
            self._start_scenario(self.scenario)
        self.backend = LiveFaultBackend(self.world, self.cluster, self.bootstrap_of,
                                        self.bridge.describe_clients, self.loop.epoch_ms)
        self.control: ControlServer | None = None
        if opts.control_port is not None:
            self.control = ControlServer(self.backend, self.loop.call, port=opts.control_port)
        self._control_started = self._closed = False

    # ------------------------------------------------------------ building
    def _config_for(self, broker_id: int, node: str) -> BrokerConfig:
        cfg = BrokerConfig.from_properties(dict(self._props))
        cfg.broker_id, cfg.host, cfg.port, cfg.log_dir = broker_id, HOST, self.bridge.ports[node], "kafka-logs"
        return cfg

    def _start_scenario(self, scenario: Scenario) -> None:
        admin = self.world.add_node("admin")
        admin.runtime.spawn(self._create_topics(admin.runtime, scenario), name="create topics")
        if self.opts.schedule_faults:
            self.fired = schedule_faults(self.world, scenario, self.cluster, Owner("harness"))

    async def _create_topics(self, rt: NodeRuntime, scenario: Scenario) -> None:
        for t in scenario.topics:
            await self._create_topic(rt, t)
        self._topics_ready = True

    async def _create_topic(self, rt: NodeRuntime, t: TopicSpec) -> int:
        """CreateTopics until the cluster takes it, then wait for its leaders; the last error code."""
        cluster = ClientCluster(rt, self.bootstrap_servers, "admin")
        code = E.UNKNOWN_SERVER_ERROR
        try:
            for _ in range(300):
                try:
                    code = await cluster.create_topic(t.name, t.partitions, t.replication_factor, t.config)
                    if code in (E.NONE, E.TOPIC_ALREADY_EXISTS):
                        break
                    if code in (E.INVALID_REPLICATION_FACTOR, E.INVALID_PARTITIONS, E.INVALID_CONFIG,
                                E.INVALID_TOPIC_EXCEPTION, E.INVALID_REPLICA_ASSIGNMENT):
                        return code  # asking again will not help
                except Exception:  # brokers not up yet: connection refused or timed out
                    pass
                await rt.sleep(200)
            await cluster.wait_for_topic(t.name)
            return code
        finally:
            cluster.close()

    def create_topic(self, t: TopicSpec) -> list[int]:
        """Start creating a topic from an admin node of the world; the list gets its error code
        (Kafka's) when done. Call on the loop's thread (LiveLoop.call)."""
        self._admins += 1
        rt = self.world.add_node(f"admin-{self._admins}").runtime
        box: list[int] = []

        async def create() -> None:
            box.append(await self._create_topic(rt, t))
        rt.spawn(create(), name="create topic")
        return box

    def leader_of(self, topic: str, partition: int) -> str | None:
        """God's eye: the broker node leading topic-partition now (on the loop's thread)."""
        return self.cluster.leader_of(topic, partition)

    # ------------------------------------------------------------ reading
    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{HOST}:{p}" for _, p in sorted(self.bridge.ports.items()))

    def bootstrap_of(self, node: str) -> str | None:
        port = self.bridge.ports.get(node)
        return None if port is None else f"{HOST}:{port}"

    def ready(self) -> bool:
        """Every broker up and known to every broker, a controller, the scenario's topics made
        (god's eye; call on the loop's thread, or through `loop.call`)."""
        n = len(self.cluster.servers)
        servers = self.cluster.live_servers()
        return (self._topics_ready and len(servers) == n and self.cluster.controller() is not None
                and all(s.metadata_cache is not None and len(s.metadata_cache.alive_broker_ids()) == n
                        for _, s in servers))

    # ------------------------------------------------------------ running
    def start_control(self) -> bool:
        """Start the control server (once); False if this world has none."""
        if self.control is None:
            return False
        if not self._control_started:
            self.control.start()
            self._control_started = True
        return True

    @property
    def control_address(self) -> str | None:
        return self.control.address if self.control is not None and self._control_started else None

    def start(self) -> None:
        """Serve on a thread of its own; every later call goes through `self.loop.call`."""
        self.start_control()
        self.write_run_json(running=True)
        self.loop.start_thread()

    def run_forever(self) -> None:
        self.start_control()
        self.write_run_json(running=True)
        self.loop.run_forever()

    def stop(self) -> dict[str, Any]:
        """Stop serving, close every socket, write run.json (returned)."""
        if self.control is not None and self._control_started:
            self.control.stop()
            self._control_started = False
        self.loop.stop()
        run = self.write_run_json(running=False)
        self.close()
        return run

    def close(self) -> None:
        if getattr(self, "_closed", False):
            return
        self._closed = True
        self.bridge.close()
        self.loop.close()
        self._trace_out.close()

    def write_run_json(self, running: bool) -> dict[str, Any]:
        run = self.summary(running)
        path = os.path.join(self.out_dir, "run.json")
        with open(path + ".tmp", "w") as f:
            json.dump(run, f, indent=2, sort_keys=True)
        os.replace(path + ".tmp", path)
        return run

    def summary(self, running: bool) -> dict[str, Any]:
        w = self.world
        wall_s = self.loop.wall_ms() / 1000.0
        return {
            "schema_version": 1, "world": "live", "status": "running" if running else "stopped",
            "scenario": self.scenario.name if self.scenario else None, "scenario_path": self.opts.scenario_path,
            "seed": self.opts.seed, "code_version": code_version(), "live": LIVE_PARTS,
            "brokers": {n: {"bootstrap": self.bootstrap_of(n)} for n in sorted(self.bridge.ports)},
            "control_plane": self.control_address,
            "broker_config": {k: str(v) for k, v in sorted(self._props.items())},
            "wall_start_epoch_ms": round(self.loop.wall_start_ms, 3),
            "faults_fired": self.fired, "control_faults": self.backend.history(),
            "task_errors": [{"node": o, "task": t, "error": e} for o, t, e in w.failures],
            "invariant_violations": [{"what": v.what, "node": v.node, "t_ms": v.t_ms} for v in w.violations],
            "trace_hash": w.trace.hexdigest(), "trace": "trace.jsonl",
            "stats": {"sim_time_ms": round(w.now_ms(), 3), "wall_time_s": round(wall_s, 3),
                      "events": w.trace.count, "kernel_entries": w.kernel.events,
                      "client_connections": len([n for n in w.nodes if n.startswith("client-")]),
                      "pacing_lag_ms": self.loop.pacing.summary()},
        }


def serve_sim(opts: LiveOptions, say: Any = print) -> int:
    """The CLI's driver: build, print where everything is, serve until SIGINT/SIGTERM, report."""
    live = LiveCluster(opts)
    live.loop.stop_on_signals()
    what = f"scenario {live.scenario.name}" if live.scenario else f"{len(live.cluster.servers)} broker(s)"
    say(f"kafkasim live world ({what}, seed {opts.seed}): bootstrap servers {live.bootstrap_servers}", flush=True)
    if live.start_control():
        say(f"fault control plane on http://{live.control_address}/v1/", flush=True)
    say(f"writing {os.path.join(live.out_dir, 'run.json')} and trace.jsonl; Ctrl-C to stop", flush=True)
    try:
        live.run_forever()
    except KeyboardInterrupt:
        pass
    run = live.stop()
    lag = run["stats"]["pacing_lag_ms"]
    say(f"stopped after {run['stats']['wall_time_s']:.1f} s wall, {run['stats']['sim_time_ms'] / 1000:.1f} s "
        f"simulated; {run['stats']['client_connections']} client connections; pacing lag (wall - simulated, "
        f"per instant) p50 {lag['p50_ms']} ms, p99 {lag['p99_ms']} ms, max {lag['max_ms']} ms over "
        f"{lag['instants']} instants", flush=True)
    if run["task_errors"] or run["invariant_violations"]:
        say(f"task errors: {len(run['task_errors'])}, invariant violations: {len(run['invariant_violations'])} "
            f"(run.json)", flush=True)
    say(f"trace hash {run['trace_hash']}", flush=True)
    return 0
