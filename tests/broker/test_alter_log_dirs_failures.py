"""KIP-113 moves meeting a failing destination dir, in process with
real files behind FaultInjectingFileOps: a destination dir that goes offline before the swap
cancels the move and keeps the source; one that goes offline after the swap's point of no
return loses the replica with it (offline, a restart entry), as a Kafka swap followed by the
dir's failure does; and a swap that fails after its first rename never leaves a copy that the
next start prefers to the live one."""

import asyncio
import os
from types import SimpleNamespace

import pytest

from broker.storage.fileops import FaultInjectingFileOps
from broker.storage.log_manager import LogManager
from common.errors import ErrorCode
from tests.broker import test_alter_log_dirs as moves
from tests.broker.inprocess import Node, leader_and_isr, wait_until
from tests.broker.test_alter_log_dirs import T0, _alter, _batches, _produce

node = moves.node  # the fixture: one broker, two log dirs, T0 led in the first


@pytest.mark.parametrize("offline_by", ["log_manager", "replica_manager"])
async def test_a_swap_into_a_dir_that_went_offline_keeps_the_source(node, offline_by):
    # The destination dir goes offline while the swap waits on the write path: taken offline
    # by the LogManager alone, the swap itself must see it; by the replica manager's failure
    # handler, the move is called off too. Either way the source stays the replica.
    n = node
    d0, d1 = n.lm.dirs
    hold, move = await moves._held_move(n, swap_lag=1000)
    assert move.swapping
    before = _batches(n.lm.get_log(T0))
    if offline_by == "log_manager":
        n.lm.mark_offline(d1.path, "the destination disk is gone")
    else:
        n.rm.handle_log_dir_failure(d1.path, "the destination disk is gone")
    hold.release()
    assert await move.done is False
    assert n.rm.alter_log_dirs.future_log(T0) is None
    assert n.lm.log_dir_of(T0) is d0 and T0 not in n.rm.offline_replicas
    assert _batches(n.lm.get_log(T0)) == before
    assert os.path.isdir(os.path.join(d0.path, "t-0"))
    assert not os.path.exists(os.path.join(d1.path, "t-0"))
    base, _ = await _produce(n, "after")
    assert base == 100


async def test_a_dir_going_offline_cancels_the_moves_into_it(node):
    # Kafka's handleLogDirFailure removes the future replicas of the failed dir: the copier
    # does not keep a move into a dir nothing may run on.
    n = node
    d0, d1 = n.lm.dirs
    hold, move = await moves._held_move(n)
    assert not move.swapping
    n.rm.handle_log_dir_failure(d1.path, "the destination disk is gone")
    assert n.rm.alter_log_dirs.future_log(T0) is None
    assert await move.done is False
    hold.release()
    assert n.lm.log_dir_of(T0) is d0 and T0 not in n.rm.offline_replicas
    base, _ = await _produce(n, "after")
    assert base == 100


async def test_a_dir_going_offline_after_the_swap_committed_loses_the_replica_with_it(node):
    # Past the point of no return (the future dir is being renamed to t-0, its placement
    # record superseding the source) the swap completes, as Kafka's does under the partition
    # lock before handleLogDirFailure sees the dir: the replica is then in the offline dir,
    # so it is lost with it - an offline replica with a restart entry, never a live log
    # mapped to an offline dir.
    n = node
    d1 = n.lm.dirs[1]
    restarts = []
    n.rm.restart_notifier = SimpleNamespace(
        request=lambda log_dir, tps, *_: restarts.append((log_dir, sorted(tps))))
    for i in range(20):
        await _produce(n, f"a{i}-")
    hold = n.fo.hold(os.path.join(d1.path, "t-0"), ops={"rename"})
    assert await _alter(n, d1.path) == ErrorCode.NONE
    move = n.rm.alter_log_dirs.future_log(T0)
    await wait_until(hold.entered.is_set)
    n.rm.handle_log_dir_failure(d1.path, "the destination disk is gone")
    hold.release()
    await move.done
    assert n.rm.offline_replicas.get(T0) == d1.path
    assert n.lm.get_log(T0) is None and T0 not in n.rm.partitions
    assert (d1.path, [T0]) in restarts


async def test_a_swap_failing_after_its_rename_never_outranks_the_live_copy(tmp_path):
    # The renamed copy (placement record: supersedes the source) cannot be reopened, and
    # neither renaming it back nor deleting it works. The source stays the replica and keeps
    # taking appends; at the next start from disk it must win over the stale copy.
    fo = FaultInjectingFileOps()
    n = Node(1, tmp_path, fileops=fo, log_dirs=2)
    await n.start()
    failures = asyncio.ensure_future(n.rm.log_dir_failure_loop())
    try:
        await n.stub.LeaderAndIsr(leader_and_isr(n, 1, 0, [1], [1], [n], tp=T0))
        d0, d1 = (d.path for d in n.lm.dirs)
        for i in range(20):
            await _produce(n, f"a{i}-")
        final = os.path.join(d1, "t-0")
        real_replace = fo.replace

        def replace(src, dst):
            real_replace(src, dst)
            if dst == final:  # the swap's first rename: from here on the copy is unusable
                fo.fail(final, ops={"open", "unlink"})  # reopening it, and rmtree
                fo.fail(src, ops={"rename"})  # renaming it back to its -future name
        fo.replace = replace
        mover, started = n.rm.alter_log_dirs, []
        start_move = mover.start_move

        async def recording_start(tp, target):  # the copier may finish before the answer
            started.append(await start_move(tp, target))
            return started[-1]
        mover.start_move = recording_start
        assert await _alter(n, d1) == ErrorCode.NONE
        assert await started[0].done is False
        assert n.lm.log_dir_of(T0).path == d0
        base, _ = await _produce(n, "after")
        assert base == 100
        live = _batches(n.lm.get_log(T0))
        fo.clear()
    finally:
        failures.cancel()
        await n.rm.alter_log_dirs.shutdown()
        await n.stop()
    again = LogManager([d0, d1], 1)
    again.startup()
    try:
        assert again.log_dir_of(T0) is again.dirs[0]
        assert _batches(again.get_log(T0)) == live
        assert again.stale_copies_deleted == [(T0, d1, d0)]
    finally:
        again.shutdown()
