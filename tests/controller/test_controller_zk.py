"""The active controller against a real ZooKeeper and fake brokers (real gRPC servers):
topic creation in Kafka's JSON formats, elections on broker registration changes, the RPCs,
failover, deletion, metrics and events."""

from __future__ import annotations

import json

import grpc
import pytest

from common import zk_layout as L
from common.names import TopicPartition
from common.rpc import replog_pb2 as pb
from common.rpc import replog_pb2_grpc
from common.zk_layout import BrokerRegistration
from tests.controller.fakes import wait_for

pytestmark = pytest.mark.integration


def stub(srv) -> replog_pb2_grpc.ControllerStub:
    return replog_pb2_grpc.ControllerStub(grpc.aio.insecure_channel(srv.address))


def state(zk, topic: str, p: int) -> dict:
    return json.loads(zk.get(L.partition_state_path(topic, p))[0])


def version(zk, topic: str, p: int) -> int:
    return zk.exists(L.partition_state_path(topic, p)).version


async def active_controller(controllers, **cfg):
    srv = await controllers(1, **cfg)
    await wait_for(lambda: srv.controller.is_active, what="controller active")
    return srv


async def create(srv, name="t", n=None, rf=None, assignments=None, configs=None,
                 timeout_ms=5000) -> pb.CreatableTopicResult:
    t = pb.CreatableTopic(name=name, configs=configs or {})
    if n is not None:
        t.num_partitions = n
    if rf is not None:
        t.replication_factor = rf
    for p, bs in (assignments or {}).items():
        t.assignments.add(partition=p, broker_ids=bs)
    resp = await stub(srv).CreateTopics(pb.CreateTopicsRequest(topics=[t], timeout_ms=timeout_ms),
                                        timeout=10)
    return resp.topics[0]


async def test_topic_creation_writes_kafkas_json_and_tells_every_replica(
        controllers, fake_brokers, zk):
    brokers = await fake_brokers(1, 2, 3)
    srv = await active_controller(controllers)
    await wait_for(lambda: len(srv.controller.context.live_brokers) == 3)
    res = await create(srv, "orders", assignments={0: [1, 2, 3], 1: [2, 3, 1]},
                       configs={"min.insync.replicas": "2", "retention.ms": "60000"})
    assert res.error_code == 0, res.error_message
    assert (res.num_partitions, res.replication_factor) == (2, 3)
    assert len(res.topic_id) == 22

    assert json.loads(zk.get("/brokers/topics/orders")[0]) == {
        "version": 3, "partitions": {"0": [1, 2, 3], "1": [2, 3, 1]},
        "adding_replicas": {}, "removing_replicas": {}, "topic_id": res.topic_id}
    assert json.loads(zk.get("/config/topics/orders")[0]) == {
        "version": 1, "config": {"min.insync.replicas": "2", "retention.ms": "60000"}}
    assert state(zk, "orders", 0) == {
        "version": 1, "controller_epoch": 1, "leader": 1, "leader_epoch": 0,
        "isr": [1, 2, 3], "elr": [], "last_known_elr": [], "leader_recovery_state": 0}
    assert state(zk, "orders", 1)["leader"] == 2 and version(zk, "orders", 1) == 0

    # timeout_ms > 0: the response came after the leaders acknowledged their LeaderAndIsr.
    assert brokers[0].of("LeaderAndIsr") and brokers[1].of("LeaderAndIsr")
    for b in brokers:
        await wait_for(lambda b=b: b.of("LeaderAndIsr") and b.of("UpdateMetadata"))
        [lai] = b.of("LeaderAndIsr")
        assert (lai.controller_id, lai.controller_epoch, lai.broker_epoch) == (1, 1, b.epoch)
        assert sorted((s.topic, s.partition, s.leader, s.is_new) for s in lai.partition_states) \
            == [("orders", 0, 1, True), ("orders", 1, 2, True)]
        assert lai.topic_ids == {"orders": res.topic_id}
        assert {e.broker_id for e in lai.live_leaders} == {1, 2}
        ums = b.of("UpdateMetadata")
        assert ums and sorted(x.broker_id for x in ums[-1].live_brokers) == [1, 2, 3]
        assert ums[-1].controller.port == int(srv.address.rsplit(":", 1)[1])
    [ev] = srv.log.named("topic_created")
    assert ev["topic"] == "orders" and ev["controller_epoch"] == 1
    assert len(srv.log.named("leader_election")) == 2


