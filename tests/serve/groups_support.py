"""The consumer-group scenario the real-client tests run against `kafkasim serve`, written once
with a small adapter per client library.

Scenario: 6 partitions, 48 messages each, produced in three stages. Three members of a group
consume and commit the first stage; a fourth joins and the four consume the second; one leaves
(a clean close, i.e. LeaveGroup) and the three consume the third; all close. Then 16 more per
partition are produced and a new set of members of the same group must resume exactly at the
committed offsets.

Bookkeeping is at-least-once proof: a member counts a record only once a commit covering it
succeeded (a commit refused because of a rebalance leaves the records to the partition's next
owner), so the ledger must hold every offset exactly once per partition, in offset order, and
each value must be the one produced at that offset.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Protocol

from tests.serve.conftest import wait_until

TOPIC_PARTITIONS = 6
PER_PARTITION = 48  # three stages of 16
GROUP_BROKER_CONFIG: dict[str, object] = {
    # A short initial delay, as Kafka's 3 s does at scale: members started together join one
    # generation, and the first leader sees the topic's metadata before it assigns.
    "group.initial.rebalance.delay.ms": 300,
    "group.min.session.timeout.ms": 1000,
    "offsets.topic.num.partitions": 5,
    "num.partitions": TOPIC_PARTITIONS,
}

Record = tuple[int, int, bytes]  # partition, offset, value


class GroupClient(Protocol):
    """One member of the group, as a client library drives it."""

    def poll(self) -> list[Record]: ...

    def commit(self, offsets: dict[int, int]) -> bool:
        """Commit next offsets per partition synchronously; False if the commit failed."""

    def assignment(self) -> list[int]: ...

    def close(self) -> None: ...


def value_of(partition: int, offset: int) -> bytes:
    return f"p{partition}-{offset:04d}".encode()


def produce(bootstrap: str, topic: str, start: int, count: int) -> None:
    """`count` more records per partition, offsets start..start+count-1, with confluent-kafka."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    errors: list[object] = []
    for i in range(start, start + count):
        for partition in range(TOPIC_PARTITIONS):
            p.produce(topic, value=value_of(partition, i), partition=partition,
                      on_delivery=lambda err, msg: errors.append(err) if err is not None else None)
    assert p.flush(60) == 0 and errors == [], errors


@dataclass
class Ledger:
    lock: threading.Lock = field(default_factory=threading.Lock)
    records: list[tuple[str, Record]] = field(default_factory=list)

    def add(self, member: str, records: list[Record]) -> None:
        with self.lock:
            self.records.extend((member, r) for r in records)

    def count(self) -> int:
        with self.lock:
            return len(self.records)

    def by_partition(self) -> dict[int, list[Record]]:
        with self.lock:
            out: dict[int, list[Record]] = {}
            for _, r in self.records:
                out.setdefault(r[0], []).append(r)
            return out

    def members(self) -> set[str]:
        with self.lock:
            return {m for m, _ in self.records}


class Member(threading.Thread):
    """Poll, commit what was polled, count it once the commit went through."""

    def __init__(self, name: str, make_client: Callable[[], GroupClient], ledger: Ledger) -> None:
        super().__init__(name=name, daemon=True)
        self.make_client, self.ledger = make_client, ledger
        self.stop_event = threading.Event()
        self.assignments: list[list[int]] = []
        self.error: Optional[BaseException] = None
        self.pending: dict[int, list[Record]] = {}

    def run(self) -> None:
        try:
            client = self.make_client()
            try:
                while not self.stop_event.is_set():
                    self._step(client)
            finally:
                client.close()
        except BaseException as exc:  # reported by the test thread
            self.error = exc

    def _step(self, client: GroupClient) -> None:
        batch = client.poll()
        assignment = sorted(client.assignment())
        if not self.assignments or self.assignments[-1] != assignment:
            self.assignments.append(assignment)
        if not batch:
            return
        for p, off, value in batch:
            # A refetch after a rebalance replaces whatever was pending from that offset on.
            self.pending[p] = [r for r in self.pending.get(p, []) if r[1] < off] + [(p, off, value)]
        offsets = {p: recs[-1][1] + 1 for p, recs in self.pending.items() if recs}
        if client.commit(offsets):
            done = [r for recs in self.pending.values() for r in recs]
            self.pending = {}
            self.ledger.add(self.name, sorted(done, key=lambda r: (r[0], r[1])))

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=60)
        assert not self.is_alive(), f"{self.name} did not stop"
        if self.error is not None:
            raise self.error


