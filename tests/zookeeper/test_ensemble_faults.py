"""A replog cluster on a real 3-node ZooKeeper ensemble, under the ensemble's own faults.

- The ZooKeeper leader is killed under acks=all load: the clients' sessions move to the
  surviving members (SUSPENDED, then CONNECTED on the same session), so nothing a session owns
  changes - the controller keeps /controller and its epoch, no broker re-registers - and no
  acks=all write waits longer than one session timeout. Kafka's ZooKeeper-era controller
  behaves so: only an expired session (KafkaController's Expire event) makes it resign.
- A majority is killed (quorum lost): topic creation fails at once with a clear error and
  leaves nothing behind, produce to leaders whose ISR is intact goes on (replication does not
  touch ZooKeeper), and a dead leader is not replaced (no election without ZooKeeper); the
  majority restored, the sessions are still the same (no controller change), the election and
  topic creation happen, and every acknowledged record is read back.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from client.admin_client import AdminClient
from client.errors import KafkaError
from common import zk_layout as zl
from common.errors import ErrorCode
from tests.cluster.helpers import (
    LoadProducer,
    assert_acked_read_back,
    eventually,
    partition_state,
)

pytestmark = pytest.mark.integration

SESSION_TIMEOUT_MS = 6000
OVERRIDES = {"zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
             "replica.lag.time.max.ms": 10000, "replica.fetch.wait.max.ms": 200}
# Where sessions must outlive a fault of more than one timeout (a quorum loss) or a fault
# waits for one to expire: short, so the waits are.
SHORT_SESSION_MS = 3000
SHORT = {**OVERRIDES, "zookeeper.session.timeout.ms": SHORT_SESSION_MS}


def _events(handle, name: str) -> list[dict]:
    out = []
    try:
        text = handle.event_log_file.read_text(encoding="utf-8")
    except FileNotFoundError:
        return out
    for line in text.splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("event") == name or ev.get("name") == name:
            out.append(ev)
    return out


def _registrations(c) -> dict[int, int]:
    return {b: c._registration_czxid(b) for b in c.brokers}


async def _load_until(load: LoadProducer, acked: int) -> None:
    await eventually(lambda: _ready(len(load.acked) >= acked), timeout=60,
                     what=f"{acked} acknowledged records")


async def _ready(value):
    return value or None


async def _cluster_under_load(cluster_factory, zookeeper_nodes: int = 3, overrides=None):
    """A 3-node ensemble (or 5), 1 controller, 3 brokers; topic t (3 partitions, RF 3, min
    ISR 2) under acks=all load from replog's producer, 100 records acknowledged."""
    c = cluster_factory(brokers=3, controllers=1, zookeeper_nodes=zookeeper_nodes,
                        overrides=overrides or OVERRIDES)
    async with AdminClient(c.bootstrap_servers) as admin:
        await admin.create_topic("t", 3, 3, configs={"min.insync.replicas": "2"})
    load = LoadProducer(c.bootstrap_servers, "t", 3)
    task = asyncio.create_task(load.run())
    await _load_until(load, 100)
    return c, load, task


async def test_killing_the_zookeeper_leader_changes_no_controller_and_costs_no_session(
        cluster_factory):
    c, load, task = await _cluster_under_load(cluster_factory)
    controller, epoch = c.active_controller_id(), c.controller_epoch()
    registrations = _registrations(c)
    try:
        since = asyncio.get_running_loop().time()
        leader = c.zookeeper_leader()
        assert leader is not None
        c.kill_zookeeper(leader)
        assert _member_pid(c, leader) is None
        new_leader = await asyncio.to_thread(c.zookeeper_ensemble.wait_for_quorum, 30)
        assert new_leader != leader
        # Long enough for a session that was not moved to expire, under load all along.
        await asyncio.sleep(SESSION_TIMEOUT_MS / 1000 + 1)
        await asyncio.to_thread(c.restart_zookeeper, leader)
        assert _member_pid(c, leader) == c.zookeeper_member(leader).pid
        await _load_until(load, len(load.acked) + 100)
        gap = load.max_gap(since)
    finally:
        load.stop.set()
        await task
    # the same controller in the same epoch, no broker re-registered: no session ended
    assert (c.active_controller_id(), c.controller_epoch()) == (controller, epoch)
    assert _events(c.controller(controller), "controller_resigned") == []
    assert _registrations(c) == registrations
    # The behavioural bound of a leader change (the availability rule): no acks=all
    # write waits for more than one session timeout.
    assert gap < SESSION_TIMEOUT_MS / 1000, f"no acknowledgement for {gap:.1f}s"
    await assert_acked_read_back(c.bootstrap_servers, load)


def _member_pid(c, myid: int) -> int | None:
    info = json.loads(c.cluster_json_path.read_text())
    return next(m["pid"] for m in info["zookeeper_nodes"] if m["id"] == myid)


