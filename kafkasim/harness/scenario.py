"""The scenario model and its TOML loader. A bad file gets a message naming the file, the key and
what was expected (scenarios/README.md documents the format)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from typing import Any

from kafkasim.config import BROKER, BROKER_KEYS, TOPIC, TOPIC_KEYS, UnknownConfigError, check_names, typed
from kafkasim.config.types import ConfigValueError
from kafkasim.harness.acl_scenario import AclSpec, AclSpecError, parse_acls
from kafkasim.harness.faults import Fault, parse_faults
from kafkasim.harness.nemesis import NemesisSpec, parse_nemesis
from kafkasim.harness.scenario_checks import check_scenario
from kafkasim.runtime.buggify import BuggifySpec
from kafkasim.runtime.real.client_driver import CLIENTS

ANOMALY_KINDS = ("lost-write", "duplicate", "reorder", "inconsistent-offsets", "poll-skip",
                 "nonmonotonic-poll", "unseen", "task-error", "liveness", "replica-divergence",
                 "isr-behind-high-watermark", "two-owners", "committed-offset-regression",
                 "recovered-not-prefix", "unwritten-bytes", "hw-above-isr-replica", "hw-regression",
                 "leader-epoch-regression", "controller-epoch-regression", "two-leaders-one-epoch",
                 "leader-epoch-bit-flip", "leader-epoch-flip-stall", "corrupt-offset-delivered",
                 "corrupt-offset-propagated", "epoch-reused-after-power-loss", "unexpected-append-stall",
                 "aborted-read", "uncommitted-read", "torn-transaction", "lost-committed-write", "unseen-committed",
                 "eos-duplicate", "eos-missing", "eos-offsets", "g1c", "lso-above-high-watermark",
                 "transaction-past-timeout", "missing-marker")


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
    value_bytes: int = 100      # the size of every value, or the least one with value_bytes_max
    compression: str = "none"
    linger_ms: float = 5.0
    idempotence: bool = False   # enable.idempotence (requires acks = "all", as Kafka's client)
    key_distribution: str = "uniform"   # uniform | zipf (key i drawn with weight 1/(i+1))
    value_bytes_max: int = 0    # > 0: sizes uniform in [value_bytes, value_bytes_max]
    request_timeout_ms: float = 30000.0  # request.timeout.ms
    txn: TxnSpec | None = None  # transactional = true (txn_workload.py)


@dataclass
class TxnSpec:
    """[workload.producer] keys of a transactional workload (scenarios/README.md)."""
    txn_size: int = 5                  # records per transaction
    abort_ratio: float = 0.0           # the share of transactions the workload aborts on purpose
    transaction_timeout_ms: int = 60000  # transaction.timeout.ms
    pipeline: int = 0                  # > 0: so many consume-transform-produce copiers topics[0] -> topics[1]
    stall_ratio: float = 0.0           # the share of transactions that stall stall_ms before their EndTxn
    stall_ms: float = 0.0
    zombie_pause_ms: float = 0.0       # > 0: producer-0 pauses this long before one EndTxn while a
                                       # successor with its transactional.id takes over (KAFKA-17754)


CHURN_KINDS = ("join", "leave", "crash")
COMMIT_MODES = ("none", "after-poll", "interval")


@dataclass
class ConsumerSpec:
    count: int = 1
    fetch_max_wait_ms: int = 500
    group: str = ""                # set: members subscribe through this consumer group; else assign-all
    commit: str = "after-poll"     # none | after-poll | interval (group members only)
    commit_interval_ms: float = 1000.0
    churn_interval_ms: float = 0.0  # mean of the exponential gap between churn events; 0: no churn
    churn: list[str] = field(default_factory=lambda: list(CHURN_KINDS))
    churn_until_ms: float = 0.0     # no churn event after this time (the workload must finish)
    crash_restart_ms: float = 2000.0  # a crashed member's node restarts (and rejoins) after this
    session_timeout_ms: int = 6000   # session.timeout.ms (Kafka's group.min.session.timeout.ms)
    heartbeat_interval_ms: int = 1000  # heartbeat.interval.ms
    rebalance_timeout_ms: int = 10000  # max.poll.interval.ms


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
    nemesis: list[NemesisSpec] = field(default_factory=list)  # expanded per seed into faults
    racks: list[str] = field(default_factory=list)  # broker i gets racks[i % len(racks)]
    liveness_ms: float = 60000.0  # after the last fault the workload must finish within this
    liveness_phase: bool = True   # [heal] liveness: heal all, then the cluster must converge (liveness.py)
    liveness_skip_reason: str = ""  # [heal] reason: why a scenario turns the phase off
    acls: list[AclSpec] = field(default_factory=list)  # [[acls]] (harness/acl_world.py)
    buggify: BuggifySpec = field(default_factory=BuggifySpec)  # [buggify] (runtime/buggify.py)
    client: str = ""  # [workload] client: a third-party driver is the workload (client_workload.py)
    # The file's text as loaded (run.json keeps it, so a replay needs no file); not part of what
    # the scenario is: a dumped and reloaded scenario equals the original.
    text: str = field(default="", compare=False)


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

    def sub(self, key: str) -> _Reader:
        v = self.get(key, dict, {}, "a table")
        return _Reader(self.path, v, f"{self.prefix}.{key}" if self.prefix else key)

    def configs(self, key: str, scope: str, what: str) -> dict[str, Any]:
        """A table of Kafka configs: every name one kafkasim.config defines (an unknown one is an
        error naming it, with the nearest known name); broker values typed as Kafka would."""
        table: dict[str, Any] = dict(self.get(key, dict, {}, what))
        for name, value in table.items():
            where = f"{self.prefix}.{key}" if self.prefix else key
            try:
                check_names(scope, [name])
                typed((BROKER_KEYS if scope == BROKER else TOPIC_KEYS)[name], value)
            except (UnknownConfigError, ConfigValueError) as exc:
                raise ScenarioError(f"{self.path}: key '{where}': {exc}") from None
        return table

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


def _value_bytes(r: _Reader) -> tuple[int, int]:
    v = r.table.get("value_bytes", 100)
    if isinstance(v, int) and not isinstance(v, bool) and v > 0:
        return v, 0
    if (isinstance(v, list) and len(v) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in v)
            and 0 < v[0] <= v[1]):
        return v[0], v[1]
    raise r.fail("value_bytes", "a positive integer or [min, max] with 0 < min <= max", v)


def _producer_spec(pr: _Reader) -> ProducerSpec:
    pr.unknown({"count", "messages", "rate_per_s", "acks", "key_space", "value_bytes", "compression", "linger_ms",
                "idempotence", "key_distribution", "request_timeout_ms"} | TXN_KEYS)
    low, high = _value_bytes(pr)
    p = ProducerSpec(pr.positive("count", 1), pr.positive("messages", 1000),
                     float(pr.positive("rate_per_s", 1000.0, integer=False)), _acks(pr),
                     pr.get("key_space", int, 0, "an integer >= 0"), low,
                     pr.get("compression", str, "none", "none|gzip|snappy|lz4|zstd"),
                     float(pr.get("linger_ms", (int, float), 5.0, "a number")),
                     pr.get("idempotence", bool, False, "true or false"),
                     pr.get("key_distribution", str, "uniform", "\"uniform\" or \"zipf\""), high,
                     float(pr.positive("request_timeout_ms", 30000, integer=False)))
    if p.compression not in ("none", "gzip", "snappy", "lz4", "zstd"):
        raise pr.fail("compression", "none|gzip|snappy|lz4|zstd", p.compression)
    if p.key_distribution not in ("uniform", "zipf"):
        raise pr.fail("key_distribution", "\"uniform\" or \"zipf\"", p.key_distribution)
    if p.key_distribution == "zipf" and p.key_space <= 0:
        raise pr.fail("key_space", "a positive integer when key_distribution = \"zipf\"", p.key_space)
    if p.idempotence and p.acks != -1:  # Kafka's client refuses this combination (ConfigException)
        raise pr.fail("acks", "\"all\" when idempotence = true", pr.table.get("acks"))
    p.txn = _txn_spec(pr, p)
    return p


TXN_KEYS = {"transactional", "txn_size", "abort_ratio", "transaction_timeout_ms", "pipeline", "stall_ratio",
            "stall_ms", "zombie_pause_ms"}


def _ratio(pr: _Reader, key: str, default: float = 0.0) -> float:
    v = float(pr.get(key, (int, float), default, "a number in [0, 1]"))
    if not 0.0 <= v <= 1.0:
        raise pr.fail(key, "a number in [0, 1]", v)
    return v


def _txn_spec(pr: _Reader, p: ProducerSpec) -> TxnSpec | None:
    if not pr.get("transactional", bool, False, "true or false"):
        for key in sorted((TXN_KEYS - {"transactional"}) & set(pr.table)):
            raise pr.fail(key, "transactional = true (a transactional workload's key)", pr.table[key])
        return None
    if p.acks != -1:  # a transactional producer is idempotent: acks=all (Kafka's ConfigException)
        raise pr.fail("acks", "\"all\" when transactional = true", pr.table.get("acks"))
    t = TxnSpec(pr.positive("txn_size", 5), _ratio(pr, "abort_ratio"), pr.positive("transaction_timeout_ms", 60000),
                pr.get("pipeline", int, 0, "an integer >= 0"), _ratio(pr, "stall_ratio"),
                float(pr.get("stall_ms", (int, float), 0.0, "a number of milliseconds >= 0")),
                float(pr.get("zombie_pause_ms", (int, float), 0.0, "a number of milliseconds >= 0")))
    if t.pipeline < 0:
        raise pr.fail("pipeline", "an integer >= 0", t.pipeline)
    if t.stall_ms < 0 or t.zombie_pause_ms < 0:
        raise pr.fail("stall_ms" if t.stall_ms < 0 else "zombie_pause_ms", "a number of milliseconds >= 0")
    return t


def _consumer_spec(co: _Reader) -> ConsumerSpec:
    co.unknown({"count", "fetch_max_wait_ms", "group", "commit", "commit_interval_ms", "churn_interval_ms", "churn",
                "churn_until_ms", "crash_restart_ms", "session_timeout_ms", "heartbeat_interval_ms",
                "rebalance_timeout_ms"})
    c = ConsumerSpec(co.positive("count", 1), co.positive("fetch_max_wait_ms", 500),
                     co.get("group", str, "", "a consumer group name"),
                     co.get("commit", str, "after-poll", "one of " + "|".join(COMMIT_MODES)),
                     float(co.positive("commit_interval_ms", 1000, integer=False)),
                     float(co.get("churn_interval_ms", (int, float), 0, "a number of milliseconds >= 0")),
                     list(co.get("churn", list, list(CHURN_KINDS), f"a list of {list(CHURN_KINDS)}")),
                     float(co.get("churn_until_ms", (int, float), 0, "a number of milliseconds >= 0")),
                     float(co.positive("crash_restart_ms", 2000, integer=False)),
                     co.positive("session_timeout_ms", 6000), co.positive("heartbeat_interval_ms", 1000),
                     co.positive("rebalance_timeout_ms", 10000))
    if c.commit not in COMMIT_MODES:
        raise co.fail("commit", "one of " + "|".join(COMMIT_MODES), c.commit)
    for kind in c.churn:
        if kind not in CHURN_KINDS:
            raise co.fail("churn", f"a list of {list(CHURN_KINDS)}", kind)
    if c.churn_interval_ms < 0:
        raise co.fail("churn_interval_ms", "a number of milliseconds >= 0", c.churn_interval_ms)
    grouped = {"commit", "commit_interval_ms", "churn_interval_ms", "churn", "churn_until_ms", "crash_restart_ms"}
    for key in sorted(grouped & set(co.table)):
        if not c.group:
            raise co.fail(key, "a [workload.consumer] group (only group members commit and churn)", co.table[key])
    if c.churn_interval_ms > 0 and (c.churn_until_ms <= 0 or not c.churn):
        raise co.fail("churn_until_ms", "a positive time after which churn stops (so the workload can finish)",
                      co.table.get("churn_until_ms"))
    return c


def load_scenario(path: str) -> Scenario:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError as exc:
        raise ScenarioError(f"{path}: no such scenario file") from exc
    except IsADirectoryError as exc:
        raise ScenarioError(f"{path}: is a directory, not a scenario file") from exc
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read the scenario file: {exc.strerror}") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError(f"{path}: not valid TOML: not UTF-8 text ({exc})") from exc
    return scenario_from_text(path, text)


def scenario_from_text(path: str, text: str) -> Scenario:
    """The scenario a file with this text at `path` holds (replay parses run.json's stored text)."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{path}: not valid TOML: {exc}") from exc
    s = parse_scenario(path, raw)
    s.text = text
    return s


def parse_scenario(path: str, raw: dict[str, Any]) -> Scenario:
    root = _Reader(path, raw, "")
    root.unknown({"scenario", "cluster", "topics", "workload", "network", "guarantees", "faults", "heal",
                  "nemesis", "acls", "buggify"})
    meta = root.sub("scenario")
    name = meta.get("name", str, None, "a string")
    if not name:
        raise meta.fail("name", "a non-empty string")
    s = Scenario(name=name, path=path, description=meta.get("description", str, "", "a string"),
                 duration_ms=float(meta.positive("duration_ms", 60000, integer=False)))
    cluster = root.sub("cluster")
    cluster.unknown({"brokers", "config", "racks"})
    s.brokers = cluster.positive("brokers", 1)
    s.racks = list(cluster.get("racks", list, [], "a list of rack names"))
    if not all(isinstance(r, str) and r for r in s.racks):
        raise cluster.fail("racks", "a list of non-empty rack names", s.racks)
    s.broker_config = cluster.configs("config", BROKER, "a table of Kafka broker configs")
    topics = root.get("topics", list, [], "an array of tables [[topics]]")
    for i, t in enumerate(topics):
        tr = _Reader(path, t, f"topics[{i}]")
        tr.unknown({"name", "partitions", "replication_factor", "config"})
        config = tr.configs("config", TOPIC, "a table of topic configs")
        s.topics.append(TopicSpec(tr.get("name", str, None, "a topic name") or "",
                                  tr.positive("partitions", 1), tr.positive("replication_factor", 1),
                                  {str(k): str(v).lower() if isinstance(v, bool) else str(v)
                                   for k, v in config.items()}))
        if not s.topics[-1].name:
            raise tr.fail("name", "a topic name")
    if not s.topics:
        raise root.fail("topics", "at least one [[topics]] table")
    wl = root.sub("workload")
    wl.unknown({"producer", "consumer", "client"})
    s.client = wl.get("client", str, "", f"one of the client drivers {list(CLIENTS)}")
    if s.client and s.client not in CLIENTS:
        raise wl.fail("client", f"one of the client drivers {list(CLIENTS)}", s.client)
    s.producer = _producer_spec(wl.sub("producer"))
    s.consumer = _consumer_spec(wl.sub("consumer"))
    net = root.sub("network")
    lat = net.get("latency_ms", list, [0.1, 0.8], "[min, max] in milliseconds")
    if len(lat) != 2 or not all(isinstance(x, (int, float)) for x in lat) or not 0 <= lat[0] <= lat[1]:
        raise net.fail("latency_ms", "[min, max] with 0 <= min <= max", lat)
    s.latency_ms = (float(lat[0]), float(lat[1]))
    s.faults = parse_faults(path, root.get("faults", list, [], "an array of tables [[faults]]"),
                            lambda key, expected, got: root.fail(key, expected, got))
    s.nemesis = parse_nemesis(root.get("nemesis", list, [], "an array of tables [[nemesis]]"),
                              lambda key, expected, got: root.fail(key, expected, got))
    heal = root.sub("heal")
    heal.unknown({"liveness_ms", "liveness", "reason"})
    s.liveness_ms = float(heal.positive("liveness_ms", 60000, integer=False))
    s.liveness_phase = heal.get("liveness", bool, True, "true or false")
    s.liveness_skip_reason = heal.get("reason", str, "", "a string")
    if not s.liveness_phase and not s.liveness_skip_reason.strip():
        raise heal.fail("reason", "why the liveness phase is off (required with liveness = false)")
    try:
        s.acls = parse_acls(raw.get("acls", []), s.broker_config)
    except AclSpecError as exc:
        raise ScenarioError(f"{path}: {exc}") from None
    s.buggify = _buggify_spec(root.sub("buggify"))
    check_scenario(s, lambda key, why: ScenarioError(f"{path}: key '{key}': {why}"))
    if s.producer.txn is not None and s.producer.txn.pipeline > 0 and (len(s.topics) < 2 or s.consumer.group):
        raise ScenarioError(f"{path}: key 'workload.producer.pipeline': expected two [[topics]] (input, output) "
                            "and no [workload.consumer] group (the copiers are the group)")
    g = root.sub("guarantees")
    s.expected = list(g.get("expected", list, [], f"a list of anomaly kinds from {list(ANOMALY_KINDS)}"))
    for kind in s.expected:
        if kind not in ANOMALY_KINDS:
            raise g.fail("expected", f"anomaly kinds from {list(ANOMALY_KINDS)}", kind)
    return s


def _buggify_spec(b: _Reader) -> BuggifySpec:
    b.unknown({"enabled", "probability", "fire_probability"})
    return BuggifySpec(b.get("enabled", bool, False, "true or false"), _ratio(b, "probability", 0.25),
                       _ratio(b, "fire_probability", 0.0))


def with_buggify(s: Scenario) -> Scenario:
    """The scenario with BUGGIFY on (`--buggify`; replay and shrink of a run that had it), its
    [buggify] probabilities kept."""
    return replace(s, buggify=replace(s.buggify, enabled=True))
