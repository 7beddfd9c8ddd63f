"""The replica manager's injected seams: the fetchers' transport, the clock
for request deadlines, DescribeLogDirs' disk call off the event loop, and the log-dir failure
consumer."""

import asyncio
import errno
import threading

from broker.storage.fileops import FaultInjectingFileOps
from common.errors import ErrorCode
from common.grpc_options import REPLICA_FETCHER_OPTIONS, insecure_channel
from common.rpc import replog_pb2 as pb
from tests.broker.inprocess import TP, Node, leader_and_isr, produce_req, wait_until


async def test_the_follower_fetches_through_the_injected_channel_factory(tmp_path):
    opened = []

    def factory(address, options):
        opened.append((address, tuple(options)))
        return insecure_channel(address, options)

    a, b = Node(1, tmp_path), Node(2, tmp_path, channel_factory=factory)
    nodes = [a, b]
    for n in nodes:
        await n.start()
    try:
        for n in nodes:
            await n.stub.LeaderAndIsr(leader_and_isr(n, 1, 0, [1, 2], [1, 2], nodes))
        await a.stub.Produce(produce_req("x", acks=-1))
        await wait_until(lambda: b.lm.get_log(TP).log_end_offset == 5)
        assert opened == [(f"127.0.0.1:{a.port}", REPLICA_FETCHER_OPTIONS)]
    finally:
        for n in nodes:
            await n.stop()


async def test_acks_all_times_out_by_the_injected_monotonic_clock(tmp_path):
    """The follower never fetches; with the clock past the deadline the produce is answered
    REQUEST_TIMED_OUT at once, though its timeout is a minute of real time."""
    a = Node(1, tmp_path)
    now = [0.0]
    a.rm.monotonic = lambda: now[0]
    await a.start()
    try:
        await a.rm.leader_and_isr(_lai(a))
        produced = asyncio.ensure_future(a.stub.Produce(produce_req("x", acks=-1,
                                                                    timeout_ms=60_000)))
        await wait_until(lambda: a.lm.get_log(TP).log_end_offset == 5)
        now[0] = 61.0
        a.rm.partitions[TP].hw_moved.notify()  # wake the waiting produce to look again
        resp = await asyncio.wait_for(produced, 10)
        [r] = resp.responses[0].partition_responses
        assert r.error_code == ErrorCode.REQUEST_TIMED_OUT
    finally:
        await a.stop()


async def test_describe_log_dirs_reads_disk_usage_off_the_event_loop(tmp_path, monkeypatch):
    import broker.log_dir_ops as rm_module
    threads = []

    def disk_usage(path):
        threads.append(threading.current_thread())
        return rm_module.shutil._ntuple_diskusage(1000, 600, 400)

    monkeypatch.setattr(rm_module.shutil, "disk_usage", disk_usage)
    a = Node(1, tmp_path)
    await a.start()
    try:
        await a.rm.leader_and_isr(_lai(a))
        resp = await a.stub.DescribeLogDirs(pb.DescribeLogDirsRequest())
        [d] = resp.results
        assert (d.total_bytes, d.usable_bytes, d.error_code) == (1000, 400, 0)
        assert [(t.topic, [p.partition for p in t.partitions]) for t in d.topics] == [("t", [0])]
        assert threads and threading.main_thread() not in threads
    finally:
        await a.stop()


async def test_a_log_dir_failure_is_logged_and_counted_by_the_consumer(tmp_path):
    fo = FaultInjectingFileOps()
    a = Node(1, tmp_path, fileops=fo)
    await a.start()
    consumer = asyncio.ensure_future(a.rm.log_dir_failure_loop())
    try:
        await a.rm.leader_and_isr(_lai(a))
        fo.fail(a.lm.dirs[0].path, errno.EIO, ops={"write"})
        resp = await a.stub.Produce(produce_req("x", acks=1))
        assert resp.responses[0].partition_responses[0].error_code == \
            ErrorCode.KAFKA_STORAGE_ERROR
        await wait_until(lambda: any(e["event"] == "log_dir_failure"
                                     for e in a.events_logged()))
        [event] = [e for e in a.events_logged() if e["event"] == "log_dir_failure"]
        assert event["log_dir"] == a.lm.dirs[0].path and "EIO" in event["error"]
        assert a.rm.metrics.registry.get_sample_value(
            "replog_logdirfailurechannel_failures_total",
            {"logDirectory": a.lm.dirs[0].path}) == 1
    finally:
        consumer.cancel()
        fo.clear()
        await a.stop()


def _lai(node):
    from broker.servicer import leader_and_isr_request
    return leader_and_isr_request(leader_and_isr(node, 1, 0, [1, 2], [1, 2], []))