def check_ledger(ledger: Ledger, start: int, end: int) -> None:
    """Every offset in [start, end) of every partition exactly once, in order, with its value."""
    got = ledger.by_partition()
    assert sorted(got) == list(range(TOPIC_PARTITIONS)), f"partitions seen: {sorted(got)}"
    for p, records in sorted(got.items()):
        offsets = [off for _, off, _ in records]
        assert offsets == list(range(start, end)), f"partition {p}: {offsets}"
        assert [v for _, _, v in records] == [value_of(p, off) for off in offsets], f"partition {p} values"


def _state(members: list[Member]) -> list[tuple[str, object, object]]:
    return [(m.name, m.assignments[-3:], m.error) for m in members]


def _partitioned(members: list[Member]) -> bool:
    latest = [m.assignments[-1] if m.assignments else [] for m in members]
    return all(latest) and sorted(p for a in latest for p in a) == list(range(TOPIC_PARTITIONS))


def run_group_scenario(bootstrap: str, topic: str, group: str,
                       make_client: Callable[[str], Callable[[], GroupClient]],
                       committed: Callable[[], dict[int, int]]) -> dict[str, object]:
    """The whole scenario, in stages so that every membership consumes something: 3 members
    consume a first third; a fourth joins and the four consume the second; one leaves and the
    three consume the last. Returns what the test asserts beyond the ledger checks done here."""
    stage = PER_PARTITION // 3
    ledger = Ledger()
    produce(bootstrap, topic, 0, stage)
    members = [Member(f"m{i}", make_client(f"m{i}"), ledger) for i in range(3)]
    for m in members:
        m.start()
    wait_until(lambda: _partitioned(members), 60, "3 members sharing the partitions", lambda: _state(members))
    wait_until(lambda: ledger.count() >= TOPIC_PARTITIONS * stage, 60, "the first third")
    three_way_first = [m.assignments[-1] for m in members]

    fourth = Member("m3", make_client("m3"), ledger)
    fourth.start()
    members.append(fourth)
    wait_until(lambda: _partitioned(members), 60, "4 members sharing the partitions", lambda: _state(members))
    four_way = [m.assignments[-1] for m in members]
    produce(bootstrap, topic, stage, stage)
    wait_until(lambda: ledger.count() >= 2 * TOPIC_PARTITIONS * stage, 60, "the second third")

    members[1].stop()   # leaves the group (close -> LeaveGroup)
    rest = [members[0], members[2], members[3]]
    wait_until(lambda: _partitioned(rest), 60, "the remaining 3 sharing the partitions", lambda: _state(rest))
    three_way = [m.assignments[-1] for m in rest]
    produce(bootstrap, topic, 2 * stage, PER_PARTITION - 2 * stage)
    total = TOPIC_PARTITIONS * PER_PARTITION
    wait_until(lambda: ledger.count() >= total, 60, f"all {total} records (have {ledger.count()})")
    for m in rest:
        m.stop()
    check_ledger(ledger, 0, PER_PARTITION)
    first_round = committed()

    # The group comes back: new members resume at the committed offsets.
    produce(bootstrap, topic, PER_PARTITION, stage)
    resumed = Ledger()
    again = [Member(f"r{i}", make_client(f"r{i}"), resumed) for i in range(3)]
    for m in again:
        m.start()
    wait_until(lambda: resumed.count() >= TOPIC_PARTITIONS * stage, 60,
               f"the new records (have {resumed.count()})")
    time.sleep(0.5)  # anything re-delivered from before the committed offsets would show up now
    for m in again:
        m.stop()
    check_ledger(resumed, PER_PARTITION, PER_PARTITION + stage)
    return {"three_way_first": three_way_first, "four_way": four_way, "three_way": three_way,
            "committed": first_round, "committed_after": committed(),
            "counted_by": {name: sum(1 for m, _ in ledger.records if m == name) for name in ledger.members()}}


def assert_partitioned(assignments: list[list[int]]) -> None:
    owned = [p for a in assignments for p in a]
    assert sorted(owned) == list(range(TOPIC_PARTITIONS)), f"not disjoint and complete: {assignments}"
    assert all(assignments), f"a member got nothing: {assignments}"
