"""Which security each listener of a process uses: from its configuration and a listener name
(``listener.security.protocol.map``, Kafka's), the channels it opens to others' listener, the
principal builder of its servicers and the TLS arguments of its Kafka listener.

Kept apart from common/security/tls.py (the TLS material itself) and common/listeners.py (the
listener names and addresses), which it joins: neither needs the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from common.grpc_options import insecure_channel
from common.listeners import PLAINTEXT, SSL, listener_config
from common.security.principal import PrincipalBuilder
from common.security.tls import (
    SslChannelFactory,
    SslPrincipalBuilder,
    SslSettings,
    kafka_server_context,
)


def listener_protocol(cfg: Mapping[str, Any], listener: str) -> str:
    return listener_config(cfg).protocol_map.get(listener, PLAINTEXT)


def channel_factory_for(cfg: Mapping[str, Any], listener: str):
    """The ChannelFactory a process uses to reach others' ``listener`` (its inter-broker or
    control-plane listener): TLS with the process's own material for that listener when it
    is mapped to SSL, plaintext otherwise (Kafka: the inter-broker client's security protocol
    is its listener's)."""
    if listener_protocol(cfg, listener) != SSL:
        return insecure_channel
    return SslChannelFactory(SslSettings.from_properties(cfg, listener))


def principal_builder_for(cfg: Mapping[str, Any], listener: str) -> PrincipalBuilder:
    """The builder for a listener's servicer: the SSL one on an SSL listener, the plaintext
    default (``User:ANONYMOUS``) otherwise."""
    if listener_protocol(cfg, listener) != SSL:
        return PrincipalBuilder()
    return SslPrincipalBuilder(SslSettings.from_properties(cfg, listener)
                               .principal_mapping_rules)


def kafka_listener_tls(cfg: Mapping[str, Any], listener: str) -> dict[str, Any]:
    """KafkaListener's TLS arguments for ``listener``: its SSLContext and principal builder
    when the listener is SSL, none otherwise (plaintext, ``User:ANONYMOUS``)."""
    if listener_protocol(cfg, listener) != SSL:
        return {}
    return {"ssl_context": kafka_server_context(SslSettings.from_properties(cfg, listener)),
            "principal_builder": principal_builder_for(cfg, listener)}
