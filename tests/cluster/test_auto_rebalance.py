"""Preferred leader election (design.md#reassignment), the automatic half: after a broker bounce,
with auto.leader.rebalance.enable the controller's periodic imbalance check returns leadership to
the preferred replicas on its own. The manual half (auto rebalance off: leaders stay moved
until ``replog elect --election-type preferred --all-topic-partitions``) is
tests/admin/test_elect_cli.py::test_preferred_election_after_a_bounce_returns_leadership.
"""

from __future__ import annotations

import json

import pytest

from client.admin_client import AdminClient
from tests.cluster.helpers import eventually, scrape

pytestmark = pytest.mark.integration

IMBALANCE = "kafka_controller_kafkacontroller_preferredreplicaimbalancecount"
AUTO = {"zookeeper.session.timeout.ms": 3000, "replica.lag.time.max.ms": 3000,
        "replica.fetch.wait.max.ms": 200, "auto.leader.rebalance.enable": "true",
        "leader.imbalance.check.interval.seconds": 1,  # the minimum (common/config.py)
        "leader.imbalance.per.broker.percentage": 10}
# Two partitions preferred-led by each broker, followers the next ones round the ring.
ASSIGNMENT = {p: [(p + i) % 3 + 1 for i in range(3)] for p in range(6)}


async def _leaders(bootstrap: str) -> dict[int, tuple[int, tuple[int, ...], tuple[int, ...]]]:
    async with AdminClient(bootstrap, request_timeout_ms=5000) as admin:
        info = (await admin.describe_topics(["foo"]))["foo"]
    return {s.partition: (s.leader, s.replicas, s.isr) for s in info.partitions}


async def _all_preferred_and_full(bootstrap: str):
    state = await _leaders(bootstrap)
    return all(leader == replicas[0] and len(isr) == 3
               for leader, replicas, isr in state.values()) and state


def _imbalance(c) -> float:
    return scrape(c.controller(min(c.controllers)).metrics_url)[IMBALANCE]


async def test_auto_rebalance_returns_leadership_to_the_preferred_replicas(cluster_factory):
    c = cluster_factory(brokers=3, overrides=AUTO)
    bs = c.bootstrap_servers
    async with AdminClient(bs) as admin:
        await admin.create_topic("foo", replica_assignment=ASSIGNMENT)
    await eventually(lambda: _all_preferred_and_full(bs), timeout=60,
                     what="foo fully replicated, led by its preferred replicas")
    led_by_1 = [p for p, r in ASSIGNMENT.items() if r[0] == 1]

    c.broker(1).kill()  # SIGKILL: the controller moves its leaderships when its session ends
    moved = await eventually(
        lambda: _leaders_off(bs, 1), timeout=30, what="leadership to leave broker 1")
    assert all(moved[p][0] != 1 for p in led_by_1)
    # The check cannot hand them back while broker 1 is down: the imbalance stands.
    await eventually(lambda: _imbalance(c) == len(led_by_1), timeout=10,
                     what=f"{IMBALANCE} == {len(led_by_1)}")

    c.broker(1).start()
    # No election is asked for: the controller's imbalance check, once broker 1 is back in
    # the ISR, elects the preferred replicas on its own.
    await eventually(lambda: _all_preferred_and_full(bs), timeout=60,
                     what="every leader back on its preferred replica")
    await eventually(lambda: _imbalance(c) == 0, timeout=10, what=f"{IMBALANCE} == 0")
    # ... through preferred elections (the selector of ElectLeaders, which nobody sent, and
    # of the periodic check), not by some other path that happened to pick broker 1
    back = {e["partition"] for e in _events(c) if e.get("event") == "leader_election"
            and e.get("new_leader") == 1 and e.get("reason") == "preferred"}
    assert back == {f"foo-{p}" for p in led_by_1}


def _events(c) -> list[dict]:
    with open(c.controller(min(c.controllers)).event_log_file) as f:
        return [json.loads(line) for line in f if line.strip()]


async def _leaders_off(bootstrap: str, broker: int):
    state = await _leaders(bootstrap)
    return all(leader not in (broker, -1) for leader, _, _ in state.values()) and state
