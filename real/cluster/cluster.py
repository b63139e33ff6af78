#!/usr/bin/env python3
"""Start and stop a real kafkasim cluster on 127.0.0.1: Debian's ZooKeeper (real/zookeeper/zk.py)
and N `kafkasim serve` processes, everything under one directory.

    kafkasim cluster up --brokers 3 --dir DIR [--config KEY=VALUE ...]   # prints the bootstrap servers
    kafkasim cluster down --dir DIR                                       # stops them (recorded pids)
    python real/cluster/cluster.py up|down ...                            # the same, without the CLI

Layout of DIR (like /work/shared/tools/realkafka's):

    DIR/zookeeper/            ZooKeeper's config, data and zookeeper.log
    DIR/broker-<id>/data/     the broker's log dir
    DIR/broker-<id>/broker.log  its stdout/stderr;  DIR/broker-<id>/trace.jsonl  its trace
    DIR/pids                  "zookeeper <pid> <port>" then "broker <id> <pid> <port> <control port>" per line
    DIR/env                   BOOTSTRAP_SERVERS=... and ZOOKEEPER=... for scripts
    DIR/control               HOST:PORT of the cluster's fault control plane (cluster_faults.py), served
                              by `cluster.py control --dir DIR`, which `up` starts (pid in DIR/control.pid)
    DIR/broker-<id>/cmd.json  the broker's command line, for a restart by the control plane

Faults: `kafkasim cluster kill|restart|pause|resume|partition|heal --broker N --dir DIR`, or
`kafkasim fault add JSON --dir DIR` (cluster_faults.py lists the kinds). Each broker also serves
its own control plane (`serve --control-port`) for request-level, disk and network faults.

Broker configs (as realkafka writes server.properties): broker.id = 0..N-1,
offsets.topic.replication.factor and default.replication.factor = min(N, 3),
group.initial.rebalance.delay.ms = 0, num.partitions = 1; `--config` adds or overrides.
`down` stops the brokers first (SIGTERM: a controlled shutdown, then SIGKILL after 60 s), then
ZooKeeper. From Python: `up(dir, brokers)` -> Cluster (kill/restart single brokers for tests).

This is a launcher for the real-world kit, not part of the library: it may use subprocess,
sockets and time directly.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Optional

from kafkasim.runtime.real.ports import free_port

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
ZK_SCRIPT = REPO / "real" / "zookeeper" / "zk.py"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 60.0


def load_zk() -> ModuleType:
    name = "kafkasim_real_zookeeper"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ZK_SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def default_configs(brokers: int) -> dict[str, str]:
    rf = str(min(brokers, 3))
    return {"offsets.topic.replication.factor": rf, "default.replication.factor": rf,
            "group.initial.rebalance.delay.ms": "0", "num.partitions": "1"}


@dataclass
class Broker:
    broker_id: int
    port: int
    dir: Path
    configs: dict[str, str]
    zookeeper: str
    control_port: int = 0
    proc: Optional[subprocess.Popen[bytes]] = None
    pid: int = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.dir / "broker.log"

    def start(self) -> None:
        (self.dir / "data").mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "kafkasim.cli", "serve", "--port", str(self.port),
               "--log-dir", str(self.dir / "data"), "--zookeeper", self.zookeeper,
               "--broker-id", str(self.broker_id), "--trace", str(self.dir / "trace.jsonl")]
        if self.control_port:
            cmd += ["--control-port", str(self.control_port)]
        for key, value in sorted(self.configs.items()):
            cmd += ["--config", f"{key}={value}"]
        (self.dir / "cmd.json").write_text(json.dumps(cmd))
        log = open(self.log_path, "ab")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=str(REPO), env=env,
                                     start_new_session=True)
        log.close()
        self.pid = self.proc.pid

    def wait_started(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Until `kafkasim serve` prints that it listens (its startup — registration, the
        controller — is done), or fail with the log's tail."""
        deadline = time.monotonic() + timeout_s
        marker = f"kafkasim broker {self.broker_id} listening".encode()
        while time.monotonic() < deadline:
            if self.log_path.exists() and marker in self.log_path.read_bytes():
                return
            if not self.alive():
                break
            time.sleep(0.1)
        raise RuntimeError(f"broker {self.broker_id} did not start; {self.log_path}:\n"
                           f"{self.log_path.read_bytes()[-4000:].decode(errors='replace')}")

    def alive(self) -> bool:
        if self.proc is not None:
            return self.proc.poll() is None
        return _pid_alive(self.pid)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """kill -9 by default: no shutdown code runs (its ZooKeeper session lingers until it expires)."""
        if self.alive():
            os.kill(self.pid, sig)
        if self.proc is not None:
            self.proc.wait(timeout=30)

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        _stop_pid(self.pid, self.proc, timeout_s)


