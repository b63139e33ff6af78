"""Every config kafkasim knows, once: Kafka 3.9's LogConfig (topic configs) and KafkaConfig
(broker configs) entries with their type, default, validator, synonyms and whether they are
dynamically updatable. Values, defaults, types and read-only flags of the described ones are what
a Kafka 3.9.1 broker answers to DescribeConfigs (captured with `realkafka`); TOPIC_CONFIGS is in
the order it lists them. Kafka knows configs kafkasim merely stores: they are here too, so a
scenario or `--config` may set them, and an unknown name is an error.

A topic config and its broker synonym are two configs (`retention.ms`, `log.retention.hours`),
as in Kafka; a topic config's default is its broker synonyms' (KafkaConfig's unit conversions),
stated only where no broker synonym has one (`flush.ms`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kafkasim.config.types import (
    BOOLEAN,
    DOUBLE,
    INT,
    LIST,
    LONG,
    LONG_MAX,
    PASSWORD,
    SHORT,
    STRING,
    Validator,
    at_least,
    between,
    level_or_default,
    one_of,
)

TOPIC = "topic"
BROKER = "broker"


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: int
    default: str | None      # Kafka's default as DescribeConfigs prints it; None: null (no value)
    scope: str               # TOPIC or BROKER
    dynamic: bool            # updatable without a restart (topic configs always are)
    validator: Validator | None = None
    # A topic config's broker synonyms, most precise first: (broker config, factor to the topic's unit).
    synonyms: tuple[tuple[str, int], ...] = ()
    described: bool = True   # listed by kafkasim's DescribeConfigs (a broker answers for a subset)

    @property
    def read_only(self) -> bool:
        return not self.dynamic


_H = 3_600_000
_M = 60_000
_LMAX = str(LONG_MAX)


def _broker(name: str, type_: int, default: str | None, dynamic: bool, validator: Validator | None = None,
            described: bool = True) -> ConfigKey:
    return ConfigKey(name, type_, default, BROKER, dynamic, validator, (), described)


def _host_counts(v: str) -> str | None:
    """max.connections.per.ip.overrides: comma-separated host:count (Kafka's getMap)."""
    for item in (p.strip() for p in v.split(",") if p.strip()):
        host, _, count = item.rpartition(":")
        if not host.strip() or not count.strip().isdigit():
            return f"entry '{item}' is not host:count"
    return None


# The broker configs kafkasim describes (in the order it lists them): those behind every topic
# config, and those it runs by.
_DESCRIBED_BROKER_CONFIGS: tuple[ConfigKey, ...] = (
    _broker("broker.id", INT, "-1", False),
    _broker("listeners", STRING, "PLAINTEXT://:9092", True),
    _broker("advertised.listeners", STRING, None, True),  # null: the listeners are advertised
    _broker("log.dirs", STRING, None, False),
    _broker("log.dir", STRING, "/tmp/kafka-logs", False),
    _broker("broker.rack", STRING, None, False),
    _broker("num.partitions", INT, "1", False),
    _broker("default.replication.factor", INT, "1", False),
    _broker("auto.create.topics.enable", BOOLEAN, "true", False),
    _broker("delete.topic.enable", BOOLEAN, "true", False),
    _broker("socket.request.max.bytes", INT, "104857600", False),
    _broker("zookeeper.session.timeout.ms", INT, "18000", False),
    _broker("fetch.max.bytes", INT, "57671680", False),
    _broker("connections.max.idle.ms", LONG, "600000", False),
    _broker("group.initial.rebalance.delay.ms", INT, "3000", False),
    _broker("group.min.session.timeout.ms", INT, "6000", False),
    _broker("group.max.session.timeout.ms", INT, "1800000", False),
    _broker("group.max.size", INT, "2147483647", False),
    _broker("offsets.topic.num.partitions", INT, "50", False),
    _broker("offsets.topic.replication.factor", SHORT, "3", False),
    _broker("offsets.topic.segment.bytes", INT, "104857600", False),
    _broker("offsets.retention.minutes", INT, "10080", False),
    _broker("offsets.retention.check.interval.ms", LONG, "600000", False),
    _broker("offsets.load.buffer.size", INT, "5242880", False),
    _broker("offsets.commit.timeout.ms", INT, "5000", False),
    # The transaction coordinator (TransactionLogConfigs, TransactionStateManagerConfigs).
    _broker("transaction.state.log.num.partitions", INT, "50", False, at_least(1), described=False),
    _broker("transaction.state.log.replication.factor", SHORT, "3", False, at_least(1), described=False),
    _broker("transaction.state.log.min.isr", INT, "2", False, at_least(1), described=False),
    _broker("transaction.state.log.segment.bytes", INT, "104857600", False, at_least(1), described=False),
    _broker("transaction.state.log.load.buffer.size", INT, "5242880", False, at_least(1), described=False),
    _broker("transactional.id.expiration.ms", INT, "604800000", True, at_least(1), described=False),
    _broker("transaction.max.timeout.ms", INT, "900000", False, at_least(1), described=False),
    _broker("transaction.abort.timed.out.transaction.cleanup.interval.ms", INT, "10000", False, at_least(1),
            described=False),
    _broker("transaction.remove.expired.transaction.cleanup.interval.ms", INT, "3600000", False, at_least(1),
            described=False),
    _broker("transaction.partition.verification.enable", BOOLEAN, "true", True, described=False),
    # The producer state's expiry (TransactionLogConfigs; the check interval is an internal config).
    _broker("producer.id.expiration.ms", INT, "86400000", True, at_least(1), described=False),
    _broker("producer.id.expiration.check.interval.ms", INT, "600000", False, at_least(1), described=False),
    _broker("offset.metadata.max.bytes", INT, "4096", False),
    _broker("message.max.bytes", INT, "1048588", True),
    _broker("min.insync.replicas", INT, "1", True),
    _broker("compression.type", STRING, "producer", True),
    _broker("compression.gzip.level", INT, "-1", True),
    _broker("compression.lz4.level", INT, "9", True),
    _broker("compression.zstd.level", INT, "3", True),
    _broker("unclean.leader.election.enable", BOOLEAN, "false", True),
    _broker("log.segment.bytes", INT, "1073741824", True),
    _broker("log.roll.ms", LONG, None, True),
    _broker("log.roll.hours", INT, "168", False),
    _broker("log.roll.jitter.ms", LONG, None, True),
    _broker("log.roll.jitter.hours", INT, "0", False),
    _broker("log.retention.ms", LONG, None, True),
    _broker("log.retention.minutes", INT, None, False),
    _broker("log.retention.hours", INT, "168", False),
    _broker("log.retention.bytes", LONG, "-1", True),
    _broker("log.local.retention.ms", LONG, "-2", True),
    _broker("log.local.retention.bytes", LONG, "-2", True),
    _broker("log.cleanup.policy", LIST, "delete", True),
    _broker("log.flush.interval.messages", LONG, _LMAX, True),
    _broker("log.flush.interval.ms", LONG, None, True),
    _broker("log.message.timestamp.type", STRING, "CreateTime", True),
    _broker("log.message.timestamp.difference.max.ms", LONG, _LMAX, True),
    _broker("log.message.timestamp.before.max.ms", LONG, _LMAX, True),
    _broker("log.message.timestamp.after.max.ms", LONG, _LMAX, True),
    _broker("log.message.downconversion.enable", BOOLEAN, "true", True),
    _broker("log.message.format.version", STRING, "3.0-IV1", False),
    _broker("log.index.size.max.bytes", INT, "10485760", True),
    _broker("log.index.interval.bytes", INT, "4096", True),
    _broker("log.preallocate", BOOLEAN, "false", True),
    _broker("log.segment.delete.delay.ms", LONG, "60000", True),
    _broker("log.cleaner.delete.retention.ms", LONG, "86400000", True),
    _broker("log.cleaner.min.compaction.lag.ms", LONG, "0", True),
    _broker("log.cleaner.max.compaction.lag.ms", LONG, _LMAX, True),
    _broker("log.cleaner.min.cleanable.ratio", DOUBLE, "0.5", True),
)

# Broker configs kafkasim runs by but does not describe (Kafka 3.9's KafkaConfig definitions).
_OTHER_BROKER_CONFIGS: tuple[ConfigKey, ...] = (
    # ConnectionQuotas (SocketServerConfigs): limits checked right after accept
    _broker("max.connections.per.ip", INT, "2147483647", True, at_least(0), described=False),
    _broker("max.connections.per.ip.overrides", STRING, "", True, _host_counts, described=False),
    _broker("max.connections", INT, "2147483647", True, at_least(0), described=False),
    # ReplicationConfigs
    _broker("replica.lag.time.max.ms", LONG, "30000", False, described=False),
    _broker("replica.fetch.wait.max.ms", INT, "500", False, described=False),
    _broker("replica.fetch.min.bytes", INT, "1", False, described=False),
    _broker("replica.fetch.max.bytes", INT, "1048576", False, at_least(0), described=False),
    _broker("max.incremental.fetch.session.cache.slots", INT, "1000", False, at_least(0), described=False),
    _broker("replica.fetch.response.max.bytes", INT, "10485760", False, at_least(0), described=False),
    _broker("replica.fetch.backoff.ms", INT, "1000", False, at_least(0), described=False),
    _broker("replica.socket.timeout.ms", INT, "30000", False, described=False),
    _broker("replica.high.watermark.checkpoint.interval.ms", LONG, "5000", False, described=False),
    _broker("request.timeout.ms", INT, "30000", False, described=False),
    _broker("socket.connection.setup.timeout.ms", LONG, "10000", False, described=False),
    _broker("inter.broker.protocol.version", STRING, "3.9-IV0", False, described=False),
    # Authorization (AclAuthorizer's configs) and client quotas (ClientQuotaManagerConfig)
    _broker("authorizer.class.name", STRING, "", False, one_of("", "kafka.security.authorizer.AclAuthorizer"),
            described=False),
    _broker("super.users", STRING, None, False, described=False),
    _broker("allow.everyone.if.no.acl.found", BOOLEAN, "false", False, described=False),
    _broker("quota.window.num", INT, "11", False, at_least(1), described=False),
    _broker("quota.window.size.seconds", INT, "1", False, at_least(1), described=False),
    # The controller (ZooKeeper mode) and controlled shutdown
    _broker("controller.socket.timeout.ms", INT, "30000", False, described=False),
    _broker("controlled.shutdown.enable", BOOLEAN, "true", False, described=False),
    _broker("controlled.shutdown.max.retries", INT, "3", False, described=False),
    _broker("controlled.shutdown.retry.backoff.ms", LONG, "5000", False, described=False),
    _broker("auto.leader.rebalance.enable", BOOLEAN, "true", False, described=False),
    _broker("leader.imbalance.per.broker.percentage", INT, "10", False, described=False),
    _broker("leader.imbalance.check.interval.seconds", LONG, "300", False, at_least(1), described=False),
    # LogManager (ServerLogConfigs, CleanerConfig)
    _broker("log.retention.check.interval.ms", LONG, "300000", False, at_least(1), described=False),
    _broker("log.flush.scheduler.interval.ms", LONG, _LMAX, False, described=False),
    _broker("log.flush.offset.checkpoint.interval.ms", INT, "60000", False, at_least(0), described=False),
    _broker("log.flush.start.offset.checkpoint.interval.ms", INT, "60000", False, at_least(0), described=False),
    _broker("log.initial.task.delay.ms", LONG, "30000", False, at_least(0), described=False),
    _broker("log.cleaner.enable", BOOLEAN, "true", False, described=False),
    _broker("log.cleaner.backoff.ms", LONG, "15000", True, at_least(0), described=False),
    _broker("log.cleaner.dedupe.buffer.size", LONG, "134217728", True, described=False),
    # Listeners and security (SocketServerConfigs, ReplicationConfigs, BrokerSecurityConfigs, SslConfigs,
    # SaslConfigs). listener.name.<listener>.<config> overrides (KafkaConfig's listener prefix) are
    # accepted by BrokerConfig.from_properties beside these.
    _broker("listener.security.protocol.map", STRING,
            "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT", True, described=False),
    _broker("inter.broker.listener.name", STRING, None, False, described=False),
    _broker("security.inter.broker.protocol", STRING, "PLAINTEXT", False,
            one_of("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"), described=False),
    _broker("sasl.enabled.mechanisms", LIST, "GSSAPI", True, described=False),
    _broker("sasl.mechanism.inter.broker.protocol", STRING, "GSSAPI", True, described=False),
    _broker("sasl.jaas.config", PASSWORD, None, True, described=False),
    _broker("connections.max.reauth.ms", LONG, "0", False, described=False),
    _broker("connection.failed.authentication.delay.ms", INT, "100", False, at_least(0), described=False),
    _broker("sasl.server.max.receive.size", INT, "524288", False, described=False),
    _broker("ssl.client.auth", STRING, "none", True, one_of("required", "requested", "none"), described=False),
    _broker("ssl.keystore.type", STRING, "JKS", True, described=False),
    _broker("ssl.keystore.location", STRING, None, True, described=False),
    _broker("ssl.keystore.password", PASSWORD, None, True, described=False),
    _broker("ssl.keystore.certificate.chain", PASSWORD, None, True, described=False),
    _broker("ssl.keystore.key", PASSWORD, None, True, described=False),
    _broker("ssl.key.password", PASSWORD, None, True, described=False),
    _broker("ssl.truststore.type", STRING, "JKS", True, described=False),
    _broker("ssl.truststore.location", STRING, None, True, described=False),
    _broker("ssl.truststore.password", PASSWORD, None, True, described=False),
    _broker("ssl.truststore.certificates", PASSWORD, None, True, described=False),
    _broker("ssl.protocol", STRING, "TLSv1.3", True, described=False),
    _broker("ssl.enabled.protocols", LIST, "TLSv1.2,TLSv1.3", True, described=False),
    _broker("ssl.endpoint.identification.algorithm", STRING, "https", True, described=False),
    _broker("ssl.principal.mapping.rules", STRING, "DEFAULT", False, described=False),
)

_BROKER_BY_NAME = {k.name: k for k in _DESCRIBED_BROKER_CONFIGS + _OTHER_BROKER_CONFIGS}


def _topic(name: str, type_: int, synonyms: tuple[tuple[str, int], ...] = (), validator: Validator | None = None,
           default: str | None = None) -> ConfigKey:
    """A topic config; without `default`, its broker synonyms' (the first that has one, in the
    topic's unit: log.retention.hours=168 gives retention.ms=604800000)."""
    if default is None:
        name_, factor = next(s for s in synonyms if _BROKER_BY_NAME[s[0]].default is not None)
        raw = _BROKER_BY_NAME[name_].default
        assert raw is not None
        default = raw if factor == 1 else str(int(raw) * factor)
    return ConfigKey(name, type_, default, TOPIC, True, validator, synonyms)


TOPIC_CONFIGS: tuple[ConfigKey, ...] = (
    _topic("compression.type", STRING, (("compression.type", 1),),
           one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
    _topic("remote.log.delete.on.disable", BOOLEAN, default="false"),
    _topic("leader.replication.throttled.replicas", LIST, default=""),
    _topic("remote.storage.enable", BOOLEAN, default="false"),
    _topic("message.downconversion.enable", BOOLEAN, (("log.message.downconversion.enable", 1),)),
    _topic("min.insync.replicas", INT, (("min.insync.replicas", 1),), at_least(1)),
    _topic("segment.jitter.ms", LONG, (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", _H)), at_least(0)),
    _topic("remote.log.copy.disable", BOOLEAN, default="false"),
    _topic("local.retention.ms", LONG, (("log.local.retention.ms", 1),), at_least(-2)),
    _topic("cleanup.policy", LIST, (("log.cleanup.policy", 1),), one_of("compact", "delete")),
    # log.flush.interval.ms is null: Kafka falls back to log.flush.scheduler.interval.ms.
    _topic("flush.ms", LONG, (("log.flush.interval.ms", 1),), at_least(0), default=_LMAX),
    _topic("follower.replication.throttled.replicas", LIST, default=""),
    _topic("compression.lz4.level", INT, (("compression.lz4.level", 1),), between(1, 17)),
    _topic("segment.bytes", INT, (("log.segment.bytes", 1),), at_least(14)),
    _topic("retention.ms", LONG, (("log.retention.ms", 1), ("log.retention.minutes", _M), ("log.retention.hours", _H)),
           at_least(-1)),
    _topic("compression.gzip.level", INT, (("compression.gzip.level", 1),), level_or_default(1, 9)),
    _topic("flush.messages", LONG, (("log.flush.interval.messages", 1),), at_least(1)),
    _topic("compression.zstd.level", INT, (("compression.zstd.level", 1),), between(-131072, 22)),
    _topic("message.format.version", STRING, (("log.message.format.version", 1),)),
    _topic("max.compaction.lag.ms", LONG, (("log.cleaner.max.compaction.lag.ms", 1),), at_least(1)),
    _topic("file.delete.delay.ms", LONG, (("log.segment.delete.delay.ms", 1),), at_least(0)),
    _topic("max.message.bytes", INT, (("message.max.bytes", 1),), at_least(0)),
    _topic("min.compaction.lag.ms", LONG, (("log.cleaner.min.compaction.lag.ms", 1),), at_least(0)),
    _topic("message.timestamp.type", STRING, (("log.message.timestamp.type", 1),),
           one_of("CreateTime", "LogAppendTime")),
    _topic("local.retention.bytes", LONG, (("log.local.retention.bytes", 1),), at_least(-2)),
    _topic("preallocate", BOOLEAN, (("log.preallocate", 1),)),
    _topic("min.cleanable.dirty.ratio", DOUBLE, (("log.cleaner.min.cleanable.ratio", 1),), between(0, 1)),
    _topic("index.interval.bytes", INT, (("log.index.interval.bytes", 1),), at_least(0)),
    _topic("unclean.leader.election.enable", BOOLEAN, (("unclean.leader.election.enable", 1),)),
    _topic("retention.bytes", LONG, (("log.retention.bytes", 1),)),
    _topic("delete.retention.ms", LONG, (("log.cleaner.delete.retention.ms", 1),), at_least(0)),
    _topic("message.timestamp.after.max.ms", LONG, (("log.message.timestamp.after.max.ms", 1),), at_least(0)),
    _topic("message.timestamp.before.max.ms", LONG, (("log.message.timestamp.before.max.ms", 1),), at_least(0)),
    _topic("segment.ms", LONG, (("log.roll.ms", 1), ("log.roll.hours", _H)), at_least(1)),
    _topic("message.timestamp.difference.max.ms", LONG, (("log.message.timestamp.difference.max.ms", 1),),
           at_least(0)),
    _topic("segment.index.bytes", INT, (("log.index.size.max.bytes", 1),), at_least(4)),
)
TOPIC_KEYS = {k.name: k for k in TOPIC_CONFIGS}


def _with_topic_validator(key: ConfigKey) -> ConfigKey:
    """A broker config that is a topic config in the same unit (log.segment.bytes for
    segment.bytes) is validated as that topic config."""
    if key.validator is not None:
        return key
    same = next((t.validator for t in TOPIC_CONFIGS if t.validator is not None and (key.name, 1) in t.synonyms),
                None)
    return replace(key, validator=same) if same is not None else key


BROKER_CONFIGS: tuple[ConfigKey, ...] = tuple(_with_topic_validator(k) for k in
                                              _DESCRIBED_BROKER_CONFIGS + _OTHER_BROKER_CONFIGS)
BROKER_KEYS = {k.name: k for k in BROKER_CONFIGS}
DESCRIBED_BROKER_CONFIGS = tuple(k for k in BROKER_CONFIGS if k.described)
