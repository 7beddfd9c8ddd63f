"""C3 (seed 000 / KIP-461) with real processes: a storage fault in one partition's log on a
follower fails only that partition; its fetcher keeps replicating the other; a new leader
epoch clears it. Faults go through the broker's file-operation seam (fault.injection.file)."""

from __future__ import annotations

import json

import pytest

from admin.client.admin_client import AdminClient
from admin.client.producer import Producer
from tests.cluster.helpers import (eventually, partition_dir, partition_state, replica_batches,
                                   scrape)

pytestmark = pytest.mark.integration

FAILED = 'kafka_server_replicafetchermanager_failedpartitionscount{clientId="Replica"}'
MAXLAG = 'kafka_server_replicafetchermanager_maxlag{clientId="Replica"}'


async def test_storage_fault_fails_only_its_partition(cluster_factory, tmp_path):
    faults = {b: tmp_path / f"faults-{b}.json" for b in (1, 2, 3)}
    c = cluster_factory(
        brokers=3,
        overrides={"replica.lag.time.max.ms": 2000, "replica.fetch.wait.max.ms": 200,
                   "replica.fetch.backoff.ms": 200, "num.replica.fetchers": 1,
                   "zookeeper.session.timeout.ms": 4000},
        per_broker_overrides={b: {"fault.injection.file": str(f)} for b, f in faults.items()})
    bs = c.bootstrap_servers
    async with AdminClient(bs) as admin:
        # preferred leader 3; with 3 stopped, broker 1 leads both and broker 2 follows both,
        # on one fetcher (num.replica.fetchers=1)
        await admin.create_topic("t", replica_assignment={0: [3, 1, 2], 1: [3, 1, 2]})
    await eventually(lambda: partition_state(bs, "t", 1), what="leaders")
    c.broker(3).stop()
    for p in (0, 1):
        await eventually(lambda p=p: _leader_is(bs, p, 1), what=f"broker 1 leads t-{p}")

    faults[2].write_text(json.dumps([{"path": partition_dir(c, 2, "t", 0), "errno": "EIO",
                                      "ops": ["write"]}]))
    b2 = c.broker(2).metrics_url
    async with Producer(bs, acks="1", linger_ms=1) as p:
        for i in range(20):
            await p.send_and_wait("t", f"a{i}".encode(), partition=0)
            await p.send_and_wait("t", f"b{i}".encode(), partition=1)
        await eventually(lambda: scrape(b2)[FAILED] == 1, what="t-0 failed on broker 2")
        # the other partition keeps replicating on the same fetcher, lag back to 0
        for i in range(20, 40):
            await p.send_and_wait("t", f"b{i}".encode(), partition=1)
        await eventually(lambda: len(_offsets(c, 2, "t", 1)) == 40, what="t-1 replicated")
        await eventually(lambda: scrape(b2)[MAXLAG] == 0, what="lag back to 0")
    assert c.broker(2).is_running()
    assert scrape(b2)[FAILED] == 1
    # the leader sees broker 2's fetches for t-0 stop: it leaves that ISR by the lag rule only
    await eventually(lambda: _isr_excludes(bs, 0, 2), what="broker 2 out of t-0's ISR")
    assert 2 in (await partition_state(bs, "t", 1)).isr

    # a new leader epoch clears the failure and the replica catches up
    faults[2].write_text("[]")
    c.broker(3).start()
    for part in (0, 1):
        await eventually(lambda part=part: _isr_includes(bs, part, 3), timeout=30,
                         what=f"broker 3 back in t-{part}'s ISR")
    async with AdminClient(bs) as admin:
        await admin.elect_leaders("preferred", [("t", 0), ("t", 1)])
    await eventually(lambda: _leader_is(bs, 0, 3), what="preferred leader 3 (new epoch)")
    await eventually(lambda: scrape(b2)[FAILED] == 0, what="t-0 cleared on broker 2")
    await eventually(lambda: _isr_includes(bs, 0, 2), timeout=30, what="broker 2 caught up")
    assert len(_offsets(c, 2, "t", 0)) == 20


def _offsets(c, b, topic, p):
    return {o for base, last, _ in replica_batches(c, b, topic, p, 1 << 62)
            for o in range(base, last + 1)}


async def _leader_is(bs, p, leader):
    s = await partition_state(bs, "t", p)
    return s is not None and s.leader == leader


async def _isr_excludes(bs, p, b):
    s = await partition_state(bs, "t", p)
    return s is not None and b not in s.isr


async def _isr_includes(bs, p, b):
    s = await partition_state(bs, "t", p)
    return s is not None and b in s.isr