@dataclass
class Cluster:
    dir: Path
    zookeeper: Optional[object]     # real/zookeeper's ZooKeeperHandle
    zookeeper_connect: str
    brokers: list[Broker] = field(default_factory=list)

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def broker(self, broker_id: int) -> Broker:
        return next(b for b in self.brokers if b.broker_id == broker_id)

    def restart(self, broker_id: int) -> Broker:
        b = self.broker(broker_id)
        b.start()
        self._record()
        b.wait_started()
        return b

    def _record(self) -> None:
        lines = [f"zookeeper {getattr(self.zookeeper, 'pid', 0)} {self.zookeeper_connect.rsplit(':', 1)[1]}"]
        lines += [f"broker {b.broker_id} {b.pid} {b.port} {b.control_port}" for b in self.brokers]
        (self.dir / "pids").write_text("\n".join(lines) + "\n")
        (self.dir / "env").write_text(f"BOOTSTRAP_SERVERS={self.bootstrap}\nZOOKEEPER={self.zookeeper_connect}\n")

    def down(self) -> None:
        stop(self.dir)

    @property
    def control(self) -> str:
        """HOST:PORT of the cluster's fault control plane."""
        return (self.dir / "control").read_text().strip()

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Until every broker's metadata names a controller and all the brokers — the controller's
        first UpdateMetadata has reached it (Kafka's tests wait the same way,
        TestUtils.waitUntilBrokerMetadataIsPropagated). Before that a client asking for the
        controller hears -1, and librdkafka's admin client then waits out its whole timeout."""
        deadline = time.monotonic() + timeout_s
        for b in self.brokers:
            while True:
                try:
                    known, controller = _metadata_view(b.port)
                    if known == len(self.brokers) and controller >= 0:
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"broker {b.broker_id}'s metadata never named a controller and "
                                       f"{len(self.brokers)} brokers; see {b.log_path}")
                time.sleep(0.1)


def _metadata_view(port: int) -> tuple[int, int]:
    """(brokers, controller id) in one broker's Metadata v1 answer, over a plain socket."""
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    from cluster_faults import metadata

    brokers, controller, _ = metadata(port, [])
    return brokers, controller


def up(directory: str | Path, brokers: int, configs: Optional[dict[str, str]] = None) -> Cluster:
    d = Path(directory).resolve()
    d.mkdir(parents=True, exist_ok=True)
    if (d / "pids").exists():
        raise RuntimeError(f"already up in {d} (kafkasim cluster down --dir {d} first)")
    zk = load_zk().start_zookeeper(d / "zookeeper")
    cluster = Cluster(d, zk, zk.connect_string)
    merged = {**default_configs(brokers), **(configs or {})}
    try:
        for i in range(brokers):
            b = Broker(i, free_port(), d / f"broker-{i}", merged, zk.connect_string, control_port=free_port())
            b.start()
            cluster.brokers.append(b)
            cluster._record()
        for b in cluster.brokers:
            b.wait_started()
        cluster.wait_ready()
        start_control(d)
    except BaseException:
        stop(d)
        raise
    return cluster


def stop(directory: str | Path) -> bool:
    """Brokers first (SIGTERM: controlled shutdown; their sessions close), ZooKeeper last."""
    d = Path(directory)
    pidfile = d / "pids"
    if not pidfile.exists():
        return False
    stop_control(d)
    entries = [line.split() for line in pidfile.read_text().splitlines() if line.strip()]
    brokers = [(int(e[2]), int(e[1])) for e in entries if e[0] == "broker"]
    for pid, _ in brokers:
        _signal(pid, signal.SIGTERM)
    for pid, _ in brokers:
        _stop_pid(pid, None, STOP_TIMEOUT_S)
    for e in entries:
        if e[0] == "zookeeper":
            load_zk().stop_from_dir(d / "zookeeper")
    pidfile.unlink(missing_ok=True)
    return True


def start_control(d: Path, timeout_s: float = 30.0) -> str:
    """Start `cluster.py control --dir DIR` (detached: it outlives `kafkasim cluster up`) and
    wait until it has written DIR/control."""
    (d / "control").unlink(missing_ok=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    log = open(d / "control.log", "ab")
    proc = subprocess.Popen([sys.executable, str(HERE / "cluster.py"), "control", "--dir", str(d)], stdout=log,
                            stderr=subprocess.STDOUT, cwd=str(REPO), env=env, start_new_session=True)
    log.close()
    (d / "control.pid").write_text(f"{proc.pid}\n")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (d / "control").exists():
            return (d / "control").read_text().strip()
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise RuntimeError(f"the cluster's control plane did not start; {d / 'control.log'}:\n"
                       f"{(d / 'control.log').read_bytes()[-4000:].decode(errors='replace')}")


def stop_control(d: Path) -> None:
    pidfile = d / "control.pid"
    if pidfile.exists():
        _stop_pid(int(pidfile.read_text().split()[0]), None, 10.0)
        pidfile.unlink(missing_ok=True)
    (d / "control").unlink(missing_ok=True)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie child counts as gone
        return os.waitpid(pid, os.WNOHANG) == (0, 0)
    except ChildProcessError:
        return True


def _stop_pid(pid: int, proc: Optional[subprocess.Popen[bytes]], timeout_s: float) -> None:
    """SIGTERM, then SIGKILL if it lingers; only ever this one pid."""
    if proc is not None and proc.poll() is not None:
        return
    _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (proc.poll() is not None) if proc is not None else not _pid_alive(pid):
            return
        time.sleep(0.1)
    _signal(pid, signal.SIGKILL)
    if proc is not None:
        proc.wait(timeout=30)


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["up", "down", "control"])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--brokers", type=int, default=3)
    ap.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args(argv)
    return run(args.command, args.dir, args.brokers, args.config)


def run(command: str, directory: str, brokers: int, config: list[str]) -> int:
    if command == "control":
        sys.path.insert(0, str(HERE))
        from cluster_faults import serve_control
        return serve_control(directory)
    if command == "down":
        if not stop(directory):
            print(f"nothing up in {directory}", file=sys.stderr)
        return 0
    try:
        cluster = up(directory, brokers, dict(kv.split("=", 1) for kv in config))
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(cluster.bootstrap, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
