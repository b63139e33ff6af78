#!/usr/bin/env python3
"""Start and stop a throwaway Spark standalone cluster (a master and N one-core workers) on
127.0.0.1, from the jars of the installed PySpark (no separate Spark download), for
`kafkasim sweep --spark --master spark://...`, its test and bench/spark_sweep_bench.py.

    python real/spark/standalone.py start N [--dir DIR]   # prints spark://127.0.0.1:PORT, leaves it running
    python real/spark/standalone.py stop [--dir DIR]      # stops what start left in DIR (by pid)

DIR (default /tmp/kafkasim-spark-standalone) holds master.log, worker-<i>.log, the workers'
work dirs (executor stderr under work/app-*/) and `pids`. Each daemon is started in its own
session (a terminal's Ctrl-C does not reach it) and stopped with its process group, so a worker's
executors and their Python workers go with it. From Python: `url = start(dir, workers)`,
`stop(dir)`.

A launcher for the real-world kit, not part of the library: it may use subprocess and time.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from kafkasim.runtime.real.ports import free_port

DEFAULT_DIR = "/tmp/kafkasim-spark-standalone"
START_TIMEOUT_S = 120.0  # a loaded 2-core machine takes tens of seconds per JVM
MASTER_READY = "I have been elected leader"
WORKER_READY = "Successfully registered with master"
MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"


def spark_class() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


def _daemon(args: list[str], log: Path) -> int:
    # Without the caller's PYTHONPATH, as on a real cluster: executors import only the kafkasim
    # the driver ships (a checkout on the path would hide a broken shipment).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(SPARK_LOCAL_IP="127.0.0.1", SPARK_NO_DAEMONIZE="1")
    with open(log, "w") as out:
        proc = subprocess.Popen([spark_class(), *args], stdout=out, stderr=subprocess.STDOUT, env=env,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    return proc.pid


def _wait_for(log: Path, text: str, pid: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            raise RuntimeError(f"{log.name}: the process exited: {log.read_text(errors='replace')[-3000:]}") from None
        time.sleep(0.3)
    raise RuntimeError(f"{log.name}: not ready within {START_TIMEOUT_S:.0f} s (no {text!r})")


def start(directory: str, workers: int) -> str:
    """Start a master and `workers` one-core workers; the master URL once all have registered."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    if (d / "pids").exists():
        raise RuntimeError(f"{d}/pids exists: a cluster is running there (stop it first)")
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_S
    pids = [_daemon([MASTER, "--host", "127.0.0.1", "--port", str(port), "--webui-port", "0"], d / "master.log")]
    (d / "pids").write_text(f"{pids[0]}\n")
    try:
        _wait_for(d / "master.log", MASTER_READY, pids[0], deadline)
        for i in range(workers):
            pids.append(_daemon([WORKER, "--host", "127.0.0.1", "--port", "0", "--webui-port", "0", "--cores", "1",
                                 "--memory", "2g", "--work-dir", str(d / f"work-{i}"), url], d / f"worker-{i}.log"))
            (d / "pids").write_text("".join(f"{p}\n" for p in pids))
        for i, pid in enumerate(pids[1:]):
            _wait_for(d / f"worker-{i}.log", WORKER_READY, pid, deadline)
    except BaseException:
        stop(directory)
        raise
    (d / "master-url").write_text(url + "\n")
    return url


def stop(directory: str) -> int:
    """Stop every daemon start() left in directory (SIGTERM to its process group, then SIGKILL);
    the number stopped."""
    pids_file = Path(directory) / "pids"
    if not pids_file.exists():
        return 0
    pids = [int(p) for p in pids_file.read_text().split()]
    for pid in reversed(pids):  # workers first: the master would only log their loss
        _signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.2)
    for pid in pids:
        _signal_group(pid, signal.SIGKILL)
    pids_file.unlink()
    (Path(directory) / "master-url").unlink(missing_ok=True)
    return len(pids)


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)  # start_new_session: the daemon leads its own group
    except (ProcessLookupError, PermissionError):
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="action", required=True)
    st = sub.add_parser("start", help="start a master and N one-core workers; print the master URL")
    st.add_argument("workers", type=int, help="number of workers (1 core each)")
    st.add_argument("--dir", default=DEFAULT_DIR, help="logs, work dirs and pids")
    sp = sub.add_parser("stop", help="stop what start left in --dir")
    sp.add_argument("--dir", default=DEFAULT_DIR, help="the directory start used")
    args = p.parse_args(argv)
    try:
        if args.action == "start":
            if args.workers < 1:
                p.error("workers: at least 1")
            print(start(args.dir, args.workers))
        else:
            print(f"stopped {stop(args.dir)} Spark daemons", file=sys.stderr)
    except RuntimeError as exc:
        print(f"standalone: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
