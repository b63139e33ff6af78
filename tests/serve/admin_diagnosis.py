"""CreateTopics through librdkafka's admin client, with the evidence kept when it stalls.

Twice in CI (stops 15 and 16), and never in 40+ local runs, a CreateTopics from confluent-kafka's
AdminClient to a freshly started three-broker cluster was not answered in 60 s, and no broker
created the topic. Without the client's side nothing says whether the request ever left it. So
the admin client here runs with librdkafka's admin, broker and metadata debug log in a file; a
stalled attempt is reported as a warning carrying that log's tail and each broker's last trace
events, and retried once with a new client, as a user's tooling would (a topic the first attempt
did create then answers TOPIC_ALREADY_EXISTS, which counts as created). A second stall fails the
test with the same evidence.
"""

from __future__ import annotations

import json
import logging
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def create_topic(bootstrap: str, topic: Any, log_dir: Path, traces: Sequence[Path] = (),
                 seconds: float = 60) -> None:
    """Create `topic` (a confluent_kafka NewTopic); see the module's docstring."""
    first = _attempt(bootstrap, topic, log_dir / "admin-1.log", seconds)
    if first is None:
        return
    warnings.warn(UserWarning(_evidence(f"CreateTopics {topic.topic}: {first}; retrying with a new client",
                                        log_dir / "admin-1.log", traces)))
    second = _attempt(bootstrap, topic, log_dir / "admin-2.log", seconds)
    assert second is None, _evidence(f"CreateTopics {topic.topic}: {second} (twice)", log_dir / "admin-2.log", traces)


def _attempt(bootstrap: str, topic: Any, log: Path, seconds: float) -> str | None:
    """None when created (or already there); else what went wrong."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient

    logger = logging.getLogger(f"kafkasim.tests.rdkafka.{log}")
    handler = logging.FileHandler(log)
    handler.setFormatter(logging.Formatter("%(created).3f %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    # librdkafka hands its log lines to Python only inside poll(): the loop below polls.
    admin = AdminClient({"bootstrap.servers": bootstrap, "debug": "admin,broker,metadata", "logger": logger})
    try:
        future = admin.create_topics([topic], request_timeout=seconds)[topic.topic]
        deadline = time.monotonic() + seconds
        while not future.done() and time.monotonic() < deadline:
            admin.poll(0.2)
        admin.poll(0)
        if not future.done():
            return f"not answered in {seconds:.0f} s"
        try:
            future.result()
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                return f"failed: {exc}"
        return None
    finally:
        logger.removeHandler(handler)
        handler.close()


def _evidence(what: str, log: Path, traces: Sequence[Path], lines: int = 40) -> str:
    parts = [what, f"-- librdkafka's last {lines} lines ({log}):", *_tail(log, lines)]
    for trace in traces:
        events = [_event(line) for line in _tail(trace, 8)]
        parts.append(f"-- {trace}: " + "; ".join(f"{e.get('ev')}@{e.get('t', 0):.0f}" for e in events))
    return "\n".join(parts)


def _event(line: str) -> dict[str, Any]:
    try:
        return dict(json.loads(line))
    except ValueError:   # a line the broker was still writing
        return {"ev": line[:60]}


def _tail(path: Path, lines: int) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()[-lines:]
    except OSError as exc:
        return [f"(unreadable: {exc})"]
