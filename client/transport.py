"""gRPC channels to brokers and controllers, one per address, shared by a client's parts.

Channel options (common/grpc_options.py, CLIENT_OPTIONS) matter for fault handling: gRPC's
default reconnect backoff grows to 120 s, so a client that saw a broker die would not notice it
coming back for minutes; it is capped at 1 s. Calls never use wait_for_ready: a dead broker
fails the call at once (UNAVAILABLE), and the producer/consumer move on to another leader after
a metadata refresh.

Security: a pool opens its channels with the ChannelFactory it is given, or else with the
process's default one - plaintext, or TLS once ``set_default_channel_factory`` was called
(``replog ... --command-config FILE`` with ``security.protocol=SSL``: admin/cli.py), so every
client a command builds speaks TLS without each command knowing of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import grpc
import grpc.aio

from client.errors import KafkaError, TransportError, from_rpc_error
from common.grpc_options import CLIENT_OPTIONS, ChannelFactory, insecure_channel
from common.rpc import replog_pb2 as pb
from common.rpc import replog_pb2_grpc

_log = logging.getLogger(__name__)


def parse_address(text: str) -> str:
    """Normalise ``host:port`` (a ``PLAINTEXT://`` prefix is accepted and dropped)."""
    addr = text.strip().split("://", 1)[-1]
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"invalid server address {text!r}: expected host:port")
    return f"{host}:{int(port)}"


def parse_bootstrap_servers(text: str | list[str] | tuple[str, ...]) -> list[str]:
    items = text.split(",") if isinstance(text, str) else list(text)
    out = [parse_address(x) for x in items if x.strip()]
    if not out:
        raise ValueError("no bootstrap server given (expected host:port[,host:port...])")
    return out


_default_channel_factory: ChannelFactory = insecure_channel


def set_default_channel_factory(factory: ChannelFactory | None) -> None:
    """The factory of pools made without one from now on (None: plaintext again)."""
    global _default_channel_factory
    _default_channel_factory = factory or insecure_channel


def default_channel_factory() -> ChannelFactory:
    return _default_channel_factory


class ChannelPool:
    """Lazily opened grpc.aio channels and stubs by address. Close it when done.
    ``channel_factory`` is the transport seam (common.grpc_options.ChannelFactory): tests pass
    one that adds client interceptors to watch the calls made."""

    def __init__(self, channel_factory: ChannelFactory | None = None) -> None:
        self._channel_factory = channel_factory or _default_channel_factory
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._broker_stubs: dict[str, replog_pb2_grpc.BrokerStub] = {}
        self._controller_stubs: dict[str, replog_pb2_grpc.ControllerStub] = {}

    def channel(self, address: str) -> grpc.aio.Channel:
        ch = self._channels.get(address)
        if ch is None:
            ch = self._channels[address] = self._channel_factory(address, CLIENT_OPTIONS)
        return ch

    def broker(self, address: str) -> replog_pb2_grpc.BrokerStub:
        stub = self._broker_stubs.get(address)
        if stub is None:
            stub = self._broker_stubs[address] = replog_pb2_grpc.BrokerStub(self.channel(address))
        return stub

    def controller(self, address: str) -> replog_pb2_grpc.ControllerStub:
        stub = self._controller_stubs.get(address)
        if stub is None:
            stub = self._controller_stubs[address] = replog_pb2_grpc.ControllerStub(
                self.channel(address))
        return stub

    async def close(self) -> None:
        channels = list(self._channels.values())
        self._channels.clear()
        self._broker_stubs.clear()
        self._controller_stubs.clear()
        for ch in channels:
            await ch.close()


async def call(method, request, address: str, timeout_s: float):
    """Invoke a unary RPC; a failure is raised as a KafkaError (TransportError if no answer)."""
    try:
        return await method(request, timeout=timeout_s)
    except grpc.RpcError as e:
        raise from_rpc_error(e, address) from None


# How long a failed write waits for its call's status (the call is ending: it comes at once).
_STATUS_WAIT_S = 1.0


def _status(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    """A stream failure as the status a unary call would have ended with."""
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details)


class _Failed(Exception):
    """A stream failure already handled (the stream broken with ``err``) under the write lock."""

    def __init__(self, err: grpc.aio.AioRpcError) -> None:
        super().__init__(err)
        self.err = err


class _OpenStream:
    """One opened Broker.ProduceStream call: its requests awaiting an answer, by correlation id
    (Kafka's InFlightRequests for one connection), and the task reading its answers."""

    __slots__ = ("call", "reader", "serving", "waiting", "write_lock")

    def __init__(self, call: grpc.aio.StreamStreamCall) -> None:
        self.call = call
        self.waiting: dict[int, asyncio.Future] = {}
        self.serving = False  # the broker's headers came: it serves the stream
        # gRPC takes one message write at a time on a call; asyncio's lock is FIFO, so
        # requests go out in the order their senders asked (the producer's drain order).
        self.write_lock = asyncio.Lock()
        self.reader: asyncio.Task | None = None