@pytest.mark.parametrize("topic,kwargs,code,message", [
    ("bad/name", {}, 17, "illegal"),
    ("t", {"n": 1, "rf": 4}, 38, "Replication factor: 4 larger than available brokers: 3."),
    ("t", {"n": 0, "rf": 1}, 37, "Number of partitions must be larger than 0."),
    ("t", {"assignments": {0: [1, 9]}}, 39, "Unknown broker(s) in replica assignment: 9."),
    ("t", {"configs": {"bogus": "1"}}, 40, "Unknown topic config name: bogus"),
])
async def test_create_topic_errors(controllers, fake_brokers, zk, topic, kwargs, code, message):
    await fake_brokers(1, 2, 3)
    srv = await active_controller(controllers)
    await wait_for(lambda: len(srv.controller.context.live_brokers) == 3)
    res = await create(srv, topic, **kwargs)
    assert res.error_code == code and message in res.error_message
    assert zk.get_children("/brokers/topics") == []


async def test_defaults_existing_and_validate_only(controllers, fake_brokers, zk):
    await fake_brokers(1, 2, 3)
    srv = await active_controller(controllers, num_partitions=4, default_replication_factor=2)
    await wait_for(lambda: len(srv.controller.context.live_brokers) == 3)
    resp = await stub(srv).CreateTopics(pb.CreateTopicsRequest(
        topics=[pb.CreatableTopic(name="dry")], validate_only=True), timeout=10)
    assert resp.topics[0].error_code == 0 and resp.topics[0].num_partitions == 4
    assert zk.exists("/brokers/topics/dry") is None
    res = await create(srv, "t")
    assert (res.num_partitions, res.replication_factor) == (4, 2)
    leaders = [state(zk, "t", p)["leader"] for p in range(4)]
    assert sorted(set(leaders)) == sorted(set(leaders)) and len(set(leaders)) == 3  # spread
    again = await create(srv, "t")
    assert again.error_code == 36 and again.error_message == "Topic 't' already exists."


async def test_unreachable_brokers_do_not_block_the_controller(controllers, broker_sessions,
                                                               zk):
    # Registrations pointing at ports where nothing listens.
    for i in (1, 2, 3):
        broker_sessions.register(BrokerRegistration(i, "127.0.0.1", 1 + i))
    srv = await active_controller(controllers)
    await wait_for(lambda: len(srv.controller.context.live_brokers) == 3)
    res = await create(srv, "t", n=3, rf=3, timeout_ms=200)
    assert res.error_code == 0
    broker_sessions.kill(state(zk, "t", 0)["leader"])
    await wait_for(lambda: state(zk, "t", 0)["leader_epoch"] == 1, what="election")
    assert srv.controller.context.offline_partition_count() == 0


async def test_broker_failure_elects_from_the_isr_and_shrinks_isrs(
        controllers, fake_brokers, broker_sessions, zk):
    b1, b2, b3 = await fake_brokers(1, 2, 3)
    srv = await active_controller(controllers)
    await wait_for(lambda: len(srv.controller.context.live_brokers) == 3)
    await create(srv, "t", assignments={0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]})
    before = len(b2.of("LeaderAndIsr"))

    broker_sessions.kill(1)

    await wait_for(lambda: state(zk, "t", 0)["leader"] == 2, what="t-0 to move to 2")
    await wait_for(lambda: state(zk, "t", 2)["isr"] == [3, 2])
    assert state(zk, "t", 0) | {} == {**state(zk, "t", 0), "leader": 2, "leader_epoch": 1,
                                      "isr": [2, 3]}
    assert state(zk, "t", 1)["leader"] == 2 and state(zk, "t", 1)["leader_epoch"] == 1
    assert version(zk, "t", 0) == 1
    # One LeaderAndIsr per live broker for the whole batch, with the new states.
    await wait_for(lambda: len(b2.of("LeaderAndIsr")) == before + 1)
    lai = b2.of("LeaderAndIsr")[-1]
    assert sorted((s.partition, s.leader, s.leader_epoch, s.partition_epoch)
                  for s in lai.partition_states) == [(0, 2, 1, 1), (1, 2, 1, 1), (2, 3, 1, 1)]
    await wait_for(lambda: [x.broker_id for x in b3.of("UpdateMetadata")[-1].live_brokers]
                   == [2, 3])
    [failed] = srv.log.named("broker_failed")
    assert failed["broker"] == 1 and failed["broker_epoch"] == b1.epoch
    assert any(e["partition"] == "t-0" and e["new_leader"] == 2 and e["leader_epoch"] == 1
               for e in srv.log.named("leader_election"))
    assert srv.metrics.election_latency_ms._sum.get() > 0

    # The broker comes back (new epoch): it gets LeaderAndIsr for its partitions and full
    # metadata, but is not put back into ISRs (its leader will do that via AlterPartition).
    b1.received.clear()
    b1.epoch = broker_sessions.register(b1.registration())
    await wait_for(lambda: b1.of("LeaderAndIsr"), what="LeaderAndIsr to the returning broker")
    assert sorted(s.partition for s in b1.of("LeaderAndIsr")[0].partition_states) == [0, 1, 2]
    assert b1.of("LeaderAndIsr")[0].broker_epoch == b1.epoch
    assert 1 not in state(zk, "t", 0)["isr"]


