"""Request-level faults, in every world: the broker's own version of the in-process doubles'
error injection (librdkafka's mock cluster, franz-go's kfake). Owned by the broker, consulted by
the SocketServer once per request, armed by the fault control plane or a scenario's
`kind = "request_error" | "request_delay" | "close_connection"` fault.

    request_error     {"api_key": K, "error_code": E, "count": N, "topic": T?, "partition": P?}
                      the next N requests of K (touching T[-P], if given) are not handled: they get
                      a correctly shaped response of K's version carrying E (Kafka's
                      AbstractRequest.getErrorResponse: every partition / group / key of the request
                      with E). Produce with acks=0 gets no response, as Kafka sends none. Produce
                      v10+ answered NOT_LEADER_OR_FOLLOWER names each partition's current leader and
                      its endpoint (KIP-951), as KafkaApis.handleProduceRequest does for every such
                      answer: clients that read the hint (franz-go) retry after their backoff
                      instead of waiting for a metadata refresh.
    request_delay     {"api_key": K?, "delay_ms": D, "count": N?}
                      requests of K (any, without api_key) are handled, and their responses held D ms.
    close_connection  {"after_requests": N, "api_key": K?, "count": C}
                      N more requests (of K) are answered; the connection carrying the next one is
                      closed without handling it; C times (default 1).

`api_key` and `error_code` take numbers or Kafka's names ("Produce", "NOT_LEADER_OR_FOLLOWER").
An API with no error response the broker can build refuses request_error at apply time.
Rules are checked in the order they were added; the first that matches acts.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.errors import ProtocolError
from kafkasim.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnResponse
from kafkasim.protocol.messages.fetch import FetchResponse
from kafkasim.protocol.messages.find_coordinator import FindCoordinatorResponse
from kafkasim.protocol.messages.join_group import JoinGroupResponse
from kafkasim.protocol.messages.list_offsets import ListOffsetsResponse
from kafkasim.protocol.messages.metadata import MetadataResponse
from kafkasim.protocol.messages.offset_commit import OffsetCommitResponse
from kafkasim.protocol.messages.offset_fetch import OffsetFetchResponse
from kafkasim.protocol.messages.produce import ProduceResponse
from kafkasim.protocol.primitives import Message
from kafkasim.runtime.api import NodeRuntime
from kafkasim.runtime.control_api import REQUEST_FAULT_KINDS, FaultError

# (topic responses of a ProduceResponse, listener name) -> node endpoints; fills current_leader.
LeaderHints = Callable[[list[Any], str], list[Any]]

# Fetch errors that concern the session, not a partition: Kafka puts them at the top level only.
_FETCH_SESSION_ERRORS = frozenset({E.FETCH_SESSION_ID_NOT_FOUND, E.INVALID_FETCH_SESSION_EPOCH,
                                   E.FETCH_SESSION_TOPIC_ID_ERROR})


@dataclass
class RequestRule:
    fault_id: str
    kind: str
    api_key: int | None = None
    error_code: int = 0
    remaining: int | None = None     # requests (request_error, request_delay) or closes left; None: unbounded
    delay_ms: float = 0.0
    after_requests: int = 0
    topic: str | None = None
    partition: int | None = None
    fired: int = 0
    seen: int = 0                    # close_connection: matching requests answered since the last close


@dataclass(frozen=True)
class Verdict:
    """What the socket server does with one request: `skip_handler` (answer `response`, None =
    no answer), `close` the connection, and hold the response `delay_ms`."""

    skip_handler: bool = False
    response: Message | None = None
    close: bool = False
    delay_ms: float = 0.0
    fault_id: str = ""


NO_FAULT = Verdict()


def parse_api_key(value: Any) -> int:
    if isinstance(value, str) and not value.lstrip("-").isdigit():
        info = A.API_BY_NAME.get(value)
        if info is None:
            raise FaultError(400, f"unknown api {value!r} (a key number or Kafka's name, e.g. 'Produce')")
        return info.key
    try:
        key = int(value)
    except (TypeError, ValueError):
        raise FaultError(400, f"api_key must be a number or an API name, not {value!r}") from None
    if key not in A.API_BY_KEY:
        raise FaultError(400, f"unknown api key {key}")
    return key


def parse_error_code(value: Any) -> int:
    if isinstance(value, str) and not value.lstrip("-").isdigit():
        err = E.ERROR_BY_NAME.get(value)
        if err is None:
            raise FaultError(400, f"unknown error {value!r} (a code or Kafka's name, e.g. 'NOT_LEADER_OR_FOLLOWER')")
        return err.code
    try:
        code = int(value)
    except (TypeError, ValueError):
        raise FaultError(400, f"error_code must be a number or an error name, not {value!r}") from None
    if code not in E.ERRORS or code == E.NONE:
        raise FaultError(400, f"error_code {code} is not one of Kafka's errors")
    return code


def _int(spec: dict[str, Any], key: str, default: int | None, minimum: int = 0) -> int | None:
    value = spec.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < minimum:
        raise FaultError(400, f"{key} must be a number >= {minimum}, not {value!r}")
    return int(value)


def parse_request_fault(fault_id: str, spec: dict[str, Any]) -> RequestRule:
    """Validate a request-level fault spec completely (FaultError 400 if not) into a rule."""
    kind = spec.get("kind")
    if kind not in REQUEST_FAULT_KINDS:
        raise FaultError(400, f"not a request-level fault kind: {kind!r} (one of {', '.join(REQUEST_FAULT_KINDS)})")
    api_key = parse_api_key(spec["api_key"]) if spec.get("api_key") is not None else None
    rule = RequestRule(fault_id, str(kind), api_key=api_key)
    if spec.get("topic") is not None:
        rule.topic = str(spec["topic"])
        rule.partition = _int(spec, "partition", None)
    elif spec.get("partition") is not None:
        raise FaultError(400, "partition needs a topic")
    if kind == "request_error":
        if api_key is None:
            raise FaultError(400, "request_error needs an api_key")
        if "error_code" not in spec:
            raise FaultError(400, "request_error needs an error_code")
        rule.error_code = parse_error_code(spec["error_code"])
        rule.remaining = _int(spec, "count", 1, minimum=1)
        if api_key not in _ERROR_RESPONSES and not _has_top_level_error(api_key):
            raise FaultError(400, f"api key {api_key} ({A.api_info(api_key).name}) has no error response")
    elif kind == "request_delay":
        delay = spec.get("delay_ms")
        if isinstance(delay, bool) or not isinstance(delay, (int, float)) or delay <= 0:
            raise FaultError(400, f"request_delay needs delay_ms > 0, not {delay!r}")
        rule.delay_ms = float(delay)
        rule.remaining = _int(spec, "count", None, minimum=1)
    else:
        rule.after_requests = _int(spec, "after_requests", 0) or 0
        rule.remaining = _int(spec, "count", 1, minimum=1)
    return rule


class RequestFaults:
    """The rules armed on one broker. `topic_id_of(name)` lets a topic filter match Fetch
    v13+, whose requests name topics by id. `leader_hints(topic responses, listener)` fills the
    KIP-951 current leader of a Produce answer's NOT_LEADER_OR_FOLLOWER partitions and returns
    the leaders' endpoints (the produce handler's own; bound once the broker has started)."""

    def __init__(self, rt: NodeRuntime, topic_id_of: Callable[[str], Any] | None = None,
                 leader_hints: LeaderHints | None = None) -> None:
        self.rt = rt
        self.topic_id_of = topic_id_of
        self.leader_hints = leader_hints
        self.rules: list[RequestRule] = []

    def add(self, rule: RequestRule) -> None:
        self.rules.append(rule)
        self.rt.trace("request_fault_armed", fault=rule.fault_id, kind=rule.kind, api_key=rule.api_key)

    def remove(self, fault_id: str) -> RequestRule | None:
        for rule in self.rules:
            if rule.fault_id == fault_id:
                self.rules.remove(rule)
                return rule
        return None

    def on_request(self, api_key: int, api_version: int, request: Any, listener: str = "PLAINTEXT") -> Verdict:
        """The verdict for one parsed request, received on `listener` (NO_FAULT when no rule matches)."""
        if not self.rules:
            return NO_FAULT
        for rule in self.rules:
            if rule.api_key is not None and rule.api_key != api_key:
                continue
            if rule.topic is not None and not self._touches(rule, api_key, request):
                continue
            verdict = self._act(rule, api_key, api_version, request, listener)
            if verdict is None:
                continue
            rule.fired += 1
            if rule.remaining is not None and rule.kind != "close_connection":
                rule.remaining -= 1
            if rule.remaining == 0:
                self.rules.remove(rule)
            self.rt.trace("request_fault_fired", fault=rule.fault_id, kind=rule.kind, api_key=api_key,
                          api_version=api_version)
            return verdict
        return NO_FAULT

    def _act(self, rule: RequestRule, api_key: int, api_version: int, request: Any,
             listener: str) -> Verdict | None:
        if rule.kind == "request_error":
            if api_key == A.PRODUCE and request.acks == 0:
                return Verdict(skip_handler=True, response=None, fault_id=rule.fault_id)
            response = error_response(api_key, api_version, request, rule.error_code)
            if (api_key == A.PRODUCE and api_version >= 10 and rule.error_code == E.NOT_LEADER_OR_FOLLOWER
                    and self.leader_hints is not None):
                assert isinstance(response, ProduceResponse)
                response.node_endpoints = self.leader_hints(response.responses, listener)
            return Verdict(skip_handler=True, response=response, fault_id=rule.fault_id)
        if rule.kind == "request_delay":
            return Verdict(delay_ms=rule.delay_ms, fault_id=rule.fault_id)
        if rule.seen < rule.after_requests:   # close_connection: not yet
            rule.seen += 1
            return None
        rule.seen = 0
        assert rule.remaining is not None
        rule.remaining -= 1
        return Verdict(close=True, fault_id=rule.fault_id)

    def _touches(self, rule: RequestRule, api_key: int, request: Any) -> bool:
        topic_id = self.topic_id_of(rule.topic) if self.topic_id_of is not None and rule.topic else None
        for name, tid, partitions in request_topics(api_key, request):
            if name == rule.topic or (topic_id is not None and tid == topic_id):
                if rule.partition is None or partitions is None or rule.partition in partitions:
                    return True
        return False


def request_topics(api_key: int, r: Any) -> list[tuple[str | None, Any, list[int] | None]]:
    """(name, topic id, partitions or None = all) of every topic a request names."""
    if api_key == A.PRODUCE:
        return [(t.name, None, [p.index for p in t.partition_data]) for t in r.topic_data]
    if api_key == A.FETCH:
        return [(t.topic, t.topic_id, [p.partition for p in t.partitions]) for t in r.topics]
    if api_key == A.LIST_OFFSETS:
        return [(t.name, None, [p.partition_index for p in t.partitions]) for t in r.topics]
    if api_key == A.METADATA:
        return [(t.name, t.topic_id, None) for t in r.topics or []]
    if api_key == A.OFFSET_COMMIT:
        return [(t.name, None, [p.partition_index for p in t.partitions]) for t in r.topics]
    if api_key == A.OFFSET_FETCH:
        topics = list(r.topics or []) + [t for g in r.groups or [] for t in g.topics or []]
        return [(t.name, None, list(t.partition_indexes)) for t in topics]
    if api_key == A.ADD_PARTITIONS_TO_TXN:
        topics = list(r.v3_and_below_topics or []) + [t for x in r.transactions or [] for t in x.topics]
        return [(t.name, None, list(t.partitions)) for t in topics]
    return []


# ---------------------------------------------------------------- error responses
def _produce(v: int, r: Any, code: int) -> Message:
    R = ProduceResponse
    T, P = R.TopicProduceResponse, R.TopicProduceResponse.PartitionProduceResponse
    return R(throttle_time_ms=0, responses=[T(name=t.name, partition_responses=[
        P(index=p.index, error_code=code, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1)
        for p in t.partition_data]) for t in r.topic_data])


def _fetch(v: int, r: Any, code: int) -> Message:
    R = FetchResponse
    T, P = R.FetchableTopicResponse, R.FetchableTopicResponse.PartitionData
    if code in _FETCH_SESSION_ERRORS:
        return R(throttle_time_ms=0, error_code=code, session_id=0, responses=[])
    return R(throttle_time_ms=0, error_code=0, session_id=0, responses=[T(
        topic=t.topic, topic_id=t.topic_id, partitions=[P(
            partition_index=p.partition, error_code=code, high_watermark=-1, last_stable_offset=-1,
            log_start_offset=-1, records=None) for p in t.partitions]) for t in r.topics])


def _list_offsets(v: int, r: Any, code: int) -> Message:
    R = ListOffsetsResponse
    T, P = R.ListOffsetsTopicResponse, R.ListOffsetsTopicResponse.ListOffsetsPartitionResponse
    return R(throttle_time_ms=0, topics=[T(name=t.name, partitions=[
        P(partition_index=p.partition_index, error_code=code, old_style_offsets=[], timestamp=-1, offset=-1)
        for p in t.partitions]) for t in r.topics])


def _metadata(v: int, r: Any, code: int) -> Message:
    R = MetadataResponse
    T = R.MetadataResponseTopic
    return R(throttle_time_ms=0, brokers=[], cluster_id=None, controller_id=-1, topics=[
        T(error_code=code, name=t.name or "", topic_id=t.topic_id, partitions=[]) for t in r.topics or []],
        cluster_authorized_operations=-2147483648)


def _offset_commit(v: int, r: Any, code: int) -> Message:
    R = OffsetCommitResponse
    T, P = R.OffsetCommitResponseTopic, R.OffsetCommitResponseTopic.OffsetCommitResponsePartition
    return R(throttle_time_ms=0, topics=[T(name=t.name, partitions=[
        P(partition_index=p.partition_index, error_code=code) for p in t.partitions]) for t in r.topics])


def _offset_fetch(v: int, r: Any, code: int) -> Message:
    R = OffsetFetchResponse
    if v >= 8:
        G = R.OffsetFetchResponseGroup
        return R(throttle_time_ms=0, groups=[G(group_id=g.group_id, topics=[], error_code=code) for g in r.groups])
    T, P = R.OffsetFetchResponseTopic, R.OffsetFetchResponseTopic.OffsetFetchResponsePartition
    # v2+ carry the top-level error; v0-1 only the partitions (OffsetFetchRequest.getErrorResponse).
    return R(throttle_time_ms=0, error_code=code if v >= 2 else 0, topics=[T(name=t.name, partitions=[
        P(partition_index=i, committed_offset=-1, committed_leader_epoch=-1, metadata="", error_code=code)
        for i in t.partition_indexes]) for t in r.topics or []])


def _find_coordinator(v: int, r: Any, code: int) -> Message:
    R = FindCoordinatorResponse
    msg = E.ERRORS[code].message
    if v >= 4:
        C = R.Coordinator
        return R(throttle_time_ms=0, coordinators=[
            C(key=k, node_id=-1, host="", port=-1, error_code=code, error_message=msg) for k in r.coordinator_keys])
    return R(throttle_time_ms=0, error_code=code, error_message=msg, node_id=-1, host="", port=-1)


def _join_group(v: int, r: Any, code: int) -> Message:
    R = JoinGroupResponse
    return R(throttle_time_ms=0, error_code=code, generation_id=-1, protocol_name=None if v >= 7 else "",
             leader="", member_id=r.member_id if code != E.UNKNOWN_MEMBER_ID else "", members=[])


def _add_partitions_to_txn(v: int, r: Any, code: int) -> Message:
    R = AddPartitionsToTxnResponse
    if v >= 4:
        return R(throttle_time_ms=0, error_code=code, results_by_transaction=[])
    T, P = R.AddPartitionsToTxnTopicResult, R.AddPartitionsToTxnPartitionResult
    return R(throttle_time_ms=0, results_by_topic_v3_and_below=[T(name=t.name, results_by_partition=[
        P(partition_index=p, partition_error_code=code) for p in t.partitions]) for t in r.v3_and_below_topics])


_ERROR_RESPONSES: dict[int, Callable[[int, Any, int], Message]] = {
    A.PRODUCE: _produce, A.FETCH: _fetch, A.LIST_OFFSETS: _list_offsets, A.METADATA: _metadata,
    A.OFFSET_COMMIT: _offset_commit, A.OFFSET_FETCH: _offset_fetch, A.FIND_COORDINATOR: _find_coordinator,
    A.JOIN_GROUP: _join_group, A.ADD_PARTITIONS_TO_TXN: _add_partitions_to_txn,
}


@functools.cache
def _has_top_level_error(api_key: int) -> bool:
    """APIs whose response is one error code plus fields with neutral defaults (Heartbeat,
    SyncGroup, InitProducerId, EndTxn, LeaveGroup, AddOffsetsToTxn, ...) — in every version:
    checked once by writing and reading back such a response at each."""
    info = A.API_BY_KEY.get(api_key)
    if info is None or "error_code" not in info.response._FIELD_NAMES:
        return False
    for version in range(info.min_version, info.max_version + 1):
        response = info.response()
        response.error_code = E.UNKNOWN_SERVER_ERROR  # type: ignore[attr-defined]
        parts: list[Any] = []
        try:
            response.write(parts.append, version)
            back = info.response.decode(memoryview(b"".join(bytes(p) for p in parts)), version)
        except ProtocolError:
            return False
        if getattr(back, "error_code", None) != E.UNKNOWN_SERVER_ERROR:
            return False
    return True


def has_error_response(api_key: int) -> bool:
    """Whether error_response can answer `api_key` (Kafka's getErrorResponse)."""
    return api_key in _ERROR_RESPONSES or _has_top_level_error(api_key)


def error_response(api_key: int, api_version: int, request: Any, code: int) -> Message:
    """A response of `api_key` at `api_version` that answers `request` with error `code`."""
    build = _ERROR_RESPONSES.get(api_key)
    if build is not None:
        return build(api_version, request, code)
    response = A.api_info(api_key).response()
    response.error_code = code  # type: ignore[attr-defined]
    if api_key == A.INIT_PRODUCER_ID:
        response.producer_id, response.producer_epoch = -1, -1  # type: ignore[attr-defined]
    return response
