"""The scenario model and its TOML loader. A bad file gets a message naming the file, the key and
what was expected (scenarios/README.md documents the format)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from typing import Any

from kafkasim.harness.faults import Fault, parse_faults

ANOMALY_KINDS = ("lost-write", "duplicate", "reorder", "inconsistent-offsets", "poll-skip",
                 "nonmonotonic-poll", "unseen", "task-error", "liveness", "replica-divergence",
                 "isr-behind-high-watermark")


class ScenarioError(ValueError):
    pass


@dataclass
class TopicSpec:
    name: str
    partitions: int = 1
    replication_factor: int = 1
    config: dict[str, str] = field(default_factory=dict)   # topic configs, e.g. min.insync.replicas


@dataclass
class ProducerSpec:
    count: int = 1
    messages: int = 1000
    rate_per_s: float = 1000.0
    acks: int = -1
    key_space: int = 0          # 0: no keys (sticky partitioning); N: keys k0..k{N-1}
    value_bytes: int = 100
    compression: str = "none"
    linger_ms: float = 5.0


@dataclass
class ConsumerSpec:
    count: int = 1
    fetch_max_wait_ms: int = 500


@dataclass
class Scenario:
    name: str
    path: str
    description: str = ""
    duration_ms: float = 60000.0
    brokers: int = 1
    broker_config: dict[str, Any] = field(default_factory=dict)
    topics: list[TopicSpec] = field(default_factory=list)
    producer: ProducerSpec = field(default_factory=ProducerSpec)
    consumer: ConsumerSpec = field(default_factory=ConsumerSpec)
    latency_ms: tuple[float, float] = (0.1, 0.8)
    expected: list[str] = field(default_factory=list)  # anomalies this config allows
    faults: list[Fault] = field(default_factory=list)
    liveness_ms: float = 60000.0  # after the last fault the workload must finish within this


class _Reader:
    """Typed access to one table of the file, with errors that name file and key."""

    def __init__(self, path: str, table: dict[str, Any], prefix: str) -> None:
        self.path, self.table, self.prefix = path, table, prefix

    def fail(self, key: str, expected: str, got: Any = None) -> ScenarioError:
        where = f"{self.prefix}.{key}" if self.prefix else key
        tail = f", got {got!r}" if got is not None else ""
        return ScenarioError(f"{self.path}: key '{where}': expected {expected}{tail}")

    def get(self, key: str, kind: type | tuple[type, ...], default: Any, expected: str) -> Any:
        if key not in self.table:
            return default
        v = self.table[key]
        if isinstance(v, bool) and kind is not bool and bool not in (kind if isinstance(kind, tuple) else (kind,)):
            raise self.fail(key, expected, v)
        if not isinstance(v, kind):
            raise self.fail(key, expected, v)
        return v

    def positive(self, key: str, default: Any, integer: bool = True) -> Any:
        kind: Any = int if integer else (int, float)
        v = self.get(key, kind, default, "a positive integer" if integer else "a positive number")
        if v <= 0:
            raise self.fail(key, "a positive number", v)
        return v

    def sub(self, key: str) -> "_Reader":
        v = self.get(key, dict, {}, "a table")
        return _Reader(self.path, v, f"{self.prefix}.{key}" if self.prefix else key)

    def unknown(self, allowed: set[str]) -> None:
        for key in self.table:
            if key not in allowed:
                raise self.fail(key, f"one of {sorted(allowed)} (unknown key)")


def _acks(r: _Reader) -> int:
    v = r.table.get("acks", "all")
    table = {"all": -1, "-1": -1, "1": 1, "0": 0, -1: -1, 1: 1, 0: 0}
    if isinstance(v, bool) or v not in table:
        raise r.fail("acks", "\"all\", 1 or 0", v)
    return table[v]


def load_scenario(path: str) -> Scenario:
    try:
        with open(path, "rb") as f:
            raw = tomllib.load(f)
    except FileNotFoundError as exc:
        raise ScenarioError(f"{path}: no such scenario file") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{path}: not valid TOML: {exc}") from exc
    return parse_scenario(path, raw)


def parse_scenario(path: str, raw: dict[str, Any]) -> Scenario:
    root = _Reader(path, raw, "")
    root.unknown({"scenario", "cluster", "topics", "workload", "network", "guarantees", "faults", "heal"})
    meta = root.sub("scenario")
    name = meta.get("name", str, None, "a string")
    if not name:
        raise meta.fail("name", "a non-empty string")
    s = Scenario(name=name, path=path, description=meta.get("description", str, "", "a string"),
                 duration_ms=float(meta.positive("duration_ms", 60000, integer=False)))
    cluster = root.sub("cluster")
    s.brokers = cluster.positive("brokers", 1)
    s.broker_config = dict(cluster.get("config", dict, {}, "a table of Kafka broker configs"))
    topics = root.get("topics", list, [], "an array of tables [[topics]]")
    for i, t in enumerate(topics):
        tr = _Reader(path, t, f"topics[{i}]")
        tr.unknown({"name", "partitions", "replication_factor", "config"})
        config = tr.get("config", dict, {}, "a table of topic configs")
        s.topics.append(TopicSpec(tr.get("name", str, None, "a topic name") or "",
                                  tr.positive("partitions", 1), tr.positive("replication_factor", 1),
                                  {str(k): str(v).lower() if isinstance(v, bool) else str(v)
                                   for k, v in config.items()}))
        if not s.topics[-1].name:
            raise tr.fail("name", "a topic name")
    if not s.topics:
        raise root.fail("topics", "at least one [[topics]] table")
    wl = root.sub("workload")
    pr = wl.sub("producer")
    pr.unknown({"count", "messages", "rate_per_s", "acks", "key_space", "value_bytes", "compression", "linger_ms"})
    s.producer = ProducerSpec(pr.positive("count", 1), pr.positive("messages", 1000),
                              float(pr.positive("rate_per_s", 1000.0, integer=False)), _acks(pr),
                              pr.get("key_space", int, 0, "an integer >= 0"), pr.positive("value_bytes", 100),
                              pr.get("compression", str, "none", "none|gzip|snappy|lz4|zstd"),
                              float(pr.get("linger_ms", (int, float), 5.0, "a number")))
    if s.producer.compression not in ("none", "gzip", "snappy", "lz4", "zstd"):
        raise pr.fail("compression", "none|gzip|snappy|lz4|zstd", s.producer.compression)
    co = wl.sub("consumer")
    co.unknown({"count", "fetch_max_wait_ms"})
    s.consumer = ConsumerSpec(co.positive("count", 1), co.positive("fetch_max_wait_ms", 500))
    net = root.sub("network")
    lat = net.get("latency_ms", list, [0.1, 0.8], "[min, max] in milliseconds")
    if len(lat) != 2 or not all(isinstance(x, (int, float)) for x in lat) or not 0 <= lat[0] <= lat[1]:
        raise net.fail("latency_ms", "[min, max] with 0 <= min <= max", lat)
    s.latency_ms = (float(lat[0]), float(lat[1]))
    s.faults = parse_faults(path, root.get("faults", list, [], "an array of tables [[faults]]"),
                            lambda key, expected, got: root.fail(key, expected, got))
    heal = root.sub("heal")
    heal.unknown({"liveness_ms"})
    s.liveness_ms = float(heal.positive("liveness_ms", 60000, integer=False))
    g = root.sub("guarantees")
    s.expected = list(g.get("expected", list, [], f"a list of anomaly kinds from {list(ANOMALY_KINDS)}"))
    for kind in s.expected:
        if kind not in ANOMALY_KINDS:
            raise g.fail("expected", f"anomaly kinds from {list(ANOMALY_KINDS)}", kind)
    return s
