"""Replication throttles (KIP-73) with real processes, a real ZooKeeper and
real gRPC: a follower that was down catches up through a small throttle - it is held back, not
caught up, while the throttled bytes grow - and the in-sync follower under the same throttle
keeps acks=all going; once the throttle is removed the lagging one catches up and rejoins the
ISR. No durations are asserted: progress is read from the brokers' metrics and the partition
state, and "not caught up" is checked while the bytes that crossed the throttle are still
fewer than the bytes it has to copy."""

from __future__ import annotations

import pytest

from client.admin_client import AdminClient, AlterConfigOp
from client.producer import Producer
from tests.cluster.helpers import eventually, partition_state, scrape
from tests.cluster.test_replication_faults import FAST

pytestmark = pytest.mark.integration

RATE = 100_000  # bytes/s, leader and follower
FETCH_BYTES = 64 << 10  # replica.fetch.max.bytes: the throttle's step
RECORD = 10_000
BACKLOG = 200  # records produced while the follower is down: ~2 MB, ~20 s at RATE
LEADER, IN_SYNC, LAGGING = 1, 2, 3
THROTTLES = {"leader.replication.throttled.rate", "follower.replication.throttled.rate"}


def metric(cluster, broker: int, name: str, **labels) -> float:
    key = name + ("{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"
                  if labels else "")
    return scrape(cluster.broker(broker).metrics_url).get(key, 0.0)


async def produce(bs: str, n: int, tag: str) -> int:
    """``n`` acks=all records of RECORD bytes; returns how many were acknowledged."""
    async with Producer(bs, acks="all", linger_ms=5, delivery_timeout_ms=60000,
                        request_timeout_ms=10000) as p:
        futures = [await p.send("t", bytes([i % 251]) * RECORD, key=f"{tag}-{i}",
                                partition=0) for i in range(n)]
        for f in futures:
            await f  # raises on a failed record
    return n


async def test_throttle_holds_back_catch_up_but_not_the_in_sync_follower(cluster_factory):
    c = cluster_factory(brokers=3, overrides={**FAST, "replica.fetch.max.bytes": FETCH_BYTES})
    bs = c.bootstrap_servers
    async with AdminClient(bs) as admin:
        await admin.create_topic("t", replica_assignment={0: [LEADER, IN_SYNC, LAGGING]},
                                 configs={"min.insync.replicas": "2"})

        async def isr_is(*ids):
            s = await partition_state(bs, "t")
            return s is not None and s.leader == LEADER and set(s.isr) == set(ids) and s
        await eventually(lambda: isr_is(LEADER, IN_SYNC, LAGGING), timeout=60, what="full ISR")

        await c.broker(LAGGING).astop()  # controlled shutdown: out of the ISR at once
        await eventually(lambda: isr_is(LEADER, IN_SYNC), timeout=60, what="ISR without 3")
        assert await produce(bs, BACKLOG, "backlog") == BACKLOG
        backlog_bytes = BACKLOG * RECORD

        # What `replog reassign execute --throttle` sets (Kafka's ReassignPartitionsCommand):
        # the rates on every broker, and the topic's replicas on both sides.
        errors = await admin.incremental_alter_configs({
            ("brokers", ""): [AlterConfigOp(k, "set", str(RATE)) for k in sorted(THROTTLES)],
            ("topics", "t"): [AlterConfigOp("leader.replication.throttled.replicas", "set", "*"),
                              AlterConfigOp("follower.replication.throttled.replicas", "set",
                                            "*")]})
        assert set(errors.values()) == {None}, errors

        await c.broker(LAGGING).astart()  # reads the throttles before it registers
        # Catch-up is under way through the throttle on both sides: the follower records what
        # it receives, the leader what it sends, and the follower is leaving it out of fetches.
        await eventually(lambda: metric(c, LAGGING, "replog_replication_throttled_bytes_total",
                                        direction="follower") >= 3 * FETCH_BYTES,
                         timeout=60, what="throttled catch-up bytes on the follower")
        await eventually(lambda: metric(c, LAGGING, "replog_replication_throttled_partitions",
                                        direction="follower") == 1,
                         timeout=60, what="the follower holding t-0 back")
        await eventually(lambda: metric(c, LEADER, "replog_replication_throttled_bytes_total",
                                        direction="leader") > 0,
                         timeout=60, what="throttled bytes sent by the leader")
        received = metric(c, LAGGING, "replog_replication_throttled_bytes_total",
                          direction="follower")
        state = await partition_state(bs, "t")
        assert received < backlog_bytes and LAGGING not in state.isr, (received, state)
        assert metric(c, LAGGING, "kafka_server_replicafetchermanager_maxlag",
                      clientId="Replica") > 0
        assert 0 < metric(c, LAGGING, "kafka_server_followerreplication_byte_rate") < 4 * RATE

        # The in-sync follower is never held back: acks=all with min.insync.replicas=2 needs
        # it for every record, at several times the throttle, while the catch-up goes on.
        assert await produce(bs, 50, "in-sync") == 50
        state = await partition_state(bs, "t")
        assert IN_SYNC in state.isr and LAGGING not in state.isr, state
        assert metric(c, LAGGING, "replog_replication_throttled_bytes_total",
                      direction="follower") < backlog_bytes

        # Throttle removed (as `reassign verify` does once moves are done): catch up, rejoin.
        errors = await admin.incremental_alter_configs({
            ("brokers", ""): [AlterConfigOp(k, "delete") for k in sorted(THROTTLES)]})
        assert set(errors.values()) == {None}, errors
        await eventually(lambda: isr_is(LEADER, IN_SYNC, LAGGING), timeout=120,
                         what="the lagging follower back in the ISR")
        assert metric(c, LAGGING, "replog_replication_throttled_bytes_total",
                      direction="follower") >= backlog_bytes
