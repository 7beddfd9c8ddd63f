"""With real processes: acks=all produce and consume finish without waiting out the
long poll, in a cluster where every Fetch carries many partitions.

3 brokers, three topics of 6 partitions each, RF 3: each broker leads about six partitions, so
every follower fetcher and the consumer's Fetch to each leader carry several partitions, only
one of which gets each new record. ``replica.fetch.wait.max.ms`` and the consumer's
``fetch.max.wait.ms`` are 60 s. A Fetch that woke only when *all* its partitions had data (the
bug: ``asyncio.wait``'s default ALL_COMPLETED) would hold every acks=all produce until the
follower's long poll ran out, and every consumer poll until its own did.

The proof is an order of events, not a duration: after a warm-up record to every partition, a
marker Fetch, sent to a broker before the workload for a partition nobody writes, long-polls with the same 60 s max wait, so the broker
answers it only at its long-poll deadline. The test requires that N sequential acks=all
produces, each to a different partition, and the consumer's receipt of all N records, complete
before the marker's answer arrives. (replica.lag.time.max.ms is raised above the long poll so
that an idle parked follower is never taken for a lagging one.)
"""

from __future__ import annotations

import asyncio

import pytest

from client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from client.transport import ChannelPool, call
from common.rpc import replog_pb2 as pb

pytestmark = pytest.mark.integration

LONG_POLL_MS = 60_000
TOPICS = ("orders", "payments", "audit")
PARTITIONS = 6
RECORDS = 36  # two rounds over the 18 partitions


async def _marker_fetch(bootstrap: str, admin: AdminClient) -> str:
    """Fetch an idle partition at its leader with the long max wait; returns when the broker
    answers, which for a partition nobody writes is the long-poll deadline."""
    info = (await admin.describe_topics(["idle"]))["idle"].partition(0)
    leader = (await admin.live_brokers())[info.leader]
    pool = ChannelPool()
    try:
        req = pb.FetchRequest(max_wait_ms=LONG_POLL_MS, min_bytes=1, max_bytes=1 << 20,
                              topics=[pb.FetchTopic(topic="idle", partitions=[
                                  pb.FetchPartition(partition=0, fetch_offset=0,
                                                    partition_max_bytes=1 << 20)])])
        resp = await call(pool.broker(leader.address).Fetch, req, leader.address,
                          LONG_POLL_MS / 1000 + 60)
        assert resp.responses[0].partitions[0].error_code == 0
        return "marker"
    finally:
        await pool.close()


async def test_acks_all_produce_and_consume_do_not_wait_out_the_long_poll(cluster_factory):
    c = cluster_factory(brokers=3, overrides={
        "replica.fetch.wait.max.ms": LONG_POLL_MS,
        "replica.lag.time.max.ms": 4 * LONG_POLL_MS,
    })
    bs = c.bootstrap_servers
    async with AdminClient(bs) as admin:
        # One CreateTopics: each broker gets one LeaderAndIsr, so its fetchers get all their
        # partitions at once (a partition added later waits for the parked Fetch to return).
        created = await admin.create_topics(
            [NewTopic(t, PARTITIONS, 3, configs={"min.insync.replicas": "2"}) for t in TOPICS]
            + [NewTopic("idle", 1, 3)])
        assert not [e for e in created.values() if isinstance(e, Exception)], created
        tps = [TopicPartition(t, p) for t in TOPICS for p in range(PARTITIONS)]
        leaders = {}
        for t, info in (await admin.describe_topics(list(TOPICS))).items():
            for p in info.partitions:
                leaders[(t, p.partition)] = p.leader
        # the premise: every leader's Fetches carry several partitions
        assert all(list(leaders.values()).count(b) > 1 for b in (1, 2, 3)), leaders

        async with Consumer(bs, fetch_max_wait_ms=LONG_POLL_MS) as consumer, \
                Producer(bs, acks="all", linger_ms=0) as producer:
            # Warm-up, before the marker: one record to every partition at once. A follower
            # fetcher only adds a partition that joined it (topic creation) to its next Fetch,
            # so a partition that missed the parked one would wait out that long poll once;
            # after a replicated record every partition is in every follower's Fetch.
            await asyncio.gather(*(producer.send_and_wait(tp.topic, b"warm-up",
                                                          partition=tp.partition)
                                   for tp in tps))
            events: list[str] = []
            marker = asyncio.create_task(_marker_fetch(bs, admin))
            marker.add_done_callback(lambda _: events.append("marker"))
            await consumer.assign(tps)
            consumer.seek_to_end()
            for tp in tps:
                await consumer.position(tp)  # positions fixed before the first record

            async def consume() -> list[tuple[str, int, bytes]]:
                got = []
                while len(got) < RECORDS:
                    for r in await consumer.poll(LONG_POLL_MS * 2):
                        got.append((r.topic, r.partition, r.value))
                events.append("consumed all")
                return got

            async def produce() -> None:
                for i in range(RECORDS):
                    tp = tps[i % len(tps)]
                    md = await producer.send_and_wait(tp.topic, b"v%d" % i,
                                                      partition=tp.partition)
                    assert md.offset >= 0
                events.append("produced all")

            reader = asyncio.create_task(consume())
            workload = asyncio.gather(produce(), reader)
            await asyncio.wait({workload, marker}, return_when=asyncio.FIRST_COMPLETED)
            if not workload.done():
                workload.cancel()
                await asyncio.gather(workload, return_exceptions=True)
            assert events[:2] in (["produced all", "consumed all"],
                                  ["consumed all", "produced all"]), \
                f"the long-poll deadline came first: {events}"
            assert "marker" not in events
            got = reader.result()
        marker.cancel()
        await asyncio.gather(marker, return_exceptions=True)
    assert sorted(got) == sorted((tps[i % len(tps)].topic, tps[i % len(tps)].partition,
                                  b"v%d" % i) for i in range(RECORDS))
