"""The fault control plane of `kafkasim serve --control-port` over real sockets: request-level
faults seen by real clients (confluent-kafka, kafka-python) and raw requests, disk faults through
the real world's seam, refusals with a clear 4xx that leave nothing applied, and the time from a
control call to the fault acting."""

from __future__ import annotations

import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkasim.protocol import api as A
from kafkasim.protocol.framing import encode_request
from kafkasim.protocol.messages.headers import RequestHeader
from kafkasim.protocol.messages.metadata import MetadataRequest
from kafkasim.protocol.messages.produce import ProduceRequest
from kafkasim.records.batch import Record, build_batch
from kafkasim.runtime.real.control_client import ControlClient, ControlError
from tests.serve.conftest import free_port, wait_until_serving

pytestmark = pytest.mark.real


class Controlled:
    """`kafkasim serve --control-port P` in its own process, with a client of its control plane."""

    def __init__(self, tmp: Path, configs: dict[str, str] | None = None) -> None:
        self.port, cport = free_port(), free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.trace = tmp / "trace.jsonl"
        cmd = [sys.executable, "-m", "kafkasim.cli", "serve", "--port", str(self.port), "--log-dir",
               str(tmp / "logs"), "--control-port", str(cport), "--trace", str(self.trace)]
        for k, v in (configs or {}).items():
            cmd += ["--config", f"{k}={v}"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.control = ControlClient(f"127.0.0.1:{cport}", timeout_s=30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.proc.stdout.read() if self.proc.stdout else ""
            try:
                if self.control.nodes()["broker-0"]["up"]:
                    wait_until_serving(self.proc, self.port)
                    return
            except (ControlError, OSError):
                pass
            time.sleep(0.1)
        raise RuntimeError("kafkasim serve --control-port did not come up in 30 s")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Controlled]:
    b = Controlled(tmp_path, {"log.flush.interval.messages": "1"})
    yield b
    b.stop()
    errors = [line for line in b.trace.read_text().splitlines() if '"task_error"' in line]
    assert errors == [], errors


class Wire:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.corr = 0

    def call(self, key: int, version: int, body: Any) -> Any:
        self.corr += 1
        self.sock.sendall(encode_request(RequestHeader(request_api_key=key, request_api_version=version,
                                                       correlation_id=self.corr, client_id="t"), body))
        size = int.from_bytes(self._read(4), "big")
        frame = self._read(size)
        skip = 4 if A.response_header_version(key, version) == 0 else 5
        return A.api_info(key).response.decode(memoryview(frame)[skip:], version)

    def _read(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed")
            out += chunk
        return out


def _produce(topic: str, value: bytes) -> ProduceRequest:
    PD = ProduceRequest.TopicProduceData.PartitionProduceData
    return ProduceRequest(transactional_id=None, acks=-1, timeout_ms=10000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[PD(index=0, records=build_batch(
            [Record(1, None, value)]))])])


def _create(b: Controlled, topic: str) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": b.bootstrap})
    p.produce(topic, b"warm-up", partition=0)
    assert p.flush(30) == 0


def test_confluent_producer_retries_through_five_not_leader_errors(served: Controlled) -> None:
    from confluent_kafka import Producer

    _create(served, "ck")
    fault = served.control.add({"kind": "request_error", "api_key": "Produce",
                                "error_code": "NOT_LEADER_OR_FOLLOWER", "count": 5, "topic": "ck"})
    assert fault["targets"] == ["broker-0"] and fault["id"] == "f1"
    errors: list[Any] = []
    acked: list[int] = []
    p = Producer({"bootstrap.servers": served.bootstrap, "acks": "all", "retry.backoff.ms": 20, "linger.ms": 0})
    for i in range(20):
        p.produce("ck", f"v{i}".encode(), partition=0,
                  on_delivery=lambda err, m: errors.append(err) if err else acked.append(m.offset()))
        p.flush(30)
    assert errors == [] and acked == list(range(1, 21))
    history = served.control.history()
    assert [(h["event"], h["id"]) for h in history] == [("applied", "f1"), ("expired", "f1")]
    assert history[-1]["fired"] == 5
    assert served.control.active() == []


