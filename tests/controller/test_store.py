"""One contract, two MetadataStores: ZkStore on a real ZooKeeper and InMemoryStore. Every
test runs against both, so the in-memory store (for scripts and the controller simulation)
refuses exactly what ZooKeeper refuses."""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient

from common import zk_layout as zl
from common.names import TopicPartition
from common.zk_async import AsyncZk
from common.zk_layout import BrokerRegistration, ControllerInfo, LeaderAndIsr, TopicAssignment
from controller.decisions import PartitionWrite
from controller.store import ControllerMovedError, InMemoryStore, MemoryTree, NodeExists
from controller.zk_store import ZkStore
from harness.zk_sessions import expire_session
from tests.controller.fakes import register, wait_for


class ZkBackend:
    def __init__(self, hosts: str):
        self.hosts = hosts
        self.clients: list = []

    async def store(self):
        zk = AsyncZk(self.hosts)
        await zk.start()
        self.clients.append(zk)
        s = ZkStore(zk)
        await s.ensure_paths()
        return s

    def session_of(self, store) -> int:
        return store.zk.session_id

    def register_broker(self, reg: BrokerRegistration):
        """Registers with a session of its own; returns (epoch, session handle)."""
        kz = KazooClient(self.hosts)
        kz.start(timeout=15)
        self.clients.append(kz)
        return register(kz, reg), kz

    def expire(self, session) -> None:
        expire_session(session, self.hosts)

    def broker_reports_restart(self, data: bytes) -> str:
        """What a broker whose log dir failed does (design.md#jbod): a persistent sequential
        child."""
        kz = KazooClient(self.hosts)
        kz.start(timeout=15)
        self.clients.append(kz)
        return kz.create(zl.restart_entry_path(zl.RESTART_ENTRY_PREFIX), data,
                         sequence=True).rsplit("/", 1)[1]

    def tool_writes_reassignment(self, data: bytes) -> None:
        """What kafka-reassign-partitions over ZooKeeper does."""
        kz = KazooClient(self.hosts)
        kz.start(timeout=15)
        self.clients.append(kz)
        kz.create(zl.REASSIGN_PARTITIONS, data)

    async def close(self):
        for c in self.clients:
            if isinstance(c, KazooClient):
                c.stop()
                c.close()
            else:
                await c.stop()


class MemoryBackend:
    def __init__(self):
        self.tree = MemoryTree()

    async def store(self):
        return InMemoryStore(self.tree)

    def session_of(self, store) -> int:
        return store.session_id

    def register_broker(self, reg: BrokerRegistration):
        session = self.tree.new_session()
        return self.tree.register_broker(reg, session), session

    def expire(self, session) -> None:
        self.tree.expire(session)

    def tool_writes_reassignment(self, data: bytes) -> None:
        self.tree.write_reassign_partitions(data)

    def broker_reports_restart(self, data: bytes) -> str:
        return self.tree.add_restart_entry(data)

    async def close(self):
        return None


@pytest.fixture(params=["zookeeper", "memory"])
async def backend(request):
    if request.param == "zookeeper":
        b = ZkBackend(request.getfixturevalue("zk_hosts"))
    else:
        b = MemoryBackend()
    yield b
    await b.close()


def tp(p: int, t: str = "t") -> TopicPartition:
    return TopicPartition(t, p)


async def _controller(backend, cid=1):
    s = await backend.store()
    won = await s.try_become_controller(ControllerInfo(cid, "h", cid))
    return s, won


async def test_election_reclaim_and_resign(backend):
    a, won = await _controller(backend, 1)
    assert won == (1, 1)
    b, lost = await _controller(backend, 2)
    assert lost is None
    info, stat = await b.read_controller()
    assert info.controller_id == 1
    assert await a.reclaim_controller(stat.version) == (2, 2)
    assert await a.reclaim_controller(stat.version + 5) is None
    await b.resign(backend.session_of(b))  # not b's: nothing happens
    assert (await b.read_controller())[0].controller_id == 1
    await a.resign(backend.session_of(a))
    assert await b.read_controller() is None
    assert await b.try_become_controller(ControllerInfo(2, "h", 2)) == (3, 3)


async def test_conditional_partition_writes(backend):
    s, (_, version) = await _controller(backend)
    await s.create_topic(TopicAssignment("t", "id", {0: [1, 2], 1: [2, 1]}), {"a": "1"},
                         version)
    with pytest.raises(NodeExists):
        await s.create_topic(TopicAssignment("t", "id2", {0: [1]}), {}, version)
    s0, s1 = LeaderAndIsr(1, 0, (1, 2), 1), LeaderAndIsr(2, 0, (2, 1), 1)
    assert await s.write_partition_states([PartitionWrite(tp(0), None, s0),
                                           PartitionWrite(tp(1), None, s1)], version) == set()
    got = await s.read_partition_states([tp(0), tp(1), tp(2)])
    assert {k: (v.leader, v.partition_epoch) for k, v in got.items()} == \
        {tp(0): (1, 0), tp(1): (2, 0)}
    # a write naming the version it replaces succeeds and bumps it; a stale one is refused
    # alone, and a create of an existing znode too
    moved = LeaderAndIsr(2, 1, (2,), 1)
    failed = await s.write_partition_states([
        PartitionWrite(tp(0), got[tp(0)], moved),
        PartitionWrite(tp(1), LeaderAndIsr(2, 0, (2, 1), 1, partition_epoch=7), moved),
        PartitionWrite(tp(1), None, moved)], version)
    assert failed == {tp(1)}
    now = await s.read_partition_states([tp(0), tp(1)])
    assert (now[tp(0)].leader_epoch, now[tp(0)].partition_epoch) == (1, 1)
    assert (now[tp(1)].leader, now[tp(1)].partition_epoch) == (2, 0)
    assert await s.read_topic_config("t") == {"a": "1"}
    assert await s.read_topic_configs(["t", "absent"]) == {"t": {"a": "1"}, "absent": {}}
    assert (await s.read_assignment("t")).partitions == {0: [1, 2], 1: [2, 1]}


