"""design.md#kip-966 acceptance with real processes and a real ZooKeeper: Eligible
Leader Replicas and the Unclean Recovery Manager.

1. Kafka's eligible_leader_replicas_test: RF 3, min.insync.replicas 2, ELR on, an acks=all
   producer running. The followers stop cleanly one by one (the ISR shrinks, the ELR fills), the
   leader is killed (leaderless); a clean ELR member that comes back leads with no unclean
   election and every acknowledged record is read back. Again with the ELR member SIGKILLed: it
   leaves the ELR when it registers and is not elected.
2. Recovery picks the best log. One follower (S) is paused with SIGSTOP while the others (A, B)
   take more acked records; then A and B are SIGKILLed, so no ISR or ELR member is left. Balanced
   and Proactive recover to A's (the longest) log with 0 offsets discarded; Manual stays
   leaderless until `replog elect --election-type unclean`, which then recovers the same way.
   The same faults with ELR off and the old blind unclean election elect S - the first live
   replica in assignment order - and lose every record S missed.
3. The active controller is SIGKILLed while a Balanced recovery waits for a replica (paused,
   still registered) to answer: the next controller starts the recovery again from ZooKeeper's
   state and finishes it; no leader epoch ever has two leaders.

Every wait polls for a state (the partition state znode, an event the controller logged); nothing
is asserted about durations.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import pytest

from client.admin_client import AdminClient, AlterConfigOp
from client.consumer import Consumer
from client.errors import KafkaError
from client.producer import Producer
from common import zk_layout as zl
from tests.admin.test_cli import replog
from tests.cluster.helpers import (
    LoadProducer,
    assert_acked_read_back,
    consume_range,
    eventually,
    scrape,
)

pytestmark = pytest.mark.integration

FAST = {"zookeeper.session.timeout.ms": 2500, "replica.lag.time.max.ms": 2000,
        "replica.fetch.wait.max.ms": 200, "auto.leader.rebalance.enable": "false",
        "controlled.shutdown.retry.backoff.ms": 500}
ELR_ON = {**FAST, "eligible.leader.replicas.enable": "true",
          # Balanced's wait for replies that are not LastKnownELR: longer than any test, so a
          # choice never comes from the timeout
          "unclean.recovery.timeout.ms": 600_000}
MIN_ISR = {"min.insync.replicas": "2"}
A, S, B = 1, 2, 3  # scenario 2/3 roles: A leads, S is the stale follower, B the other one
ASSIGNMENT = {0: [A, S, B]}


# ---------------------------------------------------------------------------- helpers

def _state(c, topic: str, p: int = 0) -> zl.LeaderAndIsr:
    data, stat = c.zk_client().get(zl.partition_state_path(topic, p))
    return zl.decode_partition_state(data, stat.version)


async def _until(c, topic: str, pred: Callable[[zl.LeaderAndIsr], bool], what: str,
                 timeout: float = 60) -> zl.LeaderAndIsr:
    def check():
        s = _state(c, topic)
        return s if pred(s) else None
    return await eventually(check, timeout=timeout, what=f"{topic}-0: {what}")


async def _stays(c, topic: str, pred: Callable[[zl.LeaderAndIsr], bool], what: str,
                 seconds: float = 3.0) -> None:
    """``pred`` holds on every poll for ``seconds`` (only ever after a positive signal that the
    controller has handled the event that could have changed it)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while loop.time() < end:
        s = _state(c, topic)
        assert pred(s), f"{topic}-0: expected {what}, got {s}"
        await asyncio.sleep(0.2)


