"""NetworkClient: one broker-to-broker connection for inter-broker requests — the controller's
LeaderAndIsr/UpdateMetadata/StopReplica (ControllerChannelManager), a follower's Fetch and
OffsetForLeaderEpoch (ReplicaFetcherThread's BrokerBlockingSender), a broker's AlterPartition
and ControlledShutdown to the controller.

Like Kafka's inter-broker NetworkClient (discoverBrokerVersions = false) it sends each request
at the version the caller names — the versions inter.broker.protocol.version 3.9 picks — with
no ApiVersions round trip. Requests are pipelined; responses come back in order and are
matched to a FIFO of waiters (the correlation id is checked). Any failure closes the
connection and fails every request in flight with a NetworkError; callers reconnect.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from kafkasim.protocol import api as A
from kafkasim.protocol.framing import encode_request
from kafkasim.protocol.messages.headers import RequestHeader, ResponseHeader
from kafkasim.protocol.primitives import Message
from kafkasim.runtime.api import ConnectionClosed, Future, NetworkError, NodeRuntime, Stream

MAX_RESPONSE_BYTES = 100 * 1024 * 1024


class NetworkClient:
    def __init__(self, rt: NodeRuntime, host: str, port: int, client_id: str) -> None:
        self.rt, self.host, self.port, self.client_id = rt, host, port, client_id
        self.stream: Stream | None = None
        self._next_corr = 0
        self._pending: deque[tuple[int, int, int, Future[Any]]] = deque()
        self._closed = False

    async def connect(self, timeout_ms: float) -> None:
        self.stream = await self.rt.net.connect(self.host, self.port, timeout_ms)
        self.rt.spawn(self._reader(), name=f"{self.client_id} reader {self.host}:{self.port}")

    @property
    def closed(self) -> bool:
        return self._closed or self.stream is None

    async def send(self, body: Message, version: int, timeout_ms: float) -> Any:
        """Send `body` at `version`; returns the decoded response or raises NetworkError
        (connection lost, or no answer within timeout_ms — then the connection is closed, as
        Kafka's NetworkClient disconnects on a request timeout)."""
        if self.closed:
            raise ConnectionClosed(f"connection to {self.host}:{self.port} is closed")
        assert self.stream is not None
        self._next_corr += 1
        corr = self._next_corr
        api_key = body.API_KEY
        assert api_key is not None
        header = RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=corr,
                               client_id=self.client_id)
        fut = self.rt.future()
        self._pending.append((corr, api_key, version, fut))
        await self.stream.write(encode_request(header, body))
        if await self.rt.wait_first([fut], timeout_ms) is None:
            self._fail_all(NetworkError(f"request to {self.host}:{self.port} timed out after {timeout_ms} ms"))
        return fut.result()

    async def _reader(self) -> None:
        assert self.stream is not None
        try:
            while True:
                frame = await self.stream.read_frame(MAX_RESPONSE_BYTES)
                if not self._pending:
                    raise NetworkError("response with no request in flight")
                corr, api_key, version, fut = self._pending.popleft()
                mv = memoryview(frame)
                header, end = ResponseHeader.read(mv, 0, A.response_header_version(api_key, version))
                if header.correlation_id != corr:
                    raise NetworkError(f"correlation id {header.correlation_id} != expected {corr}")
                fut.set_result(A.api_info(api_key).response.decode(mv[end:], version))
        except NetworkError as exc:
            self._fail_all(exc)
        except Exception as exc:  # a response we cannot decode: drop the connection, as Kafka does
            self._fail_all(NetworkError(f"bad response from {self.host}:{self.port}: {exc}"))

    def _fail_all(self, exc: NetworkError) -> None:
        self._closed = True
        if self.stream is not None:
            self.stream.close()
        while self._pending:
            fut = self._pending.popleft()[3]
            if not fut.done():
                fut.set_exception(exc)

    def close(self) -> None:
        self._fail_all(ConnectionClosed("closed"))