async def test_offline_partition_and_unclean_election(controllers, fake_brokers,
                                                      broker_sessions, zk):
    await fake_brokers(1, 2)
    srv = await active_controller(controllers)
    await wait_for(lambda: len(srv.controller.context.live_brokers) == 2)
    await create(srv, "t", assignments={0: [1, 2]})
    # The leader shrinks the ISR to itself, then dies: offline.
    ctx = srv.controller.context
    resp = await stub(srv).AlterPartition(pb.AlterPartitionRequest(
        broker_id=1, broker_epoch=ctx.broker_epoch(1), topics=[pb.AlterPartitionTopic(
            topic="t", partitions=[pb.AlterPartitionPartition(
                partition=0, leader_epoch=0, partition_epoch=0,
                new_isr_with_epochs=[pb.BrokerState(broker_id=1, broker_epoch=-1)])])]),
        timeout=5)
    assert resp.topics[0].partitions[0].error_code == 0
    assert list(resp.topics[0].partitions[0].isr) == [1]
    broker_sessions.kill(1)
    await wait_for(lambda: state(zk, "t", 0)["leader"] == -1)
    assert state(zk, "t", 0)["isr"] == [1]
    await wait_for(lambda: srv.metrics.offline_partitions._value.get() == 1, timeout=5)

    # Turning on unclean election for the topic (its config znode) elects broker 2.
    zk.set("/config/topics/t", L.encode_topic_config({"unclean.leader.election.enable": "true"}))
    await wait_for(lambda: state(zk, "t", 0)["leader"] == 2, what="unclean election")
    assert state(zk, "t", 0)["isr"] == [2] and state(zk, "t", 0)["leader_recovery_state"] == 1
    # The election is recorded (event, counter) just after the write ZooKeeper shows.
    await wait_for(lambda: srv.metrics.unclean_elections._value.get() == 1,
                   what="the unclean election counted")
    assert next(e for e in srv.log.named("leader_election") if e["unclean"])["new_leader"] == 2


