"""design.md#reassignment's acceptance tests, by name, with a real controller, real ZooKeeper and
real broker processes: the six unit tests of the KAFKA-42 patch, and the failure cases with the
controller SIGKILLed at a named step boundary (the test-only hook
`replog.test.kill.at.reassignment.step` names the boundary; the kill is a real one) and the next
controller finishing the move.

Each test checks what a user would: the assignment in ZooKeeper, the ISR and leader, every
acknowledged record read back at its offset, and the removed replicas' files gone.
"""

from __future__ import annotations

import json
import os

import pytest

from client.admin_client import AdminClient, AlterConfigOp
from client.producer import Producer
from common import zk_layout as zl
from tests.cluster.helpers import eventually, partition_state
from tests.cluster.test_replication_faults import consume_all

pytestmark = pytest.mark.integration

FAST = {"zookeeper.session.timeout.ms": 3000, "replica.lag.time.max.ms": 3000,
        "replica.fetch.wait.max.ms": 200, "auto.leader.rebalance.enable": "false"}
KILL_KEY = "replog.test.kill.at.reassignment.step"


def _cluster(cluster_factory, controllers: int = 1, kill_at: int | None = None):
    c = cluster_factory(brokers=4, controllers=controllers, overrides=FAST, start=False)
    first = min(c.controllers)
    if kill_at is not None:
        # Only the first controller carries the hook, and it must be the first active one.
        c.controller(first).overrides[KILL_KEY] = str(kill_at)
    c.start()
    if kill_at is not None and c.active_controller_id() != first:
        other = c.active_controller_id()
        c.controller(other).restart()
        c.wait_for_controller(timeout=30, exclude=[other])
        assert c.active_controller_id() == first
    return c


async def _topic_with_records(c, assignment: dict[int, list[int]], n: int = 300
                              ) -> dict[int, bytes]:
    bs = c.bootstrap_servers
    async with AdminClient(bs) as admin:
        await admin.create_topic("t", replica_assignment=assignment)
    await eventually(lambda: partition_state(bs, "t"), what="leader elected")
    acked: dict[int, bytes] = {}
    async with Producer(bs, acks="all", linger_ms=2) as p:
        futs = [await p.send("t", f"v{i}".encode(), partition=0) for i in range(n)]
        for i, f in enumerate(futs):
            acked[(await f).offset] = f"v{i}".encode()
    return acked


def _znode(c, topic: str = "t") -> dict:
    return json.loads(c.zk_client().get(zl.topic_path(topic))[0])


def _replica_dirs(c, broker: int, topic: str = "t", partition: int = 0) -> list[str]:
    return [os.path.join(str(d), f"{topic}-{partition}") for d in c.broker(broker).log_dirs
            if os.path.isdir(os.path.join(str(d), f"{topic}-{partition}"))]


async def _moved(c, target: list[int], removed: list[int]):
    """The move is complete: AR = target in the topic znode with nothing adding or removing,
    no admin entry, the ISR is the target, and the removed replicas' files are gone."""
    z = _znode(c)
    if z["partitions"]["0"] != target or z["adding_replicas"] or z["removing_replicas"]:
        return False
    if c.zk_client().exists(zl.REASSIGN_PARTITIONS):
        return False
    s = await partition_state(c.bootstrap_servers, "t")
    if s is None or sorted(s.isr) != sorted(target) or s.leader not in target:
        return False
    return all(not _replica_dirs(c, b) for b in removed) and s


async def _reassign(c, target: list[int] | None) -> None:
    async with AdminClient(c.bootstrap_servers) as admin:
        errors = await admin.alter_partition_reassignments({("t", 0): target})
    assert errors == {("t", 0): None}


async def _check_records(c, acked: dict[int, bytes]) -> None:
    consumed = await consume_all(c.bootstrap_servers, "t", 0, max(acked) + 1)
    for offset, value in acked.items():
        assert consumed.get(offset) == value, f"offset {offset}"


@pytest.mark.parametrize("name, before, target", [
    ("seed_test_1_leader_in_rar", [1, 2], [1, 3]),
    ("seed_test_2_leader_not_in_rar", [1, 2], [3, 4]),
    ("seed_test_3_rar_disjoint_from_ar", [1, 2], [4, 3]),
])
async def test_seed_reassignment(cluster_factory, name, before, target):
    c = _cluster(cluster_factory)
    acked = await _topic_with_records(c, {0: before})
    await _reassign(c, target)
    removed = [b for b in before if b not in target]
    s = await eventually(lambda: _moved(c, target, removed), timeout=60, what="move complete")
    if before[0] not in target:
        assert s.leader == target[0]  # step 4: elected from RAR
    await _check_records(c, acked)
    for b in target:
        assert _replica_dirs(c, b), f"no replica on broker {b}"


