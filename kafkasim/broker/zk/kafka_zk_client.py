"""KafkaZkClient: the broker's reads and writes of Kafka's ZooKeeper layout (see zk_data.py).

Topic creation here is Kafka's AdminZkClient (validate, write the topic config and the
assignment znode); the partition state znodes are the KafkaController's, which reacts to the
/brokers/topics watch. ControllerZkClient holds the controller's own (epoch-fenced) writes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from kafkasim.broker.zk import zk_data as Z
from kafkasim.protocol import errors as E
from kafkasim.runtime.api import (
    BadVersionError,
    CoordinationError,
    NodeExistsError,
    NodeRuntime,
    NoNodeError,
    Watcher,
    ZkClient,
    ZOp,
    ZStat,
)

T = TypeVar("T")

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
            pass
        data, _ = await self.zk.get(Z.CLUSTER_ID)
        return str(json.loads(data)["id"])

    async def register_broker(self, broker_id: int, endpoints: list[Z.Endpoint], rack: str | None,
                              retry_ms: float = 1000.0) -> int:
        """Create /brokers/ids/<id>; returns the broker epoch (the znode's czxid, KIP-380).
        After a crash the previous incarnation's ephemeral znode lives until its session
        expires. Kafka's checkedEphemeralCreate then throws NodeExistsException ("owner does not
        match current session"), the startup fails and the broker's supervisor starts it again;
        this waits and retries every `retry_ms` instead, which comes to the same: the broker
        registers shortly after its old session expires (a znode our own session owns is
        success)."""
        data = Z.broker_registration_json(endpoints, self.rt.now_ms(), rack)
        path = f"{Z.BROKER_IDS}/{broker_id}"
        while True:
            try:
                await self.zk.create(path, data, ephemeral=True)
            except NodeExistsError:
                pass
            st = await self.zk.exists(path)
            if st is not None and st.ephemeral_owner == self.zk.session_id:
                return st.czxid
            self.rt.trace("broker_registration_waiting", broker_id=broker_id, owner=st.ephemeral_owner if st else 0)
            await self.rt.sleep(retry_ms)

    async def generate_broker_sequence_id(self) -> int:
        """Broker id generation (broker.id.generation.enable): bump /brokers/seqid's data
        version; the id is reserved.broker.max.id + that version."""
        try:
            await self.zk.create(Z.BROKER_SEQID, b"", makepath=True)
        except NodeExistsError:
            pass
        st = await self.zk.set(Z.BROKER_SEQID, b"")
        return Z.RESERVED_BROKER_MAX_ID + st.version

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
            return epoch
        except NoNodeError:
            pass
        await self.zk.create(Z.CONTROLLER_EPOCH, b"1")
        return 1

    async def topics(self) -> list[str]:
        return await self.zk.get_children(Z.BROKER_TOPICS)

    async def topic_assignment(self, topic: str) -> TopicAssignment | None:
        try:
            data, _ = await self.zk.get(Z.topic_path(topic))
        except NoNodeError:
            return None
        parts, topic_id = Z.parse_topic_assignment(data)
        return TopicAssignment(topic, topic_id or "", parts)

    async def partition_state(self, topic: str, partition: int) -> Z.PartitionState | None:
        try:
            data, _ = await self.zk.get(Z.partition_state_path(topic, partition))
        except NoNodeError:
            return None
        return Z.parse_partition_state(data)

    async def create_topic(self, name: str, assignment: dict[int, list[int]],
                           config: dict[str, str]) -> TopicAssignment:
        """AdminZkClient.createTopicWithAssignment: the topic config, then the assignment znode
        (with a new topic id). The controller, watching /brokers/topics, does the rest."""
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
        return TopicAssignment(name, topic_id, assignment)


# ==================================================================== the controller's znodes
class ControllerMovedException(Exception):
    """A write fenced by the /controller_epoch zkVersion check: another controller took over."""


async def gather(rt: NodeRuntime, coros: list[Coroutine[Any, Any, T]]) -> list[T | CoordinationError]:
    """Run independent ZooKeeper operations pipelined (Kafka sends them asynchronously and
    waits for all); results in the order given. An exception is returned in place, so one
    failing partition does not hide the others."""
    tasks = [rt.spawn(_capture(c), name="zk op") for c in coros]
    results = [await t for t in tasks]
    for r in results:
        if isinstance(r, Exception) and not isinstance(r, CoordinationError):
            raise r  # ControllerMovedException, NodeDead, ...: not one partition's problem
    return results


async def _capture(coro: Coroutine[Any, Any, T]) -> Any:
    try:
        return await coro
    except Exception as exc:  # handed to gather: a task's unawaited exception would be lost
        return exc


class ControllerZkClient(KafkaZkClient):
    """KafkaZkClient's controller half. Every write the controller makes is a multi with a
    check of /controller_epoch's zkVersion first, so a controller that lost its election (a
    "zombie" that has not noticed yet) cannot change anything: its write fails and it resigns."""

    # ---------------------------------------------------------------- election
    async def register_controller_and_increment_epoch(self, broker_id: int) -> tuple[int, int]:
        """(new epoch, its zkVersion), or ControllerMovedException if another broker won."""
        got = await _get_or_none(self.zk, Z.CONTROLLER_EPOCH)
        if got is None:
            try:
                await self.zk.create(Z.CONTROLLER_EPOCH, b"0")
            except NodeExistsError:
                pass
            got = await self.zk.get(Z.CONTROLLER_EPOCH)
        data, st = got
        epoch = int(data) + 1
        try:
            results = await self.zk.multi([
                ZOp("create", Z.CONTROLLER, Z.controller_json(broker_id, self.rt.now_ms()), ephemeral=True),
                ZOp("set", Z.CONTROLLER_EPOCH, str(epoch).encode(), version=st.version)])
            return epoch, results[1].version
        except (NodeExistsError, BadVersionError) as exc:
            lost: Exception = exc
        # Our own /controller from a request that timed out but went through counts as a win.
        current = await _get_or_none(self.zk, Z.CONTROLLER)
        current_epoch = await _get_or_none(self.zk, Z.CONTROLLER_EPOCH) if current is not None else None
        if current is None or current_epoch is None:
            raise ControllerMovedException("controller moved during the election") from lost
        (cdata, cst), (edata, est) = current, current_epoch
        if Z.parse_controller(cdata) == broker_id and cst.ephemeral_owner == self.zk.session_id:
            return int(edata), est.version
        raise ControllerMovedException(f"broker {Z.parse_controller(cdata)} is controller") from lost

    async def get_controller_id(self, watch: Watcher | None = None) -> int:
        got = await _get_or_none(self.zk, Z.CONTROLLER, watch)
        if got is not None:
            return Z.parse_controller(got[0])
        if watch is not None:
            await self.zk.exists(Z.CONTROLLER, watch=watch)
        return -1

    async def get_controller_epoch(self) -> tuple[int, int] | None:
        try:
            data, st = await self.zk.get(Z.CONTROLLER_EPOCH)
        except NoNodeError:
            return None
        return int(data), st.version

    async def delete_controller(self, epoch_zk_version: int) -> None:
        try:
            await self._checked(epoch_zk_version, [ZOp("delete", Z.CONTROLLER)])
        except NoNodeError:
            pass

    async def _checked(self, epoch_zk_version: int, ops: list[ZOp]) -> list[Any]:
        """multi(check /controller_epoch version, ops...): raises ControllerMovedException when the
        check fails, else the operation's own error."""
        try:
            return (await self.zk.multi([ZOp("check", Z.CONTROLLER_EPOCH, version=epoch_zk_version)] + ops))[1:]
        except BadVersionError as exc:
            failed = exc
        current = await self.get_controller_epoch()
        if current is None or current[1] != epoch_zk_version:
            raise ControllerMovedException(
                f"controller epoch zkVersion is {current[1] if current else None}, not {epoch_zk_version}") from failed
        raise failed

    # ---------------------------------------------------------------- brokers
    async def get_all_broker_and_epochs(self) -> dict[int, tuple[Z.BrokerInfo, int]]:
        out: dict[int, tuple[Z.BrokerInfo, int]] = {}
        for child in await self.zk.get_children(Z.BROKER_IDS):
            try:
                data, st = await self.zk.get(f"{Z.BROKER_IDS}/{child}")
            except NoNodeError:
                continue
            out[int(child)] = (Z.parse_broker_registration(int(child), data), st.czxid)
        return out

    # ---------------------------------------------------------------- topics and partitions
    async def get_all_topics(self, watch: Watcher | None = None) -> list[str]:
        return await self.zk.get_children(Z.BROKER_TOPICS, watch=watch)

    async def get_full_assignment(self, topic: str, watch: Watcher | None = None
                                  ) -> tuple[str, dict[int, tuple[list[int], list[int], list[int]]], int] | None:
        """(topic id, {partition: (replicas, adding, removing)}, znode version) or None."""
        got = await _get_or_none(self.zk, Z.topic_path(topic), watch)
        if got is None:
            if watch is not None:
                await self.zk.exists(Z.topic_path(topic), watch=watch)
            return None
        data, st = got
        parts, topic_id, adding, removing = Z.parse_topic_assignment_full(data)
        return topic_id or "", {p: (r, adding.get(p, []), removing.get(p, [])) for p, r in parts.items()}, st.version

    async def set_topic_assignment(self, topic: str, topic_id: str,
                                   assignment: dict[int, tuple[list[int], list[int], list[int]]],
                                   epoch_zk_version: int, expected_version: int = -1) -> None:
        data = Z.topic_assignment_json_full({p: a[0] for p, a in assignment.items()}, topic_id,
                                            {p: a[1] for p, a in assignment.items()},
                                            {p: a[2] for p, a in assignment.items()})
        await self._checked(epoch_zk_version, [ZOp("set", Z.topic_path(topic), data, version=expected_version)])

    async def get_partition_state_raw(self, topic: str, partition: int) -> tuple[bytes, int] | None:
        try:
            data, st = await self.zk.get(Z.partition_state_path(topic, partition))
        except NoNodeError:
            return None
        return data, st.version

    async def create_partition_states(self, states: dict[tuple[str, int], bytes], epoch_zk_version: int
                                      ) -> dict[tuple[str, int], BaseException | None]:
        """createTopicPartitionStatesRaw: the partitions/<p> parents, then each state znode in
        a checked multi. Returns each partition's error (None when created)."""
        for topic in sorted({t for t, _ in states}):
            await _create_if_missing(self.zk, f"{Z.topic_path(topic)}/partitions")
        await gather(self.rt, [_create_if_missing(self.zk, f"{Z.topic_path(t)}/partitions/{p}")
                               for t, p in sorted(states)])
        results = await gather(self.rt, [self._checked(epoch_zk_version, [ZOp("create", Z.partition_state_path(t, p),
                                                                                data)])
                                         for (t, p), data in sorted(states.items())])
        out: dict[tuple[str, int], BaseException | None] = {}
        for tp, r in zip(sorted(states), results, strict=True):
            if isinstance(r, ControllerMovedException):
                raise r
            out[tp] = r if isinstance(r, BaseException) else None
        return out

    async def update_partition_states(self, states: dict[tuple[str, int], tuple[bytes, int]],
                                      epoch_zk_version: int) -> dict[tuple[str, int], BaseException | int]:
        """Conditional sets (expected zkVersion = the partition epoch): each partition's new
        zkVersion, or its error (BadVersionError: someone else changed it — re-read and retry)."""
        results = await gather(self.rt, [self._checked(epoch_zk_version, [ZOp("set", Z.partition_state_path(t, p),
                                                                                data, version=v)])
                                         for (t, p), (data, v) in sorted(states.items())])
        out: dict[tuple[str, int], BaseException | int] = {}
        for tp, r in zip(sorted(states), results, strict=True):
            if isinstance(r, ControllerMovedException):
                raise r
            out[tp] = r if isinstance(r, BaseException) else int(r[0].version)
        return out

    async def get_topic_configs(self, topic: str) -> dict[str, str]:
        try:
            data, _ = await self.zk.get(f"{Z.CONFIG_TOPICS}/{topic}")
        except NoNodeError:
            return {}
        return {str(k): str(v) for k, v in (json.loads(data or b"{}").get("config") or {}).items()}

    async def delete_topic_znodes(self, topic: str, epoch_zk_version: int) -> None:
        """TopicDeletionManager.completeDeleteTopic: /brokers/topics/<t> (children first, each a
        checked delete), /config/topics/<t>, then the /admin/delete_topics mark."""
        await self._delete_recursive(Z.topic_path(topic), epoch_zk_version)
        for path in (f"{Z.CONFIG_TOPICS}/{topic}", f"{Z.ADMIN_DELETE_TOPICS}/{topic}"):
            try:
                await self._checked(epoch_zk_version, [ZOp("delete", path)])
            except NoNodeError:
                pass

    async def _delete_recursive(self, path: str, epoch_zk_version: int) -> None:
        try:
            children = await self.zk.get_children(path)
        except NoNodeError:
            return
        for child in children:
            await self._delete_recursive(f"{path}/{child}", epoch_zk_version)
        try:
            await self._checked(epoch_zk_version, [ZOp("delete", path)])
        except NoNodeError:
            pass

    # ---------------------------------------------------------------- notifications and admin paths
    async def get_children_sorted(self, path: str, watch: Watcher | None = None) -> list[str]:
        try:
            return await self.zk.get_children(path, watch=watch)
        except NoNodeError:
            return []

    async def get_data(self, path: str, watch: Watcher | None = None) -> bytes | None:
        """A node's data (None if absent); with a watch, it fires on creation too."""
        got = await _get_or_none(self.zk, path, watch)
        if got is not None:
            return got[0]
        if watch is not None and await self.zk.exists(path, watch=watch) is not None:
            return await self.get_data(path, watch)
        return None

    async def delete_checked(self, path: str, epoch_zk_version: int) -> None:
        try:
            await self._checked(epoch_zk_version, [ZOp("delete", path)])
        except NoNodeError:
            pass

    async def set_or_create_checked(self, path: str, data: bytes, epoch_zk_version: int) -> None:
        try:
            await self._checked(epoch_zk_version, [ZOp("set", path, data)])
            return
        except NoNodeError:
            pass
        await self._checked(epoch_zk_version, [ZOp("create", path, data)])


async def _get_or_none(zk: ZkClient, path: str, watch: Watcher | None = None) -> tuple[bytes, ZStat] | None:
    """zk.get, None for a missing node. Code compiled by mypyc (the native build) must not await
    inside an `except` block: a compiled coroutine suspended there leaves the thread's handled
    exception set, and for good when its task is never resumed (a crashed node's), and every
    earlier run's world then stayed alive in a sweep worker. tests/runtime/test_native.py scans
    for it."""
    try:
        return await zk.get(path, watch=watch)
    except NoNodeError:
        return None


async def _create_if_missing(zk: ZkClient, path: str) -> None:
    try:
        await zk.create(path, b"")
    except NodeExistsError:
        pass
