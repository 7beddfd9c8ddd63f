"""Two brokers' replica managers over real gRPC, driven by hand-made LeaderAndIsr requests:
produce acks=all to the leader, the follower's fetcher copies the log, the HW advances, and a
leader change with a divergent tail ends with byte-identical logs. (The controller is out of
the picture here; its integration is tested with real processes.)"""

import asyncio

import grpc
import pytest

from broker.fetcher import GRPC_OPTIONS, ReplicaFetcherManager
from broker.metadata_cache import MetadataCache
from broker.metrics import BrokerMetrics
from broker.replica_manager import ReplicaManager
from broker.servicer import BrokerServicer
from broker.storage.log_manager import LogManager
from common.config import build_config
from common.errors import ErrorCode
from common.names import TopicPartition
from common.observability import configure_event_log
from common.records import ProducerRecord, build_batch, decode_all
from common.rpc import replog_pb2 as pb
from common.rpc import replog_pb2_grpc

TP = TopicPartition("t", 0)


class Node:
    def __init__(self, broker_id, tmp_path):
        cfg = build_config([("broker.id", str(broker_id), "test"),
                            ("replica.fetch.wait.max.ms", "100", "test"),
                            ("replica.fetch.backoff.ms", "50", "test")])
        self.id = broker_id
        self.lm = LogManager([str(tmp_path / f"b{broker_id}")], broker_id)
        self.lm.startup()
        events = configure_event_log(str(tmp_path / f"b{broker_id}.json"), "broker",
                                     broker=broker_id)
        self.rm = ReplicaManager(broker_id, cfg, self.lm, MetadataCache(),
                                 BrokerMetrics(broker_id), events)
        self.rm.broker_epoch = 100 + broker_id
        self.rm.fetcher_manager = ReplicaFetcherManager(broker_id, lambda: self.rm.broker_epoch,
                                                        cfg, self.lm, self.rm.metrics, events)

    async def start(self):
        self.server = grpc.aio.server(options=GRPC_OPTIONS)
        replog_pb2_grpc.add_BrokerServicer_to_server(BrokerServicer(self.rm, self.id),
                                                     self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        await self.server.start()
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{self.port}")
        self.stub = replog_pb2_grpc.BrokerStub(self.channel)

    async def stop(self):
        await self.rm.fetcher_manager.shutdown()
        await self.channel.close()
        await self.server.stop(0)
        self.lm.shutdown()

    def endpoint(self):
        return pb.BrokerEndpoint(broker_id=self.id, host="127.0.0.1", port=self.port)


def leader_and_isr(target, leader, epoch, isr, replicas, nodes, controller_epoch=1,
                   partition_epoch=None):
    return pb.LeaderAndIsrRequest(
        controller_id=0, controller_epoch=controller_epoch, broker_epoch=target.rm.broker_epoch,
        partition_states=[pb.LeaderAndIsrPartitionState(
            topic=TP.topic, partition=TP.partition, controller_epoch=controller_epoch,
            leader=leader, leader_epoch=epoch, isr=isr,
            partition_epoch=epoch if partition_epoch is None else partition_epoch,
            replicas=replicas)],
        live_leaders=[n.endpoint() for n in nodes if n.id == leader])


def produce_req(tag, n=5, acks=-1):
    recs = [ProducerRecord(f"{tag}{i}".encode(), f"value-{tag}{i}".encode()) for i in range(n)]
    return pb.ProduceRequest(acks=acks, timeout_ms=5000, topic_data=[pb.ProduceTopicData(
        topic=TP.topic, partition_data=[pb.ProducePartitionData(
            partition=TP.partition, records=build_batch(recs))])])


async def wait_until(cond, timeout=10.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


@pytest.fixture
async def nodes(tmp_path):
    ns = [Node(1, tmp_path), Node(2, tmp_path)]
    for n in ns:
        await n.start()
    yield ns
    for n in ns:
        await n.stop()


async def test_acks_all_completes_once_the_follower_has_the_records(nodes):
    a, b = nodes
    for n in nodes:
        r = await n.stub.LeaderAndIsr(leader_and_isr(n, 1, 0, [1, 2], [1, 2], nodes))
        assert [e.error_code for e in r.partition_errors] == [0]
    resp = await a.stub.Produce(produce_req("a"))
    pr = resp.responses[0].partition_responses[0]
    assert (pr.error_code, pr.base_offset) == (0, 0)
    # acks=all returned: the follower has the batch, the HW covers it
    assert b.lm.get_log(TP).log_end_offset >= 5
    assert a.lm.get_log(TP).high_watermark == 5
    await wait_until(lambda: b.lm.get_log(TP).high_watermark == 5)
    # consumers read up to the HW only, followers up to the LEO
    fetch = await a.stub.Fetch(pb.FetchRequest(max_wait_ms=0, topics=[pb.FetchTopic(
        topic="t", partitions=[pb.FetchPartition(partition=0, fetch_offset=0,
                                                 partition_max_bytes=1 << 20)])]))
    got = decode_all(fetch.responses[0].partitions[0].records)
    assert [r.value for r in got] == [f"value-a{i}".encode() for i in range(5)]


async def test_follower_refuses_produce_and_stale_controller_epoch_is_fenced(nodes):
    a, b = nodes
    for n in nodes:
        await n.stub.LeaderAndIsr(leader_and_isr(n, 1, 0, [1, 2], [1, 2], nodes,
                                                 controller_epoch=5))
    resp = await b.stub.Produce(produce_req("x"))
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await b.stub.LeaderAndIsr(leader_and_isr(b, 2, 1, [2], [1, 2], nodes, controller_epoch=4))
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert ("replog-error-code", str(int(ErrorCode.STALE_CONTROLLER_EPOCH))) in \
        tuple(info.value.trailing_metadata())
    assert b.rm.partitions[TP].leader_id == 1


async def test_min_isr_refuses_acks_all_but_not_acks_1(nodes):
    a, _ = nodes
    a.rm.topic_configs["t"] = {"min.insync.replicas": "2"}
    await a.stub.LeaderAndIsr(leader_and_isr(a, 1, 0, [1], [1, 2], nodes))
    resp = await a.stub.Produce(produce_req("x"))
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert a.lm.get_log(TP).log_end_offset == 0  # nothing was appended
    resp = await a.stub.Produce(produce_req("y", acks=1))
    assert resp.responses[0].partition_responses[0].error_code == 0
    assert a.lm.get_log(TP).high_watermark == 0  # below min ISR the HW does not advance


async def test_new_leader_makes_old_leaders_divergent_tail_disappear(nodes):
    a, b = nodes
    for n in nodes:
        await n.stub.LeaderAndIsr(leader_and_isr(n, 1, 0, [1, 2], [1, 2], nodes))
    await a.stub.Produce(produce_req("c"))  # replicated: offsets 0-4
    # isolate the follower, let the leader write records nobody else gets (acks=1)
    b.rm.fetcher_manager.remove_partitions([TP])
    await a.stub.Produce(produce_req("lost", acks=1))
    assert a.lm.get_log(TP).log_end_offset == 10
    # the controller makes b the leader in epoch 1, a its follower
    await b.stub.LeaderAndIsr(leader_and_isr(b, 2, 1, [2], [1, 2], nodes))
    await b.stub.Produce(produce_req("new", n=3, acks=1))
    await a.stub.LeaderAndIsr(leader_and_isr(a, 2, 1, [2], [1, 2], nodes))
    await wait_until(lambda: a.lm.get_log(TP).log_end_offset == 8)
    la, lb = a.lm.get_log(TP), b.lm.get_log(TP)
    assert la.read(0, 1 << 20) + la.read(5, 1 << 20) == lb.read(0, 1 << 20) + lb.read(5, 1 << 20)
    values = [r.value for r in decode_all(la.read(0, 1 << 20))]
    assert not any(v.startswith(b"value-lost") for v in values)
    assert la.epoch_cache.entries == lb.epoch_cache.entries == [(0, 0), (1, 5)]