async def test_alter_partition_rpc_errors(controllers, fake_brokers, zk):
    await fake_brokers(1, 2, 3)
    srv = await active_controller(controllers)
    await wait_for(lambda: len(srv.controller.context.live_brokers) == 3)
    await create(srv, "t", assignments={0: [1, 2, 3]})
    ctx = srv.controller.context

    def req(epoch, isr, leader_epoch=0, partition_epoch=0, relinquish=False):
        return pb.AlterPartitionRequest(broker_id=1, broker_epoch=epoch, topics=[
            pb.AlterPartitionTopic(topic="t", partitions=[pb.AlterPartitionPartition(
                partition=0, leader_epoch=leader_epoch, partition_epoch=partition_epoch,
                relinquish_leadership=relinquish,
                new_isr_with_epochs=[pb.BrokerState(broker_id=b, broker_epoch=-1)
                                     for b in isr])])])

    with pytest.raises(grpc.aio.AioRpcError) as e:
        await stub(srv).AlterPartition(req(ctx.broker_epoch(1) + 1, [1, 2]), timeout=5)
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert ("replog-error-code", "77") in tuple(e.value.trailing_metadata())

    r = await stub(srv).AlterPartition(req(ctx.broker_epoch(1), [1, 2]), timeout=5)
    p = r.topics[0].partitions[0]
    assert (p.error_code, list(p.isr), p.partition_epoch, p.leader_epoch) == (0, [1, 2], 1, 0)
    assert state(zk, "t", 0)["isr"] == [1, 2] and version(zk, "t", 0) == 1
    r = await stub(srv).AlterPartition(req(ctx.broker_epoch(1), [1]), timeout=5)
    assert r.topics[0].partitions[0].error_code == 95  # INVALID_UPDATE_VERSION
    assert r.topics[0].partitions[0].partition_epoch == 1  # the current state comes back

    # design.md#kip-501: the leader relinquishes; 2 takes over, 1 stays in the ISR, last.
    r = await stub(srv).AlterPartition(req(ctx.broker_epoch(1), [2, 1], partition_epoch=1,
                                           relinquish=True), timeout=5)
    p = r.topics[0].partitions[0]
    assert (p.error_code, p.leader_id, p.leader_epoch, list(p.isr)) == (108, 2, 1, [2, 1])
    assert state(zk, "t", 0)["leader"] == 2
    assert srv.metrics.leadership_relinquished._value.get() == 1
    assert srv.log.named("leadership_relinquished")[0]["new_leader"] == 2


async def test_controlled_shutdown_moves_leadership_first(controllers, fake_brokers, zk):
    b1, b2, _b3 = await fake_brokers(1, 2, 3)
    srv = await active_controller(controllers)
    await wait_for(lambda: len(srv.controller.context.live_brokers) == 3)
    await create(srv, "t", assignments={0: [1, 2, 3], 1: [2, 1, 3]})
    await create(srv, "single", assignments={0: [1]})
    s = stub(srv)
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await s.ControlledShutdown(pb.ControlledShutdownRequest(broker_id=1, broker_epoch=1),
                                   timeout=5)
    assert ("replog-error-code", "77") in tuple(e.value.trailing_metadata())
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await s.ControlledShutdown(pb.ControlledShutdownRequest(broker_id=7, broker_epoch=-1),
                                   timeout=5)
    assert ("replog-error-code", "8") in tuple(e.value.trailing_metadata())

    r = await s.ControlledShutdown(pb.ControlledShutdownRequest(broker_id=1,
                                                                broker_epoch=b1.epoch),
                                   timeout=5)
    assert list(r.remaining_partitions) == []  # RF=1 single-0 is not counted (Kafka's rule)
    assert state(zk, "t", 0)["leader"] == 2 and state(zk, "t", 0)["isr"] == [2, 3]
    assert state(zk, "t", 1)["isr"] == [2, 3]
    await wait_for(lambda: b1.of("StopReplica"))
    assert [(x.partition, x.delete_partition) for x in b1.of("StopReplica")[0].partition_states] \
        == [(1, False)]
    # A broker in controlled shutdown cannot rejoin an ISR.
    r = await s.AlterPartition(pb.AlterPartitionRequest(
        broker_id=2, broker_epoch=b2.epoch, topics=[pb.AlterPartitionTopic(
            topic="t", partitions=[pb.AlterPartitionPartition(
                partition=0, leader_epoch=1, partition_epoch=1,
                new_isr_with_epochs=[pb.BrokerState(broker_id=b, broker_epoch=-1)
                                     for b in (2, 3, 1)])])]), timeout=5)
    assert r.topics[0].partitions[0].error_code == 107


