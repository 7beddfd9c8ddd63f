"""The Kafka listener's connection bounds (issue 42, broker/kafka_connections.py), as Kafka's
SocketServer has them: max.connections.per.ip (+ overrides), connections.max.idle.ms,
queued.max.request.bytes, and replog's socket.request.read.timeout.ms against a slow sender.
A real listener on a real socket; its clients run in threads (blocking sockets)."""
from __future__ import annotations

import asyncio
import socket
import struct

import pytest

from broker.kafka_connections import ConnectionQuotas, ConnectionSettings, RequestMemoryPool
from broker.kafka_listener import KafkaListener
from common.config import ConfigError, load_config
from common.kafka_protocol.api import ApiKey
from harness.hostile_frames import request_frame


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, dict]] = []

    def _record(self, name, **kw):
        self.seen.append((name, kw))

    warning = error = info = _record


def _api_versions() -> bytes:
    from common.kafka_protocol.api import APIS
    body = APIS[ApiKey.API_VERSIONS].request.encode(
        {"client_software_name": "t", "client_software_version": "1"}, 3)
    return request_frame(ApiKey.API_VERSIONS, 3, body, correlation_id=7)


def _answered(s: socket.socket) -> bool:
    """Send ApiVersions; True if answered, False if the listener closed the connection."""
    try:
        s.sendall(_api_versions())
        head = b""
        while len(head) < 8:
            chunk = s.recv(8 - len(head))
            if not chunk:
                return False
            head += chunk
        size = int.from_bytes(head[:4], "big")
        left = size - 4
        while left > 0:  # the rest of the answer, so the next one starts clean
            chunk = s.recv(left)
            if not chunk:
                return False
            left -= len(chunk)
    except (ConnectionResetError, BrokenPipeError):
        return False
    return head[4:8] == (7).to_bytes(4, "big")


def _closed(s: socket.socket) -> bool:
    """True once the listener closes ``s`` (reads until EOF; the socket's timeout bounds it)."""
    try:
        while True:
            if not s.recv(65536):
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


async def _listener(**settings) -> tuple[KafkaListener, Events, int]:
    events = Events()
    k = KafkaListener(None, 1, "KAFKA", "127.0.0.1", 0, events,
                      connections=ConnectionSettings(**settings))
    return k, events, await k.start()


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=30)


async def test_max_connections_per_ip_closes_the_one_too_many():
    k, events, port = await _listener(max_per_ip=2)
    try:
        def scenario():
            a, b = _connect(port), _connect(port)
            assert _answered(a) and _answered(b)
            c = _connect(port)
            assert _closed(c)  # the third from 127.0.0.1
            c.close()
            a.close()
            # one released: a new connection is served again (once the close is seen)
            for _ in range(100):
                d = _connect(port)
                if _answered(d):
                    d.close()
                    break
                d.close()
            else:
                raise AssertionError("no connection accepted after one closed")
            b.close()
        await asyncio.to_thread(scenario)
    finally:
        await k.stop()
    assert any(n == "kafka_connection_refused" and "max.connections.per.ip" in kw["reason"]
               for n, kw in events.seen)


async def test_an_override_raises_the_limit_for_its_address():
    k, _events, port = await _listener(max_per_ip=0, per_ip_overrides={"127.0.0.1": 1})
    try:
        def scenario():
            with _connect(port) as a, _connect(port) as b:
                assert _answered(a)
                assert _closed(b)
        await asyncio.to_thread(scenario)
    finally:
        await k.stop()


async def test_an_idle_connection_is_closed_after_connections_max_idle_ms():
    k, events, port = await _listener(max_idle_ms=200)
    try:
        def scenario():
            with _connect(port) as s:
                assert _answered(s)
                assert _closed(s)  # then nothing more is sent
        await asyncio.to_thread(scenario)
    finally:
        await k.stop()
    assert any("connections.max.idle.ms" in kw.get("reason", "") for _, kw in events.seen)


async def test_a_size_prefix_followed_by_a_trickle_is_closed():
    """The slow sender of issue 42: a 100 MB size, then a byte now and then."""
    k, events, port = await _listener(request_read_timeout_ms=300)
    try:
        def scenario():
            with _connect(port) as s:
                s.sendall(struct.pack(">i", 100 * 1024 * 1024) + b"\x00\x03")
                s.settimeout(0.05)
                for _ in range(400):  # up to 20 s of trickle
                    try:
                        s.sendall(b"\x00")
                        if s.recv(1) == b"":
                            return True
                    except TimeoutError:
                        continue
                    except (ConnectionResetError, BrokenPipeError):
                        return True
                return False
        assert await asyncio.to_thread(scenario)
    finally:
        await k.stop()
    assert any("socket.request.read.timeout.ms" in kw.get("reason", "")
               for _, kw in events.seen)


async def test_queued_max_request_bytes_holds_back_a_request_until_memory_is_released():
    pool = RequestMemoryPool(100)
    first = await pool.acquire(80)
    waiting = asyncio.ensure_future(pool.acquire(50))
    await asyncio.sleep(0)
    assert not waiting.done()
    pool.release(first)
    assert await waiting == 50
    # one larger than the pool waits for all of it
    assert await RequestMemoryPool(10).acquire(1000) == 10
    assert await RequestMemoryPool(-1).acquire(1000) == 0  # -1: no bound


def test_quotas_count_per_address():
    q = ConnectionQuotas(ConnectionSettings(max_per_ip=1, per_ip_overrides={"10.0.0.1": 3}))
    assert q.accept("a") and not q.accept("a")
    q.release("a")
    assert q.accept("a")
    assert all(q.accept("10.0.0.1") for _ in range(3)) and not q.accept("10.0.0.1")


def test_the_properties_are_in_the_config_schema(tmp_path):
    p = tmp_path / "server.properties"
    p.write_text("broker.id=1\nmax.connections.per.ip=5\n"
                 "max.connections.per.ip.overrides=localhost:9,10.0.0.1:0\n"
                 "connections.max.idle.ms=1000\nqueued.max.request.bytes=200000000\n"
                 "socket.request.read.timeout.ms=5000\n")
    cfg = load_config(str(p))
    s = ConnectionSettings.from_config(cfg)
    assert (s.max_per_ip, s.max_idle_ms, s.queued_max_request_bytes,
            s.request_read_timeout_ms) == (5, 1000, 200000000, 5000)
    assert s.per_ip_overrides == {"127.0.0.1": 9, "10.0.0.1": 0}
    p.write_text("broker.id=1\nmax.connections.per.ip.overrides=nocount\n")
    with pytest.raises(ConfigError, match="max.connections.per.ip.overrides"):
        load_config(str(p))
