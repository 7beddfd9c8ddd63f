"""The byte counters behind the report's throughput (transforms.COUNTERS), from real brokers: two
replica managers behind real gRPC servers (tests/broker/inprocess.py), a producer's acks=all
batch copied by the follower's fetcher, then read by a consumer's Fetch. Their /metrics text
goes through the exporter's parser, and the analysis computes the rates from two scrapes."""
# ruff: noqa: C408 - dict(...) reads as a table row

from __future__ import annotations

from prometheus_client import generate_latest

from analytics import transforms as T
from analytics.export import parse_samples
from broker.metrics import BrokerMetrics
from common.rpc import replog_pb2 as pb
from tests.analytics.conftest import rows
from tests.broker.inprocess import TP, Node, leader_and_isr, produce_req, wait_until


def _scrape(node: Node, ts: float) -> list[dict]:
    """One exporter sample per series, as ``replog metrics export`` records them."""
    return [dict(ts=ts, process=f"broker-{node.id}", metric=name, labels=labels, value=value)
            for name, labels, value in parse_samples(
                generate_latest(node.rm.metrics.registry).decode())]


def test_every_counter_the_analysis_reads_is_one_a_broker_serves():
    served = {name for name, _, _ in parse_samples(generate_latest(BrokerMetrics(1).registry)
                                                   .decode())}
    assert set(T.COUNTERS.values()) | {T.REASSIGNMENT_BYTES_IN} <= served


async def test_bytes_out_to_consumers_and_followers(samples, tmp_path):
    leader, follower = nodes = [Node(1, tmp_path), Node(2, tmp_path)]
    for n in nodes:
        await n.start()
    try:
        for n in nodes:
            await n.stub.LeaderAndIsr(leader_and_isr(n, 1, 0, [1, 2], [1, 2], nodes))
        before = _scrape(leader, 100.0) + _scrape(follower, 100.0)
        resp = await leader.stub.Produce(produce_req("a", n=20))  # acks=all: replicated
        assert resp.responses[0].partition_responses[0].error_code == 0
        await wait_until(lambda: follower.lm.get_log(TP).high_watermark == 20)
        fetch = await leader.stub.Fetch(pb.FetchRequest(max_wait_ms=0, topics=[pb.FetchTopic(
            topic="t", partitions=[pb.FetchPartition(partition=0, fetch_offset=0,
                                                     partition_max_bytes=1 << 20)])]))
        sent = len(fetch.responses[0].partitions[0].records)
        assert sent > 0
        after = _scrape(leader, 102.0) + _scrape(follower, 102.0)
    finally:
        for n in nodes:
            await n.stop()

    got = rows(T.throughput_by_broker(T.counter_rates(samples(*before, *after))))
    # One batch: appended by the leader (bytes in) and the follower (replication bytes in),
    # sent once to the follower (replication bytes out) and once to the consumer (bytes out).
    moved = dict(mean_rate=round(sent / 2, 3), max_rate=round(sent / 2, 3), total=float(sent))
    none = dict(mean_rate=0.0, max_rate=0.0, total=0.0)
    assert got == [dict(process=f"broker-{b}", series=series, **figures) for b, series, figures in [
        (1, "bytes_in", moved), (1, "bytes_out", moved), (1, "replication_bytes_in", none),
        (1, "replication_bytes_out", moved),
        (2, "bytes_in", none), (2, "bytes_out", none), (2, "replication_bytes_in", moved),
        (2, "replication_bytes_out", none)]]
