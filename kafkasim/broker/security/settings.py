"""What one listener needs to secure its connections, from the broker's configs (each looked up as
`listener.name.<listener>.<config>` first, as KafkaConfig's valuesWithPrefixOverride does):

  TLS (SSL, SASL_SSL)    ssl.keystore.type=PEM with ssl.keystore.location (key + chain in one PEM
                         file) or ssl.keystore.certificate.chain + ssl.keystore.key; ssl.key.password;
                         ssl.truststore.location or ssl.truststore.certificates (PEM); ssl.client.auth
                         (none, requested, required — on SASL_SSL only when listener-prefixed, KIP-684)
  SASL (SASL_*)          sasl.enabled.mechanisms (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512);
                         PLAIN's users: `user_<name>="<password>"` in
                         listener.name.<l>.plain.sasl.jaas.config (kafkasim also reads the unprefixed
                         sasl.jaas.config, which Kafka's broker ignores); SCRAM's credentials are
                         ZooKeeper's (/config/users/<user>); connections.max.reauth.ms
                         (listener.name.<l>.<mechanism>.connections.max.reauth.ms overrides it);
                         sasl.server.max.receive.size (a larger frame while authenticating closes)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kafkasim.broker.security.jaas import PLAIN_MODULE, parse_jaas, plain_users
from kafkasim.broker.security.listeners import SASL_PROTOCOLS, TLS_PROTOCOLS, EndPoint, listener_value
from kafkasim.broker.zk.java_compat import java_hash_order
from kafkasim.config.types import ConfigValueError
from kafkasim.runtime.api import TlsSettings

if TYPE_CHECKING:
    from kafkasim.broker.config import BrokerConfig

PLAIN, SCRAM_SHA_256, SCRAM_SHA_512 = "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"
SUPPORTED_MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512)
CLIENT_AUTH = ("required", "requested", "none")


@dataclass(frozen=True)
class ListenerSecurity:
    endpoint: EndPoint
    tls: TlsSettings | None = None
    mechanisms: tuple[str, ...] = ()                         # SASL listeners: the enabled mechanisms
    plain_users: dict[str, str] = field(default_factory=dict)  # PLAIN: user -> password
    reauth_ms: dict[str, int] = field(default_factory=dict)    # mechanism -> connections.max.reauth.ms
    # sasl.server.max.receive.size: the largest frame read while authenticating (SaslServerAuthenticator).
    max_receive_size: int = 524288

    @property
    def sasl(self) -> bool:
        return self.endpoint.security_protocol in SASL_PROTOCOLS


def security_of(cfg: BrokerConfig, endpoint: EndPoint) -> ListenerSecurity:
    """The listener's security settings; ConfigValueError for what Kafka would refuse at startup
    (or kafkasim cannot serve: keystores other than PEM, GSSAPI/OAUTHBEARER)."""
    tls = _tls_of(cfg, endpoint) if endpoint.security_protocol in TLS_PROTOCOLS else None
    if endpoint.security_protocol not in SASL_PROTOCOLS:
        return ListenerSecurity(endpoint, tls)
    name = endpoint.listener_name
    raw = listener_value(cfg, name, "sasl.enabled.mechanisms") or ""
    # SaslServerAuthenticator's `new ArrayList<>(new HashSet<>(enabledMechanisms))`: the handshake
    # lists them in a HashSet's order, not the config's.
    mechanisms = tuple(java_hash_order(m.strip() for m in raw.split(",") if m.strip()))
    if not mechanisms:
        raise ConfigValueError("No SASL mechanisms are enabled")
    unsupported = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
    if unsupported:
        raise ConfigValueError(f"sasl.enabled.mechanisms of listener {name}: {', '.join(unsupported)} not supported "
                               f"by kafkasim (it serves {', '.join(SUPPORTED_MECHANISMS)})")
    users = _plain_users(cfg, name) if PLAIN in mechanisms else {}
    reauth = {m: _reauth_ms(cfg, name, m) for m in mechanisms}
    raw_size = listener_value(cfg, name, "sasl.server.max.receive.size")
    try:
        max_receive = int(raw_size) if raw_size is not None else cfg.sasl_server_max_receive_size
    except ValueError:
        raise ConfigValueError(f"Invalid value {raw_size} for configuration sasl.server.max.receive.size: Not a "
                               f"number of type INT") from None
    return ListenerSecurity(endpoint, tls, mechanisms, users, reauth, max_receive)


def _plain_users(cfg: BrokerConfig, listener: str) -> dict[str, str]:
    text = cfg.listener_overrides.get(f"listener.name.{listener.lower()}.plain.sasl.jaas.config") or \
        cfg.sasl_jaas_config
    if text is None:
        raise ConfigValueError(f"Could not find a 'KafkaServer' or '{listener.lower()}.KafkaServer' entry in the JAAS "
                               f"configuration. System property 'java.security.auth.login.config' is not set")
    module = parse_jaas(text)[0]
    if module.name != PLAIN_MODULE:
        raise ConfigValueError(f"listener {listener}: PLAIN's JAAS config names {module.name}, not {PLAIN_MODULE}")
    return plain_users(text)


def _reauth_ms(cfg: BrokerConfig, listener: str, mechanism: str) -> int:
    key = f"listener.name.{listener.lower()}.{mechanism.lower()}.connections.max.reauth.ms"
    raw = cfg.listener_overrides.get(key)
    if raw is None:
        return cfg.connections_max_reauth_ms
    try:
        return int(raw)
    except ValueError:
        raise ConfigValueError(f"Invalid value {raw} for configuration {key}: Not a number of type LONG") from None


def _tls_of(cfg: BrokerConfig, endpoint: EndPoint) -> TlsSettings:
    name = endpoint.listener_name

    def get(key: str) -> str | None:
        return listener_value(cfg, name, key)

    for kind in ("keystore", "truststore"):
        typ = (get(f"ssl.{kind}.type") or "JKS").upper()
        located = get(f"ssl.{kind}.location") or (get("ssl.keystore.certificate.chain") if kind == "keystore"
                                                  else get("ssl.truststore.certificates"))
        if located and typ != "PEM":
            raise ConfigValueError(f"ssl.{kind}.type={typ} on listener {name}: kafkasim reads PEM stores only "
                                   f"(set ssl.{kind}.type=PEM)")
    if not (get("ssl.keystore.location") or (get("ssl.keystore.certificate.chain") and get("ssl.keystore.key"))):
        raise ConfigValueError(f"listener {name} ({endpoint.security_protocol}) has no keystore: set "
                               f"ssl.keystore.type=PEM and ssl.keystore.location, or ssl.keystore.certificate.chain "
                               f"and ssl.keystore.key")
    prefixed_auth = cfg.listener_overrides.get(f"listener.name.{name.lower()}.ssl.client.auth")
    # KIP-684: a SASL_SSL listener asks for client certificates only when told so for itself.
    auth = prefixed_auth if endpoint.security_protocol == "SSL" or prefixed_auth is not None else "none"
    auth = (auth or cfg.ssl_client_auth).strip()
    if auth not in CLIENT_AUTH:
        raise ConfigValueError(f"Invalid value {auth} for configuration ssl.client.auth: String must be one of: "
                               f"{', '.join(CLIENT_AUTH)}")
    return TlsSettings(keystore_location=get("ssl.keystore.location"),
                       certificate_chain=get("ssl.keystore.certificate.chain"), private_key=get("ssl.keystore.key"),
                       key_password=get("ssl.key.password"), truststore_location=get("ssl.truststore.location"),
                       truststore_certificates=get("ssl.truststore.certificates"), client_auth=auth)