async def test_elect_leaders(controllers, fake_brokers, broker_sessions, zk):
    b1, _, _ = await fake_brokers(1, 2, 3)
    srv = await active_controller(controllers)
    await wait_for(lambda: len(srv.controller.context.live_brokers) == 3)
    await create(srv, "t", assignments={0: [1, 2, 3], 1: [2, 3, 1]})
    broker_sessions.kill(1)
    await wait_for(lambda: state(zk, "t", 0)["leader"] == 2)
    b1.epoch = broker_sessions.register(b1.registration())
    await wait_for(lambda: srv.controller.context.broker_epoch(1) == b1.epoch)
    s = stub(srv)
    tps = [pb.TopicPartitions(topic="t", partitions=[0, 1, 5])]
    r = await s.ElectLeaders(pb.ElectLeadersRequest(election_type=pb.PREFERRED,
                                                    topic_partitions=tps, timeout_ms=1000),
                             timeout=5)
    got = {x.partition: x.error_code for x in r.replica_election_results}
    assert got == {0: 80, 1: 84, 5: 3}  # not in ISR yet / already preferred / unknown
    # The leader of t-0 adds 1 back; now the preferred election moves leadership.
    ctx = srv.controller.context
    await s.AlterPartition(pb.AlterPartitionRequest(
        broker_id=2, broker_epoch=ctx.broker_epoch(2), topics=[pb.AlterPartitionTopic(
            topic="t", partitions=[pb.AlterPartitionPartition(
                partition=0, leader_epoch=1, partition_epoch=1,
                new_isr_with_epochs=[pb.BrokerState(broker_id=b, broker_epoch=-1)
                                     for b in (2, 3, 1)])])]), timeout=5)
    r = await s.ElectLeaders(pb.ElectLeadersRequest(election_type=pb.PREFERRED,
                                                    all_topic_partitions=True), timeout=5)
    assert {x.partition: x.error_code for x in r.replica_election_results} == {0: 0, 1: 84}
    assert state(zk, "t", 0)["leader"] == 1 and state(zk, "t", 0)["leader_epoch"] == 2
    r = await s.ElectLeaders(pb.ElectLeadersRequest(election_type=pb.UNCLEAN,
                                                    topic_partitions=tps), timeout=5)
    assert {x.partition: x.error_code for x in r.replica_election_results} == \
        {0: 84, 1: 84, 5: 3}
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await s.ElectLeaders(pb.ElectLeadersRequest(election_type=7), timeout=5)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_delete_topic(controllers, fake_brokers, broker_sessions, zk):
    brokers = await fake_brokers(1, 2, 3)
    srv = await active_controller(controllers)
    await wait_for(lambda: len(srv.controller.context.live_brokers) == 3)
    res = await create(srv, "gone", n=3, rf=2)
    await create(srv, "kept", n=1, rf=1)
    r = await stub(srv).DeleteTopics(pb.DeleteTopicsRequest(topic_names=["gone", "nope"],
                                                            timeout_ms=5000), timeout=10)
    codes = {x.name: x.error_code for x in r.responses}
    assert codes == {"gone": 0, "nope": 3}
    assert zk.exists("/brokers/topics/gone") is None
    assert zk.exists("/config/topics/gone") is None
    assert zk.exists("/admin/delete_topics/gone") is None
    assert zk.exists("/brokers/topics/kept") is not None
    stops = [s for b in brokers for req in b.of("StopReplica") for s in req.partition_states]
    assert len(stops) == 6 and all(s.delete_partition and s.leader_epoch == -2 for s in stops)
    deleted_ums = [s for b in brokers for req in b.of("UpdateMetadata")
                   for s in req.partition_states if s.topic == "gone" and s.leader == -2]
    assert len(deleted_ums) == 9  # every broker hears that all 3 partitions are deleted
    assert srv.log.named("topic_deleted") == [{"topic": "gone", "topic_id": res.topic_id,
                                                "controller_epoch": 1}]
    assert "gone" not in srv.controller.context.assignments


async def test_delete_waits_for_a_dead_replica(controllers, fake_brokers, broker_sessions, zk):
    _b1, b2 = await fake_brokers(1, 2)
    srv = await active_controller(controllers)
    await wait_for(lambda: len(srv.controller.context.live_brokers) == 2)
    await create(srv, "t", assignments={0: [1, 2]})
    broker_sessions.kill(2)
    await wait_for(lambda: 2 not in srv.controller.context.live_brokers)
    r = await stub(srv).DeleteTopics(pb.DeleteTopicsRequest(topic_names=["t"], timeout_ms=300),
                                     timeout=10)
    assert r.responses[0].error_code == 7  # REQUEST_TIMED_OUT: replica on 2 not deleted
    assert zk.exists("/admin/delete_topics/t") is not None
    b2.epoch = broker_sessions.register(b2.registration())
    await wait_for(lambda: zk.exists("/brokers/topics/t") is None, what="deletion to resume")
    assert zk.exists("/admin/delete_topics/t") is None


