"""JBOD log-dir failure on the broker (design.md#jbod), in process:
EIO through the file seam on a whole log dir and on one partition's files reaches the one
handler, which takes the dir (or the one log) offline while the broker keeps serving the
rest; lost replicas answer KAFKA_STORAGE_ERROR, the restart entry is written to a real
ZooKeeper, and a LeaderAndIsr re-creates the replica (is_new) or refuses it (not is_new)."""

import asyncio
import errno
from pathlib import Path

import pytest

from broker import partition_state
from broker.partition_state import MissingLog
from broker.restart_notifier import (
    RestartNotifier,
    forget_lost_replicas,
    read_lost_replicas,
    record_lost_copies,
)
from broker.storage.checkpoints import REPLICATION_OFFSET_CHECKPOINT
from broker.storage.fileops import FaultInjectingFileOps
from common import zk_layout as zl
from common.errors import ErrorCode
from common.names import TopicPartition
from common.rpc import replog_pb2 as pb
from common.zk_async import AsyncZk
from tests.broker.inprocess import Node, leader_and_isr, produce_req, wait_until

T0, T1, T2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)


@pytest.mark.parametrize("is_new, lost_here, some_dir_offline, action", [
    (True, False, False, MissingLog.CREATE),   # a new replica, as ever
    (True, True, True, MissingLog.CREATE),     # design.md#jbod: restarted by the controller
    (True, False, True, MissingLog.CREATE),    # a new partition while a dir is offline
    (False, True, False, MissingLog.REFUSE),   # lost alone (its dir is fine): not re-created
    (False, False, True, MissingLog.REFUSE),   # KIP-112: it may live in the offline dir
    (False, True, True, MissingLog.REFUSE),
    (False, False, False, MissingLog.CREATE),  # no dir offline: behaviour as before
])
def test_missing_log(is_new, lost_here, some_dir_offline, action):
    assert partition_state.missing_log(is_new, lost_here, some_dir_offline) is action


def test_the_registration_shows_offline_dirs_and_old_ones_still_decode():
    reg = zl.BrokerRegistration(1, "h", 9092, None, (zl.LogDirInfo("/d0", "a", False),
                                                      zl.LogDirInfo("/d1", "b", True)))
    data = zl.encode_broker(reg)
    assert b'"offline_log_dirs":["/d0"]' in data
    assert zl.decode_broker(1, data).offline_log_dirs == ("/d0",)
    old = (b'{"version":5,"host":"h","port":9092,"log_dirs":[{"path":"/d0","directory_id":"a",'
           b'"online":true}]}')
    assert zl.decode_broker(1, old).offline_log_dirs == ()
    listed_only = b'{"host":"h","port":1,"log_dirs":[{"path":"/d0"}],"offline_log_dirs":["/d0"]}'
    assert zl.decode_broker(1, listed_only).offline_log_dirs == ("/d0",)


async def test_a_restart_report_survives_an_unreachable_zookeeper():
    attempts, written = [], []

    async def write(data):
        attempts.append(data)
        if len(attempts) < 3:
            raise ConnectionError("ZooKeeper unreachable")
        written.append(zl.decode_restart_entry(data))
        return f"/restart_partitions/restart-{len(written):010d}"

    events = _Events()
    n = RestartNotifier(1, lambda: 7, write, events, backoff_s=(0.001, 0.001))
    task = asyncio.ensure_future(n.run())
    try:
        n.request("/d0", [T0], {T0: 4})
        await wait_until(lambda: written)
        n.request("/d0", [T1], {T1: 2})
        n.request("/d0", [T2])  # merged into the queued report of the same dir
        n.request("/d0", [T1], {T1: 5})  # T1 again (a refused LeaderAndIsr): the newer epoch
        await wait_until(lambda: len(written) == 2)
        # each partition fenced by the epoch held when it was lost (-1: not known)
        assert written == [zl.RestartEntry(1, "/d0", (("t", 0),), 7, (4,)),
                           zl.RestartEntry(1, "/d0", (("t", 1), ("t", 2)), 7, (5, -1))]
        assert [e for e, _ in events.logged].count("restart_partitions_write_failed") == 2
    finally:
        task.cancel()


class _Events:
    def __init__(self):
        self.logged = []

    def __getattr__(self, level):
        return lambda event, **kw: self.logged.append((event, kw))


