"""Request sizes are bounded: every gRPC server refuses a request larger than
``socket.request.max.bytes`` (Kafka's SocketServer bound; RESOURCE_EXHAUSTED here), the same
property that bounds the Kafka listener's frames (broker/kafka_listener.py, fuzzed in
tests/kafka/test_kafka_fuzz.py). message.max.bytes is tested with the produce path in
tests/security/test_fuzz_records.py."""
from __future__ import annotations

import grpc
import grpc.aio
import pytest

from common.config import build_config
from common.grpc_options import DEFAULT_MAX_REQUEST_BYTES, server_options
from common.listener_servers import bind_listeners
from common.listeners import listener_config

_METHOD = "/replog.test.Echo/Call"


def _echo_handler() -> grpc.GenericRpcHandler:
    async def call(request: bytes, context) -> bytes:
        return len(request).to_bytes(8, "big")
    return grpc.method_handlers_generic_handler(
        "replog.test.Echo", {"Call": grpc.unary_unary_rpc_method_handler(call)})


async def _send(max_bytes: int | None, size: int) -> int:
    entries = {"listeners": "PLAINTEXT://127.0.0.1:0"}
    if max_bytes is not None:
        entries["socket.request.max.bytes"] = str(max_bytes)
    cfg = build_config([(k, v, "test") for k, v in entries.items()])
    (bound,) = bind_listeners(listener_config(cfg).listeners, cfg)
    bound.server.add_generic_rpc_handlers((_echo_handler(),))
    await bound.server.start()
    try:
        async with grpc.aio.insecure_channel(
                f"127.0.0.1:{bound.port}",
                options=[("grpc.max_send_message_length", -1)]) as ch:
            got = await ch.unary_unary(_METHOD)(b"x" * size, timeout=10)
            return int.from_bytes(got, "big")
    finally:
        await bound.server.stop(0)


async def test_a_request_above_socket_request_max_bytes_is_refused():
    assert await _send(64 * 1024, 60 * 1024) == 60 * 1024
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await _send(64 * 1024, 65 * 1024)
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_the_default_is_kafkas():
    assert DEFAULT_MAX_REQUEST_BYTES == 104857600
    assert dict(server_options())["grpc.max_receive_message_length"] == 104857600
    assert dict(server_options(4096))["grpc.max_receive_message_length"] == 4096
