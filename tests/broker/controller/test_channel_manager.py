"""Crash-swarm seed 613 (power-loss-default-flush-swarm): the controller began connecting to a
broker that had just re-registered while a network partition still cut them apart; its connect
waited controller.socket.timeout.ms (30 s) although the partition healed 43 ms later, so the
broker got its LeaderAndIsr only 30 s on and meanwhile went on as the deposed leader of epoch 0.
Kafka 3.9's RequestSendThread connects through a NetworkClient whose connection setup timeout
(socket.connection.setup.timeout.ms, 10 s) fails brokerReady's awaitReady first; it backs off
100 ms and connects again."""

from __future__ import annotations

import io
import json

import pytest

from kafkasim.broker.config import BrokerConfig
from kafkasim.broker.controller.channel_manager import ChannelTimeouts, ControllerChannelManager
from kafkasim.broker.zk.zk_data import BrokerInfo
from kafkasim.protocol.messages.update_metadata import UpdateMetadataRequest
from kafkasim.runtime.sim.world import SimWorld

pytestmark = pytest.mark.sim


def _send_failures(trace: io.StringIO) -> list[float]:
    events = [json.loads(line) for line in trace.getvalue().splitlines()]
    return [e["t"] for e in events if e["ev"] == "controller_send_failed"]


def test_timeouts_follow_kafkas_controller_network_client() -> None:
    config = BrokerConfig.from_properties({"broker.id": 0, "socket.connection.setup.timeout.ms": 7000,
                                           "controller.socket.timeout.ms": 5000, "request.timeout.ms": 12000})
    assert ChannelTimeouts.of(config) == ChannelTimeouts(connect_ms=5000, request_ms=12000)
    assert ChannelTimeouts.of(BrokerConfig()) == ChannelTimeouts(connect_ms=10_000, request_ms=30_000)


def test_a_connect_across_a_partition_gives_up_after_the_connection_setup_timeout() -> None:
    trace = io.StringIO()
    world = SimWorld(3, trace_out=trace)
    controller = world.add_node("broker-0").runtime
    world.add_node("broker-1")
    channel = ControllerChannelManager(controller, 0, ChannelTimeouts.of(BrokerConfig()))
    world.net.partition(["broker-0"], ["broker-1"])
    channel.add_broker(1, BrokerInfo(1, "broker-1", 9092, None))
    channel.send_request(1, UpdateMetadataRequest(controller_id=0, controller_epoch=1), 8)
    world.run(25_000)
    channel.shutdown()
    # Connect at 0, give up at 10 s, back off 100 ms, give up again at 20.1 s.
    assert _send_failures(trace) == [10_000.0, 20_100.0]