class Broker:
    """An in-process broker with two log dirs, its failure handler and restart notifier
    running, the notifier writing to a real ZooKeeper."""

    def __init__(self, tmp_path, broker_id=1, log_dirs=2, fileops=None, lost_replicas=None):
        self.fo = fileops or FaultInjectingFileOps()
        self.node = Node(broker_id, tmp_path, fileops=self.fo, log_dirs=log_dirs,
                         lost_replicas=lost_replicas)
        self.halted = []
        self.node.rm.halt = self.halted.append
        self.node.rm.log_dir_failures.probe_timeout_s = 30  # never convict a healthy dir on a slow machine

    async def start(self, zk_hosts):
        self.zk = AsyncZk(zk_hosts)
        await self.zk.start()
        await self.zk.ensure_path(zl.RESTART_PARTITIONS)
        await self.zk.ensure_path(zl.LOST_REPLICAS)
        rm, lm = self.node.rm, self.node.lm
        rm.restart_notifier = RestartNotifier(
            self.node.id, lambda: rm.broker_epoch,
            lambda data: self.zk.create(zl.restart_entry_path(zl.RESTART_ENTRY_PREFIX), data,
                                        sequence=True),
            rm.events, rm.metrics.restart_requests,
            record_lost=lambda e: record_lost_copies(self.zk, e,
                                                     [d.path for d in lm.offline_dirs]))
        await self.node.start()
        self.tasks = [asyncio.ensure_future(rm.log_dir_failure_loop()),
                      asyncio.ensure_future(rm.restart_notifier.run())]

    async def stop(self):
        for t in self.tasks:
            t.cancel()
        self.fo.clear()
        await self.node.stop()
        await self.zk.stop()

    async def restart_entries(self):
        names = sorted(await self.zk.get_children(zl.RESTART_PARTITIONS))
        return [zl.decode_restart_entry((await self.zk.get(zl.restart_entry_path(n)))[0])
                for n in names]

    def metric(self, name, **labels):
        return self.node.rm.metrics.registry.get_sample_value(name, labels)


@pytest.fixture
async def broker(tmp_path, zk_hosts):
    b = Broker(tmp_path)
    await b.start(zk_hosts)
    yield b
    await b.stop()


async def _lead(node, tp, epoch=0, is_new=False, replicas=(1,), nodes=()):
    resp = await node.stub.LeaderAndIsr(leader_and_isr(node, node.id, epoch, list(replicas),
                                                       list(replicas), list(nodes), tp=tp,
                                                       is_new=is_new))
    return {(p.topic, p.partition): p.error_code for p in resp.partition_errors}


async def _produce(node, tp, tag="x"):
    resp = await node.stub.Produce(produce_req(tag, acks=1, tp=tp))
    return resp.responses[0].partition_responses[0].error_code


async def _fetch(node, tp):
    resp = await node.stub.Fetch(pb.FetchRequest(max_wait_ms=0, max_bytes=1 << 20, topics=[
        pb.FetchTopic(topic=tp.topic, partitions=[pb.FetchPartition(
            partition=tp.partition, fetch_offset=0, partition_max_bytes=1 << 20)])]))
    return resp.responses[0].partitions[0].error_code


async def _list_offsets(node, tp):
    resp = await node.stub.ListOffsets(pb.ListOffsetsRequest(topics=[pb.ListOffsetsTopic(
        topic=tp.topic, partitions=[pb.ListOffsetsPartition(partition=tp.partition,
                                                            timestamp=-1)])]))
    return resp.topics[0].partitions[0].error_code


async def _replica_log_info(node, tp):
    resp = await node.stub.GetReplicaLogInfo(pb.GetReplicaLogInfoRequest(
        broker_id=node.id, broker_epoch=node.rm.broker_epoch,
        topic_partitions=[pb.GetReplicaLogInfoTopic(topic=tp.topic, partitions=[tp.partition])]))
    return resp.topic_partition_log_info[0].partition_log_info[0].error_code


