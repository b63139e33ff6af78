"""The fault control plane's HTTP/JSON server: a FaultBackend (kafkasim/runtime/control_api.py)
on 127.0.0.1, for `kafkasim fault`, `kafkasim cluster kill|pause|...` and the pytest plugin.

Endpoints (every body is JSON; every error is `{"error": "<message>"}` with a 4xx status):

    GET    /v1/world            {"world": "live"|"real-broker"|"real-cluster"}
    GET    /v1/nodes            {"<node>": {"role": ..., "bootstrap": "host:port"|null, "up": bool}}
    GET    /v1/kinds            {"kinds": [...]}          the fault kinds this world injects
    POST   /v1/faults           body: a fault spec -> 201 {the ActiveFault: id, spec, targets, ...}
                                400 malformed JSON / spec, 404 unknown node, role or kind, 409 refused now
    GET    /v1/faults           {"faults": [...]}         active faults
    GET    /v1/faults/history   {"history": [...]}        every fault applied, healed or expired, in order
    DELETE /v1/faults/<id>      200 {"healed": [...]}     404 if no such active fault
    DELETE /v1/faults           200 {"healed": [...]}     heal everything

A fault spec is a scenario's `[[faults]]` table without `at_ms` (it acts now), plus the
request-level kinds (`request_error`, `request_delay`, `close_connection`); see control_api.py.

Threading: http.server answers on its own thread, but a backend belongs to the world's thread
(an asyncio loop, or the live world's kernel). Every backend call therefore goes through a
`Marshal`: a function that runs a zero-argument callable on the world's thread and returns its
result (or raises its exception) to the HTTP thread. `asyncio_marshal(loop)` is the one for an
asyncio world; `direct_marshal()` serialises calls under a lock for a backend that is
thread-safe by itself (the real cluster's launcher); the live world passes its own.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

from kafkasim.runtime.control_api import ActiveFault, FaultBackend, FaultError

T = TypeVar("T")
Marshal = Callable[[Callable[[], Any]], Any]
MARSHAL_TIMEOUT_S = 60.0
MAX_BODY_BYTES = 1 << 20


def asyncio_marshal(loop: asyncio.AbstractEventLoop, timeout_s: float = MARSHAL_TIMEOUT_S) -> Marshal:
    """Run each call on `loop` (call_soon_threadsafe) and wait for its result on the caller's thread."""

    def marshal(fn: Callable[[], Any]) -> Any:
        done: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def run() -> None:
            try:
                done.set_result(fn())
            except BaseException as exc:  # handed back to the HTTP thread, which answers it
                done.set_exception(exc)

        loop.call_soon_threadsafe(run)
        return done.result(timeout=timeout_s)

    return marshal


def direct_marshal() -> Marshal:
    """One call at a time, on the HTTP thread: for a backend with no event loop of its own."""
    lock = threading.Lock()

    def marshal(fn: Callable[[], Any]) -> Any:
        with lock:
            return fn()

    return marshal


