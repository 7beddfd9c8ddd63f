"""The one polling helper of the tests: wait until a condition holds, or fail saying what was
awaited, for how long, and what the condition last returned.

``wait_until`` blocks (tests that drive real processes from plain functions); ``async_wait_until``
awaits (in-process servers and asyncio clients), and its condition may also be a coroutine
function. Both return the condition's first truthy value, so a test can wait for and take a
result in one step (``state = await async_wait_until(lambda: leader_of(...))``).

Poll for a positive signal only: a wait bounds how long the signal may take, it never stands
for "nothing happened" (wait instead for a later event that proves it).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable


def _timed_out(what: str, timeout: float, last: object) -> AssertionError:
    return AssertionError(f"timed out after {timeout:g} s waiting for {what} (last: {last!r})")


def wait_until(cond: Callable[[], object], timeout: float = 30.0, what: str = "condition", *,
               interval: float = 0.1,
               ignore: tuple[type[BaseException], ...] = ()) -> object:
    """Call ``cond`` every ``interval`` s until it returns something truthy and return that;
    raise AssertionError after ``timeout`` s. Exceptions of the ``ignore`` types count as
    "not yet" (a service still starting)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            last = cond()
        except ignore as e:
            last = e
        else:
            if last:
                return last
        if time.monotonic() >= deadline:
            raise _timed_out(what, timeout, last)
        time.sleep(interval)


async def async_wait_until(cond: Callable[[], object], timeout: float = 30.0,
                           what: str = "condition", *, interval: float = 0.02) -> object:
    """``wait_until`` for the event loop: ``cond`` may return an awaitable, which is awaited;
    the loop keeps running between polls."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        last = cond()
        if inspect.isawaitable(last):
            last = await last
        if last:
            return last
        if loop.time() >= deadline:
            raise _timed_out(what, timeout, last)
        await asyncio.sleep(interval)
