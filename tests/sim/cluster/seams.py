"""The seams that let the broker's shells run inside the cluster simulation, synchronously and
deterministically (docs/simulation.md), as the store seam does for the controller.

- :class:`InlineExecutor`: a log dir's executor that runs each job at once, on the caller's
  thread, in submission order - production's single-thread-per-dir order, with no thread.
- :class:`Ids`: the unique ids production takes from ``uuid4`` (set-aside and deleted copies'
  suffixes, a new dir's directory.id), drawn from a counter, so a seed replays its disks byte
  for byte and the simulation's random stream is not consumed.
"""

from __future__ import annotations

from concurrent.futures import Executor, Future


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
