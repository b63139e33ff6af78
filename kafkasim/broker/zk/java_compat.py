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
from typing import TypeVar

T = TypeVar("T")


def java_string_hash(s: str) -> int:
    """String.hashCode as an unsigned 32-bit value: s[0]*31^(n-1) + ... over UTF-16 code units
    (a surrogate pair is two units). The one copy: the group and transaction coordinators'
    partitioning and the HashMap orders here all use it."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h


def java_string_hash_code(s: str) -> int:
    """String.hashCode as Java returns it: a signed int32."""
    return _int32(java_string_hash(s))


def kafka_utils_abs(n: int) -> int:
    """Kafka's Utils.abs: Math.abs, except Integer.MIN_VALUE maps to 0 (not to itself)."""
    return 0 if n == -(1 << 31) else abs(n)


def _int32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def java_topic_partition_hash(topic: str, partition: int) -> int:
    """TopicPartition.hashCode (unsigned 32-bit): 31 * (31 + partition) + topic.hashCode()."""
    return (31 * (31 + partition) + java_string_hash(topic)) & 0xFFFFFFFF


def hash_order(items: list[T], hashes: list[int], initial_capacity: int = 16, concurrent: bool = False,
               scala: bool = False) -> list[T]:
    """`items` (with their 32-bit hash codes) as a hash map of that kind iterates them: a
    java.util.HashMap created with `initial_capacity`; `concurrent`: a ConcurrentHashMap (what
    a Properties is inside), which grows at 0.75 * capacity entries rather than past it;
    `scala`: a Scala 2.13 mutable.HashMap, which grows likewise and keeps each bucket sorted by
    (signed) hash. Ties otherwise keep insertion order."""
    capacity = 1
    while capacity < max(1, initial_capacity):
        capacity *= 2
    n = len(items)
    while n > int(capacity * 0.75) or ((concurrent or scala) and n >= int(capacity * 0.75)):
        capacity *= 2
    keyed = []
    for i, (item, h) in enumerate(zip(items, hashes, strict=True)):
        spread = (h ^ (h >> 16)) & 0xFFFFFFFF
        keyed.append(((spread & (capacity - 1), _int32(spread) if scala else 0, i), item))
    return [item for _, item in sorted(keyed, key=lambda kv: kv[0])]


def java_hash_order(keys: Iterable[str], initial_capacity: int = 16, concurrent: bool = False,
                    scala: bool = False) -> list[str]:
    """String keys as a java.util.HashMap (or the variants of hash_order) iterates them."""
    ordered = list(dict.fromkeys(keys))
    return hash_order(ordered, [java_string_hash(k) for k in ordered], initial_capacity, concurrent, scala)


def _scala_improve(h: int) -> int:
    """scala.collection.Hashing.improve (32-bit)."""
    h = _int32(h)
    h = _int32(h + ~(h << 9))
    h = h ^ ((h & 0xFFFFFFFF) >> 14)
    h = _int32(h + (h << 4))
    return _int32(h ^ ((h & 0xFFFFFFFF) >> 10))


def scala_immutable_hash_order(keys: list[str]) -> list[str]:
    """A Scala 2.13 immutable.HashMap (CHAMP trie) of String keys, iterated: at each level the
    entries alone in their 5-bit slot (of the improved hash, low bits first) in slot order, then
    the sub-tries in slot order."""
    items = [(k, _scala_improve(java_string_hash(k)) & 0xFFFFFFFF) for k in dict.fromkeys(keys)]

    def walk(group: list[tuple[str, int]], shift: int) -> list[str]:
        if shift >= 32:
            return [k for k, _ in group]  # a full collision: insertion order
        slots: dict[int, list[tuple[str, int]]] = {}
        for k, h in group:
            slots.setdefault((h >> shift) & 0x1F, []).append((k, h))
        data = [v[0][0] for _, v in sorted(slots.items()) if len(v) == 1]
        nodes = [walk(v, shift + 5) for _, v in sorted(slots.items()) if len(v) > 1]
        return data + [k for node in nodes for k in node]
    return walk(items, 0)


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
