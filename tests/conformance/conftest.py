"""One real Kafka 3.9.1 cluster (real/kafka/kafka.py) and one kafkasim cluster (real/cluster/
cluster.py, `kafkasim serve` on Debian's ZooKeeper) per test session, both with 1 broker and the
same broker configs; and the results of playing every case of the library against both (the two
sides run at the same time, each plays the cases in the same order)."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from runtime_worlds import load_script

from kafkasim.protocol.messages.api_versions import ApiVersionsRequest
from tests.conformance.library import cases
from tests.conformance.model import Case, diff_case, run_case
from tests.conformance.wire import Connection

REPO = Path(__file__).resolve().parents[2]
# Configs both brokers run with (real/cluster's defaults for 1 broker, written out so the two sides
# visibly match). Kafka alone also gets transaction.state.log.replication.factor/min.isr = 1 (its
# defaults, 3 and 2, make a 1-broker cluster refuse transactions); kafkasim has no such configs
# yet and behaves as if they were 1.
SHARED_CONFIGS = {"offsets.topic.replication.factor": "1", "default.replication.factor": "1",
                  "group.initial.rebalance.delay.ms": "0", "num.partitions": "1"}
KAFKA_ONLY_CONFIGS = {"transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1"}


load = load_script  # real/'s scripts by path (tests/runtime/runtime_worlds.py)


def kafka_launcher() -> ModuleType:
    return load("kafkasim_real_kafka", REPO / "real" / "kafka" / "kafka.py")


def require_real_kafka() -> ModuleType:
    """Kafka's jars and Debian's ZooKeeper; missing is a skip locally, a failure when
    KAFKASIM_REQUIRE_ZOOKEEPER=1 (CI), like the `zookeeper` fixture."""
    launcher = kafka_launcher()
    zk = launcher.cluster_launcher().load_zk()
    missing = [what for what, ok in (("Kafka's jars (real/install.sh)", launcher.jars_present()),
                                     (zk.ZK_JAR, os.path.exists(zk.ZK_JAR))) if not ok]
    if missing:
        if os.environ.get("KAFKASIM_REQUIRE_ZOOKEEPER") == "1":
            pytest.fail(f"missing: {', '.join(missing)}")
        pytest.skip(f"missing: {', '.join(missing)}")
    return launcher


@pytest.fixture(scope="session")
def real_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    launcher = require_real_kafka()
    cluster = launcher.up(tmp_path_factory.mktemp("real-kafka"), 1, {**SHARED_CONFIGS, **KAFKA_ONLY_CONFIGS})
    try:
        yield cluster
    finally:
        cluster.down()


@pytest.fixture(scope="session")
def sim_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    require_real_kafka()
    cluster = kafka_launcher().cluster_launcher().up(tmp_path_factory.mktemp("kafkasim"), 1, SHARED_CONFIGS)
    try:
        yield cluster
    finally:
        cluster.down()


def advertised(conn: Connection) -> dict[int, tuple[int, int]]:
    resp = conn.send(ApiVersionsRequest(client_software_name="conformance", client_software_version="1"), 3)
    return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}


@dataclass
class SideRun:
    advertised: dict[int, tuple[int, int]]
    results: dict[str, list[Any]]
    seconds: float


def play(port: int, library: list[Case], progress: Any = None) -> SideRun:
    import time
    start = time.monotonic()
    conn = Connection("127.0.0.1", port)
    table = advertised(conn)
    results: dict[str, list[Any]] = {}
    for case in library:
        if progress is not None:
            progress.write(f"{time.monotonic() - start:7.2f} {case.name}\n")
            progress.flush()
        try:
            results[case.name] = run_case(case, conn, table)
        except Exception as exc:  # noqa: BLE001 - a case that breaks the runner is a result, not a crash
            results[case.name] = [f"runner error: {type(exc).__name__}: {exc}"]
            conn.close()
    conn.close()
    return SideRun(table, results, time.monotonic() - start)


@dataclass
class Conformance:
    cases: list[Case]
    real: SideRun
    sim: SideRun

    def diff(self, name: str) -> list[str]:
        return diff_case(self.real.results[name], self.sim.results[name])

    def differing(self) -> set[str]:
        return {c.name for c in self.cases if self.diff(c.name)}


@pytest.fixture(scope="session")
def conformance(real_kafka: Any, sim_kafka: Any) -> Conformance:
    library = cases()
    out: dict[str, SideRun] = {}

    def side(name: str, port: int) -> None:
        out[name] = play(port, library)

    threads = [threading.Thread(target=side, args=("real", real_kafka.brokers[0].port)),
               threading.Thread(target=side, args=("sim", sim_kafka.brokers[0].port))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return Conformance(library, out["real"], out["sim"])
