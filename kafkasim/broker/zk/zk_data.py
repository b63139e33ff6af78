"""Kafka's ZooKeeper layout and znode contents (ZooKeeper mode), as Kafka 3.9 writes them.

Checked against a real Kafka 3.9.1 broker (`realkafka zk DIR get PATH`):

  /cluster/id                                {"version":"1","id":"<22-char base64url uuid>"}
  /brokers/ids/<id>         (ephemeral)      {"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},
                                              "endpoints":["PLAINTEXT://127.0.0.1:9092"],"jmx_port":-1,"port":9092,
                                              "host":"127.0.0.1","version":5,"timestamp":"<ms>"}   (+ "rack" when set)
  /brokers/topics/<t>                        {"partitions":{"0":[0]},"topic_id":"<uuid>","adding_replicas":{},
                                              "removing_replicas":{},"version":3}
  /brokers/topics/<t>/partitions/<p>/state   {"controller_epoch":1,"leader":0,"version":1,"leader_epoch":0,"isr":[0]}
  /controller               (ephemeral)      {"version":2,"brokerid":0,"timestamp":"<ms>","kraftControllerEpoch":-1}
  /controller_epoch                          1
  /config/topics/<t>                         {"version":1,"config":{}}

JSON is compact with keys in Kafka's order (insertion order here).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

CLUSTER_ID = "/cluster/id"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
BROKER_SEQID = "/brokers/seqid"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CONFIG_TOPICS = "/config/topics"
ADMIN_DELETE_TOPICS = "/admin/delete_topics"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"

# Created at startup by every Kafka broker (KafkaZkClient.createTopLevelPaths).
PERSISTENT_PATHS = ("/consumers", "/brokers/ids", "/brokers/topics", "/config/changes", "/admin/delete_topics",
                    "/brokers/seqid", "/isr_change_notification", "/latest_producer_id_block",
                    "/log_dir_event_notification", "/config/topics", "/config/clients", "/config/users",
                    "/config/brokers", "/config/ips")


def _dump(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def uuid_to_str(raw: bytes) -> str:
    """Kafka's Uuid.toString: base64url without padding (22 characters)."""
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def uuid_from_str(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}/state"


def cluster_id_json(cluster_id: str) -> bytes:
    return _dump({"version": "1", "id": cluster_id})


# A broker endpoint: (listener name, security protocol, host, port).
Endpoint = tuple[str, str, str, int]
# SecurityProtocol ids, as UpdateMetadata carries them.
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


def broker_registration_json(endpoints: list[Endpoint], timestamp_ms: int, rack: str | None) -> bytes:
    """BrokerInfo.toJsonBytes (version 5): every advertised endpoint and its protocol; `host` and
    `port` are the first PLAINTEXT endpoint's (null and -1 without one), for pre-0.10 readers."""
    plaintext = next((e for e in endpoints if e[1] == "PLAINTEXT"), None)
    reg: dict[str, Any] = {"features": {}, "listener_security_protocol_map": {e[0]: e[1] for e in endpoints},
                           "endpoints": [f"{e[0]}://{_host_port(e[2], e[3])}" for e in endpoints], "jmx_port": -1}
    if rack is not None:
        reg["rack"] = rack
    reg.update(port=plaintext[3] if plaintext else -1, host=plaintext[2] if plaintext else None, version=5,
               timestamp=str(timestamp_ms))
    return _dump(reg)


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass(frozen=True)
class BrokerInfo:
    """A live broker. host/port: where kafkasim's brokers reach it (its PLAINTEXT listener, the
    inter-broker one); endpoints: every listener it advertises, for clients of each listener."""

    broker_id: int
    host: str
    port: int
    rack: str | None
    endpoints: tuple[Endpoint, ...] = ()

    def endpoint(self, listener: str) -> tuple[str, int] | None:
        """(host, port) of the named listener (Kafka's Broker.node(listenerName)); a broker
        known without its endpoints (a LeaderAndIsr live leader) has only host/port."""
        if not self.endpoints:
            return self.host, self.port
        return next(((e[2], e[3]) for e in self.endpoints if e[0] == listener), None)


def parse_broker_registration(broker_id: int, data: bytes) -> BrokerInfo:
    reg = json.loads(data)
    protocols = reg.get("listener_security_protocol_map") or {}
    endpoints: list[Endpoint] = []
    for text in reg.get("endpoints") or []:
        name, _, hostport = text.partition("://")
        host, _, port_s = hostport.rpartition(":")
        endpoints.append((name, protocols.get(name, name), host.strip("[]"), int(port_s)))
    inter = next((e for e in endpoints if e[0] == "PLAINTEXT"), None) or \
        next((e for e in endpoints if e[1] == "PLAINTEXT"), None) or (endpoints[0] if endpoints else None)
    host, port = (inter[2], inter[3]) if inter is not None else (reg.get("host"), reg.get("port"))
    return BrokerInfo(broker_id, host or "", int(port if port is not None else -1), reg.get("rack"),
                      tuple(endpoints))


def topic_assignment_json(assignment: dict[int, list[int]], topic_id: str) -> bytes:
    return _dump({"partitions": {str(p): r for p, r in sorted(assignment.items())}, "topic_id": topic_id,
                  "adding_replicas": {}, "removing_replicas": {}, "version": 3})


def parse_topic_assignment(data: bytes) -> tuple[dict[int, list[int]], str | None]:
    obj = json.loads(data)
    return {int(p): list(r) for p, r in obj["partitions"].items()}, obj.get("topic_id")


def partition_state_json(leader: int, leader_epoch: int, isr: list[int], controller_epoch: int) -> bytes:
    return _dump({"controller_epoch": controller_epoch, "leader": leader, "version": 1,
                  "leader_epoch": leader_epoch, "isr": isr})


