"""What each API asks the authorizer, and how its answer reads when it says no — Kafka's
KafkaApis/AuthHelper checks (ZooKeeper mode, 3.9), in one place.

A rule wraps an API's handler: it authorizes the request's resources, hands the handler the
part that is allowed (the handler never sees a denied topic, so a denied topic is neither
created nor disclosed), and merges the denials into the handler's answer, per resource, as
Kafka answers them (partial results in Produce, OffsetCommit, ...). A request denied as
a whole never reaches its handler. Fetch is the exception: fetch_api.py checks the partitions
of its fetch session, which the request does not name. Without an authorizer KafkaApis calls the
handlers directly.

This module holds the data path and Metadata; authorizer_rules_groups.py the group and
transaction APIs, authorizer_rules_admin.py the admin and inter-broker ones.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

from kafkasim.broker.api_registry import CloseConnection
from kafkasim.broker.request_context import RequestContext, context_of
from kafkasim.broker.security.acl_types import CLUSTER_NAME, AclOperation, ResourceType
from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.headers import RequestHeader
from kafkasim.protocol.messages.list_offsets import ListOffsetsResponse
from kafkasim.protocol.messages.metadata import MetadataResponse
from kafkasim.protocol.messages.produce import ProduceResponse
from kafkasim.protocol.primitives import Message

if TYPE_CHECKING:
    from kafkasim.broker.metadata_cache import MetadataCache
    from kafkasim.broker.security.authorizer import AclAuthorizer

Call = Callable[[Any], Awaitable[Message | None]]
Rule = Callable[["Authz", RequestHeader, Any, Call], Awaitable[Message | None]]
OP = AclOperation
TOPIC, GROUP, CLUSTER, TXN = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
ZERO_UUID = bytes(16)
OMITTED = -2147483648


class Authz:
    """One request's view of the authorizer: its context, and what the rules need."""

    def __init__(self, authorizer: AclAuthorizer, cache: MetadataCache, ctx: RequestContext,
                 auto_create: bool) -> None:
        self.authorizer, self.cache, self.ctx, self.auto_create = authorizer, cache, ctx, auto_create

    def allowed(self, op: AclOperation, rtype: ResourceType, name: str) -> bool:
        return self.authorizer.authorize(self.ctx, op, rtype, name)

    def cluster(self, op: AclOperation) -> bool:
        return self.allowed(op, CLUSTER, CLUSTER_NAME)

    def operations(self, rtype: ResourceType, name: str) -> int:
        return self.authorizer.authorized_operations(self.ctx, rtype, name)

    def denied(self, items: list[Any], op: AclOperation, rtype: ResourceType, name: Callable[[Any], str]) -> list[Any]:
        return [i for i in items if not self.allowed(op, rtype, name(i))]


def error_response(header: RequestHeader, code: int) -> Message:
    """The response's defaults with `code` as its top-level error (Kafka's getErrorResponse for
    the APIs whose answer is one error), where the version has one."""
    resp: Any = A.api_info(header.request_api_key).response()
    version = header.request_api_version
    if any(f.attr == "error_code" and f.versions[0] <= version <= f.versions[1] for f in type(resp).SPEC):
        resp.error_code = code
    return cast(Message, resp)


class RequestAuthorizer:
    """KafkaApis' hook: `await rules.handle(header, request, handler)`."""

    def __init__(self, authorizer: AclAuthorizer, cache: MetadataCache, auto_create_topics: bool) -> None:
        self.authorizer, self.cache, self.auto_create = authorizer, cache, auto_create_topics
        self.rules: dict[int, Rule] = dict(CORE_RULES)
        from kafkasim.broker.security import authorizer_rules_admin, authorizer_rules_groups
        self.rules.update(authorizer_rules_groups.RULES)
        self.rules.update(authorizer_rules_admin.RULES)

    async def handle(self, header: RequestHeader, request: Any, call: Call) -> Message | None:
        rule = self.rules.get(header.request_api_key)
        if rule is None:
            return await call(request)
        return await rule(Authz(self.authorizer, self.cache, context_of(header), self.auto_create), header,
                          request, call)


