"""Listeners: Kafka's multi-listener model (KIP-103 "Separation of Internal and External traffic").

A process may listen on several named endpoints (``listeners=INTERNAL://0.0.0.0:9092,
EXTERNAL://0.0.0.0:19092``) and advertise a different address for each
(``advertised.listeners=INTERNAL://broker-1:9092,EXTERNAL://127.0.0.1:19092``):

- a client is answered with the endpoints of the listener its request arrived on, so a client
  outside a container network is given addresses it can reach (KIP-103);
- replication and controller->broker traffic use ``inter.broker.listener.name``;
- ``listener.security.protocol.map`` names each listener's security protocol: PLAINTEXT or SSL
  (TLS, mutual with ``ssl.client.auth=required``: common/security/tls.py); SASL is not served;
- ``control.plane.listener.name`` (KIP-291) is the broker listener the controller sends its
  requests to; unset, the inter-broker listener;
- a listener named in ``kafka.listener.names`` (default ``KAFKA``) speaks Kafka's wire protocol
  to unmodified Kafka clients (broker/kafka_listener.py); every other listener speaks gRPC.
  Replication and controller traffic stay on gRPC, so the inter-broker listener is never one.

The un-named form ``host:port`` (replog's only form before listeners had names) is one listener
named PLAINTEXT, which is what Kafka calls a listener written ``PLAINTEXT://host:port``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from common.errors import ConfigError

PLAINTEXT = "PLAINTEXT"
SSL = "SSL"
# Kafka's SecurityProtocol names; PLAINTEXT and SSL are served.
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SERVED_PROTOCOLS = (PLAINTEXT, SSL)
# Kafka's default listener.security.protocol.map: each protocol name maps to itself; replog
# adds its Kafka-protocol listener's default name, so ``listeners=PLAINTEXT://:9092,
# KAFKA://:9093`` needs no map, as ``PLAINTEXT://`` needs none in Kafka.
KAFKA_LISTENER = "KAFKA"
DEFAULT_PROTOCOL_MAP = {**{p: p for p in SECURITY_PROTOCOLS}, KAFKA_LISTENER: PLAINTEXT}
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


@dataclass(frozen=True)
class EndPoint:
    """One listener's name and address (Kafka's EndPoint, without the security protocol: the
    listener's, from ``listener.security.protocol.map``)."""

    listener: str
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def __str__(self) -> str:  # Kafka's connectionString, as in /brokers/ids/<id> "endpoints"
        return f"{self.listener}://{self.host}:{self.port}"


def parse_endpoint(text: str) -> EndPoint:
    """``NAME://host:port`` or ``host:port`` (listener PLAINTEXT). An empty host means every
    interface (0.0.0.0), as in Kafka. Names are upper-cased (Kafka's ListenerName.normalised)."""
    item = text.strip()
    name, sep, addr = item.partition("://")
    if not sep:
        name, addr = PLAINTEXT, item
    host, colon, port = addr.rpartition(":")
    host = host.strip("[]")
    if not colon or not port.isdigit() or not 0 <= int(port) <= 65535 or \
            not _NAME.match(name):
        raise ValueError(f"listener {item!r} is not of the form [NAME://]host:port")
    return EndPoint(name.upper(), host or "0.0.0.0", int(port))


def parse_endpoints(text: str) -> list[EndPoint]:
    """A ``listeners``/``advertised.listeners`` value: comma-separated endpoints with distinct
    listener names (Kafka: "Each listener must have a different name")."""
    out = [parse_endpoint(x) for x in text.split(",") if x.strip()]
    if not out:
        raise ValueError("must list at least one listener")
    names = [e.listener for e in out]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise ValueError(f"listener name {dup} is used more than once")
    return out


def parse_protocol_map(text: str) -> dict[str, str]:
    """``listener.security.protocol.map``: ``NAME:PROTOCOL,...``; PLAINTEXT and SSL are served."""
    out: dict[str, str] = {}
    for item in (x.strip() for x in text.split(",") if x.strip()):
        name, sep, proto = item.partition(":")
        name, proto = name.strip().upper(), proto.strip().upper()
        if not sep or not _NAME.match(name):
            raise ValueError(f"entry {item!r} is not of the form NAME:PROTOCOL")
        if proto not in SECURITY_PROTOCOLS:
            raise ValueError(f"unknown security protocol {proto!r} for listener {name}")
        if proto not in SERVED_PROTOCOLS:
            raise ValueError(f"listener {name}: security protocol {proto} is not supported "
                             f"(replog serves PLAINTEXT and SSL)")
        if name in out:
            raise ValueError(f"listener {name} is mapped more than once")
        out[name] = proto
    if not out:
        raise ValueError("must map at least one listener")
    return out


@dataclass(frozen=True)
class ListenerConfig:
    """The validated listener settings of one broker or controller."""

    listeners: tuple[EndPoint, ...]    # what the process binds, in configured order
    advertised: tuple[EndPoint, ...]   # what it registers (advertised.listeners or listeners)
    protocol_map: Mapping[str, str]
    inter_broker_listener_name: str
    kafka_listener_names: frozenset[str] = frozenset()  # these speak Kafka's protocol
    control_plane_listener_name: str | None = None  # KIP-291; None: the inter-broker one

    def protocol(self, name: str) -> str:
        return self.protocol_map.get(name, PLAINTEXT)

    def is_ssl(self, name: str) -> bool:
        return self.protocol(name) == SSL

    @property
    def controller_to_broker_listener(self) -> str:
        """The broker listener the controller's requests go to (KIP-291)."""
        return self.control_plane_listener_name or self.inter_broker_listener_name

    def is_kafka(self, name: str) -> bool:
        return name in self.kafka_listener_names

    def advertised_for(self, name: str) -> EndPoint | None:
        return next((e for e in self.advertised if e.listener == name), None)


