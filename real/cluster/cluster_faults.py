"""The fault control plane of a real cluster (`kafkasim cluster up`): a FaultBackend over the
processes recorded in DIR, served by `cluster.py control --dir DIR` (which `up` starts), its
address written to DIR/control.

Kinds, on node names (broker-<id>, zookeeper) or roles resolved over the wire when applied
("controller", "leader:<topic>-<partition>", "coordinator:group:<id>", "coordinator:txn:<id>"):

    crash      SIGKILL the targets (mode "kill" only: a real disk keeps what the page cache has);
               with duration_ms, restart them after it. ZooKeeper can be a target.
    restart    start the targets again (the same command line, ports and log dirs)
    pause      SIGSTOP; healed (or after duration_ms) by SIGCONT
    isolate    cut each target broker from every other broker: every broker refuses its
               connections to the other side (runtime/real/net.py's net_refuse; ZooKeeper stays up)
    partition  the same between two `sides` of brokers
    request_error | request_delay | close_connection | disk | disk_clear | net_refuse | net_stall
               forwarded to each target broker's own control plane (`serve --control-port`)

Validation happens before anything changes; forwarding to several brokers rolls back the ones
done if a later one refuses, so a refused fault leaves nothing applied.

A launcher for the real-world kit, not part of the library: it may use signals, sockets, time.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafkasim.runtime.control_api import REQUEST_FAULT_KINDS, ActiveFault, FaultError
from kafkasim.runtime.real.control_client import ControlClient, ControlError
from kafkasim.runtime.real.control_server import FaultBook

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
FORWARDED = (*REQUEST_FAULT_KINDS, "disk", "disk_clear", "net_refuse", "net_stall")
PROCESS = ("crash", "restart", "pause")
NETWORK = ("isolate", "partition")
KINDS = (*PROCESS, *NETWORK, *FORWARDED)
ONE_SHOT = ("restart", "disk_clear")
START_TIMEOUT_S = 60.0


def proc_state(pid: int) -> str:
    """'R'unning/'S'leeping/..., 'T' stopped, 'Z' zombie, '' gone (any process, not only children)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def _wait_gone(n: Node, timeout_s: float = 30.0) -> None:
    """Return once a SIGKILLed node is gone, so a crash is applied when its call returns. SIGKILL
    is asynchronous: a JVM with a large heap takes a while to unmap it, visibly 'R' meanwhile
    (seen in CI right after the call). The processes `up` started are not this process's
    children, so only /proc says when they are gone (a zombie is: its parent reaps it)."""
    if n.proc is not None:
        n.proc.wait(timeout=timeout_s)
        return
    deadline = time.monotonic() + timeout_s
    while proc_state(n.pid) not in ("", "Z", "X"):
        if time.monotonic() > deadline:
            raise FaultError(409, f"{n.name} (pid {n.pid}) still running {timeout_s} s after SIGKILL")
        time.sleep(0.01)


def _wait_stopped(n: Node, stopped: bool, timeout_s: float = 30.0) -> None:
    """Return once a signalled node shows the state asked for ('T' or not): SIGSTOP and SIGCONT
    are asynchronous too, and a pause is applied when its call returns."""
    deadline = time.monotonic() + timeout_s
    while n.alive and (proc_state(n.pid) == "T") != stopped:
        if time.monotonic() > deadline:
            raise FaultError(409, f"{n.name} (pid {n.pid}) not {'stopped' if stopped else 'resumed'} after {timeout_s} s")
        time.sleep(0.01)


