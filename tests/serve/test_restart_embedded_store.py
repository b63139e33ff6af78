"""`kafkasim serve` on its embedded coordination store remembers across kill -9: records
acknowledged with acks=all (confluent-kafka) are all there for kcat's first consume after the
restart, the topic keeps its id (Metadata v12), nothing is created again, producer ids are not
reused; and a kill during a burst of CreateTopics loses no acknowledged topic."""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from kafkasim.protocol import errors as E
from kafkasim.protocol.api import response_header_version
from kafkasim.protocol.framing import encode_request
from kafkasim.protocol.messages.headers import RequestHeader, ResponseHeader
from kafkasim.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from kafkasim.protocol.messages.metadata import MetadataRequest, MetadataResponse
from kafkasim.protocol.primitives import Message
from tests.serve.conftest import ServedBroker

pytestmark = pytest.mark.real
TOPIC, PARTITIONS = "remembered", 3
ACKED_BEFORE_KILL = 1500


# ---------------------------------------------------------------- a raw protocol client
def _recv(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        buf += chunk
    return buf


def call(port: int, req: Message, version: int, response: Any) -> Any:
    key = req.API_KEY
    assert key is not None
    header = RequestHeader(request_api_key=key, request_api_version=version, correlation_id=7,
                           client_id="restart-test")
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(encode_request(header, req))
        (size,) = struct.unpack(">i", _recv(s, 4))
        buf = _recv(s, size)
    _, pos = ResponseHeader.read(buf, 0, response_header_version(key, version))
    return response.read(buf, pos, version)[0]


def metadata(port: int, topics: list[str] | None, auto_create: bool = False) -> Any:
    req = MetadataRequest(topics=None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t)
                                                               for t in topics],
                          allow_auto_topic_creation=auto_create)
    return call(port, req, 12, MetadataResponse)


def producer_id(port: int) -> int:
    resp = call(port, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1), 4,
                InitProducerIdResponse)
    assert resp.error_code == E.NONE
    return int(resp.producer_id)


def topic_ids(port: int) -> dict[str, bytes]:
    return {t.name: bytes(t.topic_id) for t in metadata(port, None).topics}


def wait_served(port: int, topic: str, partitions: int, deadline_s: float = 30) -> float:
    """Seconds until Metadata shows every partition of `topic` led by broker 0."""
    start = time.monotonic()
    while time.monotonic() - start < deadline_s:
        t = metadata(port, [topic]).topics[0]
        if t.error_code == E.NONE and len(t.partitions) == partitions and all(
                p.error_code == E.NONE and p.leader_id == 0 for p in t.partitions):
            return time.monotonic() - start
        time.sleep(0.02)
    raise AssertionError(f"{topic} not served within {deadline_s} s")


def kill9(broker: ServedBroker) -> None:
    broker.proc.kill()
    broker.proc.wait(timeout=10)


# ---------------------------------------------------------------- records, topic ids, producer ids
def produce_until_killed(broker: ServedBroker) -> list[tuple[int, int, bytes]]:
    """acks=all records acknowledged before a kill -9 that lands while more are in flight."""
    from confluent_kafka import Producer

    acked: list[tuple[int, int, bytes]] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            acked.append((msg.partition(), msg.offset(), msg.value()))

    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 2,
                  "message.timeout.ms": 4000, "enable.idempotence": False})
    i = 0
    while len(acked) < ACKED_BEFORE_KILL:
        p.produce(TOPIC, value=b"v%06d" % i, partition=i % PARTITIONS, on_delivery=on_delivery)
        i += 1
        p.poll(0 if i % 50 else 0.01)
    for _ in range(300):  # in flight when the broker dies
        p.produce(TOPIC, value=b"v%06d" % i, partition=i % PARTITIONS, on_delivery=on_delivery)
        i += 1
    p.poll(0)
    kill9(broker)
    p.flush(8)
    return list(acked)


