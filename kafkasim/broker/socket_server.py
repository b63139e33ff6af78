"""SocketServer: accepts connections and runs each one's request loop.

Kafka processes one request per connection at a time and answers in order (it mutes the
channel while a request is in flight); the loop below does exactly that by awaiting each
handler before reading the next frame. Bad input closes that one connection, as Kafka does:
a frame above socket.request.max.bytes, an unknown api key, a malformed header or body, or an
unsupported version of any API but ApiVersions — which instead gets Kafka's KIP-511 answer
(error 35 in a v0 body listing the supported ApiVersions range).

Listeners: one acceptor per entry of `listeners` (kafkasim's host/port stand for
`PLAINTEXT://host:port` when it is unset), each with its security protocol: SSL and SASL_SSL
streams come TLS-wrapped from the runtime (the simulated world marks them instead); on SASL
listeners a SaslAuthenticator (kafkasim.broker.security) sees every frame until the connection
has authenticated. Each request carries its connection's principal, listener and protocol in its
RequestContext: `User:<SASL name>`, `User:<certificate subject>` on SSL with a client
certificate, else `User:ANONYMOUS`.
"""

from __future__ import annotations

import functools
import struct
from typing import TYPE_CHECKING, Any

from kafkasim.broker.connection_quotas import ConnectionQuotas
from kafkasim.broker.request_context import ANONYMOUS, KafkaPrincipal, RequestContext
from kafkasim.broker.request_faults import RequestFaults
from kafkasim.broker.security.authenticator import SaslAuthenticator
from kafkasim.broker.security.credentials import no_credentials
from kafkasim.broker.security.listeners import listeners_of
from kafkasim.broker.security.scram import CredentialLookup
from kafkasim.broker.security.settings import ListenerSecurity, security_of
from kafkasim.broker.zk.zk_data import Endpoint
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


class _Connection:
    """What a connection's requests carry: its listener and, once known, its principal."""

    def __init__(self, security: ListenerSecurity, stream: Stream, auth: SaslAuthenticator | None) -> None:
        self.security, self.stream, self.auth = security, stream, auth
        # SSL: the client certificate's subject (DefaultKafkaPrincipalBuilder); SASL: set on login.
        self.tls_principal = KafkaPrincipal("User", stream.peer_subject) if stream.peer_subject else ANONYMOUS

    @property
    def principal(self) -> KafkaPrincipal:
        if self.auth is not None and self.auth.principal is not None:
            return self.auth.principal
        return self.tls_principal if self.auth is None else ANONYMOUS


