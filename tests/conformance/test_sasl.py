"""SaslHandshake and SaslAuthenticate, differential: the same exchanges against Kafka 3.9.1
(real/kafka/kafka.py) and kafkasim (real/cluster/cluster.py), both started with a PLAINTEXT and a
SASL_PLAINTEXT listener (PLAIN from the listener's JAAS config, SCRAM-SHA-256/512 from ZooKeeper,
connections.max.reauth.ms set), compared answer by answer — error codes, messages, mechanism
lists, session lifetimes, and where the broker closes the connection instead. SCRAM's answers
carry a random server nonce: those are compared by shape (the client's nonce extended, the salt
and iterations stored) and by the client verifying the server's signature."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from kafkasim.protocol.messages.alter_user_scram_credentials import AlterUserScramCredentialsRequest
from kafkasim.protocol.messages.api_versions import ApiVersionsRequest
from kafkasim.protocol.messages.metadata import MetadataRequest
from kafkasim.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from kafkasim.protocol.messages.sasl_handshake import SaslHandshakeRequest
from kafkasim.runtime.real.ports import free_port
from tests.broker.security.sasl_client import ScramClient, plain_token
from tests.conformance.conftest import KAFKA_ONLY_CONFIGS, SHARED_CONFIGS, require_real_kafka
from tests.conformance.wire import Closed, Connection

pytestmark = pytest.mark.real

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
SALT = b"conformance-salt"


class Side:
    def __init__(self, cluster: Any, plain: int, sasl: int) -> None:
        self.cluster, self.plain, self.sasl = cluster, plain, sasl

    def connect(self, listener: str = "sasl") -> Connection:
        return Connection("127.0.0.1", self.sasl if listener == "sasl" else self.plain)


def _up(start: Callable[..., Any], module: Any, directory: Path, configs: dict[str, str]) -> Side:
    """A cluster whose broker 0 listens on two ports we chose: the launchers pick the PLAINTEXT
    port with their free_port() first, so it answers ours once (and any port asked for later, such as
    the kafkasim broker's control plane, is a free one of its own)."""
    plain, sasl = free_port(), free_port()
    listeners = {"listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
                 "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                 "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
                 # Kafka wants a login module for every mechanism (kafkasim needs none for SCRAM).
                 "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
                 "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
                 "connections.max.reauth.ms": "3600000"}
    original = module.free_port
    ours = iter([plain])   # the first port asked for is the listener's; later ones (a control plane's) are free
    module.free_port = lambda: next(ours, None) or original()
    try:
        cluster = start(directory, 1, {**configs, **listeners})
    finally:
        module.free_port = original
    return Side(cluster, plain, sasl)


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Side, Side]]:
    launcher = require_real_kafka()
    cluster_mod = launcher.cluster_launcher()
    real = _up(launcher.up, cluster_mod, tmp_path_factory.mktemp("sasl-kafka"), {**SHARED_CONFIGS,
                                                                                  **KAFKA_ONLY_CONFIGS})
    try:
        sim = _up(cluster_mod.up, cluster_mod, tmp_path_factory.mktemp("sasl-kafkasim"), SHARED_CONFIGS)
    except BaseException:
        real.cluster.down()
        raise
    try:
        for side in (real, sim):
            _add_scram_users(side)
        yield real, sim
    finally:
        sim.cluster.down()
        real.cluster.down()


def _add_scram_users(side: Side) -> None:
    U = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
    ups = [U(name="bob", mechanism=m, iterations=4096, salt=SALT,
             salted_password=hashlib.pbkdf2_hmac(h, b"bob-secret", SALT, 4096))
           for m, h in ((1, "sha256"), (2, "sha512"))]
    conn = side.connect("plain")
    resp = conn.send(AlterUserScramCredentialsRequest(upsertions=ups), 0)
    conn.close()
    assert [r.error_code for r in resp.results] == [0], resp


def _play(side: Side, steps: list[tuple[Any, int]], listener: str = "sasl") -> list[Any]:
    """Each step's answer as a comparable value; 'closed' where the broker hung up (and stop)."""
    conn, out = side.connect(listener), []
    try:
        for body, version in steps:
            try:
                resp = conn.send(body, version)
            except Closed:
                out.append("closed")
                break
            out.append(_view(resp))
    finally:
        conn.close()
    return out


def _view(resp: Any) -> Any:
    d = {k: getattr(resp, k) for k in resp._FIELD_NAMES}
    if "api_keys" in d:
        return {"error_code": d["error_code"]}            # the ApiVersions table has its own suite
    if "brokers" in d:                                   # Metadata: ports and cluster ids differ by nature
        d["brokers"] = len(d["brokers"])
        d.pop("cluster_id")
    if "auth_bytes" in d:
        d["auth_bytes"] = bytes(d["auth_bytes"])
    return d


