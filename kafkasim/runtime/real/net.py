"""Real TCP streams on asyncio. Errors are translated into the seam's network exceptions so code
above the seam handles one vocabulary in both worlds.

Injected peer faults (the fault control plane's `net_refuse` / `net_stall`), on the connections
this node opens — to other brokers, as the replica fetchers and the controller's channel do —
to given peers ("host:port", all of them when none are named): `refuse` resets the open ones
and refuses new ones (ECONNREFUSED); `stall` lets a connect hang until its timeout and holds
every read and write on the open ones until the fault is healed (a black-holed peer).

TLS: Python's ssl over asyncio's transports, from PEM material (TlsSettings: Kafka's
ssl.keystore.type=PEM keys). A server stream's `peer_subject` is the client certificate's subject
in RFC 2253 form, most specific first, as Java's X500Principal.getName() prints it (Kafka's
SSL principal is `User:` + that name).
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import struct
import tempfile
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kafkasim.runtime.api import (
    ConnectionClosed,
    ConnectionRefused,
    ConnectionReset,
    FileHandle,
    FrameTooLarge,
    Network,
    NodeDead,
    RuntimeTimeout,
    Server,
    Stream,
    StreamHandler,
    TlsSettings,
)

if TYPE_CHECKING:
    from kafkasim.runtime.real.world import RealNode

_SIZE = struct.Struct(">i")
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
_STALL_POLL_S = 0.02


def _same_peer(a: tuple[str, int], b: tuple[str, int]) -> bool:
    return a[1] == b[1] and (a[0] == b[0] or (a[0] in _LOOPBACK and b[0] in _LOOPBACK))


@dataclass
class NetFaults:
    """Active peer faults: fault id -> (mode, peers; None = every peer this node connects to)."""

    rules: dict[str, tuple[str, list[tuple[str, int]] | None]] = field(default_factory=dict)
    injected: int = 0

    def mode_for(self, peer: tuple[str, int]) -> str | None:
        for mode, peers in self.rules.values():
            if peers is None or any(_same_peer(peer, p) for p in peers):
                return mode
        return None


class RealStream(Stream):
    def __init__(self, node: RealNode, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 faults: NetFaults | None = None) -> None:
        self._node, self._r, self._w = node, reader, writer
        self._faults = faults  # set on the connections this node opens: peer faults apply to them
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.local = tuple(writer.get_extra_info("sockname")[:2])
        self.peer = tuple(writer.get_extra_info("peername")[:2])
        self._closed = False
        ssl_object = writer.get_extra_info("ssl_object")
        if ssl_object is not None:
            self.secure = True
            self.peer_subject = rfc2253(ssl_object.getpeercert())

    async def _stall(self) -> None:
        while self._faults is not None and self._faults.mode_for(self.peer) == "stall" and not self._closed:
            await asyncio.sleep(_STALL_POLL_S)

    async def read_exactly(self, n: int) -> bytes:
        self._node.check()
        await self._stall()
        try:
            return await self._r.readexactly(n)
        except asyncio.IncompleteReadError as exc:
            raise ConnectionClosed(f"{self.peer} closed the connection") from exc
        except (ConnectionResetError, BrokenPipeError, ssl.SSLError) as exc:
            # ssl.SSLError: the peer's TLS alert (a certificate it refused) ends the stream too.
            raise ConnectionReset(str(exc)) from exc

    async def read_frame(self, max_bytes: int) -> bytes:
        (size,) = _SIZE.unpack(await self.read_exactly(4))
        if size < 0 or size > max_bytes:
            raise FrameTooLarge(f"frame of {size} bytes (limit {max_bytes})")
        return await self.read_exactly(size)

    async def write(self, data: bytes | bytearray | memoryview) -> None:
        self._node.check()
        await self._stall()
        if self._closed or self._w.is_closing():
            raise ConnectionClosed("write on a closed stream")
        try:
            self._w.write(data)
            await self._w.drain()
        except (ConnectionResetError, BrokenPipeError) as exc:
            raise ConnectionReset(str(exc)) from exc

    async def sendfile(self, fh: FileHandle, offset: int, count: int) -> None:
        """os.sendfile from the page cache straight to the socket (asyncio falls back to
        read + write only where the transport cannot)."""
        self._node.check()
        if self._closed or self._w.is_closing():
            raise ConnectionClosed("sendfile on a closed stream")
        fileobj = getattr(fh, "fileobj", None)
        # TLS: no zero-copy (the bytes are encrypted in user space), and asyncio's read + write
        # fallback does not seek for offset 0 — so read + write here, from `offset`.
        if fileobj is None or self.secure:
            await super().sendfile(fh, offset, count)
            return
        try:
            sent = await asyncio.get_running_loop().sendfile(self._w.transport, fileobj(), offset, count)
        except (ConnectionResetError, BrokenPipeError, ValueError, OSError) as exc:
            self.close()
            raise ConnectionReset(f"sendfile failed: {exc}") from exc
        if sent != count:  # the segment shrank under us: the frame would lie about its size
            self.close()
            raise ConnectionReset(f"file truncated during sendfile: {sent} of {count} bytes at {offset}")

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._w.close()

    def is_closed(self) -> bool:
        return self._closed or self._w.is_closing()


class RealServer(Server):
    def __init__(self, server: asyncio.base_events.Server, host: str, port: int) -> None:
        self._s, self.host, self.port = server, host, port

    def close(self) -> None:
        self._s.close()


class RealNetwork(Network):
    def __init__(self, node: RealNode) -> None:
        self._node = node
        self._servers: list[RealServer] = []
        self._streams: set[RealStream] = set()
        self.faults = NetFaults()

    def inject(self, fault_id: str, mode: str, peers: list[tuple[str, int]] | None) -> int:
        """Arm a peer fault ("refuse" or "stall"); a refusal resets the open connections it covers.
        Returns how many open connections it covers now."""
        if mode not in ("refuse", "stall"):
            raise ValueError(f"peer fault mode {mode!r} (refuse or stall)")
        self.faults.rules[fault_id] = (mode, peers)
        hit = [st for st in self._streams if st._faults is not None and self.faults.mode_for(st.peer) is not None]
        if mode == "refuse":
            for st in hit:
                st.close()
        return len(hit)

    def heal(self, fault_id: str) -> bool:
        return self.faults.rules.pop(fault_id, None) is not None

    async def serve(self, host: str, port: int, handler: StreamHandler, tls: TlsSettings | None = None) -> Server:
        self._node.check()
        context = server_context(tls) if tls is not None else None

        async def on_accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            if not self._node.alive():
                writer.close()
                return
            stream = RealStream(self._node, reader, writer)
            self._streams.add(stream)
            task = self._node.spawn(handler(stream), name=f"conn {stream.peer}")
            try:
                await task
            except BaseException:
                pass  # the node records its tasks' failures
            finally:
                self._streams.discard(stream)
                stream.close()

        srv = await asyncio.start_server(on_accept, host, port, reuse_address=True, limit=1 << 20, ssl=context)
        bound = srv.sockets[0].getsockname()
        server = RealServer(srv, bound[0], bound[1])
        self._servers.append(server)
        return server

    async def connect(self, host: str, port: int, timeout_ms: float, tls: TlsSettings | None = None) -> Stream:
        self._node.check()
        mode = self.faults.mode_for((host, port))
        if mode is not None:
            self.faults.injected += 1
            if mode == "refuse":
                raise ConnectionRefused(f"connection refused: {host}:{port} (injected)")
            await asyncio.sleep(timeout_ms / 1000.0)
            raise RuntimeTimeout(f"connect to {host}:{port} timed out after {timeout_ms} ms (injected stall)")
        context = client_context(tls) if tls is not None else None
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port, limit=1 << 20, ssl=context),
                                                    timeout_ms / 1000.0)
        except TimeoutError as exc:
            raise RuntimeTimeout(f"connect to {host}:{port} timed out after {timeout_ms} ms") from exc
        except ConnectionRefusedError as exc:
            raise ConnectionRefused(f"connection refused: {host}:{port}") from exc
        except ssl.SSLError as exc:
            raise ConnectionReset(f"TLS handshake with {host}:{port} failed: {exc}") from exc
        except OSError as exc:
            raise ConnectionRefused(f"connect to {host}:{port} failed: {exc}") from exc
        if not self._node.alive():
            writer.close()
            raise NodeDead(self._node.node)
        stream = RealStream(self._node, reader, writer, self.faults)
        self._streams.add(stream)
        return stream

    def kill(self) -> None:
        for s in self._servers:
            s.close()
        for st in list(self._streams):
            st.close()
        self._streams.clear()


class TlsConfigError(ValueError):
    """TLS material that cannot be loaded (a missing file, a key that does not match)."""


_VERIFY = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def server_context(tls: TlsSettings) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2   # ssl.enabled.protocols' default: TLSv1.2,TLSv1.3
    _load_keystore(ctx, tls)
    _load_truststore(ctx, tls)
    ctx.verify_mode = _VERIFY[tls.client_auth]
    return ctx


def client_context(tls: TlsSettings) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = tls.check_hostname
    _load_truststore(ctx, tls)
    if tls.keystore_location or tls.certificate_chain:
        _load_keystore(ctx, tls)
    return ctx


def _load_keystore(ctx: ssl.SSLContext, tls: TlsSettings) -> None:
    try:
        if tls.keystore_location:
            ctx.load_cert_chain(tls.keystore_location, password=tls.key_password)
        elif tls.certificate_chain and tls.private_key:
            # ssl loads a chain only from files: the PEM text goes through a private temporary one.
            with tempfile.TemporaryDirectory() as d:
                chain, key = os.path.join(d, "chain.pem"), os.path.join(d, "key.pem")
                for path, text in ((chain, tls.certificate_chain), (key, tls.private_key)):
                    with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
                        f.write(text)
                ctx.load_cert_chain(chain, key, password=tls.key_password)
        else:
            raise TlsConfigError("no keystore: set ssl.keystore.location, or ssl.keystore.certificate.chain "
                                 "and ssl.keystore.key (ssl.keystore.type=PEM)")
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"cannot load the keystore {tls.keystore_location or '(PEM text)'}: {exc}") from exc


def _load_truststore(ctx: ssl.SSLContext, tls: TlsSettings) -> None:
    try:
        if tls.truststore_location:
            ctx.load_verify_locations(cafile=tls.truststore_location)
        elif tls.truststore_certificates:
            ctx.load_verify_locations(cadata=tls.truststore_certificates)
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"cannot load the truststore {tls.truststore_location or '(PEM text)'}: {exc}") from exc


# Java's X500Principal.getName() (RFC 2253) keywords; others print as Python names them.
_RFC2253_KEYWORDS = {"commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
                     "organizationName": "O", "organizationalUnitName": "OU", "streetAddress": "STREET",
                     "domainComponent": "DC", "userId": "UID"}


def rfc2253(cert: Any) -> str | None:
    """The subject of a peer certificate (ssl's getpeercert() dict) as RFC 2253 prints it: the
    RDNs in reverse order, `+` inside a multi-valued RDN, special characters escaped."""
    if not cert or "subject" not in cert:
        return None
    rdns = ["+".join(f"{_RFC2253_KEYWORDS.get(k, k)}={_escape(v)}" for k, v in rdn) for rdn in cert["subject"]]
    return ",".join(reversed(rdns))


def _escape(value: str) -> str:
    out = "".join("\\" + c if c in ',+"\\<>;' else c for c in value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    return out[:-1] + "\\ " if out.endswith(" ") else out


__all__: list[Any] = ["NetFaults", "RealNetwork", "RealStream", "RealServer", "TlsConfigError", "rfc2253"]
