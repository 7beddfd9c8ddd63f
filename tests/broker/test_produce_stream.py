"""Produce over one long-lived gRPC stream per broker (Broker.ProduceStream): the real Producer
against in-process brokers on real gRPC. Requests are pipelined on one stream (several in
flight, answers matched by correlation id), records land in order per partition, a stream
broken under requests in flight (the broker's server restarted) loses no acknowledged record
and duplicates only the batches that were retried, a broker without the stream (an older one
in a rolling upgrade) gets unary calls, and ``produce_stream_enable=False`` keeps the unary
path for the A/B. The broker answers each message as a unary Produce (refusals in the answer,
answers as they complete)."""

from __future__ import annotations

import asyncio
from collections import Counter

import grpc
import pytest

from client import Producer
from client.transport import ChannelPool
from common.errors import ErrorCode
from common.grpc_options import SERVER_OPTIONS
from common.names import TopicPartition
from common.records import decode_all
from common.rpc import replog_pb2 as pb
from common.rpc import replog_pb2_grpc
from common.rpc_status import error_code_of
from tests.broker.inprocess import Node, leader_and_isr, produce_req, wait_until

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


class _Watch:
    """The Produce RPCs a client's channels made, per broker address, seen through client
    interceptors: unary calls, ProduceStream opens, the messages written on each stream and
    the answers read, and the most requests a stream had unanswered at once."""

    def __init__(self):
        self.calls: list[tuple[str, str]] = []  # (address, method)
        self.written = 0
        self.answered = 0
        self.max_in_flight = 0

    def in_flight(self) -> int:
        return self.written - self.answered

    def count(self, address: str, method: str) -> int:
        return self.calls.count((address, method))

    def factory(self, address, options):
        watch = self

        class Unary(grpc.aio.UnaryUnaryClientInterceptor):
            async def intercept_unary_unary(self, continuation, details, request):
                watch.calls.append((address, _name(details.method)))
                return await continuation(details, request)

        class Stream(grpc.aio.StreamStreamClientInterceptor):
            async def intercept_stream_stream(self, continuation, details, request_iterator):
                watch.calls.append((address, _name(details.method)))

                async def written(requests):
                    async for r in requests:
                        watch.written += 1
                        watch.max_in_flight = max(watch.max_in_flight, watch.in_flight())
                        yield r

                call = await continuation(details, written(request_iterator))

                async def answered():
                    async for a in call:
                        watch.answered += 1
                        yield a

                return answered()

        return grpc.aio.insecure_channel(address, options=list(options),
                                         interceptors=[Unary(), Stream()])


def _name(method: bytes | str) -> str:
    return (method.decode() if isinstance(method, bytes) else method).rsplit("/", 1)[-1]


class _Without:
    """The server of an older broker: every Broker RPC but ``missing`` (a client asking for it
    gets gRPC's UNIMPLEMENTED)."""

    def __init__(self, server, missing: str):
        self.server, self.missing = server, missing

    def add_generic_rpc_handlers(self, handlers):
        pass  # registered below, without the missing RPC

    def add_registered_method_handlers(self, service, handlers):
        older = {k: v for k, v in handlers.items() if k != self.missing}
        self.server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(service, older),))
        self.server.add_registered_method_handlers(service, older)


async def _serve(node: Node, older: bool = False, restart: bool = True) -> None:
    """(Re)start ``node``'s gRPC server on its port, as an older broker without ProduceStream
    if ``older``; its replica manager and logs stay, every connection to it breaks."""
    from broker.servicer import BrokerServicer
    if restart:
        await node.server.stop(0)
    node.server = grpc.aio.server(options=SERVER_OPTIONS)
    target = _Without(node.server, "ProduceStream") if older else node.server
    replog_pb2_grpc.add_BrokerServicer_to_server(BrokerServicer(node.rm, node.id), target)
    node.server.add_insecure_port(f"127.0.0.1:{node.port}")
    await node.server.start()