# ---------------------------------------------------------------- Produce
async def produce(a: Authz, header: RequestHeader, req: Any, call: Call) -> Message | None:
    """WRITE on the transactional id (else every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    WRITE on each topic (else its partitions TOPIC_AUTHORIZATION_FAILED). acks=0 and a denial:
    the connection is closed, as Kafka answers any error of an acks=0 produce."""
    if req.transactional_id is not None and not a.allowed(OP.WRITE, TXN, req.transactional_id):
        denied, code = list(req.topic_data), E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    else:
        denied, code = a.denied(req.topic_data, OP.WRITE, TOPIC, lambda t: t.name), E.TOPIC_AUTHORIZATION_FAILED
    if not denied:
        return await call(req)
    if req.acks == 0:
        raise CloseConnection("produce with acks=0 denied")
    req.topic_data = [t for t in req.topic_data if t not in denied]
    resp = await call(req) if req.topic_data else ProduceResponse(responses=[], throttle_time_ms=0)
    T = ProduceResponse.TopicProduceResponse
    P = T.PartitionProduceResponse
    assert isinstance(resp, ProduceResponse)
    resp.responses.extend(T(name=t.name, partition_responses=[
        P(index=p.index, error_code=code, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1,
          record_errors=[], error_message=None) for p in t.partition_data]) for t in denied)
    return resp


# ---------------------------------------------------------------- Fetch
# No rule: FetchApi authorizes the fetch *context's* partitions (an incremental fetch reads
# session partitions its request does not name), as KafkaApis.handleFetchRequest does.


# ---------------------------------------------------------------- ListOffsets
async def list_offsets(a: Authz, header: RequestHeader, req: Any, call: Call) -> Message | None:
    denied = a.denied(req.topics, OP.DESCRIBE, TOPIC, lambda t: t.name)
    if not denied:
        return await call(req)
    req.topics = [t for t in req.topics if t not in denied]
    resp = await call(req)
    assert isinstance(resp, ListOffsetsResponse)
    T = ListOffsetsResponse.ListOffsetsTopicResponse
    P = T.ListOffsetsPartitionResponse
    resp.topics.extend(T(name=t.name, partitions=[
        P(partition_index=p.partition_index, error_code=E.TOPIC_AUTHORIZATION_FAILED, old_style_offsets=[],
          timestamp=-1, offset=-1, leader_epoch=-1) for p in t.partitions]) for t in denied)
    return resp


