"""The driver-protocol loop shared by the Python drivers (kafka-python, aiokafka, confluent-kafka,
kcat): one JSON command per stdin line, one JSON reply per stdout line (see ../README.md).

Only replies go to stdout: `sys.stdout` is pointed at stderr so that nothing a client library
prints can corrupt the reply stream. A command that raises becomes an `error` reply; the driver
keeps serving. `close` (or end of input) closes the client and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from typing import Any, Callable, Optional

Handler = Callable[[dict[str, Any]], dict[str, Any]]


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", default=os.environ.get("KAFKASIM_BOOTSTRAP", "127.0.0.1:9092"))
    ap.add_argument("--client-id", default="kafkasim-driver")
    return ap.parse_args(argv)


def security() -> dict[str, Any]:
    """KAFKASIM_CLIENT_SECURITY (JSON), how every client of a test authenticates: {"protocol":
    "SASL_SSL", "mechanism": "SCRAM-SHA-256", "username": U, "password": P, "ca": CA_PEM, "cert":
    CERT_PEM, "key": KEY_PEM, "keystore": KEY_AND_CERT_PEM}; unset or {} = PLAINTEXT."""
    raw = os.environ.get("KAFKASIM_CLIENT_SECURITY")
    return json.loads(raw) if raw else {}


def librdkafka_security(sec: dict[str, Any]) -> dict[str, str]:
    """security() as librdkafka's properties (confluent-kafka, kcat)."""
    names = {"protocol": "security.protocol", "mechanism": "sasl.mechanisms", "username": "sasl.username",
             "password": "sasl.password", "ca": "ssl.ca.location", "cert": "ssl.certificate.location",
             "key": "ssl.key.location"}
    return {names[k]: str(v) for k, v in sec.items() if k in names}


def value_of(prefix: str, i: int) -> str:
    return f"{prefix}-{i}"


def key_of(key_prefix: Optional[str], i: int) -> Optional[str]:
    return None if key_prefix is None else f"{key_prefix}-{i}"


def text(b: Optional[bytes]) -> Optional[str]:
    return None if b is None else b.decode("utf-8", errors="backslashreplace")


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def note_error(errors: list[str], exc: BaseException, limit: int = 20) -> None:
    """Per-record failures: each distinct message once, at most `limit` of them."""
    msg = describe(exc)
    if msg not in errors and len(errors) < limit:
        errors.append(msg)


def acks_of(cmd: dict[str, Any], default: Any = "all") -> Any:
    a = cmd.get("acks", default)
    return "all" if a in ("all", -1, "-1") else int(a)


class Deadline:
    def __init__(self, timeout_ms: float) -> None:
        self.end = time.monotonic() + timeout_ms / 1000.0

    def left_s(self) -> float:
        return max(0.0, self.end - time.monotonic())

    def expired(self) -> bool:
        return time.monotonic() >= self.end


def serve(handlers: dict[str, Handler], close: Callable[[], None]) -> None:
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    sys.stdout = sys.stderr

    def reply(obj: dict[str, Any], cmd: dict[str, Any]) -> None:
        if "id" in cmd:
            obj["id"] = cmd["id"]
        out.write(json.dumps(obj) + "\n")
        out.flush()

    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            cmd = json.loads(line)
            if not isinstance(cmd, dict):
                raise ValueError("a command is a JSON object")
        except ValueError as exc:
            reply({"op": "error", "error": f"bad command line: {describe(exc)}", "cmd": None}, {})
            continue
        op = cmd.get("op")
        if op == "close":
            try:
                close()
                reply({"op": "closed"}, cmd)
            except BaseException as exc:  # noqa: BLE001 - reported, then exit
                reply({"op": "error", "error": describe(exc), "cmd": "close"}, cmd)
            return
        handler = handlers.get(op)  # type: ignore[arg-type]
        if handler is None:
            reply({"op": "error", "error": f"unknown op {op!r}", "cmd": op}, cmd)
            continue
        try:
            reply(handler(cmd), cmd)
        except BaseException as exc:  # noqa: BLE001 - every failure is an answer
            traceback.print_exc(file=sys.stderr)
            reply({"op": "error", "error": describe(exc), "cmd": op}, cmd)
    try:
        close()
    except BaseException:  # noqa: BLE001 - end of input: best effort
        traceback.print_exc(file=sys.stderr)


Rows = list[list[Any]]


def run_transform(cmd: dict[str, Any], step: Callable[[int, float, list[str], int], tuple[Rows, bool]],
                  assignment: Callable[[], list[int]]) -> dict[str, Any]:
    """The `transform` command's loop, shared by the Python drivers: call `step(batch, timeout_s,
    errors, abort_every)` — poll at most `batch` input records, write them and their offsets in one
    transaction, end it (every `abort_every`-th transaction of the pipeline is aborted on purpose,
    then the consumer rewinds to the committed offsets) — until `max` input records went out in
    committed transactions or `timeout_ms` passed. `step` answers (the input records of the
    transaction, committed?)."""
    committed: list[Rows] = []
    aborted = 0
    errors: list[str] = []
    want = int(cmd.get("max", 1 << 30))
    batch = int(cmd.get("batch", 50))
    deadline = Deadline(cmd.get("timeout_ms", 10000))
    while sum(len(t) for t in committed) < want and not deadline.expired():
        rows, ok = step(batch, min(0.2, deadline.left_s()), errors, int(cmd.get("abort_every") or 0))
        if rows and ok:
            committed.append(rows)
        elif rows:
            aborted += 1
    return {"op": "transformed", "transactions": committed, "aborted": aborted, "assignment": assignment(),
            "errors": errors}
