"""Topic and broker configs as Kafka 3.9 (ZooKeeper mode) describes, validates and layers them:
Kafka's `LogConfig` (topic configs), the broker configs behind them, `ConfigHelper`'s synonyms
and sources, `ConfigDef` parsing/validation, and `ConfigAdminManager`'s incremental operations.

Layers, highest first (DescribeConfigs ConfigSource in brackets):

  topic override          /config/topics/<t>                 (1 TOPIC_CONFIG)
  dynamic per-broker      /config/brokers/<id>               (2 DYNAMIC_BROKER_CONFIG)
  dynamic cluster default /config/brokers/<default>          (3 DYNAMIC_DEFAULT_BROKER_CONFIG)
  static broker           server.properties / BrokerConfig   (4 STATIC_BROKER_CONFIG)
  Kafka's default                                            (5 DEFAULT_CONFIG)

A topic config's synonyms are its override (if any), then its broker synonyms found in each
broker layer — `log.retention.ms`, `log.retention.minutes`, `log.retention.hours` for
`retention.ms` — with Kafka's quirk kept: the list is dropped up to the first entry named like the
PRIMARY broker synonym (`dropWhile(name != primary)`), so `retention.ms` has no synonyms while
only `log.retention.hours` (a default) exists. Values, defaults, types and read-only flags are
those a Kafka 3.9.1 broker answers (captured with `realkafka`); the order of TOPIC_CONFIGS is the
order it lists them in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from decimal import Decimal
from typing import Any

from kafkasim.storage.log import LogConfig

# DescribeConfigsResponse ConfigSource
TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

# DescribeConfigsResponse ConfigType
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = range(1, 10)
TYPE_NAMES = {BOOLEAN: "BOOLEAN", STRING: "STRING", INT: "INT", SHORT: "SHORT", LONG: "LONG", DOUBLE: "DOUBLE",
              LIST: "LIST", CLASS: "CLASS", PASSWORD: "PASSWORD"}

# ConfigResource.Type
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4

# IncrementalAlterConfigs ConfigOperation
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3

DEFAULT_BROKER_ENTITY = "<default>"
LONG_MAX = 2**63 - 1
INT_MIN, INT_MAX = -(2**31), 2**31 - 1


class ConfigValueError(Exception):
    """ConfigException: 'Invalid value V for configuration NAME: REASON'."""


Validator = Callable[[Any], str | None]


def at_least(lo: float) -> Validator:
    return lambda v: None if v >= lo else f"Value must be at least {lo}"


def between(lo: float, hi: float) -> Validator:
    def check(v: Any) -> str | None:
        if v < lo:
            return f"Value must be at least {lo}"
        if v > hi:
            return f"Value must be no more than {hi}"
        return None
    return check


def one_of(*allowed: str) -> Validator:
    def check(v: Any) -> str | None:
        items = v if isinstance(v, list) else [v]
        bad = [i for i in items if i not in allowed]
        return f"String must be one of: {', '.join(allowed)}" if bad else None
    return check


def level_or_default(lo: int, hi: int) -> Validator:
    return lambda v: None if v == -1 or lo <= v <= hi else f"Value must be between {lo} and {hi} or -1"


@dataclass(frozen=True)
class TopicConfigDef:
    name: str
    type: int
    default: str
    broker_synonyms: tuple[tuple[str, int], ...] = ()  # (broker config, factor to the topic unit)
    validator: Validator | None = None


_H = 3_600_000
_M = 60_000
_LMAX = str(LONG_MAX)

TOPIC_CONFIGS: tuple[TopicConfigDef, ...] = (
    TopicConfigDef("compression.type", STRING, "producer", (("compression.type", 1),),
                   one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
    TopicConfigDef("remote.log.delete.on.disable", BOOLEAN, "false"),
    TopicConfigDef("leader.replication.throttled.replicas", LIST, ""),
    TopicConfigDef("remote.storage.enable", BOOLEAN, "false"),
    TopicConfigDef("message.downconversion.enable", BOOLEAN, "true", (("log.message.downconversion.enable", 1),)),
    TopicConfigDef("min.insync.replicas", INT, "1", (("min.insync.replicas", 1),), at_least(1)),
    TopicConfigDef("segment.jitter.ms", LONG, "0", (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", _H)),
                   at_least(0)),
    TopicConfigDef("remote.log.copy.disable", BOOLEAN, "false"),
    TopicConfigDef("local.retention.ms", LONG, "-2", (("log.local.retention.ms", 1),), at_least(-2)),
    TopicConfigDef("cleanup.policy", LIST, "delete", (("log.cleanup.policy", 1),), one_of("compact", "delete")),
    TopicConfigDef("flush.ms", LONG, _LMAX, (("log.flush.interval.ms", 1),), at_least(0)),
    TopicConfigDef("follower.replication.throttled.replicas", LIST, ""),
    TopicConfigDef("compression.lz4.level", INT, "9", (("compression.lz4.level", 1),), between(1, 17)),
    TopicConfigDef("segment.bytes", INT, "1073741824", (("log.segment.bytes", 1),), at_least(14)),
    TopicConfigDef("retention.ms", LONG, "604800000",
                   (("log.retention.ms", 1), ("log.retention.minutes", _M), ("log.retention.hours", _H)),
                   at_least(-1)),
    TopicConfigDef("compression.gzip.level", INT, "-1", (("compression.gzip.level", 1),), level_or_default(1, 9)),
    TopicConfigDef("flush.messages", LONG, _LMAX, (("log.flush.interval.messages", 1),), at_least(1)),
    TopicConfigDef("compression.zstd.level", INT, "3", (("compression.zstd.level", 1),), between(-131072, 22)),
    TopicConfigDef("message.format.version", STRING, "3.0-IV1", (("log.message.format.version", 1),)),
    TopicConfigDef("max.compaction.lag.ms", LONG, _LMAX, (("log.cleaner.max.compaction.lag.ms", 1),), at_least(1)),
    TopicConfigDef("file.delete.delay.ms", LONG, "60000", (("log.segment.delete.delay.ms", 1),), at_least(0)),
    TopicConfigDef("max.message.bytes", INT, "1048588", (("message.max.bytes", 1),), at_least(0)),
    TopicConfigDef("min.compaction.lag.ms", LONG, "0", (("log.cleaner.min.compaction.lag.ms", 1),), at_least(0)),
    TopicConfigDef("message.timestamp.type", STRING, "CreateTime", (("log.message.timestamp.type", 1),),
                   one_of("CreateTime", "LogAppendTime")),
    TopicConfigDef("local.retention.bytes", LONG, "-2", (("log.local.retention.bytes", 1),), at_least(-2)),
    TopicConfigDef("preallocate", BOOLEAN, "false", (("log.preallocate", 1),)),
    TopicConfigDef("min.cleanable.dirty.ratio", DOUBLE, "0.5", (("log.cleaner.min.cleanable.ratio", 1),),
                   between(0, 1)),
    TopicConfigDef("index.interval.bytes", INT, "4096", (("log.index.interval.bytes", 1),), at_least(0)),
    TopicConfigDef("unclean.leader.election.enable", BOOLEAN, "false", (("unclean.leader.election.enable", 1),)),
    TopicConfigDef("retention.bytes", LONG, "-1", (("log.retention.bytes", 1),)),
    TopicConfigDef("delete.retention.ms", LONG, "86400000", (("log.cleaner.delete.retention.ms", 1),), at_least(0)),
    TopicConfigDef("message.timestamp.after.max.ms", LONG, _LMAX, (("log.message.timestamp.after.max.ms", 1),),
                   at_least(0)),
    TopicConfigDef("message.timestamp.before.max.ms", LONG, _LMAX, (("log.message.timestamp.before.max.ms", 1),),
                   at_least(0)),
    TopicConfigDef("segment.ms", LONG, "604800000", (("log.roll.ms", 1), ("log.roll.hours", _H)), at_least(1)),
    TopicConfigDef("message.timestamp.difference.max.ms", LONG, _LMAX,
                   (("log.message.timestamp.difference.max.ms", 1),), at_least(0)),
    TopicConfigDef("segment.index.bytes", INT, "10485760", (("log.index.size.max.bytes", 1),), at_least(4)),
)
TOPIC_CONFIG_DEFS = {d.name: d for d in TOPIC_CONFIGS}


@dataclass(frozen=True)
class BrokerConfigDef:
    name: str
    type: int
    default: str | None   # None: Kafka's default is null (no value, no DEFAULT synonym)
    read_only: bool          # not dynamically updatable
    field: str | None = None  # the BrokerConfig attribute holding the static value


# The broker configs kafkasim describes: those behind every topic config, and those it runs by.
BROKER_CONFIGS: tuple[BrokerConfigDef, ...] = (
    BrokerConfigDef("broker.id", INT, "-1", True, "broker_id"),
    BrokerConfigDef("listeners", STRING, "PLAINTEXT://:9092", False),
    BrokerConfigDef("advertised.listeners", STRING, None, False),  # null: the listeners are advertised
    BrokerConfigDef("log.dirs", STRING, None, True, "log_dir"),
    BrokerConfigDef("log.dir", STRING, "/tmp/kafka-logs", True),
    BrokerConfigDef("broker.rack", STRING, None, True, "rack"),
    BrokerConfigDef("num.partitions", INT, "1", True, "num_partitions"),
    BrokerConfigDef("default.replication.factor", INT, "1", True, "default_replication_factor"),
    BrokerConfigDef("auto.create.topics.enable", BOOLEAN, "true", True, "auto_create_topics_enable"),
    BrokerConfigDef("delete.topic.enable", BOOLEAN, "true", True),
    BrokerConfigDef("socket.request.max.bytes", INT, "104857600", True, "socket_request_max_bytes"),
    BrokerConfigDef("zookeeper.session.timeout.ms", INT, "18000", True, "zookeeper_session_timeout_ms"),
    BrokerConfigDef("fetch.max.bytes", INT, "57671680", True, "fetch_max_bytes"),
    BrokerConfigDef("connections.max.idle.ms", LONG, "600000", True, "connections_max_idle_ms"),
    BrokerConfigDef("group.initial.rebalance.delay.ms", INT, "3000", True, "group_initial_rebalance_delay_ms"),
    BrokerConfigDef("group.min.session.timeout.ms", INT, "6000", True, "group_min_session_timeout_ms"),
    BrokerConfigDef("group.max.session.timeout.ms", INT, "1800000", True, "group_max_session_timeout_ms"),
    BrokerConfigDef("group.max.size", INT, "2147483647", True, "group_max_size"),
    BrokerConfigDef("offsets.topic.num.partitions", INT, "50", True, "offsets_topic_num_partitions"),
    BrokerConfigDef("offsets.topic.replication.factor", SHORT, "3", True, "offsets_topic_replication_factor"),
    BrokerConfigDef("offsets.topic.segment.bytes", INT, "104857600", True, "offsets_topic_segment_bytes"),
    BrokerConfigDef("offsets.retention.minutes", INT, "10080", True, "offsets_retention_minutes"),
    BrokerConfigDef("offsets.retention.check.interval.ms", LONG, "600000", True,
                    "offsets_retention_check_interval_ms"),
    BrokerConfigDef("offsets.load.buffer.size", INT, "5242880", True, "offsets_load_buffer_size"),
    BrokerConfigDef("offsets.commit.timeout.ms", INT, "5000", True, "offsets_commit_timeout_ms"),
    BrokerConfigDef("offset.metadata.max.bytes", INT, "4096", True, "offset_metadata_max_bytes"),
    BrokerConfigDef("message.max.bytes", INT, "1048588", False, "message_max_bytes"),
    BrokerConfigDef("min.insync.replicas", INT, "1", False),
    BrokerConfigDef("compression.type", STRING, "producer", False),
    BrokerConfigDef("compression.gzip.level", INT, "-1", False),
    BrokerConfigDef("compression.lz4.level", INT, "9", False),
    BrokerConfigDef("compression.zstd.level", INT, "3", False),
    BrokerConfigDef("unclean.leader.election.enable", BOOLEAN, "false", False),
    BrokerConfigDef("log.segment.bytes", INT, "1073741824", False, "log_segment_bytes"),
    BrokerConfigDef("log.roll.ms", LONG, None, False),
    BrokerConfigDef("log.roll.hours", INT, "168", True),
    BrokerConfigDef("log.roll.jitter.ms", LONG, None, False),
    BrokerConfigDef("log.roll.jitter.hours", INT, "0", True),
    BrokerConfigDef("log.retention.ms", LONG, None, False),
    BrokerConfigDef("log.retention.minutes", INT, None, True),
    BrokerConfigDef("log.retention.hours", INT, "168", True),
    BrokerConfigDef("log.retention.bytes", LONG, "-1", False),
    BrokerConfigDef("log.local.retention.ms", LONG, "-2", False),
    BrokerConfigDef("log.local.retention.bytes", LONG, "-2", False),
    BrokerConfigDef("log.cleanup.policy", LIST, "delete", False),
    BrokerConfigDef("log.flush.interval.messages", LONG, _LMAX, False, "log_flush_interval_messages"),
    BrokerConfigDef("log.flush.interval.ms", LONG, None, False),
    BrokerConfigDef("log.message.timestamp.type", STRING, "CreateTime", False),
    BrokerConfigDef("log.message.timestamp.difference.max.ms", LONG, _LMAX, False),
    BrokerConfigDef("log.message.timestamp.before.max.ms", LONG, _LMAX, False),
    BrokerConfigDef("log.message.timestamp.after.max.ms", LONG, _LMAX, False),
    BrokerConfigDef("log.message.downconversion.enable", BOOLEAN, "true", False),
    BrokerConfigDef("log.message.format.version", STRING, "3.0-IV1", True),
    BrokerConfigDef("log.index.size.max.bytes", INT, "10485760", False),
    BrokerConfigDef("log.index.interval.bytes", INT, "4096", False),
    BrokerConfigDef("log.preallocate", BOOLEAN, "false", False),
    BrokerConfigDef("log.segment.delete.delay.ms", LONG, "60000", False),
    BrokerConfigDef("log.cleaner.delete.retention.ms", LONG, "86400000", False),
    BrokerConfigDef("log.cleaner.min.compaction.lag.ms", LONG, "0", False),
    BrokerConfigDef("log.cleaner.max.compaction.lag.ms", LONG, _LMAX, False),
    BrokerConfigDef("log.cleaner.min.cleanable.ratio", DOUBLE, "0.5", False),
)
BROKER_CONFIG_DEFS = {d.name: d for d in BROKER_CONFIGS}
# Broker configs known to be settable only statically (ZooKeeper-mode DynamicBrokerConfig).
READ_ONLY_BROKER_CONFIGS = frozenset(d.name for d in BROKER_CONFIGS if d.read_only)
# DynamicBrokerConfig.brokerConfigSynonyms: a group of unit variants, most precise first.
BROKER_SYNONYM_GROUPS = tuple(tuple(n for n, _ in d.broker_synonyms) for d in TOPIC_CONFIGS
                              if len(d.broker_synonyms) > 1)


def broker_synonyms(name: str) -> tuple[str, ...]:
    return next((g for g in BROKER_SYNONYM_GROUPS if name in g), (name,))


# ---------------------------------------------------------------- ConfigDef parsing
def parse_value(name: str, type_: int, raw: str) -> Any:
    """ConfigDef.parseType: the typed value, or ConfigValueError with Kafka's message."""
    s = raw.strip()
    try:
        if type_ in (INT, SHORT, LONG):
            v = int(s, 10)
            lo, hi = (INT_MIN, INT_MAX) if type_ == INT else (-(2**15), 2**15 - 1) if type_ == SHORT \
                else (-(2**63), LONG_MAX)
            if not lo <= v <= hi or not s.lstrip("+-").isdigit():
                raise ValueError(s)
            return v
        if type_ == DOUBLE:
            return float(s)
    except ValueError:
        raise ConfigValueError(f"Invalid value {raw} for configuration {name}: Not a number of type "
                               f"{TYPE_NAMES[type_]}") from None
    if type_ == BOOLEAN:
        if s.lower() not in ("true", "false"):
            raise ConfigValueError(f"Invalid value {raw} for configuration {name}: Expected value to be either "
                                   f"true or false")
        return s.lower() == "true"
    if type_ == LIST:
        return [] if s == "" else [p.strip() for p in s.split(",")]
    return s


