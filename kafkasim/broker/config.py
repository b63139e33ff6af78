"""Broker configuration (Kafka's KafkaConfig): one typed attribute per broker config of the table
in kafkasim.config, named as the config with '_' for '.', plus the typed views the broker's parts
run by (LogConfig defaults, LogManagerConfig, ReplicationConfig, the controller's and the group
coordinator's configs)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kafkasim.broker.security.listeners import check_security
from kafkasim.config import BROKER, TOPIC_CONFIGS, ConfigKey, build, check_names, config_fields, setting
from kafkasim.config.fields import NAMES
from kafkasim.config.types import ConfigValueError
from kafkasim.storage.log import LogConfig
from kafkasim.storage.log_manager import LogManagerConfig

T = TypeVar("T")
# Not Kafka configs, accepted by from_properties: where kafkasim listens (Kafka's listeners, split)
# and whether it enforces client quotas (`client.quotas`, see BrokerConfig.client_quotas).
LISTENER_KEYS = ("host", "port", "client.quotas")
LISTENER_PREFIX = "listener.name."
# Kafka's default is 3, which a single broker cannot satisfy (creation of the internal topic
# fails until the cluster is that big); 1 is what Kafka's shipped server.properties sets.
OFFSETS_TOPIC_REPLICATION_FACTOR = 1
ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"


@dataclass
class ReplicationConfig:
    """Kafka's replica.* configs (typed and defaulted by kafkasim.config)."""

    replica_lag_time_max_ms: int = setting("replica.lag.time.max.ms")
    replica_fetch_wait_max_ms: int = setting("replica.fetch.wait.max.ms")
    replica_fetch_min_bytes: int = setting("replica.fetch.min.bytes")
    replica_fetch_max_bytes: int = setting("replica.fetch.max.bytes")
    replica_fetch_response_max_bytes: int = setting("replica.fetch.response.max.bytes")
    replica_fetch_backoff_ms: int = setting("replica.fetch.backoff.ms")
    replica_socket_timeout_ms: int = setting("replica.socket.timeout.ms")
    # How long the fetcher's connect may take (BrokerBlockingSender's NetworkClient; Kafka adds
    # +-20% jitter, and close(node) after a failure resets the exponential growth to the max).
    socket_connection_setup_timeout_ms: int = setting("socket.connection.setup.timeout.ms")
    request_timeout_ms: int = setting("request.timeout.ms")   # broker to controller too


@dataclass
class ControllerConfig:
    """The controller's (ZooKeeper mode) and controlled shutdown's configs."""

    controller_socket_timeout_ms: int = setting("controller.socket.timeout.ms")
    controlled_shutdown_enable: bool = setting("controlled.shutdown.enable")
    controlled_shutdown_max_retries: int = setting("controlled.shutdown.max.retries")
    controlled_shutdown_retry_backoff_ms: int = setting("controlled.shutdown.retry.backoff.ms")
    auto_leader_rebalance_enable: bool = setting("auto.leader.rebalance.enable")
    leader_imbalance_per_broker_percentage: int = setting("leader.imbalance.per.broker.percentage")
    leader_imbalance_check_interval_seconds: int = setting("leader.imbalance.check.interval.seconds")
    unclean_leader_election_enable: bool = setting("unclean.leader.election.enable")
    delete_topic_enable: bool = setting("delete.topic.enable")


@dataclass
class GroupCoordinatorConfig:
    """Kafka's GroupCoordinatorConfig (classic protocol) and OffsetConfig."""

    group_initial_rebalance_delay_ms: int = setting("group.initial.rebalance.delay.ms")
    group_min_session_timeout_ms: int = setting("group.min.session.timeout.ms")
    group_max_session_timeout_ms: int = setting("group.max.session.timeout.ms")
    group_max_size: int = setting("group.max.size")
    offsets_topic_num_partitions: int = setting("offsets.topic.num.partitions")
    offsets_topic_replication_factor: int = setting("offsets.topic.replication.factor",
                                                    default=OFFSETS_TOPIC_REPLICATION_FACTOR)
    offsets_topic_segment_bytes: int = setting("offsets.topic.segment.bytes")
    offsets_retention_minutes: int = setting("offsets.retention.minutes")
    offsets_retention_check_interval_ms: int = setting("offsets.retention.check.interval.ms")
    offsets_load_buffer_size: int = setting("offsets.load.buffer.size")
    offsets_commit_timeout_ms: int = setting("offsets.commit.timeout.ms")
    offset_metadata_max_bytes: int = setting("offset.metadata.max.bytes")


