"""The host side of a client-workload run (harness/client_workload.py): third-party client driver
processes (real/clients/README.md's line protocol), the wall clock they run on, and the threads
that drive them side by side. It is here because it touches processes, threads and time, which
only kafkasim/runtime/ may; the harness gets these objects and never the host.

`KAFKASIM_CLIENTS_DIR` points at another real/clients checkout whose drivers are built (the Java
and Go drivers are build artifacts, git-ignored); default: this repository's real/clients.
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

CLIENTS = ("kafka-python", "aiokafka", "confluent-kafka", "kcat", "kafkajs", "java", "franz-go")
CLIENTS_DIR_ENV = "KAFKASIM_CLIENTS_DIR"


class DriverFailed(Exception):
    """The driver process died, or gave no reply in time."""


def clients_dir() -> Path:
    env = os.environ.get(CLIENTS_DIR_ENV)
    return Path(env) if env else Path(__file__).resolve().parents[3] / "real" / "clients"


def driver_missing(client: str) -> str | None:
    """Why the client's driver cannot run here (unknown, or not built), or None."""
    if client not in CLIENTS:
        return f"unknown client {client!r} (the drivers: {', '.join(CLIENTS)})"
    d = clients_dir() / client
    need = {"java": d / "classes" / "Driver.class", "franz-go": d / "bin" / "driver",
            "kafkajs": d / "node_modules" / "kafkajs"}.get(client, d / "driver")
    if not need.exists():
        return f"{need} missing: run `bash real/install.sh` (or set {CLIENTS_DIR_ENV} to a built real/clients)"
    return None


class DriverProcess:
    """One driver process: `send(cmd)` writes a command and returns its id, `recv(id)` waits for
    that command's reply (replies to other ids are kept for their own `recv`), `call(cmd)` does
    both. Its stderr (the client's own log) goes to `log_path`."""

    def __init__(self, client: str, bootstrap: str, client_id: str, log_path: str) -> None:
        why = driver_missing(client)
        if why:
            raise DriverFailed(why)
        self.client = client
        self.log_path = log_path
        self._ids = itertools.count(1)
        self._replies: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._pending: dict[int, dict[str, Any]] = {}
        self._ops: dict[int, str] = {}  # command id -> its op, for messages
        self._log = open(log_path, "w")
        env = dict(os.environ, KAFKASIM_PYTHON=sys.executable)
        argv = [str(clients_dir() / client / "driver"), "--bootstrap", bootstrap, "--client-id", client_id]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
                                     env=env, text=True, bufsize=1, start_new_session=True)
        threading.Thread(target=self._read, daemon=True, name=f"driver-{client_id}").start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if line:
                try:
                    self._replies.put(json.loads(line))
                except ValueError:
                    self._replies.put({"op": "error", "error": f"driver wrote a non-JSON line: {line[:300]!r}"})
        self._replies.put(None)

    def detail(self) -> str:
        """What a DriverFailed message adds after its reason (nothing here; tests add the log)."""
        return ""

    def send(self, cmd: dict[str, Any]) -> int:
        cid = next(self._ids)
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(dict(cmd, id=cid)) + "\n")
            self.proc.stdin.flush()
        except OSError as exc:
            raise DriverFailed(f"{self.client}: driver is gone ({exc}){self.detail()}") from None
        self._ops[cid] = str(cmd.get("op"))
        return cid

    def recv(self, cid: int, timeout_s: float) -> dict[str, Any]:
        """The reply to command `cid` (replies come back in order; one without an id, such as a
        parse error, is returned too). An `{"op": "error"}` reply is returned, not raised."""
        if cid in self._pending:
            return self._pending.pop(cid)
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise DriverFailed(f"{self.client}: no reply to {self._ops.get(cid)} within {timeout_s:.0f} s"
                                   f"{self.detail()}")
            try:
                r = self._replies.get(timeout=left)
            except queue.Empty:
                continue
            if r is None:
                self._replies.put(None)
                raise DriverFailed(f"{self.client}: driver exited ({self.proc.poll()}) before replying{self.detail()}")
            rid = r.get("id")
            if rid in (cid, None):
                self._ops.pop(cid, None)
                return r
            self._pending[rid] = r

    def call(self, cmd: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        return self.recv(self.send(cmd), timeout_s)

    def close(self, timeout_s: float = 20.0) -> None:
        """Ask the driver to close (a group member leaves), then kill its process group."""
        if self.proc.poll() is None:
            try:
                self.recv(self.send({"op": "close"}), timeout_s)  # an error reply is no reason to wait
                self.proc.wait(timeout=timeout_s)
            except (DriverFailed, subprocess.TimeoutExpired):
                pass
        self.kill()

    def kill(self) -> None:
        """Kill the driver's process group (its clients and any child, e.g. kcat), no clean-up."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 9)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=10)
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass
        self._log.close()


class WallClock:
    """Milliseconds since this clock was made (monotonic), the epoch, and sleeping until a time."""

    def __init__(self) -> None:
        self._t0 = time.monotonic()

    def now_ms(self) -> float:
        return (time.monotonic() - self._t0) * 1000.0

    @staticmethod
    def epoch_ms() -> float:
        return time.time() * 1000.0

    def sleep_until(self, ms: float) -> None:
        left = (ms - self.now_ms()) / 1000.0
        if left > 0:
            time.sleep(left)

    def sleep(self, ms: float) -> None:
        time.sleep(max(0.0, ms) / 1000.0)


class Worker:
    """A function on a thread of its own; `join()` re-raises what it raised."""

    def __init__(self, fn: Callable[[], None], name: str) -> None:
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn,), name=name, daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[[], None]) -> None:
        try:
            fn()
        except BaseException as exc:  # handed to join()
            self._error = exc

    def join(self, timeout_s: float | None = None) -> bool:
        """True once finished (raising its exception if it had one)."""
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            return False
        if self._error is not None:
            raise self._error
        return True

    def done(self) -> bool:
        return not self._thread.is_alive()
