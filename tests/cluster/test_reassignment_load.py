"""Reassignment "Under load" (design.md#reassignment), with a real controller, real ZooKeeper and
real brokers: 100 partitions moved while an acks=all producer runs and one broker is bounced. Every
acknowledged record is read back at its offset, the moved partitions' replicas are
byte-identical up to the HW, and no files of removed replicas remain.

The topic has 100 partitions of RF 2 on brokers 1-3 ([1,2], [2,3], [3,1] in turn). Each
partition gains broker 4 and loses one replica: broker 3 wherever it holds one, broker 2 in the
[1,2] partitions. Broker 3 is in no target, so it is the one bounced: SIGKILLed right after the
request is accepted (every target replica was live when it was sent), while its replicas are
being removed, and restarted once some partitions finished without it. Those removals happened
while it was down, so its stray logs go when it restarts (from the controller's startup
metadata).
"""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from client.admin_client import AdminClient, AlterConfigOp
from common import zk_layout as zl
from tests.cluster.helpers import LoadProducer, assert_acked_read_back, eventually, replica_batches

pytestmark = pytest.mark.integration

FAST = {"zookeeper.session.timeout.ms": 3000, "replica.lag.time.max.ms": 3000,
        "replica.fetch.wait.max.ms": 200, "auto.leader.rebalance.enable": "false"}
PARTITIONS = 100
BOUNCED = 3
BEFORE = {p: [[1, 2], [2, 3], [3, 1]][p % 3] for p in range(PARTITIONS)}


def _target(replicas: list[int]) -> list[int]:
    """Broker 4 takes broker 3's place, or broker 2's where broker 3 holds no replica."""
    out = [4 if b == BOUNCED else b for b in replicas]
    return out if out != replicas else [4 if b == 2 else b for b in replicas]


TARGET = {p: _target(r) for p, r in BEFORE.items()}


def _znode(c) -> dict:
    return json.loads(c.zk_client().get(zl.topic_path("t"))[0])


async def _move_complete(admin: AdminClient, c) -> bool:
    if await admin.list_partition_reassignments():
        return False
    z = _znode(c)
    return not z["adding_replicas"] and not z["removing_replicas"] and \
        not c.zk_client().exists(zl.REASSIGN_PARTITIONS) and \
        z["partitions"] == {str(p): r for p, r in TARGET.items()}


async def _isr_is_target(admin: AdminClient):
    info = (await admin.describe_topics(["t"]))["t"]
    return all(list(s.replicas) == TARGET[s.partition] and sorted(s.isr) == sorted(s.replicas)
               and s.leader in s.replicas for s in info.partitions) and info


def _replica_files(c, broker: int, partition: int) -> list[str]:
    """Anything in the broker's log dirs that belongs to t-<partition>: the log dir itself or
    a renamed one on its way out (``t-<p>.<id>-delete``, ``-stray``, ``-future``)."""
    name = f"t-{partition}"
    return [os.path.join(str(d), e) for d in c.broker(broker).log_dirs if os.path.isdir(d)
            for e in os.listdir(d)
            if e == name or e.startswith((name + ".", name + "-"))]


def _removed_files(c) -> list[str]:
    return [f for p in range(PARTITIONS) for b in set(BEFORE[p]) - set(TARGET[p])
            for f in _replica_files(c, b, p)]


async def test_100_partitions_moved_under_acks_all_load_with_a_broker_bounced(cluster_factory):
    c = cluster_factory(brokers=4, overrides=FAST)
    bs = c.bootstrap_servers
    async with AdminClient(bs) as admin:
        await admin.create_topic("t", replica_assignment=BEFORE)
        await eventually(lambda: _isr_is_full(admin), timeout=60, what="t fully replicated")

        load = LoadProducer(bs, "t", PARTITIONS)
        producing = asyncio.create_task(load.run())
        try:
            await eventually(lambda: len(load.acked) >= 300, timeout=30,
                             what="records acknowledged before the move")
            # Unthrottled, most of 100 small moves could be over before the kill; broker 4's
            # follower throttle holds them at step 3 so that the bounce surely lands mid-move.
            await _hold_moves(admin, True)
            errors = await admin.alter_partition_reassignments(
                {("t", p): r for p, r in TARGET.items()})
            assert set(errors.values()) == {None}, errors
            c.broker(BOUNCED).kill()  # SIGKILL mid-move
            # The throttle lets one fetch through: a partition that got no record since then
            # may have completed, but the others are held.
            assert await admin.list_partition_reassignments()
            await _hold_moves(admin, False)
            # Some partitions finish while it is down: their removal of its replica never
            # reached it, so its files are still there; then it comes back while the rest
            # may still move, and must delete them as strays.
            await eventually(lambda: _strays_on_bounced(admin, c), timeout=60,
                             what="a move off broker 3 finished while it is down")
            await c.broker(BOUNCED).astart()
            await eventually(lambda: _move_complete(admin, c), timeout=90,
                             what="all 100 moves complete")
            await eventually(lambda: len(load.acked) >= 2000, timeout=60,
                             what="records acknowledged across the move")
        finally:
            load.stop.set()
            await producing
        info = await eventually(lambda: _isr_is_target(admin), timeout=60,
                                what="every ISR is the target replicas")

    # Every acknowledged record is read back at its offset.
    hws = await assert_acked_read_back(bs, load)

    # The moved partitions' replicas are byte-identical up to the HW.
    for s in info.partitions:
        p = s.partition
        logs = [replica_batches(c, b, "t", p, hws[p]) for b in TARGET[p]]
        assert logs[0] == logs[1], f"t-{p}: replicas {TARGET[p]} differ below HW {hws[p]}"
        # ... and hold every offset below it (the comparison is not of two empty logs)
        assert sum(last - base + 1 for base, last, _ in logs[0]) == hws[p] > 0, f"t-{p}"

    # No files of removed replicas remain, on the bounced broker included.
    await eventually(lambda: not _removed_files(c), timeout=60,
                     what="removed replicas' files deleted")


async def _isr_is_full(admin: AdminClient) -> bool:
    info = (await admin.describe_topics(["t"]))["t"]
    return len(info.partitions) == PARTITIONS and \
        all(len(s.isr) == 2 and s.leader >= 0 for s in info.partitions)


async def _hold_moves(admin: AdminClient, hold: bool) -> None:
    op = "set" if hold else "delete"
    errors = await admin.incremental_alter_configs({
        ("brokers", "4"): [AlterConfigOp("follower.replication.throttled.rate", op, "1")],
        ("topics", "t"): [AlterConfigOp("follower.replication.throttled.replicas", op,
                                        ",".join(f"{p}:4" for p in range(PARTITIONS)))]})
    assert set(errors.values()) == {None}, errors


async def _strays_on_bounced(admin: AdminClient, c) -> list[int]:
    """Partitions whose move off broker 3 is complete but whose files broker 3 still has."""
    moving = {p for _, p in await admin.list_partition_reassignments()}
    return [p for p, r in BEFORE.items() if BOUNCED in r and p not in moving
            and _replica_files(c, BOUNCED, p)]

