"""Typed config objects built from the table: a dataclass field declared with `setting(name)`
holds config `name`, typed as the table says (BOOLEAN bool, INT/SHORT/LONG int, DOUBLE float,
STRING/LIST str, null None) and defaulting to the table's default — so no default is written
twice. `build` fills such a dataclass from server.properties-style values."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from kafkasim.config.definitions import BROKER, BROKER_KEYS, TOPIC, TOPIC_KEYS, ConfigKey
from kafkasim.config.types import BOOLEAN, DOUBLE, INTEGRAL, LIST, ConfigValueError, parse_value

NAMES = "kafka_configs"   # field metadata: the config names the field holds (the first is its own)
SCOPE = "kafka_scope"     # field metadata: TOPIC or BROKER
_FROM_TABLE: Any = object()

T = TypeVar("T")


class UnknownConfigError(ValueError):
    """A config name that is not in the table; the message suggests the nearest known name."""


def key_of(scope: str, name: str) -> ConfigKey:
    table = TOPIC_KEYS if scope == TOPIC else BROKER_KEYS
    key = table.get(name)
    if key is None:
        raise UnknownConfigError(unknown_message(scope, name, table))
    return key


def unknown_message(scope: str, name: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return f"unknown {scope} config '{name}'{hint}"


def check_names(scope: str, names: Iterable[str], extra: Iterable[str] = ()) -> None:
    """Every name is a config of `scope` (or one of `extra`); else UnknownConfigError."""
    table = TOPIC_KEYS if scope == TOPIC else BROKER_KEYS
    allowed = set(table) | set(extra)
    for name in names:
        if name not in allowed:
            raise UnknownConfigError(unknown_message(scope, name, sorted(allowed)))


def setting(*names: str, scope: str = BROKER, default: Any = _FROM_TABLE) -> Any:
    """A dataclass field holding config `names[0]` (later names: Kafka's fallbacks for it, as
    log.dir for log.dirs). `default` overrides the table's, where kafkasim runs differently."""
    key = key_of(scope, names[0])
    value = typed(key, key.default) if default is _FROM_TABLE else default
    return dataclasses.field(default=value, metadata={NAMES: names, SCOPE: scope})


def typed(key: ConfigKey, value: Any) -> Any:
    """A property value (a TOML value, or a string from the command line or ZooKeeper) as the
    typed attribute holds it; ConfigValueError with Kafka's message when it is not one."""
    if value is None:
        return None
    if key.type == BOOLEAN:
        return value if isinstance(value, bool) else parse_value(key.name, BOOLEAN, str(value))
    if key.type in INTEGRAL or key.type == DOUBLE:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ConfigValueError(f"Invalid value {value} for configuration {key.name}: Not a number")
        if isinstance(value, str):
            return parse_value(key.name, key.type, value)
        if key.type == DOUBLE:
            return float(value)
        if isinstance(value, float) and not value.is_integer():
            raise ConfigValueError(f"Invalid value {value} for configuration {key.name}: Not an integer")
        return int(value)
    if key.type == LIST and isinstance(value, list):
        return ",".join(str(v) for v in value)
    s = str(value)
    return None if s == "" and key.default is None else s


def config_fields(cls: type) -> list[dataclasses.Field[Any]]:
    """The fields of a config dataclass that hold a config (`setting`)."""
    return [f for f in dataclasses.fields(cls) if NAMES in f.metadata]


def build(cls: type[T], values: Mapping[str, Any], **kwargs: Any) -> T:
    """`cls` with each config field set from `values` (config name -> property value) where it
    has one — its own name winning over its fallbacks; others keep their defaults."""
    for f in config_fields(cls):
        names: tuple[str, ...] = f.metadata[NAMES]
        given = next((n for n in names if n in values), None)
        if given is not None:
            kwargs[f.name] = typed(key_of(f.metadata[SCOPE], names[0]), values[given])
    return cls(**kwargs)


def field_values(obj: Any) -> dict[str, Any]:
    """Config name -> typed value of each config field of a config dataclass instance."""
    return {f.metadata[NAMES][0]: getattr(obj, f.name) for f in config_fields(type(obj))}