def to_string(type_: int, value: Any) -> str | None:
    """ConfigDef.convertToString."""
    if value is None:
        return None
    if type_ == BOOLEAN:
        return "true" if value else "false"
    if type_ == LIST:
        return ",".join(value)
    if type_ == DOUBLE:
        return java_double(value)
    return str(value)


def java_double(v: float) -> str:
    """Double.toString ("0.5", "1.0", "1.0E7", "1.7976931348623157E308")."""
    if v == 0 or 1e-3 <= abs(v) < 1e7:
        return repr(float(v))
    sign, digits, exp = Decimal(repr(v)).normalize().as_tuple()
    ds = "".join(map(str, digits))
    e10 = len(ds) - 1 + int(exp)
    return f"{'-' if sign else ''}{ds[0]}.{ds[1:] or '0'}E{e10}"


def validate_topic_value(name: str, raw: str) -> Any:
    d = TOPIC_CONFIG_DEFS[name]
    v = parse_value(name, d.type, raw)
    if d.validator is not None:
        problem = d.validator(v)
        if problem:
            raise ConfigValueError(f"Invalid value {to_string(d.type, v)} for configuration {name}: {problem}")
    return v


def validate_topic_overrides(props: dict[str, str]) -> None:
    """LogConfig.validate: unknown names are an UnknownTopicConfig, bad values a ConfigValueError."""
    for name, raw in props.items():
        if name not in TOPIC_CONFIG_DEFS:
            raise UnknownConfigError(f"Unknown topic config name: {name}")
        validate_topic_value(name, raw)


