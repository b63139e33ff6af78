"""The fault control plane's contract: what any running cluster offers to `kafkasim fault`,
the HTTP/JSON control API and the pytest plugin.

One fault model (ARCHITECTURE "Faults are a property of the world"): a fault is the same JSON
object as a scenario's `[[faults]]` table (`kind`, `targets`, `duration_ms`, `mode`, `sides`,
`from`/`to`, disk knobs — see kafkasim/harness/faults.py), without `at_ms` (it acts now), plus
the request-level kinds every world supports:

    {"kind": "request_error", "api_key": 0, "error_code": 6, "count": 5,
     "topic": "t", "partition": 0, "targets": ["broker-1"]}      # answer the next 5 with error 6
    {"kind": "request_delay", "api_key": 1, "delay_ms": 300, "duration_ms": 10000}
    {"kind": "close_connection", "after_requests": 3, "targets": ["leader:t-0"]}

Targets are node names or roles resolved when the fault is applied ("controller",
"leader:<topic>-<partition>", "coordinator:group:<id>", "coordinator:txn:<id>").

A backend validates a fault completely before changing anything: an unknown kind, node or role
raises FaultError (HTTP 4xx) and leaves nothing half-applied.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

REQUEST_FAULT_KINDS = ("request_error", "request_delay", "close_connection")


class FaultError(Exception):
    """A fault the backend refuses: `status` is the HTTP status the control API answers
    (400 malformed, 404 unknown node/role/fault id, 409 not possible in this world now)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class ActiveFault:
    """A fault as applied: its id, the spec it came from, the concrete nodes its roles resolved
    to, when it acted (wall-clock ms since the epoch, and the world's own clock) and when it
    ends (None: until healed)."""

    fault_id: str
    spec: dict[str, Any]
    resolved_targets: list[str]
    applied_wall_ms: float
    applied_world_ms: float
    until_world_ms: float | None = None
    fired: int = 0                    # request-level faults: how many requests it has hit
    extra: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        return {"id": self.fault_id, "spec": self.spec, "targets": self.resolved_targets,
                "applied_wall_ms": self.applied_wall_ms, "applied_world_ms": self.applied_world_ms,
                "until_world_ms": self.until_world_ms, "fired": self.fired, **self.extra}


class FaultBackend(Protocol):
    """A running cluster as the control plane sees it. Implemented by the live world
    (`serve --sim`), by `kafkasim serve` (one real broker) and by `kafkasim cluster`."""

    def world(self) -> str:
        """'live' (simulated, paced to the wall clock), 'real-broker' or 'real-cluster'."""

    def kinds(self) -> list[str]:
        """The fault kinds this world can inject."""

    def nodes(self) -> dict[str, dict[str, Any]]:
        """Node name -> {'role': 'broker'|'zookeeper'|'client', 'bootstrap': 'host:port'|None,
        'up': bool}."""

    def apply(self, spec: dict[str, Any]) -> ActiveFault:
        """Validate, resolve roles, and inject now; FaultError if refused (nothing applied)."""

    def heal(self, fault_id: str | None) -> list[ActiveFault]:
        """Undo one active fault (or all, with None); returns what was healed."""

    def active(self) -> list[ActiveFault]:
        """Faults acting now."""

    def history(self) -> list[dict[str, Any]]:
        """Every fault applied, healed or expired, in order, with times (trace-like records)."""
