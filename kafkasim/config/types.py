"""Kafka's ConfigDef value types, validators, parsing and printing (ConfigDef.parseType,
ConfigDef.convertToString, Double.toString), with Kafka's error messages."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

# DescribeConfigsResponse ConfigType
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = range(1, 10)
TYPE_NAMES = {BOOLEAN: "BOOLEAN", STRING: "STRING", INT: "INT", SHORT: "SHORT", LONG: "LONG", DOUBLE: "DOUBLE",
              LIST: "LIST", CLASS: "CLASS", PASSWORD: "PASSWORD"}
INTEGRAL = (INT, SHORT, LONG)

LONG_MAX = 2**63 - 1
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
_RANGES = {INT: (INT_MIN, INT_MAX), SHORT: (-(2**15), 2**15 - 1), LONG: (-(2**63), LONG_MAX)}


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


def parse_value(name: str, type_: int, raw: str) -> Any:
    """ConfigDef.parseType: the typed value, or ConfigValueError with Kafka's message."""
    s = raw.strip()
    try:
        if type_ in INTEGRAL:
            v = int(s, 10)
            lo, hi = _RANGES[type_]
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
        return value if isinstance(value, str) else ",".join(value)
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