async def test_a_lost_quorum_stops_topic_creation_and_elections_but_not_produce(
        cluster_factory):
    c, load, task = await _cluster_under_load(cluster_factory, overrides=SHORT)
    bs = c.bootstrap_servers
    controller, epoch = c.active_controller_id(), c.controller_epoch()
    registrations = _registrations(c)
    async with AdminClient(bs) as admin:  # led by broker 1, its follower broker 2
        await admin.create_topic("e", replica_assignment={0: [1, 2]})
    await eventually(lambda: _led_by(bs, "e", 1), what="broker 1 leading e")
    others = ",".join(c.broker(b).address for b in (2, 3))
    try:
        leader = c.zookeeper_leader()
        majority = [leader, next(i for i in (1, 2, 3) if i != leader)]
        for myid in majority:
            c.kill_zookeeper(myid)
        lost_at = asyncio.get_running_loop().time()
        # produce to the leaders goes on: their ISRs are intact and replication needs no
        # ZooKeeper
        await _load_until(load, len(load.acked) + 200)
        # creating a topic needs ZooKeeper's quorum: refused at once, clearly, nothing made
        async with AdminClient(bs, request_timeout_ms=15000) as admin:
            with pytest.raises(KafkaError) as refused:
                await admin.create_topic("during", 1, 3, timeout_ms=10000)
        assert refused.value.error_code == ErrorCode.REQUEST_TIMED_OUT
        assert "no ZooKeeper connection" in str(refused.value)
        # no election without ZooKeeper: e keeps its dead leader until the quorum is back
        c.broker(1).kill()
        await asyncio.sleep(3)
        assert (await partition_state(others, "e")).leader == 1
        # The quorum is lost for longer than a session timeout: the sessions must still be
        # there once it returns (the restored ensemble's leader gives each a fresh timeout,
        # and the clients must come back within it).
        await asyncio.sleep(max(0.0, 2 * SHORT_SESSION_MS / 1000
                                - (asyncio.get_running_loop().time() - lost_at)))
        await asyncio.to_thread(c.restart_zookeeper, *majority)
        await eventually(lambda: _led_by(others, "e", 2), timeout=60,
                         what="broker 2 elected for e once the quorum is back")
        async with AdminClient(others) as admin:
            await eventually(lambda: _created(admin, "after"), timeout=60,
                             what="topic creation with the quorum back")
        await _load_until(load, len(load.acked) + 100)
    finally:
        load.stop.set()
        await task
    # nothing half-made appeared once the quorum came back, and no session ended: the same
    # controller in the same epoch, the surviving brokers' registrations unchanged
    assert c.zk_client().exists(zl.topic_path("during")) is None
    assert c.zk_client().exists(zl.topic_config_path("during")) is None
    assert (c.active_controller_id(), c.controller_epoch()) == (controller, epoch)
    assert {b: z for b, z in _registrations(c).items() if b != 1} == \
        {b: z for b, z in registrations.items() if b != 1}
    await assert_acked_read_back(others, load)


async def _led_by(bootstrap: str, topic: str, broker_id: int):
    s = await partition_state(bootstrap, topic)
    return s if s is not None and s.leader == broker_id else None


async def _created(admin: AdminClient, topic: str):
    try:
        await admin.create_topic(topic, 1, 2, timeout_ms=10000)
    except KafkaError as e:
        if e.error_code == ErrorCode.TOPIC_ALREADY_EXISTS:
            return True
        return None
    return True


# make soak: ~17 s of wall time, and what it checks (watches re-armed, re-registration on
# expiry) the two tests above already exercise in passing; make test stays near 20 minutes.
@pytest.mark.soak
async def test_watches_fire_after_the_session_moved_and_an_expired_session_re_registers(
        cluster_factory):
    """After the ZooKeeper leader's death moved every session (kazoo drops every watch then),
    the watches set before it still work: the active controller sees a broker die (its
    /brokers/ids watch) and elects; the standby sees /controller go (its /controller watch) and
    takes over; every broker learns the new controller (theirs). A session that expires on the
    ensemble ends what it owned: the broker re-registers (a new broker epoch, KIP-380) and the
    controller that lost its session resigns and is elected again in a new epoch."""
    c = cluster_factory(brokers=3, controllers=2, zookeeper_nodes=3, overrides=SHORT)
    bs = c.bootstrap_servers
    first, epoch = c.active_controller_id(), c.controller_epoch()
    async with AdminClient(bs) as admin:
        await admin.create_topic("w", 1, 3)
    before = await eventually(lambda: partition_state(bs, "w"), what="a leader for w")
    c.kill_zookeeper(c.zookeeper_leader())
    await asyncio.to_thread(c.zookeeper_ensemble.wait_for_quorum, 30)
    assert (c.active_controller_id(), c.controller_epoch()) == (first, epoch)

    c.broker(before.leader).kill()  # its session expires; the controller's watch fires
    others = ",".join(h.address for b, h in c.brokers.items() if b != before.leader)
    after = await eventually(lambda: _led_by_other(others, "w", before.leader), timeout=30,
                             what="a new leader for w")
    assert after.leader_epoch > before.leader_epoch

    c.controller(first).kill()  # /controller goes with its session: the standby's watch fires
    second = await asyncio.to_thread(c.wait_for_controller, 30, [first])
    assert c.controller_epoch() == epoch + 1
    await asyncio.to_thread(c.wait_for_metadata, [b for b in c.brokers if b != before.leader])

    # an expired broker session: SIGSTOP past the session timeout, then woken
    paused = next(b for b in c.brokers if b != before.leader)
    registered = c._registration_czxid(paused)
    c.broker(paused).pause()
    try:
        await eventually(lambda: _ready(c._registration_czxid(paused) is None), timeout=30,
                         what=f"broker {paused}'s registration gone with its session")
    finally:
        c.broker(paused).resume()
    await eventually(lambda: _ready((c._registration_czxid(paused) or 0) > registered),
                     timeout=30, what=f"broker {paused} registered again")
    # an expired controller session: the active one resigns and, alone, is elected again
    c.controller(second).pause()
    try:
        await eventually(lambda: _ready(c.active_controller_id() is None), timeout=30,
                         what="/controller gone with the paused controller's session")
    finally:
        c.controller(second).resume()
    assert await asyncio.to_thread(c.wait_for_controller, 30) == second
    assert c.controller_epoch() == epoch + 2
    assert _events(c.controller(second), "controller_resigned")


async def _led_by_other(bootstrap: str, topic: str, old: int):
    s = await partition_state(bootstrap, topic)
    return s if s is not None and s.leader not in (-1, old) else None