def _address(node: Node) -> str:
    return f"127.0.0.1:{node.port}"


async def _metadata(nodes: list[Node], replicas: dict[TopicPartition, list[int]]) -> None:
    """The controller's UpdateMetadata, by hand (each partition led by its first replica,
    every replica in the ISR): what the producer's Metadata calls read."""
    for n in nodes:
        await n.stub.UpdateMetadata(pb.UpdateMetadataRequest(
            controller_id=0, controller_epoch=1, broker_epoch=n.rm.broker_epoch,
            live_brokers=[m.endpoint() for m in nodes],
            partition_states=[pb.UpdateMetadataPartitionState(
                topic=tp.topic, partition=tp.partition, leader=rs[0], leader_epoch=0, isr=rs,
                replicas=rs, partition_epoch=0) for tp, rs in replicas.items()]))


async def _lead(node: Node, tp: TopicPartition, replicas: list[int], nodes: list[Node],
                leader: int = 1) -> None:
    r = await node.stub.LeaderAndIsr(leader_and_isr(node, leader, 0, replicas, replicas, nodes,
                                                    tp=tp))
    assert all(e.error_code == 0 for e in r.partition_errors)


def _producer(node: Node, watch: _Watch, **settings) -> Producer:
    """The producer of these tests, its channels watched: acks=all, batches of a few records
    (several per partition), up to 5 requests in flight per broker."""
    return Producer(_address(node), pool=ChannelPool(watch.factory), **{
        "acks": "all", "batch_size": 120, "linger_ms": 0,
        "max_in_flight_requests_per_connection": 5, "request_timeout_ms": 30000,
        "retry_backoff_ms": 20, **settings})


def _log_values(node: Node, tp: TopicPartition) -> list[tuple[int, bytes]]:
    """(offset, value) of every record in ``node``'s log of ``tp``."""
    return [(r.offset, r.value) for r in decode_all(node.lm.get_log(tp).read(0, 1 << 30))]


@pytest.mark.parametrize("stream", [True, False])
async def test_requests_are_pipelined_on_one_stream_and_land_in_order(nodes, stream):
    """acks=all to t-0 led by 1 with ISR [1, 2], its follower 2 not yet told: every request
    waits for the ISR, so the producer's max.in.flight requests pile up unanswered - on one
    stream - until 2 starts fetching; then each is acknowledged, in send order."""
    a, b = nodes
    await _lead(a, T0, [1, 2], nodes)
    await _metadata(nodes, {T0: [1, 2]})
    watch = _Watch()
    producer = _producer(a, watch, produce_stream_enable=stream)
    try:
        futs = [await producer.send("t", b"v%03d" % i, partition=0) for i in range(60)]
        if stream:
            await wait_until(lambda: watch.in_flight() >= 5, what="5 requests unanswered")
        else:
            await wait_until(lambda: watch.count(_address(a), "Produce") >= 5,
                             what="5 unary calls")
        await _lead(b, T0, [1, 2], nodes)  # the follower fetches: the HW moves
        offsets = [(await f).offset for f in futs]
    finally:
        await producer.close()
        await producer.pool.close()
    assert offsets == list(range(60))  # acknowledged in send order, each once
    assert _log_values(a, T0) == [(i, b"v%03d" % i) for i in range(60)]
    produce_calls = [m for _, m in watch.calls if m.startswith("Produce")]
    if stream:
        assert produce_calls == ["ProduceStream"]  # one stream carried every request
        assert watch.max_in_flight == 5 and watch.written >= 12  # batches of <= 120 bytes
        assert watch.answered == watch.written
    else:
        assert set(produce_calls) == {"Produce"} and len(produce_calls) >= 12


