"""Listener configs as Kafka parses and refuses them (messages from KafkaConfig / CoreUtils), and
what each listener's security settings become."""

from __future__ import annotations

from typing import Any

import pytest

from kafkasim.broker.config import BrokerConfig
from kafkasim.broker.security.jaas import parse_jaas, plain_users
from kafkasim.broker.security.listeners import EndPoint, listeners_of
from kafkasim.broker.security.settings import security_of
from kafkasim.broker.zk.zk_data import broker_registration_json, parse_broker_registration
from kafkasim.config.types import ConfigValueError

pytestmark = pytest.mark.unit

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
PEM = {"ssl.keystore.type": "PEM", "ssl.keystore.location": "/k.pem", "ssl.truststore.type": "PEM",
       "ssl.truststore.location": "/ca.pem"}


def _cfg(**props: Any) -> BrokerConfig:
    return BrokerConfig.from_properties({k.replace("_", "."): v for k, v in props.items()})


def test_default_is_one_plaintext_listener_from_host_and_port() -> None:
    ls = listeners_of(BrokerConfig.from_properties({"host": "h", "port": 9}))
    assert ls.bound == (EndPoint("PLAINTEXT", "h", 9, "PLAINTEXT"),) and ls.inter_broker == "PLAINTEXT"


def test_named_listeners_map_to_protocols_and_advertise_separately() -> None:
    cfg = BrokerConfig.from_properties({
        "listeners": "INTERNAL://127.0.0.1:9092,EXTERNAL://:9093",
        "advertised.listeners": "INTERNAL://127.0.0.1:9092,EXTERNAL://kafka.example:19093",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL",
        "inter.broker.listener.name": "INTERNAL", "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.external.plain.sasl.jaas.config": JAAS, **PEM})
    ls = listeners_of(cfg)
    assert ls.bound[1] == EndPoint("EXTERNAL", None, 9093, "SASL_SSL")
    assert ls.advertised_for("EXTERNAL") == EndPoint("EXTERNAL", "kafka.example", 19093, "SASL_SSL")
    sec = security_of(cfg, ls.bound[1])
    assert sec.mechanisms == ("PLAIN",) and sec.plain_users == {"admin": "admin-secret", "alice": "alice-secret"}
    assert sec.tls is not None and sec.tls.keystore_location == "/k.pem"
    assert sec.tls.client_auth == "none"     # KIP-684: SASL_SSL asks for certificates only when prefixed


@pytest.mark.parametrize("props,message", [
    ({"listeners": "FOO://:9092"},
     "Error creating broker listeners from 'FOO://:9092': No security protocol defined for listener FOO"),
    ({"listeners": "PLAINTEXT:/x"},
     "Error creating broker listeners from 'PLAINTEXT:/x': Unable to parse PLAINTEXT:/x to a broker endpoint"),
    ({"listeners": "PLAINTEXT://:9092,PLAINTEXT://:9093"},
     "requirement failed: Each listener must have a different name, listeners: PLAINTEXT://:9092,PLAINTEXT://:9093"),
    ({"listeners": "PLAINTEXT://:9092,SSL://:9092", **PEM},
     "requirement failed: Each listener must have a different port, listeners: PLAINTEXT://:9092,SSL://:9092"),
    ({"listeners": "SSL://:9093", **PEM},
     "requirement failed: inter.broker.listener.name must be a listener name defined in advertised.listeners. "
     "The valid options based on currently configured listeners are SSL"),
    ({"listeners": "PLAINTEXT://:9092", "advertised.listeners": "PLAINTEXT://0.0.0.0:9092"},
     "requirement failed: advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. "
     "Use a routable IP address."),
    ({"listeners": "PLAINTEXT://:9092", "advertised.listeners": "PLAINTEXT://h:9092,SSL://h:9093"},
     "requirement failed: advertised.listeners listener names must be equal to or a subset of the ones defined in "
     "listeners. Found PLAINTEXT,SSL. The valid options based on the current configuration are PLAINTEXT"),
    ({"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"},
     "Only one of inter.broker.listener.name and security.inter.broker.protocol should be set."),
    ({"listeners": "PLAINTEXT://:9092,SASL_PLAINTEXT://:9093", "sasl.enabled.mechanisms": "PLAIN"},
     "Could not find a 'KafkaServer' or 'sasl_plaintext.KafkaServer' entry in the JAAS configuration. System "
     "property 'java.security.auth.login.config' is not set"),
    ({"listeners": "PLAINTEXT://:9092,SASL_PLAINTEXT://:9093", "sasl.enabled.mechanisms": "GSSAPI"},
     "sasl.enabled.mechanisms of listener SASL_PLAINTEXT: GSSAPI not supported by kafkasim (it serves PLAIN, "
     "SCRAM-SHA-256, SCRAM-SHA-512)"),
    ({"listeners": "PLAINTEXT://:9092,SSL://:9093", "ssl.keystore.location": "/k.jks"},
     "ssl.keystore.type=JKS on listener SSL: kafkasim reads PEM stores only (set ssl.keystore.type=PEM)"),
    ({"listeners": "PLAINTEXT://:9092,SSL://:9093", **PEM, "ssl.client.auth": "maybe"},
     "Invalid value maybe for configuration ssl.client.auth: String must be one of: required, requested, none"),
])
def test_bad_listener_configs_are_refused_with_kafkas_message(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigValueError) as err:
        BrokerConfig.from_properties(props)
    assert str(err.value) == message