class SocketServer:
    """Built before the components that need its bound port; bound by start(); requests are
    read only once enable_request_processing() hands it the KafkaApis (built last, as Kafka's
    startup builds its request handler pool): until then a connection waits."""

    def __init__(self, rt: NodeRuntime, config: BrokerConfig, request_faults: RequestFaults | None = None,
                 credentials: CredentialLookup = no_credentials) -> None:
        self.rt = rt
        self.request_faults = request_faults if request_faults is not None else RequestFaults(rt)
        self.host, self.port = config.host, config.port
        self.request_max_bytes = config.socket_request_max_bytes        # socket.request.max.bytes
        self.connections_max_idle_ms = config.connections_max_idle_ms   # connections.max.idle.ms
        self.connection_quotas = ConnectionQuotas.of(rt, config)
        self.failed_authentication_delay_ms = config.connection_failed_authentication_delay_ms
        self.listener_config = listeners_of(config)
        self.securities = [security_of(config, e) for e in self.listener_config.bound]
        self.credentials = credentials   # SCRAM: (user, mechanism) -> ZooKeeper's credential
        self.listeners: dict[str, Server] = {}
        self.listener: Server | None = None   # the inter-broker listener's acceptor
        self.connections = 0
        self._apis: Future[KafkaApis] = rt.future()  # resolved by enable_request_processing()

    def bound_port(self) -> int:
        """The inter-broker listener's port (the configured one until bound: port 0 binds any)."""
        inter = self.listener_config.inter_broker
        bound = self.listeners.get(inter)
        if bound is not None:
            return bound.port
        return next(e.port for e in self.listener_config.bound if e.listener_name == inter)

    def advertised_endpoints(self) -> list[Endpoint]:
        """What /brokers/ids/<id> and UpdateMetadata carry: each advertised listener, with the
        port its acceptor bound where it was configured as 0, and kafkasim's host where the
        listener names none (Kafka: the machine's canonical host name)."""
        out = []
        for e in self.listener_config.advertised:
            port = self.listeners[e.listener_name].port if e.port == 0 and e.listener_name in self.listeners \
                else e.port
            out.append((e.listener_name, e.security_protocol, e.host or self.host, port))
        return out

    def enable_request_processing(self, apis: KafkaApis) -> None:
        self._apis.set_result(apis)

    async def start(self) -> int:
        for security in self.securities:
            e = security.endpoint
            handler = functools.partial(self.handle_connection, security)
            self.listeners[e.listener_name] = await self.rt.net.serve(e.host or "", e.port, handler, security.tls)
        self.listener = self.listeners[self.listener_config.inter_broker]
        return self.listener.port

    def stop(self) -> None:
        for listener in self.listeners.values():
            listener.close()

    async def handle_connection(self, security: ListenerSecurity, stream: Stream) -> None:
        address = str(stream.peer[0]) if stream.peer else ""
        admitted = await self.connection_quotas.inc(address)  # max.connections, then max.connections.per.ip
        self.connections += 1
        try:
            if not admitted:
                self.rt.trace("connection_closed", peer=list(stream.peer), reason="max.connections.per.ip")
                return
            apis = await self._apis
            auth = SaslAuthenticator(security, self.credentials, self._nonce, self.rt.monotonic_ms) \
                if security.sasl else None
            await self._serve(_Connection(security, stream, auth), apis)
        except (ConnectionClosed, NetworkError):
            pass  # the client went away; nothing of theirs is pending
        finally:
            self.connections -= 1
            self.connection_quotas.dec(address)
            stream.close()

    def _nonce(self) -> str:
        return self.rt.rng("scram-nonce").randbytes(18).hex()

    async def _serve(self, conn: _Connection, apis: KafkaApis) -> None:
        rt, stream = self.rt, conn.stream
        max_bytes = self.request_max_bytes
        idle = _IdleReaper(rt, stream, self.connections_max_idle_ms)
        try:
            while True:
                authenticating = conn.auth is not None and not conn.auth.complete
                try:
                    # While authenticating, SaslServerAuthenticator reads with sasl.server.max.receive.size.
                    frame = await stream.read_frame(conn.security.max_receive_size if authenticating else max_bytes)
                except FrameTooLarge as exc:
                    too_large = exc  # (no await in an except block: kafka_zk_client._get_or_none says why)
                    frame = None
                if frame is None:
                    if authenticating:
                        await self._invalid_sasl_receive(conn, too_large)
                    else:
                        rt.trace("connection_closed", peer=list(stream.peer), reason=str(too_large))
                    return
                idle.busy()
                verdict = await self._authenticate(conn, frame)
                reply = verdict if verdict is not None else await self._process(memoryview(frame), conn, apis)
                idle.touch()
                if reply is False:
                    return
        finally:
            idle.stop()

    async def _invalid_sasl_receive(self, conn: _Connection, exc: FrameTooLarge) -> None:
        """A frame above sasl.server.max.receive.size while authenticating: Kafka's
        SaslAuthenticationException ("Failing SASL authentication due to invalid receive size"),
        so no answer, and the close waits connection.failed.authentication.delay.ms."""
        if self.failed_authentication_delay_ms > 0:
            await self.rt.sleep(self.failed_authentication_delay_ms)
        self.rt.trace("connection_closed", peer=list(conn.stream.peer),
                      reason=f"Failing SASL authentication due to invalid receive size ({exc})")

    async def _authenticate(self, conn: _Connection, frame: bytes) -> bool | None:
        """A SASL connection's frame before (or while re-) authenticating: True/False when the
        authenticator took it (False: close), None when it is an ordinary request."""
        auth = conn.auth
        if auth is None:
            return None
        if auth.complete:
            if len(frame) >= 2 and frame[0:2] == A.SASL_HANDSHAKE.to_bytes(2, "big") and auth.begin_reauthentication():
                self.rt.trace("sasl_reauthentication", peer=list(conn.stream.peer))
            elif auth.expired():
                # KafkaChannel.serverAuthenticationSessionExpired: past the session without re-authenticating.
                self.rt.trace("connection_closed", peer=list(conn.stream.peer), reason="session expired")
                return False
            else:
                return None
        outcome = await auth.receive(frame)
        if outcome.auth_failure and self.failed_authentication_delay_ms > 0:
            await self.rt.sleep(self.failed_authentication_delay_ms)
        if outcome.reply is not None:
            await conn.stream.write(outcome.reply)
        if outcome.close:
            self.rt.trace("connection_closed", peer=list(conn.stream.peer), reason=outcome.reason)
            return False
        if auth.complete:
            self.rt.trace("sasl_authenticated", peer=list(conn.stream.peer), principal=str(auth.principal),
                          mechanism=auth.mechanism, listener=conn.security.endpoint.listener_name)
        return None if outcome.forward else True

    async def _process(self, frame: memoryview, conn: _Connection, apis: KafkaApis) -> bool:
        rt, stream = self.rt, conn.stream
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
        # The sender rides with the header (RequestContext is a RequestHeader).
        endpoint = conn.security.endpoint
        context = RequestContext.of(header, principal=conn.principal, listener_name=endpoint.listener_name,
                                    security_protocol=endpoint.security_protocol,
                                    client_address=str(stream.peer[0]) if stream.peer else "")
        # Request-level faults (broker/request_faults.py): answer with an error, close, or delay.
        fault = self.request_faults.on_request(header.request_api_key, header.request_api_version, request,
                                              endpoint.listener_name)
        if fault.close:
            rt.trace("connection_closed", peer=list(stream.peer), reason=f"fault {fault.fault_id}")
            return False
        response = fault.response if fault.skip_handler else await apis.handle(context, request)
        if fault.delay_ms > 0:
            await rt.sleep(fault.delay_ms)
        if response is not None:
            await write_response(stream, header.request_api_key, header.request_api_version,
                                 header.correlation_id, response)
        throttle_ms = apis.channel_throttle_ms(context)
        if throttle_ms > 0:   # over its quota: the channel stays muted that long (Kafka's ThrottledChannel)
            await rt.sleep(throttle_ms)
        return True


async def write_response(stream: Stream, api_key: int, api_version: int, correlation_id: int, body: Any) -> None:
    """Size prefix + response header + body, where the body's records may be FileRecords: bytes
    go out with write(), file regions with sendfile() — in order, and without joining the records
    into a Python buffer."""
    parts: list[Any] = []
    ResponseHeader(correlation_id=correlation_id).write(parts.append, A.response_header_version(api_key, api_version))
    body.write(parts.append, api_version)
    size = 0
    for p in parts:  # a loop, not sum(genexpr): a response has dozens of parts
        size += p.nbytes if type(p) is memoryview else len(p)
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