@dataclass
class TransactionConfig:
    """Kafka's TransactionConfig (the transaction coordinator's and its log's configs)."""

    transaction_state_log_num_partitions: int = setting("transaction.state.log.num.partitions")
    transaction_state_log_replication_factor: int = setting("transaction.state.log.replication.factor",
                                                            default=OFFSETS_TOPIC_REPLICATION_FACTOR)
    # 1, as Kafka's shipped server.properties: Kafka's 2 fails every commit on a one-broker cluster.
    transaction_state_log_min_isr: int = setting("transaction.state.log.min.isr", default=1)
    transaction_state_log_segment_bytes: int = setting("transaction.state.log.segment.bytes")
    transaction_state_log_load_buffer_size: int = setting("transaction.state.log.load.buffer.size")
    transactional_id_expiration_ms: int = setting("transactional.id.expiration.ms")
    transaction_max_timeout_ms: int = setting("transaction.max.timeout.ms")
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = setting(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms")
    transaction_remove_expired_transaction_cleanup_interval_ms: int = setting(
        "transaction.remove.expired.transaction.cleanup.interval.ms")
    transaction_partition_verification_enable: bool = setting("transaction.partition.verification.enable")
    request_timeout_ms: int = setting("request.timeout.ms")


@dataclass
class BrokerConfig(TransactionConfig, GroupCoordinatorConfig, ControllerConfig, ReplicationConfig):
    """Every broker config: its own fields below, and those of the typed views it extends (each
    declared once, in the view the broker's part runs by)."""

    host: str = "127.0.0.1"   # the host part of listeners / advertised.listeners (not a Kafka config)
    port: int = 9092          # the port part of listeners, 0 = any free port (not a Kafka config)
    # kafkasim's defaults where they differ from Kafka's: broker 0 (Kafka's -1 asks ZooKeeper for
    # an id), one log dir (log.dirs, else log.dir), listeners from host and port.
    broker_id: int = setting("broker.id", default=0)
    log_dir: str = setting("log.dirs", "log.dir", default="kafka-logs")
    listeners: str | None = setting("listeners", default=None)
    advertised_listeners: str | None = setting("advertised.listeners")
    rack: str | None = setting("broker.rack")
    num_partitions: int = setting("num.partitions")
    default_replication_factor: int = setting("default.replication.factor")
    auto_create_topics_enable: bool = setting("auto.create.topics.enable")
    socket_request_max_bytes: int = setting("socket.request.max.bytes")
    connections_max_idle_ms: int = setting("connections.max.idle.ms")
    max_connections_per_ip: int = setting("max.connections.per.ip")
    max_connections_per_ip_overrides: str = setting("max.connections.per.ip.overrides")
    max_connections: int = setting("max.connections")
    zookeeper_session_timeout_ms: int = setting("zookeeper.session.timeout.ms")
    fetch_max_bytes: int = setting("fetch.max.bytes")
    max_incremental_fetch_session_cache_slots: int = setting("max.incremental.fetch.session.cache.slots")
    message_max_bytes: int = setting("message.max.bytes")
    # Topic config defaults (the broker synonyms of LogConfig's fields)
    min_insync_replicas: int = setting("min.insync.replicas")
    compression_type: str = setting("compression.type")
    compression_gzip_level: int = setting("compression.gzip.level")
    compression_lz4_level: int = setting("compression.lz4.level")
    compression_zstd_level: int = setting("compression.zstd.level")
    log_segment_bytes: int = setting("log.segment.bytes")
    log_roll_ms: int | None = setting("log.roll.ms")
    log_roll_hours: int = setting("log.roll.hours")
    log_roll_jitter_ms: int | None = setting("log.roll.jitter.ms")
    log_roll_jitter_hours: int = setting("log.roll.jitter.hours")
    log_retention_ms: int | None = setting("log.retention.ms")
    log_retention_minutes: int | None = setting("log.retention.minutes")
    log_retention_hours: int = setting("log.retention.hours")
    log_retention_bytes: int = setting("log.retention.bytes")
    log_local_retention_ms: int = setting("log.local.retention.ms")
    log_local_retention_bytes: int = setting("log.local.retention.bytes")
    log_cleanup_policy: str = setting("log.cleanup.policy")
    log_flush_interval_messages: int = setting("log.flush.interval.messages")
    log_flush_interval_ms: int | None = setting("log.flush.interval.ms")
    log_message_timestamp_type: str = setting("log.message.timestamp.type")
    log_message_timestamp_difference_max_ms: int = setting("log.message.timestamp.difference.max.ms")
    log_message_timestamp_before_max_ms: int = setting("log.message.timestamp.before.max.ms")
    log_message_timestamp_after_max_ms: int = setting("log.message.timestamp.after.max.ms")
    log_message_downconversion_enable: bool = setting("log.message.downconversion.enable")
    log_message_format_version: str = setting("log.message.format.version")
    log_index_size_max_bytes: int = setting("log.index.size.max.bytes")
    log_index_interval_bytes: int = setting("log.index.interval.bytes")
    log_preallocate: bool = setting("log.preallocate")
    log_segment_delete_delay_ms: int = setting("log.segment.delete.delay.ms")
    log_cleaner_delete_retention_ms: int = setting("log.cleaner.delete.retention.ms")
    log_cleaner_min_compaction_lag_ms: int = setting("log.cleaner.min.compaction.lag.ms")
    log_cleaner_max_compaction_lag_ms: int = setting("log.cleaner.max.compaction.lag.ms")
    log_cleaner_min_cleanable_ratio: float = setting("log.cleaner.min.cleanable.ratio")
    # LogManager (LogManagerConfig)
    log_retention_check_interval_ms: int = setting("log.retention.check.interval.ms")
    log_flush_scheduler_interval_ms: int = setting("log.flush.scheduler.interval.ms")
    log_flush_offset_checkpoint_interval_ms: int = setting("log.flush.offset.checkpoint.interval.ms")
    log_flush_start_offset_checkpoint_interval_ms: int = setting("log.flush.start.offset.checkpoint.interval.ms")
    log_initial_task_delay_ms: int = setting("log.initial.task.delay.ms")
    log_cleaner_enable: bool = setting("log.cleaner.enable")
    log_cleaner_backoff_ms: int = setting("log.cleaner.backoff.ms")
    log_cleaner_dedupe_buffer_size: int = setting("log.cleaner.dedupe.buffer.size")
    producer_id_expiration_ms: int = setting("producer.id.expiration.ms")
    producer_id_expiration_check_interval_ms: int = setting("producer.id.expiration.check.interval.ms")
    # Replication beyond ReplicationConfig
    replica_high_watermark_checkpoint_interval_ms: int = setting("replica.high.watermark.checkpoint.interval.ms")
    inter_broker_protocol_version: str = setting("inter.broker.protocol.version")
    # Listeners and security (kafkasim.broker.security reads them, with their listener.name.<l>. overrides)
    listener_security_protocol_map: str = setting("listener.security.protocol.map")
    inter_broker_listener_name: str | None = setting("inter.broker.listener.name")
    security_inter_broker_protocol: str = setting("security.inter.broker.protocol")
    sasl_enabled_mechanisms: str = setting("sasl.enabled.mechanisms")
    sasl_mechanism_inter_broker_protocol: str = setting("sasl.mechanism.inter.broker.protocol")
    sasl_jaas_config: str | None = setting("sasl.jaas.config")
    connections_max_reauth_ms: int = setting("connections.max.reauth.ms")
    sasl_server_max_receive_size: int = setting("sasl.server.max.receive.size")
    connection_failed_authentication_delay_ms: int = setting("connection.failed.authentication.delay.ms")
    ssl_client_auth: str = setting("ssl.client.auth")
    ssl_keystore_type: str = setting("ssl.keystore.type")
    ssl_keystore_location: str | None = setting("ssl.keystore.location")
    ssl_keystore_password: str | None = setting("ssl.keystore.password")
    ssl_keystore_certificate_chain: str | None = setting("ssl.keystore.certificate.chain")
    ssl_keystore_key: str | None = setting("ssl.keystore.key")
    ssl_key_password: str | None = setting("ssl.key.password")
    ssl_truststore_type: str = setting("ssl.truststore.type")
    ssl_truststore_location: str | None = setting("ssl.truststore.location")
    ssl_truststore_password: str | None = setting("ssl.truststore.password")
    ssl_truststore_certificates: str | None = setting("ssl.truststore.certificates")
    ssl_protocol: str = setting("ssl.protocol")
    ssl_enabled_protocols: str = setting("ssl.enabled.protocols")
    ssl_endpoint_identification_algorithm: str = setting("ssl.endpoint.identification.algorithm")
    ssl_principal_mapping_rules: str = setting("ssl.principal.mapping.rules")
    # listener.name.<listener>.<config> (KafkaConfig's per-listener overrides), verbatim.
    listener_overrides: dict[str, str] = field(default_factory=dict, repr=False)
    # Authorization and quotas (kafkasim.broker.security.authorizer, kafkasim.broker.quota_manager)
    authorizer_class_name: str = setting("authorizer.class.name")
    super_users: str | None = setting("super.users")
    allow_everyone_if_no_acl_found: bool = setting("allow.everyone.if.no.acl.found")
    quota_window_num: int = setting("quota.window.num")
    quota_window_size_seconds: int = setting("quota.window.size.seconds")
    # Not a Kafka config: whether the broker reads and enforces client quotas (Kafka always does;
    # `client.quotas=false` turns it off). Its startup reads ride on the broker's registration
    # (quota_manager's docstring), so a run without quotas keeps its simulated schedule.
    client_quotas: bool = True
    # The config names server.properties set (from_properties): DescribeConfigs' static layer.
    properties: frozenset[str] = field(default=frozenset(), repr=False)

    def value(self, name: str) -> Any:
        """The typed value of broker config `name` (KeyError: not one this config holds)."""
        return getattr(self, _FIELD_OF[name])

    def holds(self, name: str) -> bool:
        return name in _FIELD_OF

    def view(self, cls: type[T]) -> T:
        """A typed config of the broker's parts (ReplicationConfig, LogManagerConfig, ...) with
        this broker's values."""
        return cls(**{f.name: self.value(f.metadata[NAMES][0]) for f in config_fields(cls)})

    def log_config(self) -> LogConfig:
        """The broker-wide defaults of every log (Kafka's LogConfig built from KafkaConfig's
        log.* keys); topic configs override them per topic."""
        values = {k.name: v for k in TOPIC_CONFIGS if (v := self._topic_default(k)) is not None}
        return build(LogConfig, values)

    def _topic_default(self, key: ConfigKey) -> Any:
        """The first broker synonym with a value, in the topic's unit (KafkaConfig's
        logRetentionTimeMillis and logRollTimeMillis: the finest unit given wins)."""
        for name, factor in key.synonyms:
            value = self.value(name)
            if value is None:
                continue
            if factor != 1:
                value = value * factor
            # KafkaConfig.logRetentionTimeMillis: any negative retention means unlimited (-1).
            return -1 if key.name == "retention.ms" and value < 0 else value
        return None

    def log_manager_config(self) -> LogManagerConfig:
        """log.retention.check.interval.ms, log.cleaner.enable, ... for the LogManager."""
        return self.view(LogManagerConfig)

    def controller_config(self) -> ControllerConfig:
        return self.view(ControllerConfig)

    def group_coordinator_config(self) -> GroupCoordinatorConfig:
        return self.view(GroupCoordinatorConfig)

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> BrokerConfig:
        """Build from Kafka's names (`broker.id`, `log.segment.bytes`, ...; values typed as
        Kafka's ConfigDef parses server.properties) and `host`/`port`. An unknown name is an
        UnknownConfigError naming it; a bad value a ConfigValueError."""
        overrides = {k: str(v) for k, v in props.items() if k.startswith(LISTENER_PREFIX)}
        props = {k: v for k, v in props.items() if k not in overrides}
        check_names(BROKER, props, LISTENER_KEYS)
        listener: dict[str, Any] = {}
        if "host" in props:
            listener["host"] = str(props["host"])
        if "port" in props:
            listener["port"] = int(props["port"])
        if "client.quotas" in props:
            listener["client_quotas"] = str(props["client.quotas"]).strip().lower() == "true"
        cfg = build(cls, props, properties=frozenset(props) | frozenset(overrides), listener_overrides=overrides,
                    **listener)
        check_security(cfg)   # listeners, protocols, mechanisms: Kafka's startup checks, before anything starts
        if cfg.authorizer_class_name not in ("", ACL_AUTHORIZER):   # Kafka: the class is not found at startup
            raise ConfigValueError(f"Invalid value {cfg.authorizer_class_name} for configuration "
                                   f"authorizer.class.name: kafkasim has {ACL_AUTHORIZER} only")
        return cfg


# Broker config name -> the BrokerConfig field holding it (its own field, not a fallback's).
_FIELD_OF = {f.metadata[NAMES][0]: f.name for f in config_fields(BrokerConfig)}
