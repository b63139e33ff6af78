"""Harness side of the client-driver protocol (real/clients/README.md): spawn a client's driver,
send JSON commands, read JSON replies with timeouts, kill it cleanly.

    with Driver("java", broker.bootstrap) as d:
        d.hello()
        acked = d.produce("t", 100, "v", acks="all")["acked"]
        got = d.consume("t", group=None, max=100)["records"]

Several drivers run at once for group scenarios: `send()` to each, then `recv()` from each.
"""

from __future__ import annotations

import os
import socket
import struct
import tempfile
from pathlib import Path
from typing import Any

from kafkasim.runtime.real.client_driver import CLIENTS, DriverFailed, DriverProcess, driver_missing

__all__ = ["CLIENTS", "Driver", "DriverError", "DriverTimeout", "driver_missing", "api_versions", "create_topic"]

DriverTimeout = DriverFailed  # no reply in time, or the driver process died


class DriverError(Exception):
    """The driver answered {"op": "error"}: the client (or the broker through it) refused."""

    def __init__(self, client: str, reply: dict[str, Any]) -> None:
        super().__init__(f"{client}: {reply.get('cmd')}: {reply.get('error')}")
        self.client = client
        self.reply = reply
        self.error = str(reply.get("error"))


class Driver(DriverProcess):
    """kafkasim's own driver process (runtime/real/client_driver.py) with the tests' conveniences:
    the client's log in a temporary file quoted in failures, error replies raised, commands by name."""

    def __init__(self, client: str, bootstrap: str, client_id: str | None = None,
                 start_timeout_s: float = 60.0) -> None:
        self.client_id = client_id or f"kafkasim-{client}"
        fd, log_path = tempfile.mkstemp(prefix=f"driver-{client}-", suffix=".log")
        os.close(fd)
        super().__init__(client, bootstrap, self.client_id, log_path)
        self.hello_reply = self.call({"op": "hello"}, timeout_s=start_timeout_s)

    def stderr_tail(self, n: int = 2000) -> str:
        try:
            return Path(self.log_path).read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def detail(self) -> str:
        return f"; stderr:\n{self.stderr_tail()}"

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

    def consume_cmd(self, topic: str, group: str | None = None, max: int = 1 << 30, timeout_ms: int = 10000,
                    commit: bool = False, **opts: Any) -> dict[str, Any]:
        cmd = {"op": "consume", "topic": topic, "group": group, "from": "earliest", "max": max,
               "timeout_ms": timeout_ms, "commit": commit}
        cmd.update(opts)
        return cmd

    def consume(self, topic: str, group: str | None = None, max: int = 1 << 30, timeout_ms: int = 10000,
                commit: bool = False, **opts: Any) -> dict[str, Any]:
        return self.call(self.consume_cmd(topic, group, max, timeout_ms, commit, **opts),
                         timeout_s=timeout_ms / 1000 + 60)

    def commit(self) -> dict[str, Any]:
        return self.call({"op": "commit"})

    def close(self, timeout_s: float = 30.0) -> None:
        """Ask the driver to close its clients (a group member leaves) and wait for it to exit."""
        super().close(timeout_s)

    def __enter__(self) -> Driver:
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