class UnknownConfigError(Exception):
    pass


def validate_broker_value(name: str, raw: str) -> None:
    """Dynamic broker values: typed like the broker config; the topic config's validator when it
    is the same config in the same unit (log.segment.bytes → segment.bytes)."""
    d = BROKER_CONFIG_DEFS.get(name)
    if d is None:
        return  # custom configs are accepted as Kafka does
    v = parse_value(name, d.type, raw)
    for t in TOPIC_CONFIGS:
        if t.validator is not None and (name, 1) in t.broker_synonyms:
            problem = t.validator(v)
            if problem:
                raise ConfigValueError(f"Invalid value {to_string(d.type, v)} for configuration {name}: {problem}")


# ---------------------------------------------------------------- layers
@dataclass
class BrokerConfigLayers:
    """The broker-level values: dynamic per-broker, dynamic cluster default, static, default."""
    static: dict[str, str]
    dynamic_default: dict[str, str]
    dynamic_broker: dict[str, str]

    @staticmethod
    def kafka_defaults() -> dict[str, str]:
        return {d.name: d.default for d in BROKER_CONFIGS if d.default is not None}

    def ordered(self) -> list[tuple[dict[str, str], int]]:
        return [(self.dynamic_broker, DYNAMIC_BROKER_CONFIG), (self.dynamic_default, DYNAMIC_DEFAULT_BROKER_CONFIG),
                (self.static, STATIC_BROKER_CONFIG), (self.kafka_defaults(), DEFAULT_CONFIG)]

    def merged(self) -> dict[str, str]:
        out = self.kafka_defaults()
        for layer in (self.static, self.dynamic_default, self.dynamic_broker):
            out.update(layer)
        return out