HS = SaslHandshakeRequest
AU = SaslAuthenticateRequest
VERSIONS = (ApiVersionsRequest(client_software_name="conformance", client_software_version="1"), 3)
CASES: dict[str, tuple[str, list[tuple[Any, int]]]] = {
    "plain-v0-handshake-v0-authenticate": ("sasl", [(HS(mechanism="PLAIN"), 1),
                                                    (AU(auth_bytes=plain_token("alice", "alice-secret")), 0),
                                                    (MetadataRequest(topics=[]), 12)]),
    "plain-v1-authenticate": ("sasl", [VERSIONS, (HS(mechanism="PLAIN"), 1),
                                       (AU(auth_bytes=plain_token("alice", "alice-secret")), 1)]),
    "plain-v2-authenticate": ("sasl", [(HS(mechanism="PLAIN"), 1),
                                       (AU(auth_bytes=plain_token("admin", "admin-secret")), 2)]),
    "plain-wrong-password": ("sasl", [(HS(mechanism="PLAIN"), 1), (AU(auth_bytes=plain_token("alice", "x")), 2),
                                      (MetadataRequest(topics=[]), 12)]),
    "plain-unknown-user": ("sasl", [(HS(mechanism="PLAIN"), 1), (AU(auth_bytes=plain_token("mallory", "x")), 2)]),
    "plain-empty-password": ("sasl", [(HS(mechanism="PLAIN"), 1), (AU(auth_bytes=plain_token("alice", "")), 2)]),
    "plain-other-authzid": ("sasl", [(HS(mechanism="PLAIN"), 1),
                                     (AU(auth_bytes=plain_token("alice", "alice-secret", "admin")), 2)]),
    "plain-two-tokens": ("sasl", [(HS(mechanism="PLAIN"), 1), (AU(auth_bytes=b"alice\x00alice-secret"), 2)]),
    "unsupported-mechanism": ("sasl", [(HS(mechanism="GSSAPI"), 1), (HS(mechanism="PLAIN"), 1)]),
    "handshake-v0-unsupported": ("sasl", [(HS(mechanism="OAUTHBEARER"), 0)]),
    "metadata-before-authentication": ("sasl", [(MetadataRequest(topics=[]), 12)]),
    "two-api-versions": ("sasl", [VERSIONS, VERSIONS]),
    "metadata-during-authentication": ("sasl", [(HS(mechanism="PLAIN"), 1), (MetadataRequest(topics=[]), 12)]),
    "scram-unknown-user": ("sasl", [(HS(mechanism="SCRAM-SHA-256"), 1), (AU(auth_bytes=b"n,,n=nobody,r=abc"), 2)]),
    "scram-malformed-first": ("sasl", [(HS(mechanism="SCRAM-SHA-512"), 1), (AU(auth_bytes=b"hello"), 2)]),
    "handshake-on-plaintext": ("plain", [(HS(mechanism="PLAIN"), 1), (HS(mechanism="PLAIN"), 0)]),
    "authenticate-on-plaintext": ("plain", [(AU(auth_bytes=b"x"), 0), (AU(auth_bytes=b"x"), 2)]),
    "reauthenticate-too-soon": ("sasl", [(HS(mechanism="PLAIN"), 1),
                                         (AU(auth_bytes=plain_token("alice", "alice-secret")), 2),
                                         (HS(mechanism="PLAIN"), 1), (HS(mechanism="PLAIN"), 1)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_sasl_case(sides: tuple[Side, Side], name: str) -> None:
    listener, steps = CASES[name]
    real, sim = (_play(side, steps, listener) for side in sides)
    assert sim == real


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("password", ["bob-secret", "wrong"])
def test_scram_exchange(sides: tuple[Side, Side], mechanism: str, password: str) -> None:
    results = []
    for side in sides:
        conn, client = side.connect(), ScramClient(mechanism, "bob", password)
        try:
            hs = conn.send(HS(mechanism=mechanism), 1)
            first = conn.send(AU(auth_bytes=client.first()), 2)
            server_first = bytes(first.auth_bytes).decode()
            shape = (server_first.startswith("r=clientnonce123") and
                     server_first.split(",")[1:] == [f"s={base64.b64encode(SALT).decode()}", "i=4096"])
            final = conn.send(AU(auth_bytes=client.final(bytes(first.auth_bytes))), 2)
            verified = bytes(final.auth_bytes) == b"v=" + base64.b64encode(client.server_signature)
            results.append((hs.error_code, first.error_code, shape, final.error_code, final.error_message,
                            final.session_lifetime_ms, verified))
        finally:
            conn.close()
    real, sim = results
    assert sim == real
    assert real[3] == (0 if password == "bob-secret" else 58)