def _events(node, name: str, **match) -> list[dict]:
    try:
        with open(node.event_log_file, encoding="utf-8") as f:
            evs = [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []
    return [e for e in evs if e.get("event") == name
            and all(e.get(k) == v for k, v in match.items())]


def _controller_events(c, name: str, **match) -> list[dict]:
    return [e for node in c.controllers.values() for e in _events(node, name, **match)]


async def _event(node, name: str, what: str, timeout: float = 60, **match) -> dict:
    got = await eventually(lambda: _events(node, name, **match), timeout=timeout,
                           what=f"{node.name}: {what}")
    return got[-1]


def _metric(url: str, name: str, **labels) -> float:
    """The sum of a metric's samples whose labels include ``labels``."""
    want = [f'{k}="{v}"' for k, v in labels.items()]
    return sum(v for k, v in scrape(url).items()
               if k.split("{")[0] == name and all(w in k for w in want))


async def _produce(bs: str, topic: str, n: int, tag: str) -> dict[int, bytes]:
    """n acks=all records to partition 0; every one must be acknowledged."""
    async with Producer(bs, acks="all", linger_ms=5, delivery_timeout_ms=30000,
                        request_timeout_ms=5000) as prod:
        futs = [await prod.send(topic, f"{tag}-{i}".encode(), partition=0) for i in range(n)]
        metas = await asyncio.gather(*futs)
    return {m.offset: f"{tag}-{i}".encode() for i, m in enumerate(metas)}


async def _read_back(bs: str, topic: str, acked: dict[int, bytes]) -> list[int]:
    """The acked offsets of partition 0 not read back with their value."""
    async with Consumer(bs) as cons:
        hw = (await cons.end_offsets([(topic, 0)]))
        hw = next(iter(hw.values()))
    got = await consume_range(bs, topic, {0: hw}, {(0, o) for o in acked if o < hw})
    return sorted(o for o, v in acked.items() if got.get((0, o)) != v)


async def _leo(admin: AdminClient, broker: int, topic: str) -> tuple[int] | None:
    """(log end offset,) of partition 0 on ``broker``, or None while the client does not see
    the broker yet."""
    try:
        got = (await admin.replica_log_end_offsets(broker, [(topic, 0)]))[(topic, 0)]
    except KafkaError:
        return None
    return None if isinstance(got, KafkaError) else (got,)


async def _more_acks(load: LoadProducer, count: int, what: str) -> None:
    n = len(load.acked)
    await eventually(lambda: len(load.acked) >= n + count, timeout=30, what=what)


def _one_leader_per_epoch(c, partition: str) -> list[dict]:
    """Every leader_election any controller logged for ``partition``; asserts that no leader
    epoch was given to two different leaders."""
    elections = _controller_events(c, "leader_election", partition=partition)
    by_epoch: dict[int, set[int]] = {}
    for e in elections:
        by_epoch.setdefault(e["leader_epoch"], set()).add(e["new_leader"])
    assert all(len(v) == 1 for v in by_epoch.values()), \
        f"{partition}: a leader epoch with two leaders: {by_epoch}"
    return elections


# ---------------------------------------------------------------------------- 1

async def test_clean_elr_member_leads_and_unclean_one_leaves_elr(cluster_factory):
    """Kafka's eligible_leader_replicas_test, then the same with the ELR member SIGKILLed."""
    c = cluster_factory(brokers=3, overrides=ELR_ON)
    bs = c.bootstrap_servers
    async with AdminClient(bs) as admin:
        await admin.create_topic("t", configs=MIN_ISR, replica_assignment={0: [1, 2, 3]})
    await _until(c, "t", lambda s: s.leader == 1 and len(s.isr) == 3, "led by 1, full ISR")
    controller = c.controller(c.active_controller_id())

    load = LoadProducer(bs, "t", 1)
    task = asyncio.create_task(load.run())
    try:
        await _more_acks(load, 200, "acks")
        # The followers stop cleanly, one by one: the ISR shrinks; below min ISR the ELR fills.
        await c.broker(2).astop()
        await _until(c, "t", lambda s: set(s.isr) == {1, 3} and not s.elr,
                     "ISR {1,3}, at min ISR: no ELR")
        await _more_acks(load, 100, "acks at min ISR")
        await c.broker(3).astop()
        await _until(c, "t", lambda s: s.isr == (1,) and s.elr == (3,), "ISR {1}, ELR {3}")
        rc, out, err = await replog("topics", "describe", "--bootstrap-server", bs,
                                    "--eligible-leader-replicas")
        assert rc == 0, err
        lines = [x for x in out.splitlines() if "Topic: t" in x]
        assert len(lines) == 1 and "Elr: 3" in lines[0], out

        # The leader dies: leaderless, its ISR empty, both last in-sync replicas in the ELR.
        c.broker(1).kill()
        await _until(c, "t", lambda s: s.leader == -1 and not s.isr and s.elr == (1, 3),
                     "leaderless, ELR {1,3}")

        # A clean ELR member comes back: it leads, cleanly.
        await c.broker(3).astart()
        s = await _until(c, "t", lambda s: s.leader == 3, "led by 3")
        assert s.isr == (3,) and s.elr == (1,), s
        assert s.leader_recovery_state == zl.LEADER_RECOVERED, s
        await _event(controller, "leader_election", "3's election", partition="t-0",
                     new_leader=3)  # logged just after the state write we saw
        el = _events(controller, "leader_election", partition="t-0", new_leader=3)
        assert el and not el[-1]["unclean"] and el[-1]["reason"] != "unclean_recovery", el
        assert not _events(controller, "unclean_recovery_started", partition="t-0")
        # Back to min ISR (the HW moves again): every acknowledged record reads back.
        await c.broker(2).astart()
        await _until(c, "t", lambda s: s.leader == 3 and len(s.isr) >= 2, "ISR back to 2")
        await _more_acks(load, 100, "acks after the clean ELR election")
    finally:
        load.stop.set()
        await task
    assert not _events(controller, "leader_election", partition="t-0", unclean=True)
    await assert_acked_read_back(bs, load)

    # Round 2: broker 1 (SIGKILLed above) returns and catches up; now the ELR member dies hard.
    await c.broker(1).astart()
    await _until(c, "t", lambda s: s.leader == 3 and len(s.isr) == 3, "full ISR again")
    load2 = LoadProducer(bs, "t", 1)
    task = asyncio.create_task(load2.run())
    try:
        await _more_acks(load2, 200, "acks, round 2")
        await c.broker(1).astop()
        await _until(c, "t", lambda s: set(s.isr) == {2, 3} and not s.elr, "ISR {2,3}")
        await _more_acks(load2, 100, "acks at min ISR, round 2")
        c.broker(2).kill()
        await _until(c, "t", lambda s: s.isr == (3,) and s.elr == (2,), "ISR {3}, ELR {2}")
        c.broker(3).kill()
        await _until(c, "t", lambda s: s.leader == -1 and not s.isr and s.elr == (2, 3),
                     "leaderless, ELR {2,3}")
        registered = len(_events(controller, "broker_registered", broker=2))
        await c.broker(2).astart()  # after an unclean shutdown
        reg = await eventually(
            lambda: _events(controller, "broker_registered", broker=2)[registered:],
            timeout=60, what="the controller to see broker 2 register")
        assert reg[0]["clean_shutdown"] is False, reg
        s = await _until(c, "t", lambda s: 2 not in s.elr, "broker 2 out of the ELR")
        assert s.leader == -1 and s.elr == (3,) and 2 in s.last_known_elr and not s.isr, s
        # Balanced (the default): the fenced ELR member 3 is waited for; 2 never leads.
        await _stays(c, "t", lambda s: s.leader == -1 and s.elr == (3,), "still leaderless")
        assert not _events(controller, "leader_election", partition="t-0", new_leader=2)

        # Everyone back: broker 3 also died hard, so the ELR empties and the Balanced recovery
        # (every LastKnownELR member unfenced) elects the best log; nothing acked is lost.
        await c.broker(1).astart()
        await c.broker(3).astart()
        fin = await _event(controller, "unclean_recovery_finished", "the recovery of t-0",
                           partition="t-0")
        assert fin["outcome"] == "elected" and fin["offsets_discarded"] == 0, fin
        assert fin["leader"] in (2, 3), fin
        await _until(c, "t", lambda s: len(s.isr) >= 2
                     and s.leader_recovery_state == zl.LEADER_RECOVERED, "ISR back to 2")
        await _more_acks(load2, 50, "acks after the recovery")
    finally:
        load2.stop.set()
        await task
    await assert_acked_read_back(bs, load2)
    _one_leader_per_epoch(c, "t-0")


# ---------------------------------------------------------------------------- 2

async def _diverge(c, topics: list[str], restart: list[int]) -> dict[str, dict[int, bytes]]:
    """The faults of scenario 2 on every topic (assignment [A, S, B], min ISR 2): batch 1 to all
    three replicas; S paused (its session expires: it leaves the ISR); batch 2 acked by A and B
    only; B then A SIGKILLed (no ISR member left; with ELR, A and B fill the ELR); S woken
    (its log stays short: no leader to fetch from); then the brokers in ``restart`` started
    again - after their unclean shutdown, in that order. Returns every acked record."""
    bs = c.bootstrap_servers
    for t in topics:
        await _until(c, t, lambda s: s.leader == A and len(s.isr) == 3, "led by A, full ISR")
    acked = {t: await _produce(bs, t, 40, f"{t}-one") for t in topics}
    c.broker(S).pause()
    try:
        for t in topics:
            await _until(c, t, lambda s: set(s.isr) == {A, B}, "S out of the ISR")
        for t in topics:
            acked[t].update(await _produce(bs, t, 60, f"{t}-two"))
        c.broker(B).kill()
        for t in topics:
            await _until(c, t, lambda s: s.isr == (A,), "ISR {A}")
        c.broker(A).kill()
        for t in topics:
            await _until(c, t, lambda s: s.leader == -1, "leaderless")
    finally:
        c.broker(S).resume()
    await eventually(lambda: S in c.registered_brokers(), timeout=60, what="S registered again")
    for b in restart:
        await c.broker(b).astart()
    return acked


def _check_best_log(fin: dict, strategy: str) -> None:
    """An unclean_recovery_finished event: the longest log (A's, as long as B's) elected, S's
    shorter one answered and passed over, nothing discarded."""
    assert fin["outcome"] == "elected" and fin["strategy"] == strategy, fin
    leo = {int(b): a["log_end_offset"] for b, a in fin["answers"].items()}
    assert set(leo) == {A, S, B}, fin  # all three replicas were heard
    assert leo[S] < leo[A] == leo[B], fin
    assert fin["leader"] == A and fin["offsets_discarded"] == 0, fin


async def test_recovery_elects_the_longest_log_blind_election_loses(cluster_factory):
    # --- With ELR: tb Balanced, tp Proactive (set once every replica is live), tm Manual.
    c = cluster_factory(brokers=3, overrides={**ELR_ON, "unclean.recovery.strategy": "Manual"})
    bs = c.bootstrap_servers
    controller = c.controller(c.active_controller_id())
    async with AdminClient(bs) as admin:
        await admin.create_topic("tb", configs={**MIN_ISR, "unclean.recovery.strategy":
                                                "Balanced"}, replica_assignment=ASSIGNMENT)
        # No strategy of its own: the cluster's Manual, until unclean.leader.election.enable
        # maps it to Proactive (KIP-966's compatibility rule).
        await admin.create_topic("tp", configs=MIN_ISR, replica_assignment=ASSIGNMENT)
        await admin.create_topic("tm", configs={**MIN_ISR, "unclean.recovery.strategy":
                                                "Manual"}, replica_assignment=ASSIGNMENT)
    topics = ["tb", "tp", "tm"]
    acked = await _diverge(c, topics, restart=[B, A])
    # B, then A registered after an unclean shutdown: each left the ELR. When A registered the
    # ELR was empty and every LastKnownELR member unfenced: Balanced recovers, from all three.
    fin = await _event(controller, "unclean_recovery_finished", "tb's recovery",
                       partition="tb-0")
    _check_best_log(fin, "Balanced")
    el = _events(controller, "leader_election", partition="tb-0", reason="unclean_recovery")
    assert len(el) == 1 and el[0]["new_leader"] == A and el[0]["unclean"], el
    for t in ("tp", "tm"):
        s = _state(c, t)
        assert s.leader == -1 and not s.isr and not s.elr, s
        assert set(s.last_known_elr) == {A, B}, s
    # Manual (and the cluster's Manual for tp): no leader however long nobody asks.
    await _stays(c, "tm", lambda s: s.leader == -1, "tm leaderless under Manual")
    await _stays(c, "tp", lambda s: s.leader == -1, "tp leaderless under Manual", seconds=0.5)
    assert not _controller_events(c, "unclean_recovery_started", partition="tm-0")

    # Proactive, now that every replica is live: recovers at once, to the longest log.
    async with AdminClient(bs) as admin:
        res = await admin.incremental_alter_configs({("topics", "tp"): [
            AlterConfigOp("unclean.leader.election.enable", "set", "true")]})
        assert res == {("topics", "tp"): None}, res
    fin = await _event(controller, "unclean_recovery_finished", "tp's recovery",
                       partition="tp-0")
    _check_best_log(fin, "Proactive")

    # Manual: the operator's unclean election runs the recovery and answers after its choice.
    rc, out, err = await replog("elect", "--bootstrap-server", bs, "--election-type", "unclean",
                                "--topic", "tm", "--partition", "0")
    assert rc == 0 and "tm-0" in out, (rc, out, err)
    assert _state(c, "tm").leader == A  # elected before the answer
    fin = _events(controller, "unclean_recovery_finished", partition="tm-0")
    assert len(fin) == 1 and fin[0]["forced"], fin
    _check_best_log(fin[0], "Manual")

    # Every acknowledged record reads back, once the replicas are in sync again.
    for t in topics:
        await _until(c, t, lambda s: len(s.isr) == 3
                     and s.leader_recovery_state == zl.LEADER_RECOVERED, "full ISR, RECOVERED")
        assert await _read_back(bs, t, acked[t]) == [], t
    url = controller.metrics_url
    for strategy in ("Balanced", "Proactive", "Manual"):
        assert _metric(url, "replog_unclean_recoveries_total", strategy=strategy,
                       outcome="elected") == 1, strategy
    assert _metric(url, "replog_unclean_recovery_offsets_discarded_total") == 0
    assert _metric(url, "replog_controller_getreplicaloginfo_requests_total") >= 3
    for t in topics:
        _one_leader_per_epoch(c, f"{t}-0")

    # --- The same faults with ELR off and the old blind unclean election: A - the last ISR
    # member - stays down (it would come back as a clean leader); S and B are live and out of
    # the ISR; enabling unclean election picks the first live replica in assignment order: S.
    c2 = cluster_factory(brokers=3, overrides=FAST)
    bs2 = c2.bootstrap_servers
    controller2 = c2.controller(c2.active_controller_id())
    async with AdminClient(bs2) as admin:
        await admin.create_topic("tu", configs={**MIN_ISR,
                                                "unclean.leader.election.enable": "false"},
                                 replica_assignment=ASSIGNMENT)
    acked_u = (await _diverge(c2, ["tu"], restart=[B]))["tu"]
    s = _state(c2, "tu")
    assert s.leader == -1 and s.isr == (A,), s
    async with AdminClient(bs2) as admin:
        leos = {b: (await eventually(lambda b=b: _leo(admin, b, "tu"), timeout=30,
                                     what=f"broker {b}'s log end offset"))[0]
                for b in (S, B)}
        assert leos[S] < leos[B], leos
        res = await admin.incremental_alter_configs({("topics", "tu"): [
            AlterConfigOp("unclean.leader.election.enable", "set", "true")]})
        assert res == {("topics", "tu"): None}, res
    s = await _until(c2, "tu", lambda s: s.leader != -1, "an unclean leader")
    assert s.leader == S, s
    await _event(controller2, "leader_election", "the blind election", partition="tu-0",
                 new_leader=S)  # logged just after the state write we saw
    el = _events(controller2, "leader_election", partition="tu-0", new_leader=S)
    assert el and el[-1]["unclean"], el
    await _until(c2, "tu", lambda s: set(s.isr) == {S, B}
                 and s.leader_recovery_state == zl.LEADER_RECOVERED, "B follows S")
    lost = await _read_back(bs2, "tu", acked_u)
    discarded = leos[B] - leos[S]
    # The contrast: the blind election threw away every record S missed - acknowledged ones -
    # while each recovery above kept them all.
    assert discarded == 60 and len(lost) == 60, (discarded, lost)
    assert all(acked_u[o].startswith(b"tu-two") for o in lost), lost


# ---------------------------------------------------------------------------- 3

async def test_controller_killed_mid_recovery_next_one_finishes(cluster_factory):
    """Balanced, with a replica (S) that is registered but paused: the recovery asks it and
    waits for its answer (unclean.recovery.timeout.ms is longer than the test). The active
    controller is SIGKILLed mid-wait; the next one starts the recovery again from ZooKeeper's
    state, and elects once S answers."""
    # S keeps its ZooKeeper session through the pause (a long session): it stays registered,
    # so it is asked and cannot answer; it leaves the ISR by the leader's lag rule.
    c = cluster_factory(brokers=3, controllers=2,
                        overrides={**ELR_ON, "unclean.recovery.strategy": "Balanced"},
                        per_broker_overrides={S: {"zookeeper.session.timeout.ms": 60_000}})
    bs = c.bootstrap_servers
    first = c.controller(c.active_controller_id())
    async with AdminClient(bs) as admin:
        await admin.create_topic("t", configs=MIN_ISR, replica_assignment=ASSIGNMENT)
    await _until(c, "t", lambda s: s.leader == A and len(s.isr) == 3, "led by A, full ISR")
    acked = await _produce(bs, "t", 40, "one")
    c.broker(S).pause()
    try:
        # acks=all completes once the leader has dropped the paused S from the ISR (its lag
        # rule: S stopped fetching while the log grew)
        acked.update(await _produce(bs, "t", 60, "two"))
        assert set(_state(c, "t").isr) == {A, B}
        c.broker(B).kill()
        await _until(c, "t", lambda s: s.isr == (A,) and s.elr == (B,), "ISR {A}, ELR {B}")
        c.broker(A).kill()
        await _until(c, "t", lambda s: s.leader == -1 and s.elr == (A, B), "ELR {A,B}")
        # A and B return after unclean shutdowns: the ELR empties into LastKnownELR, all of
        # it unfenced - the recovery starts and asks A, B and the paused S.
        await asyncio.gather(c.broker(A).astart(), c.broker(B).astart())
        started = await _event(first, "unclean_recovery_started", "the recovery to start",
                               partition="t-0")
        assert started["strategy"] == "Balanced" and set(started["last_known_elr"]) == {A, B}
        await _event(first, "replica_log_info_failed", "the query to S to fail", broker=S)
        assert _state(c, "t").leader == -1
        assert not _events(first, "unclean_recovery_finished", partition="t-0")

        first.kill()
        second_id = await asyncio.to_thread(c.wait_for_controller, 60, [first.id])
        second = c.controller(second_id)
        await _event(second, "unclean_recovery_started", "the new controller's recovery",
                     partition="t-0")
        # (Balanced chooses only once every replica has answered, or after the timeout.)
        assert _state(c, "t").leader == -1
    finally:
        c.broker(S).resume()
    fin = await _event(second, "unclean_recovery_finished", "the recovery to finish",
                       partition="t-0")
    _check_best_log(fin, "Balanced")
    s = await _until(c, "t", lambda s: len(s.isr) == 3
                     and s.leader_recovery_state == zl.LEADER_RECOVERED, "full ISR, RECOVERED")
    assert s.leader == A, s
    assert not _events(first, "unclean_recovery_finished", partition="t-0")
    elections = _one_leader_per_epoch(c, "t-0")
    recovered = [e for e in elections if e["reason"] == "unclean_recovery"]
    assert len(recovered) == 1 and recovered[0]["new_leader"] == A, elections
    assert recovered[0]["leader_epoch"] == s.leader_epoch, (recovered, s)
    assert await _read_back(bs, "t", acked) == []