# ---------------------------------------------------------------- Metadata
async def metadata(a: Authz, header: RequestHeader, req: Any, call: Call) -> Message | None:
    """KafkaApis.handleTopicMetadataRequest: topics the principal may not DESCRIBE are left out
    of an all-topics answer and answered TOPIC_AUTHORIZATION_FAILED when named (without saying
    whether they exist); a missing topic it may not CREATE (on the cluster or the topic) is
    TOPIC_AUTHORIZATION_FAILED instead of auto-created. Authorized operations come from the
    authorizer."""
    version = header.request_api_version
    all_topics = req.topics is None or (version == 0 and not req.topics)
    by_id = version >= 12 and req.topics and any(t.topic_id != ZERO_UUID for t in req.topics)
    T = MetadataResponse.MetadataResponseTopic
    extra: list[Any] = []
    if not all_topics and not by_id and all(t.name is not None for t in req.topics):
        kept = []
        create = req.allow_auto_topic_creation if version >= 4 else True
        may_create_any = not (create and a.auto_create) or a.cluster(OP.CREATE)
        for t in req.topics:
            if not a.allowed(OP.DESCRIBE, TOPIC, t.name):
                extra.append(T(error_code=E.TOPIC_AUTHORIZATION_FAILED, name=t.name, topic_id=ZERO_UUID,
                               is_internal=False, partitions=[], topic_authorized_operations=OMITTED))
            elif not may_create_any and a.cache.topic(t.name) is None and not a.allowed(OP.CREATE, TOPIC, t.name):
                extra.append(T(error_code=E.TOPIC_AUTHORIZATION_FAILED, name=t.name, topic_id=ZERO_UUID,
                               is_internal=t.name.startswith("__"), partitions=[],
                               topic_authorized_operations=OMITTED))
            else:
                kept.append(t)
        if not kept and req.topics:
            req.topics = None   # nothing left to ask: an all-topics read, of which nothing is kept
            kept_none = True
        else:
            req.topics, kept_none = kept, False
    else:
        kept_none = False
    resp = await call(req)
    assert isinstance(resp, MetadataResponse)
    if kept_none:
        resp.topics = []
    elif all_topics or by_id:
        resp.topics = [t for t in resp.topics if t.name is None or a.allowed(OP.DESCRIBE, TOPIC, t.name)]
    _metadata_operations(a, version, req, resp)   # the denied topics keep the schema's default
    resp.topics.extend(extra)
    return resp


def _metadata_operations(a: Authz, version: int, req: Any, resp: Any) -> None:
    if version < 8:
        return
    if version <= 10 and req.include_cluster_authorized_operations:
        resp.cluster_authorized_operations = a.operations(CLUSTER, CLUSTER_NAME) if a.cluster(OP.DESCRIBE) else 0
    if req.include_topic_authorized_operations:
        for t in resp.topics:
            if t.name is not None:
                t.topic_authorized_operations = a.operations(TOPIC, t.name)


# ---------------------------------------------------------------- OffsetForLeaderEpoch, DescribeProducers
async def offset_for_leader_epoch(a: Authz, header: RequestHeader, req: Any, call: Call) -> Message | None:
    """CLUSTER_ACTION covers every topic (a follower); else DESCRIBE on each."""
    from kafkasim.protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochResponse as R
    denied = [] if a.cluster(OP.CLUSTER_ACTION) else a.denied(req.topics, OP.DESCRIBE, TOPIC, lambda t: t.topic)
    if not denied:
        return await call(req)
    req.topics = [t for t in req.topics if t not in denied]
    resp = await call(req) if req.topics else R(topics=[])
    assert isinstance(resp, R)
    T = R.OffsetForLeaderTopicResult
    resp.topics.extend(T(topic=t.topic, partitions=[T.EpochEndOffset(
        error_code=E.TOPIC_AUTHORIZATION_FAILED, partition=p.partition, leader_epoch=-1, end_offset=-1)
        for p in t.partitions]) for t in denied)
    return resp


async def describe_producers(a: Authz, header: RequestHeader, req: Any, call: Call) -> Message | None:
    from kafkasim.protocol.messages.describe_producers import DescribeProducersResponse as R
    denied = a.denied(req.topics, OP.READ, TOPIC, lambda t: t.name)
    if not denied:
        return await call(req)
    req.topics = [t for t in req.topics if t not in denied]
    resp = await call(req) if req.topics else R(topics=[])
    assert isinstance(resp, R)
    T = R.TopicResponse
    resp.topics.extend(T(name=t.name, partitions=[T.PartitionResponse(
        partition_index=i, error_code=E.TOPIC_AUTHORIZATION_FAILED, error_message=None, active_producers=[])
        for i in t.partition_indexes]) for t in denied)
    return resp


CORE_RULES: dict[int, Rule] = {
    A.PRODUCE: produce,
    A.LIST_OFFSETS: list_offsets,
    A.METADATA: metadata,
    A.OFFSET_FOR_LEADER_EPOCH: offset_for_leader_epoch,
    A.DESCRIBE_PRODUCERS: describe_producers,
}
