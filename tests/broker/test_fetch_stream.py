"""Follower fetch over one long-lived gRPC stream (FetchStream) between in-process brokers on
real gRPC: the stream is what replicates (and the unary path stays selectable), a leader that
does not serve the stream (an older broker in a rolling upgrade) is fetched from with unary
calls, and a stream broken mid-request - the leader's server gone and back - loses and
duplicates nothing: the follower's log ends byte-identical to the leader's."""

from __future__ import annotations

import grpc
import pytest

from common.grpc_options import SERVER_OPTIONS
from common.rpc import replog_pb2_grpc
from tests.broker.inprocess import TP, Node, leader_and_isr, produce_req, wait_until


class _Counter:
    """Which Fetch RPCs the follower's channel made (grpc.aio files an interceptor under one
    kind only, hence one interceptor per kind sharing the list)."""

    def __init__(self):
        self.calls: list[str] = []
        calls = self.calls

        class Unary(grpc.aio.UnaryUnaryClientInterceptor):
            async def intercept_unary_unary(self, continuation, details, request):
                calls.append(_name(details.method))
                return await continuation(details, request)

        class Stream(grpc.aio.StreamStreamClientInterceptor):
            async def intercept_stream_stream(self, continuation, details, request_iterator):
                calls.append(_name(details.method))
                return await continuation(details, request_iterator)

        self.interceptors = [Unary(), Stream()]


def _name(method: bytes | str) -> str:
    return (method.decode() if isinstance(method, bytes) else method).rsplit("/", 1)[-1]


class _OlderBroker:
    """The server an older broker runs: every Broker RPC but FetchStream (a client asking for
    it gets gRPC's UNIMPLEMENTED, "Method not found")."""

    def __init__(self, server):
        self.server = server

    def add_generic_rpc_handlers(self, handlers):
        pass  # registered below, without FetchStream

    def add_registered_method_handlers(self, service, handlers):
        older = {k: v for k, v in handlers.items() if k != "FetchStream"}
        self.server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(service, older),))
        self.server.add_registered_method_handlers(service, older)


def _counted(counter):
    return lambda address, options: grpc.aio.insecure_channel(address, options=options,
                                                              interceptors=counter.interceptors)


async def _restart_server(node: Node, older: bool = False) -> None:
    """The leader's gRPC server stopped and started again on its port (its replica manager
    and logs stay): every connection to it breaks."""
    from broker.servicer import BrokerServicer
    await node.server.stop(0)
    node.server = grpc.aio.server(options=SERVER_OPTIONS)
    target = _OlderBroker(node.server) if older else node.server
    replog_pb2_grpc.add_BrokerServicer_to_server(BrokerServicer(node.rm, node.id), target)
    node.server.add_insecure_port(f"127.0.0.1:{node.port}")
    await node.server.start()


async def _replicate(a: Node, b: Node, batches: int, tag: str) -> None:
    for i in range(batches):
        r = await a.stub.Produce(produce_req(f"{tag}{i}"))
        assert r.responses[0].partition_responses[0].error_code == 0


def _same_logs(a: Node, b: Node) -> bool:
    la, lb = a.lm.get_log(TP), b.lm.get_log(TP)
    return la.log_end_offset == lb.log_end_offset and \
        la.read(0, 1 << 30) == lb.read(0, 1 << 30)


@pytest.mark.parametrize("stream", [True, False])
async def test_followers_replicate_over_the_stream_or_unary_as_configured(tmp_path, stream):
    counter = _Counter()
    a = Node(1, tmp_path)
    b = Node(2, tmp_path, channel_factory=_counted(counter),
             overrides=[("replica.fetch.stream.enable", str(stream).lower())])
    nodes = [a, b]
    for n in nodes:
        await n.start()
    try:
        for n in nodes:
            await n.stub.LeaderAndIsr(leader_and_isr(n, 1, 0, [1, 2], [1, 2], nodes))
        await _replicate(a, b, 5, "s")  # acks=all: each completes once b fetched it
        assert _same_logs(a, b)
        fetches = [c for c in counter.calls if c.startswith("Fetch")]
        if stream:
            assert fetches == ["FetchStream"]  # one stream carried every fetch
        else:
            assert set(fetches) == {"Fetch"} and len(fetches) >= 5
    finally:
        for n in nodes:
            await n.stop()


