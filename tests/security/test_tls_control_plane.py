"""KIP-291 control.plane.listener.name: the controller sends its requests to the brokers'
endpoint of that listener (real gRPC to a fake broker), and the process config accepts it."""

from __future__ import annotations

import dataclasses

import pytest

from common.config import build_config
from common.controller_requests import LeaderAndIsrRequest
from common.errors import ConfigError
from common.listeners import EndPoint, listener_config
from controller.channel import ControllerChannelManager
from controller.request_batch import BrokerBatch
from harness.ports import free_port
from tests.controller.fakes import FakeBroker


def _batch(epoch: int) -> BrokerBatch:
    bb = BrokerBatch(broker_id=1, broker_epoch=epoch)
    bb.leader_and_isr.append(LeaderAndIsrRequest(controller_id=1, controller_epoch=1,
                                                 broker_epoch=epoch, partition_states=(),
                                                 topic_ids={}, live_leaders=()))
    return bb


@pytest.mark.parametrize("listener,opened", [("control", "CONTROL"), (None, "INTERNAL")])
async def test_the_controller_connects_to_the_control_plane_listener(listener, opened):
    broker = await FakeBroker(1, epoch=50).start()
    dead = free_port()  # nothing listens on the inter-broker endpoint
    endpoints = {"INTERNAL": f"127.0.0.1:{dead}", "CONTROL": f"127.0.0.1:{broker.port}"}
    seen = []

    def factory(address, options):
        from common.grpc_options import insecure_channel
        seen.append(address)
        return insecure_channel(address, options)

    channel = ControllerChannelManager(retry_backoff_s=0.01, channel_factory=factory,
                                       listener=listener, request_timeout_s=1.0)
    try:
        reg = dataclasses.replace(
            broker.registration(), port=dead, epoch=50,
            endpoints=(EndPoint("INTERNAL", "127.0.0.1", dead),
                       EndPoint("CONTROL", "127.0.0.1", broker.port)))
        channel.update_brokers({1: reg})
        assert seen == [endpoints[opened]]
        if listener is not None:
            [delivery] = channel.send({1: _batch(50)})
            assert await delivery.done is True
            assert len(broker.of("LeaderAndIsr")) == 1
    finally:
        await channel.close()
        await broker.stop()


def test_control_plane_listener_name_in_the_config():
    base = [("listeners", "INTERNAL://127.0.0.1:0,CONTROL://127.0.0.1:0", "f"),
            ("listener.security.protocol.map", "INTERNAL:PLAINTEXT,CONTROL:PLAINTEXT", "f"),
            ("inter.broker.listener.name", "INTERNAL", "f")]
    assert listener_config(build_config(base)).controller_to_broker_listener == "INTERNAL"
    cfg = build_config(base + [("control.plane.listener.name", "control", "f")])
    assert listener_config(cfg).controller_to_broker_listener == "CONTROL"
    # a controller names the brokers' listener; it must know its protocol
    cfg = build_config([("listeners", "PLAINTEXT://127.0.0.1:0", "f"),
                        ("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CTL:SSL", "f"),
                        ("control.plane.listener.name", "CTL", "f")])
    assert listener_config(cfg).is_ssl("CTL")
    with pytest.raises(ConfigError, match="'control.plane.listener.name'.*NOPE"):
        build_config(base + [("control.plane.listener.name", "NOPE", "f")])
