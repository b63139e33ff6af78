"""SocketServer: accepts connections and runs each one's request loop.

Kafka processes one request per connection at a time and answers in order (it mutes the
channel while a request is in flight); the loop below does exactly that by awaiting each
handler before reading the next frame. Bad input closes that one connection, as Kafka does:
a frame above socket.request.max.bytes, an unknown api key, a malformed header or body, or an
unsupported version of any API but ApiVersions — which instead gets Kafka's KIP-511 answer
(error 35 in a v0 body listing the supported ApiVersions range).
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

from kafkasim.broker.connection_quotas import ConnectionQuotas
from kafkasim.broker.request_context import RequestContext
from kafkasim.protocol import api as A
from kafkasim.protocol.errors import ProtocolError
from kafkasim.protocol.framing import api_versions_unsupported_response, parse_request_frame, peek_request_ids
from kafkasim.protocol.messages.headers import ResponseHeader
from kafkasim.runtime.api import ConnectionClosed, FrameTooLarge, Future, NetworkError, NodeRuntime, Server, Stream
from kafkasim.storage.file_records import FileRecords

if TYPE_CHECKING:
    from kafkasim.broker.config import BrokerConfig
    from kafkasim.broker.kafka_apis import KafkaApis


_SIZE = struct.Struct(">i")


class _IdleReaper:
    """connections.max.idle.ms: close a connection with no request for that long. One timer per
    connection, re-armed lazily, so the request path only stores a timestamp."""

    def __init__(self, rt: NodeRuntime, stream: Stream, idle_ms: int) -> None:
        self.rt, self.stream, self.idle_ms = rt, stream, idle_ms
        self.last = rt.monotonic_ms()
        self.in_flight = False
        self.timer = rt.call_later(idle_ms, self._check) if idle_ms > 0 else None

    def busy(self) -> None:
        self.in_flight = True

    def touch(self) -> None:
        self.in_flight = False
        self.last = self.rt.monotonic_ms()

    def _check(self) -> None:
        quiet = self.rt.monotonic_ms() - self.last
        if not self.in_flight and quiet >= self.idle_ms:
            self.rt.trace("connection_closed", peer=list(self.stream.peer), reason="idle")
            self.stream.close()
            return
        self.timer = self.rt.call_later(max(1.0, self.idle_ms - quiet), self._check)

    def stop(self) -> None:
        if self.timer is not None:
            self.timer.cancel()


class SocketServer:
    """Built before the components that need its bound port; bound by start(); requests are
    read only once enable_request_processing() hands it the KafkaApis (built last, as Kafka's
    startup builds its request handler pool): until then a connection waits."""

    def __init__(self, rt: NodeRuntime, config: BrokerConfig) -> None:
        self.rt = rt
        self.host, self.port = config.host, config.port
        self.request_max_bytes = config.socket_request_max_bytes        # socket.request.max.bytes
        self.connections_max_idle_ms = config.connections_max_idle_ms   # connections.max.idle.ms
        self.connection_quotas = ConnectionQuotas.of(rt, config)
        self.listener: Server | None = None
        self.connections = 0
        self._apis: Future[KafkaApis] = rt.future()  # resolved by enable_request_processing()

    def bound_port(self) -> int:
        """The listener's port (the configured one until bound: port 0 binds any)."""
        return self.listener.port if self.listener is not None else self.port

    def enable_request_processing(self, apis: KafkaApis) -> None:
        self._apis.set_result(apis)

    async def start(self) -> int:
        self.listener = await self.rt.net.serve(self.host, self.port, self.handle_connection)
        return self.listener.port

    def stop(self) -> None:
        if self.listener is not None:
            self.listener.close()

    async def handle_connection(self, stream: Stream) -> None:
        address = str(stream.peer[0]) if stream.peer else ""
        admitted = await self.connection_quotas.inc(address)  # max.connections, then max.connections.per.ip
        self.connections += 1
        try:
            if not admitted:
                self.rt.trace("connection_closed", peer=list(stream.peer), reason="max.connections.per.ip")
                return
            apis = await self._apis
            await self._serve(stream, apis)
        except (ConnectionClosed, NetworkError):
            pass  # the client went away; nothing of theirs is pending
        finally:
            self.connections -= 1
            self.connection_quotas.dec(address)
            stream.close()

    async def _serve(self, stream: Stream, apis: KafkaApis) -> None:
        rt = self.rt
        max_bytes = self.request_max_bytes
        idle = _IdleReaper(rt, stream, self.connections_max_idle_ms)
        try:
            while True:
                try:
                    frame = await stream.read_frame(max_bytes)
                except FrameTooLarge as exc:
                    rt.trace("connection_closed", peer=list(stream.peer), reason=str(exc))
                    return
                idle.busy()
                reply = await self._process(memoryview(frame), stream, apis)
                idle.touch()
                if reply is False:
                    return
        finally:
            idle.stop()

    async def _process(self, frame: memoryview, stream: Stream, apis: KafkaApis) -> bool:
        rt = self.rt
        try:
            ids = peek_request_ids(frame)
            if not apis.is_supported(ids.api_key, ids.api_version):
                if ids.api_key == A.API_VERSIONS:
                    lo, hi = apis.supported[A.API_VERSIONS]
                    await stream.write(api_versions_unsupported_response(ids.correlation_id, lo, hi))
                    return True
                raise ProtocolError(f"unsupported api key {ids.api_key} version {ids.api_version}")
            header, body = parse_request_frame(frame)
            info = A.api_info(header.request_api_key)
            # Like Kafka's RequestContext.parseRequest, read the fields and ignore trailing bytes:
            # librdkafka 2.16's Metadata v12 carries 3 of them, and Kafka answers it.
            request, _ = info.request.read(body, 0, header.request_api_version)
        except ProtocolError as exc:
            rt.trace("connection_closed", peer=list(stream.peer), reason=f"bad request: {exc}")
            return False
        # The sender rides with the header (RequestContext is a RequestHeader); the listener's
        # authenticator, once there is one, supplies the principal.
        context = RequestContext.of(header, client_address=str(stream.peer[0]) if stream.peer else "")
        response = await apis.handle(context, request)
        if response is not None:
            await write_response(stream, header.request_api_key, header.request_api_version,
                                 header.correlation_id, response)
        return True


async def write_response(stream: Stream, api_key: int, api_version: int, correlation_id: int, body: Any) -> None:
    """Size prefix + response header + body, where the body's records may be FileRecords: bytes
    go out with write(), file regions with sendfile() — in order, and without joining the records
    into a Python buffer."""
    parts: list[Any] = []
    ResponseHeader(correlation_id=correlation_id).write(parts.append, A.response_header_version(api_key, api_version))
    body.write(parts.append, api_version)
    size = sum(p.nbytes if type(p) is memoryview else len(p) for p in parts)
    pending: list[Any] = [_SIZE.pack(size)]
    for p in parts:
        if isinstance(p, FileRecords):
            if pending:
                await stream.write(b"".join(pending))
                pending = []
            for r in p.regions:
                await stream.sendfile(r.fh, r.position, r.size)
        else:
            pending.append(p)
    if pending:
        await stream.write(b"".join(pending))
