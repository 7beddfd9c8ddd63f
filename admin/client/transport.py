"""gRPC channels to brokers and controllers, one per address, shared by a client's parts.

Channel options (common/grpc_options.py, CLIENT_OPTIONS) matter for fault handling: gRPC's
default reconnect backoff grows to 120 s, so a client that saw a broker die would not notice it
coming back for minutes; it is capped at 1 s. Calls never use wait_for_ready: a dead broker
fails the call at once (UNAVAILABLE), and the producer/consumer move on to another leader after
a metadata refresh.
"""

from __future__ import annotations

import grpc
import grpc.aio

from admin.client.errors import from_rpc_error
from common.grpc_options import CLIENT_OPTIONS
from common.rpc import replog_pb2_grpc


def parse_address(text: str) -> str:
    """Normalise ``host:port`` (a ``PLAINTEXT://`` prefix is accepted and dropped)."""
    addr = text.strip().split("://", 1)[-1]
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"invalid server address {text!r}: expected host:port")
    return f"{host}:{int(port)}"


def parse_bootstrap_servers(text: str | list[str] | tuple[str, ...]) -> list[str]:
    items = text.split(",") if isinstance(text, str) else list(text)
    out = [parse_address(x) for x in items if x.strip()]
    if not out:
        raise ValueError("no bootstrap server given (expected host:port[,host:port...])")
    return out


class ChannelPool:
    """Lazily opened grpc.aio channels and stubs by address. Close it when done."""

    def __init__(self) -> None:
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._broker_stubs: dict[str, replog_pb2_grpc.BrokerStub] = {}
        self._controller_stubs: dict[str, replog_pb2_grpc.ControllerStub] = {}

    def channel(self, address: str) -> grpc.aio.Channel:
        ch = self._channels.get(address)
        if ch is None:
            ch = self._channels[address] = grpc.aio.insecure_channel(address,
                                                                     options=CLIENT_OPTIONS)
        return ch

    def broker(self, address: str) -> replog_pb2_grpc.BrokerStub:
        stub = self._broker_stubs.get(address)
        if stub is None:
            stub = self._broker_stubs[address] = replog_pb2_grpc.BrokerStub(self.channel(address))
        return stub

    def controller(self, address: str) -> replog_pb2_grpc.ControllerStub:
        stub = self._controller_stubs.get(address)
        if stub is None:
            stub = self._controller_stubs[address] = replog_pb2_grpc.ControllerStub(
                self.channel(address))
        return stub

    async def close(self) -> None:
        channels = list(self._channels.values())
        self._channels.clear()
        self._broker_stubs.clear()
        self._controller_stubs.clear()
        for ch in channels:
            await ch.close()


async def call(method, request, address: str, timeout_s: float):
    """Invoke a unary RPC; a failure is raised as a KafkaError (TransportError if no answer)."""
    try:
        return await method(request, timeout=timeout_s)
    except grpc.RpcError as e:
        raise from_rpc_error(e, address) from None