def static_broker_configs(cfg: Any, listeners: str) -> dict[str, str]:
    """The static layer from a BrokerConfig: every described config whose value differs from
    Kafka's default (plus broker.id, log.dirs and listeners, which a broker always sets), and
    Kafka-named keys kept in `extra`."""
    out: dict[str, str] = {}
    for d in BROKER_CONFIGS:
        if d.field is None or not hasattr(cfg, d.field):
            continue
        value = getattr(cfg, d.field)
        if value is None:
            continue
        s = to_string(d.type, value) or ""
        if s != d.default or d.name in ("broker.id", "log.dirs"):
            out[d.name] = s
    out["listeners"] = listeners
    for key, value in sorted(getattr(cfg, "extra", {}).items()):
        if key in BROKER_CONFIG_DEFS and value is not None:
            out[key] = str(value).lower() if isinstance(value, bool) else str(value)
    return out


Synonym = tuple[str, str | None, int]


def _config_synonyms(primary: str, names: tuple[str, ...], layers: BrokerConfigLayers) -> list[Synonym]:
    """ConfigHelper.configSynonyms: each layer's values of the synonym names, then
    dropWhile(name != primary)."""
    found: list[Synonym] = [(n, layer[n], src) for layer, src in layers.ordered() for n in names if n in layer]
    while found and found[0][0] != primary:
        found.pop(0)
    return found


