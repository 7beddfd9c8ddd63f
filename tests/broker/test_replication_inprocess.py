"""Two brokers' replica managers over real gRPC, driven by hand-made LeaderAndIsr requests:
produce acks=all to the leader, the follower's fetcher copies the log, the HW advances, and a
leader change with a divergent tail ends with byte-identical logs. (The controller is out of
the picture here; its integration is tested with real processes.)"""

import grpc
import pytest

from common.errors import ErrorCode
from common.records import decode_all
from common.rpc import replog_pb2 as pb
from tests.broker.inprocess import TP, leader_and_isr, produce_req, wait_until


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
    # Kafka's RequestMetrics: the leader answered one Produce, the follower's Fetches (at
    # least the one that brought the batch) and the consumer's one; the follower answered none.
    def requests(n, kind):
        return n.rm.metrics.registry.get_sample_value(
            "kafka_network_requestmetrics_requests_total", {"request": kind})
    assert requests(a, "Produce") == 1 and requests(a, "FetchConsumer") == 1
    assert requests(a, "FetchFollower") >= 1
    assert (requests(b, "Produce"), requests(b, "FetchConsumer"),
            requests(b, "FetchFollower")) == (0, 0, 0)


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
