"""Connection limits of `kafkasim serve` over real sockets: 1,000 connections held at once with
the broker's memory bounded and the broker still serving; max.connections.per.ip (and its
overrides) closing the connection over the limit right after accept; max.connections holding a
new connection unserved until another closes; socket.request.max.bytes closing a connection
whose size prefix is above it or negative, without waiting for the bytes it announces."""

from __future__ import annotations

import resource
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkasim.protocol.framing import encode_request
from kafkasim.protocol.messages.api_versions import ApiVersionsRequest
from kafkasim.protocol.messages.headers import RequestHeader
from tests.serve.conftest import ServedBroker, wait_until
from tests.serve.fuzz_support import read_frame

pytestmark = pytest.mark.real

HELD = 1000


def _api_versions(corr: int = 1) -> bytes:
    return encode_request(RequestHeader(request_api_key=18, request_api_version=3, correlation_id=corr,
                                        client_id="limits"),
                          ApiVersionsRequest(client_software_name="limits", client_software_version="1"))


def _connect(port: int, timeout: float = 10.0) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.settimeout(timeout)
    return s


def _served(s: socket.socket, timeout: float = 10.0) -> bool | None:
    """Send ApiVersions: True answered, False closed, None no answer within `timeout`."""
    s.settimeout(timeout)
    try:
        s.sendall(_api_versions())
        return read_frame(s) is not None
    except (ConnectionResetError, BrokenPipeError):
        return False
    except TimeoutError:
        return None


def _established_to(port: int) -> int:
    """Connections the broker's side holds on `port` (/proc/net/tcp, state 01 = ESTABLISHED):
    before any test connection these are the broker's own — its controller's channel to itself
    counts against the limits, as it does in Kafka."""
    rows = Path("/proc/net/tcp").read_text().splitlines()[1:]
    return sum(1 for r in rows if r.split()[1].endswith(f":{port:04X}") and r.split()[3] == "01")


def _closed_by_broker(port: int, timeout_s: float = 30.0) -> None:
    """Wait until the broker has closed every connection its clients closed: no socket on `port`
    left in CLOSE_WAIT (state 08). The broker gives a connection's quota back before it closes
    the socket (SocketServer.handle_connection), so after this the count is down too."""
    def none_in_close_wait() -> bool:
        rows = Path("/proc/net/tcp").read_text().splitlines()[1:]
        return not any(r.split()[1].endswith(f":{port:04X}") and r.split()[3] == "08" for r in rows)
    wait_until(none_in_close_wait, timeout_s, f"the broker on {port} closing the connections its clients closed")


def _settled(port: int) -> int:
    """The broker's own connections, once the start-up probe's has gone."""
    time.sleep(0.5)   # the controller's channel to its own broker connects soon after start-up
    _closed_by_broker(port)
    own = _established_to(port)
    assert own <= 2, f"{own} connections before the test opened any"
    return own


def _rss_kb(pid: int, field: str = "VmRSS") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} for {pid}")


