"""The controller's channel to a broker (real gRPC to a fake broker): what is retried."""

from __future__ import annotations

import dataclasses

from common.controller_requests import LeaderAndIsrRequest
from controller.channel import ControllerChannelManager
from controller.request_batch import BrokerBatch
from tests.controller.fakes import FakeBroker


def _batch(epoch: int) -> BrokerBatch:
    bb = BrokerBatch(broker_id=1, broker_epoch=epoch)
    bb.leader_and_isr.append(LeaderAndIsrRequest(controller_id=1, controller_epoch=1,
                                                 broker_epoch=epoch, partition_states=(),
                                                 topic_ids={}, live_leaders=()))
    return bb


async def test_leader_and_isr_refused_by_a_freshly_registered_broker_is_retried():
    """Broker epochs: the broker answers STALE_BROKER_EPOCH to a request that
    carries its *current* registration epoch (it has not recorded that epoch yet). On the
    commit before, FAILED_PRECONDITION was never retried and the new incarnation never got
    its LeaderAndIsr."""
    broker = await FakeBroker(1, epoch=50, lagging_epoch_refusals=2).start()
    channel = ControllerChannelManager(retry_backoff_s=0.01)
    try:
        channel.update_brokers({1: dataclasses.replace(broker.registration(), epoch=50)})
        [delivery] = channel.send({1: _batch(50)})
        assert await delivery.done is True
        assert len(broker.rejected) == 2 and len(broker.of("LeaderAndIsr")) == 1
    finally:
        await channel.close()
        await broker.stop()


async def test_channels_come_from_the_injected_factory_with_the_controller_options():
    """The transport seam: the manager opens its broker channels through the factory
    it is given, with the controller-to-broker options of common/grpc_options.py."""
    from common.grpc_options import CONTROLLER_TO_BROKER_OPTIONS, insecure_channel
    opened = []

    def factory(address, options):
        opened.append((address, tuple(options)))
        return insecure_channel(address, options)

    broker = await FakeBroker(1, epoch=50).start()
    channel = ControllerChannelManager(retry_backoff_s=0.01, channel_factory=factory)
    try:
        reg = dataclasses.replace(broker.registration(), epoch=50)
        channel.update_brokers({1: reg})
        [delivery] = channel.send({1: _batch(50)})
        assert await delivery.done is True
        assert opened == [(reg.address, CONTROLLER_TO_BROKER_OPTIONS)]
    finally:
        await channel.close()
        await broker.stop()
