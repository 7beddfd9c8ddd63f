"""The tests' polling helper is the harness's (harness/polling.py): wait until a condition
holds, or fail saying what was awaited, for how long, and what the condition last returned.

``wait_until`` blocks (tests that drive real processes from plain functions); ``async_wait_until``
awaits (in-process servers and asyncio clients), and its condition may also be a coroutine
function. Both return the condition's first truthy value, so a test can wait for and take a
result in one step (``state = await async_wait_until(lambda: leader_of(...))``).

Poll for a positive signal only: a wait bounds how long the signal may take, it never stands
for "nothing happened" (wait instead for a later event that proves it).
"""

from harness.polling import WaitTimedOut, async_wait_until, poll, wait_until

__all__ = ["WaitTimedOut", "async_wait_until", "poll", "wait_until"]
