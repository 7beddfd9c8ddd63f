"""Intra-broker replica moves (KIP-113), in process with real files: the pure
decisions of the ReplicaAlterLogDirs copier, a move under produce load swapped in with the same
batches and offsets, a failed destination dir and a cancelled move leaving the original intact,
and a restart mid-move discarding the future replica."""

import asyncio
import errno
import os
import shutil

import pytest

from broker import alter_log_dirs as ald
from broker import log_dirs
from broker.storage.checkpoints import REPLICATION_OFFSET_CHECKPOINT, OffsetCheckpointFile
from broker.storage.fileops import FaultInjectingFileOps
from broker.storage.log import Log
from broker.storage.log_manager import LogManager
from common import records as rec
from common.errors import CorruptRecordError, ErrorCode
from common.names import TopicPartition
from common.rpc import replog_pb2 as pb
from tests.broker.inprocess import Node, leader_and_isr, produce_req, wait_until

T0 = TopicPartition("t", 0)
FAILED = "kafka_server_replicafetchermanager_failedpartitionscount"

# ------------------------------------------------------------------ pure decisions


def test_future_dir_name_is_kafkas():
    assert ald.future_dir_name(T0, "abc") == "t-0.abc-future"


@pytest.mark.parametrize("current, future, exceeded, lag, step", [
    (100, 0, False, 0, ald.Step.COPY),
    (100, 0, True, 0, ald.Step.THROTTLED),      # the io quota holds the copy back
    (100, 100, True, 0, ald.Step.SWAP),         # caught up: the swap is not throttled
    (100, 95, False, 10, ald.Step.SWAP),        # the tail is copied under the write path
    (0, 0, False, 0, ald.Step.SWAP),            # an empty replica moves at once
])
def test_next_step(current, future, exceeded, lag, step):
    assert ald.next_step(current, future, exceeded, lag) is step


def test_describe_reports_the_future_replica_with_its_lag():
    d = log_dirs.describe_log_dir("/d1", "id", True, (10, 5), [
        log_dirs.ReplicaInDir(T0, 7, False, 0, 40, True, 100),
        log_dirs.ReplicaInDir(TopicPartition("t", 1), 3, True, 50, 45)])
    assert [(r.tp, r.offset_lag, r.is_future) for r in d.replicas] == [
        (T0, 60, True), (TopicPartition("t", 1), 5, False)]


def test_a_future_replica_is_reconciled_with_a_truncated_current_one(tmp_path):
    # The current replica is a follower that truncated after a leader change (KIP-101): the
    # future replica drops what the current one no longer has, then copies the new batches.
    cur = Log.open(str(tmp_path / "d0"), T0)
    fut = Log.open(str(tmp_path / "d1"), T0, partition_dir=str(tmp_path / "d1" / "t-0.x-future"))
    batch = produce_req("a").topic_data[0].partition_data[0].records
    cur.append_as_leader(batch, 0)
    cur.append_as_leader(batch, 1)
    assert ald.reconcile(cur, fut) is None
    fut.append_as_follower(cur.read(0, 1 << 20))
    cur.truncate_to(5)
    cur.append_as_leader(batch, 2)
    assert ald.reconcile(cur, fut) == ("truncate", 5)
    ald._copy_tail(cur, fut)
    assert _batches(fut) == _batches(cur) and fut.epoch_cache.entries == [(0, 0), (2, 5)]
    cur.delete_old_segments()
    cur.truncate_fully_and_start_at(20)  # the current log now starts past the copy
    assert ald.reconcile(cur, fut) == ("restart", 20)
    for log in (cur, fut):
        log.close()


# ------------------------------------------------------------------ in process


@pytest.fixture
async def node(tmp_path):
    fo = FaultInjectingFileOps()
    n = Node(1, tmp_path, fileops=fo, log_dirs=2)
    n.fo = fo
    n.rm.log_dir_failures.probe_timeout_s = 30
    await n.start()
    n.failure_loop = asyncio.ensure_future(n.rm.log_dir_failure_loop())
    resp = await n.stub.LeaderAndIsr(leader_and_isr(n, 1, 0, [1], [1], [n], tp=T0))
    assert resp.partition_errors[0].error_code == 0
    assert n.lm.log_dir_of(T0) is n.lm.dirs[0]
    yield n
    n.failure_loop.cancel()
    fo.clear()
    await n.rm.alter_log_dirs.shutdown()
    await n.stop()