class ControlServer:
    """`start()` binds (port 0: any free one) and serves on a daemon thread; `address` is
    'host:port'; `stop()` closes it. Bound to 127.0.0.1 unless told otherwise."""

    def __init__(self, backend: FaultBackend, marshal: Marshal, host: str = "127.0.0.1", port: int = 0) -> None:
        self.backend, self.marshal = backend, marshal
        self.host, self.port = host, port
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> int:
        handler = type("ControlHandler", (_Handler,), {"control": self})
        self._httpd = httpd = ThreadingHTTPServer((self.host, self.port), handler)
        httpd.daemon_threads = True
        self.port = int(httpd.server_address[1])
        self._thread = threading.Thread(target=httpd.serve_forever, name="kafkasim-control", daemon=True)
        self._thread.start()
        return self.port

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    # ------------------------------------------------------------ routing (HTTP thread)
    def route(self, method: str, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
        """(status, JSON answer) for one request; FaultError and bad input become 4xx here."""
        parts = [p for p in path.split("?", 1)[0].split("/") if p]
        if parts[:1] != ["v1"]:
            return 404, {"error": f"unknown path {path!r} (the API lives under /v1/)"}
        parts = parts[1:]
        b = self.backend
        call = self.marshal
        try:
            if method == "GET" and parts == ["world"]:
                return 200, {"world": call(b.world)}
            if method == "GET" and parts == ["nodes"]:
                return 200, {"nodes": call(b.nodes)}
            if method == "GET" and parts == ["kinds"]:
                return 200, {"kinds": call(b.kinds)}
            if method == "GET" and parts == ["faults"]:
                return 200, {"faults": [f.describe() for f in call(b.active)]}
            if method == "GET" and parts == ["faults", "history"]:
                return 200, {"history": call(b.history)}
            if method == "POST" and parts == ["faults"]:
                spec = parse_spec(body)
                return 201, call(lambda: b.apply(spec)).describe()
            if method == "DELETE" and parts == ["faults"]:
                return 200, {"healed": [f.describe() for f in call(lambda: b.heal(None))]}
            if method == "DELETE" and len(parts) == 2 and parts[0] == "faults":
                fault_id = parts[1]
                return 200, {"healed": [f.describe() for f in call(lambda: b.heal(fault_id))]}
        except FaultError as exc:
            return exc.status, {"error": exc.message}
        except concurrent.futures.TimeoutError:
            return 503, {"error": "the world did not answer the control call in time"}
        known = "GET world|nodes|kinds|faults|faults/history, POST faults, DELETE faults[/<id>]"
        return 404 if method in ("GET", "POST", "DELETE") else 405, \
            {"error": f"no endpoint {method} {path} ({known})"}


def parse_spec(body: bytes) -> dict[str, Any]:
    """A fault spec is one JSON object with a string `kind`; anything else is a 400."""
    try:
        spec = json.loads(body.decode("utf-8") or "null")
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FaultError(400, f"the body is not JSON: {exc}") from None
    if not isinstance(spec, dict):
        raise FaultError(400, "a fault spec is a JSON object, e.g. {\"kind\": \"request_error\", ...}")
    if not isinstance(spec.get("kind"), str):
        raise FaultError(400, "a fault spec needs a string 'kind' (GET /v1/kinds lists them)")
    return spec


class _Handler(BaseHTTPRequestHandler):
    control: ControlServer
    protocol_version = "HTTP/1.1"

    def _answer(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            status, answer = 413, {"error": f"body of {length} bytes (limit {MAX_BODY_BYTES})"}
        else:
            body = self.rfile.read(length) if length > 0 else b""
            try:
                status, answer = self.control.route(method, self.path, body)
            except Exception as exc:  # a bug in a backend: answer it rather than drop the connection
                status, answer = 500, {"error": f"{type(exc).__name__}: {exc}"}
        data = json.dumps(answer, sort_keys=True, default=str).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self._answer("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._answer("POST")

    def do_DELETE(self) -> None:  # noqa: N802
        self._answer("DELETE")

    def do_PUT(self) -> None:  # noqa: N802
        self._answer("PUT")

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's signature)
        pass  # the world's trace records what the faults did; no access log on stderr


class FaultBook:
    """The bookkeeping every backend shares: fault ids (f1, f2, ...), what is active, and the
    history of applied / healed / expired faults with wall-clock and world times."""

    def __init__(self, wall_ms: Callable[[], float], world_ms: Callable[[], float]) -> None:
        self.wall_ms, self.world_ms = wall_ms, world_ms
        self.active: dict[str, ActiveFault] = {}
        self.history: list[dict[str, Any]] = []
        self._next = 0

    def new(self, spec: dict[str, Any], targets: list[str], duration_ms: float | None = None,
            **extra: Any) -> ActiveFault:
        self._next += 1
        now = self.world_ms()
        fault = ActiveFault(f"f{self._next}", spec, targets, self.wall_ms(), now,
                            until_world_ms=now + duration_ms if duration_ms else None, extra=dict(extra))
        self.active[fault.fault_id] = fault
        self._record("applied", fault)
        return fault

    def end(self, fault_id: str, how: str = "healed") -> ActiveFault | None:
        fault = self.active.pop(fault_id, None)
        if fault is not None:
            self._record(how, fault)
        return fault

    def discard(self, fault_id: str) -> None:
        """Forget a fault whose arming failed after all (a remote refusal): it never was."""
        self.active.pop(fault_id, None)
        self.history = [h for h in self.history if h["id"] != fault_id]

    def _record(self, event: str, fault: ActiveFault) -> None:
        self.history.append({"event": event, "id": fault.fault_id, "kind": fault.spec.get("kind"),
                             "targets": fault.resolved_targets, "wall_ms": self.wall_ms(),
                             "world_ms": self.world_ms(), "fired": fault.fired, "spec": fault.spec})
