"""design.md#cluster-core acceptance with real processes, a real ZooKeeper and real gRPC: leader
SIGKILL under acks=all, a paused follower leaving and rejoining the ISR, min ISR refusing acks=all,
and controlled shutdown moving leadership without failing a produce."""

from __future__ import annotations

import asyncio

import pytest

from client.admin_client import AdminClient
from client.consumer import Consumer
from client.errors import KafkaError
from client.producer import Producer
from tests.cluster.helpers import eventually, partition_state, replica_batches

pytestmark = pytest.mark.integration

FAST = {"zookeeper.session.timeout.ms": 3000, "replica.lag.time.max.ms": 2000,
        "replica.fetch.wait.max.ms": 200, "replica.fetch.backoff.ms": 200,
        "controlled.shutdown.retry.backoff.ms": 200}


async def create(bootstrap, topic, partitions=1, rf=3, min_isr=2):
    async with AdminClient(bootstrap) as admin:
        await admin.create_topic(topic, partitions, rf,
                                 configs={"min.insync.replicas": str(min_isr)})
    return await eventually(lambda: partition_state(bootstrap, topic), what="leader elected")


async def consume_all(bootstrap, topic, partition, end):
    out = {}
    async with Consumer(bootstrap, auto_offset_reset="earliest") as c:
        await c.assign([(topic, partition)])
        c.seek_to_beginning((topic, partition))
        deadline = asyncio.get_running_loop().time() + 30
        while len(out) < end and asyncio.get_running_loop().time() < deadline:
            for r in await c.poll(500):
                out[r.offset] = r.value
    return out


async def test_acks_all_records_survive_a_leader_sigkill(cluster_factory):
    c = cluster_factory(brokers=3, overrides=FAST)
    bs = c.bootstrap_servers
    state = await create(bs, "t")
    old_leader = state.leader
    acked: dict[int, bytes] = {}
    failed = 0
    async with Producer(bs, acks="all", linger_ms=2, delivery_timeout_ms=30000,
                        request_timeout_ms=5000) as p:
        async def send(i):
            nonlocal failed
            value = f"record-{i}".encode()
            try:
                md = await (await p.send("t", value, partition=0))
                acked[md.offset] = value
            except KafkaError:
                failed += 1

        tasks = []
        for i in range(600):
            tasks.append(asyncio.ensure_future(send(i)))
            if i == 200:
                await eventually(lambda: len(acked) >= 100, what="records acknowledged")
                c.broker(old_leader).kill()  # SIGKILL while requests are in flight
            await asyncio.sleep(0.002)
        await asyncio.gather(*tasks)
    assert len(acked) >= 500, f"only {len(acked)} acknowledged, {failed} failed"
    new = await eventually(lambda: partition_state(bs, "t"), what="new leader")
    assert new.leader != old_leader and new.leader_epoch > state.leader_epoch

    # every acknowledged record is read back at its offset
    end = max(acked) + 1
    consumed = await consume_all(bs, "t", 0, end)
    for offset, value in acked.items():
        assert consumed.get(offset) == value, f"offset {offset}"

    # the killed broker comes back, truncates any divergent tail and rejoins the ISR
    c.broker(old_leader).start()
    await eventually(lambda: _isr_is(bs, {1, 2, 3}), timeout=60, what="ISR back to 3")
    hw = max(consumed) + 1
    logs = {b: replica_batches(c, b, "t", 0, hw) for b in (1, 2, 3)}
    assert logs[1] and logs[1] == logs[2] == logs[3]  # byte-identical up to the HW


async def _isr_is(bs, members):
    s = await partition_state(bs, "t")
    return s is not None and set(s.isr) == members and s


