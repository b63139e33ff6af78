"""Harness side of the client-driver protocol (real/clients/README.md): spawn a client's driver,
send JSON commands, read JSON replies with timeouts, kill it cleanly.

    with Driver("java", broker.bootstrap) as d:
        d.hello()
        acked = d.produce("t", 100, "v", acks="all")["acked"]
        got = d.consume("t", group=None, max=100)["records"]

Several drivers run at once for group scenarios: `send()` to each, then `recv()` from each.
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[3]
CLIENTS_DIR = ROOT / "real" / "clients"
CLIENTS = ["kafka-python", "aiokafka", "confluent-kafka", "kcat", "kafkajs", "java", "franz-go"]


class DriverError(Exception):
    """The driver answered {"op": "error"}: the client (or the broker through it) refused."""

    def __init__(self, client: str, reply: dict[str, Any]) -> None:
        super().__init__(f"{client}: {reply.get('cmd')}: {reply.get('error')}")
        self.client = client
        self.reply = reply
        self.error = str(reply.get("error"))


class DriverTimeout(Exception):
    """No reply in time, or the driver process died."""


def driver_path(client: str) -> Path:
    return CLIENTS_DIR / client / "driver"


def driver_missing(client: str) -> Optional[str]:
    """Why the client's driver can't run here (not built), or None."""
    d = CLIENTS_DIR / client
    need = {"java": d / "classes" / "Driver.class", "franz-go": d / "bin" / "driver",
            "kafkajs": d / "node_modules" / "kafkajs"}.get(client)
    if need is not None and not need.exists():
        return f"{need} missing: run `bash real/install.sh`"
    return None


class Driver:
    def __init__(self, client: str, bootstrap: str, client_id: Optional[str] = None,
                 start_timeout_s: float = 60.0) -> None:
        self.client = client
        self.client_id = client_id or f"kafkasim-{client}"
        self._ids = itertools.count(1)
        self._replies: "queue.Queue[Optional[dict[str, Any]]]" = queue.Queue()
        self._pending: dict[int, dict[str, Any]] = {}
        self._stderr = tempfile.NamedTemporaryFile(prefix=f"driver-{client}-", suffix=".log", delete=False)
        env = dict(os.environ, KAFKASIM_PYTHON=sys.executable)
        argv = [str(driver_path(client)), "--bootstrap", bootstrap, "--client-id", self.client_id]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                     env=env, text=True, bufsize=1, start_new_session=True)
        threading.Thread(target=self._read, daemon=True, name=f"driver-{client}").start()
        self.hello_reply = self.call({"op": "hello"}, timeout_s=start_timeout_s)

    # ------------------------------------------------------------------ wire
    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                self._replies.put(json.loads(line))
            except ValueError:
                self._replies.put({"op": "error", "error": f"driver wrote a non-JSON line: {line[:300]!r}"})
        self._replies.put(None)

    def stderr_tail(self, n: int = 2000) -> str:
        try:
            return Path(self._stderr.name).read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def send(self, cmd: dict[str, Any]) -> int:
        cid = next(self._ids)
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(dict(cmd, id=cid)) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise DriverTimeout(f"{self.client}: driver is gone ({exc}); stderr:\n{self.stderr_tail()}") from exc
        return cid

    def recv(self, cid: int, timeout_s: float) -> dict[str, Any]:
        """The reply to command `cid` (replies come back in order; any without an id — e.g. a
        parse error — is returned too)."""
        if cid in self._pending:
            return self._pending.pop(cid)
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise DriverTimeout(f"{self.client}: no reply to command {cid} within {timeout_s:.0f} s; "
                                    f"stderr:\n{self.stderr_tail()}")
            try:
                r = self._replies.get(timeout=left)
            except queue.Empty:
                continue
            if r is None:
                self._replies.put(None)
                raise DriverTimeout(f"{self.client}: driver exited ({self.proc.poll()}) before replying; "
                                    f"stderr:\n{self.stderr_tail()}")
            rid = r.get("id")
            if rid == cid or rid is None:
                return r
            self._pending[rid] = r

    def call(self, cmd: dict[str, Any], timeout_s: float = 60.0, check: bool = True) -> dict[str, Any]:
        r = self.recv(self.send(cmd), timeout_s)
        if check and r.get("op") == "error":
            raise DriverError(self.client, r)
        return r

    # ------------------------------------------------------------------ commands
    def hello(self) -> dict[str, Any]:
        return self.call({"op": "hello"})

    def produce(self, topic: str, count: int, prefix: str, timeout_s: float = 60.0, **opts: Any) -> dict[str, Any]:
        cmd = {"op": "produce", "topic": topic, "count": count, "prefix": prefix}
        cmd.update({k: v for k, v in opts.items() if v is not None})
        return self.call(cmd, timeout_s=timeout_s)

    def consume_cmd(self, topic: str, group: Optional[str] = None, max: int = 1 << 30, timeout_ms: int = 10000,
                    commit: bool = False, **opts: Any) -> dict[str, Any]:
        cmd = {"op": "consume", "topic": topic, "group": group, "from": "earliest", "max": max,
               "timeout_ms": timeout_ms, "commit": commit}
        cmd.update(opts)
        return cmd

    def consume(self, topic: str, group: Optional[str] = None, max: int = 1 << 30, timeout_ms: int = 10000,
                commit: bool = False, **opts: Any) -> dict[str, Any]:
        return self.call(self.consume_cmd(topic, group, max, timeout_ms, commit, **opts),
                         timeout_s=timeout_ms / 1000 + 60)

    def commit(self) -> dict[str, Any]:
        return self.call({"op": "commit"})

    def close(self, timeout_s: float = 30.0) -> None:
        """Ask the driver to close its clients (a group member leaves) and wait for it to exit."""
        if self.proc.poll() is None:
            try:
                self.call({"op": "close"}, timeout_s=timeout_s, check=False)
                self.proc.wait(timeout=timeout_s)
            except (DriverTimeout, subprocess.TimeoutExpired):
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
        self._stderr.close()

    def __enter__(self) -> "Driver":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# ---------------------------------------------------------------------- broker-side helpers
def api_versions(bootstrap: str, timeout_s: float = 10.0) -> dict[int, tuple[int, int]]:
    """The broker's advertised API set: ApiVersions v0 over a raw socket."""
    host, port = bootstrap.rsplit(":", 1)
    client_id = b"kafkasim-harness"
    body = struct.pack(">hhih", 18, 0, 1, len(client_id)) + client_id
    with socket.create_connection((host, int(port)), timeout=timeout_s) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", _read_exact(s, 4))[0]
        data = _read_exact(s, size)
    corr, err, n = struct.unpack_from(">ihi", data, 0)
    if err != 0:
        raise RuntimeError(f"ApiVersions v0 answered error {err}")
    out = {}
    for i in range(n):
        key, lo, hi = struct.unpack_from(">hhh", data, 10 + 6 * i)
        out[key] = (lo, hi)
    return out


def _read_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        buf += chunk
    return buf


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Create a topic through CreateTopics (confluent-kafka's admin client), waiting for the answer."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                              operation_timeout=10)[topic]
    fut.result(timeout=30)