async def test_eio_on_a_whole_dir_takes_only_that_dir_offline(broker, tmp_path):
    b = broker
    node, lm = b.node, b.node.lm
    d0, d1 = lm.dirs
    assert await _lead(node, T0) == {("t", 0): 0}  # d0: the dir with fewest partitions
    assert await _lead(node, T1) == {("t", 1): 0}  # d1
    assert (lm.log_dir_of(T0), lm.log_dir_of(T1)) == (d0, d1)
    assert await _produce(node, T0) == await _produce(node, T1) == ErrorCode.NONE

    b.fo.fail(d0.path, errno.EIO)  # the disk under d0 dies
    assert await _produce(node, T0, "y") == ErrorCode.KAFKA_STORAGE_ERROR
    await wait_until(lambda: not d0.online, what="d0 offline")

    # the lost replica: KAFKA_STORAGE_ERROR to every client request
    assert await _produce(node, T0, "z") == ErrorCode.KAFKA_STORAGE_ERROR
    assert await _fetch(node, T0) == ErrorCode.KAFKA_STORAGE_ERROR
    assert await _list_offsets(node, T0) == ErrorCode.KAFKA_STORAGE_ERROR
    assert await _replica_log_info(node, T0) == ErrorCode.KAFKA_STORAGE_ERROR
    assert T0 not in node.rm.partitions and node.rm.offline_replicas == {T0: d0.path}
    # the other dir keeps serving, and its checkpoints never list the lost partition
    assert d1.online and await _produce(node, T1, "w") == ErrorCode.NONE
    assert await _fetch(node, T1) == ErrorCode.NONE
    await node.rm.checkpoint()
    hw = (tmp_path / "b1" / "d1" / REPLICATION_OFFSET_CHECKPOINT).read_text()
    assert "t 1 " in hw and "t 0 " not in hw
    # nothing new goes to the offline dir
    assert await _lead(node, T2, is_new=True) == {("t", 2): 0}
    assert lm.log_dir_of(T2) is d1
    # metrics and the event
    assert b.metric("kafka_log_logmanager_offlinelogdirectorycount") == 1
    assert b.metric("kafka_log_logmanager_logdirectoryoffline", logDirectory=d0.path) == 1
    assert b.metric("kafka_log_logmanager_logdirectoryoffline", logDirectory=d1.path) == 0
    assert b.metric("kafka_server_replicamanager_offlinereplicacount") == 1
    [offline] = [e for e in node.events_logged() if e["event"] == "log_dir_offline"]
    assert offline["log_dir"] == d0.path and offline["partitions"] == ["t-0"]
    # the restart entry, in ZooKeeper
    await wait_until(lambda: node.rm.restart_notifier.written, what="entry written")
    assert await b.restart_entries() == [
        zl.RestartEntry(1, d0.path, (("t", 0),), node.rm.broker_epoch, (0,))]
    assert b.metric("replog_restart_partitions_requests_total") == 1
    assert b.halted == []


async def test_a_lost_replica_is_refused_without_is_new_and_recreated_with_it(broker, tmp_path):
    b = broker
    node, lm = b.node, b.node.lm
    d0, d1 = lm.dirs
    await _lead(node, T0)
    await _produce(node, T0)
    b.fo.fail(d0.path, errno.EIO)
    await _produce(node, T0, "y")
    await wait_until(lambda: not d0.online and node.rm.restart_notifier.written)

    # not is_new (e.g. a controller resending the state it had): refused, restart asked
    assert await _lead(node, T0, epoch=1) == {("t", 0): ErrorCode.KAFKA_STORAGE_ERROR}
    await wait_until(lambda: len(node.rm.restart_notifier.written) == 2)
    # lost at partition epoch 0; the refused state's epoch fences the second entry
    assert [(e.partitions, e.partition_epochs) for e in await b.restart_entries()] == [
        ((("t", 0),), (0,)), ((("t", 0),), (1,))]
    assert lm.get_log(T0) is None

    # is_new (the controller processed the restart): re-created, empty, in d1
    assert await _lead(node, T0, epoch=2, is_new=True) == {("t", 0): 0}
    log = lm.get_log(T0)
    assert log.log_dir == d1.path and log.log_end_offset == 0
    assert T0 not in node.rm.offline_replicas
    assert await _produce(node, T0, "z") == ErrorCode.NONE
    assert b.metric("kafka_server_replicamanager_offlinereplicacount") == 0


