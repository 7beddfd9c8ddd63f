"""One gRPC server per listener (KIP-103): a servicer instance per listener is how a handler
knows which listener its request arrived on - grpc.aio does not tell a handler the local
address of its connection - and so which endpoints a Metadata answer gives.

A listener mapped to SSL in ``listener.security.protocol.map`` is bound with TLS credentials
built from its ``ssl.*`` properties (common/security/tls.py: client auth per
``ssl.client.auth``, certificate files reloaded when they change); the others in plaintext."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import grpc

from common.grpc_limits import server_interceptors
from common.grpc_options import DEFAULT_MAX_REQUEST_BYTES, server_options
from common.listeners import EndPoint, listener_config


@dataclass(frozen=True)
class ListenerServer:
    listener: str
    server: grpc.aio.Server
    port: int  # as bound: the configured port, or the one picked for port 0


def bind_listeners(listeners: tuple[EndPoint, ...],
                   config: Mapping[str, Any] | None = None) -> list[ListenerServer]:
    """A server bound to each listener's address, not started: the caller adds its services
    (one servicer per listener) and then starts them. Without ``config`` every listener is
    plaintext. Every server refuses a request larger than ``socket.request.max.bytes``, and a
non-data request too large or with too many elements for its method (common/grpc_limits.py)."""
    lc = listener_config(config) if config is not None else None
    max_request = (config or {}).get("socket.request.max.bytes", DEFAULT_MAX_REQUEST_BYTES)
    out = []
    for listener in listeners:
        if lc is not None and lc.is_ssl(listener.listener):
            from common.security.tls import (
                SslSettings,
                grpc_server_credentials,
                ssl_server_interceptors,
            )
            settings = SslSettings.from_properties(config, listener.listener)
            # a certificate no ssl.principal.mapping.rules rule matches is refused
            server = grpc.aio.server(options=server_options(max_request),
                                     interceptors=[*ssl_server_interceptors(settings),
                                                   *server_interceptors()])
            port = server.add_secure_port(listener.address, grpc_server_credentials(settings))
        else:
            server = grpc.aio.server(options=server_options(max_request),
                                     interceptors=server_interceptors())
            port = server.add_insecure_port(listener.address)
        if port == 0:
            raise OSError(f"cannot listen on {listener}")
        out.append(ListenerServer(listener.listener, server, port))
    return out
