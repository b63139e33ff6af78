"""Injecting the fault schedule into a simulated world (kafkasim/harness/faults.py describes
the kinds). Each fault is traced as a "fault" event when it fires, with the nodes its role targets
resolved to; a fault with duration_ms schedules its own undo, traced as "fault_end", which lifts
exactly what that fault did (its cuts, its clog, its disk knobs, its pause; it restarts the
nodes it crashed), so faults that overlap do not heal each other.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafkasim.broker.request_faults import parse_request_fault
from kafkasim.cluster.sim_cluster import SimCluster, is_role_target
from kafkasim.harness.faults import REQUEST_KINDS, Fault
from kafkasim.harness.scenario import Scenario
from kafkasim.runtime.sim.kernel import Owner
from kafkasim.runtime.sim.world import SimWorld

Undo = Callable[[], None] | None
# Kinds whose targets must be processes (ZooKeeper is a server of the world, not a node).
PROCESS_KINDS = ("crash", "restart", "disk", "disk_clear", "zk_expire", "pause", *REQUEST_KINDS)


def _each(fn: Callable[[str], None], names: list[str]) -> Callable[[], None]:
    """An undo that applies `fn` to each of these nodes, in order."""
    def undo() -> None:
        for name in names:
            fn(name)
    return undo


def _names(world: SimWorld, cluster: SimCluster, targets: list[str], fresh: bool = True) -> list[str]:
    out = []
    for t in targets:
        name = cluster.resolve(t, fresh)
        if name is None:
            world.emit("harness", "fault_target_unresolved", {"target": t})
        elif name not in out:
            out.append(name)
    return out


def apply_fault(world: SimWorld, cluster: SimCluster, fault: Fault, harness: Owner | None = None,
                fired: list[dict[str, Any]] | None = None) -> Undo:
    """Inject one fault now; role targets resolve now. With duration_ms, schedule its undo.
    `fired` gets one record per fault: when it fired and the nodes it hit (run.json's
    `faults_fired`). Returns the undo (None: nothing to undo), for a caller that lifts the fault
    itself (the live world's control plane, with duration_ms 0)."""
    desc = fault.describe()
    fresh = fault.kind not in ("restart", "disk_clear")  # these act on whom the role last was
    targets = _names(world, cluster, fault.targets, fresh)
    # partition: its two sides; block / clog: [[from], [to]]
    given = fault.sides or ([[fault.src], [fault.dst]] if fault.src else [])
    sides = [_names(world, cluster, side) for side in given]
    if fault.targets:
        desc["resolved"] = ",".join(targets)
    if sides:
        sides[1] = [n for n in sides[1] if n not in sides[0]]  # two roles may name one node
        desc["resolved"] = (" | " if fault.sides else "->").join(",".join(s) for s in sides)
    world.emit("harness", "fault", desc)
    if fired is not None:
        hit = targets + [n for side in sides for n in side]
        fired.append({"t_ms": round(world.now_ms(), 3), "kind": fault.kind, "target": desc.get("target", ""),
                      "nodes": sorted(set(hit)), "source": fault.source or fault.key})
    undo = _INJECT[fault.kind](world, cluster, fault, targets, sides)
    if undo is not None and fault.duration_ms > 0:
        end = {"kind": fault.kind, "target": desc.get("resolved", desc.get("target", ""))}

        def lift(undo: Callable[[], None] = undo) -> None:
            world.emit("harness", "fault_end", end)
            undo()

        world.kernel.call_later(harness or Owner("harness"), fault.duration_ms, lift)
    return undo


def _crash(world: SimWorld, cluster: SimCluster, f: Fault, targets: list[str], _s: list[list[str]]) -> Undo:
    for name in targets:
        if f.disk_modes:  # restrict the power loss to these SimDisk crash modes
            world.nodes[name].disk.crash_modes = tuple(f.disk_modes)
        world.nodes[name].crash(f.mode)
    return _each(lambda n: _restart(world, cluster, n), targets)


def _restart(world: SimWorld, cluster: SimCluster, name: str) -> None:
    if name in cluster.servers:
        cluster.restart(name)
    elif not world.nodes[name].alive:
        world.nodes[name].restart()


def _restart_all(world: SimWorld, cluster: SimCluster, _f: Fault, targets: list[str], _s: list[list[str]]) -> Undo:
    for name in targets:
        _restart(world, cluster, name)
    return None


def _partition(world: SimWorld, _c: SimCluster, _f: Fault, _t: list[str], sides: list[list[str]]) -> Undo:
    world.net.partition(sides[0], sides[1])
    return lambda: world.net.unpartition(sides[0], sides[1])


def _isolate(world: SimWorld, _c: SimCluster, _f: Fault, targets: list[str], _s: list[list[str]]) -> Undo:
    cuts: dict[str, list[str]] = {}  # the cuts as made (nodes added later are not in them)
    for name in targets:
        cuts[name] = [n for n in sorted(world.nodes) + [world.zookeeper.host] if n != name]
        world.net.partition([name], cuts[name])
    return _each(lambda n: world.net.unpartition([n], cuts[n]), targets)


def _block(world: SimWorld, _c: SimCluster, _f: Fault, _t: list[str], ends: list[list[str]]) -> Undo:
    if not (ends[0] and ends[1]):
        return None  # a role did not resolve (traced), or both ends are one node
    src, dst = ends[0][0], ends[1][0]
    world.net.block(src, dst)
    return lambda: world.net.unblock(src, dst)


def _clog(world: SimWorld, _c: SimCluster, f: Fault, _t: list[str], ends: list[list[str]]) -> Undo:
    if not (ends[0] and ends[1]):
        return None
    src, dst = ends[0][0], ends[1][0]
    world.net.clog(src, dst, f.extra_ms)
    return lambda: world.net.unclog(src, dst)


def _heal(world: SimWorld, _c: SimCluster, _f: Fault, _t: list[str], _s: list[list[str]]) -> Undo:
    world.net.heal()
    return None


def _disk(world: SimWorld, _c: SimCluster, f: Fault, targets: list[str], _s: list[list[str]]) -> Undo:
    for name in targets:
        disk = world.nodes[name].disk
        k = f.disk
        if "eio_rate" in k:
            disk.faults.eio_rate = k["eio_rate"]
        if k.get("enospc"):
            disk.faults.capacity_bytes = disk.used_bytes() + int(k.get("free_bytes", 0))
        if "bitflip_rate" in k:
            disk.faults.read_bitflip_rate = k["bitflip_rate"]
        if "slow_fsync_ms" in k:
            ms = k["slow_fsync_ms"]
            disk.fsync_ms = (0.5 * ms, 1.5 * ms)
        if k.get("corrupt_bits"):
            disk.corrupt_random(world.rng(f"fault-corrupt/{name}"), k["corrupt_bits"])
    return _each(lambda n: world.nodes[n].disk.clear_faults(), targets)


def _disk_clear(world: SimWorld, _c: SimCluster, _f: Fault, targets: list[str], _s: list[list[str]]) -> Undo:
    for name in targets:
        world.nodes[name].disk.clear_faults()
    return None


def _zk_expire(world: SimWorld, _c: SimCluster, _f: Fault, targets: list[str], _s: list[list[str]]) -> Undo:
    for name in targets:
        world.emit("harness", "zk_expire", {"node": name, "sessions": world.zookeeper.expire_host(name)})
    return None


def _pause(world: SimWorld, _c: SimCluster, _f: Fault, targets: list[str], _s: list[list[str]]) -> Undo:
    for name in targets:
        world.nodes[name].pause()
    return _each(lambda n: world.nodes[n].resume(), targets)


def _request(world: SimWorld, cluster: SimCluster, f: Fault, targets: list[str], _s: list[list[str]]) -> Undo:
    """Arm the request-level fault on each target broker's RequestFaults (the id names the
    scenario entry and the time, so an overlapping copy is lifted on its own)."""
    fault_id = f"{f.key or f.source or f.kind}@{round(world.now_ms(), 3)}"
    armed = []
    for name in targets:
        server = cluster.servers.get(name)
        if server is None:
            world.emit("harness", "fault_target_unresolved", {"target": name, "why": "not a broker"})
            continue
        server.request_faults.add(parse_request_fault(fault_id, {"kind": f.kind, **f.request}))
        armed.append(server.request_faults)

    def undo() -> None:
        for faults in armed:
            faults.remove(fault_id)
    return undo


_INJECT: dict[str, Callable[[SimWorld, SimCluster, Fault, list[str], list[list[str]]], Undo]] = {
    "crash": _crash, "restart": _restart_all, "partition": _partition, "block": _block, "clog": _clog,
    "heal": _heal, "isolate": _isolate, "disk": _disk, "disk_clear": _disk_clear, "zk_expire": _zk_expire,
    "pause": _pause, "request_error": _request, "request_delay": _request, "close_connection": _request,
}


def validate_targets(world: SimWorld, scenario: Scenario) -> None:
    """Every node a fault names exists (roles resolve later); ZooKeeper is no process to crash."""
    zk = world.zookeeper.host
    for f in scenario.faults:
        for name in f.named_nodes():
            if name not in world.nodes and name != zk and not is_role_target(name):
                raise ValueError(f"{scenario.path}: fault targets unknown node {name!r} "
                                 f"(nodes: {sorted(world.nodes)})")
            if name == zk and f.kind in PROCESS_KINDS:
                raise ValueError(f"{scenario.path}: a {f.kind} fault cannot target {zk!r} (only isolate, "
                                 f"partition, block and clog can)")


def _firing(world: SimWorld, cluster: SimCluster, fault: Fault, harness: Owner,
            fired: list[dict[str, Any]]) -> Callable[[], None]:
    def fire() -> None:
        apply_fault(world, cluster, fault, harness, fired)
    return fire


def schedule_faults(world: SimWorld, scenario: Scenario, cluster: SimCluster,
                    harness: Owner | None = None) -> list[dict[str, Any]]:
    """Arm every fault of the (concrete) schedule on the harness's timers (`harness`: their owner;
    killing it cancels every fault and undo still pending); the list returned fills, as they
    fire, with what each fault hit."""
    validate_targets(world, scenario)
    fired: list[dict[str, Any]] = []
    harness = harness or Owner("harness")
    jitter = world.rng("fault-jitter")  # one draw per fault, in schedule order
    for fault in scenario.faults:
        at = fault.at_ms + (jitter.random() * fault.jitter_ms if fault.jitter_ms else 0.0)
        world.kernel.call_later(harness, at, _firing(world, cluster, fault, harness, fired))
    return fired


def fired_summary(fired: list[dict[str, Any]], scheduled: int) -> str:
    """One line: which faults fired and which nodes they hit; a fault that hit nothing is named
    (its role had no holder when it fired: no controller, no live leader)."""
    if not scheduled:
        return "faults: none scheduled"
    by_kind: dict[str, tuple[int, set[str]]] = {}
    missed = []
    for f in fired:
        n, nodes = by_kind.get(f["kind"], (0, set()))
        by_kind[f["kind"]] = (n + 1, nodes | set(f["nodes"]))
        if not f["nodes"] and f["kind"] != "heal":
            missed.append(f"{f['kind']} {f['target']} at {f['t_ms'] / 1000:.1f}s")
    parts = [f"{kind} x{n} ({', '.join(sorted(nodes)) or ('all links' if kind == 'heal' else 'no node')})"
             for kind, (n, nodes) in by_kind.items()]
    line = f"faults: {len(fired)}/{scheduled} fired" + (": " + "; ".join(parts) if parts else "")
    if missed:
        line += f"; HIT NO NODE: {', '.join(missed)}"
    return line