async def test_a_server_restarted_under_requests_in_flight_loses_no_acknowledged_record(nodes):
    """t-0 (both replicas told) takes 20 records, acknowledged; then t-1's follower is not
    told, so 30 records to t-1 wait in flight on the stream (appended, unacknowledged) when
    the leader's server restarts. The requests fail as transport errors and are retried on a
    new stream; 20 more records go to t-0 meanwhile. Every record is acknowledged; each
    acknowledged one is in the log at its offset; t-0 (no retry) holds each record once, in
    order; t-1 holds each at least once and at most twice (a retried batch that had been
    appended, as Kafka without idempotence)."""
    a, b = nodes
    for n in nodes:
        await _lead(n, T0, [1, 2], nodes)
    await _lead(a, T1, [1, 2], nodes)
    await _metadata(nodes, {T0: [1, 2], T1: [1, 2]})
    watch = _Watch()
    producer = _producer(a, watch)
    try:
        first = [await producer.send("t", b"a%03d" % i, partition=0) for i in range(20)]
        await asyncio.gather(*first)
        parked = [await producer.send("t", b"p%03d" % i, partition=1) for i in range(30)]
        await wait_until(lambda: watch.in_flight() >= 5, what="t-1 requests in flight")
        written_before = watch.written
        await _serve(a)  # every connection to it breaks, the stream with them
        later = [await producer.send("t", b"b%03d" % i, partition=0) for i in range(20)]
        await wait_until(lambda: watch.count(_address(a), "ProduceStream") >= 2,
                         what="the stream reopened")
        await _lead(b, T1, [1, 2], nodes)
        acked = {}
        for i, f in enumerate(parked):
            acked[b"p%03d" % i] = (await f).offset
        for i, f in enumerate(first + later):
            acked[(b"a%03d" if i < 20 else b"b%03d") % (i % 20)] = (await f).offset
    finally:
        await producer.close()
        await producer.pool.close()
    assert written_before >= 5
    t0, t1 = _log_values(a, T0), _log_values(a, T1)
    assert [v for _, v in t0] == [b"a%03d" % i for i in range(20)] + \
        [b"b%03d" % i for i in range(20)]
    logs = {T0: dict(t0), T1: dict(t1)}
    for value, offset in acked.items():
        tp = T1 if value.startswith(b"p") else T0
        assert logs[tp].get(offset) == value, (value, offset)
    copies = Counter(v for _, v in t1)
    assert set(copies) == {b"p%03d" % i for i in range(30)}
    assert max(copies.values()) <= 2


