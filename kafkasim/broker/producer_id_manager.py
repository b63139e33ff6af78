"""ProducerIdManager (ZooKeeper mode) and the InitProducerId API.

Producer ids come in blocks claimed in ZooKeeper, exactly as Kafka 3.9's `ZkProducerIdManager`
and `ProducerIdBlockZNode` do it, so brokers (ours or Kafka's) sharing a ZooKeeper never hand
out the same id twice:

  /latest_producer_id_block   {"version":1,"broker":<id>,"block_start":"<first>","block_end":"<last>"}

  - block_start and block_end are inclusive and written as JSON *strings*; keys in this order;
  - a block is 1000 ids (`ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE`); the first block is 0..999;
  - claiming a block: read data + znode version; the next block starts at block_end + 1; write
    it with `setData(path, data, version)` — a compare-and-set on the znode version; on a
    BADVERSION someone else claimed one first, so read again and retry. (The znode is created
    empty by every broker at startup, `createTopLevelPaths`; empty data means "no block yet".)

InitProducerId goes to the TransactionCoordinator (kafkasim.broker.transaction), as in Kafka:
without a transactional id (the idempotent producer) it "always blindly accepts the request and
returns a new producerId", epoch 0 — also for KIP-360 epoch-bump requests (v3+ carrying the old
id/epoch); with one, it bumps that id's epoch. A producer id given without an epoch (or the
reverse) is INVALID_REQUEST; PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v4.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.headers import RequestHeader
from kafkasim.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from kafkasim.protocol.primitives import Message
from kafkasim.runtime.api import (
    BadVersionError,
    CoordinationError,
    Future,
    NodeExistsError,
    NodeRuntime,
    NoNodeError,
    ZkClient,
)

if TYPE_CHECKING:
    from kafkasim.broker.api_registry import ApiRegistry
    from kafkasim.broker.transaction.coordinator import TransactionCoordinator

PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
PRODUCER_ID_BLOCK_SIZE = 1000
PRODUCER_ID_BLOCK_VERSION = 1
MAX_PRODUCER_ID = 2**63 - 1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
INIT_PRODUCER_ID_VERSIONS = (0, 5)  # v5 (KIP-890 TV2 signal) only matters for transactional ids


class ProducerIdsExhaustedError(Exception):
    pass


@dataclass(frozen=True)
class ProducerIdsBlock:
    assigned_broker_id: int
    first_producer_id: int
    size: int

    @property
    def last_producer_id(self) -> int:
        return self.first_producer_id + self.size - 1

    @property
    def next_block_first_id(self) -> int:
        return self.first_producer_id + self.size


def producer_id_block_json(block: ProducerIdsBlock) -> bytes:
    """ProducerIdBlockZNode.generateProducerIdBlockJson (compact JSON, Kafka's key order)."""
    return json.dumps({"version": PRODUCER_ID_BLOCK_VERSION, "broker": block.assigned_broker_id,
                       "block_start": str(block.first_producer_id),
                       "block_end": str(block.last_producer_id)}, separators=(",", ":")).encode()


def parse_producer_id_block(data: bytes) -> ProducerIdsBlock:
    obj = json.loads(data)
    start, end = int(obj["block_start"]), int(obj["block_end"])
    return ProducerIdsBlock(int(obj["broker"]), start, end - start + 1)


def next_block(current: ProducerIdsBlock | None, broker_id: int) -> ProducerIdsBlock:
    if current is None:
        return ProducerIdsBlock(broker_id, 0, PRODUCER_ID_BLOCK_SIZE)
    if current.last_producer_id > MAX_PRODUCER_ID - PRODUCER_ID_BLOCK_SIZE:
        raise ProducerIdsExhaustedError("Have exhausted all producerIds.")
    return ProducerIdsBlock(broker_id, current.next_block_first_id, PRODUCER_ID_BLOCK_SIZE)


async def claim_producer_id_block(zk: ZkClient, broker_id: int) -> ProducerIdsBlock:
    """ZkProducerIdManager.getNewProducerIdBlock: read, compute the next block, CAS; retry."""
    while True:
        try:
            data, stat = await zk.get(PRODUCER_ID_BLOCK_PATH)
            missing = False
        except NoNodeError:
            missing = True  # (no await in an except block: kafka_zk_client._get_or_none says why)
        if missing:
            block = next_block(None, broker_id)
            try:
                await zk.create(PRODUCER_ID_BLOCK_PATH, producer_id_block_json(block), makepath=True)
                return block
            except NodeExistsError:
                continue
        block = next_block(parse_producer_id_block(data) if data else None, broker_id)
        try:
            await zk.set(PRODUCER_ID_BLOCK_PATH, producer_id_block_json(block), stat.version)
            return block
        except BadVersionError:
            continue  # another broker claimed a block between our read and write


class ZkProducerIdManager:
    """Hands out producer ids from the block this broker claimed; claims the next block when
    the current one is used up. One claim at a time: concurrent callers wait for it."""

    def __init__(self, rt: NodeRuntime, broker_id: int, zk: ZkClient) -> None:
        self.rt, self.broker_id, self.zk = rt, broker_id, zk
        self.block: ProducerIdsBlock | None = None
        self.next_producer_id = 0
        self._claiming: Future[Any] | None = None

    def _exhausted(self) -> bool:
        return self.block is None or self.next_producer_id > self.block.last_producer_id

    async def generate_producer_id(self) -> int:
        while self._exhausted():
            if self._claiming is not None:
                await self._claiming
                continue
            self._claiming = fut = self.rt.future()
            try:
                self.block = await claim_producer_id_block(self.zk, self.broker_id)
                self.next_producer_id = self.block.first_producer_id
                self.rt.trace("producer_id_block", broker=self.broker_id, first=self.block.first_producer_id,
                              last=self.block.last_producer_id)
            finally:
                self._claiming = None
                fut.set_result(None)
        pid = self.next_producer_id
        self.next_producer_id += 1
        return pid


class InitProducerIdApi:
    def __init__(self, coordinator: TransactionCoordinator) -> None:
        self.coordinator = coordinator

    async def handle(self, header: RequestHeader, req: InitProducerIdRequest) -> Message:
        pid, epoch = req.producer_id, req.producer_epoch
        if (pid == NO_PRODUCER_ID) != (epoch == NO_PRODUCER_EPOCH):
            return self._response(E.INVALID_REQUEST, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        expected = None if pid == NO_PRODUCER_ID else (pid, epoch)
        r = await self.coordinator.handle_init_producer_id(req.transactional_id, req.transaction_timeout_ms, expected)
        error = E.INVALID_PRODUCER_EPOCH if header.request_api_version < 4 and r.error == E.PRODUCER_FENCED else r.error
        return self._response(error, r.producer_id, r.producer_epoch)

    @staticmethod
    def _response(error: int, producer_id: int, epoch: int) -> Message:
        return InitProducerIdResponse(throttle_time_ms=0, error_code=error, producer_id=producer_id,
                                      producer_epoch=epoch)


def producer_id_generator(manager: ZkProducerIdManager) -> Callable[[], Awaitable[tuple[int, int]]]:
    """The coordinator's source of producer ids: (error, id). A ZooKeeper failure is retriable
    for every client (Kafka would say UNKNOWN_SERVER_ERROR)."""
    async def generate() -> tuple[int, int]:
        try:
            return E.NONE, await manager.generate_producer_id()
        except (CoordinationError, ProducerIdsExhaustedError):
            return E.COORDINATOR_NOT_AVAILABLE, NO_PRODUCER_ID
    return generate


def register(apis: ApiRegistry, coordinator: TransactionCoordinator) -> None:
    """Add InitProducerId to the broker's APIs (one call from KafkaApis)."""
    apis.register(A.INIT_PRODUCER_ID, *INIT_PRODUCER_ID_VERSIONS, InitProducerIdApi(coordinator).handle)
