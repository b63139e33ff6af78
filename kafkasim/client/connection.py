"""BrokerConnection: kafkasim's own clients' connection to one broker — the NetworkClient
(kafkasim/client/network_client.py) discovering the broker's versions with ApiVersions, plus
request.timeout.ms handling. The same code drives the simulated workload and the real load
generator.
"""

from __future__ import annotations

from typing import Any

from kafkasim.client.network_client import ClientError, NetworkClient
from kafkasim.protocol import api as A
from kafkasim.protocol.primitives import Message
from kafkasim.runtime.api import NodeRuntime, RuntimeTimeout

__all__ = ["CLIENT_MAX_VERSIONS", "BrokerConnection", "ClientError"]

# The highest version kafkasim's client implements per API.
CLIENT_MAX_VERSIONS: dict[int, int] = {
    A.API_VERSIONS: 3, A.METADATA: 12, A.PRODUCE: 9, A.FETCH: 12, A.LIST_OFFSETS: 7, A.CREATE_TOPICS: 7,
    A.INIT_PRODUCER_ID: 4, A.FIND_COORDINATOR: 3, A.ADD_PARTITIONS_TO_TXN: 3, A.ADD_OFFSETS_TO_TXN: 3,
    A.END_TXN: 3, A.TXN_OFFSET_COMMIT: 3, A.OFFSET_FETCH: 7,
}


class BrokerConnection(NetworkClient):
    def __init__(self, rt: NodeRuntime, host: str, port: int, client_id: str) -> None:
        super().__init__(rt, host, port, client_id, max_versions=CLIENT_MAX_VERSIONS,
                         reader_name=f"client-reader {host}:{port}")
        self._negotiate_timeout_ms = 10000.0

    async def connect(self, timeout_ms: float = 10000) -> None:
        self._negotiate_timeout_ms = timeout_ms
        await super().connect(timeout_ms)

    async def _negotiate(self, version: int) -> None:
        # ApiVersions is a request like any other: Kafka's NetworkClient times it out after
        # request.timeout.ms and disconnects. Without a limit, a broker that lost power between
        # accepting the connection and answering held the client for good.
        await self.within(super()._negotiate(version), self._negotiate_timeout_ms)

    async def request(self, body: Message, expect_response: bool = True) -> Any:
        """At the negotiated version of the body's API."""
        api_key = body.API_KEY
        assert api_key is not None  # every generated request message has one
        return await self.send_at(self.version_for(api_key), body, expect_response)

    async def request_within(self, body: Message, timeout_ms: float) -> Any:
        """request() with request.timeout.ms: on expiry the connection is closed (Kafka's
        NetworkClient disconnects a node whose request timed out), so the next request opens a
        new one instead of queueing behind an answer that will never come (a peer that lost
        power sends no RST)."""
        return await self.within(self.request(body), timeout_ms)

    async def within(self, aw: Any, timeout_ms: float) -> Any:
        try:
            return await self.rt.wait_for(aw, timeout_ms)
        except RuntimeTimeout:
            self.close()
            raise

    def close(self, reason: str = "closed by client") -> None:
        super().close(reason)
