"""Which followers a leader may take into the ISR, and wait for on their way in, in ZooKeeper mode:
only those alive in its metadata cache (Kafka 3.9's `Partition.isReplicaIsrEligible`, whose
ZooKeeper case is `zkMetadataCache.hasAliveBroker`). The same sequence runs against three brokers
of Apache Kafka 3.9.1 and three of kafkasim (`kafkasim serve` on Debian's ZooKeeper):

1. a follower is stopped (SIGSTOP) until the leader drops it from the ISR (replica.lag.time.max.ms);
2. its registration, /brokers/ids/N, is deleted: the controller tells the others it is dead, but
   nothing bumps the leader epoch (it is already out of the ISR), so its fetches stay valid. The
   test waits until the leader's own Metadata answer no longer lists it: resumed before the
   leader has heard, the follower would be proposed while still alive in the leader's cache, and
   the controller, processing the deletion afterwards, would remove it with a new leader epoch
   (CI saw this on a loaded machine: ISR [0, 2], leader epoch 1);
3. it is resumed and fetches until its log is byte for byte the leader's: caught up, not alive;
4. it is stopped again and an acks=all producer writes. An eligible caught-up follower would hold
   the high watermark at its log end until replica.lag.time.max.ms passed (Kafka's
   `shouldWaitForReplicaToJoinIsr`), so the write would wait that long; an ineligible one does not;
5. its registration is written back: the controller announces it alive, and it rejoins the ISR.

kafkasim before stop 17 (commit 4daabab) kept the ISR as Kafka does (its controller refused the
proposal) but held step 4's write for the full 6 s; Kafka 3.9.1 and kafkasim now answer at once.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkasim.protocol.messages.metadata import MetadataRequest
from tests.conformance.conftest import kafka_launcher, require_real_kafka
from tests.conformance.wire import Connection

pytestmark = pytest.mark.real

LAG_MS = 6000  # replica.lag.time.max.ms: how long an eligible caught-up follower would hold the HW
TOPIC = "eligibility"


@pytest.fixture(params=["kafka", "kafkasim"])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    launcher = require_real_kafka()
    if request.param == "kafkasim":
        launcher = kafka_launcher().cluster_launcher()
    c = launcher.up(tmp_path / request.param, 3, {"replica.lag.time.max.ms": str(LAG_MS)})
    try:
        yield c
    finally:
        for b in c.brokers:  # a test that failed mid-way may leave a broker stopped
            if b.pid:
                try:
                    os.kill(b.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
        c.down()


class Side:
    """One cluster seen through ZooKeeper (kazoo) and an acks=all producer (confluent-kafka)."""

    def __init__(self, cluster: Any) -> None:
        from confluent_kafka import Producer
        from kazoo.client import KazooClient

        self.cluster = cluster
        self.zk = KazooClient(hosts=cluster.zookeeper_connect)
        self.zk.start()
        self.producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                                  "linger.ms": 0, "enable.idempotence": False})
        self.sent = 0

    def state(self) -> dict[str, Any]:
        data, _ = self.zk.get(f"/brokers/topics/{TOPIC}/partitions/0/state")
        return dict(json.loads(data))

    def produce(self, n: int, timeout_s: float) -> int:
        """Write n records; how many were still unacknowledged after timeout_s."""
        for _ in range(n):
            self.producer.produce(TOPIC, b"v%d" % self.sent, partition=0)
            self.sent += 1
        return int(self.producer.flush(timeout_s))

    def brokers_known_to(self, broker_id: int) -> set[int]:
        """The live brokers in broker_id's metadata cache: its Metadata answer's broker list."""
        conn = Connection("127.0.0.1", self.cluster.brokers[broker_id].port)
        try:
            return {b.node_id for b in conn.send(MetadataRequest(topics=[]), 9).brokers}
        finally:
            conn.close()

    def log_bytes(self, broker_id: int) -> int:
        d = self.cluster.brokers[broker_id].dir / "data" / f"{TOPIC}-0"
        return sum(p.stat().st_size for p in d.glob("*.log"))

    def signal(self, broker_id: int, sig: int) -> None:
        os.kill(self.cluster.brokers[broker_id].pid, sig)

    def until(self, what: str, cond: Any, timeout_s: float = 30.0, produce: bool = True) -> None:
        deadline = time.monotonic() + timeout_s
        while not cond():
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} within {timeout_s} s; partition state {self.state()}")
            if produce:
                self.produce(1, 10.0)
            time.sleep(0.2)

    def close(self) -> None:
        self.producer.flush(5)
        self.zk.stop()


def roles(zk: Any) -> tuple[int, int, int]:
    """(leader, follower, other): the follower under test is neither the leader nor the
    controller (deleting the controller's own registration is another experiment)."""
    controller = json.loads(zk.get("/controller")[0])["brokerid"]
    follower = next(b for b in (2, 1, 0) if b != controller)
    leader = next(b for b in (0, 1, 2) if b != follower)
    other = 3 - leader - follower
    return leader, follower, other


def create_topic(side: Side, replicas: list[int]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": side.cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=1, replica_assignment=[replicas])])[TOPIC].result(60)
    side.until("the topic's partition state", lambda: side.zk.exists(f"/brokers/topics/{TOPIC}/partitions/0/state"),
               produce=False)
    side.until("a full ISR", lambda: len(side.state()["isr"]) == 3)


def test_a_follower_not_registered_is_neither_taken_into_the_isr_nor_waited_for(cluster: Any) -> None:
    side = Side(cluster)
    try:
        leader, f, other = roles(side.zk)
        create_topic(side, [leader, f, other])
        epoch = side.state()["leader_epoch"]

        side.signal(f, signal.SIGSTOP)
        side.until("the leader dropping the stopped follower from the ISR", lambda: f not in side.state()["isr"])
        registration, _ = side.zk.get(f"/brokers/ids/{f}")
        side.zk.delete(f"/brokers/ids/{f}")
        side.until("the leader hearing that the follower is gone", lambda: f not in side.brokers_known_to(leader))
        side.signal(f, signal.SIGCONT)
        side.until("the resumed follower's log reaching the leader's",
                   lambda: side.log_bytes(f) == side.log_bytes(leader) > 0)
        time.sleep(1.0)  # more fetches at the log end: an eligible follower would be proposed now
        state = side.state()
        assert f not in state["isr"], f"a follower with no registration rejoined the ISR: {state}"
        assert state["leader"] == leader and state["leader_epoch"] == epoch, \
            f"the experiment needs the leader and its epoch unchanged (else the follower is fenced): {state}"

        side.signal(f, signal.SIGSTOP)
        left = side.produce(5, timeout_s=LAG_MS / 2000)
        assert left == 0, (f"{left} of 5 acks=all writes waited over {LAG_MS / 2000} s with an ISR of "
                           f"{side.state()['isr']}: the leader held the high watermark for a follower "
                           "that is not alive in its metadata cache")

        side.signal(f, signal.SIGCONT)
        side.zk.create(f"/brokers/ids/{f}", registration, ephemeral=True)
        side.until("the re-registered follower rejoining the ISR", lambda: f in side.state()["isr"])
    finally:
        side.close()
