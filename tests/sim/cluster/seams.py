"""The seams that let the broker's shells run inside the cluster simulation, synchronously and
deterministically (docs/simulation.md), as the store seam does for the controller.

- :class:`InlineExecutor`: a log dir's executor that runs each job at once, on the caller's
  thread, in submission order - production's single-thread-per-dir order, with no thread.
- :func:`run_now`: a shell's coroutine (the fetcher's answer handling, StopReplica,
  UpdateMetadata and its stray deletions) run to its end before the call returns, on one
  private event loop: with the inline executor every future it awaits
  (LogManager.run_in_dir settles through ``call_soon_threadsafe``) is settled within a few loop
  iterations, in the order the callbacks were queued - nothing waits on time or I/O.
- :class:`Ids`: the unique ids production takes from ``uuid4`` (set-aside and deleted copies'
  suffixes, a new dir's directory.id), drawn from a counter, so a seed replays its disks byte
  for byte and the simulation's random stream is not consumed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from concurrent.futures import Executor, Future

MAX_ITERATIONS = 1000
_loop: asyncio.AbstractEventLoop | None = None


def _the_loop() -> asyncio.AbstractEventLoop:
    global _loop
    if _loop is None or _loop.is_closed():
        _loop = asyncio.new_event_loop()
    return _loop


def call_in_loop(fn, *args):
    """``fn(*args)`` with the private loop as the running loop: a shell's plain method that
    may start a task (ReplicaManager.update_metadata's stray deletion), which ``run_now`` then
    awaits."""
    asyncio._set_running_loop(_the_loop())
    try:
        return fn(*args)
    finally:
        asyncio._set_running_loop(None)


def run_now(coro: Coroutine):
    """Run ``coro`` to its end, now, as a Task would but without one: each step runs with the
    private loop as the running loop (what ``asyncio.get_running_loop`` returns to the code it
    calls); when the coroutine waits on a future, the loop runs until that future is settled,
    then the coroutine goes on. Most calls never wait (nothing to append, no stray to delete)
    and cost no loop iteration. An await that nothing in the simulation settles is a defect
    of the seams: it raises instead of hanging the run."""
    loop = _the_loop()
    while True:
        asyncio._set_running_loop(loop)
        try:
            waited = coro.send(None)
        except StopIteration as done:
            return done.value
        finally:
            asyncio._set_running_loop(None)
        if waited is not None:  # a future (a bare yield is asyncio.sleep(0))
            waited._asyncio_future_blocking = False
            _settle(loop, waited, coro)


def _settle(loop: asyncio.AbstractEventLoop, fut: asyncio.Future, coro: Coroutine) -> None:
    if fut.done():
        return
    iterations = 0
    watch: asyncio.Handle

    def watchdog() -> None:
        # queued at every iteration, so the loop never blocks in its selector waiting
        nonlocal iterations, watch
        iterations += 1
        if iterations > MAX_ITERATIONS:
            loop.stop()
        else:
            watch = loop.call_soon(watchdog)
    fut.add_done_callback(lambda _f: loop.stop())
    watch = loop.call_soon(watchdog)
    loop.run_forever()
    watch.cancel()
    if not fut.done():
        coro.close()
        raise RuntimeError(f"{coro!r} awaits something the simulation never settles")


class InlineExecutor(Executor):
    def submit(self, fn, /, *args, **kwargs) -> Future:
        fut: Future = Future()
        try:
            fut.set_result(fn(*args, **kwargs))
        except BaseException as e:  # noqa: BLE001 - delivered through the future, as a thread's
            fut.set_exception(e)
        return fut

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        pass


class Ids:
    """``next()`` -> "b<broker>i<incarnation>n<count>": unique on one broker's disk."""

    def __init__(self, broker_id: int, incarnation: int):
        self.prefix = f"b{broker_id}i{incarnation}n"
        self.count = 0

    def __call__(self) -> str:
        self.count += 1
        return f"{self.prefix}{self.count}"
