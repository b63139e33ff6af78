"""Property tests of the generated Kafka message codec.

- every message class x every valid version: hypothesis-generated objects (respecting per-version
  field presence, nullability and tagged fields, plus random unknown tags) round-trip through
  encode/decode, and decode->encode reproduces the bytes;
- truncated or garbled encodings raise ProtocolError and nothing else;
- Kafka's own Java serialization (kafka-clients / kafka-group-coordinator 3.9.1, driven by
  real/protocol-vectors/KafkaVectors.java) produces byte-identical output for hypothesis-generated
  messages across every API, and Java decodes our bytes (including unknown tagged fields) back to
  the same bytes and the same JSON.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkasim.protocol.errors import ProtocolError
from kafkasim.protocol.messages import ALL_MESSAGES
from kafkasim.protocol.primitives import DEFAULT, FieldSpec, Message, in_range

pytestmark = pytest.mark.property

REPO = Path(__file__).resolve().parents[2]
LIB = REPO / "real" / "maven" / "lib"
JAVA_SRC = REPO / "real" / "protocol-vectors" / "KafkaVectors.java"

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}

CASES = [(cls, v) for cls in ALL_MESSAGES for v in range(cls.MIN_VERSION, cls.MAX_VERSION + 1)]


def case_id(case: tuple[type[Message], int]) -> str:
    return f"{case[0].__name__}-v{case[1]}"


def present(spec: FieldSpec, v: int) -> bool:
    if not in_range(spec.versions, v):
        return False
    return spec.tag is None or in_range(spec.tagged_versions, v)


def elem_strategy(spec: FieldSpec, t: str, v: int, flexible: bool, unknown_tags: bool) -> st.SearchStrategy[Any]:
    if t in INT_RANGES:
        lo, hi = INT_RANGES[t]
        return st.integers(lo, hi)
    if t == "float64":
        return st.floats(allow_nan=False, allow_infinity=False)
    if t == "bool":
        return st.booleans()
    if t == "string":
        return st.text(max_size=6)
    if t in ("bytes", "records"):
        return st.binary(max_size=12)
    if t == "uuid":
        return st.binary(min_size=16, max_size=16)
    return obj_strategy(spec.struct, v, flexible, unknown_tags)


def field_strategy(spec: FieldSpec, v: int, flexible: bool, unknown_tags: bool) -> st.SearchStrategy[Any]:
    is_array = spec.type.startswith("[]")
    t = spec.type[2:] if is_array else spec.type
    base = elem_strategy(spec, t, v, flexible, unknown_tags)
    if is_array:
        base = st.lists(base, max_size=2)
    if in_range(spec.nullable_versions, v):
        base = st.none() | base
    return base


def unknown_tags_strategy(cls: type[Message]) -> st.SearchStrategy[Any]:
    known = {s.tag for s in cls.SPEC if s.tag is not None}
    tags = st.lists(st.integers(0, 300).filter(lambda t: t not in known), max_size=2, unique=True)
    return tags.flatmap(
        lambda ts: st.tuples(*[st.tuples(st.just(t), st.binary(max_size=5)) for t in sorted(ts)]).map(
            lambda items: list(items) or None
        )
    )


def obj_strategy(cls: Any, v: int, flexible: bool, unknown_tags: bool = True) -> st.SearchStrategy[Any]:
    kwargs = {s.attr: field_strategy(s, v, flexible, unknown_tags) for s in cls.SPEC if present(s, v)}
    if flexible and unknown_tags:
        kwargs["_unknown_tagged_fields"] = unknown_tags_strategy(cls)
    return st.fixed_dictionaries(kwargs).map(lambda kw: cls(**kw))


def message_strategy(cls: type[Message], v: int, unknown_tags: bool = True) -> st.SearchStrategy[Any]:
    flexible = cls.FLEXIBLE_FROM is not None and v >= cls.FLEXIBLE_FROM
    return obj_strategy(cls, v, flexible, unknown_tags)


# --------------------------------------------------------------------------- round trip


@pytest.mark.parametrize("case", CASES, ids=case_id)
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(data=st.data())
def test_round_trip_every_message_and_version(case: tuple[type[Message], int], data: st.DataObject) -> None:
    cls, v = case
    obj = data.draw(message_strategy(cls, v))
    encoded = obj.encode(v)
    decoded = cls.decode(encoded, v)
    assert decoded == obj
    assert decoded.encode(v) == encoded
    # a memoryview input decodes the same (records are zero-copy slices of it)
    assert cls.decode(memoryview(encoded), v) == obj


def test_cases_cover_every_api_and_version() -> None:
    from kafkasim.protocol.api import API_BY_KEY

    names = {c.__name__ for c, _ in CASES}
    for info in API_BY_KEY.values():
        assert info.request.__name__ in names and info.response.__name__ in names
    assert len({c for c, _ in CASES}) == len(ALL_MESSAGES) == 2 * len(API_BY_KEY) + 2 + 2 + 4 + 2  # + TransactionLogKey/Value
    assert sum(1 for c, v in CASES if c.__name__ == "FetchRequest") == 18


# --------------------------------------------------------------------------- malformed input


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(data=st.data())
def test_truncated_or_garbled_input_raises_protocol_error_only(data: st.DataObject) -> None:
    cls, v = data.draw(st.sampled_from(CASES))
    encoded = bytearray(data.draw(message_strategy(cls, v)).encode(v))
    how = data.draw(st.sampled_from(["truncate", "flip", "garbage", "extend"]))
    if how == "truncate":
        if not encoded:
            return
        bad = encoded[: data.draw(st.integers(0, len(encoded) - 1))]
    elif how == "flip":
        if not encoded:
            return
        i = data.draw(st.integers(0, len(encoded) - 1))
        encoded[i] = data.draw(st.integers(0, 255))
        bad = encoded
    elif how == "garbage":
        bad = bytearray(data.draw(st.binary(max_size=64)))
    else:
        bad = encoded + data.draw(st.binary(min_size=1, max_size=4))
    try:
        obj = cls.decode(bytes(bad), v)
    except ProtocolError:
        return
    # Some corruptions still decode (e.g. a flipped int); then they must re-encode cleanly.
    assert isinstance(obj, cls)
    if how == "truncate" or how == "extend":
        pytest.fail("a truncated/extended buffer decoded without error")
    obj.encode(v)


def test_huge_array_count_is_refused_before_allocating() -> None:
    from kafkasim.protocol.messages.metadata import MetadataRequest

    with pytest.raises(ProtocolError, match="array of 2147483647 elements"):
        MetadataRequest.decode(b"\x7f\xff\xff\xff", 0)


# --------------------------------------------------------------------------- Kafka JSON


def json_name(spec: FieldSpec) -> str:
    return spec.json_name[0].lower() + spec.json_name[1:]


def to_kafka_json(obj: Any, version: int, omit_default_tags: bool = False) -> dict[str, Any]:
    """The JSON Kafka's <Message>JsonConverter.read(node, version) accepts for `obj`.

    With omit_default_tags, tagged fields holding their default are left out, as
    JsonConverter.write does."""
    out: dict[str, Any] = {}
    for spec in obj.SPEC:
        if not present(spec, version):
            continue
        value = getattr(obj, spec.attr)
        if omit_default_tags and spec.tag is not None and value == default_of(spec):
            continue
        out[json_name(spec)] = json_value(spec, value, version, omit_default_tags)
    return out


def drop_records(j: Any, obj: Any, version: int) -> Any:
    """Remove records fields (and Kafka's "<name>SizeInBytes") from a JSON view of `obj`:
    JsonConverter.write does not render record bytes faithfully; the bytes are compared anyway."""
    for spec in obj.SPEC:
        name = json_name(spec)
        if not present(spec, version) or name not in j:
            continue
        value = getattr(obj, spec.attr)
        if spec.type == "records":
            j.pop(name, None)
            j.pop(name + "SizeInBytes", None)
        elif spec.struct is not None and value is not None:
            if spec.type.startswith("[]"):
                for x, jx in zip(value, j[name]):
                    drop_records(jx, x, version)
            else:
                drop_records(j[name], value, version)
    return j


def default_of(spec: FieldSpec) -> Any:
    if spec.default is DEFAULT:
        return [] if spec.type.startswith("[]") else spec.struct()
    return spec.default


def json_value(spec: FieldSpec, value: Any, version: int, omit: bool = False) -> Any:
    if value is None:
        return None
    is_array = spec.type.startswith("[]")
    t = spec.type[2:] if is_array else spec.type
    if is_array:
        return [json_elem(spec, t, x, version, omit) for x in value]
    return json_elem(spec, t, value, version, omit)


def json_elem(spec: FieldSpec, t: str, x: Any, version: int, omit: bool = False) -> Any:
    if t in ("bytes", "records"):
        return base64.b64encode(bytes(x)).decode()
    if t == "uuid":
        return base64.urlsafe_b64encode(x).decode().rstrip("=")
    if spec.struct is not None:
        return to_kafka_json(x, version, omit)
    return x


def java_class(cls: type[Message]) -> str:
    if cls.SCHEMA_NAME in ("OffsetCommitKey", "OffsetCommitValue", "GroupMetadataKey", "GroupMetadataValue"):
        return "org.apache.kafka.coordinator.group.generated." + cls.SCHEMA_NAME
    if cls.SCHEMA_NAME in ("TransactionLogKey", "TransactionLogValue"):
        return "org.apache.kafka.coordinator.transaction.generated." + cls.SCHEMA_NAME
    if cls.KIND == "data":
        return "org.apache.kafka.common.message." + cls.SCHEMA_NAME
    return "org.apache.kafka.common.message." + cls.SCHEMA_NAME + "Data"


class JavaOracle:
    def __init__(self, classes_dir: Path) -> None:
        self.proc = subprocess.Popen(
            ["java", "-Xshare:auto", "-cp", f"{classes_dir}:{LIB}/*", "KafkaVectors"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            encoding="utf-8",
        )
        self.lock = threading.Lock()

    def ask(self, *fields: str) -> str:
        with self.lock:
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.proc.stdin.write("\t".join(fields) + "\n")
            self.proc.stdin.flush()
            return self.proc.stdout.readline().rstrip("\n")

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory) -> Any:
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip("no JDK on this machine")
    from tests.protocol.test_codegen import ensure_jars

    ensure_jars()
    out = tmp_path_factory.mktemp("kafka-vectors")
    subprocess.run(["javac", "-d", str(out), "-cp", f"{LIB}/*", str(JAVA_SRC)], check=True)
    oracle = JavaOracle(out)
    yield oracle
    oracle.close()


def test_java_oracle_smoke(java: JavaOracle) -> None:
    # MetadataRequest v0 {topics: ["t"]}: int32 count 1, int16 length 1, "t".
    assert java.ask("E", "org.apache.kafka.common.message.MetadataRequestData", "0", '{"topics":[{"name":"t"}]}') == "OK 00000001000174"


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(data=st.data())
def test_encoding_matches_kafka_java(java: JavaOracle, data: st.DataObject) -> None:
    cls, v = data.draw(st.sampled_from(CASES))
    obj = data.draw(message_strategy(cls, v, unknown_tags=False))
    ours = obj.encode(v).hex()
    reply = java.ask("E", java_class(cls), str(v), json.dumps(to_kafka_json(obj, v)))
    assert reply == "OK " + ours, f"{cls.__name__} v{v}: {obj!r}"


def test_defaults_match_kafka_java_for_every_message_and_version(java: JavaOracle) -> None:
    """`Cls()` encodes exactly like Java's `new <Cls>Data()` at every version (or both refuse)."""
    mismatches = []
    for cls, v in CASES:
        reply = java.ask("N", java_class(cls), str(v))
        try:
            ours = "OK " + cls().encode(v).hex()
        except ProtocolError as e:
            ours = f"ERR {e}"
        if reply.startswith("ERR") and ours.startswith("ERR"):
            continue
        if reply != ours:
            mismatches.append(f"{cls.__name__} v{v}: java {reply} ours {ours}")
    assert not mismatches, "\n".join(mismatches[:20])


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(data=st.data())
def test_kafka_java_decodes_our_bytes(java: JavaOracle, data: st.DataObject) -> None:
    """Java parses our encoding (unknown tagged fields included) and re-serializes the same bytes;
    its JSON view equals ours."""
    cls, v = data.draw(st.sampled_from(CASES))
    obj = data.draw(message_strategy(cls, v, unknown_tags=True))
    ours = obj.encode(v).hex()
    reply = java.ask("D", java_class(cls), str(v), ours)
    assert reply.startswith("OK "), f"{cls.__name__} v{v}: {reply}"
    java_hex, java_json = reply[3:].split("\t", 1)
    assert java_hex == ours
    theirs = drop_records(json.loads(java_json), obj, v)
    assert normalize_json(theirs) == drop_records(to_kafka_json(obj, v, omit_default_tags=True), obj, v)


def normalize_json(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: normalize_json(v) for k, v in x.items()}
    if isinstance(x, list):
        return [normalize_json(v) for v in x]
    if isinstance(x, float):
        return float(x)
    return x


def test_defaults_follow_kafka_rules() -> None:
    from kafkasim.protocol.messages.fetch import FetchRequest, FetchResponse
    from kafkasim.protocol.messages.metadata import MetadataRequest
    from kafkasim.protocol.messages.produce import ProduceRequest

    r = FetchRequest()
    assert r.replica_id == -1 and r.max_bytes == 0x7FFFFFFF and r.isolation_level == 0
    assert r.session_epoch == -1 and r.topics == [] and r.rack_id == "" and r.cluster_id is None
    assert ProduceRequest().transactional_id is None
    assert MetadataRequest().allow_auto_topic_creation is True
    p = FetchResponse.PartitionData()
    # nullable (v4+) but without "default": "null" -> an empty list, as in Kafka
    assert p.records is None and p.aborted_transactions == [] and p.preferred_read_replica == -1
    assert p.current_leader == FetchResponse.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)
    assert FetchResponse().node_endpoints == [] and FetchResponse().node_endpoints is not FetchResponse().node_endpoints
    assert DEFAULT is not None
