"""The broker's channel to the active controller (AlterPartition, ControlledShutdown).

The controller's address comes from ``/controller`` in ZooKeeper (watched by the server) and
from UpdateMetadata. A call to a controller that is not active fails with NOT_CONTROLLER; the
caller retries once the address changes. The channel is opened by ``channel_factory``: TLS
when the broker's inter-broker listener is SSL (common/security/tls.py).
"""

from __future__ import annotations

import asyncio

import grpc

from common.grpc_options import ChannelFactory, insecure_channel
from common.rpc import replog_pb2_grpc


class ControllerUnavailable(Exception):
    pass


class ControllerClient:
    def __init__(self, channel_factory: ChannelFactory = insecure_channel) -> None:
        self.channel_factory = channel_factory
        self.address: str | None = None
        self.controller_id = -1
        self._channel: grpc.aio.Channel | None = None
        self._stub: replog_pb2_grpc.ControllerStub | None = None
        self._changed = asyncio.Event()

    def set_controller(self, controller_id: int, address: str | None) -> None:
        if address == self.address and controller_id == self.controller_id:
            return
        self.controller_id = controller_id
        self.address = address
        old = self._channel
        self._channel = self._stub = None
        if old is not None:
            asyncio.ensure_future(old.close())
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_for_change(self, timeout: float) -> None:
        try:
            await asyncio.wait_for(self._changed.wait(), timeout)
        except TimeoutError:
            pass

    def stub(self) -> replog_pb2_grpc.ControllerStub:
        if not self.address:
            raise ControllerUnavailable("no active controller is known")
        if self._stub is None:
            self._channel = self.channel_factory(self.address, ())
            self._stub = replog_pb2_grpc.ControllerStub(self._channel)
        return self._stub

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
        self._channel = self._stub = None