def test_kafka_python_producer_retries_through_request_timeouts(served: Controlled) -> None:
    from kafka import KafkaProducer

    _create(served, "kp")
    served.control.add({"kind": "request_error", "api_key": 0, "error_code": 7, "count": 3})
    producer = KafkaProducer(bootstrap_servers=served.bootstrap, acks="all", retries=10, retry_backoff_ms=20,
                             enable_idempotence=False)
    offsets = [producer.send("kp", value=f"v{i}".encode(), partition=0).get(timeout=30).offset for i in range(5)]
    producer.close()
    assert sorted(offsets) == list(range(1, 6))
    assert served.control.history()[-1]["event"] == "expired"


def _fastest(n: int, call: Any) -> float:
    """The quickest of n unfaulted calls: the baseline a fault's delay must stand out from (one
    call alone can be slow on a loaded machine, an fsync on a busy disk above all)."""
    times = []
    for _ in range(n):
        t0 = time.monotonic()
        call()
        times.append(time.monotonic() - t0)
    return min(times)


def _assert_produced(resp: Any) -> None:
    assert resp.responses[0].partition_responses[0].error_code == 0, resp


def test_delay_and_close_connection_on_raw_requests(served: Controlled) -> None:
    w = Wire(served.port)
    fast = _fastest(3, lambda: w.call(A.METADATA, 12, MetadataRequest(topics=None)))
    served.control.add({"kind": "request_delay", "api_key": "Metadata", "delay_ms": 400, "count": 2})
    t0 = time.monotonic()
    w.call(A.METADATA, 12, MetadataRequest(topics=None))
    assert time.monotonic() - t0 >= 0.4 > fast
    served.control.heal()
    served.control.add({"kind": "close_connection", "after_requests": 1})
    w.call(A.METADATA, 12, MetadataRequest(topics=None))
    with pytest.raises((ConnectionError, OSError)):
        w.call(A.METADATA, 12, MetadataRequest(topics=None))
    assert Wire(served.port).call(A.METADATA, 12, MetadataRequest(topics=None)).brokers


def test_disk_faults_through_the_seam(served: Controlled) -> None:
    """slow fsync: every produce (log.flush.interval.messages=1 fsyncs each append) waits for it;
    ENOSPC after 0 free bytes: the append fails and the client hears an error, not a hang."""
    _create(served, "disk")
    w = Wire(served.port)
    fast = _fastest(3, lambda: _assert_produced(w.call(A.PRODUCE, 9, _produce("disk", b"a"))))
    slow = served.control.add({"kind": "disk", "slow_fsync_ms": 300})
    t0 = time.monotonic()
    assert w.call(A.PRODUCE, 9, _produce("disk", b"b")).responses[0].partition_responses[0].error_code == 0
    assert time.monotonic() - t0 >= 0.3 > fast
    served.control.heal(slow["id"])
    served.control.add({"kind": "disk", "enospc": True, "free_bytes": 0})
    code = w.call(A.PRODUCE, 9, _produce("disk", b"c")).responses[0].partition_responses[0].error_code
    assert code != 0


@pytest.mark.parametrize("spec, status, words", [
    ({"kind": "meteor"}, 404, "unknown fault kind 'meteor'"),
    ({"kind": "request_error", "api_key": 0, "error_code": 6, "targets": ["broker-7"]}, 404, "broker-7"),
    ({"kind": "request_error", "api_key": 0, "error_code": 6, "targets": ["leader:nope-0"]}, 404, "does not lead"),
    ({"kind": "request_error", "api_key": "CreateTopics", "error_code": 6}, 400, "has no error response"),
    ({"kind": "disk", "bitflip_rate": 0.1}, 409, "simulated disk"),
    ({"kind": "request_delay", "api_key": 1, "delay_ms": 10, "duration_ms": -1}, 400, "duration_ms"),
    ({"kind": "net_refuse", "peers": ["nohost"]}, 400, "host:port"),
])
def test_refusals_are_4xx_and_leave_nothing_applied(served: Controlled, spec: dict[str, Any], status: int,
                                                    words: str) -> None:
    with pytest.raises(ControlError) as e:
        served.control.add(spec)
    assert e.value.status == status and words in e.value.message
    assert served.control.active() == [] and served.control.history() == []


