"""KafkaZkClient: the broker's reads and writes of Kafka's ZooKeeper layout (see zk_data.py).

Topic creation here does what Kafka's AdminZkClient does (validate, write the assignment znode
and the topic config) and, since this first broker is its own controller, also what the
controller does on a new topic (partition state znodes with leader, epoch 0 and ISR). The
cluster work moves the second half into KafkaController, reacting to the /brokers/topics watch.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Optional

from kafkasim.broker import zk_data as Z
from kafkasim.protocol import errors as E
from kafkasim.runtime.api import NodeExistsError, NoNodeError, NodeRuntime, ZkClient

LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_LENGTH = 249


class TopicError(Exception):
    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


def validate_topic_name(name: str) -> None:
    if not name or name in (".", ".."):
        raise TopicError(E.INVALID_TOPIC_EXCEPTION, f"topic name {name!r} is illegal")
    if len(name) > MAX_TOPIC_LENGTH:
        raise TopicError(E.INVALID_TOPIC_EXCEPTION, f"topic name is longer than {MAX_TOPIC_LENGTH} characters")
    if not LEGAL_TOPIC.match(name):
        raise TopicError(E.INVALID_TOPIC_EXCEPTION,
                         f"topic name {name!r} contains characters other than ASCII alphanumerics, '.', '_' and '-'")


@dataclass
class TopicAssignment:
    name: str
    topic_id: str
    partitions: dict[int, list[int]]


class KafkaZkClient:
    def __init__(self, rt: NodeRuntime, zk: ZkClient) -> None:
        self.rt, self.zk = rt, zk

    async def create_top_level_paths(self) -> None:
        for path in Z.PERSISTENT_PATHS:
            try:
                await self.zk.create(path, b"", makepath=True)
            except NodeExistsError:
                pass

    async def get_or_create_cluster_id(self, proposed: str) -> str:
        try:
            await self.zk.create(Z.CLUSTER_ID, Z.cluster_id_json(proposed), makepath=True)
            return proposed
        except NodeExistsError:
            data, _ = await self.zk.get(Z.CLUSTER_ID)
            return str(json.loads(data)["id"])

    async def register_broker(self, broker_id: int, host: str, port: int, rack: Optional[str],
                              retry_ms: float = 1000.0) -> None:
        """Create /brokers/ids/<id>. After a crash the previous incarnation's ephemeral znode
        lives until its session expires, so, like Kafka's checkedEphemeralCreate, wait for it to go
        rather than fail (and fail only if our own session already owns it... which is success)."""
        data = Z.broker_registration_json(host, port, self.rt.now_ms(), rack)
        path = f"{Z.BROKER_IDS}/{broker_id}"
        while True:
            try:
                await self.zk.create(path, data, ephemeral=True)
                return
            except NodeExistsError:
                st = await self.zk.exists(path)
                if st is not None and st.ephemeral_owner == self.zk.session_id:
                    return
                self.rt.trace("broker_registration_waiting", broker_id=broker_id, owner=st.ephemeral_owner if st else 0)
                await self.rt.sleep(retry_ms)

    async def live_brokers(self) -> list[Z.BrokerInfo]:
        out = []
        for child in await self.zk.get_children(Z.BROKER_IDS):
            try:
                data, _ = await self.zk.get(f"{Z.BROKER_IDS}/{child}")
            except NoNodeError:
                continue
            out.append(Z.parse_broker_registration(int(child), data))
        return out

    async def try_become_controller(self, broker_id: int) -> int:
        """Elect self if /controller is free; returns the controller epoch, or -1 if another
        broker is controller."""
        try:
            await self.zk.create(Z.CONTROLLER, Z.controller_json(broker_id, self.rt.now_ms()), ephemeral=True)
        except NodeExistsError:
            return -1
        try:
            data, st = await self.zk.get(Z.CONTROLLER_EPOCH)
            epoch = int(data) + 1
            await self.zk.set(Z.CONTROLLER_EPOCH, str(epoch).encode(), st.version)
        except NoNodeError:
            epoch = 1
            await self.zk.create(Z.CONTROLLER_EPOCH, b"1")
        return epoch

    async def topics(self) -> list[str]:
        return await self.zk.get_children(Z.BROKER_TOPICS)

    async def topic_assignment(self, topic: str) -> Optional[TopicAssignment]:
        try:
            data, _ = await self.zk.get(Z.topic_path(topic))
        except NoNodeError:
            return None
        parts, topic_id = Z.parse_topic_assignment(data)
        return TopicAssignment(topic, topic_id or "", parts)

    async def partition_state(self, topic: str, partition: int) -> Optional[Z.PartitionState]:
        try:
            data, _ = await self.zk.get(Z.partition_state_path(topic, partition))
        except NoNodeError:
            return None
        return Z.parse_partition_state(data)

    async def create_topic(self, name: str, assignment: dict[int, list[int]], config: dict[str, str],
                           controller_epoch: int) -> TopicAssignment:
        validate_topic_name(name)
        topic_id = Z.uuid_to_str(self.rt.rng("topic-ids").randbytes(16))
        try:  # a concurrent creation of the same topic may have written it first
            await self.zk.create(f"{Z.CONFIG_TOPICS}/{name}", Z.topic_config_json(config), makepath=True)
        except NodeExistsError:
            pass
        try:
            await self.zk.create(Z.topic_path(name), Z.topic_assignment_json(assignment, topic_id), makepath=True)
        except NodeExistsError as exc:
            raise TopicError(E.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.") from exc
        for p, replicas in sorted(assignment.items()):
            state = Z.partition_state_json(replicas[0], 0, list(replicas), controller_epoch)
            await self.zk.create(Z.partition_state_path(name, p), state, makepath=True)
        return TopicAssignment(name, topic_id, assignment)
