"""The Java behaviours Kafka's ZooKeeper data and admin answers inherit, so the bytes match:

- `java_hash_order`: the iteration order of a java.util.HashMap (or a ConcurrentHashMap /
  Scala mutable.HashMap — the same bucket index for small maps) holding the given keys. Kafka
  writes an entity's config znode by Jackson-serialising a java.util.Properties, so the keys of
  `{"version":1,"config":{...}}` come out in this order, not sorted; several admin answers
  (AlterClientQuotas entities, DescribeClientQuotas values) iterate such maps too.
    bucket = (h ^ (h >>> 16)) & (capacity - 1), h = String.hashCode; ties keep insertion order;
    capacity doubles while size > 0.75 * capacity.
- `java_double_str`: Double.toString (1024.0, 12.5, 1.0E7, 1.0E-4) — how a DOUBLE quota is kept.
- `sanitize` / `desanitize`: org.apache.kafka.common.utils.Sanitizer (URL-encoding, `*` as
  %2A, space as %20) — how user and client ids become znode names.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable
from decimal import Decimal


def java_string_hash(s: str) -> int:
    """String.hashCode as an unsigned 32-bit value (UTF-16 code units)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h


def java_hash_order(keys: Iterable[str], initial_capacity: int = 16, concurrent: bool = False,
                    scala: bool = False) -> list[str]:
    """The keys as a java.util.HashMap created with `initial_capacity` iterates them
    (`concurrent`: a ConcurrentHashMap — what a Properties is inside — which grows at
    0.75 * capacity entries rather than past it; `scala`: a Scala 2.13 mutable.HashMap, which
    grows at 0.75 * capacity - 1 and keeps each bucket sorted by (signed) hash)."""
    ordered = list(dict.fromkeys(keys))
    capacity = 1
    while capacity < max(1, initial_capacity):
        capacity *= 2
    while len(ordered) > int(capacity * 0.75) or ((concurrent or scala) and len(ordered) >= int(capacity * 0.75)):
        capacity *= 2

    def bucket(k: str) -> tuple[int, int]:
        h = java_string_hash(k)
        spread = h ^ (h >> 16)
        signed = spread - (1 << 32) if spread >= 1 << 31 else spread
        return spread & (capacity - 1), signed if scala else 0
    return sorted(ordered, key=bucket)  # sorted() is stable: ties keep insertion order


def java_double_str(value: float) -> str:
    """Double.toString: plain decimal in [1e-3, 1e7), else computerized scientific notation."""
    if value != value or value in (float("inf"), float("-inf")):
        return {True: "NaN"}.get(value != value, "Infinity" if value > 0 else "-Infinity")
    if value == 0:
        return "-0.0" if str(value).startswith("-") else "0.0"
    mag = abs(value)
    if 1e-3 <= mag < 1e7:
        text = repr(value)
        return text if "." in text or "e" in text else text + ".0"
    sign, digits, exponent = Decimal(repr(value)).as_tuple()
    assert isinstance(exponent, int)
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    exp10 = exponent + len(digits) - 1
    mantissa = ds[0] + "." + (ds[1:] or "0")
    return ("-" if sign else "") + f"{mantissa}E{exp10}"


def sanitize(name: str) -> str:
    """Sanitizer.sanitize: URLEncoder (UTF-8), then `*` -> %2A and `+` (a space) -> %20."""
    out = []
    for ch in name:
        if ch.isascii() and (ch.isalnum() or ch in ".-_"):
            out.append(ch)  # what URLEncoder leaves as is (besides `*`, which Kafka encodes)
        else:
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8"))
    return "".join(out)


def desanitize(name: str) -> str:
    """Sanitizer.desanitize: URLDecoder."""
    return urllib.parse.unquote_plus(name)