async def test_eio_on_one_partition_restarts_only_it_and_it_refetches_from_the_leader(
        tmp_path, zk_hosts):
    """Broker 2 follows t-0 and t-2 in its d0; t-0's files fail (the dir probe stays
    healthy): only t-0 goes offline, d0 keeps serving t-2, the entry names t-0 alone, and the
    re-created replica (is_new) lands in d1 and fetches the leader's log from its start."""
    leader = Node(1, tmp_path)
    b = Broker(tmp_path, broker_id=2)
    await leader.start()
    await b.start(zk_hosts)
    node, lm = b.node, b.node.lm
    d0, d1 = lm.dirs
    nodes = [leader, node]
    try:
        for tp in (T0, T2):
            if tp == T2:
                lm.get_or_create_log(TopicPartition("pad", 0), log_dir=d1.path)  # t-2 to d0
            for n in nodes:
                await n.stub.LeaderAndIsr(leader_and_isr(n, 1, 0, [1, 2], [1, 2], nodes, tp=tp))
        assert lm.log_dir_of(T0) is lm.log_dir_of(T2) is d0
        for tp in (T0, T2):
            await leader.stub.Produce(produce_req("a", acks=1, tp=tp))
        await wait_until(lambda: all(lm.get_log(tp) is not None and
                                     lm.get_log(tp).log_end_offset == 5 for tp in (T0, T2)))

        # An ISR change 2 is not the subject of reaches it only as UpdateMetadata (partition
        # epoch 3): the entry is fenced by that newer epoch, not its LeaderAndIsr's 0 - an
        # older one could be taken for a duplicate from before 2's own re-admission.
        await node.stub.UpdateMetadata(pb.UpdateMetadataRequest(
            controller_id=0, controller_epoch=1, broker_epoch=node.rm.broker_epoch,
            live_brokers=[n.endpoint() for n in nodes],
            partition_states=[pb.UpdateMetadataPartitionState(
                topic="t", partition=0, leader=1, leader_epoch=0, isr=[1, 2],
                replicas=[1, 2], partition_epoch=3)]))
        b.fo.fail(lm.get_log(T0).dir, errno.EIO)
        await leader.stub.Produce(produce_req("b", acks=1, tp=T0))
        await wait_until(lambda: T0 in node.rm.offline_replicas, what="t-0 offline")
        await wait_until(lambda: node.rm.restart_notifier.written)
        assert d0.online and lm.log_dir_of(T2) is d0
        assert node.rm.offline_replicas == {T0: d0.path}
        assert await b.restart_entries() == [
            zl.RestartEntry(2, d0.path, (("t", 0),), node.rm.broker_epoch, (3,))]
        assert [e["partition"] for e in node.events_logged() if e["event"] == "log_offline"] \
            == ["t-0"]
        assert not [e for e in node.events_logged() if e["event"] == "log_dir_offline"]
        await leader.stub.Produce(produce_req("c", acks=1, tp=T2))
        await wait_until(lambda: lm.get_log(T2).log_end_offset == 10, what="t-2 still fetched")

        # the controller's restart: leader unchanged, ISR without 2, the replica is_new
        resp = await node.stub.LeaderAndIsr(leader_and_isr(node, 1, 0, [1], [1, 2], nodes,
                                                           partition_epoch=1, tp=T0,
                                                           is_new=True))
        assert resp.partition_errors[0].error_code == 0
        assert lm.log_dir_of(T0) is d1  # not back into the dir its log failed in
        await wait_until(lambda: lm.get_log(T0).log_end_offset == 10,
                         what="re-created replica caught up from the leader's log start")
    finally:
        await b.stop()
        await leader.stop()


async def test_the_last_dir_going_offline_halts_the_broker(tmp_path, zk_hosts):
    b = Broker(tmp_path, log_dirs=1)
    await b.start(zk_hosts)
    node = b.node
    try:
        await _lead(node, T0)
        b.fo.fail(node.lm.dirs[0].path, errno.EIO)
        await _produce(node, T0)
        await wait_until(lambda: b.halted, what="halt")
        [message] = b.halted
        assert "every log dir is offline" in message and node.lm.dirs[0].path in message
    finally:
        await b.stop()