def test_time_from_control_call_to_fault_acting(served: Controlled) -> None:
    """request_error applied -> the next request answered with it: p50/p99 over 60 calls."""
    _create(served, "lat")
    w = Wire(served.port)
    samples = []
    for _ in range(60):
        t0 = time.perf_counter()
        served.control.add({"kind": "request_error", "api_key": 0, "error_code": 6, "count": 1})
        code = w.call(A.PRODUCE, 9, _produce("lat", b"x")).responses[0].partition_responses[0].error_code
        samples.append((time.perf_counter() - t0) * 1000)
        assert code == 6
    samples.sort()
    p50, p99 = statistics.median(samples), samples[int(len(samples) * 0.99) - 1]
    print(f"\ncontrol call -> request_error acting: p50 {p50:.2f} ms, p99 {p99:.2f} ms")
    assert p99 < 1000


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkasim.cli", *args], capture_output=True, text=True, timeout=60)


def test_fault_cli_add_list_heal_history_and_errors(served: Controlled) -> None:
    import json

    addr = served.control.base.split("//")[1].split("/")[0]
    kinds = json.loads(_cli("fault", "kinds", "--control", addr).stdout)
    assert kinds["world"] == "real-broker" and "request_error" in kinds["kinds"] and "disk" in kinds["kinds"]
    added = json.loads(_cli("fault", "add", '{"kind": "request_delay", "api_key": "Fetch", "delay_ms": 50}',
                            "--control", addr).stdout)
    assert [f["id"] for f in json.loads(_cli("fault", "list", "--control", addr).stdout)] == [added["id"]]
    healed = json.loads(_cli("fault", "heal", added["id"], "--control", addr).stdout)
    assert [f["id"] for f in healed] == [added["id"]]
    events = [h["event"] for h in json.loads(_cli("fault", "history", "--control", addr).stdout)]
    assert events == ["applied", "healed"]
    bad = _cli("fault", "add", "{nope", "--control", addr)
    assert bad.returncode == 2 and "not JSON" in bad.stderr and "Traceback" not in bad.stderr
    unknown = _cli("fault", "add", '{"kind": "meteor"}', "--control", addr)
    assert unknown.returncode == 2 and "unknown fault kind 'meteor'" in unknown.stderr and "HTTP 404" in unknown.stderr
    gone = _cli("fault", "heal", "f99", "--control", addr)
    assert gone.returncode == 2 and "no active fault 'f99'" in gone.stderr
    nowhere = _cli("fault", "list", "--dir", "/nonexistent")
    assert nowhere.returncode == 2 and "no control plane recorded" in nowhere.stderr


def test_confluent_consumer_through_fetch_and_coordinator_errors(served: Controlled) -> None:
    """Fetch answered NOT_LEADER_OR_FOLLOWER and FindCoordinator COORDINATOR_NOT_AVAILABLE, three
    times each: librdkafka's consumer refreshes, retries and still reads every record once."""
    from confluent_kafka import Consumer, Producer

    p = Producer({"bootstrap.servers": served.bootstrap})
    sent = [f"m{i}".encode() for i in range(50)]
    for v in sent:
        p.produce("cons", v, partition=0)
    assert p.flush(30) == 0
    fetch = served.control.add({"kind": "request_error", "api_key": "Fetch", "error_code": "NOT_LEADER_OR_FOLLOWER",
                                "count": 3, "topic": "cons", "partition": 0})
    coord = served.control.add({"kind": "request_error", "api_key": "FindCoordinator",
                                "error_code": "COORDINATOR_NOT_AVAILABLE", "count": 3})
    c = Consumer({"bootstrap.servers": served.bootstrap, "group.id": "g-faults", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe(["cons"])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < len(sent) and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    assert got == sent
    ended = {h["id"]: h for h in served.control.history() if h["event"] == "expired"}
    assert ended[fetch["id"]]["fired"] == 3 and ended[coord["id"]]["fired"] == 3