def _broker_value(d: TopicConfigDef, merged: dict[str, str]) -> str | None:
    """The topic default a broker derives from its configs (KafkaConfig's unit conversions)."""
    for name, factor in d.broker_synonyms:
        if name in merged:
            bd = BROKER_CONFIG_DEFS.get(name)
            if factor == 1 or bd is None:
                return merged[name]
            v = int(merged[name].strip()) * factor
            return str(v if v >= 0 else -1)
    return None


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    read_only: bool
    source: int
    type: int
    synonyms: list[Synonym]


def topic_config_entries(overrides: dict[str, str], layers: BrokerConfigLayers,
                         keys: list[str] | None) -> list[ConfigEntry]:
    """DescribeConfigs of a topic (ConfigHelper.createTopicConfigEntry for each LogConfig key)."""
    merged = layers.merged()
    out = []
    for d in TOPIC_CONFIGS:
        if keys is not None and d.name not in keys:
            continue
        synonyms: list[Synonym] = []
        if d.name in overrides:
            raw = overrides[d.name]
        else:
            raw = _broker_value(d, merged) or d.default
        value = to_string(d.type, _lenient(d, raw))
        if d.name in overrides:
            synonyms.append((d.name, value, TOPIC_CONFIG))
        if d.broker_synonyms:
            names = tuple(n for n, _ in d.broker_synonyms)
            synonyms += _config_synonyms(names[0], names, layers)
        source = synonyms[0][2] if synonyms else DEFAULT_CONFIG
        out.append(ConfigEntry(d.name, value, False, source, d.type, synonyms))
    return out