async def _produce(n, tag, count=5):
    req = produce_req(tag, n=count, acks=1)
    resp = await n.stub.Produce(req)
    r = resp.responses[0].partition_responses[0]
    assert r.error_code == 0, r.error_message
    return r.base_offset, req.topic_data[0].partition_data[0].records


async def _alter(n, path, tp=T0):
    resp = await n.stub.AlterReplicaLogDirs(pb.AlterReplicaLogDirsRequest(dirs=[
        pb.AlterReplicaLogDir(path=path, topics=[pb.TopicPartitions(topic=tp.topic,
                                                                    partitions=[tp.partition])])]))
    return resp.results[0].error_code


def _batches(log):
    data = log.read(log.log_start_offset, 1 << 30)
    return [(b.header.base_offset, bytes(b.data)) for b in rec.iter_batches(memoryview(data))]


def _checkpointed(n, d):
    return OffsetCheckpointFile(d.path, REPLICATION_OFFSET_CHECKPOINT, n.fo).read()


def _entries(d, suffix):
    return [e for e in os.listdir(d.path) if e.startswith("t-0") and e.endswith(suffix)]


async def test_a_move_under_load_swaps_in_the_same_batches_and_offsets(node):
    n = node
    d0, d1 = n.lm.dirs
    mover = n.rm.alter_log_dirs
    mover.swap_lag = 0  # copy everything through the copier, not the swap
    produced = [await _produce(n, f"a{i}-") for i in range(30)]
    done = asyncio.Event()

    async def load():
        i = 0
        while not done.is_set() or i < 10:
            produced.append(await _produce(n, f"b{i}-"))
            i += 1
    producer = asyncio.ensure_future(load())
    started = []
    start_move = mover.start_move

    async def record_start(tp, target):
        started.append(await start_move(tp, target))
        return started[-1]
    mover.start_move = record_start
    assert await _alter(n, d1.path) == ErrorCode.NONE
    assert os.path.basename(started[0].future.dir).endswith("-future")
    assert await started[0].done is True
    done.set()
    await producer
    new = n.lm.get_log(T0)
    assert n.lm.log_dir_of(T0) is d1 and new.log_dir == d1.path
    assert n.rm.partitions[T0].log is new
    # Every acked batch is in the new log at its offset, byte for byte past the offset,
    # length and leader epoch the leader stamped; nothing else is there.
    got = dict(_batches(new))
    assert sorted(got) == sorted(base for base, _ in produced)
    for base, sent in produced:
        assert got[base][16:] == bytes(sent)[16:]
    assert new.log_end_offset == 5 * len(produced)
    # The old copy is gone, and the checkpoints name the new dir.
    await wait_until(lambda: not _entries(d0, "") and not _entries(d0, "-delete"))
    await wait_until(lambda: T0 in _checkpointed(n, d1) and T0 not in _checkpointed(n, d0))
    assert not _entries(d1, "-future")
    assert n.rm.metrics.registry.get_sample_value(FAILED, {"clientId": "ReplicaAlterLogDirs"}) == 0
    # And it keeps working as the leader's log.
    base, _ = await _produce(n, "c")
    assert base == 5 * len(produced)


async def test_a_failed_destination_dir_leaves_the_original_intact(node):
    n = node
    d0, d1 = n.lm.dirs
    for i in range(20):
        await _produce(n, f"a{i}-")
    before = _batches(n.lm.get_log(T0))
    n.fo.fail(d1.path, errno.EIO, ops={"write"})  # the destination disk dies on write
    assert await _alter(n, d1.path) == ErrorCode.NONE
    # The copier may fail it before the response is read: wait for the count, not the move.
    await wait_until(lambda: n.rm.metrics.registry.get_sample_value(
        FAILED, {"clientId": "ReplicaAlterLogDirs"}) == 1)
    assert n.rm.alter_log_dirs.future_log(T0) is None
    log = n.lm.get_log(T0)
    assert n.lm.log_dir_of(T0) is d0 and _batches(log) == before
    base, _ = await _produce(n, "after")
    assert base == 100
    assert os.path.isdir(os.path.join(d0.path, "t-0"))


