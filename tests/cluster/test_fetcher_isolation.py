"""design.md#kip-461 with real processes: a fault in one partition's log on a follower
stops only that partition; its fetcher keeps replicating the other. Since design.md#jbod (as
Kafka's KIP-112) a storage fault is not left as a failed partition: the broker's log-dir failure
handler takes only that log offline (its dir passes the availability probe), the controller
restarts the partition on that broker through /restart_partitions, and the re-created replica
catches up. Faults go through the broker's file-operation seam (fault.injection.file)."""

from __future__ import annotations

import json

import pytest

from client.admin_client import AdminClient
from client.producer import Producer
from tests.cluster.helpers import (
    eventually,
    partition_dir,
    partition_state,
    replica_batches,
    scrape,
)

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
    # The broker polls the file every 100 ms: produce only once it applies the rule, or broker 2
    # may copy all 20 records before the fault exists and never fail (seen under full-suite load).
    await eventually(lambda: _fault_rules_applied(c, 2), what="broker 2 applied the fault rule")
    b2 = c.broker(2).metrics_url
    async with Producer(bs, acks="1", linger_ms=1) as p:
        for i in range(20):
            await p.send_and_wait("t", f"a{i}".encode(), partition=0)
            await p.send_and_wait("t", f"b{i}".encode(), partition=1)
        # only t-0 restarts on broker 2: re-created in its other dir, out of the ISR meanwhile
        await eventually(lambda: _restarted(c, "t-0"), what="t-0 restarted on broker 2")
        # the other partition keeps replicating on the same fetcher, lag back to 0
        for i in range(20, 40):
            await p.send_and_wait("t", f"b{i}".encode(), partition=1)
        await eventually(lambda: len(_offsets(c, 2, "t", 1)) == 40, what="t-1 replicated")
        await eventually(lambda: scrape(b2)[MAXLAG] == 0, what="lag back to 0")
    assert c.broker(2).is_running()
    assert not _restarted(c, "t-1")
    assert 2 in (await partition_state(bs, "t", 1)).isr
    # the re-created replica (in the dir the fault does not name) catches up and rejoins
    await eventually(lambda: _isr_includes(bs, 0, 2), timeout=30, what="broker 2 caught up")
    assert len(_offsets(c, 2, "t", 0)) == 20
    assert scrape(b2)[FAILED] == 0


def _events(node) -> list[dict]:
    """The events a broker or controller has logged so far."""
    try:
        lines = node.event_log_file.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in lines]


def _fault_rules_applied(c, b) -> bool:
    return any(e.get("event") == "fault_injection_rules" and e.get("rules")
               for e in _events(c.broker(b)))


def _restarted(c, tp: str) -> bool:
    return any(e.get("event") == "partitions_restarted" and e.get("broker") == 2
               and tp in e.get("partitions", [])
               for node in c.controllers.values() for e in _events(node))


def _offsets(c, b, topic, p):
    return {o for base, last, _ in replica_batches(c, b, topic, p, 1 << 62)
            for o in range(base, last + 1)}


async def _leader_is(bs, p, leader):
    s = await partition_state(bs, "t", p)
    return s is not None and s.leader == leader


async def _isr_includes(bs, p, b):
    s = await partition_state(bs, "t", p)
    return s is not None and b in s.isr