def _origin(cfg: Any, key: str) -> str:
    where = getattr(cfg, "origin", {}).get(key)
    return f" ({where})" if where else ""


def listener_config(cfg: Mapping[str, Any]) -> ListenerConfig:
    """Cross-key rules over a parsed Config; ConfigError (one line naming the key) otherwise."""
    listeners = tuple(cfg["listeners"])
    advertised = tuple(cfg["advertised.listeners"] or listeners)
    names = [e.listener for e in listeners]
    protocols = cfg["listener.security.protocol.map"] or DEFAULT_PROTOCOL_MAP

    ports = [e.port for e in listeners if e.port != 0]
    dup_port = next((p for p in ports if ports.count(p) > 1), None)
    if dup_port is not None:
        # Kafka: "Each listener must have a different port".
        raise ConfigError(f"configuration key 'listeners'{_origin(cfg, 'listeners')}: port "
                          f"{dup_port} is used by more than one listener")
    for name in names:
        proto = protocols.get(name)
        if proto is None:
            raise ConfigError(
                f"configuration key 'listener.security.protocol.map'"
                f"{_origin(cfg, 'listener.security.protocol.map')} has no security protocol "
                f"for listener {name} (e.g. {name}:PLAINTEXT)")
        if proto not in SERVED_PROTOCOLS:  # a listener named SASL_SSL under the default map
            raise ConfigError(
                f"configuration key 'listener.security.protocol.map': listener {name} uses "
                f"security protocol {proto}; replog serves PLAINTEXT and SSL")
        if proto == SSL:
            from common.security.tls import SslSettings  # the listener's keystore must load
            SslSettings.from_properties(cfg, name).check_server(name)
    # KIP-103: advertised listener names must be among the listeners (a subset is allowed:
    # a listener left out is bound but not registered).
    for e in advertised:
        if e.listener not in names:
            raise ConfigError(
                f"configuration key 'advertised.listeners'"
                f"{_origin(cfg, 'advertised.listeners')}: listener {e.listener} is not in "
                f"listeners ({', '.join(names)})")
    kafka_names = cfg.get("kafka.listener.names")
    kafka_names = frozenset(n.upper() for n in
                            ([KAFKA_LISTENER] if kafka_names is None else kafka_names))
    grpc_advertised = [e for e in advertised if e.listener not in kafka_names]
    inter = cfg["inter.broker.listener.name"]
    if inter is None and not grpc_advertised:
        raise ConfigError("configuration key 'listeners': every advertised listener speaks "
                          "Kafka's protocol (kafka.listener.names); replication needs a gRPC "
                          "one")
    if inter is None:
        # Kafka derives the default from security.inter.broker.protocol=PLAINTEXT, i.e. the
        # listener named PLAINTEXT (the un-named form's only listener); with named listeners
        # and none called PLAINTEXT, replog takes the first advertised gRPC one.
        inter = PLAINTEXT if any(e.listener == PLAINTEXT for e in grpc_advertised) \
            else grpc_advertised[0].listener
    else:
        inter = inter.upper()
        if all(e.listener != inter for e in advertised):
            raise ConfigError(
                f"configuration key 'inter.broker.listener.name'"
                f"{_origin(cfg, 'inter.broker.listener.name')}: {inter} is not a listener in "
                f"advertised.listeners ({', '.join(e.listener for e in advertised)})")
        if inter in kafka_names:
            raise ConfigError(
                f"configuration key 'inter.broker.listener.name'"
                f"{_origin(cfg, 'inter.broker.listener.name')}: {inter} speaks Kafka's "
                f"protocol (kafka.listener.names); replication stays on gRPC")
    control = cfg.get("control.plane.listener.name")
    if control is not None:
        control = control.upper()
        # A broker names one of its listeners; a controller names the brokers' listener it
        # sends to, which it need not have itself, but whose security protocol it must know.
        if control in kafka_names or control not in protocols:
            raise ConfigError(
                f"configuration key 'control.plane.listener.name'"
                f"{_origin(cfg, 'control.plane.listener.name')}: {control} is not a gRPC "
                f"listener with a security protocol in listener.security.protocol.map")
    return ListenerConfig(listeners, advertised, dict(protocols), inter, kafka_names, control)


def encode_endpoints(endpoints: Iterable[EndPoint]) -> list[str]:
    return [str(e) for e in endpoints]


def decode_endpoints(items: Iterable[str]) -> tuple[EndPoint, ...]:
    return tuple(parse_endpoint(s) for s in items)


WILDCARD_HOSTS = ("0.0.0.0", "", "::")


def advertised_endpoints(lc: ListenerConfig, bound_ports: Mapping[str, int],
                         wildcard_host: str) -> tuple[EndPoint, ...]:
    """The endpoints to register: an advertised port 0 is the port its listener was bound to
    (``listeners=...:0`` picks a free port), a wildcard host is ``wildcard_host`` (Kafka would
    refuse 0.0.0.0 there; replog has always registered a reachable name instead)."""
    return tuple(EndPoint(e.listener, wildcard_host if e.host in WILDCARD_HOSTS else e.host,
                          e.port or bound_ports[e.listener])
                 for e in lc.advertised)
