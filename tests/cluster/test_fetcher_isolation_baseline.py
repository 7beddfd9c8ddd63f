"""replica.fetcher.isolate.partition.failures=false, the pre-design baseline of ``replog lab``'s
kip-461 experiment, with real processes: the same storage fault as
tests/cluster/test_fetcher_isolation.py (EIO on one partition's log on a follower, through the
broker's fault-injection file) now stops the follower's whole fetcher, as an error in one
partition ended Kafka's fetcher thread before KIP-461: the other partition, healthy, stops
replicating too and its follower leaves the ISR."""

from __future__ import annotations

import json

import pytest

from client.producer import Producer
from tests.cluster.helpers import eventually, partition_dir
from tests.cluster.test_fetcher_isolation import (
    _events,
    _fault_rules_applied,
    _isr_includes,
    _leader_is,
)

pytestmark = pytest.mark.integration


async def test_one_partitions_fault_stops_the_whole_fetcher(cluster_factory, tmp_path):
    from client.admin_client import AdminClient
    faults = {b: tmp_path / f"faults-{b}.json" for b in (1, 2, 3)}
    c = cluster_factory(
        brokers=3,
        overrides={"replica.lag.time.max.ms": 2000, "replica.fetch.wait.max.ms": 200,
                   "replica.fetch.backoff.ms": 200, "num.replica.fetchers": 1,
                   "zookeeper.session.timeout.ms": 4000, "auto.leader.rebalance.enable": "false",
                   "replica.fetcher.isolate.partition.failures": "false"},
        per_broker_overrides={b: {"fault.injection.file": str(f)} for b, f in faults.items()})
    bs = c.bootstrap_servers
    async with AdminClient(bs) as admin:
        # with 3 stopped, broker 1 leads both and broker 2 follows both on one fetcher
        await admin.create_topic("t", replica_assignment={0: [3, 1, 2], 1: [3, 1, 2]})
    for p in (0, 1):
        await eventually(lambda p=p: _isr_includes(bs, p, 2), what=f"broker 2 in t-{p}'s ISR")
    c.broker(3).stop()
    for p in (0, 1):
        await eventually(lambda p=p: _leader_is(bs, p, 1), what=f"broker 1 leads t-{p}")
    faults[2].write_text(json.dumps([{"path": partition_dir(c, 2, "t", 0), "errno": "EIO",
                                      "ops": ["write"]}]))
    await eventually(lambda: _fault_rules_applied(c, 2), what="broker 2 applied the fault rule")
    async with Producer(bs, acks="1", linger_ms=1) as p:
        for i in range(20):
            await p.send_and_wait("t", f"a{i}".encode(), partition=0)
            await p.send_and_wait("t", f"b{i}".encode(), partition=1)

        def t1_failed():
            return [e for e in _events(c.broker(2)) if e.get("event") ==
                    "fetcher_partition_failed" and e.get("partition") == "t-1"]
        # t-1's own fetches were fine: it failed because t-0's failure stopped the fetcher
        failed = await eventually(t1_failed, what="t-1 failed with its fetcher")
        assert "fetcher stopped by t-0's failure" in failed[0]["error"], failed
        # so the healthy t-1 stops replicating: with records still coming, broker 2 falls
        # behind and the leader drops it from t-1's ISR (replica.lag.time.max.ms)
        for i in range(20, 40):
            await p.send_and_wait("t", f"b{i}".encode(), partition=1)

        async def out_of_isr():
            await p.send_and_wait("t", b"more", partition=1)
            return not await _isr_includes(bs, 1, 2)
        await eventually(out_of_isr, timeout=30, what="broker 2 out of t-1's ISR")
    assert c.broker(2).is_running()