async def test_seed_test_4_non_existent_partition_refused(cluster_factory):
    c = _cluster(cluster_factory)
    await _topic_with_records(c, {0: [1, 2]}, n=10)
    async with AdminClient(c.bootstrap_servers) as admin:
        errors = await admin.alter_partition_reassignments({("t", 0): [3, 4],
                                                            ("t", 5): [1, 2]})
    assert "does not exist" in str(errors[("t", 5)])
    assert "Not started" in str(errors[("t", 0)])
    # rejected whole: t-0 did not start either
    assert _znode(c)["partitions"]["0"] == [1, 2] and not _znode(c)["adding_replicas"]


@pytest.mark.parametrize("case, step", [
    ("seed_case_2a_between_steps_2_and_3", 2),
    ("seed_test_6_completed_up_to_step_3", 3),
    ("seed_case_3_between_steps_4_and_5", 4),
    ("seed_case_4a_between_steps_5_and_6", 5),
    ("seed_test_5_completed_up_to_step_6", 6),
])
async def test_controller_killed_at_a_step_boundary(cluster_factory, case, step):
    """design.md#reassignment-failover: the controller dies right after step `step` (SIGKILL); the
    standby resumes from ZooKeeper and finishes. The request comes through the admin path
    (/admin/reassign_partitions) here, so step 7 is exercised too."""
    c = _cluster(cluster_factory, controllers=2, kill_at=step)
    acked = await _topic_with_records(c, {0: [1, 2]})
    c.zk_client().create(zl.REASSIGN_PARTITIONS, zl.encode_reassignment([("t", 0, [3, 4])]))
    first = min(c.controllers)
    await eventually(lambda: not c.controller(first).is_running(), timeout=60,
                     what=f"controller {first} killed at step {step}")
    assert c.controller(first).returncode in (-9, 137)
    if step == 4:
        # Seed case 3 (the stray rule): step 4's UpdateMetadata (replicas = [3, 4] at a new
        # epoch) reached brokers 1 and 2 before the kill, step 5 has not shrunk the ISR: while
        # ZooKeeper lists them in the ISR (the standby takes over only once the killed
        # controller's session expires), their logs must still be there - a clean election
        # may pick them.
        state = json.loads(c.zk_client().get(zl.partition_state_path("t", 0))[0])
        in_isr = [b for b in (1, 2) if b in state["isr"]]
        assert in_isr, state
        for b in in_isr:
            assert _replica_dirs(c, b), f"broker {b} is in the ISR {state['isr']} without a log"
    c.wait_for_controller(timeout=30, exclude=[first])
    await eventually(lambda: _moved(c, [3, 4], [1, 2]), timeout=90, what="move finished")
    await _check_records(c, acked)


async def test_cancel_mid_move_restores_the_original_and_deletes_the_added(cluster_factory):
    c = _cluster(cluster_factory)
    bs = c.bootstrap_servers
    await _topic_with_records(c, {0: [1, 2]}, n=10)
    async with Producer(bs, acks="all", linger_ms=5) as p:  # ~3 MB: more than one fetch
        for f in [await p.send("t", b"x" * 1024, partition=0) for _ in range(3000)]:
            await f
    # Hold the move in flight (seed case 2b): broker 3's follower throttle lets one fetch
    # through and then holds it far behind, so its replica exists but never joins the ISR.
    async with AdminClient(bs) as admin:
        await admin.incremental_alter_configs({
            ("brokers", "3"): [AlterConfigOp("follower.replication.throttled.rate", "set",
                                             "1")],
            ("topics", "t"): [AlterConfigOp("follower.replication.throttled.replicas", "set",
                                            "0:3")]})
    await _reassign(c, [1, 3])
    await eventually(lambda: _replica_dirs(c, 3), what="adding replica created")
    # broker 3 is down when the cancel tells it to delete its replica
    c.broker(3).kill()
    await _reassign(c, None)
    z = _znode(c)
    assert z["partitions"]["0"] == [1, 2] and not z["adding_replicas"] \
        and not z["removing_replicas"]
    s = await partition_state(bs, "t")
    assert sorted(s.isr) == [1, 2] and sorted(s.replicas) == [1, 2]
    # on restart it learns from the controller's metadata that it holds no replica of t-0
    # (a stray log) and deletes the files
    assert _replica_dirs(c, 3)
    c.broker(3).start()
    await eventually(lambda: not _replica_dirs(c, 3), timeout=60,
                     what="the adding replica's files deleted")
