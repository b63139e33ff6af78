"""The znode comparison: one admin sequence (topics with configs and a manual assignment, more
partitions, incremental config changes, client quotas, SCRAM credentials, a deleted topic) sent
to real Kafka and to kafkasim, then both ZooKeeper trees read with kazoo and compared znode by
znode — data byte for byte, as text — after these normalisations:

  topic ids            "topic_id":"<base64>" in /brokers/topics/<t>    -> "uuid#N" (first appearance)
  sequential names     config_change_0000000042 under /config/changes   -> renumbered from 0 in order,
                       (only the notifications about this sequence's    and compared by content
                       entities: the rest belong to other cases)
  ctime/mtime          not compared (ZooKeeper's Stat is not data)

The sequence's entities carry a prefix so that only its znodes are compared (the clusters are
shared with the request cases). Beyond them, the whole tree's shape (every path, sequence
suffixes as "#") and the broker's and controller's own znodes (/brokers/ids/0, /controller,
/cluster/id, /feature, /controller_epoch) are compared, with ports, timestamps and the cluster
id normalised."""

from __future__ import annotations

import json
import re
from typing import Any, Callable

from kafkasim.protocol import errors as E
from tests.conformance.library import req, sub
from tests.conformance.wire import Connection

PREFIX = "zn"
TOPIC_CONFIG = 2
SALT = b"0123456789abcdef"
SALTED_PASSWORD = bytes(range(32))


def topic(i: int) -> str:
    return f"{PREFIX}-topic-{i}"


USER, CLIENT = f"{PREFIX}-user", f"{PREFIX}-client"


def _create(name: str, partitions: int, configs: dict[str, str], assignment: list[list[int]] | None = None) -> Any:
    T = "CreatableTopic"
    return req("CreateTopics", timeout_ms=30000, validate_only=False, topics=[sub(
        "CreateTopics", T, name=name, num_partitions=-1 if assignment else partitions,
        replication_factor=-1 if assignment else 1,
        configs=[sub("CreateTopics", f"{T}.CreatableTopicConfig", name=k, value=v) for k, v in configs.items()],
        assignments=[sub("CreateTopics", f"{T}.CreatableReplicaAssignment", partition_index=i, broker_ids=b)
                     for i, b in enumerate(assignment or [])])])


def _quota(entity: list[tuple[str, str]], key: str, value: float, remove: bool = False) -> Any:
    return req("AlterClientQuotas", validate_only=False, entries=[sub("AlterClientQuotas", "EntryData", entity=[
        sub("AlterClientQuotas", "EntryData.EntityData", entity_type=t, entity_name=n) for t, n in entity], ops=[
        sub("AlterClientQuotas", "EntryData.OpData", key=key, value=value, remove=remove)])])


def _incremental(name: str, ops: list[tuple[str, int, str | None]]) -> Any:
    return req("IncrementalAlterConfigs", validate_only=False, resources=[sub(
        "IncrementalAlterConfigs", "AlterConfigsResource", resource_type=TOPIC_CONFIG, resource_name=name, configs=[
            sub("IncrementalAlterConfigs", "AlterConfigsResource.AlterableConfig", name=k, config_operation=op, value=v)
            for k, op, v in ops])])


def _scram(mechanism: int, iterations: int) -> Any:
    return req("AlterUserScramCredentials", deletions=[], upsertions=[sub(
        "AlterUserScramCredentials", "ScramCredentialUpsertion", name=USER, mechanism=mechanism,
        iterations=iterations, salt=SALT, salted_password=SALTED_PASSWORD)])


# (what, version, request): the admin sequence, each step expected to succeed.
SEQUENCE: list[tuple[str, int, Callable[[], Any]]] = [
    ("create with configs", 5, lambda: _create(topic(0), 3, {"cleanup.policy": "compact", "retention.ms": "1000",
                                                           "min.insync.replicas": "1"})),
    ("create by assignment", 5, lambda: _create(topic(1), 0, {}, assignment=[[0], [0]])),
    ("create to delete", 5, lambda: _create(topic(2), 1, {"segment.bytes": "1048576"})),
    ("more partitions", 3, lambda: req("CreatePartitions", timeout_ms=30000, validate_only=False, topics=[sub(
        "CreatePartitions", "CreatePartitionsTopic", name=topic(1), count=4, assignments=None)])),
    ("alter topic configs", 1, lambda: _incremental(topic(0), [("segment.bytes", 0, "1048576"),
                                                              ("retention.ms", 1, None),
                                                              ("cleanup.policy", 2, "delete")])),
    ("user quota", 1, lambda: _quota([("user", USER)], "producer_byte_rate", 1024.0)),
    ("client quota", 1, lambda: _quota([("client-id", CLIENT)], "consumer_byte_rate", 2048.0)),
    ("client quota 2", 1, lambda: _quota([("client-id", CLIENT)], "producer_byte_rate", 4096.0)),
    ("user+client quota", 1, lambda: _quota([("user", USER), ("client-id", CLIENT)], "request_percentage", 25.0)),
    ("quota removed", 1, lambda: _quota([("client-id", CLIENT)], "consumer_byte_rate", 0.0, remove=True)),
    ("scram sha-256", 0, lambda: _scram(1, 4096)),
    ("scram sha-512", 0, lambda: _scram(2, 8192)),
    ("delete topic", 4, lambda: req("DeleteTopics", timeout_ms=30000, topic_names=[topic(2)])),
]


