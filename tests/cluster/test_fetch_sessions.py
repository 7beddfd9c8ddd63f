"""KIP-227 incremental fetch sessions with real processes.

3 brokers, three topics of 6 partitions, RF 3: every follower fetches from every leader
through one session, which holds all the partitions it follows there
(``kafka_server_fetchsessioncache_*`` on each leader). acks=all produce and consume work through
the incremental fetches, and when a leader restarts (its sessions are gone: the followers'
next incremental fetch is FETCH_SESSION_ID_NOT_FOUND) they start new sessions and replication
goes on to a full ISR.
"""

from __future__ import annotations

import pytest

from client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from client.errors import UnknownTopicError
from tests.cluster.helpers import scrape
from tests.polling import async_wait_until

pytestmark = pytest.mark.integration

TOPICS = ("orders", "payments", "audit")
PARTITIONS = 6
SESSIONS = "kafka_server_fetchsessioncache_numincrementalfetchsessions"
CACHED = "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached"


async def _leaders(admin: AdminClient) -> dict[tuple[str, int], tuple[int, list[int]]] | None:
    """Each partition's (leader, ISR); None while the broker asked has not had its first
    UpdateMetadata since a restart (it answers UNKNOWN_TOPIC_OR_PARTITION then, as Kafka's)."""
    out = {}
    try:
        described = await admin.describe_topics(list(TOPICS))
    except UnknownTopicError:
        return None
    for t, info in described.items():
        for p in info.partitions:
            out[(t, p.partition)] = (p.leader, list(p.isr))
    return out


def _session_view(c, leaders) -> dict[int, tuple[float, float, int]] | None:
    """Per broker: (sessions, partitions cached, 2 x partitions it leads), or None while
    a partition has no leader or a short ISR."""
    if leaders is None or any(leader < 0 or len(isr) < 3 for leader, isr in leaders.values()):
        return None
    view = {}
    for b in (1, 2, 3):
        m = scrape(c.broker(b).metrics_url)
        led = sum(1 for leader, _ in leaders.values() if leader == b)
        view[b] = (m[SESSIONS], m[CACHED], 2 * led)
    return view


async def _sessions_hold_every_followed_partition(c, admin) -> dict:
    async def check():
        view = _session_view(c, await _leaders(admin))
        # one session per follower fetcher (num.replica.fetchers=1: two per leader), and
        # together they hold each led partition once per follower. Sessions of a follower's
        # earlier incarnation may linger until evicted, as in Kafka, so >= for the count.
        ok = view is not None and all(s >= 2 and cached >= want > 0
                                      for s, cached, want in view.values())
        return view if ok else None
    return await async_wait_until(check, 60, "every followed partition in a fetch session",
                                  interval=0.5)


async def _produce_and_consume(bs: str, tps: list[TopicPartition], tag: bytes) -> None:
    async with Producer(bs, acks="all", linger_ms=0) as producer:
        for tp in tps:
            md = await producer.send_and_wait(tp.topic, tag, partition=tp.partition)
            assert md.offset >= 0
    async with Consumer(bs) as consumer:
        await consumer.assign(tps)
        consumer.seek_to_beginning()
        seen: set[tuple[str, int]] = set()
        async def all_seen():
            for r in await consumer.poll(500):
                if r.value == tag:
                    seen.add((r.topic, r.partition))
            return len(seen) == len(tps)
        await async_wait_until(all_seen, 60, f"{tag!r} read back from every partition")


async def test_followers_fetch_through_sessions_and_start_over_when_refused(cluster_factory):
    c = cluster_factory(brokers=3)
    bs = c.bootstrap_servers
    async with AdminClient(bs) as admin:
        created = await admin.create_topics(
            [NewTopic(t, PARTITIONS, 3, configs={"min.insync.replicas": "2"}) for t in TOPICS])
        assert not [e for e in created.values() if isinstance(e, Exception)], created
        tps = [TopicPartition(t, p) for t in TOPICS for p in range(PARTITIONS)]
        await _produce_and_consume(bs, tps, b"before")
        view = await _sessions_hold_every_followed_partition(c, admin)
        assert all(cached == want for _, cached, want in view.values()), view

        # One leader comes back with room for a single session: its two followers' sessions
        # evict each other, so each one's next incremental fetch is FETCH_SESSION_ID_NOT_FOUND
        # and it starts over with a full fetch. Replication must go on regardless.
        leaders = await _leaders(admin)
        assert leaders is not None
        victim = max((1, 2, 3), key=lambda b: sum(1 for ld, _ in leaders.values() if ld == b))
        c.broker(victim).overrides["max.incremental.fetch.session.cache.slots"] = "1"
        await c.broker(victim).arestart()
        async def led_again():
            await admin.elect_leaders(election_type="preferred")
            now = await _leaders(admin)
            return now is not None and all(now[k][0] == leaders[k][0] and len(now[k][1]) == 3
                                           for k in leaders)
        await async_wait_until(led_again, 60, f"broker {victim} leading its partitions again",
                               interval=1)
        await _produce_and_consume(bs, tps, b"after")
        m = scrape(c.broker(victim).metrics_url)
        assert m[SESSIONS] == 1
        assert m["kafka_server_fetchsessioncache_incrementalfetchsessionevictions_total"] >= 1
    resets = [b for b in (1, 2, 3) if b != victim
              and '"fetch_session_reset"' in c.broker(b).event_log_file.read_text()]
    assert resets, "no follower was told its session was gone"
