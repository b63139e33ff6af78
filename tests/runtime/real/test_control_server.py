"""The control plane's HTTP server and client against an in-memory backend: routing, status
codes, JSON errors, marshalling onto an asyncio loop's thread."""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from kafkasim.runtime.control_api import ActiveFault, FaultError
from kafkasim.runtime.real.control_client import ControlClient, ControlError
from kafkasim.runtime.real.control_server import ControlServer, asyncio_marshal, direct_marshal

pytestmark = pytest.mark.real


class FakeBackend:
    """Accepts kind 'pause' on node 'broker-0' only; records the thread each call ran on."""

    def __init__(self) -> None:
        self.faults: dict[str, ActiveFault] = {}
        self.log: list[dict[str, Any]] = []
        self.threads: set[str] = set()

    def _seen(self) -> None:
        self.threads.add(threading.current_thread().name)

    def world(self) -> str:
        self._seen()
        return "fake"

    def kinds(self) -> list[str]:
        return ["pause"]

    def nodes(self) -> dict[str, dict[str, Any]]:
        return {"broker-0": {"role": "broker", "bootstrap": "127.0.0.1:1", "up": True}}

    def apply(self, spec: dict[str, Any]) -> ActiveFault:
        self._seen()
        if spec["kind"] != "pause":
            raise FaultError(404, f"unknown fault kind {spec['kind']!r}")
        targets = spec.get("targets", ["broker-0"])
        if targets != ["broker-0"]:
            raise FaultError(404, f"unknown node {targets[0]!r}")
        f = ActiveFault(f"f{len(self.log) + 1}", spec, targets, 1.0, 2.0)
        self.faults[f.fault_id] = f
        self.log.append({"event": "applied", "id": f.fault_id})
        return f

    def heal(self, fault_id: str | None) -> list[ActiveFault]:
        if fault_id is None:
            out = list(self.faults.values())
            self.faults.clear()
            return out
        if fault_id not in self.faults:
            raise FaultError(404, f"no active fault {fault_id!r}")
        return [self.faults.pop(fault_id)]

    def active(self) -> list[ActiveFault]:
        return list(self.faults.values())

    def history(self) -> list[dict[str, Any]]:
        return list(self.log)


@pytest.fixture
def served() -> Iterator[tuple[FakeBackend, ControlServer]]:
    backend = FakeBackend()
    server = ControlServer(backend, direct_marshal())
    server.start()
    yield backend, server
    server.stop()


def test_endpoints_roundtrip(served: tuple[FakeBackend, ControlServer]) -> None:
    backend, server = served
    c = ControlClient(server.address)
    assert server.port > 0 and server.address.startswith("127.0.0.1:")
    assert c.world() == "fake"
    assert c.kinds() == ["pause"]
    assert c.nodes()["broker-0"]["up"] is True
    added = c.add({"kind": "pause", "duration_ms": 100})
    assert added["id"] == "f1" and added["targets"] == ["broker-0"]
    assert [f["id"] for f in c.active()] == ["f1"]
    assert c.history() == [{"event": "applied", "id": "f1"}]
    assert [f["id"] for f in c.heal("f1")] == ["f1"]
    assert c.active() == []
    c.add({"kind": "pause"})
    c.add({"kind": "pause"})
    assert len(c.heal()) == 2


def test_errors_are_4xx_json(served: tuple[FakeBackend, ControlServer]) -> None:
    _, server = served
    c = ControlClient(server.address)
    with pytest.raises(ControlError) as e:
        c.add({"kind": "meteor"})
    assert e.value.status == 404 and "meteor" in e.value.message
    with pytest.raises(ControlError) as e:
        c.add({"kind": "pause", "targets": ["broker-9"]})
    assert e.value.status == 404 and "broker-9" in e.value.message
    with pytest.raises(ControlError) as e:
        c.heal("nope")
    assert e.value.status == 404
    with pytest.raises(ControlError) as e:
        c.add(["not", "an", "object"])  # type: ignore[arg-type]
    assert e.value.status == 400
    with pytest.raises(ControlError) as e:
        c.call("GET", "/nothing")
    assert e.value.status == 404 and "no endpoint" in e.value.message
    req = urllib.request.Request(f"http://{server.address}/v1/faults", data=b"{not json", method="POST")
    with pytest.raises(urllib.error.HTTPError) as h:
        urllib.request.urlopen(req, timeout=10)
    assert h.value.code == 400 and "not JSON" in json.loads(h.value.read())["error"]


def test_asyncio_marshal_runs_calls_on_the_loop_thread() -> None:
    backend = FakeBackend()
    loop = asyncio.new_event_loop()
    loop_thread = threading.Thread(target=loop.run_forever, name="world-loop", daemon=True)
    loop_thread.start()
    server = ControlServer(backend, asyncio_marshal(loop))
    server.start()
    try:
        c = ControlClient(server.address)
        assert c.world() == "fake"
        c.add({"kind": "pause"})
        with pytest.raises(ControlError) as e:   # an exception raised on the loop reaches the client
            c.add({"kind": "meteor"})
        assert e.value.status == 404
        assert backend.threads == {"world-loop"}
    finally:
        server.stop()
        loop.call_soon_threadsafe(loop.stop)
        loop_thread.join(5)
        loop.close()


def test_unreachable_control_plane_is_a_clear_error() -> None:
    server = ControlServer(FakeBackend(), direct_marshal())
    port = server.start()
    server.stop()
    with pytest.raises(ControlError) as e:
        ControlClient(f"127.0.0.1:{port}", timeout_s=5).world()
    assert e.value.status == 0 and "cannot reach" in e.value.message
