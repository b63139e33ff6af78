"""The ZooKeeper trees real Kafka 3.9.1 and kafkasim write for the same admin sequence
(znodes.py: topics with configs, a manual assignment, more partitions, incremental config
changes, client quotas, SCRAM credentials, a deleted topic) are the same, znode by znode, after
znodes.py's normalisations; and so are the trees' shapes and the broker's own znodes."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.conformance import znodes as Z
from tests.conformance.wire import Connection

pytestmark = pytest.mark.real

GLOBAL = ["/brokers/ids/0", "/controller", "/cluster/id", "/feature", "/controller_epoch"]


@pytest.fixture(scope="module")
def trees(real_kafka: Any, sim_kafka: Any) -> dict[str, Any]:
    sides = {"real": real_kafka, "sim": sim_kafka}
    failed = {}
    for name, cluster in sides.items():
        conn = Connection("127.0.0.1", cluster.brokers[0].port)
        try:
            failed[name] = Z.run_sequence(conn)
        finally:
            conn.close()
    deadline = time.monotonic() + 60
    while True:
        read = {name: Z.read_tree(c.zookeeper_connect) for name, c in sides.items()}
        if all(Z.gone(t) for t in read.values()) or time.monotonic() > deadline:
            return {"failed": failed, **read}
        time.sleep(0.5)


def test_the_admin_sequence_succeeds_on_both(trees: dict[str, Any]) -> None:
    assert trees["failed"] == {"real": [], "sim": []}
    assert Z.gone(trees["real"]) and Z.gone(trees["sim"]), "the deleted topic's znodes stayed"


def test_the_sequences_znodes_are_kafkas(trees: dict[str, Any]) -> None:
    real, sim = Z.sequence_znodes(trees["real"]), Z.sequence_znodes(trees["sim"])
    # What Kafka wrote is what the sequence is about (not an empty comparison).
    for path in (f"/config/topics/{Z.topic(0)}", f"/brokers/topics/{Z.topic(1)}/partitions/3/state",
                 f"/config/users/{Z.USER}", f"/config/clients/{Z.CLIENT}",
                 f"/config/users/{Z.USER}/clients/{Z.CLIENT}", "/config/changes/config_change_#6"):
        assert path in real, path
    assert Z.compare(real, sim) == []


def test_the_trees_have_the_same_shape(trees: dict[str, Any]) -> None:
    real = {Z.path_shape(p) for p in trees["real"]}
    sim = {Z.path_shape(p) for p in trees["sim"]}
    assert (sorted(real - sim), sorted(sim - real)) == ([], [])


def test_the_brokers_own_znodes_are_kafkas(trees: dict[str, Any]) -> None:
    for path in GLOBAL:
        assert Z.global_znode(trees["real"][path]) == Z.global_znode(trees["sim"][path]), path