def test_listener_prefixed_overrides_win() -> None:
    cfg = BrokerConfig.from_properties({
        "listeners": "PLAINTEXT://:9092,SSL://:9093", **PEM, "ssl.client.auth": "requested",
        "listener.name.ssl.ssl.client.auth": "required"})
    assert security_of(cfg, listeners_of(cfg).bound[1]).tls.client_auth == "required"  # type: ignore[union-attr]


def test_jaas_parsing() -> None:
    assert plain_users(JAAS) == {"admin": "admin-secret", "alice": "alice-secret"}
    assert parse_jaas('x.Y optional a=b c="d;e";')[0].options == {"a": "b", "c": "d;e"}
    for bad in ("x.Y required a=b", "x.Y sometimes;", "x.Y required a;", ""):
        with pytest.raises(ConfigValueError):
            parse_jaas(bad)


def test_registration_json_is_kafkas_and_parses_back() -> None:
    endpoints = [("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092), ("SASL_SSL", "SASL_SSL", "127.0.0.1", 9093)]
    data = broker_registration_json(endpoints, 1795513625109, None)
    # As Kafka 3.9.1 wrote it for a broker with these listeners (`realkafka zk DIR get /brokers/ids/0`).
    assert data == (b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT","SASL_SSL":"SASL_SSL"},'
                    b'"endpoints":["PLAINTEXT://127.0.0.1:9092","SASL_SSL://127.0.0.1:9093"],"jmx_port":-1,'
                    b'"port":9092,"host":"127.0.0.1","version":5,"timestamp":"1795513625109"}')
    info = parse_broker_registration(0, data)
    assert (info.host, info.port) == ("127.0.0.1", 9092) and info.endpoint("SASL_SSL") == ("127.0.0.1", 9093)
    assert info.endpoint("SSL") is None
    only_sasl = parse_broker_registration(0, broker_registration_json([("CLIENT", "SASL_PLAINTEXT", "h", 1)], 0, None))
    assert b'"port":-1,"host":null' in broker_registration_json([("CLIENT", "SASL_PLAINTEXT", "h", 1)], 0, None)
    assert only_sasl.endpoint("CLIENT") == ("h", 1)


def test_enabled_mechanisms_in_kafkas_hashset_order() -> None:
    # Kafka 3.9.1 lists PLAIN,SCRAM-SHA-256,SCRAM-SHA-512 as below in SaslHandshake (tests/conformance/test_sasl.py).
    cfg = BrokerConfig.from_properties({"listeners": "PLAINTEXT://:9092,SASL_PLAINTEXT://:9093", "sasl.jaas.config": JAAS,
                                        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"})
    assert security_of(cfg, listeners_of(cfg).bound[1]).mechanisms == ("PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256")