def _lenient(d: TopicConfigDef, raw: str) -> Any:
    try:
        return parse_value(d.name, d.type, raw)
    except ConfigValueError:
        return raw


def broker_config_entries(layers: BrokerConfigLayers, keys: list[str] | None,
                          dynamic_default_only: bool) -> list[ConfigEntry]:
    """DescribeConfigs of a broker (its id), or of the cluster default ("" : only the dynamic
    default entries, as Kafka answers)."""
    merged = layers.merged()
    out = []
    for d in BROKER_CONFIGS:
        if keys is not None and d.name not in keys:
            continue
        if dynamic_default_only:
            if d.name in layers.dynamic_default:
                v = layers.dynamic_default[d.name]
                out.append(ConfigEntry(d.name, v, False, DYNAMIC_DEFAULT_BROKER_CONFIG, d.type,
                                       [(d.name, v, DYNAMIC_DEFAULT_BROKER_CONFIG)]))
            continue
        synonyms = _config_synonyms(d.name, broker_synonyms(d.name), layers)
        value = merged.get(d.name)
        source = synonyms[0][2] if synonyms else DEFAULT_CONFIG
        out.append(ConfigEntry(d.name, value, d.read_only, source, d.type, synonyms))
    return out


# ---------------------------------------------------------------- incremental alter
class IncrementalAlterError(Exception):
    def __init__(self, error_code: int, message: str | None) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