async def test_a_broker_restarted_with_its_dir_still_broken_serves_the_other(tmp_path, zk_hosts):
    """t-0 lived in d0, t-1 in d1; the broker restarts while d0 cannot be read: it comes up on
    d1, and the controller's LeaderAndIsr for t-0 (not is_new: the controller believes the
    replica is there) is refused and restarted - the replica may be in d0 (KIP-112's rule)."""
    first = Node(1, tmp_path, log_dirs=2)
    for tp in (T0, T1):
        first.lm.get_or_create_log(tp)
    d0 = first.lm.dirs[0].path
    first.lm.shutdown()

    fo = FaultInjectingFileOps()
    fo.fail(d0, errno.EIO)
    b = Broker(tmp_path, fileops=fo)
    await b.start(zk_hosts)
    node, lm = b.node, b.node.lm
    try:
        assert [d.online for d in lm.dirs] == [False, True]
        assert lm.get_log(T1) is not None and lm.get_log(T0) is None
        assert await _lead(node, T1) == {("t", 1): 0}
        assert await _produce(node, T1) == ErrorCode.NONE
        assert await _lead(node, T0) == {("t", 0): ErrorCode.KAFKA_STORAGE_ERROR}
        assert await _produce(node, T0) == ErrorCode.KAFKA_STORAGE_ERROR
        await wait_until(lambda: node.rm.restart_notifier.written)
        assert await b.restart_entries() == [
            zl.RestartEntry(1, d0, (("t", 0),), node.rm.broker_epoch, (0,))]
    finally:
        await b.stop()


async def test_a_lost_copy_is_not_served_when_its_newer_copy_is_in_a_broken_dir(tmp_path,
                                                                                zk_hosts):
    """t-0 lived in d0 (3 records); d0 failed and t-0 was re-created in d1, where it got 5.
    The broker restarts with d0 readable again and d1 broken. Nothing on d0 says its copy was
    superseded (the record of that is in d1), so before /brokers/lost_replicas the broker
    loaded the stale copy and served 3 records where 5 were written - and as the last ISR or
    ELR member it could have been elected cleanly with them. Now the copy is set aside, the
    replica counts as lost (refused without is_new, restart asked) and the dir is forgotten."""
    b = Broker(tmp_path)
    await b.start(zk_hosts)
    node, lm = b.node, b.node.lm
    d0, d1 = (d.path for d in lm.dirs)
    try:
        await _lead(node, T0)
        for i in range(3):
            assert await _produce(node, T0, f"old{i}") == ErrorCode.NONE
        b.fo.fail(d0, errno.EIO)
        await _produce(node, T0, "x")
        await wait_until(lambda: node.rm.restart_notifier.written, what="restart entry")
        assert await read_lost_replicas(b.zk, 1) == {d0: {T0}}
        assert await _lead(node, T0, epoch=1, is_new=True) == {("t", 0): 0}
        for i in range(5):
            assert await _produce(node, T0, f"new{i}") == ErrorCode.NONE
        assert lm.log_dir_of(T0).path == d1
        # only offline dirs are recorded (an entry naming d1 adds nothing under d1)
        await record_lost_copies(b.zk, zl.RestartEntry(1, d1, (("t", 1),), 0), [d0])
        assert await read_lost_replicas(b.zk, 1) == {d0: {T0, T1}}
    finally:
        await b.stop()

    fo = FaultInjectingFileOps()
    fo.fail(d1, errno.EIO)  # the new copy's dir is broken at this start
    zk = AsyncZk(zk_hosts)
    await zk.start()
    lost = await read_lost_replicas(zk, 1)
    again = Broker(tmp_path, fileops=fo, lost_replicas=lost)
    node, lm = again.node, again.node.lm
    try:
        assert [d.online for d in lm.dirs] == [True, False]
        assert lm.get_log(T0) is None and lm.set_aside == [(T0, d0)]
        assert [p.name for p in Path(d0).iterdir() if p.name.startswith("t-0")
                and p.name.endswith("-stray")]
        await forget_lost_replicas(zk, 1, [d.path for d in lm.online_dirs])
        assert await zk.get_or_none(zl.lost_replicas_path(1)) is None  # d0 read: forgotten
        await again.start(zk_hosts)
        assert node.rm.offline_replicas == {T0: d0}
        assert await _fetch(node, T0) == ErrorCode.KAFKA_STORAGE_ERROR
        assert await _lead(node, T0, epoch=2) == {("t", 0): ErrorCode.KAFKA_STORAGE_ERROR}
        await wait_until(lambda: node.rm.restart_notifier.written, what="restart asked")
        assert await read_lost_replicas(zk, 1) == {d1: {T0}}  # d1 is offline: it may be there
        assert await _lead(node, T0, epoch=3, is_new=True) == {("t", 0): 0}
        assert lm.get_log(T0).log_end_offset == 0  # re-created empty, fetches from the leader
    finally:
        await again.stop()
        await zk.stop()
