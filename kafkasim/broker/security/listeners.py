"""Listeners as Kafka configures them (KafkaConfig, SocketServerConfigs.listenerListToEndPoints,
CoreUtils.listenerListToEndPoints), with Kafka's messages:

  listeners=PLAINTEXT://127.0.0.1:9092,CLIENT://:9093        name://host:port, empty host = all
  listener.security.protocol.map=CLIENT:SASL_SSL,...          name -> protocol (default: each
                                                              protocol's own name)
  advertised.listeners=...                                    what clients are told (default: listeners)
  inter.broker.listener.name=PLAINTEXT  (or security.inter.broker.protocol, not both)

kafkasim's own settings `host`/`port` stand for `listeners=PLAINTEXT://host:port` when
`listeners` is unset. Per-listener configs are `listener.name.<name lower-case>.<config>`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkasim.config.types import ConfigValueError

if TYPE_CHECKING:
    from kafkasim.broker.config import BrokerConfig

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
_URI = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)")


@dataclass(frozen=True)
class EndPoint:
    """Kafka's EndPoint: a listener name, host (None: all interfaces) and port, and its protocol."""

    listener_name: str
    host: str | None
    port: int
    security_protocol: str

    def connection_string(self, port: int | None = None) -> str:
        host = self.host or ""
        host = f"[{host}]" if ":" in host else host
        return f"{self.listener_name}://{host}:{self.port if port is None else port}"


def parse_protocol_map(text: str) -> dict[str, str]:
    """listener.security.protocol.map: "NAME:PROTOCOL,..." (names upper-cased, as ListenerName.normalised)."""
    out: dict[str, str] = {}
    for entry in (e.strip() for e in text.split(",") if e.strip()):
        name, sep, proto = entry.rpartition(":")
        if not sep or not name:
            raise ConfigValueError(f"Invalid value {text} for configuration listener.security.protocol.map: "
                                   f"Map entry should be of form <key>:<value>")
        if proto.strip().upper() not in PROTOCOLS:
            raise ConfigValueError(f"Invalid value {text} for configuration listener.security.protocol.map: "
                                   f"No enum constant org.apache.kafka.common.security.auth.SecurityProtocol."
                                   f"{proto.strip()}")
        out[name.strip().upper()] = proto.strip().upper()
    return out


def listener_list_to_endpoints(text: str, protocols: dict[str, str], require_distinct_ports: bool = True,
                               ) -> list[EndPoint]:
    """CoreUtils.listenerListToEndPoints: parse, then each name once and (bound ones) each port once."""
    endpoints = []
    for entry in (e.strip() for e in text.strip().split(",") if e.strip()):
        m = _URI.match(entry)
        if m is None:
            raise ConfigValueError(f"Error creating broker listeners from '{text}': Unable to parse {entry} "
                                   f"to a broker endpoint")
        name = m.group(1).upper()
        if name not in protocols:
            raise ConfigValueError(f"Error creating broker listeners from '{text}': No security protocol defined "
                                   f"for listener {name}")
        endpoints.append(EndPoint(name, m.group(2) or None, int(m.group(3)), protocols[name]))
    if len({e.listener_name for e in endpoints}) != len(endpoints):
        raise ConfigValueError(f"requirement failed: Each listener must have a different name, listeners: {text}")
    ports = [e.port for e in endpoints if e.port != 0]   # port 0 (any free port) may repeat
    if require_distinct_ports and len(set(ports)) != len(ports):
        raise ConfigValueError(f"requirement failed: Each listener must have a different port, listeners: {text}")
    return endpoints


@dataclass(frozen=True)
class Listeners:
    """What the broker binds, what it advertises, and which listener its own clients use."""

    bound: tuple[EndPoint, ...]
    advertised: tuple[EndPoint, ...]
    inter_broker: str          # the inter-broker listener's name
    protocols: dict[str, str]

    def advertised_for(self, name: str) -> EndPoint | None:
        return next((e for e in self.advertised if e.listener_name == name), None)


def listeners_of(cfg: BrokerConfig) -> Listeners:
    """The broker's listeners, checked as KafkaConfig.validateValues checks them."""
    protocols = parse_protocol_map(cfg.listener_security_protocol_map)
    text = cfg.listeners if cfg.listeners is not None else f"PLAINTEXT://{cfg.host}:{cfg.port}"
    bound = listener_list_to_endpoints(text, protocols)
    advertised = bound if cfg.advertised_listeners is None else \
        listener_list_to_endpoints(cfg.advertised_listeners, protocols, require_distinct_ports=False)
    inter = _inter_broker_listener(cfg, protocols)
    adv_names = [e.listener_name for e in advertised]
    names = [e.listener_name for e in bound]
    if inter not in adv_names:
        raise ConfigValueError(f"requirement failed: inter.broker.listener.name must be a listener name defined in "
                               f"advertised.listeners. The valid options based on currently configured listeners "
                               f"are {','.join(adv_names)}")
    if not set(adv_names) <= set(names):
        raise ConfigValueError(f"requirement failed: advertised.listeners listener names must be equal to or a "
                               f"subset of the ones defined in listeners. Found {','.join(adv_names)}. The valid "
                               f"options based on the current configuration are {','.join(names)}")
    if any(e.host == "0.0.0.0" for e in advertised):
        raise ConfigValueError("requirement failed: advertised.listeners cannot use the nonroutable meta-address "
                               "0.0.0.0. Use a routable IP address.")
    return Listeners(tuple(bound), tuple(advertised), inter, protocols)


def _inter_broker_listener(cfg: BrokerConfig, protocols: dict[str, str]) -> str:
    if cfg.inter_broker_listener_name is not None:
        if "security.inter.broker.protocol" in cfg.properties:
            raise ConfigValueError("Only one of inter.broker.listener.name and security.inter.broker.protocol "
                                   "should be set.")
        name = cfg.inter_broker_listener_name.upper()
        if name not in protocols:
            raise ConfigValueError(f"Listener with name {name} defined in inter.broker.listener.name not found in "
                                   f"listener.security.protocol.map.")
        return name
    proto = cfg.security_inter_broker_protocol.upper()
    if proto not in PROTOCOLS:
        raise ConfigValueError(f"Invalid value {cfg.security_inter_broker_protocol} for configuration "
                               f"security.inter.broker.protocol: String must be one of: {', '.join(PROTOCOLS)}")
    return proto


def listener_value(cfg: BrokerConfig, listener: str, name: str) -> str | None:
    """A config as one listener sees it: `listener.name.<listener>.<name>`, else the broker's."""
    override = cfg.listener_overrides.get(f"listener.name.{listener.lower()}.{name}")
    if override is not None:
        return override
    value = cfg.value(name)
    return None if value is None else str(value)


def check_security(cfg: BrokerConfig) -> None:
    """Kafka's startup checks of the listener and security configs (ConfigValueError)."""
    from kafkasim.broker.security.inter_broker import inter_broker_security  # both build on the listeners
    from kafkasim.broker.security.settings import security_of
    listeners = listeners_of(cfg)
    for endpoint in listeners.bound:
        security_of(cfg, endpoint)
    inter_broker_security(cfg)   # the broker's own login to the inter-broker listener
