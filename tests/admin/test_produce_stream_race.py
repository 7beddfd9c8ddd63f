"""The producer's stream to a broker that does not serve ProduceStream (an older broker in a
rolling upgrade), when that broker's UNIMPLEMENTED answer races the first write: the headers
come, the call is not done yet, and the write fails as grpc.aio reports it then - INTERNAL,
the real status lost. The request must still go unary at once; reported as a broken stream it
waited out retry.backoff.ms (the KIP-951 producer test timed out that way in a full run).

The race cannot be produced on demand with a real server, so the call is a stand-in with
grpc.aio's StreamStreamCall interface; tests/broker/test_produce_stream.py runs the real
older broker."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from client.transport import ProduceStream
from common.rpc import replog_pb2 as pb


def _rpc_error(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details)


class _RacingCall:
    def __init__(self, write_error: BaseException) -> None:
        self.write_error = write_error
        self.cancelled = False

    async def initial_metadata(self):
        return grpc.aio.Metadata()

    def done(self) -> bool:
        return False  # not yet, when the handshake looks

    async def write(self, _request) -> None:
        raise self.write_error

    async def read(self):
        await asyncio.sleep(3600)  # the answer never comes on the stream

    async def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNIMPLEMENTED

    async def details(self) -> str:
        return "Method not found!"

    def cancel(self) -> None:
        self.cancelled = True


class _Broker:
    def __init__(self, write_error: BaseException) -> None:
        self.write_error = write_error
        self.unary: list[pb.ProduceRequest] = []

    def ProduceStream(self):
        return _RacingCall(self.write_error)

    async def Produce(self, request, timeout):
        self.unary.append(request)
        return pb.ProduceResponse()


class _Pool:
    def __init__(self, broker: _Broker) -> None:
        self.stub = broker

    def broker(self, _address: str) -> _Broker:
        return self.stub


@pytest.mark.parametrize("write_error", [
    _rpc_error(grpc.StatusCode.INTERNAL, "Internal error from Core"),
    asyncio.InvalidStateError("the call has finished"),
], ids=["internal", "invalid-state"])
async def test_unimplemented_racing_the_first_write_goes_unary_at_once(write_error):
    broker = _Broker(write_error)
    stream = ProduceStream(_Pool(broker), "older-broker:9092")
    request = pb.ProduceStreamRequest(request=pb.ProduceRequest(acks=-1, timeout_ms=1234))
    answer = await stream.produce(request, timeout_s=5.0)
    assert answer == pb.ProduceResponse()
    assert [r.timeout_ms for r in broker.unary] == [1234]  # sent once, unary
    assert stream.unary_only  # and the next requests go unary too
    await stream.close()
