"""A client of the fault control plane (control_server.py's endpoints), used by `kafkasim
fault`, `kafkasim cluster kill|pause|...` and tests. Every call returns the decoded JSON
answer; a 4xx/5xx answer raises ControlError with the server's message and status."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

DEFAULT_TIMEOUT_S = 90.0


class ControlError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


class ControlClient:
    def __init__(self, address: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"a control address is HOST:PORT, not {address!r}")
        self.base = f"http://{host}:{port}/v1"
        self.timeout_s = timeout_s

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                message = str(json.loads(raw).get("error", raw.decode(errors="replace")))
            except (ValueError, AttributeError):
                message = raw.decode(errors="replace")
            raise ControlError(exc.code, message) from None
        except (urllib.error.URLError, OSError) as exc:
            raise ControlError(0, f"cannot reach the control plane at {self.base}: {exc}") from None

    def world(self) -> str:
        return str(self.call("GET", "/world")["world"])

    def nodes(self) -> dict[str, dict[str, Any]]:
        return dict(self.call("GET", "/nodes")["nodes"])

    def kinds(self) -> list[str]:
        return list(self.call("GET", "/kinds")["kinds"])

    def add(self, spec: dict[str, Any]) -> dict[str, Any]:
        return dict(self.call("POST", "/faults", spec))

    def active(self) -> list[dict[str, Any]]:
        return list(self.call("GET", "/faults")["faults"])

    def history(self) -> list[dict[str, Any]]:
        return list(self.call("GET", "/faults/history")["history"])

    def heal(self, fault_id: str | None = None) -> list[dict[str, Any]]:
        path = "/faults" if fault_id is None else f"/faults/{fault_id}"
        return list(self.call("DELETE", path)["healed"])
