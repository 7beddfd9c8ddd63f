"""A broker's exit lets records be retried instead of failing them (issue 42 defect 6).

- grpc.aio reports a unary call on a connection that died under it as INTERNAL ("Internal error
  from Core"); with no Kafka code from a server that is a transport error (Kafka's client sees a
  NetworkException), retriable, on every call - it was UNKNOWN_SERVER_ERROR, not retriable, and
  ``replog produce --acks all`` failed 64 records while a broker halted on its last log dir.
- The producer holds the batches of a broker whose connection broke, without spending their
  retries, until it is connected again or the metadata names a new leader (Kafka's Sender
  drains only for ready nodes), so ``retries=3`` (replog produce's default) outlasts the time
  the controller takes to move the partitions."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from client import Producer
from client.errors import TransportError, from_rpc_error
from client.transport import call
from common.errors import ErrorCode
from common.rpc_status import ERROR_CODE_KEY
from tests.admin.fake_cluster import FakeCluster
from tests.polling import async_wait_until


def _rpc_error(code: grpc.StatusCode, details: str, trailers=()) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(*trailers), details)


@pytest.mark.parametrize("status", [grpc.StatusCode.INTERNAL, grpc.StatusCode.UNAVAILABLE])
def test_a_dying_connection_is_a_retriable_transport_error(status):
    err = from_rpc_error(_rpc_error(status, "Internal error from Core"), "127.0.0.1:1")
    assert isinstance(err, TransportError)
    assert err.retriable and err.invalidates_metadata


def test_a_servers_internal_with_a_kafka_code_keeps_its_code():
    err = from_rpc_error(_rpc_error(grpc.StatusCode.INTERNAL, "boom",
                                    ((ERROR_CODE_KEY, str(int(ErrorCode.UNKNOWN_SERVER_ERROR))),)),
                         "127.0.0.1:1")
    assert not isinstance(err, TransportError)
    assert err.error_code == ErrorCode.UNKNOWN_SERVER_ERROR and not err.retriable


async def test_every_unary_call_raises_it_as_a_transport_error():
    async def dying(_request, timeout):
        raise _rpc_error(grpc.StatusCode.INTERNAL, "Internal error from Core")
    with pytest.raises(TransportError) as e:
        await call(dying, None, "127.0.0.1:1", 1.0)
    assert e.value.retriable


@pytest.fixture
async def fake():
    async with FakeCluster(brokers=3, controllers=1) as fc:
        yield fc


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "unary"])
async def test_batches_for_a_dead_leader_wait_for_the_new_one_with_few_retries(fake, stream):
    fake.state.add_topic("t", 1, 3)
    async with Producer(fake.bootstrap, retries=3, retry_backoff_ms=10,
                        retry_backoff_max_ms=50, produce_stream_enable=stream) as producer:
        await (await producer.send("t", b"a"))
        # broker 1 dies but stays registered (its ZooKeeper session has not expired yet)
        await fake.servers[("broker", 1)].stop(None)
        answered = fake.state.metadata_answers
        futs = [await producer.send("t", b"r%d" % i) for i in range(5)]
        # many retry backoffs' worth of metadata refreshes, still naming broker 1
        await async_wait_until(lambda: fake.state.metadata_answers > answered + 10,
                               timeout=20, what="the producer to keep asking for metadata")
        assert not any(f.done() for f in futs), [f.exception() for f in futs if f.done()]
        fake.state.move_leader("t", 0, 2)  # the controller elects a new leader
        offsets = [(await asyncio.wait_for(f, 10)).offset for f in futs]
    assert offsets == [1, 2, 3, 4, 5]
