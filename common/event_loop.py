"""Which asyncio event loop the processes run on.

uvloop (libuv, in Cython) is the loop asyncio servers commonly run on in production
(uvicorn, for one). Its call_soon, futures' callbacks and call_soon_threadsafe -- the
executor hand-off every log append and read takes (design.md#kip-501) -- cost a fraction of the pure
Python loop's. grpc.aio runs on it unchanged. REPLOG_EVENT_LOOP=asyncio picks the standard
loop instead (for comparison, or where uvloop is not installed).

Measured (two clusters side by side, 8 alternating rounds of `replog produce` acks=all
RF 3 64 KiB batches, then 6 of `replog e2e-latency` at 20 rec/s): leader CPU 10.4 -> 9.45 s/GB,
followers 6.25 -> 5.8, client 12.6 -> 12.05, throughput 58.5 -> 62.8 MB/s (6 of 8 rounds won),
e2e p50 6.44 -> 5.98 ms and p99 11.34 -> 10.64 ms.
"""
from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from typing import Any, TypeVar

from common import allocator

T = TypeVar("T")

ENV = "REPLOG_EVENT_LOOP"


def loop_factory():
    """The event loop factory for this process: uvloop's unless REPLOG_EVENT_LOOP=asyncio."""
    choice = os.environ.get(ENV, "uvloop").strip().lower()
    if choice == "asyncio":
        return None
    if choice != "uvloop":
        raise ValueError(f"{ENV} must be 'uvloop' or 'asyncio', not {choice!r}")
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T]) -> T:
    """asyncio.run(main) on the loop loop_factory() picks. Every replog process (broker,
    controller, the CLI's commands) starts here, so the allocator is tuned here too
    (common/allocator.py)."""
    try:
        factory = loop_factory()
    except ValueError:
        main.close()  # never started: no "coroutine was never awaited" warning
        raise
    allocator.tune()
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)
