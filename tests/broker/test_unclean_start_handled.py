"""A broker's clean-shutdown marker says clean only once a controller has handled the
incarnation's unclean registration (KIP-966, cluster simulation seeds 425 and 1225): the proof
is a controller request carrying this incarnation's broker epoch. The controller sends one only
after it has added that registration to its live brokers, and the same step (onBrokerStartup or
the failover) first writes the broker out of every ISR and ELR - handleBrokerUncleanShutdown -
to ZooKeeper, before any request goes out."""

from __future__ import annotations

from broker.servicer import leader_and_isr_request
from broker.storage.log_manager import LogManager
from common.errors import ErrorCode
from common.names import TopicPartition
from tests.broker.inprocess import Node, leader_and_isr

T0 = TopicPartition("t", 0)


def registers_clean(node: Node) -> bool:
    """What the next start of the node's log dirs registers."""
    lm = LogManager([d.path for d in node.lm.dirs], node.id)
    lm.startup()
    clean = lm.had_clean_shutdown
    lm.shutdown()
    return clean


async def test_only_a_request_for_this_broker_epoch_makes_the_next_start_clean(tmp_path):
    node = Node(1, tmp_path)  # an empty dir: no marker, an unclean start
    assert not node.lm.had_clean_shutdown
    # A request that does not name this broker epoch (-1: sent by a tool, or before KIP-380)
    # is applied, but proves nothing about the registration.
    req = leader_and_isr(node, 1, 0, [1], [1], [], tp=T0)
    req.broker_epoch = -1
    assert [c for _, c in await node.rm.leader_and_isr(leader_and_isr_request(req))] == \
        [ErrorCode.NONE]
    node.lm.shutdown()
    assert not registers_clean(node)

    node = Node(1, tmp_path)
    req = leader_and_isr(node, 1, 1, [1], [1], [], tp=T0)  # this incarnation's broker epoch
    assert [c for _, c in await node.rm.leader_and_isr(leader_and_isr_request(req))] == \
        [ErrorCode.NONE]
    node.lm.shutdown()
    assert registers_clean(node)


async def test_a_handled_unclean_start_rewrites_the_registration_clean_once(tmp_path):
    """A controller failover re-applies KIP-966's removal to every broker whose registration
    says unclean; once a controller has handled this start, the registration is rewritten to
    say clean (BrokerServer._rewrite_registration), so a failover does not depose the broker
    again from partitions it caught up with since."""
    node = Node(1, tmp_path)
    rewrites = []
    node.lm.on_unclean_start_handled = lambda: rewrites.append(node.lm.registration_clean)
    assert not node.lm.registration_clean
    for epoch in (1, 2):
        req = leader_and_isr(node, 1, epoch, [1], [1], [], tp=T0)
        await node.rm.leader_and_isr(leader_and_isr_request(req))
    assert rewrites == [True]
    assert node.lm.registration_clean
    node.lm.shutdown()
