#!/usr/bin/env python3
"""Start and stop Apache Kafka 3.9.1 itself (ZooKeeper mode) on 127.0.0.1: Debian's ZooKeeper
(real/zookeeper/zk.py) and N `kafka.Kafka` JVMs from the jars real/install.sh fetches into
real/maven/lib — the reference that tests/conformance compares kafkasim with.

    python real/kafka/kafka.py up --dir DIR [--brokers N] [--config KEY=VALUE ...]  # prints bootstrap
    python real/kafka/kafka.py down --dir DIR
    python real/kafka/kafka.py dump-log FILE... [--deep-iteration --print-data-log ...]
    python real/kafka/kafka.py class NAME ARGS...      # any class on Kafka's classpath

Layout of DIR (the same as real/cluster/cluster.py's for kafkasim, so the two compare 1:1):

    DIR/zookeeper/                  ZooKeeper's config, data and zookeeper.log
    DIR/broker-<id>/server.properties, DIR/broker-<id>/data/ (log.dirs), DIR/broker-<id>/broker.log
    DIR/pids                        "zookeeper <pid> <port>" then "broker <id> <pid> <port>" lines
    DIR/env                         BOOTSTRAP_SERVERS=... and ZOOKEEPER=...

Broker configs are real/cluster/cluster.py's defaults (broker.id 0..N-1, replication factors
min(N, 3), group.initial.rebalance.delay.ms=0, num.partitions=1) plus the transaction log's
replication (transaction.state.log.*: Kafka refuses InitProducerId on a smaller cluster
otherwise); `--config` adds or overrides. Ready means: the broker logged
"started (kafka.server.KafkaServer)" and its Metadata names a controller and every broker.

A launcher for the real-world kit, not part of the library: it may use subprocess, sockets and
time directly.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Optional, Sequence

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
LIB = Path(os.environ.get("KAFKASIM_KAFKA_LIB", str(REPO / "real" / "maven" / "lib")))
JAVA = os.environ.get("JAVA", "java")
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 60.0
STARTED = b"started (kafka.server.KafkaServer)"
LOG4J = """log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.server.KafkaServer=INFO
"""


def _load(name: str, path: Path) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def cluster_launcher() -> ModuleType:
    """real/cluster/cluster.py: its ZooKeeper loader, pid helpers and Metadata probe are shared."""
    return _load("kafkasim_real_cluster", REPO / "real" / "cluster" / "cluster.py")


def jars_present() -> bool:
    return (LIB / "kafka_2.13-3.9.1.jar").exists() and (LIB / "kafka-tools-3.9.1.jar").exists()


def java_cmd(main_class: str, *args: str, heap: str = "256m", log4j: Optional[Path] = None) -> list[str]:
    if not jars_present():
        raise RuntimeError(f"Kafka's jars are missing from {LIB}: run real/install.sh")
    cmd = [JAVA, f"-Xmx{heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto"]
    if log4j is not None:
        cmd.append(f"-Dlog4j.configuration=file:{log4j}")
    return cmd + ["-cp", f"{LIB}/*", main_class, *args]


def default_configs(brokers: int) -> dict[str, str]:
    rf = str(min(brokers, 3))
    configs: dict[str, str] = dict(cluster_launcher().default_configs(brokers))
    configs.update({"transaction.state.log.replication.factor": rf,
                    "transaction.state.log.min.isr": "1"})
    return configs


@dataclass
class KafkaBroker:
    broker_id: int
    port: int
    dir: Path
    configs: dict[str, str]
    zookeeper: str
    proc: Optional[subprocess.Popen[bytes]] = None
    pid: int = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_dir(self) -> Path:
        return self.dir / "data"

    @property
    def log_path(self) -> Path:
        return self.dir / "broker.log"

    def write_properties(self) -> Path:
        props = {"broker.id": str(self.broker_id), "listeners": f"PLAINTEXT://{self.bootstrap}",
                 "log.dirs": str(self.log_dir), "zookeeper.connect": self.zookeeper, **self.configs}
        path = self.dir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in sorted(props.items())))
        return path

    def start(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log4j = self.dir / "log4j.properties"
        log4j.write_text(LOG4J)
        cmd = java_cmd("kafka.Kafka", str(self.write_properties()), heap="512m", log4j=log4j)
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                     cwd=str(self.dir), start_new_session=True)
        log.close()
        self.pid = self.proc.pid

    def wait_started(self, timeout_s: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.log_path.exists() and STARTED in self.log_path.read_bytes():
                return
            if self.proc is not None and self.proc.poll() is not None:
                break
            time.sleep(0.2)
        raise RuntimeError(f"Kafka broker {self.broker_id} did not start; {self.log_path}:\n"
                           f"{self.log_path.read_bytes()[-4000:].decode(errors='replace')}")

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM (Kafka's controlled shutdown, which closes its ZooKeeper session), then SIGKILL."""
        cluster_launcher()._stop_pid(self.pid, self.proc, timeout_s)