async def _held_move(n, swap_lag=0):
    """A move of T0 to the second dir stopped inside its first write there: the copier's
    first copy, or with a ``swap_lag`` past the LEO the swap's tail copy on the write path
    (before the swap's point of no return)."""
    n.rm.alter_log_dirs.swap_lag = swap_lag
    for i in range(20):
        await _produce(n, f"a{i}-")
    hold = n.fo.hold(n.lm.dirs[1].path, ops={"write"})
    assert await _alter(n, n.lm.dirs[1].path) == ErrorCode.NONE
    move = n.rm.alter_log_dirs.future_log(T0)
    await wait_until(hold.entered.is_set)
    return hold, move


async def test_an_alter_back_to_the_current_dir_cancels_the_move(node):
    n = node
    d0, d1 = n.lm.dirs
    hold, move = await _held_move(n)
    before = _batches(n.lm.get_log(T0))
    resp = await n.stub.DescribeLogDirs(pb.DescribeLogDirsRequest())
    future = [(p.is_future, p.offset_lag) for r in resp.results if r.log_dir == d1.path
              for t in r.topics for p in t.partitions]
    assert future == [(True, 100)]
    assert await _alter(n, d0.path) == ErrorCode.NONE  # back to where it is: cancelled
    assert await move.done is False
    hold.release()
    await wait_until(lambda: not _entries(d1, "-future"))
    assert n.lm.log_dir_of(T0) is d0 and _batches(n.lm.get_log(T0)) == before


async def test_alter_replica_log_dirs_errors(node):
    n = node
    assert await _alter(n, "/no/such/dir") == ErrorCode.LOG_DIR_NOT_FOUND
    assert await _alter(n, n.lm.dirs[0].path) == ErrorCode.NONE  # already there
    t5 = TopicPartition("t", 5)
    assert await _alter(n, n.lm.dirs[1].path, t5) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # Remembered: the replica is created there when it comes (Kafka's preferredLogDirs).
    resp = await n.stub.LeaderAndIsr(leader_and_isr(n, 1, 0, [1], [1], [n], tp=t5))
    assert resp.partition_errors[0].error_code == 0
    assert n.lm.log_dir_of(t5) is n.lm.dirs[1]


@pytest.mark.parametrize("crash", [True, False])
async def test_a_move_cut_short_by_a_restart_resumes_from_its_future_replica(tmp_path, crash,
                                                                            monkeypatch):
    # KIP-113: a restart mid-move - a crash, or a clean shutdown, which keeps the future
    # replica - leaves <tp>.<id>-future in the target dir; the next start opens it and, once
    # a LeaderAndIsr hosts the replica again, the move goes on from what was copied (Kafka
    # resumes it; replog used to discard it and a later AlterReplicaLogDirs started over).
    n = Node(1, tmp_path, log_dirs=2)
    await n.start()
    await n.stub.LeaderAndIsr(leader_and_isr(n, 1, 0, [1], [1], [n], tp=T0))
    for i in range(20):
        await _produce(n, f"a{i}-")
    d0, d1 = (d.path for d in n.lm.dirs)
    mover = n.rm.alter_log_dirs
    mover.swap_lag = 0
    monkeypatch.setattr(ald, "COPY_MAX_BYTES", 1)  # one batch per copy (min_one_batch)
    mover.quota.update_quota(1)  # after the first copy the throttle holds the move
    move = await mover.start_move(T0, n.lm.dirs[1])
    await wait_until(lambda: move.future.log_end_offset > 0, what="a first copy")
    copied = move.future.log_end_offset
    assert copied < n.lm.get_log(T0).log_end_offset
    if crash:
        mover._task.cancel()  # the broker dies: nothing closes the future replica
    else:
        await mover.shutdown()
    await n.stop()
    [future_dir] = [e for e in os.listdir(d1) if e.endswith("-future")]

    n = Node(1, tmp_path, log_dirs=2)
    assert n.lm.log_dir_of(T0).path == d0
    future, target = n.lm.future_logs[T0]
    assert target.path == d1 and os.path.basename(future.dir) == future_dir
    assert future.log_end_offset == copied  # resumed from what was copied, not from 0
    await n.start()
    try:
        before = _batches(n.lm.get_log(T0))
        await n.stub.LeaderAndIsr(leader_and_isr(n, 1, 1, [1], [1], [n], tp=T0))
        await wait_until(lambda: n.lm.log_dir_of(T0).path == d1, what="the move finished")
        assert _batches(n.lm.get_log(T0)) == before
        assert not [e for e in os.listdir(d1) if e.endswith("-future")]
        assert [e["future_log_end_offset"] for e in n.events_logged()
                if e["event"] == "future_replica_resumed"] == [copied]
    finally:
        await n.rm.alter_log_dirs.shutdown()
        await n.stop()