@dataclass(frozen=True)
class PartitionState:
    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int


def parse_partition_state(data: bytes) -> PartitionState:
    obj = json.loads(data)
    return PartitionState(obj["leader"], obj["leader_epoch"], list(obj["isr"]), obj["controller_epoch"])


def parse_controller(data: bytes) -> int:
    return int(json.loads(data)["brokerid"])


def controller_json(broker_id: int, timestamp_ms: int) -> bytes:
    return _dump({"version": 2, "brokerid": broker_id, "timestamp": str(timestamp_ms), "kraftControllerEpoch": -1})


def topic_config_json(config: dict[str, str]) -> bytes:
    return _dump({"version": 1, "config": config})


# ---------------------------------------------------------------- cluster control plane (the controller)
# Checked against a real 3-broker Kafka 3.9.1 cluster (`realkafka up DIR --brokers 3`):
#
#   /brokers/seqid                              ""  (its data version is the broker id sequence)
#   /brokers/topics/<t>/partitions/<p>/state    {"controller_epoch":1,"leader":0,"version":1,"leader_epoch":1,
#                                                "isr":[0,2]}  (+ "leader_recovery_state":1 while RECOVERING)
#   /isr_change_notification/isr_change_<seq>   {"version":1,"partitions":[{"topic":"t","partition":0}]}
#   /log_dir_event_notification/log_dir_event_<seq>   {"version":1,"broker":1,"event":1}
#   /admin/delete_topics/<t>                    ""  (empty: the mark)
#   /admin/reassign_partitions                  {"version":1,"partitions":
#                                                 [{"topic":"t","partition":0,"replicas":[1,2]}]}
#   /admin/preferred_replica_election           {"version":1,"partitions":[{"topic":"t","partition":0}]}
#   /feature                                    {"features":{},"version":2,"status":1}
#
# Kafka 3.9 (inter.broker.protocol.version 3.9) changes an ISR with AlterPartition to the
# controller, which writes the state znode; /isr_change_notification is what brokers with
# IBP < 2.7 write instead (the controller still processes it).
ADMIN_REASSIGN_PARTITIONS = "/admin/reassign_partitions"
ADMIN_PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
LOG_DIR_FAILURE_EVENT = 1
FEATURE = "/feature"
RESERVED_BROKER_MAX_ID = 1000        # reserved.broker.max.id
LEADER_RECOVERY_RECOVERED, LEADER_RECOVERY_RECOVERING = 0, 1


def partition_state_json_full(leader: int, leader_epoch: int, isr: list[int], controller_epoch: int,
                              leader_recovery_state: int = LEADER_RECOVERY_RECOVERED) -> bytes:
    """TopicPartitionStateZNode.encode: leader_recovery_state only while not RECOVERED."""
    state: dict[str, Any] = {"controller_epoch": controller_epoch, "leader": leader, "version": 1,
                             "leader_epoch": leader_epoch, "isr": isr}
    if leader_recovery_state != LEADER_RECOVERY_RECOVERED:
        state["leader_recovery_state"] = leader_recovery_state
    return _dump(state)


def parse_leader_recovery_state(data: bytes) -> int:
    return int(json.loads(data).get("leader_recovery_state", LEADER_RECOVERY_RECOVERED))


def topic_assignment_json_full(assignment: dict[int, list[int]], topic_id: str, adding: dict[int, list[int]],
                               removing: dict[int, list[int]]) -> bytes:
    """TopicZNode.encode with a reassignment in flight (adding/removing replicas per partition)."""
    return _dump({"partitions": {str(p): r for p, r in sorted(assignment.items())}, "topic_id": topic_id,
                  "adding_replicas": {str(p): r for p, r in sorted(adding.items()) if r},
                  "removing_replicas": {str(p): r for p, r in sorted(removing.items()) if r}, "version": 3})


def parse_topic_assignment_full(data: bytes) -> tuple[dict[int, list[int]], str | None, dict[int, list[int]],
                                                       dict[int, list[int]]]:
    obj = json.loads(data)
    parts = {int(p): list(r) for p, r in obj["partitions"].items()}
    adding = {int(p): list(r) for p, r in (obj.get("adding_replicas") or {}).items()}
    removing = {int(p): list(r) for p, r in (obj.get("removing_replicas") or {}).items()}
    return parts, obj.get("topic_id"), adding, removing


def partitions_json(partitions: list[tuple[str, int]]) -> bytes:
    """IsrChangeNotificationSequenceZNode / PreferredReplicaElectionZNode: version 1 + partitions."""
    return _dump({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})


def parse_partitions_json(data: bytes) -> list[tuple[str, int]]:
    if not data:
        return []
    return [(str(x["topic"]), int(x["partition"])) for x in json.loads(data).get("partitions", [])]


def log_dir_event_json(broker_id: int) -> bytes:
    return _dump({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT})


def parse_log_dir_event(data: bytes) -> int:
    return int(json.loads(data)["broker"])


def reassignment_json(reassignments: dict[tuple[str, int], list[int]]) -> bytes:
    return _dump({"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": r}
                                               for (t, p), r in sorted(reassignments.items())]})


def parse_reassignment_json(data: bytes) -> dict[tuple[str, int], list[int]]:
    if not data:
        return {}
    return {(str(x["topic"]), int(x["partition"])): [int(b) for b in x["replicas"]]
            for x in json.loads(data).get("partitions", [])}


def feature_json() -> bytes:
    """FeatureZNode with versioning enabled and no finalized features (a fresh 3.9 ZK cluster)."""
    return _dump({"features": {}, "version": 2, "status": 1})
