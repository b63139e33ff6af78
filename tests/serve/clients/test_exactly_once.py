"""The client matrix's exactly-once row: every client with transactions, through its driver
(real/clients/<client>/, ops `produce` with `transactional_id`, `consume` with `isolation`,
`transform`), against `kafkasim serve`.

1. A transactional producer writes committed and aborted transactions to a 3-partition input topic;
   read_uncommitted sees the aborted records (they are in the log), read_committed must not.
2. Two consume-transform-produce members (read_committed group members on the input, each with its
   own transactional producer, offsets sent to the transaction with the consumer's group metadata)
   copy every input value to the same partition of the output topic; every third transaction of a
   member is aborted on purpose after its records and offsets were sent (the member rewinds to the
   committed offsets and does the work again). Once both own partitions, more
   input is written and one member leaves (a rebalance mid-stream); the other finishes.
3. read_committed on the output must give every committed input value exactly once.

Measured per client: the pipeline completes; aborted reads (records of aborted transactions seen by
read_committed); torn transactions (committed transactions partly visible); duplicates in the
output. Each is printed as a table row (`pytest -s`) and asserted.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator, Optional

import pytest

from tests.serve.clients.driver import Driver, DriverError, create_topic, driver_missing
from tests.serve.conftest import ServedBroker

pytestmark = pytest.mark.real

EOS_CLIENTS = ["kafka-python", "confluent-kafka", "java", "franz-go"]
PARTITIONS = 3
_uniq = itertools.count()
_RUN = uuid.uuid4().hex[:6]  # distinct names on a broker that outlives the run (KAFKASIM_CLIENTS_BOOTSTRAP)


@pytest.fixture
def drivers(served: ServedBroker) -> Iterator[list[Driver]]:
    started: list[Driver] = []
    yield started
    for d in started:
        d.kill()


def start(drivers: list[Driver], client: str, served: ServedBroker, client_id: Optional[str] = None) -> Driver:
    why = driver_missing(client)
    if why:
        pytest.fail(why)
    d = Driver(client, served.bootstrap, client_id=client_id)
    drivers.append(d)
    return d


class Input:
    """The input topic's transactions, as the source producer reported them."""

    def __init__(self, src: Driver, topic: str, txn_id: str) -> None:
        self.src, self.topic, self.txn_id = src, topic, txn_id
        self.committed: list[list[str]] = []
        self.aborted: list[list[str]] = []

    def write(self, tag: str, count: int, aborted: int) -> None:
        """Per partition: a committed transaction of `count` records, then an aborted one."""
        for p in range(PARTITIONS):
            for prefix, n, end in ((f"{tag}-p{p}", count, "commit"), (f"junk-{tag}-p{p}", aborted, "abort")):
                r = self.src.produce(self.topic, n, prefix, partition=p, transactional_id=self.txn_id,
                                     transaction=end)
                assert r["errors"] == [], r["errors"]
                assert r["transaction"] == {"commit": "committed", "abort": "aborted"}[end], r
                assert len(r["acked"]) == n, f"{len(r['acked'])} of {n} acknowledged"
                (self.committed if end == "commit" else self.aborted).append([a[2] for a in r["acked"]])

    def committed_values(self) -> set[str]:
        return {v for t in self.committed for v in t}

    def aborted_values(self) -> set[str]:
        return {v for t in self.aborted for v in t}


def read_all(d: Driver, topic: str, isolation: str, expected: int, timeout_s: float = 30.0) -> list[str]:
    """Assign mode from earliest: until `expected` values, then one more short poll so that extra
    records (duplicates, aborted ones) are seen too."""
    got: list[str] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < expected and time.monotonic() < deadline:
        got += [v for _, _, v in d.consume(topic, max=1 << 20, timeout_ms=1000, isolation=isolation)["records"]]
    got += [v for _, _, v in d.consume(topic, max=1 << 20, timeout_ms=500, isolation=isolation)["records"]]
    return got


def torn(transactions: list[list[str]], seen: list[str]) -> int:
    """Transactions partly visible: some of their records read, not all."""
    have = set(seen)
    return sum(1 for t in transactions if 0 < len(have.intersection(t)) < len(t))


