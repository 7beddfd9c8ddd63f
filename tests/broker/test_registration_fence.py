"""A broker refuses controller requests until it has registered in ZooKeeper (replog chaos
found a restarted broker applying what the controller had queued for its previous process)."""

from __future__ import annotations

import pytest

from broker.servicer import leader_and_isr_request
from common.errors import ErrorCode, RequestError
from common.names import TopicPartition
from tests.broker.inprocess import Node, leader_and_isr

T0 = TopicPartition("t", 0)


async def test_controller_requests_wait_for_the_brokers_registration(tmp_path):
    # A restarted broker serves gRPC before it registers in ZooKeeper, and the controller may
    # still hold requests queued for its previous process at the same address. Applied, one
    # UpdateMetadata naming 3 of a topic's 6 partitions made the new process answer Metadata
    # with a 3-partition topic (chaos seed 2). Until its registration every controller
    # request is refused as a previous incarnation's (STALE_BROKER_EPOCH, which the
    # controller's sender retries); after it, the same request is applied.
    node = Node(1, tmp_path)
    node.rm.registered = False  # as BrokerServer.start leaves it until _register()
    req = leader_and_isr_request(leader_and_isr(node, 1, 0, [1], [1], [], tp=T0))
    with pytest.raises(RequestError) as e:
        await node.rm.leader_and_isr(req)
    assert e.value.error_code == ErrorCode.STALE_BROKER_EPOCH
    assert node.lm.get_log(T0) is None  # nothing applied
    node.rm.registered = True
    assert [code for _, code in await node.rm.leader_and_isr(req)] == [ErrorCode.NONE]
    node.lm.shutdown()
