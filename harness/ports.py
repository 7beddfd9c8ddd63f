"""Free loopback ports for listeners that are bound later by another process.

A port picked by binding to port 0 comes from the kernel's *ephemeral* range
(``net.ipv4.ip_local_port_range``), the same range every outgoing connection takes its local
port from. Between the pick and the child's bind -- seconds when ZooKeeper's JVM starts in
between -- a kazoo or gRPC client connection can take that very port, and the broker or
controller then dies with "Address already in use" (a CI run failed exactly so). Ports handed out
here come from *outside* the ephemeral range, where no outgoing connection lands; they are picked
at random with a private RNG (tests seed the global ``random``, and two processes with the same
seed must not pick the same sequence), checked bindable, and never handed out twice by one
process.
"""
from __future__ import annotations

import random
import socket
import threading
from collections.abc import Iterable

HOST = "127.0.0.1"
_LOWEST = 10000  # below are well-known services a developer may run (ZooKeeper 2181, 9090 ...)
_FALLBACK_EPHEMERAL = (32768, 60999)  # Linux's default ip_local_port_range

_rng = random.SystemRandom()
_handed: set[int] = set()
_lock = threading.Lock()


def ephemeral_range() -> tuple[int, int]:
    """The kernel's ephemeral port range (inclusive), or Linux's default if unreadable."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as f:
            lo, hi = (int(x) for x in f.read().split())
        return lo, hi
    except (OSError, ValueError):
        return _FALLBACK_EPHEMERAL


def candidate_ranges() -> list[range]:
    """Port ranges outside the ephemeral range (each at least 1000 ports wide)."""
    lo, hi = ephemeral_range()
    ranges = [range(_LOWEST, lo), range(hi + 1, 65536)]
    return [r for r in ranges if len(r) >= 1000]


def is_free(port: int, host: str = HOST) -> bool:
    """Nothing listens on ``host:port`` now (a port in TIME_WAIT counts as free)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # As the servers bind (gRPC and ZooKeeper set SO_REUSEADDR): TIME_WAIT counts as free.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


def _pick(ranges: list[range], i: int) -> int:
    """The ``i``-th port of the ranges taken end to end (uniform over all of them)."""
    for r in ranges:
        if i < len(r):
            return r[i]
        i -= len(r)
    raise IndexError(i)


def free_port(host: str = HOST, exclude: Iterable[int] = ()) -> int:
    """A port on ``host`` nothing listens on now, outside the ephemeral range, not in
    ``exclude`` and not handed out before by this process."""
    excluded = set(exclude)
    ranges = candidate_ranges()
    total = sum(len(r) for r in ranges)
    with _lock:
        for _ in range(1000 if total else 0):
            port = _pick(ranges, _rng.randrange(total))
            if port in excluded or port in _handed:
                continue
            if is_free(port, host):
                _handed.add(port)
                return port
    # Ephemeral range covers nearly everything (an unusual sysctl): the kernel's pick.
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            port = int(s.getsockname()[1])
        if port not in excluded:
            with _lock:
                _handed.add(port)
            return port
