#!/usr/bin/env python3
"""Start and stop a throwaway standalone ZooKeeper (Debian's `zookeeper` 3.8 package) on
127.0.0.1 for tests and local runs.

    python real/zookeeper/zk.py start DIR [--port N]   # prints 127.0.0.1:PORT, leaves it running
    python real/zookeeper/zk.py stop DIR               # stops the one started in DIR (by pid)
    python real/zookeeper/zk.py run DIR                # foreground until Ctrl-C

From Python: `handle = start_zookeeper(dir)`; `handle.connect_string`; `handle.stop()`.

Classpath: Debian's zookeeper.jar names its dependencies (jute, netty, slf4j-api, metrics,
commons-cli, jetty, jackson, snappy ...) in its manifest's Class-Path, so the jar alone
resolves them; we add slf4j-simple as the logging binding so the server's log goes to stderr
(captured in DIR/zookeeper.log) instead of slf4j's silent NOP default. Packages: `zookeeper`
(pulls libzookeeper-java, libslf4j-java, libnetty-java, ...) and a JRE (default-jre-headless).

This is a launcher for the real-world kit, not part of the library: it may use subprocess,
sockets and time directly.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

ZK_JAR = os.environ.get("KAFKASIM_ZK_JAR", "/usr/share/java/zookeeper.jar")
SLF4J_BINDING = os.environ.get("KAFKASIM_ZK_SLF4J", "/usr/share/java/slf4j-simple.jar")
JAVA = os.environ.get("JAVA", "java")
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"  # standalone, no quorum
START_TIMEOUT_S = 30.0
LOG_TAIL_BYTES = 8000


def classpath() -> str:
    parts = [ZK_JAR]
    if os.path.exists(SLF4J_BINDING):
        parts.append(SLF4J_BINDING)
    return ":".join(parts)


def free_port() -> int:
    """A port the kernel just handed out (bind to 0). Racy by nature; start() retries."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def four_letter(port: int, cmd: str = "ruok", timeout_s: float = 1.0) -> str:
    """Send a four-letter command; returns the reply ('' when nothing answers)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
            s.sendall(cmd.encode())
            s.shutdown(socket.SHUT_WR)
            chunks = []
            while True:
                b = s.recv(4096)
                if not b:
                    break
                chunks.append(b)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


def _ready(port: int, data_dir: Path) -> bool:
    """`ruok` alone is not enough: it answers `imok` before the server serves requests, and a
    different ZooKeeper already on the port would answer it too. Require that the server
    serves (`srvr`) and that it is ours (`conf` shows our dataDir)."""
    if four_letter(port, "ruok", 0.5) != "imok":
        return False
    if "Zookeeper version:" not in four_letter(port, "srvr", 0.5):
        return False
    return str(data_dir / "data") in four_letter(port, "conf", 0.5)


def write_config(data_dir: Path, port: int) -> Path:
    cfg = data_dir / "zoo.cfg"
    cfg.write_text("\n".join([
        "tickTime=500",                 # min session timeout = 2 ticks = 1 s: tests can expire fast
        f"dataDir={data_dir / 'data'}",
        f"clientPort={port}",
        "clientPortAddress=127.0.0.1",  # never listen beyond loopback
        "maxClientCnxns=0",
        "admin.enableServer=false",     # the admin HTTP server would take port 8080
        "4lw.commands.whitelist=*",     # ruok/stat/srvr for readiness and debugging
        "forceSync=no",                 # a throwaway test server: durability is not the point
        "",
    ]))
    return cfg


@dataclass
class ZooKeeperHandle:
    data_dir: Path
    port: int
    pid: int
    _proc: Optional[subprocess.Popen[bytes]] = None

    @property
    def connect_string(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "zookeeper.log"

    def log_tail(self) -> str:
        return _tail(self.log_path)

    def alive(self) -> bool:
        if self._proc is not None:
            return self._proc.poll() is None
        return _pid_alive(self.pid)

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM, then SIGKILL if it lingers; only ever this one pid."""
        _stop_pid(self.pid, self._proc, timeout_s)
        (self.data_dir / "zookeeper.pid").unlink(missing_ok=True)


def _tail(path: Path) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - LOG_TAIL_BYTES))
            return f.read().decode(errors="replace")
    except OSError:
        return "(no log)"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _stop_pid(pid: int, proc: Optional[subprocess.Popen[bytes]], timeout_s: float) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None:
            if proc.poll() is not None:
                return
        elif not _pid_alive(pid):
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    if proc is not None:
        proc.wait(timeout=5)


class ZooKeeperStartError(RuntimeError):
    pass


def _launch(data_dir: Path, port: int, timeout_s: float) -> ZooKeeperHandle:
    (data_dir / "data").mkdir(parents=True, exist_ok=True)
    cfg = write_config(data_dir, port)
    log = (data_dir / "zookeeper.log").open("ab")
    cmd = [JAVA, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",  # small and quick to boot
           "-Dzookeeper.jmx.log4j.disable=true", "-cp", classpath(), MAIN_CLASS, str(cfg)]
    # Own session: a Ctrl-C on the test run does not race our orderly stop(), and the server
    # outlives `zk.py start` when launched from the shell.
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True, cwd=str(data_dir))
    log.close()
    handle = ZooKeeperHandle(data_dir, port, proc.pid, proc)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ZooKeeperStartError(f"ZooKeeper exited with {proc.returncode} on port {port}:\n{handle.log_tail()}")
        if _ready(port, data_dir):
            (data_dir / "zookeeper.pid").write_text(f"{proc.pid} {port}\n")
            return handle
        time.sleep(0.1)
    handle.stop()
    raise ZooKeeperStartError(f"ZooKeeper did not answer ruok on {port} within {timeout_s}s:\n{handle.log_tail()}")


def start_zookeeper(data_dir: str | Path, port: int = 0, timeout_s: float = START_TIMEOUT_S,
                    attempts: int = 3) -> ZooKeeperHandle:
    """Start ZooKeeper with its files under data_dir; returns once it serves (see _ready)."""
    if not os.path.exists(ZK_JAR):
        raise ZooKeeperStartError(f"{ZK_JAR} missing: apt-get install -y zookeeper")
    d = Path(data_dir).resolve()
    d.mkdir(parents=True, exist_ok=True)
    last: Optional[Exception] = None
    for _ in range(attempts if port == 0 else 1):
        try:
            return _launch(d, port or free_port(), timeout_s)
        except ZooKeeperStartError as exc:
            # A freshly chosen port can be taken between bind(0) and the JVM's bind: try another.
            last = exc
            if "BindException" not in str(exc) and "Address already in use" not in str(exc):
                raise
    assert last is not None
    raise last


def stop_from_dir(data_dir: str | Path) -> bool:
    pidfile = Path(data_dir) / "zookeeper.pid"
    if not pidfile.exists():
        return False
    pid, port = (int(x) for x in pidfile.read_text().split())
    ZooKeeperHandle(Path(data_dir).resolve(), port, pid).stop()
    return True


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["start", "stop", "run", "classpath"])
    ap.add_argument("dir", nargs="?", default="")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=START_TIMEOUT_S)
    args = ap.parse_args(argv)
    if args.command == "classpath":
        print(classpath())
        return 0
    if not args.dir:
        ap.error("DIR is required")
    if args.command == "stop":
        return 0 if stop_from_dir(args.dir) else 1
    try:
        handle = start_zookeeper(args.dir, args.port, args.timeout)
    except ZooKeeperStartError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(handle.connect_string, flush=True)
    if args.command == "run":
        try:
            while handle.alive():
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            handle.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
