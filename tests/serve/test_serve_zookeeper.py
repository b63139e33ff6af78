"""`kafkasim serve --zookeeper` against a real ZooKeeper: the broker writes Kafka's znode layout
(contents as Kafka 3.9.1 writes them), serves clients, and keeps its cluster id across a restart."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from tests.serve.conftest import ServedBroker, wait_until

pytestmark = pytest.mark.real


def test_znodes_match_kafkas_layout(tmp_path: Path, zookeeper: object) -> None:
    connect = zookeeper.connect_string  # type: ignore[attr-defined]
    chroot_free = KazooClient(hosts=connect)
    chroot_free.start(timeout=10)
    try:
        for path in ("/cluster/id", "/controller", "/brokers/ids/7"):
            if chroot_free.exists(path):
                chroot_free.delete(path, recursive=True)
        broker = ServedBroker(tmp_path / "logs", zookeeper=connect, broker_id=7)
        try:
            subprocess.run(["kcat", "-b", broker.bootstrap, "-P", "-t", "zk-topic"], input=b"a\nb\n",
                           timeout=60, check=True)
            reg = json.loads(chroot_free.get("/brokers/ids/7")[0])
            assert reg["endpoints"] == [f"PLAINTEXT://{broker.bootstrap}"] and reg["version"] == 5
            assert list(reg) == ["features", "listener_security_protocol_map", "endpoints", "jmx_port", "port",
                                 "host", "version", "timestamp"]
            assert chroot_free.get("/brokers/ids/7")[1].ephemeralOwner != 0
            cluster = json.loads(chroot_free.get("/cluster/id")[0])
            assert cluster["version"] == "1" and len(cluster["id"]) == 22
            topic = json.loads(chroot_free.get("/brokers/topics/zk-topic")[0])
            assert topic["partitions"] == {"0": [7]} and topic["version"] == 3 and len(topic["topic_id"]) == 22
            state = chroot_free.get("/brokers/topics/zk-topic/partitions/0/state")[0]
            assert json.loads(state) == {"controller_epoch": json.loads(state)["controller_epoch"], "leader": 7,
                                         "version": 1, "leader_epoch": 0, "isr": [7]}
            ctrl = json.loads(chroot_free.get("/controller")[0])
            assert ctrl["brokerid"] == 7 and ctrl["version"] == 2
            meta = (tmp_path / "logs" / "meta.properties").read_text()
            assert f"cluster.id={cluster['id']}" in meta and "broker.id=7" in meta
            assert (tmp_path / "logs" / "zk-topic-0" / "00000000000000000000.log").stat().st_size > 0
        finally:
            broker.stop()
        assert broker.task_errors() == []
        # The ephemeral registration goes with the broker's session: at once when it shut down
        # cleanly, when the session expires if stop() had to kill it (slow on a loaded machine).
        wait_until(lambda: chroot_free.exists("/brokers/ids/7") is None, 30, "/brokers/ids/7 to go")
        # Restart on the same log dir: same cluster id, data still served.
        again = ServedBroker(tmp_path / "logs", zookeeper=connect, broker_id=7)
        try:
            # As with Kafka, a restarted broker knows its topics once the controller's
            # UpdateMetadata arrives; until then kcat -e gives up on "Unknown topic": retry.
            out, deadline = b"", time.monotonic() + 20
            while time.monotonic() < deadline:
                p = subprocess.run(["kcat", "-b", again.bootstrap, "-C", "-t", "zk-topic", "-o", "beginning", "-e"],
                                   capture_output=True, timeout=60)
                if p.returncode == 0:
                    out = p.stdout
                    break
                time.sleep(0.2)
            assert out.split() == [b"a", b"b"]
        finally:
            again.stop()
    finally:
        chroot_free.stop()
        chroot_free.close()