def test_acknowledged_records_topic_ids_and_producer_ids_survive_kill_9(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    broker = ServedBroker(logs)
    try:
        r = subprocess.run(["kcat", "-b", broker.bootstrap, "-L"], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(timeout=30)
        wait_served(broker.port, TOPIC, PARTITIONS)
        ids_before = topic_ids(broker.port)
        pid_before = producer_id(broker.port)
        acked = produce_until_killed(broker)
    finally:
        if broker.proc.poll() is None:
            kill9(broker)
    assert len(acked) >= ACKED_BEFORE_KILL
    assert broker.task_errors() == []

    started = time.monotonic()
    again = ServedBroker(logs)
    listening = time.monotonic() - started
    try:
        # The very first Metadata may come before the controller has elected: it may say
        # LEADER_NOT_AVAILABLE, but it must not create anything (the topic exists in the store).
        first = metadata(again.port, [TOPIC], auto_create=True).topics[0]
        assert first.error_code in (E.NONE, E.LEADER_NOT_AVAILABLE)
        assert first.error_code == E.LEADER_NOT_AVAILABLE or bytes(first.topic_id) == ids_before[TOPIC]
        served = wait_served(again.port, TOPIC, PARTITIONS)
        opened = [json.loads(line) for line in again.trace.read_text().splitlines()
                  if '"coordination_store_opened"' in line][-1]
        assert opened["znodes"] > 10 and opened["replayed"] > 0  # it did recover something
        print(f"\nrestart: {listening:.2f} s to listening (Python start included; store open "
              f"{opened['open_ms']} ms, {opened['replayed']} WAL records replayed), "
              f"{served:.3f} s more until all {PARTITIONS} partitions are led")
        # kcat's first consume after the restart sees every acknowledged record.
        r = subprocess.run(["kcat", "-C", "-b", again.bootstrap, "-t", TOPIC, "-o", "beginning", "-e", "-q",
                            "-f", "%p %o %s\\n"], capture_output=True, text=True, timeout=90)
        assert r.returncode == 0, r.stderr
        got = {(int(p), int(o), v.encode()) for p, o, v in (line.split(" ") for line in r.stdout.splitlines())}
        missing = [a for a in acked if a not in got]
        assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:5]}"
        assert topic_ids(again.port) == ids_before  # same topics, same ids: nothing re-created
        pid_after = producer_id(again.port)
        assert pid_after // 1000 > pid_before // 1000, (pid_before, pid_after)  # a new block
    finally:
        again.stop()
    assert again.task_errors() == []


# ---------------------------------------------------------------- CreateTopics burst
def test_kill_9_during_a_burst_of_topic_creations_loses_no_acknowledged_topic(tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    logs = tmp_path / "logs"
    broker = ServedBroker(logs)
    acked: list[str] = []
    stop = threading.Event()

    def create() -> None:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for i in range(10_000):
            if stop.is_set():
                return
            names = [f"burst-{i}-{j}" for j in range(3)]
            futures = admin.create_topics([NewTopic(n, 2, 1) for n in names], operation_timeout=10,
                                          request_timeout=10)
            for name, fut in futures.items():
                try:
                    fut.result(timeout=15)
                    acked.append(name)
                except Exception:
                    return  # the broker is gone

    creator = threading.Thread(target=create, daemon=True)
    creator.start()
    try:
        deadline = time.monotonic() + 120
        while len(acked) < 30 and time.monotonic() < deadline and creator.is_alive():
            time.sleep(0.01)
        assert len(acked) >= 30, "the burst did not get going"
    finally:
        kill9(broker)
        stop.set()
        creator.join(timeout=30)
    assert broker.task_errors() == []

    again = ServedBroker(logs)
    try:
        # As Kafka: the full topic list comes with the controller's first UpdateMetadata, and a
        # topic whose creation the controller had not handled yet gets its partitions after.
        deadline = time.monotonic() + 30
        names = set(topic_ids(again.port))
        while not set(acked) <= names and time.monotonic() < deadline:
            time.sleep(0.05)
            names = set(topic_ids(again.port))
        missing = sorted(set(acked) - names)
        print(f"\nburst: {len(acked)} topics acknowledged before kill -9, {len(names)} after the restart")
        assert not missing, f"acknowledged CreateTopics lost: {missing}"
        for name in acked[:: max(1, len(acked) // 10)]:  # a sample is served, not only listed
            wait_served(again.port, name, 2)
        # A topic that was never acknowledged may or may not exist; nothing else appears.
        assert all(n.startswith("burst-") for n in names), names
    finally:
        again.stop()
    assert again.task_errors() == []