async def test_a_deposed_controller_writes_nothing(backend):
    a, (_, version) = await _controller(backend, 1)
    await a.create_topic(TopicAssignment("t", "id", {0: [1]}), {}, version)
    await a.resign(backend.session_of(a))
    b, (_, _new) = await _controller(backend, 2)
    with pytest.raises(ControllerMovedError):
        await a.write_partition_states(
            [PartitionWrite(tp(0), None, LeaderAndIsr(1, 0, (1,), 1))], version)
    with pytest.raises(ControllerMovedError):
        await a.create_topic(TopicAssignment("u", "id", {0: [1]}), {}, version)
    with pytest.raises(ControllerMovedError):
        await a.delete_topic("t", version)
    assert await b.read_partition_states([tp(0)]) == {}
    assert await b.read_topic_names() == ["t"]


async def test_broker_registrations_are_ephemeral_and_watched(backend):
    s = await backend.store()
    fired: list = []
    epoch, session = backend.register_broker(BrokerRegistration(1, "h", 9001))
    regs = await s.read_brokers(watch=fired.append)
    assert list(regs) == [1] and regs[1].epoch == epoch
    backend.expire(session)
    await wait_for(lambda: fired, what="the /brokers/ids watch")
    assert await s.read_brokers() == {}
    assert len(fired) == 1  # one-shot


async def test_topic_deletion_removes_every_znode(backend):
    s, (_, version) = await _controller(backend)
    await s.create_topic(TopicAssignment("t", "id", {0: [1]}), {"a": "1"}, version)
    await s.write_partition_states([PartitionWrite(tp(0), None, LeaderAndIsr(1, 0, (1,), 1))],
                                   version)
    fired: list = []
    await s.read_topics_to_delete(watch=fired.append)
    await s.mark_topic_for_deletion("t", version)
    await wait_for(lambda: fired, what="the /admin/delete_topics watch")
    assert await s.read_topics_to_delete() == ["t"]
    await s.delete_topic("t", version)
    assert await s.read_topic_names() == []
    assert await s.read_topics_to_delete() == []
    assert await s.read_partition_states([tp(0)]) == {}
    assert await s.read_topic_config("t") == {}


async def test_reassignment_znodes(backend):
    """design.md#reassignment: the topic znode carries adding/removing replicas (KIP-455); the admin
    path is watched for creation, rewritten and deleted by the controller - all epoch-fenced."""
    s, (_, version) = await _controller(backend)
    await s.create_topic(TopicAssignment("t", "id", {0: [1, 2]}), {}, version)
    moving = TopicAssignment("t", "id", {0: [3, 1, 2]}, {0: [3]}, {0: [2]})
    await s.write_topic_assignment(moving, version)
    assert await s.read_assignment("t") == moving

    fired: list = []
    assert await s.read_admin_reassignments(watch=fired.append) is None
    data = zl.encode_reassignment([("t", 0, [3, 1])])
    backend.tool_writes_reassignment(data)
    await wait_for(lambda: fired, what="the /admin/reassign_partitions exists-watch")
    assert zl.decode_reassignment(await s.read_admin_reassignments()) == [("t", 0, [3, 1])]
    await s.write_admin_reassignments(zl.encode_reassignment([("t", 1, [1])]), version)
    assert zl.decode_reassignment(await s.read_admin_reassignments()) == [("t", 1, [1])]
    await s.write_admin_reassignments(None, version)
    assert await s.read_admin_reassignments() is None
    await s.write_admin_reassignments(None, version)  # already gone: nothing to do

    await s.resign(backend.session_of(s))
    await _controller(backend, 2)
    with pytest.raises(ControllerMovedError):
        await s.write_topic_assignment(TopicAssignment("t", "id", {0: [9]}), version)
    with pytest.raises(ControllerMovedError):
        await s.write_admin_reassignments(data, version)
    assert await s.read_assignment("t") == moving


async def test_restart_partitions_queue(backend):
    """design.md#jbod (open question 3 as a Queue recipe): brokers add sequential children; the
    controller lists them in order under a children watch and deletes each, epoch-fenced."""
    s, (_, version) = await _controller(backend)
    fired: list = []
    assert await s.read_restart_entries(watch=fired.append) == []
    first = zl.encode_restart_entry(zl.RestartEntry(1, "/d1", (("t", 0), ("t", 2)), 7))
    second = zl.encode_restart_entry(zl.RestartEntry(2, "/d0", (("u", 1),), 9))
    a = backend.broker_reports_restart(first)
    b = backend.broker_reports_restart(second)
    assert a.startswith(zl.RESTART_ENTRY_PREFIX) and a < b
    await wait_for(lambda: fired, what="the /restart_partitions children watch")
    assert await s.read_restart_entries() == [(a, first), (b, second)]
    await s.delete_restart_entry(a, version)
    await s.delete_restart_entry(a, version)  # already gone: at-least-once processing
    assert await s.read_restart_entries() == [(b, second)]

    await s.resign(backend.session_of(s))
    await _controller(backend, 2)
    with pytest.raises(ControllerMovedError):
        await s.delete_restart_entry(b, version)
    assert await s.read_restart_entries() == [(b, second)]
