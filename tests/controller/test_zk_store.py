"""zk_store against a real ZooKeeper: multiRead, batched conditional writes, epoch fencing,
election transactions, topic znodes."""

from __future__ import annotations

import json

import pytest
from kazoo.exceptions import NoNodeError, UnimplementedError

from common import zk_layout as L
from common.names import TopicPartition
from common.zk_async import AsyncZk
from common.zk_layout import ControllerInfo, LeaderAndIsr, TopicAssignment
from controller.decisions import PartitionWrite
from controller.zk_store import ControllerMovedError, ZkStore

pytestmark = pytest.mark.integration


@pytest.fixture
async def store(zk_hosts):
    zk = AsyncZk(zk_hosts)
    await zk.start()
    s = ZkStore(zk)
    await s.ensure_paths()
    yield s
    await zk.stop()


def tp(p: int, t: str = "t") -> TopicPartition:
    return TopicPartition(t, p)


async def test_election_transaction(store, zk):
    assert await store.try_become_controller(ControllerInfo(1, "h", 1)) == (1, 1)
    assert await store.try_become_controller(ControllerInfo(2, "h", 2)) is None
    assert json.loads(zk.get(L.CONTROLLER)[0])["brokerid"] == 1
    assert zk.get(L.CONTROLLER_EPOCH)[0] == b"1"
    info, stat = await store.read_controller()
    assert info.controller_id == 1
    assert await store.reclaim_controller(stat.version) == (2, 2)
    assert await store.reclaim_controller(stat.version + 5) is None
    await store.resign(store.zk.session_id)
    assert zk.exists(L.CONTROLLER) is None


async def test_multi_read_matches_single_reads(store, zk, monkeypatch):
    _, version = await store.read_controller_epoch()
    await store.create_topic(TopicAssignment("t", "x", {p: [1] for p in range(5)}), {}, version)
    writes = [PartitionWrite(tp(p), None, LeaderAndIsr(1, p, (1,), 1)) for p in (0, 1, 3)]
    assert await store.write_partition_states(writes, version) == set()
    got = await store.multi_get([L.partition_state_path("t", p) for p in range(5)])
    assert [type(g) for g in got] == [tuple, tuple, NoNodeError, tuple, NoNodeError]
    many = await store.read_partition_states([tp(p) for p in range(5)])
    assert {k.partition: v.leader_epoch for k, v in many.items()} == {0: 0, 1: 1, 3: 3}
    single = {t: await store.read_partition_state(t) for t in map(tp, range(5))}
    assert {k: v for k, v in single.items() if v} == many

    async def unimplemented(_paths):
        raise UnimplementedError()
    monkeypatch.setattr(store, "multi_get", unimplemented)
    assert await store.read_partition_states([tp(p) for p in range(5)]) == many
    assert store._multi_read is False


async def test_batched_writes_skip_only_the_refused_partition(store, zk, monkeypatch):
    import controller.zk_store as zs
    monkeypatch.setattr(zs, "MAX_OPS_PER_TRANSACTION", 4)
    _, version = await store.read_controller_epoch()
    await store.create_topic(TopicAssignment("t", "x", {p: [1] for p in range(9)}), {}, version)
    s0 = LeaderAndIsr(1, 0, (1,), 1)
    assert await store.write_partition_states(
        [PartitionWrite(tp(p), None, s0) for p in range(9)], version) == set()
    zk.set(L.partition_state_path("t", 4), L.encode_partition_state(s0))  # version 1 now
    s1 = LeaderAndIsr(1, 1, (1,), 1, 1)
    failed = await store.write_partition_states(
        [PartitionWrite(tp(p), s0, s1) for p in range(9)], version)
    assert failed == {tp(4)}
    assert [zk.exists(L.partition_state_path("t", p)).version for p in range(9)] == \
        [1] * 9
    assert json.loads(zk.get(L.partition_state_path("t", 3))[0])["leader_epoch"] == 1
    assert json.loads(zk.get(L.partition_state_path("t", 4))[0])["leader_epoch"] == 0


def _lose_connection(store, monkeypatch, applied: bool, then=None) -> list:
    """The first transaction's connection is lost - after ZooKeeper applied it, or before -
    as kazoo reports it (ConnectionLoss); ``then()`` runs before the retry. A fault a real
    ensemble produces only by chance (a member dying with a transaction in flight)."""
    from kazoo.exceptions import ConnectionLoss
    real, calls = store.zk.commit, []

    async def commit(t):
        calls.append(t)
        if len(calls) == 1:
            if applied:
                await real(t)
            if then is not None:
                then()
            raise ConnectionLoss()
        return await real(t)
    monkeypatch.setattr(store.zk, "commit", commit)
    return calls


@pytest.mark.parametrize("applied", [True, False])
async def test_partition_writes_lost_with_their_connection_are_resolved(store, zk,
                                                                        monkeypatch, applied):
    """A partition-state transaction lost with its connection costs no resignation: once the
    same session is connected again, the writes it applied count as written (not as refused:
    the controller would adopt its own state and tell no broker) and the others are sent
    again. Before, the controller resigned and took a new epoch (chaos seed 157, hosts)."""
    _, version = await store.read_controller_epoch()
    await store.create_topic(TopicAssignment("t", "x", {p: [1, 2] for p in range(3)}), {},
                             version)
    s0 = LeaderAndIsr(1, 0, (1, 2), 1)
    assert await store.write_partition_states(
        [PartitionWrite(tp(p), None, s0) for p in range(3)], version) == set()
    s1 = LeaderAndIsr(2, 1, (2,), 1, 1)
    calls = _lose_connection(store, monkeypatch, applied)
    assert await store.write_partition_states(
        [PartitionWrite(tp(p), s0, s1) for p in range(3)], version) == set()
    assert len(calls) == (1 if applied else 2)  # applied: nothing left to send again
    for p in range(3):
        data, stat = zk.get(L.partition_state_path("t", p))
        assert (stat.version, json.loads(data)["leader"]) == (1, 2)


