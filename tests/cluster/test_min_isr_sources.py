"""With real processes: the controller and the brokers read min ISR from one resolver, and a
topic whose RF is below min.insync.replicas still exposes its records.

1. The controller is configured with min.insync.replicas=2, the cluster-wide dynamic broker
   default says 1. The followers stop one by one and the leader keeps acknowledging acks=all on
   an ISR of itself alone (legitimately: min ISR is 1). The leader is killed. Before the fix the
   controller, still reading 2, had put the stopped follower in the ELR, so that follower was
   elected cleanly when it came back - without the records acknowledged after it stopped. Now
   the ELR stays empty at min ISR, the follower that comes back does not lead (Manual recovery:
   no unclean election either), and the old leader does when it returns, with every record.
2. Brokers with min.insync.replicas=2 and an RF-1 topic: acks=1 records are consumed (the HW
   freeze uses min(min.insync.replicas, RF)); acks=all is refused with NOT_ENOUGH_REPLICAS, as
   in Kafka.
"""

from __future__ import annotations

import asyncio

import pytest

from client.admin_client import AdminClient, AlterConfigOp
from client.errors import KafkaError
from client.producer import Producer
from common.errors import ErrorCode
from tests.admin.test_cli import replog
from tests.cluster.helpers import LoadProducer
from tests.cluster.test_elr_recovery import (
    FAST,
    _controller_events,
    _more_acks,
    _read_back,
    _state,
    _stays,
    _until,
)
from tests.cluster.test_replication_faults import consume_all

pytestmark = pytest.mark.integration

ELR_MANUAL = {**FAST, "eligible.leader.replicas.enable": "true",
              "unclean.recovery.strategy": "Manual", "min.insync.replicas": "2"}


async def test_a_dynamic_default_min_isr_is_the_controllers_too(cluster_factory):
    c = cluster_factory(brokers=3, overrides=ELR_MANUAL)
    bs = c.bootstrap_servers
    async with AdminClient(bs) as admin:
        await admin.incremental_alter_configs({
            ("brokers", ""): [AlterConfigOp("min.insync.replicas", "set", "1")]})
        await admin.create_topic("t", replica_assignment={0: [1, 2, 3]})
    await _until(c, "t", lambda s: s.leader == 1 and len(s.isr) == 3, "led by 1, full ISR")
    load = LoadProducer(bs, "t", 1)
    task = asyncio.create_task(load.run())
    try:
        await _more_acks(load, 100, "acks with the full ISR")
        await c.broker(2).astop()
        await _until(c, "t", lambda s: set(s.isr) == {1, 3}, "ISR {1,3}")
        await c.broker(3).astop()
        # min ISR is 1 for the controller too: ISR {1} is at min ISR, so no ELR
        await _until(c, "t", lambda s: s.isr == (1,), "ISR {1}")
        assert _state_elr(c) == ()
        await _more_acks(load, 100, "acks=all on an ISR of the leader alone")
    finally:
        load.stop.set()
        await task
    acked = {o: v for (_, o), v in load.acked.items()}
    c.broker(1).kill()
    await _until(c, "t", lambda s: s.leader == -1, "leaderless")
    # A follower that missed acknowledged records comes back: it must not lead cleanly (and
    # Manual recovery elects nobody on its own).
    await c.broker(3).astart()
    await _stays(c, "t", lambda s: s.leader != 3, "broker 3 not elected", seconds=5)
    clean = [e for e in _controller_events(c, "leader_election", partition="t-0")
             if e.get("new_leader") == 3]
    assert not clean, clean
    # The SIGKILLed leader left the ELR when it registered again (KIP-966: an unclean shutdown
    # may have lost unflushed records), so only the operator's unclean election elects now: the
    # Unclean Recovery Manager picks the longest log, the old leader's.
    await c.broker(1).astart()
    rc, out, err = await replog("elect", "--bootstrap-server", bs, "--election-type",
                                "unclean", "--topic", "t", "--partition", "0")
    assert rc == 0 and "t-0" in out, (rc, out, err)
    s = await _until(c, "t", lambda s: s.leader >= 0, "a leader", timeout=60)
    assert s.leader == 1, s
    await _until(c, "t", lambda s: len(s.isr) >= 2, "a follower back in the ISR", timeout=60)
    assert await _read_back(bs, "t", acked) == []


def _state_elr(c) -> tuple[int, ...]:
    return tuple(_state(c, "t").elr)


async def test_an_rf_1_topic_below_min_isr_is_readable_and_refuses_acks_all(cluster_factory):
    c = cluster_factory(brokers=1, overrides={**FAST, "min.insync.replicas": "2"})
    bs = c.bootstrap_servers
    async with AdminClient(bs) as admin:
        await admin.create_topic("r1", replica_assignment={0: [1]})
    await _until(c, "r1", lambda s: s.leader == 1, "led by 1")
    async with Producer(bs, acks=1, linger_ms=2) as p:
        metas = await asyncio.gather(*[await p.send("r1", f"v{i}".encode(), partition=0)
                                       for i in range(20)])
    got = await consume_all(bs, "r1", 0, 20)
    assert [got.get(m.offset) for m in metas] == [f"v{i}".encode() for i in range(20)]
    async with Producer(bs, acks="all", retries=0, linger_ms=0, delivery_timeout_ms=10000,
                        request_timeout_ms=5000) as p:
        with pytest.raises(KafkaError) as e:
            await p.send_and_wait("r1", b"refused", partition=0)
    assert e.value.error_code == ErrorCode.NOT_ENOUGH_REPLICAS, e.value
