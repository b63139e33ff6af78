"""Contract: TLS listeners in both worlds — a TLS client gets through and the server sees its
certificate's subject (RFC 2253, as Kafka's SSL principal), a plaintext client is cut off, and
`required` client auth refuses a client without a certificate. The real world runs Python's ssl
on real/certs.sh's throwaway certificates; the simulated world marks its streams the same way."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest
from runtime_worlds import Ctx, World

from kafkasim.runtime.api import ConnectionClosed, Stream, TlsSettings

pytestmark = pytest.mark.contract

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_MS = 5_000
CLIENT_SUBJECT = "CN=client,O=kafkasim"   # real/certs.sh's client certificate
FRAME = struct.pack(">i", 20) + bytes(range(20))


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("certs")
    subprocess.run(["bash", str(REPO / "real" / "certs.sh"), str(d)], check=True, capture_output=True)
    return d


def _server_tls(certs: Path, client_auth: str) -> TlsSettings:
    return TlsSettings(keystore_location=str(certs / "broker-keystore.pem"),
                       truststore_location=str(certs / "ca.pem"), client_auth=client_auth)


def _client_tls(certs: Path, with_cert: bool) -> TlsSettings:
    if not with_cert:
        return TlsSettings(truststore_location=str(certs / "ca.pem"))
    return TlsSettings(truststore_location=str(certs / "ca.pem"), keystore_location=str(certs / "client-keystore.pem"),
                       sim_subject=CLIENT_SUBJECT)


async def _exchange(ctx: Ctx, server_tls: TlsSettings, client_tls: TlsSettings | None) -> Any:
    """What the server saw of the client (secure, subject), or 'refused' when the stream died."""
    srv_rt, seen = ctx.node("server"), ctx.rt.future()

    async def handle(s: Stream) -> None:
        try:
            data = await s.read_frame(1024)
            await s.write(struct.pack(">i", len(data)) + data)
            seen.set_result([s.secure, s.peer_subject])
        except ConnectionClosed:
            pass
        finally:
            s.close()

    server = await srv_rt.net.serve(srv_rt.host, 0, handle, tls=server_tls)
    try:
        c = await ctx.rt.net.connect(srv_rt.host, server.port, TIMEOUT_MS, tls=client_tls)
        await c.write(FRAME)   # a request's worth: a TLS server reads it as a (bad) ClientHello
        echoed = await c.read_exactly(len(FRAME))
    except ConnectionClosed:
        return "refused"
    return [echoed == FRAME, c.secure, *(await seen)]


@pytest.mark.parametrize("client_auth,with_cert,expected", [
    ("none", False, [True, True, True, None]),
    ("none", True, [True, True, True, None]),          # not asked for: not looked at
    ("requested", True, [True, True, True, CLIENT_SUBJECT]),
    ("requested", False, [True, True, True, None]),
    ("required", True, [True, True, True, CLIENT_SUBJECT]),
    ("required", False, "refused"),
])
def test_tls_listener_and_client_auth(world: World, certs: Path, client_auth: str, with_cert: bool,
                                      expected: Any) -> None:
    async def main(ctx: Ctx) -> Any:
        return await _exchange(ctx, _server_tls(certs, client_auth), _client_tls(certs, with_cert))

    assert world.run(main) == expected


def test_plaintext_client_on_a_tls_listener_is_cut_off(world: World, certs: Path) -> None:
    async def main(ctx: Ctx) -> Any:
        return await _exchange(ctx, _server_tls(certs, "none"), None)

    assert world.run(main) == "refused"
