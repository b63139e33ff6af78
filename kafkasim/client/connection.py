"""BrokerConnection: one client connection to one broker, speaking the real wire protocol over
the runtime's streams (the same code drives the simulated workload and the real load
generator).

On connect it negotiates versions as modern clients do: ApiVersions at our highest version; on
error 35 retry at the broker's advertised ApiVersions maximum (KIP-511), then use, per API,
min(our max, broker max) — refusing an API whose ranges do not overlap. Requests may be
pipelined; the broker answers in order, so responses are matched to a FIFO of waiters and the
correlation id is checked.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.framing import encode_request
from kafkasim.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafkasim.protocol.messages.headers import RequestHeader, ResponseHeader
from kafkasim.protocol.primitives import Message
from kafkasim.runtime.api import ConnectionClosed, Future, NetworkError, NodeRuntime, RuntimeTimeout, Stream

# The highest version kafkasim's client implements per API.
CLIENT_MAX_VERSIONS: dict[int, int] = {
    A.API_VERSIONS: 3, A.METADATA: 12, A.PRODUCE: 9, A.FETCH: 12, A.LIST_OFFSETS: 7, A.CREATE_TOPICS: 7,
    A.INIT_PRODUCER_ID: 4,
}
MAX_RESPONSE_BYTES = 100 * 1024 * 1024


class ClientError(Exception):
    pass


class BrokerConnection:
    def __init__(self, rt: NodeRuntime, host: str, port: int, client_id: str) -> None:
        self.rt, self.host, self.port, self.client_id = rt, host, port, client_id
        self.stream: Stream | None = None
        self.versions: dict[int, tuple[int, int]] = {}
        self._next_corr = 0
        self._pending: deque[tuple[int, int, int, Future[Any]]] = deque()
        self._closed = False

    async def connect(self, timeout_ms: float = 10000) -> None:
        self.stream = await self.rt.net.connect(self.host, self.port, timeout_ms)
        self.rt.spawn(self._reader(), name=f"client-reader {self.host}:{self.port}")
        await self._negotiate()

    async def _negotiate(self) -> None:
        version = CLIENT_MAX_VERSIONS[A.API_VERSIONS]
        for _ in range(3):
            req = ApiVersionsRequest(client_software_name="kafkasim", client_software_version="0.1")
            resp: ApiVersionsResponse = await self._send(A.API_VERSIONS, version, req)
            if resp.error_code == E.UNSUPPORTED_VERSION:
                hi = max((k.max_version for k in resp.api_keys if k.api_key == A.API_VERSIONS), default=0)
                version = min(version - 1, hi)
                continue
            if resp.error_code != E.NONE:
                raise ClientError(f"ApiVersions failed with error {resp.error_code}")
            self.versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
            return
        raise ClientError("ApiVersions negotiation failed")

    def version_for(self, api_key: int) -> int:
        ours = CLIENT_MAX_VERSIONS[api_key]
        lo, hi = self.versions.get(api_key, (-1, -1))
        v = min(ours, hi)
        if v < lo or v < 0:
            raise ClientError(f"broker {self.host}:{self.port} supports no usable version of api {api_key}")
        return v

    async def request(self, body: Message, expect_response: bool = True) -> Any:
        api_key = body.API_KEY
        assert api_key is not None  # every generated request message has one
        return await self._send(api_key, self.version_for(api_key), body, expect_response)

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

    async def _send(self, api_key: int, version: int, body: Message, expect_response: bool = True) -> Any:
        if self._closed or self.stream is None:
            raise ConnectionClosed(f"connection to {self.host}:{self.port} is closed")
        self._next_corr += 1
        corr = self._next_corr
        header = RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=corr,
                               client_id=self.client_id)
        fut = self.rt.future()
        if expect_response:
            self._pending.append((corr, api_key, version, fut))
        await self.stream.write(encode_request(header, body))
        if not expect_response:
            return None
        return await fut

    async def _reader(self) -> None:
        assert self.stream is not None
        try:
            while True:
                frame = await self.stream.read_frame(MAX_RESPONSE_BYTES)
                if not self._pending:
                    raise ClientError("response with no request in flight")
                corr, api_key, version, fut = self._pending.popleft()
                mv = memoryview(frame)
                hv = A.response_header_version(api_key, version)
                header, end = ResponseHeader.read(mv, 0, hv)
                if header.correlation_id != corr:
                    raise ClientError(f"correlation id {header.correlation_id} != expected {corr}")
                fut.set_result(A.api_info(api_key).response.decode(mv[end:], version))
        except (NetworkError, ClientError, Exception) as exc:
            self._fail_all(exc if isinstance(exc, NetworkError) else ConnectionClosed(str(exc)))

    def _fail_all(self, exc: BaseException) -> None:
        self._closed = True
        if self.stream is not None:
            self.stream.close()
        while self._pending:
            self._pending.popleft()[3].set_exception(exc)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        self._fail_all(ConnectionClosed("closed by client"))