def test_a_future_replica_with_nothing_to_resume_is_deleted_at_start(tmp_path):
    n = Node(1, tmp_path, log_dirs=2)
    d0, d1 = (d.path for d in n.lm.dirs)
    n.lm.shutdown()
    orphan = os.path.join(d1, "t-7.0123456789abcdef-future")  # no current replica of t-7
    os.makedirs(orphan)
    lm = LogManager([d0, d1], 1)
    lm.startup()
    assert not os.path.exists(orphan) and lm.future_logs == {}
    lm.shutdown()


async def test_the_move_throttle_follows_the_dynamic_broker_config(node):
    quota = node.rm.alter_log_dirs.quota
    assert quota.bound == (1 << 63) - 1  # Kafka's default: unlimited
    node.rm.apply_broker_config({ald.ALTER_LOG_DIRS_RATE: "1000"})
    assert quota.bound == 1000
    quota.record(10_000)
    assert ald.next_step(100, 0, quota.is_quota_exceeded(), 0) is ald.Step.THROTTLED
    node.rm.apply_broker_config({})
    assert quota.bound == (1 << 63) - 1


async def test_stop_replica_cancels_the_move(node):
    n = node
    d0, d1 = n.lm.dirs
    hold, _ = await _held_move(n)
    resp = await n.stub.StopReplica(pb.StopReplicaRequest(
        controller_id=0, controller_epoch=1, broker_epoch=n.rm.broker_epoch,
        partition_states=[pb.StopReplicaPartitionState(topic="t", partition=0,
                                                       delete_partition=True)]))
    assert resp.partition_errors[0].error_code == 0
    assert n.rm.alter_log_dirs.future_log(T0) is None
    hold.release()
    await wait_until(lambda: not _entries(d1, "-future") and not _entries(d0, ""))


async def test_a_crash_between_the_two_renames_keeps_the_new_copy(tmp_path):
    # The broker dies once the future dir is renamed to t-0 (with its placement record) and
    # before the current dir is renamed aside: the disk as it is at that instant is taken
    # from inside the second rename, and put back once the broker is gone. Startup from it
    # keeps the new copy and deletes the old (placement.py).
    fo = FaultInjectingFileOps()
    n = Node(1, tmp_path, fileops=fo, log_dirs=2)
    await n.start()
    d0, d1 = (d.path for d in n.lm.dirs)
    at_crash = tmp_path / "at-crash"
    real_replace = fo.replace

    def replace(src, dst):
        if dst.endswith(ald.DELETE_SUFFIX) and not at_crash.exists():
            for d in (d0, d1):
                shutil.copytree(d, at_crash / os.path.basename(d))
        real_replace(src, dst)
    fo.replace = replace
    try:
        await n.stub.LeaderAndIsr(leader_and_isr(n, 1, 0, [1], [1], [n], tp=T0))
        for i in range(20):
            await _produce(n, f"a{i}-")
        before = _batches(n.lm.get_log(T0))
        move = await n.rm.alter_log_dirs.start_move(T0, n.lm.dirs[1])
        assert await move.done is True
    finally:
        await n.rm.alter_log_dirs.shutdown()
        await n.stop()
    for d in (d0, d1):
        shutil.rmtree(d)
        shutil.copytree(at_crash / os.path.basename(d), d)
    assert os.path.isdir(os.path.join(d0, "t-0")) and os.path.isdir(os.path.join(d1, "t-0"))
    again = LogManager([d0, d1], 1)
    again.startup()
    try:
        assert again.log_dir_of(T0) is again.dirs[1]
        assert again.stale_copies_deleted == [(T0, d0, d1)]
        assert _batches(again.get_log(T0)) == before
        assert not os.path.exists(os.path.join(d0, "t-0"))
    finally:
        again.shutdown()


