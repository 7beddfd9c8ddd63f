"""Background loops that do not die silently.

A broker's isr-expiration, checkpoint and retention loops each catch the errors they expect
(storage errors). Anything else used to end the task without a word, and checkpointing or
retention stopped for the rest of the process's life. ``supervised``
runs such a loop, and when it raises anything but cancellation it logs the error as an event,
counts it in ``replog_background_task_failures_total{task}``, waits a backoff and starts it
again, much as Kafka's KafkaScheduler keeps running a periodic task whose run threw.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from prometheus_client import Counter


def failures_counter(registry) -> Counter:
    return Counter("replog_background_task_failures", "background loops that raised and were "
                   "restarted", ["task"], registry=registry)


async def supervised(name: str, loop_factory: Callable[[], Awaitable[None]], events,
                     failures: Counter, backoff_s: float = 1.0) -> None:
    """Run ``loop_factory()`` until it returns or is cancelled, restarting it after any other
    exception."""
    failures.labels(task=name)  # the series exists (at 0) before anything fails
    while True:
        try:
            await loop_factory()
            return
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - the point: nothing may end the loop silently
            failures.labels(task=name).inc()
            events.error("background_task_failed", task=name,
                         error=f"{type(e).__name__}: {e}", restart_in_s=backoff_s)
        await asyncio.sleep(backoff_s)
