"""`kafkasim serve`: one broker on real sockets, disks and ZooKeeper (or an embedded
coordination store), until SIGTERM or SIGINT.

Without `--zookeeper` the coordination store is embedded and kept under the log dir
(`<log-dir>/zookeeper/`, or `store_dir`): a restarted broker finds its topics, topic ids,
configs, partition states and producer-id blocks as a broker on a real ZooKeeper would, and
the previous process's ephemeral znodes (/brokers/ids/<id>, /controller) expired.

`--control-port P` (0: any free port) serves the fault control plane on 127.0.0.1
(kafkasim/runtime/real/control_server.py) with `RealBrokerFaults`: request-level faults
(request_error, request_delay, close_connection), disk faults through the real world's seam
(`disk`: eio_rate, enospc + free_bytes, slow_fsync_ms; `disk_clear`) and peer-connection faults
(`net_refuse`, `net_stall`: {"peers": ["host:port", ...]}, every peer when none are named).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from kafkasim.broker.config import BrokerConfig
from kafkasim.broker.request_faults import RequestFaults, RequestRule, parse_request_fault
from kafkasim.broker.server import KafkaServer
from kafkasim.harness.faults import parse_disk_knobs
from kafkasim.runtime.api import Coordination, Timer
from kafkasim.runtime.control_api import REQUEST_FAULT_KINDS, ActiveFault, FaultError
from kafkasim.runtime.real.control_server import ControlServer, FaultBook, asyncio_marshal
from kafkasim.runtime.real.world import JsonlTrace, RealNode, run, stop_requested
from kafkasim.runtime.real.zk import EmbeddedCoordination
from kafkasim.runtime.zkstore_log import ZkStoreCorruptError

STORE_DIR_NAME = "zookeeper"  # no '-': the log manager never takes it for a topic-partition


def serve(port: int, log_dir: str, zookeeper: str | None, broker_id: int, host: str,
          trace_path: str | None = None, configs: dict[str, str] | None = None,
          seeded_bugs: frozenset[str] = frozenset(), store_dir: str | None = None,
          control_port: int | None = None) -> int:
    """`configs` are server.properties keys (`--config KEY=VALUE`); the explicit arguments win.
    `seeded_bugs` (test-only) are the real world's, as KAFKASIM_SEEDED_BUGS gives them.
    `store_dir`: where the embedded coordination store lives (default `<log-dir>/zookeeper`).
    `control_port`: serve the fault control plane there (0: any free port); None: not at all."""

    async def main() -> int:
        # The node's disk root is the log dir itself (several, comma-separated: their common
        # parent), so segments land in <log-dir>/<topic>-<p>/.
        dirs = [os.path.abspath(d) for d in log_dir.split(",") if d]
        data_dir = dirs[0] if len(dirs) == 1 else os.path.commonpath(dirs)
        log_dirs = ",".join(os.path.relpath(d, data_dir) for d in dirs)
        coordination: str | Coordination | None = zookeeper
        if zookeeper is None:
            path = os.path.abspath(store_dir or os.path.join(dirs[0], STORE_DIR_NAME))
            try:
                coordination = EmbeddedCoordination.durable(path)
            except (ZkStoreCorruptError, OSError) as exc:
                print(f"kafkasim serve: cannot open the coordination store in {path}: {exc}", file=sys.stderr)
                return 1
        trace = JsonlTrace.to_file(trace_path)
        node = RealNode(f"broker-{broker_id}", data_dir, coordination, host=host, trace=trace,
                        seeded_bugs=seeded_bugs)
        if isinstance(coordination, EmbeddedCoordination) and coordination.journal is not None:
            j = coordination.journal
            node.trace("coordination_store_opened", directory=j.directory, open_ms=round(j.open_ms, 1),
                       replayed=j.replayed, znodes=len(coordination.store.nodes), zxid=coordination.store.zxid)
        # Client quotas are on, as in Kafka (`--config client.quotas=false` turns them off).
        server = KafkaServer(node, BrokerConfig.from_properties(
            {**(configs or {}), "broker.id": broker_id, "host": host, "port": port,
             "log.dirs": log_dirs}))
        control = None
        if control_port is not None:
            backend = RealBrokerFaults(node, server, f"broker-{broker_id}")
            control = ControlServer(backend, asyncio_marshal(node.loop), port=control_port)
            control.start()
            print(f"kafkasim broker {broker_id} control plane on {control.address}", flush=True)
        await server.startup()
        print(f"kafkasim broker {broker_id} listening on {host}:{server.port} (log dir {data_dir}, "
              f"{'zookeeper ' + zookeeper if zookeeper else 'embedded coordination store'})", flush=True)
        if server.socket_server is not None and len(server.socket_server.listeners) > 1:
            print("listeners: " + ", ".join(f"{name}://{h}:{p} ({proto})" for name, proto, h, p
                                            in server.socket_server.advertised_endpoints()), flush=True)
        await stop_requested()
        if control is not None:
            control.stop()
        await server.shutdown()
        node.kill()
        if isinstance(coordination, EmbeddedCoordination):
            coordination.close()
        trace.close()
        return 0

    return run(main())


REAL_BROKER_KINDS = (*REQUEST_FAULT_KINDS, "disk", "disk_clear", "net_refuse", "net_stall")
_REAL_DISK_KNOBS = ("eio_rate", "enospc", "free_bytes", "slow_fsync_ms")
_COMMON_KEYS = {"kind", "targets", "duration_ms"}
_KEYS = {"request_error": {"api_key", "error_code", "count", "topic", "partition"},
         "request_delay": {"api_key", "delay_ms", "count", "topic", "partition"},
         "close_connection": {"api_key", "after_requests", "count", "topic", "partition"},
         "disk": {"eio_rate", "enospc", "free_bytes", "slow_fsync_ms", "bitflip_rate", "corrupt_bits", "clear"},
         "disk_clear": set(), "net_refuse": {"peers"}, "net_stall": {"peers"}}


def _fail(key: str, expected: str, got: Any) -> Exception:
    return FaultError(400, f"{key}: expected {expected}, got {got!r}")


def parse_peers(value: Any) -> list[tuple[str, int]] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(p, str) and p.rpartition(":")[2].isdigit() for p in value):
        raise FaultError(400, f"peers must be a list of 'host:port', not {value!r}")
    return [(p.rpartition(":")[0] or "127.0.0.1", int(p.rpartition(":")[2])) for p in value]


class RealBrokerFaults:
    """The FaultBackend of one `kafkasim serve` process (a control_api.FaultBackend). Its calls
    run on the broker's event loop (asyncio_marshal), so they touch the broker's state safely."""

    def __init__(self, node: RealNode, server: KafkaServer, name: str) -> None:
        self.node, self.server, self.name = node, server, name
        self.request_faults: RequestFaults = server.request_faults
        self.book = FaultBook(node.now_ms, node.monotonic_ms)  # the real world: now_ms is the wall clock
        self._undo: dict[str, Callable[[], None]] = {}
        self._timers: dict[str, Timer] = {}
        self._rules: dict[str, RequestRule] = {}   # request faults' rules: their hit counts

    def world(self) -> str:
        return "real-broker"

    def kinds(self) -> list[str]:
        return list(REAL_BROKER_KINDS)

    def nodes(self) -> dict[str, dict[str, Any]]:
        return {self.name: {"role": "broker", "bootstrap": f"{self.server.config.host}:{self.server.port}",
                            "up": self.server.apis is not None}}

    def _resolve(self, targets: Any) -> list[str]:
        if targets is None:
            return [self.name]
        if not isinstance(targets, list) or not targets or not all(isinstance(t, str) for t in targets):
            raise FaultError(400, f"targets must be a non-empty list of node names or roles, not {targets!r}")
        for t in targets:
            if t == self.name:
                continue
            if t == "controller":
                if self.server.controller is None or not self.server.controller.is_active:
                    raise FaultError(404, f"the controller is not {self.name} (this world has only {self.name})")
            elif t.startswith("leader:") and t[7:].rpartition("-")[2].isdigit():
                topic, _, part = t[7:].rpartition("-")
                rm = self.server.replica_manager
                p = rm.get_partition(topic, int(part)) if rm is not None else None
                if p is None or not p.is_leader:
                    raise FaultError(404, f"{self.name} does not lead {topic}-{part} (this world has only {self.name})")
            else:
                raise FaultError(404, f"unknown node or role {t!r} (this world has only {self.name})")
        return [self.name]

    def apply(self, spec: dict[str, Any]) -> ActiveFault:
        kind = spec.get("kind")
        if kind not in REAL_BROKER_KINDS:
            raise FaultError(404 if isinstance(kind, str) else 400,
                             f"unknown fault kind {kind!r} in this world (one of {', '.join(REAL_BROKER_KINDS)})")
        unknown = sorted(set(spec) - _COMMON_KEYS - _KEYS[kind])
        if unknown:
            raise FaultError(400, f"{kind} takes no key(s) {unknown}")
        duration = spec.get("duration_ms")
        if duration is not None and (isinstance(duration, bool) or not isinstance(duration, (int, float))
                                     or duration <= 0):
            raise FaultError(400, f"duration_ms must be a number > 0, not {duration!r}")
        targets = self._resolve(spec.get("targets"))
        arm = self._prepare(kind, spec)          # validates everything; changes nothing
        fault = self.book.new(spec, targets, duration)
        self._undo[fault.fault_id] = arm(fault)
        if kind == "disk_clear" or spec.get("clear") is True:   # nothing to undo: it happened
            self._end(fault.fault_id, "done")
        elif duration:
            fid = fault.fault_id

            def expire() -> None:
                self._end(fid, "expired")
            self._timers[fid] = self.node.call_later(float(duration), expire)
        self.node.trace("control_fault", id=fault.fault_id, kind=kind, targets=targets)
        return fault

    def _prepare(self, kind: str, spec: dict[str, Any]) -> Callable[[ActiveFault], Callable[[], None]]:
        """Validate `spec` fully and return the function that arms it (and returns its undo)."""
        if kind in REQUEST_FAULT_KINDS:
            parse_request_fault("check", spec)

            def arm_request(f: ActiveFault) -> Callable[[], None]:
                rule = parse_request_fault(f.fault_id, spec)
                self._rules[f.fault_id] = rule
                self.request_faults.add(rule)
                return lambda: None if self.request_faults.remove(f.fault_id) else None
            return arm_request
        disk = self.node.fs.faults
        if kind == "disk_clear" or (kind == "disk" and spec.get("clear") is True):
            def arm_clear(f: ActiveFault) -> Callable[[], None]:
                disk.clear()
                return lambda: None
            return arm_clear
        if kind == "disk":
            knobs = parse_disk_knobs("fault", {k: v for k, v in spec.items() if k not in _COMMON_KEYS}, _fail)
            other = sorted(set(knobs) - set(_REAL_DISK_KNOBS))
            if other:
                raise FaultError(409, f"{other} need the simulated disk; a real disk takes {list(_REAL_DISK_KNOBS)}")

            def arm_disk(f: ActiveFault) -> Callable[[], None]:
                disk.eio_rate = float(knobs.get("eio_rate", disk.eio_rate))
                if knobs.get("enospc"):
                    disk.enospc, disk.free_bytes = True, int(knobs.get("free_bytes", 0))
                disk.slow_fsync_ms = float(knobs.get("slow_fsync_ms", disk.slow_fsync_ms))
                return disk.clear
            return arm_disk
        peers = parse_peers(spec.get("peers"))
        mode = "refuse" if kind == "net_refuse" else "stall"
        net = self.node.net

        def arm_net(f: ActiveFault) -> Callable[[], None]:
            f.extra["connections_hit"] = net.inject(f.fault_id, mode, peers)
            return lambda: None if net.heal(f.fault_id) else None
        return arm_net

    def _end(self, fault_id: str, how: str) -> ActiveFault | None:
        timer = self._timers.pop(fault_id, None)
        if timer is not None:
            timer.cancel()
        self._sync_fired()   # first: the hit counts as they are, before the undo disarms the rule
        undo = self._undo.pop(fault_id, None)
        if undo is not None:
            undo()
        fault = self.book.end(fault_id, how)
        if fault is not None:
            self.node.trace("control_fault_end", id=fault_id, how=how)
        return fault

    def _sync_fired(self) -> None:
        """Request faults count their hits in their rule; a rule used up is a fault that expired."""
        armed = {r.fault_id for r in self.request_faults.rules}
        for fid, rule in list(self._rules.items()):
            fault = self.book.active.get(fid)
            if fault is None:
                del self._rules[fid]
                continue
            fault.fired = rule.fired
            if fid not in armed:
                del self._rules[fid]
                self._undo.pop(fid, None)
                self.book.end(fid, "expired")

    def heal(self, fault_id: str | None) -> list[ActiveFault]:
        self._sync_fired()
        if fault_id is not None and fault_id not in self.book.active:
            raise FaultError(404, f"no active fault {fault_id!r}")
        ids = [fault_id] if fault_id is not None else list(self.book.active)
        return [f for f in (self._end(i, "healed") for i in ids) if f is not None]

    def active(self) -> list[ActiveFault]:
        self._sync_fired()
        return list(self.book.active.values())

    def history(self) -> list[dict[str, Any]]:
        self._sync_fired()
        return list(self.book.history)