async def test_a_follower_replica_moves_while_its_fetcher_appends(tmp_path):
    # The follower's fetcher keeps appending through the swap (work queued for the old log is
    # forwarded to the new one); acks=all keeps completing, and the moved follower ends with
    # the leader's exact batches.
    leader, follower = Node(1, tmp_path), Node(2, tmp_path, log_dirs=2)
    nodes = [leader, follower]
    for n in nodes:
        await n.start()
    try:
        for n in nodes:
            r = await n.stub.LeaderAndIsr(leader_and_isr(n, 1, 0, [1, 2], [1, 2], nodes))
            assert [e.error_code for e in r.partition_errors] == [0]
        d1 = follower.lm.dirs[1]
        assert follower.lm.log_dir_of(T0) is follower.lm.dirs[0]
        follower.rm.alter_log_dirs.swap_lag = 0
        for i in range(20):
            resp = await leader.stub.Produce(produce_req(f"a{i}-"))
            assert resp.responses[0].partition_responses[0].error_code == 0
        done = asyncio.Event()

        async def load():
            i = 0
            while not done.is_set() or i < 10:
                resp = await leader.stub.Produce(produce_req(f"b{i}-"))
                assert resp.responses[0].partition_responses[0].error_code == 0
                i += 1
        producer = asyncio.ensure_future(load())
        assert await _alter(follower, d1.path) == ErrorCode.NONE
        await wait_until(lambda: follower.lm.log_dir_of(T0) is d1)
        done.set()
        await producer
        end = leader.lm.get_log(T0).log_end_offset
        await wait_until(lambda: follower.lm.get_log(T0).log_end_offset == end)
        assert _batches(follower.lm.get_log(T0)) == _batches(leader.lm.get_log(T0))
        assert follower.rm.partitions[T0].log is follower.lm.get_log(T0)
        assert leader.rm.partitions[T0].isr == (1, 2)
    finally:
        await follower.rm.alter_log_dirs.shutdown()
        for n in nodes:
            await n.stop()


async def test_a_move_that_fails_does_not_stop_the_others(node):
    n = node
    t1 = TopicPartition("t", 1)
    await n.stub.LeaderAndIsr(leader_and_isr(n, 1, 0, [1], [1], [n], tp=t1))
    n.rm.alter_log_dirs.swap_lag = 0
    for tp in (T0, t1):
        for i in range(3):
            await n.stub.Produce(produce_req(f"a{i}-", acks=1, tp=tp))
    target = next(d for d in n.lm.dirs if d is not n.lm.log_dir_of(T0))
    other = next(d for d in n.lm.dirs if d is not n.lm.log_dir_of(t1))
    started = []
    start_move = n.rm.alter_log_dirs.start_move

    async def refusing_t0(tp, d):
        move = await start_move(tp, d)
        if tp == T0:
            def refuse(records):
                raise CorruptRecordError("refused")
            move.future.append_as_follower = refuse
        started.append(move)
        return move
    n.rm.alter_log_dirs.start_move = refusing_t0
    assert await _alter(n, target.path, T0) == ErrorCode.NONE
    assert await _alter(n, other.path, t1) == ErrorCode.NONE
    assert [await m.done for m in started] == [False, True]
    assert n.lm.log_dir_of(t1) is other and n.lm.log_dir_of(T0) is not target
    assert n.rm.metrics.registry.get_sample_value(
        FAILED, {"clientId": "ReplicaAlterLogDirs"}) == 1
