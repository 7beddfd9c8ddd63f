"""The clocks every process reads, in one place, so tests and the simulation can inject theirs.

Two kinds of time, as in Kafka's ``Time`` (``milliseconds()`` and ``nanoseconds()``):
- ``wall_ms``: wall-clock milliseconds. Record and segment timestamps, broker registration
  times, and follower fetch / caught-up times for ISR expiration (Kafka's
  ``replica.lag.time.max.ms`` check reads ``time.milliseconds()``, wall time, so an NTP step moves
  it - broker/fault_injection.py's clock rule offsets this one).
- ``monotonic``: seconds that never go backwards. Request deadlines, fetcher back-off
  (``replica.fetch.backoff.ms``), quota rates.

Code takes either one callable (``clock: Callable[[], int] = wall_ms``) or a ``Clock`` carrying
both; ``ManualClock`` is the settable one for tests and the deterministic simulation.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


def wall_ms() -> int:
    """Wall-clock milliseconds since the epoch (Kafka's Time.milliseconds)."""
    return int(time.time() * 1000)


class Clock(Protocol):
    def wall_ms(self) -> int: ...

    def monotonic(self) -> float: ...


@dataclass(frozen=True)
class SystemClock:
    """A ``Clock`` from two callables, the process's real clocks unless given others."""

    wall_ms: Callable[[], int] = wall_ms
    monotonic: Callable[[], float] = time.monotonic


SYSTEM = SystemClock()


class ManualClock:
    """A ``Clock`` that moves only when told. ``advance`` moves both readings together, as real
    time does; ``set_wall_ms`` steps the wall clock alone (an NTP correction may go backwards),
    which monotonic time never does."""

    def __init__(self, wall_ms: int = 1_000_000_000_000, monotonic: float = 1_000.0):
        self.now_ms = wall_ms
        self.now_s = monotonic

    def wall_ms(self) -> int:
        return self.now_ms

    def monotonic(self) -> float:
        return self.now_s

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"time does not go backwards: advance({seconds})")
        self.now_s += seconds
        self.now_ms += round(seconds * 1000)

    def set_wall_ms(self, ms: int) -> None:
        self.now_ms = ms
