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
from typing import Any

from kafkasim.broker.config import BrokerConfig
from kafkasim.config import DESCRIBED_BROKER_CONFIGS, TOPIC_CONFIGS, TOPIC_KEYS, ConfigKey, UnknownConfigError
from kafkasim.config.types import (
    BOOLEAN,
    CLASS,
    DOUBLE,
    INT,
    LIST,
    LONG,
    PASSWORD,
    SHORT,
    STRING,
    TYPE_NAMES,
    ConfigValueError,
    java_double,
    parse_value,
    to_string,
)
from kafkasim.storage.log import LogConfig

__all__ = ["BOOLEAN", "CLASS", "DOUBLE", "INT", "LIST", "LONG", "PASSWORD", "SHORT", "STRING", "TYPE_NAMES",
           "ConfigValueError", "UnknownConfigError", "java_double", "parse_value", "to_string"]

# DescribeConfigsResponse ConfigSource
TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

# ConfigResource.Type
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4

# IncrementalAlterConfigs ConfigOperation
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3

DEFAULT_BROKER_ENTITY = "<default>"

# The definitions (kafkasim.config): every topic config, and the broker configs kafkasim
# describes (others are accepted as custom configs, as Kafka accepts unknown ones).
TOPIC_CONFIG_DEFS: dict[str, ConfigKey] = TOPIC_KEYS
BROKER_CONFIGS = DESCRIBED_BROKER_CONFIGS
BROKER_CONFIG_DEFS = {d.name: d for d in BROKER_CONFIGS}
# Broker configs known to be settable only statically (ZooKeeper-mode DynamicBrokerConfig).
READ_ONLY_BROKER_CONFIGS = frozenset(d.name for d in BROKER_CONFIGS if d.read_only)
# DynamicBrokerConfig.brokerConfigSynonyms: a group of unit variants, most precise first.
BROKER_SYNONYM_GROUPS = tuple(tuple(n for n, _ in d.synonyms) for d in TOPIC_CONFIGS if len(d.synonyms) > 1)


def broker_synonyms(name: str) -> tuple[str, ...]:
    return next((g for g in BROKER_SYNONYM_GROUPS if name in g), (name,))


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


def validate_broker_value(name: str, raw: str) -> None:
    """Dynamic broker values: typed like the broker config, checked by its validator (a topic
    config's in the same unit: log.segment.bytes as segment.bytes)."""
    d = BROKER_CONFIG_DEFS.get(name)
    if d is None:
        return  # custom configs are accepted as Kafka does
    v = parse_value(name, d.type, raw)
    problem = d.validator(v) if d.validator is not None else None
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


def static_broker_configs(cfg: BrokerConfig, listeners: str) -> dict[str, str]:
    """The static layer from a BrokerConfig: every described config server.properties set or
    whose value differs from Kafka's default (broker.id and log.dirs always: a broker always
    has them), and the listeners kafkasim listens on unless set."""
    out: dict[str, str] = {}
    for d in BROKER_CONFIGS:
        if not cfg.holds(d.name) or (value := cfg.value(d.name)) is None:
            continue
        s = to_string(d.type, value) or ""
        if s != d.default or d.name in cfg.properties or d.name in ("broker.id", "log.dirs"):
            out[d.name] = s
    out.setdefault("listeners", listeners)
    return out


Synonym = tuple[str, str | None, int]


def _config_synonyms(primary: str, names: tuple[str, ...], layers: BrokerConfigLayers) -> list[Synonym]:
    """ConfigHelper.configSynonyms: each layer's values of the synonym names, then
    dropWhile(name != primary)."""
    found: list[Synonym] = [(n, layer[n], src) for layer, src in layers.ordered() for n in names if n in layer]
    while found and found[0][0] != primary:
        found.pop(0)
    return found


def _broker_value(d: ConfigKey, merged: dict[str, str]) -> str | None:
    """The topic default a broker derives from its configs (KafkaConfig's unit conversions)."""
    for name, factor in d.synonyms:
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
            raw = _broker_value(d, merged) or d.default or ""  # topic configs all have a default
        value = to_string(d.type, _lenient(d, raw))
        if d.name in overrides:
            synonyms.append((d.name, value, TOPIC_CONFIG))
        if d.synonyms:
            names = tuple(n for n, _ in d.synonyms)
            synonyms += _config_synonyms(names[0], names, layers)
        source = synonyms[0][2] if synonyms else DEFAULT_CONFIG
        out.append(ConfigEntry(d.name, value, False, source, d.type, synonyms))
    return out


def _lenient(d: ConfigKey, raw: str) -> Any:
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
        elif any(n in merged_dynamic for n, _ in d.synonyms):
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