@dataclass
class KafkaCluster:
    dir: Path
    zookeeper: object  # real/zookeeper's ZooKeeperHandle
    zookeeper_connect: str
    brokers: list[KafkaBroker] = field(default_factory=list)

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def record(self) -> None:
        lines = [f"zookeeper {getattr(self.zookeeper, 'pid', 0)} {self.zookeeper_connect.rsplit(':', 1)[1]}"]
        lines += [f"broker {b.broker_id} {b.pid} {b.port}" for b in self.brokers]
        (self.dir / "pids").write_text("\n".join(lines) + "\n")
        (self.dir / "env").write_text(f"BOOTSTRAP_SERVERS={self.bootstrap}\nZOOKEEPER={self.zookeeper_connect}\n")

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Until every broker's Metadata names a controller and all brokers (as cluster.py waits)."""
        probe = cluster_launcher()._metadata_view
        deadline = time.monotonic() + timeout_s
        for b in self.brokers:
            while True:
                try:
                    known, controller = probe(b.port)
                    if known == len(self.brokers) and controller >= 0:
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"Kafka broker {b.broker_id} never saw a controller; see {b.log_path}")
                time.sleep(0.1)

    def stop_brokers(self) -> None:
        """Brokers only (ZooKeeper keeps the cluster id, topics and configs they left)."""
        for b in self.brokers:
            cluster_launcher()._signal(b.pid, signal.SIGTERM)
        for b in self.brokers:
            b.stop()

    def down(self) -> None:
        stop(self.dir)


def up(directory: str | Path, brokers: int = 1, configs: Optional[dict[str, str]] = None) -> KafkaCluster:
    d = Path(directory).resolve()
    d.mkdir(parents=True, exist_ok=True)
    if (d / "pids").exists():
        raise RuntimeError(f"already up in {d} (real/kafka/kafka.py down --dir {d} first)")
    launcher = cluster_launcher()
    zk = launcher.load_zk().start_zookeeper(d / "zookeeper")
    cluster = KafkaCluster(d, zk, zk.connect_string)
    merged = {**default_configs(brokers), **(configs or {})}
    try:
        for i in range(brokers):
            b = KafkaBroker(i, launcher.free_port(), d / f"broker-{i}", merged, zk.connect_string)
            b.start()
            cluster.brokers.append(b)
            cluster.record()
        for b in cluster.brokers:
            b.wait_started()
        cluster.wait_ready()
    except BaseException:
        stop(d)
        raise
    return cluster


def stop(directory: str | Path) -> bool:
    """The same order and pid file as real/cluster/cluster.py: brokers, then ZooKeeper."""
    return bool(cluster_launcher().stop(directory))


def dump_log(files: Sequence[str | Path], *options: str, timeout_s: float = 120.0) -> subprocess.CompletedProcess[str]:
    """kafka-dump-log (kafka.tools.DumpLogSegments) over files; stdout/stderr captured as text."""
    cmd = java_cmd("kafka.tools.DumpLogSegments", "--files", ",".join(str(f) for f in files), *options)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)


def main(argv: Optional[list[str]] = None) -> int:
    if str(REPO) not in sys.path:  # the readiness probe speaks Kafka's protocol with kafkasim's codec
        sys.path.insert(0, str(REPO))
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "dump-log":
        files = [a for a in args[1:] if not a.startswith("--")]
        res = dump_log(files, *[a for a in args[1:] if a.startswith("--")])
        sys.stdout.write(res.stdout)
        sys.stderr.write(res.stderr)
        return res.returncode
    if args and args[0] == "class":
        return subprocess.call(java_cmd(args[1], *args[2:]))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["up", "down"])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--brokers", type=int, default=1)
    ap.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    ns = ap.parse_args(args)
    if ns.command == "down":
        if not stop(ns.dir):
            print(f"nothing up in {ns.dir}", file=sys.stderr)
        return 0
    try:
        cluster = up(ns.dir, ns.brokers, dict(kv.split("=", 1) for kv in ns.config))
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(cluster.bootstrap, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