async def test_paused_follower_leaves_and_rejoins_the_isr(cluster_factory):
    # The session timeout is longer than the pause: the follower stays registered, so only
    # the leader's lag rule can take it out of the ISR.
    c = cluster_factory(brokers=3, overrides={**FAST, "zookeeper.session.timeout.ms": 30000})
    bs = c.bootstrap_servers
    state = await create(bs, "t")
    leader = state.leader
    follower = next(b for b in state.replicas if b != leader)
    async with Producer(bs, acks="1", linger_ms=1) as p:
        c.broker(follower).pause()
        try:
            async def shrunk():
                await p.send_and_wait("t", b"x" * 100, partition=0)
                s = await partition_state(bs, "t")
                return follower not in s.isr and s
            s = await eventually(shrunk, timeout=30, what="paused follower out of the ISR")
            assert s.leader == leader and len(s.isr) == 2
        finally:
            c.broker(follower).resume()
    s = await eventually(lambda: _isr_is(bs, {1, 2, 3}), timeout=30, what="follower rejoined")
    assert s.leader == leader


async def test_two_paused_followers_make_acks_all_fail_without_acknowledging(cluster_factory):
    c = cluster_factory(brokers=3, overrides={**FAST, "zookeeper.session.timeout.ms": 30000})
    bs = c.bootstrap_servers
    state = await create(bs, "t")
    leader = state.leader
    followers = [b for b in state.replicas if b != leader]
    acked: dict[int, bytes] = {}
    errors: list[str] = []
    async with Producer(bs, acks="all", linger_ms=1, delivery_timeout_ms=4000,
                        request_timeout_ms=2000) as p:
        for i in range(20):
            md = await p.send_and_wait("t", f"before-{i}".encode(), partition=0)
            acked[md.offset] = f"before-{i}".encode()
        for b in followers:
            c.broker(b).pause()
        try:
            for i in range(30):
                try:
                    value = f"during-{i}".encode()
                    md = await p.send_and_wait("t", value, partition=0)
                    acked[md.offset] = value
                except KafkaError as e:
                    errors.append(str(e))
                s = await partition_state(bs, "t")
                if len(s.isr) == 1 and any("NOT_ENOUGH_REPLICAS" in e for e in errors):
                    break
        finally:
            for b in followers:
                c.broker(b).resume()
    assert any("NOT_ENOUGH_REPLICAS" in e for e in errors), errors
    assert not any(v.startswith(b"during") for v in acked.values()), \
        "a record was acknowledged while only the leader had it"
    await eventually(lambda: _isr_is(bs, {1, 2, 3}), timeout=30, what="followers rejoined")
    hw = max(acked) + 1
    for b in followers:  # everything acknowledged is on every follower
        held = {o for base, last, _ in replica_batches(c, b, "t", 0, hw)
                for o in range(base, last + 1)}
        assert set(acked) <= held


async def test_controlled_shutdown_moves_leadership_and_fails_no_produce(cluster_factory):
    c = cluster_factory(brokers=3, overrides=FAST)
    bs = c.bootstrap_servers
    async with AdminClient(bs) as admin:
        await admin.create_topic("t", 6, 3, configs={"min.insync.replicas": "2"})
    infos = await eventually(lambda: _all_led(bs, 6), what="leaders for 6 partitions")
    victim = infos[0].leader
    assert any(i.leader == victim for i in infos)
    failures: list[str] = []
    sent = 0
    async with Producer(bs, acks="all", linger_ms=2, delivery_timeout_ms=60000) as p:
        stop = asyncio.get_running_loop().run_in_executor(None, c.broker(victim).stop)
        pending = []
        while not stop.done() or sent < 300:
            for part in range(6):
                pending.append(await p.send("t", f"r{sent}".encode(), partition=part))
                sent += 1
            await asyncio.sleep(0.005)
        assert stop.result() == 0  # the broker exited cleanly
        for f in pending:
            try:
                await f
            except KafkaError as e:
                failures.append(str(e))
    assert failures == []
    after = await _all_led(bs, 6)
    assert after and all(i.leader != victim and victim not in i.isr for i in after)


async def _all_led(bs, n):
    async with AdminClient(bs, request_timeout_ms=5000) as admin:
        info = (await admin.describe_topics(["t"]))["t"]
    parts = list(info.partitions)
    return parts if len(parts) == n and all(i.leader >= 0 for i in parts) else None