async def test_failover_loads_state_and_tells_every_broker(controllers, fake_brokers, zk,
                                                           zk_expire):
    brokers = await fake_brokers(1, 2, 3)
    a = await active_controller(controllers)
    await wait_for(lambda: len(a.controller.context.live_brokers) == 3)
    res = await create(a, "t", n=6, rf=3)
    b = await controllers(2)
    await wait_for(lambda: b.controller.active_controller is not None)
    await a.stop()
    await wait_for(lambda: b.controller.is_active)
    ctx = b.controller.context
    assert ctx.epoch == 2 and ctx.topic_id("t") == res.topic_id
    assert {tp.partition: s.leader for tp, s in ctx.leadership.items()} == \
        {p: state(zk, "t", p)["leader"] for p in range(6)}
    for br in brokers:
        await wait_for(lambda br=br: any(r.controller_epoch == 2
                                         for r in br.of("UpdateMetadata")))
        um = next(r for r in br.of("UpdateMetadata") if r.controller_epoch == 2)
        assert len(um.partition_states) == 6 and um.controller.broker_id == 2
        lai = [r for r in br.of("LeaderAndIsr") if r.controller_epoch == 2]
        assert lai and all(not s.is_new for s in lai[0].partition_states)
    assert b.metrics.global_partitions._value.get() in (0, 6)  # refreshed each second
    b.metrics.refresh(ctx)
    assert b.metrics.global_partitions._value.get() == 6
    assert b.metrics.global_topics._value.get() == 1
    assert b.metrics.preferred_imbalance._value.get() == 0


async def test_topic_written_directly_to_zookeeper_is_initialized(controllers, fake_brokers,
                                                                  zk):
    await fake_brokers(1, 2)
    srv = await active_controller(controllers)
    await wait_for(lambda: len(srv.controller.context.live_brokers) == 2)
    zk.create("/brokers/topics/ext", L.encode_topic(L.TopicAssignment(
        "ext", "AAAAAAAAAAAAAAAAAAAAAQ", {0: [2, 1], 1: [1, 2]})))
    await wait_for(lambda: zk.exists(L.partition_state_path("ext", 1)) is not None)
    assert state(zk, "ext", 0)["leader"] == 2 and state(zk, "ext", 1)["isr"] == [1, 2]


async def test_stale_controller_requests_are_refused_by_brokers(controllers, fake_brokers,
                                                                zk):
    """A broker that has seen epoch 2 refuses epoch 1: the old controller cannot command it."""
    (b1,) = await fake_brokers(1)
    a = await active_controller(controllers)
    await wait_for(lambda: b1.of("UpdateMetadata"))
    b1.max_controller_epoch = 2  # as if the successor had spoken
    await create(a, "t", assignments={0: [1]}, timeout_ms=500)
    await wait_for(lambda: b1.rejected)
    assert all(r.request.controller_epoch == 1 for r in b1.rejected)
    assert not [r for r in b1.of("LeaderAndIsr") if r.partition_states
                and r.partition_states[0].topic == "t"]


async def test_large_topics_span_several_transactions(controllers, fake_brokers, zk,
                                                      monkeypatch):
    import controller.zk_store as zs
    monkeypatch.setattr(zs, "MAX_OPS_PER_TRANSACTION", 7)  # 3 creates (2 ops each) per batch
    await fake_brokers(1, 2)
    srv = await active_controller(controllers)
    await wait_for(lambda: len(srv.controller.context.live_brokers) == 2)
    res = await create(srv, "big", n=20, rf=2)
    assert res.error_code == 0
    assert sorted(int(p) for p in zk.get_children("/brokers/topics/big/partitions")) == \
        list(range(20))
    assert all(version(zk, "big", p) == 0 for p in range(20))
    assert srv.controller.context.offline_partition_count() == 0


