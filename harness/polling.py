"""The one deadline/poll loop of the harness, the chaos runner, the lab, the benchmarks and the
tests (``tests/polling.py`` re-exports it).

Wait until a condition holds, or fail saying what was awaited, for how long, and what the
condition last returned:

- ``poll`` calls the condition until it is truthy or the time is up and returns its value (None
  on time-out): for the callers that give up quietly (stop, then SIGKILL);
- ``wait_until`` does the same and raises at the deadline: :class:`WaitTimedOut` (an
  AssertionError, so a test that waits fails as an assertion does) or the caller's own error
  from ``timed_out(last)`` (``LocalClusterError`` with the process's last log lines, say);
- ``async_wait_until`` is ``wait_until`` for the event loop; the condition may return an
  awaitable, which is awaited;
- ``Deadline`` shares one time budget between several waits (a cluster's start-up: the
  controllers, then the active controller, then the brokers).

All return the condition's first truthy value, so a caller waits for and takes a result in one
step. An exception the condition raises ends the wait (a process that died while starting),
except those of the ``ignore`` types, which count as "not yet" (a service still starting).

Poll for a positive signal only: a wait bounds how long the signal may take, it never stands
for "nothing happened".
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable


class WaitTimedOut(AssertionError):
    """The condition did not hold in time."""


def _timed_out(what: str, timeout: float, last: object) -> WaitTimedOut:
    return WaitTimedOut(f"timed out after {timeout:g} s waiting for {what} (last: {last!r})")


class Deadline:
    """One time budget for several waits: ``remaining()`` is what is left of it."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.at = time.monotonic() + timeout

    def remaining(self, floor: float = 0.0) -> float:
        """Seconds left, at least ``floor`` (a step that needs a minimum still gets it)."""
        return max(floor, self.at - time.monotonic())

    def expired(self) -> bool:
        return time.monotonic() >= self.at


def _poll(cond: Callable[[], object], timeout: float, interval: float,
          ignore: tuple[type[BaseException], ...]) -> tuple[bool, object]:
    deadline = time.monotonic() + timeout
    while True:
        try:
            last = cond()
        except ignore as e:
            last = e
        else:
            if last:
                return True, last
        if time.monotonic() >= deadline:
            return False, last
        time.sleep(interval)


def poll(cond: Callable[[], object], timeout: float, *, interval: float = 0.1,
         ignore: tuple[type[BaseException], ...] = ()) -> object:
    """Call ``cond`` every ``interval`` s until it returns something truthy and return that;
    None after ``timeout`` s."""
    ok, last = _poll(cond, timeout, interval, ignore)
    return last if ok else None


def wait_until(cond: Callable[[], object], timeout: float = 30.0, what: str = "condition", *,
               interval: float = 0.1, ignore: tuple[type[BaseException], ...] = (),
               timed_out: Callable[[object], BaseException] | None = None) -> object:
    """``poll`` that raises at the deadline: ``timed_out(last)`` if given, else
    :class:`WaitTimedOut` naming ``what``, ``timeout`` and the condition's last value (or the
    last ignored exception)."""
    ok, last = _poll(cond, timeout, interval, ignore)
    if ok:
        return last
    raise timed_out(last) if timed_out is not None else _timed_out(what, timeout, last)


async def async_wait_until(cond: Callable[[], object], timeout: float = 30.0,
                           what: str = "condition", *, interval: float = 0.02,
                           ignore: tuple[type[BaseException], ...] = (),
                           timed_out: Callable[[object], BaseException] | None = None) -> object:
    """``wait_until`` for the event loop: ``cond`` may return an awaitable, which is awaited;
    the loop keeps running between polls."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            last = cond()
            if inspect.isawaitable(last):
                last = await last
        except ignore as e:
            last = e
        else:
            if last:
                return last
        if loop.time() >= deadline:
            raise timed_out(last) if timed_out is not None else _timed_out(what, timeout, last)
        await asyncio.sleep(interval)