async def test_a_lost_write_another_writer_overtook_is_refused(store, zk, monkeypatch):
    _, version = await store.read_controller_epoch()
    await store.create_topic(TopicAssignment("t", "x", {p: [1, 2] for p in range(2)}), {},
                             version)
    s0 = LeaderAndIsr(1, 0, (1, 2), 1)
    assert await store.write_partition_states(
        [PartitionWrite(tp(p), None, s0) for p in range(2)], version) == set()
    other = LeaderAndIsr(1, 5, (1,), 1)
    _lose_connection(store, monkeypatch, applied=False, then=lambda: zk.set(
        L.partition_state_path("t", 1), L.encode_partition_state(other)))
    s1 = LeaderAndIsr(2, 1, (2,), 1, 1)
    assert await store.write_partition_states(
        [PartitionWrite(tp(p), s0, s1) for p in range(2)], version) == {tp(1)}
    assert json.loads(zk.get(L.partition_state_path("t", 0))[0])["leader"] == 2
    assert json.loads(zk.get(L.partition_state_path("t", 1))[0])["leader_epoch"] == 5


async def test_a_lost_write_whose_session_expired_stays_unknown(store, zk, monkeypatch):
    from controller.store import OutcomeUnknown
    _, version = await store.read_controller_epoch()
    await store.create_topic(TopicAssignment("t", "x", {0: [1]}), {}, version)
    _lose_connection(store, monkeypatch, applied=False)
    sessions = iter([1, 2])  # before the write, after the reconnection: a new session
    monkeypatch.setattr(type(store.zk), "session_id", property(lambda self: next(sessions)))
    with pytest.raises(OutcomeUnknown):
        await store.write_partition_states(
            [PartitionWrite(tp(0), None, LeaderAndIsr(1, 0, (1,), 1))], version)
    assert zk.exists(L.partition_state_path("t", 0)) is None


async def test_writes_after_the_epoch_moved_are_refused_whole(store, zk):
    _, version = await store.read_controller_epoch()
    await store.create_topic(TopicAssignment("t", "x", {0: [1]}), {}, version)
    zk.set(L.CONTROLLER_EPOCH, b"9")  # a successor's bump
    with pytest.raises(ControllerMovedError):
        await store.write_partition_states(
            [PartitionWrite(tp(0), None, LeaderAndIsr(1, 0, (1,), 1))], version)
    assert zk.exists(L.partition_state_path("t", 0)) is None
    with pytest.raises(ControllerMovedError):
        await store.mark_topic_for_deletion("t", version)
    with pytest.raises(ControllerMovedError):
        await store.delete_topic("t", version)
    assert zk.exists("/brokers/topics/t") is not None


async def test_create_and_delete_topic_znodes(store, zk):
    _, version = await store.read_controller_epoch()
    a = TopicAssignment("t", "AAAAAAAAAAAAAAAAAAAAAQ", {0: [1, 2], 1: [2, 1]})
    await store.create_topic(a, {"retention.ms": "5"}, version)
    assert json.loads(zk.get("/config/topics/t")[0]) == {"version": 1,
                                                         "config": {"retention.ms": "5"}}
    assert await store.read_assignment("t") == a
    await store.write_partition_states(
        [PartitionWrite(tp(p), None, LeaderAndIsr(1, 0, (1, 2), 1)) for p in (0, 1)], version)
    await store.mark_topic_for_deletion("t", version)
    await store.mark_topic_for_deletion("t", version)  # idempotent
    assert await store.read_topics_to_delete() == ["t"]
    await store.delete_topic("t", version)
    for path in ("/brokers/topics/t", "/config/topics/t", "/admin/delete_topics/t"):
        assert zk.exists(path) is None
    # Unreadable znodes are skipped, not fatal.
    zk.create("/brokers/topics/junk", b"not json")
    assert await store.read_assignment("junk") is None
    zk.create("/brokers/ids/7", b"{}")
    assert await store.read_brokers() == {}


@pytest.mark.parametrize("lost", [1, 3])
async def test_start_up_paths_survive_a_lost_connection(zk_hosts, zk, monkeypatch, lost):
    """Chaos seed 154: a controller started just before ZooKeeper's restart got
    ConnectionLoss on its first create, died with a traceback and stayed down until the next
    fault bounced it. The start-up creates are asked again until ZooKeeper answers (Kafka's
    retryRequestsUntilConnected). The lost connection is injected at kazoo's async call (a
    reply lost mid-flight cannot be timed for real); ZooKeeper itself is real."""
    from kazoo.exceptions import ConnectionLoss

    from common import zk_async
    monkeypatch.setattr(zk_async, "ZK_RETRY_S", 0.01)
    azk = AsyncZk(zk_hosts)
    await azk.start()
    real = azk.client.create_async
    calls = []

    def flaky(*args, **kwargs):
        calls.append(args[0])
        if len(calls) <= lost:
            r = azk.client.handler.async_result()
            r.set_exception(ConnectionLoss())
            return r
        return real(*args, **kwargs)
    monkeypatch.setattr(azk.client, "create_async", flaky)
    try:
        await ZkStore(azk).ensure_paths()
    finally:
        await azk.stop()
    assert calls[:lost + 1] == [calls[0]] * (lost + 1)  # the same create, asked again
    for p in L.PERSISTENT_PATHS:
        assert zk.exists(p) is not None, p
    assert zk.get(L.CONTROLLER_EPOCH)[0] == b"0"
