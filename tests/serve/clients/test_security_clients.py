"""Third-party clients against `kafkasim serve` with secured listeners: kcat, confluent-kafka,
kafka-python, the Java client and franz-go authenticate with PLAIN and SCRAM-SHA-256/512 over
SASL_PLAINTEXT and SASL_SSL, connect over SSL with and without a client certificate, produce and
read back their records; a wrong password is an authentication failure the client reports.

The TLS material is real/certs.sh's (a throwaway CA, a broker certificate for 127.0.0.1 and a
client certificate); SCRAM users are written with confluent-kafka's AlterUserScramCredentials over
the PLAINTEXT listener. Each driver gets its security settings from KAFKASIM_CLIENT_SECURITY
(real/clients/README.md)."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.serve.clients.driver import Driver, DriverError, create_topic, driver_missing
from tests.serve.conftest import free_port, wait_until_serving

pytestmark = pytest.mark.real

REPO = Path(__file__).resolve().parents[3]
CLIENTS = ["kcat", "confluent-kafka", "kafka-python", "java", "franz-go"]
LISTENERS = ("PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL", "SSL", "MTLS")
USERS = {"PLAIN": ("alice", "alice-secret"), "SCRAM-SHA-256": ("bob", "bob-secret"),
         "SCRAM-SHA-512": ("carol", "carol-secret")}
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_alice="alice-secret";')
_uniq = itertools.count()
# What a client reports when its password is wrong. kafka-python 3.0 reads the broker's close
# before its SaslAuthenticate answer and gives up bootstrapping — against Kafka 3.9.1 too.
DENIED = {"kafka-python": "Unable to bootstrap", "franz-go": "SASL_AUTHENTICATION_FAILED"}


class SecureBroker:
    """`kafkasim serve` with one listener of each kind (MTLS: SSL requiring a client certificate)."""

    def __init__(self, workdir: Path) -> None:
        self.certs = workdir / "certs"
        subprocess.run(["bash", str(REPO / "real" / "certs.sh"), str(self.certs)], check=True, capture_output=True)
        self.ports = {name: free_port() for name in LISTENERS}
        listeners = ",".join(f"{n}://127.0.0.1:{p}" for n, p in self.ports.items())
        configs = {
            "listeners": listeners,
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,"
                                              "SSL:SSL,MTLS:SSL",
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
            "ssl.keystore.type": "PEM", "ssl.keystore.location": str(self.certs / "broker-keystore.pem"),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.certs / "ca.pem"),
            "listener.name.mtls.ssl.client.auth": "required",
        }
        cmd = [sys.executable, "-m", "kafkasim.cli", "serve", "--port", "0", "--log-dir", str(workdir / "logs")]
        for k, v in configs.items():
            cmd += ["--config", f"{k}={v}"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
        wait_until_serving(self.proc, self.ports["PLAINTEXT"])

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def stop(self) -> str:
        self.proc.terminate()
        out, _ = self.proc.communicate(timeout=60)
        return out


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    b = SecureBroker(tmp_path_factory.mktemp("security"))
    admin = AdminClient({"bootstrap.servers": b.bootstrap("PLAINTEXT")})
    upserts = [UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                            b"bob-secret"),
               UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                            b"carol-secret")]
    for fut in admin.alter_user_scram_credentials(upserts, request_timeout=90).values():
        fut.result(timeout=120)   # generous: a loaded CI machine starts the broker slowly
    yield b
    out = b.stop()
    assert "Traceback" not in out, out[-3000:]


def _security(b: SecureBroker, listener: str, mechanism: str | None = None, password: str | None = None,
              client_cert: bool = False) -> dict[str, str]:
    protocol = {"MTLS": "SSL"}.get(listener, listener)
    sec = {"protocol": protocol}
    if mechanism is not None:
        user, good = USERS[mechanism]
        sec.update(mechanism=mechanism, username=user, password=password or good)
    if "SSL" in protocol:
        sec["ca"] = str(b.certs / "ca.pem")
    if client_cert:
        sec.update(cert=str(b.certs / "client.pem"), key=str(b.certs / "client.key"),
                   keystore=str(b.certs / "client-keystore.pem"))
    return sec


def _driver(client: str, b: SecureBroker, listener: str, sec: dict[str, str], monkeypatch: Any) -> Driver:
    reason = driver_missing(client)
    if reason:
        pytest.skip(reason)
    monkeypatch.setenv("KAFKASIM_CLIENT_SECURITY", json.dumps(sec))
    return Driver(client, b.bootstrap(listener))


CASES = [("SASL_PLAINTEXT", "PLAIN", False), ("SASL_PLAINTEXT", "SCRAM-SHA-256", False),
         ("SASL_PLAINTEXT", "SCRAM-SHA-512", False), ("SASL_SSL", "PLAIN", False),
         ("SASL_SSL", "SCRAM-SHA-256", False), ("SASL_SSL", "SCRAM-SHA-512", False),
         ("SSL", None, False), ("MTLS", None, True)]


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("listener,mechanism,client_cert", CASES,
                         ids=[f"{lst}-{m or ('client-cert' if c else 'no-client-cert')}" for lst, m, c in CASES])
def test_client_authenticates_produces_and_consumes(broker: SecureBroker, client: str, listener: str,
                                                   mechanism: str | None, client_cert: bool, monkeypatch: Any) -> None:
    topic = f"sec-{client}-{listener.lower()}-{(mechanism or 'tls').lower()}-{next(_uniq)}"
    create_topic(broker.bootstrap("PLAINTEXT"), topic, 1)
    with _driver(client, broker, listener, _security(broker, listener, mechanism, client_cert=client_cert),
                 monkeypatch) as d:
        produced = d.produce(topic, 5, "v", acks="all", timeout_ms=30000)
        assert produced["errors"] == [] and [r[2] for r in produced["acked"]] == [f"v-{i}" for i in range(5)]
        consumed = d.consume(topic, max=5, timeout_ms=20000)
        assert [r[2] for r in consumed["records"]] == [f"v-{i}" for i in range(5)], consumed


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("listener,mechanism", [("SASL_PLAINTEXT", "PLAIN"), ("SASL_SSL", "SCRAM-SHA-256")])
def test_wrong_password_is_an_authentication_failure(broker: SecureBroker, client: str, listener: str,
                                                     mechanism: str, monkeypatch: Any) -> None:
    topic = f"sec-denied-{client}-{next(_uniq)}"
    create_topic(broker.bootstrap("PLAINTEXT"), topic, 1)
    with _driver(client, broker, listener, _security(broker, listener, mechanism, password="wrong"),
                 monkeypatch) as d:
        try:
            reply = d.produce(topic, 1, "v", acks="all", timeout_ms=8000)
            acked, errors = reply["acked"], " ".join(reply["errors"])
        except DriverError as exc:
            acked, errors = [], exc.error
        errors += d.stderr_tail(20000)   # franz-go logs the broker's answer and retries until the deadline
    assert acked == [] and DENIED.get(client, "uthentication") in errors, errors
