"""The transactional producer's hands on its transaction coordinator: FindCoordinator
(key_type 1, the transactional id) and one request/answer loop that follows the coordinator
around, as Kafka's TransactionManager does for its TxnRequestHandlers:

  NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a dropped connection or a timed-out request
      → forget the coordinator, look it up again, resend;
  COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS
      → back off and resend to the same coordinator;
  anything else → the caller's to interpret.

Every resend is bounded by `max_block_ms` (Java's max.block.ms): past it the caller gets
CoordinatorUnreachable, and for an EndTxn that means the outcome is unknown.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafkasim.client.cluster import ClientCluster
from kafkasim.client.connection import BrokerConnection, ClientError
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.find_coordinator import FindCoordinatorRequest
from kafkasim.protocol.primitives import Message
from kafkasim.runtime.api import NetworkError, NodeRuntime, RuntimeTimeout

TRANSACTION_KEY_TYPE = 1
GROUP_KEY_TYPE = 0
REDISCOVER = {E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE, E.REQUEST_TIMED_OUT, E.NETWORK_EXCEPTION}
BACK_OFF = {E.COORDINATOR_LOAD_IN_PROGRESS, E.CONCURRENT_TRANSACTIONS}


class CoordinatorUnreachable(Exception):
    """No definite answer from the coordinator within max.block.ms."""


class CoordinatorClient:
    def __init__(self, rt: NodeRuntime, cluster: ClientCluster, key: str, key_type: int, *,
                 request_timeout_ms: float, retry_backoff_ms: float, max_block_ms: float) -> None:
        self.rt, self.cluster, self.key, self.key_type = rt, cluster, key, key_type
        self.request_timeout_ms, self.retry_backoff_ms, self.max_block_ms = \
            request_timeout_ms, retry_backoff_ms, max_block_ms
        self.node_id = -1
        self._conn: BrokerConnection | None = None

    async def _find(self) -> BrokerConnection:
        conn = await self.cluster.any_connection()
        resp = await conn.request_within(FindCoordinatorRequest(key=self.key, key_type=self.key_type),
                                         self.request_timeout_ms)
        if resp.error_code != E.NONE:
            raise _Retry(int(resp.error_code))
        self.node_id = int(resp.node_id)
        self._conn = await self.cluster.connection(resp.host, resp.port)
        return self._conn

    def forget(self) -> None:
        self._conn, self.node_id = None, -1

    async def call(self, make: Callable[[], Message], code_of: Callable[[Any], int],
                   retry_also: frozenset[int] = frozenset()) -> tuple[int, Any]:
        """(error code, response) of the first answer that is not retriable; `make` builds the
        request anew for each attempt (the producer's epoch may move between attempts)."""
        deadline = self.rt.monotonic_ms() + self.max_block_ms
        last = E.NONE
        while self.rt.monotonic_ms() < deadline:
            try:
                conn = self._conn if self._conn is not None and not self._conn.closed else await self._find()
                resp = await conn.request_within(make(), self.request_timeout_ms)
                code = code_of(resp)
            except _Retry as r:
                code = r.code
            except (NetworkError, RuntimeTimeout, ClientError):
                code = E.NETWORK_EXCEPTION
            if code not in REDISCOVER and code not in BACK_OFF and code not in retry_also:
                return code, resp
            if code != last:  # one event per change of error, not per retry
                self.rt.trace("coordinator_retry", key=self.key, coordinator=self.node_id, error=E.error_name(code))
            if code in REDISCOVER:
                self.forget()
            last = code
            await self.rt.sleep(self.retry_backoff_ms)
        raise CoordinatorUnreachable(f"{self.key}: no answer within {self.max_block_ms} ms "
                                     f"(last error {E.error_name(last if last != E.NONE else E.REQUEST_TIMED_OUT)})")


class _Retry(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code