async def test_an_older_broker_without_the_stream_gets_unary_calls(nodes):
    """Mixed versions in one cluster: broker 1 predates ProduceStream (t-0's leader), broker 2
    serves it (t-1's leader). The producer's first stream to 1 is answered UNIMPLEMENTED
    before any request is written on it - they go as unary calls, in order - and 1 gets unary
    calls from then on, while 2 keeps its stream. Once a call to 1 failed for want of a connection
    (it went down to be upgraded), the producer asks it for the stream again."""
    a, b = nodes
    await _serve(a, older=True)
    await _lead(a, T0, [1], nodes, leader=1)
    await _lead(b, T1, [2], nodes, leader=2)
    await _metadata(nodes, {T0: [1], T1: [2]})
    watch = _Watch()
    producer = _producer(a, watch)
    try:
        futs = [await producer.send("t", b"v%03d" % i, partition=i % 2) for i in range(60)]
        offsets = [(await f).offset for f in futs]
        assert watch.count(_address(a), "ProduceStream") == 1
        assert watch.count(_address(a), "Produce") >= 6
        assert watch.count(_address(b), "ProduceStream") == 1
        assert watch.count(_address(b), "Produce") == 0

        # broker 1 is upgraded: down (a call to it fails), then back serving the stream
        await a.server.stop(0)
        calls = watch.count(_address(a), "Produce")
        more = [await producer.send("t", b"w%03d" % i, partition=0) for i in range(10)]
        await wait_until(lambda: watch.count(_address(a), "Produce") > calls,
                         what="a call to the stopped broker")
        await _serve(a, restart=False)
        unary_calls = watch.count(_address(a), "Produce")
        more_offsets = [(await f).offset for f in more]
        # the failed call made the producer ask for the stream again: no unary call since
        assert watch.count(_address(a), "Produce") == unary_calls
    finally:
        await producer.close()
        await producer.pool.close()
    assert offsets == [i // 2 for i in range(60)]
    assert watch.count(_address(a), "ProduceStream") >= 2
    t0 = _log_values(a, T0)
    assert t0[:30] == [(i, b"v%03d" % (2 * i)) for i in range(30)]
    # retried after the failed calls (never appended): each once, in any order as in Kafka
    # without idempotence, each at the offset it was acknowledged with
    assert sorted(v for _, v in t0[30:]) == [b"w%03d" % i for i in range(10)]
    assert [dict(t0)[o] for o in more_offsets] == [b"w%03d" % i for i in range(10)]
    assert _log_values(b, T1) == [(i, b"v%03d" % (2 * i + 1)) for i in range(30)]


async def test_the_broker_answers_by_correlation_id_as_requests_complete(nodes):
    """On the wire: an acks=all request waiting for the ISR does not hold up an acks=1
    request written after it - its answer comes first, each tagged with its request's id - and
    a request a unary Produce would refuse is refused in its answer while the stream goes on."""
    a, b = nodes
    await _lead(a, T0, [1, 2], nodes)  # 2 not told: acks=all to t-0 waits
    call = a.stub.ProduceStream()
    try:
        await call.write(pb.ProduceStreamRequest(correlation_id=7, request=produce_req(
            "all", acks=-1, timeout_ms=30000)))
        await call.write(pb.ProduceStreamRequest(correlation_id=8, request=produce_req(
            "one", acks=1)))
        first = await call.read()
        assert first.correlation_id == 8 and first.error_code == 0
        assert first.response.responses[0].partition_responses[0].base_offset == 5
        bad = produce_req("bad", acks=1)
        bad.topic_data[0].partition_data[0].partition = -1
        await call.write(pb.ProduceStreamRequest(correlation_id=9, request=bad))
        refused = await call.read()
        assert (refused.correlation_id, refused.error_code) == (9, ErrorCode.INVALID_REQUEST)
        assert refused.error_message == "partition -1 of t is negative"
        with pytest.raises(grpc.aio.AioRpcError) as unary:  # the unary call's refusal
            await a.stub.Produce(bad)
        assert unary.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert unary.value.details() == refused.error_message
        assert error_code_of(unary.value) == ErrorCode.INVALID_REQUEST
        await call.write(pb.ProduceStreamRequest(correlation_id=10, request=produce_req(
            "acks", acks=2)))
        refused = await call.read()
        assert (refused.correlation_id, refused.error_code) == \
            (10, ErrorCode.INVALID_REQUIRED_ACKS)
        await _lead(b, T0, [1, 2], nodes)
        last = await call.read()
        assert last.correlation_id == 7 and last.error_code == 0
        assert last.response.responses[0].partition_responses[0].base_offset == 0
        await call.done_writing()
        assert await call.read() is grpc.aio.EOF
        assert await call.code() == grpc.StatusCode.OK
    finally:
        call.cancel()
    assert a.lm.get_log(T0).log_end_offset == 10


def test_replog_produce_selects_the_transport_with_produce_stream_enable():
    """``replog produce --producer-property produce.stream.enable=false`` (the A/B baseline):
    a Kafka boolean, anything else refused with one line."""
    from admin.produce_cmd import producer_kwargs
    from common.errors import ReplogError
    assert producer_kwargs({"produce.stream.enable": "FALSE"}) == {"produce_stream_enable": False}
    assert producer_kwargs({"produce.stream.enable": "true"}) == {"produce_stream_enable": True}
    with pytest.raises(ReplogError, match="Invalid value 'no' for producer property "
                                          "'produce.stream.enable'"):
        producer_kwargs({"produce.stream.enable": "no"})