def _broken(e: grpc.aio.AioRpcError) -> grpc.aio.AioRpcError:
    """The failure a stream's requests see. grpc.aio reports a message op on a call that has
    just ended as INTERNAL ("Internal error from Core"), the real status lost: that is a
    broken stream, so a transport error (retried), not a server error."""
    if e.code() == grpc.StatusCode.INTERNAL:
        return _status(grpc.StatusCode.UNAVAILABLE, f"the produce stream broke ({e.details()})")
    return e


def _forget(s: _OpenStream, cid: int, answer: asyncio.Future) -> None:
    """Stop waiting for request ``cid``'s ``answer`` (a failure is raised otherwise): a
    failure already set on it (a broken stream fails every request on it) is marked seen, or
    asyncio would log it as never retrieved."""
    s.waiting.pop(cid, None)
    if answer.done() and not answer.cancelled():
        answer.exception()


class ProduceStream:
    """A producer's long-lived Broker.ProduceStream to one broker (Kafka's NetworkClient
    connection): each request is written with a fresh correlation id while earlier ones are
    still unanswered (the producer keeps at most max.in.flight.requests.per.connection in
    flight per broker), and each answer completes the request with its id, in whatever order
    they come.

    Failures are a unary call's: ``produce`` raises a KafkaError (TransportError when no
    answer came). A broken stream - the broker gone, the stream reset, an answer missing
    after the request timeout (NetworkClient then closes the connection) - fails every
    request in flight on it as a transport error, so the producer's retry rules apply to
    each; the next request opens a new stream. A broker that answers UNIMPLEMENTED (an older
    broker in a rolling upgrade) gets unary Produce calls from then on, until a call to it
    fails for want of a connection: it may come back upgraded, and Kafka's client too asks
    a broker which APIs it serves on every new connection (ApiVersions)."""

    def __init__(self, pool: ChannelPool, address: str) -> None:
        self.pool = pool
        self.address = address
        self.unary_only = False
        self._stream: _OpenStream | None = None
        self._next_id = 0

    async def produce(self, request: pb.ProduceStreamRequest, timeout_s: float
                      ) -> pb.ProduceResponse:
        """Send ``request.request`` (the correlation id is set here) and return its answer."""
        if self.unary_only:
            return await self._unary(request.request, timeout_s)
        try:
            answer = await self._exchange(request, timeout_s)
        except grpc.aio.AioRpcError as e:
            if e.code() != grpc.StatusCode.UNIMPLEMENTED:
                raise from_rpc_error(e, self.address) from None
            # Method not found: the broker served none of the requests on the stream, so
            # each goes again as a unary call (no duplicate).
            if not self.unary_only:
                self.unary_only = True
                _log.info("broker %s does not serve ProduceStream: unary Produce calls",
                          self.address)
            return await self._unary(request.request, timeout_s)
        if answer.error_code:
            # What a unary Produce would have failed with (a status with the Kafka code).
            raise KafkaError(answer.error_code, answer.error_message)
        return answer.response

    async def _unary(self, request: pb.ProduceRequest, timeout_s: float) -> pb.ProduceResponse:
        try:
            return await call(self.pool.broker(self.address).Produce, request, self.address,
                              timeout_s)
        except TransportError as e:
            if e.status == grpc.StatusCode.UNAVAILABLE:
                self.unary_only = False  # ask for the stream again on the next connection
            raise

    def _open(self) -> _OpenStream:
        s = self._stream = _OpenStream(self.pool.broker(self.address).ProduceStream())
        s.reader = asyncio.create_task(self._read(s), name=f"produce-stream-{self.address}")
        return s

    async def _exchange(self, request: pb.ProduceStreamRequest, timeout_s: float
                        ) -> pb.ProduceStreamResponse:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        s = self._stream or self._open()
        cid = request.correlation_id = self._next_id
        self._next_id = (cid + 1) & 0x7FFFFFFF  # Kafka's correlation ids wrap at 2^31
        answer = loop.create_future()
        s.waiting[cid] = answer
        try:
            async with s.write_lock:
                if answer.done():  # the stream broke while this request waited to be written
                    return answer.result()
                try:
                    if not s.serving:
                        await self._handshake(s, deadline - loop.time())
                    await s.call.write(request)
                except (grpc.aio.AioRpcError, asyncio.InvalidStateError) as e:
                    # Broken while the lock is held: the requests queued behind this one then
                    # find their answers failed, instead of writing (or going unary) before
                    # it while its failure is looked into - they keep their order.
                    if answer.done() and not answer.cancelled() and \
                            answer.exception() is not None:
                        err = answer.exception()  # the reader saw the stream end first
                    else:
                        err = await self._write_failure(s, e)
                    _forget(s, cid, answer)
                    self._break(s, err)
                    raise _Failed(err) from None
        except _Failed as f:
            raise f.err from None
        except TimeoutError:
            _forget(s, cid, answer)
            self._break(s, _status(grpc.StatusCode.UNAVAILABLE, "the produce stream was "
                                   "closed: the broker did not answer its opening"))
            raise _status(grpc.StatusCode.DEADLINE_EXCEEDED, "no answer to the produce "
                          "stream's opening within the request timeout") from None
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError) as e:
            _forget(s, cid, answer)  # its answer failed while it waited for the lock
            err = await self._ended(s) if isinstance(e, asyncio.InvalidStateError) \
                else _broken(e)
            self._break(s, err)
            raise err from None
        except BaseException:  # cancelled: gRPC cancels the whole call under a cancelled
            _forget(s, cid, answer)  # write, so the stream goes
            self._break(s, _status(grpc.StatusCode.CANCELLED, "a request was abandoned "
                                   "while it was being written"))
            raise
        if answer.done():
            return answer.result()
        try:
            return await asyncio.wait_for(answer, max(0.0, deadline - loop.time()))
        except TimeoutError:
            # NetworkClient.handleTimedOutRequests: a request unanswered within the request
            # timeout closes its connection, failing everything in flight on it.
            self._break(s, _status(grpc.StatusCode.UNAVAILABLE, f"the produce stream was "
                                   f"closed: request {cid} got no answer in {timeout_s:g} s"))
            raise _status(grpc.StatusCode.DEADLINE_EXCEEDED, "no answer on the produce "
                          "stream within the request timeout") from None
        except asyncio.CancelledError:
            _forget(s, cid, answer)  # its answer, if one comes, is dropped
            raise

    async def _write_failure(self, s: _OpenStream, e: BaseException) -> grpc.aio.AioRpcError:
        """Why a write failed. A write racing with the call's end reports INTERNAL ("Internal
        error from Core") or InvalidStateError, the call's real status lost; the call knows
        it: an older broker's UNIMPLEMENTED, seen here when its answer came just after the
        headers, must reach ``produce`` (which then goes unary) - as a transport error the
        request would wait out retry.backoff.ms instead. A call that does not end within a
        moment is a broken stream."""
        try:
            code = await asyncio.wait_for(asyncio.shield(s.call.code()), _STATUS_WAIT_S)
        except (TimeoutError, grpc.aio.AioRpcError, asyncio.InvalidStateError):
            code = None
        if code is not None and code != grpc.StatusCode.OK:
            return _status(code, await s.call.details() or "")
        if isinstance(e, grpc.aio.AioRpcError):
            return _broken(e)
        return _status(grpc.StatusCode.UNAVAILABLE, "the broker ended the produce stream")

    async def _handshake(self, s: _OpenStream, timeout_s: float) -> None:
        """Wait for the broker's response headers before the first write. A broker that serves
        the stream sends them at once (BrokerServicer.ProduceStream); one that does not answers
        the call UNIMPLEMENTED instead, so no request is written to it - a write racing with
        that answer would fail with the status lost (see _exchange) - and the requests queued
        behind this one go unary in their order. Kafka's client likewise asks a broker which
        APIs it serves (ApiVersions) on a new connection before sending it anything else."""
        await asyncio.wait_for(s.call.initial_metadata(), max(0.0, timeout_s))
        if s.call.done():
            raise await self._ended(s)  # the caller breaks the stream with it
        s.serving = True

    async def _read(self, s: _OpenStream) -> None:
        try:
            while True:
                msg = await s.call.read()
                if msg is grpc.aio.EOF:
                    err = await self._ended(s)
                    break
                answer = s.waiting.pop(msg.correlation_id, None)
                if answer is not None and not answer.done():
                    answer.set_result(msg)
        except grpc.aio.AioRpcError as e:
            err = _broken(e)
        except asyncio.CancelledError:
            self._break(s, _status(grpc.StatusCode.CANCELLED, "the produce stream was closed"))
            raise
        self._break(s, err)

    async def _ended(self, s: _OpenStream) -> grpc.aio.AioRpcError:
        """The status of a stream that ended (an answer stream that ends is a broken
        stream even with status OK: requests were left unanswered)."""
        code = await s.call.code()
        if code == grpc.StatusCode.OK:
            return _status(grpc.StatusCode.UNAVAILABLE, "the broker ended the produce stream")
        return _status(code, await s.call.details() or "")

    def _break(self, s: _OpenStream, err: grpc.aio.AioRpcError) -> None:
        if self._stream is s:
            self._stream = None
        waiting, s.waiting = s.waiting, {}
        for answer in waiting.values():
            if not answer.done():
                answer.set_exception(err)
        s.call.cancel()
        if s.reader is not None and s.reader is not asyncio.current_task():
            s.reader.cancel()

    async def close(self) -> None:
        s = self._stream
        if s is not None:
            self._break(s, _status(grpc.StatusCode.CANCELLED, "the producer closed"))
            if s.reader is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):  # closing
                    await s.reader