async def test_an_older_leader_without_the_stream_is_fetched_from_with_unary_calls(tmp_path):
    counter = _Counter()
    a, b = Node(1, tmp_path), Node(2, tmp_path, channel_factory=_counted(counter))
    nodes = [a, b]
    for n in nodes:
        await n.start()
    try:
        await _restart_server(a, older=True)
        for n in nodes:
            await n.stub.LeaderAndIsr(leader_and_isr(n, 1, 0, [1, 2], [1, 2], nodes))
        await _replicate(a, b, 3, "old")
        assert _same_logs(a, b)
        fetches = [c for c in counter.calls if c.startswith("Fetch")]
        assert fetches[0] == "FetchStream" and set(fetches[1:]) == {"Fetch"}
        assert any(e["event"] == "fetch_stream_unsupported" for e in b.events_logged())
    finally:
        for n in nodes:
            await n.stop()


async def test_a_stream_broken_mid_request_loses_and_duplicates_nothing(tmp_path):
    counter = _Counter()
    a, b = Node(1, tmp_path), Node(2, tmp_path, channel_factory=_counted(counter))
    nodes = [a, b]
    for n in nodes:
        await n.start()
    try:
        for n in nodes:
            await n.stub.LeaderAndIsr(leader_and_isr(n, 1, 0, [1, 2], [1, 2], nodes))
        await _replicate(a, b, 3, "before")
        # b's stream holds a parked fetch (nothing new to read) when the leader's server goes
        for _ in range(3):
            await _restart_server(a)
            a.channel = grpc.aio.insecure_channel(f"127.0.0.1:{a.port}")
            a.stub = replog_pb2_grpc.BrokerStub(a.channel)
            await _replicate(a, b, 2, f"after{_}")
        await wait_until(lambda: _same_logs(a, b))
        assert a.lm.get_log(TP).log_end_offset == 45  # 9 batches of 5, each appended once
        assert counter.calls.count("FetchStream") >= 2  # the stream was reopened
        assert any(e["event"] == "fetch_failed" for e in b.events_logged())
    finally:
        for n in nodes:
            await n.stop()


async def test_the_transport_switches_at_runtime_with_a_fetch_in_flight(tmp_path):
    """replica.fetch.stream.enable is a dynamic broker config (the benchmark's A/B on one
    cluster): switched while the follower's fetch is parked on the leader, replication goes on
    over the other transport and nothing is lost or doubled."""
    counter = _Counter()
    a, b = Node(1, tmp_path), Node(2, tmp_path, channel_factory=_counted(counter))
    nodes = [a, b]
    for n in nodes:
        await n.start()
    try:
        for n in nodes:
            await n.stub.LeaderAndIsr(leader_and_isr(n, 1, 0, [1, 2], [1, 2], nodes))
        await _replicate(a, b, 2, "stream")
        for enable, tag in [(False, "unary"), (True, "again")]:
            b.rm.apply_broker_config({"replica.fetch.stream.enable": str(enable).lower()})
            await _replicate(a, b, 2, tag)
        await wait_until(lambda: _same_logs(a, b))
        assert a.lm.get_log(TP).log_end_offset == 30
        fetches = [c for c in counter.calls if c.startswith("Fetch")]
        assert fetches[0] == "FetchStream" and "Fetch" in fetches
        assert fetches[-1] == "FetchStream" and fetches.count("FetchStream") == 2
        assert all(t.done() is False for t in (f.task for f in
                                                b.rm.fetcher_manager.fetchers.values()))
    finally:
        for n in nodes:
            await n.stop()
