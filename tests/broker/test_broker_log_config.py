"""Broker-wide log.* settings reach every log: KafkaConfig's names (server.properties or a
scenario's [cluster.config]) become the LogConfig defaults topic configs override, and the
LogManager's own settings (retention check interval, cleaner) reach the LogManager."""

from __future__ import annotations

import pytest

from kafkasim.broker.config import BrokerConfig
from kafkasim.broker.server import KafkaServer
from kafkasim.runtime.sim.world import SimWorld

pytestmark = pytest.mark.sim


def test_finest_retention_unit_wins_and_minus_one_means_forever() -> None:
    cfg = BrokerConfig.from_properties({"log.retention.hours": 2, "log.retention.minutes": "5"})
    assert cfg.log_config().retention_ms == 5 * 60000
    cfg = BrokerConfig.from_properties({"log.retention.hours": 2, "log.retention.ms": "1234"})
    assert cfg.log_config().retention_ms == 1234
    assert BrokerConfig.from_properties({"log.retention.hours": 3}).log_config().retention_ms == 3 * 3600000
    assert BrokerConfig.from_properties({"log.retention.minutes": -1}).log_config().retention_ms == -1
    assert BrokerConfig.from_properties({"log.retention.hours": -3}).log_config().retention_ms == -1
    assert BrokerConfig.from_properties({"log.roll.jitter.hours": 2}).log_config().segment_jitter_ms == 7200000
    assert BrokerConfig.from_properties({"log.roll.hours": "1"}).log_config().segment_ms == 3600000


def test_broker_log_keys_map_onto_topic_configs() -> None:
    cfg = BrokerConfig.from_properties({
        "log.cleanup.policy": "compact", "log.retention.bytes": "1048576", "log.flush.interval.ms": 100,
        "log.segment.bytes": "65536", "log.flush.interval.messages": "1", "log.preallocate": "true",
        "log.cleaner.min.cleanable.ratio": "0.25", "log.index.interval.bytes": 512})
    lc = cfg.log_config()
    assert (lc.cleanup_policy, lc.retention_bytes, lc.flush_ms) == ("compact", 1048576, 100)
    assert (lc.segment_bytes, lc.flush_messages, lc.preallocate) == (65536, 1, True)
    assert (lc.min_cleanable_dirty_ratio, lc.index_interval_bytes) == (0.25, 512)


def test_the_server_hands_them_to_its_log_manager() -> None:
    world = SimWorld(1)
    node = world.add_node("broker-0")
    cfg = BrokerConfig.from_properties({"log.retention.ms": 60000, "log.retention.check.interval.ms": "1000",
                                        "log.cleaner.enable": "false"})
    server = KafkaServer(node.runtime, cfg)
    node.runtime.spawn(server.startup(), name="startup")  # startup builds the LogManager
    world.run(5_000)
    assert world.failures == [], world.failures
    assert server.replica_manager is not None
    manager = server.replica_manager.log_manager
    assert manager.default_config.retention_ms == 60000
    assert manager.config.retention_check_interval_ms == 1000 and manager.config.cleaner_enable is False
