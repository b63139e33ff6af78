"""The live world's FaultBackend (kafkasim/runtime/control_api.py): control-plane faults through the
simulation's one fault model.

A spec is a scenario's `[[faults]]` table without `at_ms`: it is parsed by faults.parse_fault (so
every kind and knob a scenario has, the control plane has, with the same checks), its roles are
resolved now, and it is injected by inject.apply_fault exactly as a scheduled fault is. The
backend keeps each fault's undo itself: `duration_ms` becomes a simulated timer that lifts it,
and DELETE lifts it earlier (the timer then does nothing), so a fault is undone exactly once.

Roles: "controller", "leader:<topic>-<p>", "follower:<topic>-<p>", "coordinator:group:<id>"
(the leader of the group's __consumer_offsets partition), "coordinator:txn:<id>" (the leader of
its __transaction_state partition). Everything is checked before anything is changed: an unknown
kind, node or role, or a role with no holder right now, is a FaultError and nothing is applied.

Runs on the live loop's thread: the control server marshals every call with LiveLoop.call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from kafkasim.cluster.sim_cluster import SimCluster, is_role_target
from kafkasim.harness.faults import FAULT_KINDS, Fault, parse_fault
from kafkasim.harness.inject import PROCESS_KINDS, apply_fault
from kafkasim.runtime.api import Timer
from kafkasim.runtime.control_api import REQUEST_FAULT_KINDS, ActiveFault, FaultError
from kafkasim.runtime.live.bridge import CLIENTS
from kafkasim.runtime.sim.kernel import Owner
from kafkasim.runtime.sim.world import SimWorld

OFFSETS_TOPIC = "__consumer_offsets"
SCHEDULE_ONLY_KEYS = ("at_ms", "jitter_ms")  # a control-plane fault acts now
ROLE_HELP = ("controller, leader:<topic>-<partition>, follower:<topic>-<partition>, "
             "coordinator:group:<group id>, coordinator:txn:<transactional id>")


def _fail(key: str, expected: str, got: Any) -> Exception:
    return FaultError(400, f"{key}: expected {expected}, got {got!r}")


class LiveFaultBackend:
    def __init__(self, world: SimWorld, cluster: SimCluster, bootstrap_of: Callable[[str], str | None],
                 clients: Callable[[], dict[str, dict[str, Any]]], epoch_ms: Callable[[], float]) -> None:
        """`bootstrap_of(node)`: the real host:port of a broker node; `clients()`: the client
        nodes with an open real connection -> what to show of each (its real peer address and
        the broker it reached, so a test can tell its own connections apart); `epoch_ms()`: the
        wall clock."""
        self._world, self._cluster = world, cluster
        self._bootstrap_of, self._clients, self._epoch_ms = bootstrap_of, clients, epoch_ms
        self._owner = Owner("control")  # owns the duration timers
        self._active: dict[str, tuple[ActiveFault, Callable[[], None] | None, Timer | None]] = {}
        self._history: list[dict[str, Any]] = []
        self._next_id = 0

    # ------------------------------------------------------------ reading
    def world(self) -> str:
        return "live"

    def kinds(self) -> list[str]:
        return list(FAULT_KINDS)

    def nodes(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for name in sorted(self._cluster.servers):
            node = self._world.nodes[name]
            out[name] = {"role": "broker", "bootstrap": self._bootstrap_of(name),
                         "up": node.alive and not node.paused}
        out[self._world.zookeeper.host] = {"role": "zookeeper", "bootstrap": None, "up": True}
        if CLIENTS in self._world.nodes:  # the live world: the node standing for every real client
            out[CLIENTS] = {"role": "client", "bootstrap": None, "up": True, "members": len(self._clients())}
        for name, info in self._clients().items():
            out[name] = {"role": "client", "bootstrap": None, "up": self._world.nodes[name].alive, **info}
        return out

    def active(self) -> list[ActiveFault]:
        return [af for af, _, _ in self._active.values()]

    def history(self) -> list[dict[str, Any]]:
        return list(self._history)

    # ------------------------------------------------------------ changing
    def apply(self, spec: dict[str, Any]) -> ActiveFault:
        fault = self._parse(spec)
        concrete, hit = self._resolve(fault)  # every check first: nothing applied if one fails
        self._next_id += 1
        fault_id = f"f{self._next_id}"
        now = self._world.now_ms()
        until = now + fault.duration_ms if fault.duration_ms else None
        af = ActiveFault(fault_id, dict(spec), hit, self._epoch_ms(), now, until)
        self._world.emit("control", "control_fault", {"id": fault_id, "spec": dict(spec), "nodes": hit})
        undo = apply_fault(self._world, self._cluster, concrete, self._owner)
        self._record("applied", af)
        if undo is None:
            return af  # one-shot (restart, heal, zk_expire, disk_clear) or hit nothing to undo
        timer = None
        if fault.duration_ms:
            def expire() -> None:
                self._lift(fault_id, "expired")
            timer = self._world.kernel.call_later(self._owner, fault.duration_ms, expire)
        self._active[fault_id] = (af, undo, timer)
        return af

    def heal(self, fault_id: str | None) -> list[ActiveFault]:
        if fault_id is not None and fault_id not in self._active:
            raise FaultError(404, f"no active fault {fault_id!r} (active: {sorted(self._active) or 'none'})")
        ids = [fault_id] if fault_id is not None else list(self._active)
        return [af for af in (self._lift(i, "healed") for i in ids) if af is not None]

    def _lift(self, fault_id: str, how: str) -> ActiveFault | None:
        entry = self._active.pop(fault_id, None)
        if entry is None:
            return None  # healed before its duration ran out
        af, undo, timer = entry
        if timer is not None:
            timer.cancel()
        self._world.emit("control", "control_fault_end", {"id": fault_id, "how": how})
        if undo is not None:
            undo()
        self._record(how, af)
        return af

    def _record(self, event: str, af: ActiveFault) -> None:
        self._history.append({"event": event, "id": af.fault_id, "kind": af.spec.get("kind"), "spec": af.spec,
                              "targets": af.resolved_targets, "wall_ms": round(self._epoch_ms(), 3),
                              "world_ms": round(self._world.now_ms(), 3)})

    # ------------------------------------------------------------ checking
    def _parse(self, spec: dict[str, Any]) -> Fault:
        if not isinstance(spec, dict):
            raise FaultError(400, "a fault spec is a JSON object")
        kind = spec.get("kind")
        if kind in REQUEST_FAULT_KINDS and not spec.get("targets"):
            # A request-level fault without targets acts on every broker, as librdkafka's mock
            # cluster and kfake apply theirs cluster-wide.
            spec = {**spec, "targets": sorted(self._cluster.servers)}
        if kind not in FAULT_KINDS:
            raise FaultError(404, f"unknown fault kind {kind!r} (the live world's kinds: {', '.join(FAULT_KINDS)})")
        for k in SCHEDULE_ONLY_KEYS:
            if k in spec:
                raise FaultError(400, f"{k!r} is for a scenario's schedule; a control-plane fault acts now")
        return parse_fault("fault", {**spec, "at_ms": 0}, _fail)

    def _resolve(self, f: Fault) -> tuple[Fault, list[str]]:
        """The fault with every role replaced by the node it names now, and those nodes."""
        fresh = f.kind not in ("restart", "disk_clear")
        targets = [self._node(t, f.kind, fresh) for t in f.targets]
        sides = [[self._node(n, f.kind, True) for n in side] for side in f.sides]
        src = self._node(f.src, f.kind, True) if f.src else ""
        dst = self._node(f.dst, f.kind, True) if f.dst else ""
        concrete = dataclasses.replace(f, targets=targets, sides=sides, src=src, dst=dst, duration_ms=0.0)
        hit = list(dict.fromkeys(targets + [n for s in sides for n in s] + [n for n in (src, dst) if n]))
        return concrete, hit

    def _node(self, target: str, kind: str, fresh: bool) -> str:
        role = self._sim_role(target)
        if role is None:
            return self._known_node(target, kind)
        name = self._cluster.resolve(role, fresh)
        if name is None:
            raise FaultError(409, f"role {target!r} has no holder now (no live broker holds it: an unknown "
                                  f"topic or group, or the cluster is failing over)")
        return name

    def _sim_role(self, target: str) -> str | None:
        """The SimCluster role for a control-plane role (None: not a role)."""
        if target.startswith("coordinator:"):
            what, _, ident = target[len("coordinator:"):].partition(":")
            if what == "txn" and ident:
                return f"txn_coordinator:{ident}"
            if what == "group" and ident:
                return f"leader:{OFFSETS_TOPIC}-{self._group_partition(ident)}"
            raise FaultError(404, f"unknown role {target!r} (roles: {ROLE_HELP})")
        if is_role_target(target):
            if target != "controller" and target.startswith(("leader:", "follower:")):
                _, _, part = target.partition(":")[2].rpartition("-")
                if not part.isdigit():
                    raise FaultError(404, f"unknown role {target!r} (roles: {ROLE_HELP})")
            return target
        return None

    def _group_partition(self, group_id: str) -> int:
        for _, server in self._cluster.live_servers():
            if server.group_coordinator is not None:
                return server.group_coordinator.partition_for(group_id)
        raise FaultError(409, "no live broker has a group coordinator yet")

    def _known_node(self, name: str, kind: str) -> str:
        zk = self._world.zookeeper.host
        if name == zk:
            if kind in PROCESS_KINDS:
                raise FaultError(400, f"a {kind} fault cannot target {zk!r} (only isolate, partition, block and "
                                      f"clog can)")
            return name
        if name == CLIENTS and kind in PROCESS_KINDS:
            raise FaultError(400, f"{CLIENTS!r} stands for every real client's network link: a {kind} fault "
                                  f"needs one client-<n> node (only isolate, partition, block and clog take it)")
        if name not in self._world.nodes or name not in self.nodes():
            raise FaultError(404, f"unknown node {name!r} (nodes: {', '.join(self.nodes())}; roles: {ROLE_HELP})")
        return name
