"""The Kafka listener's connection bounds, as Kafka's SocketServer has them (issue 42).

- ``max.connections.per.ip`` (and ``max.connections.per.ip.overrides``, ``host:count,...``): a
  connection from an address that already holds that many is closed at once, as Kafka's
  ConnectionQuotas does (TooManyConnectionsException);
- ``connections.max.idle.ms``: a connection that sends no request for that long is closed (the
  Selector's idle expiry);
- ``queued.max.request.bytes``: the bytes of requests being read or served at once, over all
  the listener's connections; past it, no further request body is read until some is released
  (Kafka's MemoryPool: the Selector mutes channels while the pool is exhausted). -1, Kafka's
  default, is no bound;
- ``socket.request.read.timeout.ms`` (replog): the time a request's bytes may take to arrive
  once its size is read. Kafka's idle expiry counts any read as activity, so a 100 MB size
  prefix followed by a trickle holds a connection and its buffer for ever; here it is closed.

``ConnectionQuotas`` and ``RequestMemoryPool`` are plain state, the listener's shell awaits.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field

INT_MAX = 2 ** 31 - 1
DEFAULT_MAX_IDLE_MS = 600_000
DEFAULT_REQUEST_READ_TIMEOUT_MS = 60_000


def _resolve(host: str) -> str:
    """An override's host as the address a connection comes from (Kafka's ConnectionQuotas
    resolves them with InetAddress.getByName); an unresolvable name is kept as written."""
    try:
        return socket.gethostbyname(host)
    except OSError:
        return host


@dataclass(frozen=True)
class ConnectionSettings:
    max_idle_ms: int = DEFAULT_MAX_IDLE_MS
    max_per_ip: int = INT_MAX
    per_ip_overrides: Mapping[str, int] = field(default_factory=dict)
    queued_max_request_bytes: int = -1
    request_read_timeout_ms: int = DEFAULT_REQUEST_READ_TIMEOUT_MS

    @classmethod
    def from_config(cls, config: Mapping | None) -> ConnectionSettings:
        c = config or {}

        def get(key, default):
            v = c.get(key) if hasattr(c, "get") else None
            return default if v is None else v
        overrides = get("max.connections.per.ip.overrides", {})  # parsed by common/config
        return cls(get("connections.max.idle.ms", DEFAULT_MAX_IDLE_MS),
                   get("max.connections.per.ip", INT_MAX),
                   {_resolve(h): n for h, n in overrides.items()},
                   get("queued.max.request.bytes", -1),
                   get("socket.request.read.timeout.ms", DEFAULT_REQUEST_READ_TIMEOUT_MS))


class ConnectionQuotas:
    """Open connections per client address (Kafka's ConnectionQuotas, per listener here)."""

    def __init__(self, settings: ConnectionSettings):
        self.settings = settings
        self.counts: dict[str, int] = {}

    def limit(self, address: str) -> int:
        return self.settings.per_ip_overrides.get(address, self.settings.max_per_ip)

    def accept(self, address: str) -> bool:
        """Count a new connection from ``address``; False (nothing counted) past its limit."""
        n = self.counts.get(address, 0)
        if n >= self.limit(address):
            return False
        self.counts[address] = n + 1
        return True

    def release(self, address: str) -> None:
        n = self.counts.get(address, 0) - 1
        if n > 0:
            self.counts[address] = n
        else:
            self.counts.pop(address, None)


class RequestMemoryPool:
    """``queued.max.request.bytes`` over one listener's connections (Kafka's SimpleMemoryPool).
    A request larger than the whole pool waits for all of it, so it is still served alone."""

    def __init__(self, capacity: int):
        self.capacity = capacity  # <= 0: unbounded
        self.used = 0
        self._waiters: list[asyncio.Future] = []

    async def acquire(self, n: int) -> int:
        """Wait until ``n`` bytes (at most the capacity) are free, take them; what to release."""
        if self.capacity <= 0:
            return 0
        n = min(n, self.capacity)
        while self.used + n > self.capacity:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                self._waiters.remove(waiter)
        self.used += n
        return n

    def release(self, n: int) -> None:
        if n <= 0:
            return
        self.used -= n
        for w in self._waiters:
            if not w.done():
                w.set_result(None)


def seconds(ms: int) -> float | None:
    """A timeout in ms as asyncio's seconds; a value <= 0 is none."""
    return ms / 1000 if ms > 0 else None
