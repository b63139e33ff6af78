"""A secured inter-broker listener: the broker's own clients (the controller's channels, replica
fetchers, AlterPartition) log in to SASL_SSL with the broker's credentials — three brokers in the
simulated world replicate over it, a broker with the wrong password cannot join the ISR — and
Kafka's startup checks of the inter-broker settings."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from kafkasim.broker.config import BrokerConfig
from kafkasim.broker.security.inter_broker import inter_broker_security
from kafkasim.client.channel_security import SaslCredentials
from kafkasim.cluster.sim_cluster import SimCluster
from kafkasim.config.types import ConfigValueError
from kafkasim.protocol import errors as E
from kafkasim.runtime.sim.world import SimWorld
from tests.cluster.cluster_sim import Cluster

pytestmark = pytest.mark.sim


def _jaas(password: str) -> str:
    return ('org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
            f'password="{password}" user_broker="broker-secret";')


def _props(broker_id: int, password: str = "broker-secret", **extra: Any) -> dict[str, Any]:
    host = f"broker-{broker_id}"
    return {"zookeeper.session.timeout.ms": 6000, "replica.lag.time.max.ms": 4000,
            "listeners": f"PLAINTEXT://{host}:9092,SECURE://{host}:9093",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:SASL_SSL",
            "inter.broker.listener.name": "SECURE", "sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.secure.plain.sasl.jaas.config": _jaas(password),
            "ssl.keystore.type": "PEM", "ssl.keystore.location": "unused-in-the-sim.pem", **extra}


def _config(broker_id: int, host: str, wrong_password_on: int) -> BrokerConfig:
    cfg = BrokerConfig.from_properties(_props(broker_id, "nope" if broker_id == wrong_password_on else
                                              "broker-secret"))
    cfg.broker_id, cfg.host, cfg.port, cfg.log_dir = broker_id, host, 9092, "kafka-logs"
    return cfg


def _replicate(wrong_password_on: int = -1) -> tuple[Any, str]:
    trace = io.StringIO()
    world = SimWorld(5, trace_out=trace)
    sim = SimCluster(world, lambda bid, host: _config(bid, host, wrong_password_on))
    for i in range(2):
        sim.add_broker(i)
    client = world.add_node("client")
    cluster = Cluster(world, sim)
    out: dict[str, Any] = {}

    async def main() -> None:
        rt = client.runtime
        await cluster.wait_until(rt, lambda: sim.controller() is not None)
        sim.add_broker(2)   # after the election: a broker that cannot log in must not be the controller
        await cluster.wait_until(rt, lambda: len(cluster.server(cluster.controller_id()).metadata_cache.brokers)
                                 == 3)
        ctl = cluster.controller_id()
        leader = next(b for b in range(3) if b != ctl and b != wrong_password_on)
        replicas = [leader] + [b for b in range(3) if b != leader]
        out["create"] = await cluster.create_topic(rt, "t", 1, 3, {"min.insync.replicas": "1"},
                                                   assignment={0: replicas})
        await cluster.wait_until(rt, lambda: cluster.leader_id("t", 0) == leader)
        for _ in range(50):   # until the leader's metadata has the topic (UpdateMetadata follows LeaderAndIsr)
            out["produce"] = (await cluster.produce(rt, "t", 0, [b"a", b"b", b"c"], acks=1))[0]
            if out["produce"] != E.UNKNOWN_TOPIC_OR_PARTITION:
                break
            await rt.sleep(100)
        await cluster.wait_until(rt, lambda: all(
            (p := cluster.replica(b, "t", 0)) is not None and p.log.log_end_offset == 3 for b in range(3)),
            timeout_ms=20000)
        out["leo"] = {b: (p.log.log_end_offset if (p := cluster.replica(b, "t", 0)) is not None else None)
                      for b in range(3)}
        out["isr"] = sorted(cluster.replica(leader, "t", 0).isr)

    task = client.runtime.spawn(main())
    while not task.done() and world.now_ms() < 120_000:
        world.run(min(world.now_ms() + 1000, 120_000))
    assert task.done(), "the test body did not finish"
    return out, trace.getvalue()


def test_three_brokers_replicate_over_a_sasl_ssl_inter_broker_listener() -> None:
    out, trace = _replicate()
    assert out["create"] == E.NONE and out["produce"] == E.NONE
    assert out["leo"] == {0: 3, 1: 3, 2: 3} and out["isr"] == [0, 1, 2]
    events = [json.loads(line) for line in trace.splitlines()]
    logins = {e["node"] for e in events if e["ev"] == "sasl_authenticated" and e.get("listener") == "SECURE"
              and e.get("principal") == "User:broker"}
    assert logins, "no broker logged in to the SECURE listener"


def test_a_broker_with_the_wrong_password_cannot_replicate() -> None:
    out, trace = _replicate(wrong_password_on=2)
    assert out["produce"] == E.NONE
    assert out["leo"][2] != 3 and 2 not in out["isr"]
    assert "Authentication failed" in trace


def test_kafkas_startup_checks_of_the_inter_broker_login() -> None:
    sec = inter_broker_security(BrokerConfig.from_properties(_props(0)))
    assert sec is not None and sec.sasl == SaslCredentials("PLAIN", "broker", "broker-secret")
    assert sec.tls is not None and sec.tls.check_hostname            # https: Kafka's default
    with pytest.raises(ConfigValueError, match="must be included in sasl.enabled.mechanisms"):
        BrokerConfig.from_properties(_props(0, **{"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"}))
    with pytest.raises(ConfigValueError, match="no username and password"):
        BrokerConfig.from_properties(_props(0, **{"listener.name.secure.plain.sasl.jaas.config":
                                                  'org.apache.kafka.common.security.plain.PlainLoginModule '
                                                  'required user_broker="broker-secret";'}))
    assert inter_broker_security(BrokerConfig.from_properties({"log.dirs": "x"})) is None   # PLAINTEXT