class Pipeline:
    def __init__(self, members: list[Driver], inp: str, out: str, group: str) -> None:
        self.members, self.inp, self.out, self.group = members, inp, out, group
        self.transactions: list[list[str]] = []
        self.aborted = 0
        self.errors: list[str] = []

    def round(self, round_ms: int = 500) -> list[list[int]]:
        """One `transform` on every member at once; answers each member's assignment."""
        sent = [(m, m.send({"op": "transform", "input": self.inp, "output": self.out, "group": self.group,
                            "transactional_id": f"{self.group}-{m.client_id}", "max": 1 << 20, "batch": 20,
                            "abort_every": 3,
                            "timeout_ms": round_ms, "session_timeout_ms": 10000, "heartbeat_interval_ms": 500}))
                for m in self.members]
        assignments = []
        for m, cid in sent:
            r = m.recv(cid, timeout_s=round_ms / 1000 + 60)
            if r["op"] == "error":
                raise DriverError(m.client, r)
            self.transactions += [[v for _, _, v in t] for t in r["transactions"]]
            self.aborted += r["aborted"]
            self.errors += [e for e in r["errors"] if e not in self.errors]
            assignments.append(r["assignment"])
        return assignments

    def processed(self) -> set[str]:
        return {v for t in self.transactions for v in t}


@pytest.mark.parametrize("client", EOS_CLIENTS)
def test_exactly_once_pipeline(served: ServedBroker, drivers: list[Driver], client: str) -> None:
    began = time.monotonic()
    n = f"{_RUN}-{next(_uniq)}"
    inp, out, group = f"eos-in-{client}-{n}", f"eos-out-{client}-{n}", f"eos-{client}-{n}"
    create_topic(served.bootstrap, inp, PARTITIONS)
    create_topic(served.bootstrap, out, PARTITIONS)
    src = start(drivers, client, served, client_id="eos-source")
    data = Input(src, inp, f"src-{group}")
    data.write("one", 30, 10)

    # read_committed on the input: the aborted records are in the log, and not delivered
    uncommitted = read_all(src, inp, "read_uncommitted", 120)
    assert data.aborted_values() <= set(uncommitted), "the aborted records are not in the log at all"
    committed_read = read_all(src, inp, "read_committed", 90)
    input_aborted_reads = len(data.aborted_values().intersection(committed_read))
    input_torn = torn(data.committed, committed_read)

    with ThreadPoolExecutor(2) as pool:  # two JVMs start in parallel
        members = list(pool.map(lambda i: start(drivers, client, served, client_id=f"m{i}"), (1, 2)))
    pipe = Pipeline(members, inp, out, group)
    deadline = time.monotonic() + 60
    while not all(pipe.round()) and time.monotonic() < deadline:
        pass
    both_owned = time.monotonic() < deadline
    data.write("two", 30, 10)  # more input, then one member leaves mid-stream
    leaving = members.pop(0)
    leaving.close()
    want = data.committed_values()
    last: list[list[int]] = [[]]
    while (not want <= pipe.processed() or last[0] != list(range(PARTITIONS))) and time.monotonic() < deadline + 30:
        last = pipe.round()

    output = read_all(src, out, "read_committed", len(want))
    # the aborted attempts' records are in the output log (read_uncommitted sees them)
    output_uncommitted = read_all(src, out, "read_uncommitted", len(want) + 1)
    dup = Counter(output)
    row = {
        "client": client,
        "completes": set(output) == want,
        "aborted_reads": input_aborted_reads + len(data.aborted_values().intersection(output)),
        "torn": input_torn + torn(pipe.transactions, output),
        "duplicates": sum(c - 1 for c in dup.values()),
        "output": len(output), "output_uncommitted": len(output_uncommitted), "expected": len(want),
        "pipeline_txns": len(pipe.transactions),
        "aborted_pipeline_txns": pipe.aborted, "seconds": round(time.monotonic() - began, 1),
    }
    print(f"\nEXACTLY-ONCE {row}")
    assert both_owned, "the two pipeline members never owned partitions at the same time"
    assert pipe.aborted > 0, "no pipeline transaction was aborted: the abort path went untested"
    assert len(output_uncommitted) > len(want), "the aborted pipeline transactions left nothing in the output log"
    assert last[0] == list(range(PARTITIONS)), f"the remaining member owns {last[0]}"
    assert row["aborted_reads"] == 0 and row["torn"] == 0 and row["duplicates"] == 0, (row, pipe.errors)
    assert row["completes"], (f"missing {sorted(want - set(output))[:10]}, extra {sorted(set(output) - want)[:10]}",
                              row, pipe.errors)
    members[0].close()


def test_abort_then_commit_read_committed(served: ServedBroker, drivers: list[Driver]) -> None:
    """The reading side alone, with a reader of another client: confluent-kafka's read_committed
    sees exactly the committed records that kafka-python's transactional producer wrote."""
    topic = f"eos-cross-{_RUN}-{next(_uniq)}"
    create_topic(served.bootstrap, topic, PARTITIONS)
    data = Input(start(drivers, "kafka-python", served), topic, f"src-{topic}")
    data.write("x", 5, 5)
    reader = start(drivers, "confluent-kafka", served)
    got = read_all(reader, topic, "read_committed", 15)
    assert sorted(got) == sorted(data.committed_values())
