"""NetworkClient: one connection to one broker, speaking the wire protocol over the runtime's
streams — the one implementation behind kafkasim's own clients (BrokerConnection) and the
broker's inter-broker requests (the controller's LeaderAndIsr/UpdateMetadata/StopReplica, a
follower's Fetch and OffsetForLeaderEpoch, a broker's AlterPartition and ControlledShutdown).

As Kafka's NetworkClient (clients module) it has two modes:
  - `max_versions` given (discoverBrokerVersions = true, what clients do): on connect it sends
    ApiVersions at our highest version; on error 35 it retries at the broker's advertised
    ApiVersions maximum (KIP-511); then each API is used at min(our max, broker max), and an API
    whose ranges do not overlap is refused (ClientError);
  - no `max_versions` (discoverBrokerVersions = false, inter-broker): the caller names each
    request's version — what inter.broker.protocol.version 3.9 picks — with no ApiVersions round
    trip.
Requests are pipelined; the broker answers in order, so responses are matched to a FIFO of
waiters and the correlation id is checked. Any failure closes the connection and fails every
request in flight with a NetworkError (ConnectionClosed for a response we cannot make sense
of); callers reconnect.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from kafkasim.client.channel_security import ChannelSecurity, authenticate
from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.framing import encode_request
from kafkasim.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafkasim.protocol.messages.headers import RequestHeader, ResponseHeader
from kafkasim.protocol.primitives import Message
from kafkasim.runtime.api import ConnectionClosed, Future, NetworkError, NodeRuntime, Stream

MAX_RESPONSE_BYTES = 100 * 1024 * 1024
NEGOTIATION_ATTEMPTS = 3

# (correlation id, api key, version, the waiter's future)
_InFlight = tuple[int, int, int, Future[Any]]


class ClientError(Exception):
    pass


class NetworkClient:
    def __init__(self, rt: NodeRuntime, host: str, port: int, client_id: str, *,
                 max_versions: dict[int, int] | None = None, reader_name: str | None = None,
                 security: ChannelSecurity | None = None) -> None:
        """`security`: TLS and SASL for a secured listener (channel_security.py); None: PLAINTEXT."""
        self.rt, self.host, self.port, self.client_id = rt, host, port, client_id
        self.security = security
        self.max_versions = max_versions
        self.reader_name = reader_name or f"{client_id} reader {host}:{port}"
        self.stream: Stream | None = None
        # What the broker advertised (only with max_versions: discovered on connect).
        self.versions: dict[int, tuple[int, int]] = {}
        self._next_corr = 0
        self._pending: deque[_InFlight] = deque()
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed or self.stream is None

    async def connect(self, timeout_ms: float) -> None:
        security = self.security
        stream = await self.rt.net.connect(self.host, self.port, timeout_ms, security.tls if security else None)
        if security is not None and security.sasl is not None:
            try:   # before the reader: the login's answers are read here
                await authenticate(stream, security.sasl, self.client_id, self.rt.rng("sasl-nonce").randbytes(12).hex())
            except BaseException:
                stream.close()
                raise
        self.stream = stream
        self.rt.spawn(self._reader(stream), name=self.reader_name)
        if self.max_versions is not None:
            await self._negotiate(self.max_versions[A.API_VERSIONS])

    # ---------------------------------------------------------------- versions
    async def _negotiate(self, version: int) -> None:
        for _ in range(NEGOTIATION_ATTEMPTS):
            req = ApiVersionsRequest(client_software_name="kafkasim", client_software_version="0.1")
            resp: ApiVersionsResponse = await self.send_at(version, req)
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
        """min(our max, the broker's max), or ClientError when the ranges do not overlap."""
        ours = (self.max_versions or {}).get(api_key, -1)   # none without max_versions: no discovery
        lo, hi = self.versions.get(api_key, (-1, -1))
        v = min(ours, hi)
        if v < lo or v < 0:
            raise ClientError(f"broker {self.host}:{self.port} supports no usable version of api {api_key}")
        return v

    # ---------------------------------------------------------------- requests
    async def send_at(self, version: int, body: Message, expect_response: bool = True) -> Any:
        """Send `body` at `version` and await its response (None at once when no response is
        expected: a Produce with acks=0). No timeout here: see send() and callers' wait_for."""
        fut = await self._write(version, body, expect_response)
        return await fut if expect_response else None

    async def send(self, body: Message, version: int, timeout_ms: float) -> Any:
        """Send `body` at `version`; returns the decoded response or raises NetworkError
        (connection lost, or no answer within timeout_ms — then the connection is closed, as
        Kafka's NetworkClient disconnects on a request timeout)."""
        fut = await self._write(version, body, True)
        if await self.rt.wait_first([fut], timeout_ms) is None:
            self._fail_all(NetworkError(f"request to {self.host}:{self.port} timed out after {timeout_ms} ms"))
        return fut.result()

    async def _write(self, version: int, body: Message, expect_response: bool) -> Future[Any]:
        """Write the request; the future its response will resolve (queued only if one is expected)."""
        stream = self.stream
        if self._closed or stream is None:
            raise ConnectionClosed(f"connection to {self.host}:{self.port} is closed")
        api_key = body.API_KEY
        assert api_key is not None
        self._next_corr += 1
        corr = self._next_corr
        header = RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=corr,
                               client_id=self.client_id)
        fut: Future[Any] = self.rt.future()
        if expect_response:
            self._pending.append((corr, api_key, version, fut))
        await stream.write(encode_request(header, body))
        return fut

    # ---------------------------------------------------------------- responses
    async def _reader(self, stream: Stream) -> None:
        try:
            while True:
                frame = await stream.read_frame(MAX_RESPONSE_BYTES)
                if not self._pending:
                    raise ClientError("response with no request in flight")
                corr, api_key, version, fut = self._pending.popleft()
                mv = memoryview(frame)
                header, end = ResponseHeader.read(mv, 0, A.response_header_version(api_key, version))
                if header.correlation_id != corr:
                    raise ClientError(f"correlation id {header.correlation_id} != expected {corr}")
                fut.set_result(A.api_info(api_key).response.decode(mv[end:], version))
        except NetworkError as exc:
            self._fail_all(exc)
        except Exception as bad:  # a response we cannot make sense of: drop the connection, as Kafka does
            self._fail_all(ConnectionClosed(f"bad response from {self.host}:{self.port}: {bad}"))

    def _fail_all(self, exc: NetworkError) -> None:
        self._closed = True
        if self.stream is not None:
            self.stream.close()
        while self._pending:
            fut = self._pending.popleft()[3]
            if not fut.done():
                fut.set_exception(exc)

    def close(self, reason: str = "closed") -> None:
        self._fail_all(ConnectionClosed(reason))