def error_codes(resp: Any) -> list[int]:
    """Every error code in an answer (a nested walk over the decoded message)."""
    out: list[int] = []

    def walk(node: Any) -> None:
        if isinstance(node, list):
            for n in node:
                walk(n)
        elif hasattr(node, "SPEC"):
            for spec in node.SPEC:
                value = getattr(node, spec.attr, None)
                if spec.attr == "error_code" and isinstance(value, int):
                    out.append(value)
                else:
                    walk(value)
    walk(resp)
    return out


def run_sequence(conn: Connection) -> list[str]:
    """Play the sequence; the steps that did not succeed, with their error codes."""
    failed = []
    for what, version, build in SEQUENCE:
        codes = error_codes(conn.send(build(), version))
        if any(c != E.NONE for c in codes):
            failed.append(f"{what}: {codes}")
    return failed


def read_tree(connect: str) -> dict[str, bytes]:
    """Every znode's data, by path."""
    from kazoo.client import KazooClient
    zk = KazooClient(hosts=connect, timeout=15)
    zk.start(timeout=15)
    out: dict[str, bytes] = {}
    try:
        todo = ["/"]
        while todo:
            path = todo.pop()
            data, _ = zk.get(path)
            out[path] = data or b""
            todo += [path.rstrip("/") + "/" + c for c in zk.get_children(path)]
    finally:
        zk.stop()
        zk.close()
    return out


def gone(tree: dict[str, bytes]) -> bool:
    """The deleted topic's znodes are all gone (the controller removes them after DeleteTopics
    has answered)."""
    return not any(topic(2) in path for path in tree)


# The znodes every broker and controller write about themselves: compared with their ports,
# timestamps and the cluster id normalised.
GLOBAL_NORMALISATIONS = [(r'"timestamp":"\d+"', '"timestamp":"<time>"'), (r":\d{2,5}\b", ":<port>"),
                         (r'"port":\d+', '"port":<port>'), (r'"id":"[A-Za-z0-9_-]{22}"', '"id":"<cluster id>"')]


def global_znode(data: bytes) -> str:
    text = data.decode(errors="replace")
    for pattern, repl in GLOBAL_NORMALISATIONS:
        text = re.sub(pattern, repl, text)
    return text


def path_shape(path: str) -> str:
    """A path with ZooKeeper's sequence suffix replaced (their numbers follow each ensemble's
    history)."""
    return re.sub(r"\d{10}$", "#", path)


def _mentions_sequence(path: str, data: bytes) -> bool:
    return PREFIX + "-" in path or f'"{PREFIX}-' in data.decode(errors="replace") or f"/{PREFIX}-" in \
        data.decode(errors="replace")


def sequence_znodes(tree: dict[str, bytes]) -> dict[str, str]:
    """The znodes the sequence wrote, normalised (see the module docstring)."""
    ids: dict[str, str] = {}

    def uuid(m: re.Match[str]) -> str:
        return '"topic_id":"' + ids.setdefault(m.group(1), f"uuid#{len(ids)}") + '"'
    out: dict[str, str] = {}
    changes = 0
    for path in sorted(tree):
        data = tree[path]
        if not _mentions_sequence(path, data):
            continue
        text = re.sub(r'"topic_id":"([A-Za-z0-9_-]{22})"', uuid, data.decode(errors="replace"))
        m = re.fullmatch(r"(/config/changes/config_change_)\d{10}", path)
        if m:
            path = f"{m.group(1)}#{changes}"
            changes += 1
        out[path] = text
    return out


def compare(real: dict[str, str], sim: dict[str, str]) -> list[str]:
    """'path: real=... sim=...' for every znode that differs or exists on one side only."""
    out = []
    for path in sorted(set(real) | set(sim)):
        r, s = real.get(path), sim.get(path)
        if r != s:
            out.append(f"{path}: real={r!r} sim={s!r}")
    return out


def pretty(tree: dict[str, str]) -> str:
    return json.dumps(tree, indent=1, sort_keys=True)