class Node:
    def __init__(self, name: str, pid: int, port: int, control_port: int = 0) -> None:
        self.name, self.pid, self.port, self.control_port = name, pid, port, control_port
        self.proc: subprocess.Popen[bytes] | None = None   # when this process restarted it

    @property
    def alive(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            return False
        return proc_state(self.pid) not in ("", "Z", "X")

    @property
    def paused(self) -> bool:
        return proc_state(self.pid) == "T"

    def control(self) -> ControlClient:
        return ControlClient(f"127.0.0.1:{self.control_port}", timeout_s=30)


class ClusterFaults:
    """A control_api.FaultBackend over DIR's processes. Thread-safe by one lock (the HTTP
    server's threads and the duration timers share it)."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.lock = threading.RLock()
        self.nodes_: dict[str, Node] = {}
        for line in (directory / "pids").read_text().splitlines():
            e = line.split()
            if e and e[0] == "zookeeper":
                self.nodes_["zookeeper"] = Node("zookeeper", int(e[1]), int(e[2]))
            elif e and e[0] == "broker":
                self.nodes_[f"broker-{e[1]}"] = Node(f"broker-{e[1]}", int(e[2]), int(e[3]),
                                                     int(e[4]) if len(e) > 4 else 0)
        self.book = FaultBook(lambda: time.time() * 1000, lambda: time.monotonic() * 1000)
        self._undo: dict[str, Callable[[], None]] = {}
        self._timers: dict[str, threading.Timer] = {}

    # ------------------------------------------------------------------ FaultBackend
    def world(self) -> str:
        return "real-cluster"

    def kinds(self) -> list[str]:
        return list(KINDS)

    def nodes(self) -> dict[str, dict[str, Any]]:
        with self.lock:
            return {n.name: {"role": "zookeeper" if n.name == "zookeeper" else "broker",
                             "bootstrap": f"127.0.0.1:{n.port}", "up": n.alive and not n.paused,
                             "pid": n.pid, "paused": n.paused} for n in self.nodes_.values()}

    def apply(self, spec: dict[str, Any]) -> ActiveFault:
        with self.lock:
            kind = spec.get("kind")
            if kind not in KINDS:
                raise FaultError(404, f"unknown fault kind {kind!r} in a real cluster (one of {', '.join(KINDS)})")
            duration = spec.get("duration_ms")
            if duration is not None and (isinstance(duration, bool) or not isinstance(duration, (int, float))
                                         or duration <= 0):
                raise FaultError(400, f"duration_ms must be a number > 0, not {duration!r}")
            if kind == "partition":
                sides = spec.get("sides")
                if not isinstance(sides, list) or len(sides) != 2:
                    raise FaultError(400, "partition needs sides: two lists of brokers")
                resolved = [self._resolve(s, brokers_only=True) for s in sides]
                targets = resolved[0] + resolved[1]
            else:
                resolved = []
                targets = self._resolve(spec.get("targets"), brokers_only=kind not in ("crash", "restart", "pause"))
            arm = self._prepare(str(kind), spec, targets, resolved)
            fault = self.book.new(spec, targets, duration)
            try:
                self._undo[fault.fault_id] = arm(fault)
            except FaultError:
                self.book.discard(fault.fault_id)
                raise
            if kind in ONE_SHOT:   # nothing to undo: it happened
                self._end(fault.fault_id, "done")
            elif duration:
                timer = threading.Timer(float(duration) / 1000, self._expire, (fault.fault_id,))
                timer.daemon = True
                self._timers[fault.fault_id] = timer
                timer.start()
            return fault

    def heal(self, fault_id: str | None) -> list[ActiveFault]:
        with self.lock:
            if fault_id is not None and fault_id not in self.book.active:
                raise FaultError(404, f"no active fault {fault_id!r}")
            ids = [fault_id] if fault_id is not None else list(self.book.active)
            return [f for f in (self._end(i, "healed") for i in ids) if f is not None]

    def active(self) -> list[ActiveFault]:
        with self.lock:
            return list(self.book.active.values())

    def history(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.book.history)

    # ------------------------------------------------------------------ targets
    def _resolve(self, targets: Any, brokers_only: bool) -> list[str]:
        if not isinstance(targets, list) or not targets or not all(isinstance(t, str) and t for t in targets):
            raise FaultError(400, f"targets must be a non-empty list of node names or roles, not {targets!r}")
        out: list[str] = []
        for t in targets:
            name = t if t in self.nodes_ else self._role(t)
            if brokers_only and name == "zookeeper":
                raise FaultError(409, "this fault acts on brokers only; zookeeper can be crashed, restarted or paused")
            if name not in out:
                out.append(name)
        return out

    def _role(self, role: str) -> str:
        if role == "controller":
            node_id = self._ask(lambda port: metadata(port, [])[1])
        elif role.startswith("leader:") and role[7:].rpartition("-")[2].isdigit():
            topic, _, part = role[7:].rpartition("-")
            node_id = self._ask(lambda port: metadata(port, [topic])[2].get((topic, int(part)), -1))
        elif role.startswith(("coordinator:group:", "coordinator:txn:")):
            _, ktype, key = role.split(":", 2)
            node_id = self._ask(lambda port: find_coordinator(port, key, 0 if ktype == "group" else 1))
        else:
            known = ", ".join(sorted(self.nodes_))
            raise FaultError(404, f"unknown node or role {role!r} (nodes: {known}; roles: controller, "
                                  f"leader:<topic>-<partition>, coordinator:group:<id>, coordinator:txn:<id>)")
        if node_id < 0 or f"broker-{node_id}" not in self.nodes_:
            raise FaultError(404, f"role {role!r} has no holder now")
        return f"broker-{node_id}"

    def _ask(self, question: Callable[[int], int]) -> int:
        for n in self.nodes_.values():
            if n.name != "zookeeper" and n.alive and not n.paused:
                try:
                    return question(n.port)
                except OSError:
                    continue
        raise FaultError(409, "no live broker answers to resolve the role")

    # ------------------------------------------------------------------ kinds
    def _prepare(self, kind: str, spec: dict[str, Any], targets: list[str],
                 sides: list[list[str]]) -> Callable[[ActiveFault], Callable[[], None]]:
        nodes = [self.nodes_[t] for t in targets]
        if kind == "crash":
            if spec.get("mode", "kill") != "kill":
                raise FaultError(409, "a real cluster crashes by SIGKILL (mode 'kill'); a power loss needs the "
                                      "simulated disk (serve --sim)")
            return lambda f: self._crash(nodes)
        if kind == "restart":
            def arm_restart(f: ActiveFault) -> Callable[[], None]:
                self._restart(nodes)
                return lambda: None
            return arm_restart
        if kind == "pause":
            return lambda f: self._signal(nodes, signal.SIGSTOP, signal.SIGCONT)
        if kind in NETWORK:
            pairs = self._cut_pairs(kind, targets, sides)
            return lambda f: self._forward_each(f, pairs)
        body = {k: v for k, v in spec.items() if k not in ("targets", "duration_ms")}
        self._check_reachable(nodes)
        return lambda f: self._forward_each(f, [(n, body) for n in nodes])

    def _cut_pairs(self, kind: str, targets: list[str], sides: list[list[str]]) -> list[tuple[Node, dict[str, Any]]]:
        """Every broker's net_refuse spec for the cut: each side refuses the other side's ports."""
        brokers = [n for n in self.nodes_ if n != "zookeeper"]
        if kind == "partition":
            cuts = [(sides[0], sides[1])]
        else:
            cuts = [([t], [b for b in brokers if b != t]) for t in targets]
        pairs: dict[str, set[str]] = {}
        for left, right in cuts:
            for a in left:
                for b in right:
                    if a != b:
                        pairs.setdefault(a, set()).add(b)
                        pairs.setdefault(b, set()).add(a)
        out = []
        for name, peers in sorted(pairs.items()):
            out.append((self.nodes_[name], {"kind": "net_refuse",
                                            "peers": [f"127.0.0.1:{self.nodes_[p].port}" for p in sorted(peers)]}))
        self._check_reachable([n for n, _ in out])
        return out

    def _check_reachable(self, nodes: list[Node]) -> None:
        for n in nodes:
            if not n.control_port:
                raise FaultError(409, f"{n.name} has no control plane (started without --control-port)")
            if not n.alive or n.paused:
                raise FaultError(409, f"{n.name} is {'paused' if n.paused else 'down'}: it cannot take this fault now")

    def _forward_each(self, fault: ActiveFault, pairs: list[tuple[Node, dict[str, Any]]]) -> Callable[[], None]:
        done: list[tuple[Node, str]] = []
        try:
            for node, body in pairs:
                done.append((node, node.control().add(body)["id"]))
        except ControlError as exc:
            for node, remote in done:   # nothing half-applied
                _quiet_heal(node, remote)
            raise FaultError(exc.status if 400 <= exc.status < 500 else 409,
                             f"{node.name}: {exc.message}") from None
        fault.extra["forwarded"] = {n.name: rid for n, rid in done}

        def undo() -> None:
            for node, remote in done:
                _quiet_heal(node, remote)
        return undo

    def _crash(self, nodes: list[Node]) -> Callable[[], None]:
        for n in nodes:
            if n.alive:
                os.kill(n.pid, signal.SIGKILL)
                _wait_gone(n)
        return lambda: self._restart(nodes)

    def _signal(self, nodes: list[Node], sig: int, undo_sig: int) -> Callable[[], None]:
        for n in nodes:
            if n.alive:
                os.kill(n.pid, sig)
                _wait_stopped(n, sig == signal.SIGSTOP)

        def undo() -> None:
            for n in nodes:
                if n.alive:
                    os.kill(n.pid, undo_sig)
                    _wait_stopped(n, undo_sig == signal.SIGSTOP)
        return undo

    def _restart(self, nodes: list[Node]) -> None:
        for n in nodes:
            if n.alive:
                continue
            if n.name == "zookeeper":
                handle = load_zk().start_zookeeper(self.dir / "zookeeper", port=n.port)
                n.pid, n.proc = handle.pid, getattr(handle, "_proc", None)
            else:
                self._start_broker(n)
        self._record_pids()

    def _start_broker(self, n: Node) -> None:
        bdir = self.dir / n.name
        cmd = json.loads((bdir / "cmd.json").read_text())
        log = open(bdir / "broker.log", "ab")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
        n.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=str(REPO), env=env,
                                  start_new_session=True)
        log.close()
        n.pid = n.proc.pid
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and n.alive:
            try:
                socket.create_connection(("127.0.0.1", n.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.1)

    def _record_pids(self) -> None:
        lines = []
        for n in self.nodes_.values():
            if n.name == "zookeeper":
                lines.append(f"zookeeper {n.pid} {n.port}")
            else:
                lines.append(f"broker {n.name.split('-')[1]} {n.pid} {n.port} {n.control_port}")
        tmp = self.dir / "pids.tmp"
        tmp.write_text("\n".join(lines) + "\n")
        os.replace(tmp, self.dir / "pids")

    def _expire(self, fault_id: str) -> None:
        with self.lock:
            self._end(fault_id, "expired")

    def _end(self, fault_id: str, how: str) -> ActiveFault | None:
        timer = self._timers.pop(fault_id, None)
        if timer is not None:
            timer.cancel()
        undo = self._undo.pop(fault_id, None)
        if undo is not None:
            undo()
        return self.book.end(fault_id, how)


def _quiet_heal(node: Node, remote_id: str) -> None:
    try:
        node.control().heal(remote_id)
    except ControlError:
        pass  # that broker died or already expired the fault: nothing of it is left


def load_zk() -> Any:
    name = "kafkasim_real_zookeeper"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "real" / "zookeeper" / "zk.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


# ---------------------------------------------------------------------- the wire (roles)
def _call(port: int, key: int, version: int, body: Any) -> Any:
    from kafkasim.protocol import api as A
    from kafkasim.protocol.framing import encode_request
    from kafkasim.protocol.messages.headers import RequestHeader

    header = RequestHeader(request_api_key=key, request_api_version=version, correlation_id=1,
                           client_id="kafkasim-cluster-control")
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.settimeout(5)
        sock.sendall(encode_request(header, body))
        size = int.from_bytes(_read(sock, 4), "big")
        frame = _read(sock, size)
    skip = 4 if A.response_header_version(key, version) == 0 else 5
    return A.api_info(key).response.decode(memoryview(frame)[skip:], version)


def _read(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        out += chunk
    return out


def metadata(port: int, topics: list[str]) -> tuple[int, int, dict[tuple[str, int], int]]:
    """(brokers, controller id, leader per partition of `topics`) from Metadata v1."""
    from kafkasim.protocol import api as A
    from kafkasim.protocol.messages.metadata import MetadataRequest

    req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics])
    r = _call(port, A.METADATA, 1, req)
    leaders = {(t.name, p.partition_index): p.leader_id for t in r.topics for p in t.partitions}
    return len(r.brokers), int(r.controller_id), leaders


def find_coordinator(port: int, key: str, key_type: int) -> int:
    from kafkasim.protocol import api as A
    from kafkasim.protocol.messages.find_coordinator import FindCoordinatorRequest

    r = _call(port, A.FIND_COORDINATOR, 1, FindCoordinatorRequest(key=key, key_type=key_type))
    return int(r.node_id) if r.error_code == 0 else -1


def serve_control(directory: str | Path) -> int:
    """`cluster.py control --dir DIR`: serve DIR's control plane until SIGTERM; its address goes
    to DIR/control (written atomically once bound)."""
    from kafkasim.runtime.real.control_server import ControlServer, direct_marshal

    d = Path(directory).resolve()
    server = ControlServer(ClusterFaults(d), direct_marshal())
    server.start()
    tmp = d / "control.tmp"
    tmp.write_text(server.address + "\n")
    os.replace(tmp, d / "control")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    while not stop.wait(1.0):
        pass
    server.stop()
    return 0