async def test_a_refused_write_is_reread_and_not_applied(controllers, fake_brokers, zk):
    """Someone else rewrote a partition state (not the controller): its conditional write
    fails, the rest of the batch still commits, and the controller adopts ZooKeeper's
    state."""
    await fake_brokers(1, 2, 3)
    srv = await active_controller(controllers)
    await wait_for(lambda: len(srv.controller.context.live_brokers) == 3)
    await create(srv, "t", assignments={0: [1, 2, 3], 1: [1, 2, 3]})
    intruder = {**state(zk, "t", 0), "leader_epoch": 7}
    zk.set(L.partition_state_path("t", 0), json.dumps(intruder).encode())
    r = await stub(srv).ElectLeaders(pb.ElectLeadersRequest(
        election_type=pb.PREFERRED, all_topic_partitions=True), timeout=5)
    assert {x.partition: x.error_code for x in r.replica_election_results} == {0: 84, 1: 84}
    ctx = srv.controller.context
    s = ctx.leadership[TopicPartition("t", 1)]
    resp = await stub(srv).AlterPartition(pb.AlterPartitionRequest(
        broker_id=1, broker_epoch=ctx.broker_epoch(1), topics=[pb.AlterPartitionTopic(
            topic="t", partitions=[
                pb.AlterPartitionPartition(partition=p, leader_epoch=0, partition_epoch=0,
                                           new_isr_with_epochs=[pb.BrokerState(
                                               broker_id=1, broker_epoch=-1)])
                for p in (0, 1)])]), timeout=5)
    codes = {p.partition: p.error_code for p in resp.topics[0].partitions}
    assert codes == {0: 95, 1: 0}
    assert state(zk, "t", 1)["isr"] == [1] and s.partition_epoch == 0
    assert state(zk, "t", 0)["leader_epoch"] == 7  # untouched
    assert ctx.leadership[TopicPartition("t", 0)].leader_epoch == 7


async def test_refused_election_write_is_reread_and_decided_again(
        controllers, fake_brokers, broker_sessions, zk):
    """Controller retries: another writer rewrote t-0's state, so the election
    after its leader dies is refused. On the commit before, the controller only adopted the
    re-read state and t-0 stayed led by the dead broker; now it elects again on that state."""
    await fake_brokers(1, 2, 3)
    srv = await active_controller(controllers)
    await wait_for(lambda: len(srv.controller.context.live_brokers) == 3)
    await create(srv, "t", assignments={0: [1, 2, 3]})
    intruder = {**state(zk, "t", 0), "leader_epoch": 7}
    zk.set(L.partition_state_path("t", 0), json.dumps(intruder).encode())
    broker_sessions.kill(1)
    await wait_for(lambda: state(zk, "t", 0)["leader"] == 2, what="t-0 to be re-elected")
    assert state(zk, "t", 0)["leader_epoch"] == 8 and state(zk, "t", 0)["isr"] == [2, 3]
    ctx = srv.controller.context
    # The controller applies the written state to its context once the write's outcome is
    # back, a moment after ZooKeeper shows it.
    await wait_for(lambda: ctx.leadership[TopicPartition("t", 0)].leader == 2,
                   what="the controller's context to hold the election")
    assert ctx.leadership[TopicPartition("t", 0)].leader_epoch == 8


async def test_restart_partitions_entry_is_applied_then_deleted(controllers, fake_brokers, zk):
    """design.md#jbod: a broker's /restart_partitions entry (a persistent sequential child,
    written here as the broker would) moves leadership off it, takes it out of the ISR, tells
    it to re-create the replica (is_new) and is deleted once applied."""
    brokers = await fake_brokers(1, 2, 3)
    srv = await active_controller(controllers)
    await wait_for(lambda: len(srv.controller.context.live_brokers) == 3)
    res = await create(srv, "t", assignments={0: [1, 2, 3], 1: [2, 1, 3]})
    assert res.error_code == 0, res.error_message
    zk.create(L.restart_entry_path(L.RESTART_ENTRY_PREFIX), L.encode_restart_entry(
        L.RestartEntry(1, "/d1", (("t", 0), ("t", 1)), brokers[0].epoch)), sequence=True)
    await wait_for(lambda: zk.get_children(L.RESTART_PARTITIONS) == [],
                   what="the restart entry consumed")
    s0, s1 = state(zk, "t", 0), state(zk, "t", 1)
    assert (s0["leader"], s0["isr"], s0["leader_epoch"]) == (2, [2, 3], 1)  # 1 led: first of AR
    assert (s1["leader"], s1["isr"], s1["leader_epoch"]) == (2, [2, 3], 1)  # 1 followed
    await wait_for(lambda: any(s.is_new for r in brokers[0].of("LeaderAndIsr")
                               for s in r.partition_states if s.leader_epoch == 1),
                   what="LeaderAndIsr(is_new) to the broker that lost its replicas")
    last = {(s.topic, s.partition): s for r in brokers[0].of("LeaderAndIsr")
            for s in r.partition_states}
    assert last[("t", 0)].is_new and last[("t", 1)].is_new
    [ev] = srv.log.named("partitions_restarted")
    assert ev["broker"] == 1 and ev["log_dir"] == "/d1" and ev["partitions"] == ["t-0", "t-1"]
    assert srv.metrics.restarted_partitions._value.get() == 2


