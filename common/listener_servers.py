"""One gRPC server per listener (KIP-103): a servicer instance per listener is how a handler
knows which listener its request arrived on - grpc.aio does not tell a handler the local
address of its connection - and so which endpoints a Metadata answer gives."""

from __future__ import annotations

from dataclasses import dataclass

import grpc

from common.grpc_options import SERVER_OPTIONS
from common.listeners import EndPoint


@dataclass(frozen=True)
class ListenerServer:
    listener: str
    server: grpc.aio.Server
    port: int  # as bound: the configured port, or the one picked for port 0


def bind_listeners(listeners: tuple[EndPoint, ...]) -> list[ListenerServer]:
    """A server bound to each listener's address, not started: the caller adds its services
    (one servicer per listener) and then starts them."""
    out = []
    for listener in listeners:
        server = grpc.aio.server(options=SERVER_OPTIONS)
        port = server.add_insecure_port(listener.address)
        if port == 0:
            raise OSError(f"cannot listen on {listener}")
        out.append(ListenerServer(listener.listener, server, port))
    return out
