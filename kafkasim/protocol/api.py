"""Registry of Kafka APIs (keys, names, message classes, versions) and header-version rules.

Built from the generated index (``kafkasim.protocol.messages.API_TABLE``), i.e. Kafka 3.9.1's
JSON definitions: ``validVersions`` gives min/max, ``flexibleVersions`` gives ``flexible_from``.
These are the versions the CODEC can speak; which versions the broker ADVERTISES in ApiVersions
is the broker's choice (keep minimums low for old clients, see the client-protocol reference).

Header rules (Kafka's ``ApiMessageType.requestHeaderVersion`` / ``responseHeaderVersion``):
  request header  v2 (flexible: tagged fields, ClientId still an int16-length string) when the
                  request version is flexible, else v1; v0 (no ClientId) only for
                  ControlledShutdown v0.
  response header v1 (flexible: correlation id + tagged fields) when the version is flexible,
                  else v0 (correlation id only); ApiVersions responses ALWAYS use v0, because a
                  client must be able to read the reply before it knows what the broker speaks.
Flexibility is decided by ``version >= flexible_from`` even above the maximum, as Kafka does, so
the header of a too-new request can still be parsed.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkasim.protocol.errors import ProtocolError
from kafkasim.protocol.messages import API_TABLE
from kafkasim.protocol.primitives import Message

# API keys, named as Kafka's ApiKeys enum.
PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
METADATA = 3
LEADER_AND_ISR = 4
STOP_REPLICA = 5
UPDATE_METADATA = 6
CONTROLLED_SHUTDOWN = 7
OFFSET_COMMIT = 8
OFFSET_FETCH = 9
FIND_COORDINATOR = 10
JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
SASL_HANDSHAKE = 17
API_VERSIONS = 18
CREATE_TOPICS = 19
DELETE_TOPICS = 20
DELETE_RECORDS = 21
INIT_PRODUCER_ID = 22
OFFSET_FOR_LEADER_EPOCH = 23
ADD_PARTITIONS_TO_TXN = 24
ADD_OFFSETS_TO_TXN = 25
END_TXN = 26
WRITE_TXN_MARKERS = 27
TXN_OFFSET_COMMIT = 28
DESCRIBE_ACLS = 29
CREATE_ACLS = 30
DELETE_ACLS = 31
DESCRIBE_CONFIGS = 32
ALTER_CONFIGS = 33
ALTER_REPLICA_LOG_DIRS = 34
DESCRIBE_LOG_DIRS = 35
SASL_AUTHENTICATE = 36
CREATE_PARTITIONS = 37
CREATE_DELEGATION_TOKEN = 38
RENEW_DELEGATION_TOKEN = 39
EXPIRE_DELEGATION_TOKEN = 40
DESCRIBE_DELEGATION_TOKEN = 41
DELETE_GROUPS = 42
ELECT_LEADERS = 43
INCREMENTAL_ALTER_CONFIGS = 44
ALTER_PARTITION_REASSIGNMENTS = 45
LIST_PARTITION_REASSIGNMENTS = 46
OFFSET_DELETE = 47
DESCRIBE_CLIENT_QUOTAS = 48
ALTER_CLIENT_QUOTAS = 49
DESCRIBE_USER_SCRAM_CREDENTIALS = 50
ALTER_USER_SCRAM_CREDENTIALS = 51
VOTE = 52
BEGIN_QUORUM_EPOCH = 53
END_QUORUM_EPOCH = 54
DESCRIBE_QUORUM = 55
ALTER_PARTITION = 56
UPDATE_FEATURES = 57
ENVELOPE = 58
FETCH_SNAPSHOT = 59
DESCRIBE_CLUSTER = 60
DESCRIBE_PRODUCERS = 61
BROKER_REGISTRATION = 62
BROKER_HEARTBEAT = 63
UNREGISTER_BROKER = 64
DESCRIBE_TRANSACTIONS = 65
LIST_TRANSACTIONS = 66
ALLOCATE_PRODUCER_IDS = 67
CONSUMER_GROUP_HEARTBEAT = 68
CONSUMER_GROUP_DESCRIBE = 69
CONTROLLER_REGISTRATION = 70
GET_TELEMETRY_SUBSCRIPTIONS = 71
PUSH_TELEMETRY = 72
ASSIGN_REPLICAS_TO_DIRS = 73
LIST_CLIENT_METRICS_RESOURCES = 74
DESCRIBE_TOPIC_PARTITIONS = 75
SHARE_GROUP_HEARTBEAT = 76
SHARE_GROUP_DESCRIBE = 77
SHARE_FETCH = 78
SHARE_ACKNOWLEDGE = 79
ADD_RAFT_VOTER = 80
REMOVE_RAFT_VOTER = 81
UPDATE_RAFT_VOTER = 82
INITIALIZE_SHARE_GROUP_STATE = 83
READ_SHARE_GROUP_STATE = 84
WRITE_SHARE_GROUP_STATE = 85
DELETE_SHARE_GROUP_STATE = 86
READ_SHARE_GROUP_STATE_SUMMARY = 87



@dataclass(frozen=True)
class ApiInfo:
    key: int
    name: str  # Kafka's name without Request/Response, e.g. "Produce", "ApiVersions"
    module: str  # generated module under kafkasim.protocol.messages, e.g. "produce"
    request: type[Message]
    response: type[Message]
    min_version: int
    max_version: int
    flexible_from: int | None  # first flexible version; None if the API is never flexible
    listeners: tuple[str, ...]  # "zkBroker", "broker", "controller"
    latest_version_unstable: bool
    deprecated: tuple[int, int] | None  # deprecatedVersions (lo, hi) in Kafka 3.9

    def is_valid(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def is_flexible(self, version: int) -> bool:
        return self.flexible_from is not None and version >= self.flexible_from


API_BY_KEY: dict[int, ApiInfo] = {
    row[0]: ApiInfo(*row) for row in API_TABLE
}
API_BY_NAME: dict[str, ApiInfo] = {info.name: info for info in API_BY_KEY.values()}


def api_info(api_key: int) -> ApiInfo:
    info = API_BY_KEY.get(api_key)
    if info is None:
        raise ProtocolError(f"unknown api key {api_key}")
    return info


# (api key, version) -> header version, for the versions the codec knows (a bounded table: a
# version off the peer's wire outside them is answered, not remembered). Every request and
# response asks twice; the lookup saves two calls each time.
_REQUEST_HEADER_VERSIONS: dict[tuple[int, int], int] = {}
_RESPONSE_HEADER_VERSIONS: dict[tuple[int, int], int] = {}


def request_header_version(api_key: int, api_version: int) -> int:
    hv = _REQUEST_HEADER_VERSIONS.get((api_key, api_version))
    if hv is not None:
        return hv
    info = api_info(api_key)
    if api_key == CONTROLLED_SHUTDOWN and api_version == 0:
        hv = 0
    else:
        hv = 2 if info.is_flexible(api_version) else 1
    if info.is_valid(api_version):
        _REQUEST_HEADER_VERSIONS[(api_key, api_version)] = hv
    return hv


def response_header_version(api_key: int, api_version: int) -> int:
    hv = _RESPONSE_HEADER_VERSIONS.get((api_key, api_version))
    if hv is not None:
        return hv
    info = api_info(api_key)
    hv = 0 if api_key == API_VERSIONS else 1 if info.is_flexible(api_version) else 0
    if info.is_valid(api_version):
        _RESPONSE_HEADER_VERSIONS[(api_key, api_version)] = hv
    return hv
