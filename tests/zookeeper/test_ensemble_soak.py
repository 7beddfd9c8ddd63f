"""Soak (``make soak``, not ``make test``): a 5-node ensemble under acks=all load through
rounds of ZooKeeper faults - its leader killed and restarted, then a minority of two (the new
leader and a follower) down together and restarted. Every round keeps the
controller and its epoch and every broker's registration, and no acks=all write waits longer
than one session timeout; at the end every acknowledged record is read back."""

from __future__ import annotations

import asyncio

import pytest

from tests.cluster.helpers import assert_acked_read_back
from tests.zookeeper.test_ensemble_faults import (
    SESSION_TIMEOUT_MS,
    _cluster_under_load,
    _load_until,
    _registrations,
)

pytestmark = [pytest.mark.integration, pytest.mark.soak]

ROUNDS = 4


async def test_rounds_of_leader_and_minority_kills_on_five_members(cluster_factory):
    c, load, task = await _cluster_under_load(cluster_factory, zookeeper_nodes=5)
    controller, epoch = c.active_controller_id(), c.controller_epoch()
    registrations = _registrations(c)
    gaps = []
    try:
        for _ in range(ROUNDS):
            since = asyncio.get_running_loop().time()
            leader = c.zookeeper_leader()
            c.kill_zookeeper(leader)
            second = await asyncio.to_thread(c.zookeeper_ensemble.wait_for_quorum, 30)
            await _load_until(load, len(load.acked) + 100)
            await asyncio.to_thread(c.restart_zookeeper, leader)
            follower = next(i for i, s in c.zookeeper_ensemble.states().items()
                            if s == "follower")
            c.kill_zookeeper(second)
            c.kill_zookeeper(follower)  # 2 of 5 down: the 3 left are a quorum
            await asyncio.to_thread(c.zookeeper_ensemble.wait_for_quorum, 30)
            await _load_until(load, len(load.acked) + 100)
            await asyncio.to_thread(c.restart_zookeeper, second, follower)
            await _load_until(load, len(load.acked) + 100)
            gaps.append(load.max_gap(since))
    finally:
        load.stop.set()
        await task
    assert (c.active_controller_id(), c.controller_epoch()) == (controller, epoch)
    assert _registrations(c) == registrations
    assert max(gaps) < SESSION_TIMEOUT_MS / 1000, f"acknowledgement gaps per round: {gaps}"
    await assert_acked_read_back(c.bootstrap_servers, load)
