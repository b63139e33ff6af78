"""The normalisations applied to both brokers' decoded responses before they are compared —
all of them, here and only here. Anything not listed is compared exactly.

A response is first turned into a tree (`to_tree`): a dict per struct holding exactly the fields
that exist at the response's version (Kafka's JSON schema, kafkasim's generated SPEC), lists as
lists, and `records` fields decoded into batches and records (kafkasim.records) so that a byte
difference shows as the field that differs. Then, field by field:

  NAME                 FIELDS                                   WHY
  throttle             throttle_time_ms                         quota throttling is timing, not semantics;
                                                                neither broker has quotas set here
  uuid                 any uuid field (topic_id, ...)            random per cluster: topic ids are minted on
                                                                creation; replaced by "uuid#N", N = order of
                                                                first appearance in the case (so equal ids stay
                                                                equal and distinct ids distinct); the zero uuid
                                                                is kept (it means "none")
  producer_id          producer_id (>= 0; in batches too)       allocated from a ZooKeeper block that depends on
                                                                the cluster's history; same first-appearance
                                                                numbering as uuid
  member_id            member_id, leader, group_instance-less   "<client id>-<uuid>": random; same numbering
                       member ids, owner of describe output
  session_id           Fetch session_id (non-zero)              random per fetch session; same numbering
  wall_clock           log_append_time_ms, *timestamp* fields    wall-clock time of each broker; kept when -1
                       listed in WALL_CLOCK, batch timestamps    (the "no time" sentinel)
                       of LogAppendTime batches
  endpoint             port (of brokers/nodes/coordinators)      free ports chosen at start; the host is
                                                                compared (both bind 127.0.0.1)
  cluster_id           cluster_id                               random per ZooKeeper ensemble
  error_message        error_message & *_error_message           Kafka's text is free-form (often an exception
                                                                message); compared as null vs present only
  config_value_paths   DescribeConfigs values of log.dirs,      each broker's own directories, ZooKeeper and
                       log.dir, zookeeper.connect, listeners,    ports; compared as "<local>"
                       advertised.listeners, port; log_dir
                       fields holding an absolute path
  unordered            lists named `configs` (by name) and       Kafka builds them from hash maps, so their order
                       `partitions` (by partition_index)        is unspecified; sorted before comparing
  own_part             ListGroups' groups: only the case's own   (library.own_groups, declared per step with
                       groups                                   `only=`) the cluster is shared by every case
  disk_free            DescribeLogDirs usable_bytes (> 0)        free space of the file store both log dirs are
                                                                on: it moves with every write on the machine
                                                                (total_bytes is compared)
  crc                  batch crc                                 derived from the other fields (compared) and
                                                                from the normalised timestamps/producer ids

Each normalisation is a function below; NORMALISATIONS names them for the report.
"""

from __future__ import annotations

from typing import Any

from kafkasim.protocol.primitives import Message, Struct
from kafkasim.records.batch import iter_batches, decode_batch_records
from kafkasim.records.legacy import iter_legacy_entries, iter_legacy_messages

NORMALISATIONS = ("throttle", "uuid", "producer_id", "member_id", "session_id", "wall_clock",
                  "endpoint", "cluster_id", "error_message", "config_value_paths", "unordered", "own_part", "disk_free", "crc")
UNORDERED = {"configs": "name", "partitions": "partition_index"}

ZERO_UUID = b"\x00" * 16
WALL_CLOCK = {"log_append_time_ms", "issue_timestamp", "issue_timestamp_ms", "expiry_timestamp",
              "expiry_timestamp_ms", "max_timestamp_ms", "last_timestamp", "transaction_start_time_ms",
              "current_txn_start_timestamp"}
PORT_FIELDS = {"port"}
MEMBER_FIELDS = {"member_id", "leader", "leader_id_str"}
LOCAL_CONFIGS = {"log.dirs", "log.dir", "zookeeper.connect", "listeners", "advertised.listeners", "port"}