@pytest.fixture
def enough_fds() -> None:
    """Both ends of HELD connections live on this machine: the test process needs HELD fds and
    the broker (which inherits the limit) as many; raise the soft limit when it is lower."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = HELD + 200
    if soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            pytest.fail(f"ulimit -n: the hard limit {hard} is below the {need} descriptors this test needs")
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))


def _start(tmp_path: Path, configs: dict[str, object] | None = None) -> ServedBroker:
    return ServedBroker(tmp_path / "logs", configs=configs)


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[list[ServedBroker]]:
    started: list[ServedBroker] = []
    yield started
    for b in started:
        out = b.stop()
        assert "Traceback" not in out, out[-3000:]
        assert b.task_errors() == [], "the broker hit unhandled errors"


def test_a_thousand_connections_held_with_memory_bounded(enough_fds: None, tmp_path: Path,
                                                        broker_factory: list[ServedBroker]) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    b = _start(tmp_path)
    broker_factory.append(b)
    before = _rss_kb(b.proc.pid)
    held = [_connect(b.port) for _ in range(HELD)]
    try:
        for s in held:   # every one is served, not merely accepted
            s.sendall(_api_versions())
        assert all(read_frame(s) is not None for s in held)
        after = _rss_kb(b.proc.pid)
        per_conn = (after - before) * 1024 / HELD
        print(f"\n{HELD} connections: broker RSS {before // 1024} MiB -> {after // 1024} MiB, "
              f"{per_conn / 1024:.1f} KiB per connection; peak {_rss_kb(b.proc.pid, 'VmHWM') // 1024} MiB")
        assert per_conn < 64 * 1024, f"{per_conn / 1024:.0f} KiB per idle connection"
        producer = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all")
        offset = producer.send("held", value=b"still-serving", partition=0).get(timeout=30).offset
        producer.close()
        consumer = KafkaConsumer(bootstrap_servers=b.bootstrap, enable_auto_commit=False)
        tp = TopicPartition("held", 0)
        consumer.assign([tp])
        consumer.seek(tp, offset)
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            got = [r.value for recs in consumer.poll(timeout_ms=500).values() for r in recs]
        consumer.close()
        assert got == [b"still-serving"]
        assert all(_served(s) for s in held[:: HELD // 10])   # the held ones still answer
    finally:
        for s in held:
            s.close()


def test_max_connections_per_ip_closes_the_one_over_the_limit(tmp_path: Path,
                                                              broker_factory: list[ServedBroker]) -> None:
    b = _start(tmp_path, {"max.connections.per.ip": 3})
    broker_factory.append(b)
    room = 3 - _settled(b.port)
    first = [_connect(b.port) for _ in range(room)]
    assert [_served(s) for s in first] == [True] * room
    over = _connect(b.port)   # accepted by the kernel, then closed by the broker
    assert _served(over) is False
    over.close()
    first.pop().close()
    _closed_by_broker(b.port)
    again = _connect(b.port)
    assert _served(again) is True
    for s in [*first, again]:
        s.close()


def test_an_override_sets_the_limit_of_its_address(tmp_path: Path, broker_factory: list[ServedBroker]) -> None:
    b = _start(tmp_path, {"max.connections.per.ip": 0, "max.connections.per.ip.overrides": "127.0.0.1:4"})
    broker_factory.append(b)
    room = 4 - _settled(b.port)
    conns = [_connect(b.port) for _ in range(room + 1)]
    assert [_served(s) for s in conns] == [True] * room + [False]
    for s in conns:
        s.close()


def test_max_connections_holds_a_new_connection_until_one_closes(tmp_path: Path,
                                                                 broker_factory: list[ServedBroker]) -> None:
    b = _start(tmp_path, {"max.connections": 4})
    broker_factory.append(b)
    room = 4 - _settled(b.port)
    first = [_connect(b.port) for _ in range(room)]
    assert [_served(s) for s in first] == [True] * room
    waiting = _connect(b.port)
    assert _served(waiting, timeout=1.0) is None   # established, but not read
    first[0].close()
    waiting.settimeout(10)
    assert read_frame(waiting) is not None         # its ApiVersions is answered once a slot frees
    for s in [*first[1:], waiting]:
        s.close()


@pytest.mark.parametrize("size", [1024 * 1024 + 1, 0x7FFFFFFF, -1, -0x80000000])
def test_a_size_prefix_over_socket_request_max_bytes_or_negative_closes(
        size: int, tmp_path: Path, broker_factory: list[ServedBroker]) -> None:
    b = _start(tmp_path, {"socket.request.max.bytes": 1024 * 1024})
    broker_factory.append(b)
    s = _connect(b.port, timeout=5)
    s.sendall(size.to_bytes(4, "big", signed=True))   # the prefix alone: no body follows
    assert read_frame(s) is None, "the broker closes at the size prefix, without waiting for the body"
    s.close()
    assert _served(_connect(b.port)) is True
