"""How a broker's own clients connect to the other brokers: over the inter-broker listener
(`inter.broker.listener.name`, or the listener named by `security.inter.broker.protocol`), with
the broker's own credentials, as Kafka builds its inter-broker channels (ChannelBuilders with
the listener's configs, client mode):

  SSL, SASL_SSL        TLS with the listener's truststore (ssl.truststore.location or
                       ssl.truststore.certificates, PEM); the listener's keystore is presented
                       when it has one (a listener requiring client certificates needs it);
                       ssl.endpoint.identification.algorithm=https (Kafka's default) verifies the
                       other broker's name, "" does not
  SASL_PLAINTEXT,      sasl.mechanism.inter.broker.protocol (PLAIN, SCRAM-SHA-256/512; it must be
  SASL_SSL             one of the listener's sasl.enabled.mechanisms) with the `username` and
                       `password` of listener.name.<l>.<mechanism>.sasl.jaas.config (kafkasim
                       also reads the unprefixed sasl.jaas.config); for SCRAM the user's
                       credential must be in ZooKeeper, as Kafka requires (kafka-configs
                       --zookeeper ... --alter --add-config 'SCRAM-SHA-256=[password=...]')
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkasim.broker.security.jaas import parse_jaas
from kafkasim.broker.security.listeners import SASL_PROTOCOLS, TLS_PROTOCOLS, listener_value, listeners_of
from kafkasim.broker.security.settings import SUPPORTED_MECHANISMS
from kafkasim.client.channel_security import ChannelSecurity, SaslCredentials
from kafkasim.config.types import ConfigValueError
from kafkasim.runtime.api import TlsSettings

if TYPE_CHECKING:
    from kafkasim.broker.config import BrokerConfig
    from kafkasim.broker.zk.zk_data import BrokerInfo


def inter_broker_security(cfg: BrokerConfig) -> ChannelSecurity | None:
    """None on a PLAINTEXT inter-broker listener; ConfigValueError for what Kafka refuses at
    startup (or kafkasim's clients cannot speak)."""
    listeners = listeners_of(cfg)
    name = listeners.inter_broker
    protocol = listeners.protocols[name]
    if protocol == "PLAINTEXT":
        return None
    tls = _client_tls(cfg, name) if protocol in TLS_PROTOCOLS else None
    sasl = _credentials(cfg, name) if protocol in SASL_PROTOCOLS else None
    return ChannelSecurity(tls, sasl, name)


def inter_broker_address(broker: BrokerInfo, security: ChannelSecurity | None) -> tuple[str, int]:
    """Where the broker's own clients reach `broker`: its inter-broker listener's endpoint (Kafka's
    broker.node(interBrokerListenerName)); on a PLAINTEXT inter-broker listener, as before, the
    broker's PLAINTEXT address (BrokerInfo.host/port)."""
    if security is None:
        return broker.host, broker.port
    return broker.endpoint(security.listener) or (broker.host, broker.port)


def _client_tls(cfg: BrokerConfig, listener: str) -> TlsSettings:
    def get(key: str) -> str | None:
        return listener_value(cfg, listener, key)

    algorithm = (get("ssl.endpoint.identification.algorithm") or "").strip().lower()
    return TlsSettings(keystore_location=get("ssl.keystore.location"),
                       certificate_chain=get("ssl.keystore.certificate.chain"), private_key=get("ssl.keystore.key"),
                       key_password=get("ssl.key.password"), truststore_location=get("ssl.truststore.location"),
                       truststore_certificates=get("ssl.truststore.certificates"),
                       check_hostname=algorithm == "https", sim_subject=f"CN=broker-{cfg.broker_id}")


def _credentials(cfg: BrokerConfig, listener: str) -> SaslCredentials:
    mechanism = cfg.sasl_mechanism_inter_broker_protocol.strip()
    enabled = [m.strip() for m in (listener_value(cfg, listener, "sasl.enabled.mechanisms") or "").split(",")]
    if mechanism not in enabled:
        # KafkaConfig's validation, word for word.
        raise ConfigValueError("requirement failed: sasl.mechanism.inter.broker.protocol must be included in "
                               "sasl.enabled.mechanisms when SASL is used for inter-broker communication")
    if mechanism not in SUPPORTED_MECHANISMS:
        raise ConfigValueError(f"sasl.mechanism.inter.broker.protocol={mechanism}: kafkasim's inter-broker clients "
                               f"speak {', '.join(SUPPORTED_MECHANISMS)}")
    key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    text = cfg.listener_overrides.get(key) or cfg.sasl_jaas_config
    options = parse_jaas(text)[0].options if text else {}
    if "username" not in options or "password" not in options:
        raise ConfigValueError(f"{key} has no username and password: the broker logs in to the inter-broker "
                               f"listener {listener} with them")
    return SaslCredentials(mechanism, options["username"], options["password"])
