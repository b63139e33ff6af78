"""Cases as data: a Case is a named sequence of Steps; a Step builds one request from the side's
context (the case's topic names, what earlier steps answered on the SAME side) and says whether its
response is compared. `run_case` plays a case against one broker; `diff_case` compares two runs.

A step at a version the side does not advertise (its ApiVersions answer) is not sent: its result
is "not advertised", which differs from a real answer, so the case shows as a difference."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from kafkasim.protocol.primitives import DEFAULT, Struct
from tests.conformance.normalize import Numbering, compare, normalise, tree_of
from tests.conformance.wire import Closed, Connection

Builder = Callable[["Ctx"], Struct]


@dataclass(frozen=True)
class Step:
    build: Builder
    version: Optional[int] = None     # None: the case's version
    check: bool = True                # compare this step's response
    retry_until: Optional[Callable[[Any], bool]] = None  # setup steps that wait (coordinator load)
    save: Optional[str] = None        # store the response under this name in ctx.saved
    only: Optional[Callable[["Ctx", Any], Any]] = None  # the part of a cluster-wide answer the case owns


@dataclass(frozen=True)
class Case:
    name: str                         # "<Api>.v<version>.<scenario>", unique
    api: str
    version: int
    steps: tuple[Step, ...]

    @property
    def scenario(self) -> str:
        return self.name.split(".", 2)[2]


@dataclass
class Ctx:
    case: Case
    conn: Connection
    advertised: dict[int, tuple[int, int]]
    saved: dict[str, Any] = field(default_factory=dict)

    def topic(self, i: int = 0) -> str:
        """The case's own topic names: unique per case, the same on both sides."""
        base = re.sub(r"[^a-zA-Z0-9._-]", "-", self.case.name)
        return f"t-{base}-{i}"

    def group(self, i: int = 0) -> str:
        return f"g-{self.case.name}-{i}"

    def topic_id(self, name: str = "meta") -> bytes:
        """The topic id of the case's first topic, as the side's Metadata (saved as `name`) said."""
        resp = self.saved[name]
        return bytes(resp.topics[0].topic_id)


def fit(obj: Any, version: int) -> Any:
    """Reset fields the version does not have to their defaults, as Kafka's request builders do
    (a caller writes the newest shape; each version keeps what it can carry)."""
    if isinstance(obj, list):
        for v in obj:
            fit(v, version)
        return obj
    if not isinstance(obj, Struct):
        return obj
    for spec in type(obj).SPEC:
        if spec.versions[0] <= version <= spec.versions[1]:
            fit(getattr(obj, spec.attr), version)
        elif spec.default is DEFAULT:
            setattr(obj, spec.attr, [] if spec.type.startswith("[]") else spec.struct())
        else:
            setattr(obj, spec.attr, spec.default)
    return obj


def run_case(case: Case, conn: Connection, advertised: dict[int, tuple[int, int]]) -> list[Any]:
    """Play the case; the normalised results of its checked steps (and of a step that failed)."""
    ctx = Ctx(case, conn, advertised)
    numbering = Numbering()
    results: list[Any] = []
    for i, step in enumerate(case.steps):
        version = case.version if step.version is None else step.version
        body = step.build(ctx)
        assert body.API_KEY is not None
        lo, hi = advertised.get(body.API_KEY, (0, -1))
        if not lo <= version <= hi:
            results.append(f"step {i}: {type(body).__name__} v{version} not advertised")
            break
        try:
            resp = _send(conn, fit(body, version), version, step.retry_until)
        except Closed:
            results.append(f"step {i}: connection closed")
            conn.close()
            break
        if step.save:
            ctx.saved[step.save] = resp
        if step.check:
            tree = tree_of(resp, version)
            results.append(normalise(step.only(ctx, tree) if step.only else tree, numbering))
    return results


def _send(conn: Connection, body: Struct, version: int, until: Optional[Callable[[Any], bool]]) -> Any:
    """Send; a setup step with `until` is retried while it fails (a coordinator still loading),
    out of a retry budget per connection (a broker that never gets there costs it only once)."""
    while True:
        start = time.monotonic()
        resp = conn.send(body, version)  # type: ignore[arg-type]
        if until is None or until(resp) or conn.retry_budget_s <= 0:
            return resp
        time.sleep(0.1)
        conn.retry_budget_s -= time.monotonic() - start


def diff_case(real: list[Any], sim: list[Any]) -> list[str]:
    if len(real) != len(sim):
        return [f"{len(real)} results from real, {len(sim)} from sim: real={real!r:.600} sim={sim!r:.600}"]
    out: list[str] = []
    for i, (a, b) in enumerate(zip(real, sim)):
        out += compare(a, b, f"step{i}")
    return out