async def test_leader_and_isr_refusals_come_back_as_an_event(controllers, fake_brokers, zk):
    """A broker's LeaderAndIsr answer reaches the core as an event. A replica refused
    with KAFKA_STORAGE_ERROR is recorded and decides nothing (its broker's /restart_partitions
    entry is what re-elects, design.md#jbod): the partition state is the one created."""
    brokers = await fake_brokers(1, 2, 3)
    brokers[1].leader_and_isr_error = 56  # KAFKA_STORAGE_ERROR
    srv = await active_controller(controllers)
    await wait_for(lambda: len(srv.controller.context.live_brokers) == 3)
    res = await create(srv, "t", assignments={0: [1, 2, 3], 1: [2, 1, 3]})
    assert res.error_code == 0, res.error_message
    await wait_for(lambda: srv.log.named("leader_and_isr_errors"),
                   what="the refusal recorded as an event")
    [ev] = srv.log.named("leader_and_isr_errors")
    assert ev["broker"] == 2 and ev["errors"] == {"t-0": "KAFKA_STORAGE_ERROR",
                                                  "t-1": "KAFKA_STORAGE_ERROR"}
    assert (state(zk, "t", 0)["leader"], state(zk, "t", 1)["leader"]) == (1, 2)
    assert state(zk, "t", 1)["leader_epoch"] == 0


async def test_a_refused_state_transition_is_logged_counted_and_not_applied(
        controllers, fake_brokers, zk, monkeypatch):
    """design.md#reassignment (asks for it): a transition the replica state machine's table refuses
    is never applied, is logged as an invalid_state_transition event and is counted in
    replog_controller_invalid_state_transitions_total. The decisions never plan one (the
    simulation checks that), so one is planted: the StopReplica answer's decision also asks
    to move an online replica of another topic straight to ReplicaDeletionSuccessful."""
    from controller import decisions as D
    from controller.context import PartitionReplica
    from controller.decisions.base import Builder
    from controller.state_machine import ReplicaState as R

    kept = PartitionReplica(TopicPartition("kept", 0), 1)
    real = D.on_stop_replica_response

    def planting(ctx, broker_id, errors):
        d = real(ctx, broker_id, errors)
        b = Builder(ctx)
        assert not b.replica(kept, R.ReplicaDeletionSuccessful)  # refused by the table
        d.refused.extend(b.d.refused)
        return d

    monkeypatch.setattr(D, "on_stop_replica_response", planting)
    await fake_brokers(1, 2)
    srv = await active_controller(controllers)
    await wait_for(lambda: len(srv.controller.context.live_brokers) == 2)
    await create(srv, "gone", assignments={0: [1, 2]})
    await create(srv, "kept", assignments={0: [1]})
    r = await stub(srv).DeleteTopics(pb.DeleteTopicsRequest(topic_names=["gone"],
                                                            timeout_ms=5000), timeout=10)
    assert [x.error_code for x in r.responses] == [0]
    await wait_for(lambda: srv.log.named("invalid_state_transition"),
                   what="the refused transition logged")
    ev = srv.log.named("invalid_state_transition")[0]
    assert (ev["kind"], ev["key"], ev["current"], ev["target"]) == (
        "Replica", str(kept), "OnlineReplica", "ReplicaDeletionSuccessful"), ev
    assert srv.metrics.invalid_transitions.labels("Replica")._value.get() == len(
        srv.log.named("invalid_state_transition"))
    assert srv.controller.context.replica_sm.state(kept) is R.OnlineReplica  # not applied
    assert zk.exists("/brokers/topics/kept") is not None
