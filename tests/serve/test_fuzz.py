"""Hostile input at `kafkasim serve` over real sockets (tests/serve/fuzz_support.py makes the
frames): every frame is answered or the connection closed, the broker never dies and never
writes a traceback, and between batches a real client (kafka-python) still produces and reads
back a known record — and at the end reads back every record acknowledged before.

CI runs a seeded subset that still sends every api key; the full run is
`KAFKASIM_FUZZ_FRAMES=100000 python -m pytest -q tests/serve/test_fuzz.py -s` (KAFKASIM_FUZZ_SEED
picks another seed). The figures (frames, answered, closed, crashes, peak RSS) are printed.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kafkasim.config import BROKER_KEYS
from kafkasim.protocol import api as A
from tests.serve.conftest import free_port
from tests.serve.fuzz_support import FUZZ_NAME, KINDS, WEIGHTS, Case, Sender, make_case, named_key

pytestmark = pytest.mark.real

FRAMES = int(os.environ.get("KAFKASIM_FUZZ_FRAMES", "8000"))
SEED = int(os.environ.get("KAFKASIM_FUZZ_SEED", "17"))
BATCH = 1000
WORKERS = 4
MAX_BYTES = 1 << 20           # socket.request.max.bytes for the fuzzed broker (1 MiB)
READ_TIMEOUT_S = 1.0          # for a request Kafka may hold (MAY_HOLD)
SLOW_TIMEOUT_S = 15.0         # for any other: the broker may be busy with another connection's request
HEALTH_TOPIC = "fuzz-health-check-topic"
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_alice="alice-secret";')
# Requests Kafka itself may hold past the read timeout: a produce or fetch waiting out its
# timeout/max wait, a join or sync waiting for the group, topic operations waiting for their
# timeout — a mutated int32 there is a long wait, not a hang.
MAY_HOLD = {A.PRODUCE, A.FETCH, A.JOIN_GROUP, A.SYNC_GROUP, A.CREATE_TOPICS, A.DELETE_TOPICS,
            A.CREATE_PARTITIONS, A.ELECT_LEADERS, A.ALTER_PARTITION_REASSIGNMENTS, A.CONTROLLED_SHUTDOWN}


class FuzzedBroker:
    """`kafkasim serve` with its stderr and stdout in files, so a traceback cannot hide."""

    def __init__(self, tmp: Path) -> None:
        self.port = self.sasl_port = free_port()
        self.trace = tmp / "trace.jsonl"
        self.stderr_path, self.stdout_path = tmp / "stderr.txt", tmp / "stdout.txt"
        self._err, self._out = self.stderr_path.open("w"), self.stdout_path.open("w")
        configs = {"socket.request.max.bytes": MAX_BYTES, "group.min.session.timeout.ms": 10,
                   "group.initial.rebalance.delay.ms": 0}
        if "sasl.enabled.mechanisms" in BROKER_KEYS:   # a broker with SASL: its garbage goes to a SASL listener
            self.sasl_port = free_port()
            configs.update({
                "listeners": f"PLAINTEXT://127.0.0.1:{self.port},SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}",
                "inter.broker.listener.name": "PLAINTEXT", "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS})
        cmd = [sys.executable, "-m", "kafkasim.cli", "serve", "--port", str(self.port), "--log-dir", str(tmp / "logs"),
               "--trace", str(self.trace)]
        for key, value in configs.items():
            cmd += ["--config", f"{key}={value}"]
        self.proc = subprocess.Popen(cmd, stdout=self._out, stderr=self._err)
        deadline = time.monotonic() + 30
        while "listening on" not in self.stdout_path.read_text():
            assert self.proc.poll() is None, f"kafkasim serve exited: {self.stderr()}"
            assert time.monotonic() < deadline, "kafkasim serve did not start within 30 s"
            time.sleep(0.1)

    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def task_errors(self) -> list[str]:
        return [ln for ln in self.trace.read_text().splitlines() if '"task_error"' in ln] if self.trace.exists() else []

    def peak_rss_kb(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
        return -1

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._err.close()
        self._out.close()


@pytest.fixture
def fuzzed(tmp_path: Path) -> Iterator[FuzzedBroker]:
    b = FuzzedBroker(tmp_path)
    yield b
    b.stop()


class Health:
    """A produce + fetch of a known record with kafka-python; every acknowledged record kept."""

    def __init__(self, bootstrap: str) -> None:
        from kafka import KafkaProducer
        self.bootstrap = bootstrap
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=5, request_timeout_ms=20000)
        self.acked: dict[int, bytes] = {}

    def check(self, n: int) -> None:
        # The fuzzer's topic deleted by a fuzzed DeleteTopics comes back (auto-created), so the
        # next batch's produce requests reach the record checks again.
        self.producer.send(FUZZ_NAME, value=b"x", partition=0)
        value = f"health-{n}".encode()
        offset = self.producer.send(HEALTH_TOPIC, value=value, partition=0).get(timeout=30).offset
        self.acked[offset] = value
        got = self.read_from(offset, 1)
        assert got.get(offset) == value, f"health check {n}: offset {offset} read back {got.get(offset)!r}"

    def read_from(self, offset: int, count: int) -> dict[int, bytes]:
        from kafka import KafkaConsumer, TopicPartition
        tp = TopicPartition(HEALTH_TOPIC, 0)
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False)
        consumer.assign([tp])
        consumer.seek(tp, offset)
        out: dict[int, bytes] = {}
        deadline = time.monotonic() + 30
        while len(out) < count and time.monotonic() < deadline:
            for recs in consumer.poll(timeout_ms=500).values():
                out.update((r.offset, r.value) for r in recs)
        consumer.close()
        return out

    def close(self) -> None:
        self.producer.close()


def _cases(n_frames: int, seed: int) -> Iterator[Case]:
    """The seeded frames: kinds by WEIGHTS, api keys in turn (so a few hundred frames already
    send every key), versions at random in the key's range."""
    rng = random.Random(seed)
    keys = sorted(A.API_BY_KEY)
    for i in range(n_frames):
        key = keys[i % len(keys)]
        info = A.API_BY_KEY[key]
        kind = rng.choices(KINDS, WEIGHTS)[0]
        yield make_case(kind, key, rng.randint(info.min_version, info.max_version), rng, i, MAX_BYTES)


class Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.outcomes: Counter[str] = Counter()
        self.by_kind: Counter[tuple[str, str]] = Counter()
        self.timeouts: Counter[int] = Counter()
        self.keys: set[int] = set()
        self.accepted_garbage: list[str] = []

    def add(self, case: Case, outcome: str) -> None:
        with self.lock:
            self.outcomes[outcome] += 1
            self.by_kind[(case.kind, outcome)] += 1
            self.keys.add(case.key)
            if outcome == "timeout":   # by the api key the frame names (a mutation may have changed it)
                self.timeouts[named_key(case.steps[-1] if case.steps else case.data)] += 1


def _send(broker: FuzzedBroker, cases: list[Case], tally: Tally) -> None:
    sender, sasl = Sender(broker.port, READ_TIMEOUT_S), Sender(broker.sasl_port, READ_TIMEOUT_S)
    for case in cases:
        if case.steps:   # sasl: a fresh connection, the handshake, then the garbage
            sasl.drop()
            outcome, reply = "closed", None
            for step in case.steps:
                outcome, reply = sasl.exchange(step, timeout_s=SLOW_TIMEOUT_S)
                if outcome != "answered":
                    break
            if outcome == "answered" and not _sasl_refused(step, reply):
                tally.accepted_garbage.append(step[:64].hex())
        else:
            wait = READ_TIMEOUT_S if named_key(case.data) in MAY_HOLD else SLOW_TIMEOUT_S
            outcome, _ = sender.exchange(case.data, case.close_after, wait)
        tally.add(case, outcome)
    sender.drop()
    sasl.drop()


def _sasl_refused(sent: bytes, reply: bytes | None) -> bool:
    """A reply to garbage sent where SaslAuthenticate belongs must carry an error (Kafka:
    SASL_AUTHENTICATION_FAILED, then it closes; ILLEGAL_SASL_STATE on a listener without SASL).
    The reply's error_code follows the response header: v0 (correlation id) before
    SaslAuthenticate v2, v1 (+ an empty tagged-field byte) from it."""
    if named_key(sent) != A.SASL_AUTHENTICATE or reply is None:
        return True   # random garbage that another api answered: not a SASL token
    version = int.from_bytes(sent[6:8], "big", signed=True)
    at = 5 if version >= 2 else 4
    return len(reply) < at + 2 or int.from_bytes(reply[at:at + 2], "big", signed=True) != 0


def test_hostile_frames_never_crash_the_broker(fuzzed: FuzzedBroker) -> None:
    health = Health(f"127.0.0.1:{fuzzed.port}")
    health.check(0)
    tally = Tally()
    cases = list(_cases(FRAMES, SEED))
    started = time.monotonic()
    try:
        for b, start in enumerate(range(0, len(cases), BATCH)):
            batch = cases[start:start + BATCH]
            with ThreadPoolExecutor(WORKERS) as pool:
                list(pool.map(_send, [fuzzed] * WORKERS, [batch[w::WORKERS] for w in range(WORKERS)],
                              [tally] * WORKERS))
            assert fuzzed.proc.poll() is None, f"the broker died after batch {b}: {fuzzed.stderr()[-3000:]}"
            health.check(b + 1)
        survived = health.read_from(0, max(health.acked) + 1)
        assert {o: survived.get(o) for o in health.acked} == health.acked, "acknowledged records were lost"
    finally:
        health.close()
    elapsed = time.monotonic() - started
    o = tally.outcomes
    print(f"\nfuzz: {sum(o.values())} frames in {elapsed:.0f} s (seed {SEED}): {o['answered']} answered, "
          f"{o['closed']} closed, {o['timeout']} held past {READ_TIMEOUT_S} s, crashes "
          f"{len(fuzzed.task_errors())}, peak RSS {fuzzed.peak_rss_kb() // 1024} MiB; "
          f"held by key {dict(tally.timeouts)}; by kind {dict(sorted(tally.by_kind.items()))}")
    assert sum(o.values()) == FRAMES
    assert tally.keys == set(A.API_BY_KEY), "every api key is sent"
    assert fuzzed.task_errors() == [], "the broker's connection tasks failed:\n" + "\n".join(fuzzed.task_errors()[:20])
    assert fuzzed.stderr() == "", "the broker wrote to stderr:\n" + fuzzed.stderr()[-5000:]
    assert set(tally.timeouts) <= MAY_HOLD, f"requests left unanswered: {dict(tally.timeouts)}"
    assert o["answered"] > 0 and o["closed"] > 0
    assert tally.accepted_garbage == [], "garbage mid-SASL-handshake was answered without an error"
    assert tally.by_kind[("sasl", "closed")] > 0
