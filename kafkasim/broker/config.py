"""Broker configuration, named as Kafka names it (server.properties keys in comments)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from kafkasim.storage.log import LogConfig
from kafkasim.storage.log_manager import LogManagerConfig

# Broker key -> LogConfig field, for the keys KafkaConfig maps one to one onto a topic config
# (log.segment.bytes, log.flush.interval.messages and message.max.bytes are BrokerConfig fields).
_LOG_KEYS = {
    "log.index.size.max.bytes": "segment_index_bytes",
    "log.index.interval.bytes": "index_interval_bytes",
    "log.flush.interval.ms": "flush_ms",
    "log.retention.bytes": "retention_bytes",
    "log.cleanup.policy": "cleanup_policy",
    "log.cleaner.delete.retention.ms": "delete_retention_ms",
    "log.cleaner.min.compaction.lag.ms": "min_compaction_lag_ms",
    "log.cleaner.max.compaction.lag.ms": "max_compaction_lag_ms",
    "log.cleaner.min.cleanable.ratio": "min_cleanable_dirty_ratio",
    "log.segment.delete.delay.ms": "file_delete_delay_ms",
    "log.preallocate": "preallocate",
}
# Durations Kafka accepts in several units; the finest unit given wins (KafkaConfig.logRetentionTimeMillis,
# logRollTimeMillis, logRollTimeJitterMillis): field -> [(key, ms per unit), ...] finest first.
_LOG_DURATIONS = {
    "retention_ms": [("log.retention.ms", 1), ("log.retention.minutes", 60000), ("log.retention.hours", 3600000)],
    "segment_ms": [("log.roll.ms", 1), ("log.roll.hours", 3600000)],
    "segment_jitter_ms": [("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", 3600000)],
}


@dataclass
class BrokerConfig:
    broker_id: int = 0                         # broker.id
    host: str = "127.0.0.1"                    # the host part of listeners / advertised.listeners
    port: int = 9092                           # the port part of listeners (0 = any free port)
    log_dir: str = "kafka-logs"                # log.dirs (one directory)
    rack: str | None = None                    # broker.rack
    num_partitions: int = 1                    # num.partitions
    default_replication_factor: int = 1        # default.replication.factor
    auto_create_topics_enable: bool = True     # auto.create.topics.enable
    socket_request_max_bytes: int = 104857600  # socket.request.max.bytes
    connections_max_idle_ms: int = 600000      # connections.max.idle.ms
    message_max_bytes: int = 1048588           # message.max.bytes
    log_segment_bytes: int = 1 << 30           # log.segment.bytes
    log_flush_interval_messages: int = 2**63 - 1  # log.flush.interval.messages
    zookeeper_session_timeout_ms: int = 18000  # zookeeper.session.timeout.ms
    fetch_max_bytes: int = 57671680            # fetch.max.bytes
    # Group coordinator (Kafka's GroupCoordinatorConfig, classic protocol).
    group_initial_rebalance_delay_ms: int = 3000   # group.initial.rebalance.delay.ms
    group_min_session_timeout_ms: int = 6000       # group.min.session.timeout.ms
    group_max_session_timeout_ms: int = 1800000    # group.max.session.timeout.ms
    group_max_size: int = 2**31 - 1                # group.max.size
    offsets_topic_num_partitions: int = 50         # offsets.topic.num.partitions
    # Kafka's default is 3, which a single broker cannot satisfy (creation of the internal topic
    # fails until the cluster is that big); 1 is what Kafka's shipped server.properties sets.
    offsets_topic_replication_factor: int = 1      # offsets.topic.replication.factor
    offsets_topic_segment_bytes: int = 104857600   # offsets.topic.segment.bytes
    offsets_retention_minutes: int = 10080         # offsets.retention.minutes (7 days)
    offsets_retention_check_interval_ms: int = 600000  # offsets.retention.check.interval.ms
    offsets_load_buffer_size: int = 5242880        # offsets.load.buffer.size
    offsets_commit_timeout_ms: int = 5000          # offsets.commit.timeout.ms
    offset_metadata_max_bytes: int = 4096          # offset.metadata.max.bytes
    extra: dict[str, Any] = field(default_factory=dict)

    def log_config(self) -> LogConfig:
        """The broker-wide defaults of every log (Kafka's LogConfig built from KafkaConfig's
        log.* keys); topic configs override them per topic."""
        cfg = LogConfig(segment_bytes=self.log_segment_bytes, flush_messages=self.log_flush_interval_messages,
                        max_message_bytes=self.message_max_bytes)
        for field_name, value in _broker_log_defaults(self.extra).items():
            setattr(cfg, field_name, _as_type(value, type(getattr(cfg, field_name))))
        return cfg

    def log_manager_config(self) -> LogManagerConfig:
        """log.retention.check.interval.ms, log.cleaner.enable, ... for the LogManager."""
        return LogManagerConfig.from_properties(self.extra)

    @classmethod
    def from_properties(cls, props: dict[str, Any]) -> BrokerConfig:
        """Build from Kafka-style keys (`broker.id`, `log.segment.bytes`, ...); unknown keys are
        kept in `extra` so a scenario can carry configs later features read."""
        known = {f.name for f in fields(cls)}
        kwargs: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in props.items():
            name = key.replace(".", "_")
            if name == "log_dirs":
                name = "log_dir"
            (kwargs if name in known and name != "extra" else extra)[name if name in known else key] = value
        # Values from the command line (`--config KEY=VALUE`) arrive as strings: convert them to
        # the field's type, as Kafka's ConfigDef parses server.properties.
        types = {f.name: f.type for f in fields(cls)}
        for name, value in kwargs.items():
            if isinstance(value, str):
                kwargs[name] = _parse_value(value, str(types[name]))
        return cls(**kwargs, extra=extra)


def _broker_log_defaults(extra: dict[str, Any]) -> dict[str, Any]:
    out = {name: extra[key] for key, name in _LOG_KEYS.items() if key in extra}
    for name, units in _LOG_DURATIONS.items():
        for key, scale in units:
            if key in extra:
                value = int(extra[key]) * scale
                # KafkaConfig.logRetentionTimeMillis: any negative retention means unlimited (-1).
                out[name] = -1 if name == "retention_ms" and value < 0 else value
                break
    return out


def _as_type(value: Any, kind: type) -> Any:
    if kind is bool:
        return value if isinstance(value, bool) else str(value).lower() == "true"
    return kind(value)


def _parse_value(value: str, type_name: str) -> Any:
    if type_name == "int":
        return int(value)
    if type_name == "bool":
        if value.lower() not in ("true", "false"):
            raise ValueError(f"expected true or false, got {value!r}")
        return value.lower() == "true"
    if type_name.startswith("str | None") and value == "":
        return None
    return value
