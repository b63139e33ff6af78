"""confluent-kafka (librdkafka) against `kafkasim serve` and against librdkafka's own in-process
mock cluster, driven the same way in the same run: produce N messages of SIZE bytes with
acks=all, then consume them from the earliest offset (assign mode, one partition). Prints msg/s
for produce and consume on both, the kafkasim/mock ratios, and kafkasim's peak RSS (VmHWM).

    python bench/client_bench.py [--messages N] [--size B] [--profile broker.prof]

--profile runs the broker under cProfile (python -m cProfile -o FILE) and prints its top
functions by own time and by cumulative time after the run (the profiler slows the broker down;
use the figures of a run without it).
"""

from __future__ import annotations

import argparse
import os
import pstats
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

from confluent_kafka import Consumer, Producer, TopicPartition

ROOT = Path(__file__).resolve().parents[1]
TOPIC = "bench"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_kafkasim(log_dir: str, profile: Optional[str]) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cmd = [sys.executable]
    if profile:
        cmd += ["-m", "cProfile", "-o", profile]
    cmd += ["-m", "kafkasim.cli", "serve", "--port", str(port), "--log-dir", log_dir]
    err = open(os.path.join(os.path.dirname(log_dir), "broker.err"), "w")
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err, text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"kafkasim serve exited: {Path(err.name).read_text()[-3000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("kafkasim serve did not listen within 30 s")


def peak_rss_kib(pid: int) -> Optional[int]:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def make_producer(conf: dict[str, Any]) -> Producer:
    return Producer(dict(conf, **{"acks": "all", "linger.ms": 5, "enable.idempotence": False}))


def produce(p: Producer, topic: str, n: int, size: int) -> float:
    failed: list[Any] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            failed.append(err)

    payload = b"x" * size
    t0 = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, payload, partition=0, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    left = p.flush(120)
    elapsed = time.perf_counter() - t0
    if left or failed:
        raise RuntimeError(f"produce: {left} undelivered, {len(failed)} failed (first: {failed[:1]})")
    return elapsed


def consume(bootstrap: str, topic: str, n: int) -> float:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-assign-only", "enable.auto.commit": False,
                  "enable.partition.eof": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got = 0
    t0 = time.perf_counter()
    deadline = time.monotonic() + 120
    while got < n and time.monotonic() < deadline:
        for m in c.consume(num_messages=10000, timeout=1.0):
            if m.error() is None:
                got += 1
    elapsed = time.perf_counter() - t0
    c.close()
    if got < n:
        raise RuntimeError(f"consume: {got} of {n} within 120 s")
    return elapsed


def broker_address(producer: Producer, topic: str) -> str:
    """Where the producer's cluster is: for the mock cluster (it lives inside the producer's
    librdkafka instance) the address its metadata names, which other clients reach over TCP."""
    md = producer.list_topics(topic, timeout=10)
    b = next(iter(md.brokers.values()))
    return f"{b.host}:{b.port}"


def run(label: str, conf: dict[str, Any], n: int, size: int, round_n: int) -> dict[str, float]:
    """n messages in rounds of at most round_n, each round a fresh topic: produce it all, then
    consume it all (the mock cluster keeps only ~5 MB / 100k messages per partition, so a
    round must fit in that)."""
    producer = make_producer(conf)
    produce_s = consume_s = 0.0
    done = r = 0
    while done < n:
        k = min(round_n, n - done)
        topic = f"{TOPIC}-{r}"
        # both auto-create the topic on first use (the mock cluster has no CreateTopics); the
        # bench writes to and reads from partition 0 only
        bootstrap = broker_address(producer, topic)
        produce_s += produce(producer, topic, k, size)
        consume_s += consume(bootstrap, topic, k)
        done += k
        r += 1
    rates = {"produce": n / produce_s, "consume": n / consume_s}
    print(f"{label:<10} produce {rates['produce']:>10,.0f} msg/s   consume {rates['consume']:>10,.0f} msg/s",
          flush=True)
    return rates


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--round", type=int, default=40_000, help="messages per topic (produce all, then consume all)")
    ap.add_argument("--profile", help="run the broker under cProfile, writing this file")
    ap.add_argument("--top", type=int, default=25, help="profile lines to print")
    args = ap.parse_args()
    print(f"confluent-kafka, {args.messages:,} x {args.size} B, acks=all, linger.ms=5, partition 0 of a fresh "
          f"topic per {args.round:,} messages", flush=True)

    mock = run("mock", {"test.mock.num.brokers": 1}, args.messages, args.size, args.round)

    with tempfile.TemporaryDirectory(prefix="kafkasim-bench-") as tmp:
        proc, bootstrap = start_kafkasim(os.path.join(tmp, "logs"), args.profile)
        try:
            try:
                sim = run("kafkasim", {"bootstrap.servers": bootstrap}, args.messages, args.size, args.round)
            except Exception:
                print("broker stderr:\n" + Path(tmp, "broker.err").read_text()[-3000:], file=sys.stderr)
                raise
            rss = peak_rss_kib(proc.pid)
        finally:
            proc.send_signal(signal.SIGINT)  # lets cProfile write its file
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    print(f"ratio kafkasim/mock: produce {sim['produce'] / mock['produce']:.2f}   "
          f"consume {sim['consume'] / mock['consume']:.2f}")
    print(f"kafkasim peak RSS (VmHWM): {rss / 1024:.1f} MiB" if rss else "kafkasim peak RSS: unavailable")
    if args.profile and os.path.exists(args.profile):
        st = pstats.Stats(args.profile)
        print(f"\n--- broker profile ({args.profile}): top {args.top} by own time ---")
        st.sort_stats("tottime").print_stats(args.top)
        print(f"--- top {args.top} by cumulative time ---")
        st.sort_stats("cumulative").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
