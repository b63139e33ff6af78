"""Real-world fixtures: `kafkasim serve` as a separate process on 127.0.0.1."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from collections.abc import Callable
from typing import Any, Iterator, Optional

import pytest

from kafkasim.runtime.real.ports import free_port


def controller_id(port: int) -> int:
    """The controller id in the broker's Metadata v1 answer (a plain socket, response header v0)."""
    from kafkasim.protocol import api as A
    from kafkasim.protocol.framing import encode_request
    from kafkasim.protocol.messages.headers import RequestHeader
    from kafkasim.protocol.messages.metadata import MetadataRequest

    header = RequestHeader(request_api_key=A.METADATA, request_api_version=1, correlation_id=1,
                           client_id="kafkasim-served-ready")
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(encode_request(header, MetadataRequest(topics=[])))
        data = b""
        while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
    return int(A.api_info(A.METADATA).response.decode(memoryview(data)[8:], 1).controller_id)


def wait_until_serving(proc: "subprocess.Popen[str]", port: int, seconds: float = 60) -> None:
    """Return once `kafkasim serve` listens on `port` and knows its controller (its first
    UpdateMetadata arrived): before that, Metadata names controller -1 and librdkafka's admin
    client waits out its timeout ("Failed while waiting for controller"). Generous, because a
    loaded CI machine starts the broker slowly."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"kafkasim serve exited: {proc.stdout.read() if proc.stdout else ''}")
        try:
            if controller_id(port) >= 0:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"kafkasim serve did not start listening (with a controller) within {seconds:.0f} s")


class ServedBroker:
    def __init__(self, log_dir: Path, zookeeper: Optional[str] = None, broker_id: int = 0,
                 configs: Optional[dict[str, object]] = None) -> None:
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.log_dir = log_dir
        self.trace = log_dir.parent / f"trace-{broker_id}.jsonl"
        cmd = [sys.executable, "-m", "kafkasim.cli", "serve", "--port", str(self.port), "--log-dir", str(log_dir),
               "--broker-id", str(broker_id), "--trace", str(self.trace)]
        if zookeeper:
            cmd += ["--zookeeper", zookeeper]
        for key, value in (configs or {}).items():
            cmd += ["--config", f"{key}={value}"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        wait_until_serving(self.proc, self.port)

    def stop(self) -> str:
        self.proc.terminate()
        try:
            out, _ = self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        return out or ""

    def task_errors(self) -> list[str]:
        if not self.trace.exists():
            return []
        return [line for line in self.trace.read_text().splitlines() if '"task_error"' in line]


@contextmanager
def served_broker(log_dir: Path, configs: Optional[dict[str, object]] = None) -> Iterator[ServedBroker]:
    """A `kafkasim serve` for the block, stopped after it; the broker must have hit no unhandled error."""
    b = ServedBroker(log_dir, configs=configs)
    try:
        yield b
    finally:
        b.stop()
    assert b.task_errors() == [], "the broker hit unhandled errors"


# The AclAuthorizer, with what no ACL speaks of open.
ACL_CONFIGS = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
               "allow.everyone.if.no.acl.found": "true", "num.partitions": 1}


def anonymous_topic_acl(topic: str, operation: str, permission: str) -> Any:
    """confluent-kafka's AclBinding of a literal topic ACL for User:ANONYMOUS (every PLAINTEXT
    connection) from any host; `operation` and `permission` by name (WRITE, DENY)."""
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    return AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                      AclOperation[operation], AclPermissionType[permission])


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[ServedBroker]:
    with served_broker(tmp_path / "logs") as b:
        yield b


def poll_until(consumer: Any, n: int, timeout_s: float = 90.0) -> list[Any]:
    """What a kafka-python consumer reads until it has n records, then 2 s more for any extra.
    A deadline, not kafka-python's consumer_timeout_ms (an idle gap, which a loaded machine's
    first fetch, or a restarted broker's first join, can outlast); 90 s outlasts a departed
    member's 45 s session."""
    got: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got += records
        if len(got) >= n:
            deadline = min(deadline, time.monotonic() + 2.0)
    return got


def wait_until(cond: Callable[[], bool], timeout_s: float, what: str,
               state: Callable[[], object] = lambda: None) -> None:
    """Poll cond until it holds; past the deadline, fail naming what was awaited (and state())."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}: {state()}")
