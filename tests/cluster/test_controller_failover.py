"""Controller failover with real processes: a standby takes over when the active controller
dies and the cluster keeps electing; a paused controller that wakes after its session expired
is fenced and changes nothing."""

from __future__ import annotations

import json

import pytest

from client.admin_client import AdminClient
from client.producer import Producer
from common import zk_layout as zl
from tests.cluster.helpers import eventually, partition_state, standby_of

pytestmark = pytest.mark.integration

FAST = {"zookeeper.session.timeout.ms": 2000, "replica.lag.time.max.ms": 2000,
        "replica.fetch.wait.max.ms": 200}


def partition_znode(c, topic, p):
    data, stat = c.zk_client().get(zl.partition_state_path(topic, p))
    return json.loads(data), stat.version


async def test_standby_takes_over_and_keeps_electing(cluster_factory):
    c = cluster_factory(brokers=3, controllers=2, overrides=FAST)
    bs = c.bootstrap_servers
    first = c.active_controller_id()
    epoch = c.controller_epoch()
    async with AdminClient(bs) as admin:
        await admin.create_topic("t", 1, 3, configs={"min.insync.replicas": "2"})
    before = await eventually(lambda: partition_state(bs, "t"), what="leader")

    c.controller(first).kill()
    second = c.wait_for_controller(timeout=30, exclude=[first])
    assert second != first and c.controller_epoch() == epoch + 1

    # the new controller elects a new leader when the partition's leader dies
    c.broker(before.leader).kill()
    after = await eventually(
        lambda: _led_by_other(bs, before.leader), timeout=30, what="re-election")
    assert after.leader_epoch > before.leader_epoch
    state, _ = partition_znode(c, "t", 0)
    assert state["controller_epoch"] == epoch + 1 and state["leader"] == after.leader
    # and admin operations go to the new controller
    async with AdminClient(bs) as admin:
        await admin.create_topic("u", 1, 2)
    async with Producer(bs, acks="all", delivery_timeout_ms=20000) as p:
        assert (await p.send_and_wait("u", b"x")).offset == 0


async def _led_by_other(bs, old):
    s = await partition_state(bs, "t")
    return s if s is not None and s.leader not in (-1, old) else None


async def test_paused_controller_is_fenced_when_it_wakes(cluster_factory):
    c = cluster_factory(brokers=3, controllers=2, overrides=FAST)
    bs = c.bootstrap_servers
    first = c.active_controller_id()
    epoch = c.controller_epoch()
    async with AdminClient(bs) as admin:
        await admin.create_topic("t", 1, 3)
    await eventually(lambda: partition_state(bs, "t"), what="leader")

    c.controller(first).pause()  # longer than the session timeout: its session expires
    try:
        second = c.wait_for_controller(timeout=30, exclude=[first])
        assert c.controller_epoch() == epoch + 1
        # the new controller handles a broker failure while the old one is asleep
        s = await partition_state(bs, "t")
        c.broker(s.leader).kill()
        moved = await eventually(lambda: _led_by_other(bs, s.leader), timeout=30,
                                 what="election by the new controller")
        znode_before = partition_znode(c, "t", 0)
    finally:
        c.controller(first).resume()
    # Woken, it tries whatever it had queued, then resigns and learns the new controller:
    # once it refuses requests naming it, it can no longer change anything.
    await eventually(lambda: standby_of(c.controller(first).address, second), timeout=30,
                     what="the woken controller to step down")
    assert c.active_controller_id() == second
    assert c.controller_epoch() == epoch + 1
    assert partition_znode(c, "t", 0) == znode_before
    now = await partition_state(bs, "t")
    assert (now.leader, now.leader_epoch) == (moved.leader, moved.leader_epoch)