class Numbering:
    """First-appearance numbering of random values, one namespace per kind, per case and side."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str, Any], str] = {}

    def name(self, kind: str, value: Any) -> str:
        key = (kind, value)
        if key not in self.seen:
            self.seen[key] = f"{kind}#{sum(1 for k in self.seen if k[0] == kind)}"
        return self.seen[key]


def to_tree(obj: Any, version: int) -> Any:
    """A plain tree of the fields present at `version` (records decoded)."""
    if isinstance(obj, Struct):
        out: dict[str, Any] = {}
        for spec in type(obj).SPEC:
            if not (spec.versions[0] <= version <= spec.versions[1]):
                continue
            value = getattr(obj, spec.attr)
            out[spec.attr] = decode_records(value) if spec.type == "records" else to_tree(value, version)
        return out
    if isinstance(obj, list):
        return [to_tree(v, version) for v in obj]
    if isinstance(obj, memoryview):
        return bytes(obj)
    return obj


def decode_records(data: Any) -> Any:
    """Batches (v2) or messages (magic 0/1) as dicts; a trailing partial batch as its size."""
    if data is None:
        return None
    buf = bytes(data)
    if not buf:
        return []
    magic = buf[16] if len(buf) > 16 else -1
    out: list[Any] = []
    if magic == 2:
        it = iter_batches(buf)
        for pos, h in it:
            batch = {f: getattr(h, f) for f in type(h).__dataclass_fields__}
            batch["records"] = [{"offset": r.offset, "timestamp_ms": r.timestamp_ms, "key": r.key,
                                 "value": r.value, "headers": list(r.headers)}
                                for r in decode_batch_records(buf, pos, validate=False)]
            out.append(batch)
        rest = len(buf) - it.position
    else:
        shallow = iter_legacy_entries(buf)
        entries = list(shallow)
        rest = len(buf) - shallow.position
        out = [{"offset": m.offset, "magic": m.magic, "timestamp_ms": m.timestamp_ms,
                "timestamp_type": int(m.timestamp_type), "key": m.key, "value": m.value,
                "compression": int(m.compression)}
               for m in iter_legacy_messages(buf[:len(buf) - rest])]
        out.append({"wrappers": len(entries)})
    if rest:
        out.append({"partial_bytes": rest})
    return out


def normalise(tree: Any, numbering: Numbering) -> Any:
    """Apply every normalisation in place order; returns the normalised tree."""
    if isinstance(tree, list):
        return [normalise(v, numbering) for v in tree]
    if not isinstance(tree, dict):
        return tree
    out: dict[str, Any] = {}
    log_append_batch = "attributes" in tree and "crc" in tree and tree["attributes"] & 0x08
    for key, value in tree.items():
        out[key] = _field(key, value, numbering, bool(log_append_batch))
    _config_value_paths(out)
    return out


def _field(key: str, value: Any, numbering: Numbering, log_append_batch: bool) -> Any:
    if key == "throttle_time_ms":
        return 0
    if isinstance(value, bytes) and len(value) == 16 and key.endswith(("_id", "id")) and "uuid" not in key:
        return value if value == ZERO_UUID else numbering.name("uuid", value)
    if key == "producer_id" and isinstance(value, int) and value >= 0:
        return numbering.name("producer_id", value)
    if key in MEMBER_FIELDS and isinstance(value, str) and value:
        return numbering.name("member_id", value)
    if key == "session_id" and isinstance(value, int) and value != 0:
        return numbering.name("session_id", value)
    if key in WALL_CLOCK and isinstance(value, int) and value != -1:
        return "<wall clock>"
    if log_append_batch and key in ("base_timestamp", "max_timestamp"):
        return "<wall clock>"
    if key == "crc":
        return "<crc>"
    if key in PORT_FIELDS and isinstance(value, int):
        return "<port>"
    if key == "cluster_id" and isinstance(value, str):
        return "<cluster id>"
    if key.endswith("error_message") and isinstance(value, str):
        return "<message>"
    if key == "log_dir" and isinstance(value, str) and value.startswith("/"):
        return "<local>"
    if key == "usable_bytes" and isinstance(value, int) and value > 0:
        return "<free bytes>"
    if key in UNORDERED and isinstance(value, list) and all(isinstance(v, dict) and UNORDERED[key] in v for v in value):
        value = sorted(value, key=lambda v: v[UNORDERED[key]])
    if key == "records" and isinstance(value, list) and log_append_batch:
        return [{**r, "timestamp_ms": "<wall clock>"} if isinstance(r, dict) else r for r in value]
    return normalise(value, numbering)


def _config_value_paths(node: dict[str, Any]) -> None:
    name = node.get("name", node.get("config_name"))
    if name in LOCAL_CONFIGS and isinstance(node.get("value"), str):
        node["value"] = "<local>"


def compare(a: Any, b: Any, path: str = "") -> list[str]:
    """Field-by-field differences as 'path: real=... sim=...' lines (empty when equal)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in list(a) + [k for k in b if k not in a]:
            if k not in a or k not in b:
                out.append(f"{path}.{k}: real={a.get(k, '<absent>')!r} sim={b.get(k, '<absent>')!r}")
            else:
                out += compare(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items in real, {len(b)} in sim: real={_short(a)} sim={_short(b)}"]
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += compare(x, y, f"{path}[{i}]")
        return out
    return [] if a == b else [f"{path}: real={_short(a)} sim={_short(b)}"]


def _short(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 300 else s[:300] + "..."


def tree_of(response: Any, version: int) -> Any:
    return to_tree(response, version) if isinstance(response, Message) else response