def apply_incremental(props: dict[str, str], ops: list[tuple[str, int, str | None]],
                      list_type: Callable[[str], bool], default_of: Callable[[str], str | None],
                      invalid_request: int, invalid_config: int, unknown_error: int) -> dict[str, str]:
    """ConfigAdminManager.prepareIncrementalConfigs on a copy of `props`."""
    names = [n for n, _, _ in ops]
    if len(set(names)) != len(names):
        raise IncrementalAlterError(invalid_request, "Error due to duplicate config keys")
    out = dict(props)
    for name, op, value in ops:
        if op not in (OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT):
            raise IncrementalAlterError(unknown_error, None)
        if op != OP_DELETE and value is None:
            raise IncrementalAlterError(invalid_request, f"Null value not supported for : {name}")
        if op == OP_SET:
            out[name] = str(value)
        elif op == OP_DELETE:
            out.pop(name, None)
        else:
            verb = "append" if op == OP_APPEND else "subtract"
            if not list_type(name):
                raise IncrementalAlterError(invalid_config,
                                            f"Config value {verb} is not allowed for config key: {name}")
            given = str(value).split(",")
            if op == OP_APPEND:
                old = (out[name] if name in out else default_of(name) or "").split(",")
                out[name] = ",".join(old + [v for v in given if v not in old])
            else:
                old = out[name].split(",") if name in out else []
                for v in given:
                    if v in old:
                        old.remove(v)
                out[name] = ",".join(old)
    return out


# ---------------------------------------------------------------- live logs
def effective_log_config(base: LogConfig, overrides: dict[str, str], layers: BrokerConfigLayers) -> LogConfig:
    """The LogConfig a topic's logs run with: the broker's static LogConfig, then dynamic broker
    values, then the topic's overrides — for every field LogConfig has (the storage honours
    `segment.bytes` as `segment_bytes`, ...; fields it adds later are picked up by name)."""
    merged_dynamic = dict(layers.dynamic_default)
    merged_dynamic.update(layers.dynamic_broker)
    merged = layers.merged()
    changes: dict[str, Any] = {}
    known = {f.name: f for f in fields(LogConfig)}
    for d in TOPIC_CONFIGS:
        attr = d.name.replace(".", "_")
        if attr not in known:
            continue
        if d.name in overrides:
            raw: str | None = overrides[d.name]
        elif any(n in merged_dynamic for n, _ in d.broker_synonyms):
            raw = _broker_value(d, merged)
        else:
            continue
        if raw is None:
            continue
        value = _lenient(d, raw)
        current = getattr(base, attr)
        if isinstance(value, list) and isinstance(current, str):
            value = ",".join(value)
        elif isinstance(current, bool) and not isinstance(value, bool):
            continue
        changes[attr] = value
    return replace(base, **changes) if changes else base
