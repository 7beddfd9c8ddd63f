"""common/clock.py: the real clocks, and the manual one tests and the simulation drive."""

import time

import pytest

from common.clock import SYSTEM, Clock, ManualClock, SystemClock, wall_ms


def test_wall_ms_is_integer_milliseconds_of_the_wall_clock():
    before = int(time.time() * 1000)
    now = wall_ms()
    assert isinstance(now, int)
    assert before <= now <= int(time.time() * 1000)


def test_the_system_clock_reads_the_real_clocks_unless_given_others():
    assert SYSTEM.wall_ms is wall_ms and SYSTEM.monotonic is time.monotonic
    c = SystemClock(wall_ms=lambda: 5, monotonic=lambda: 2.5)
    assert (c.wall_ms(), c.monotonic()) == (5, 2.5)


def test_a_manual_clock_moves_only_when_told():
    c: Clock = ManualClock(wall_ms=10_000, monotonic=50.0)
    assert (c.wall_ms(), c.monotonic()) == (10_000, 50.0)
    c.advance(1.5)
    assert (c.wall_ms(), c.monotonic()) == (11_500, 51.5)
    # The wall clock may be stepped, even backwards (NTP); monotonic time is not touched.
    c.set_wall_ms(3_000)
    assert (c.wall_ms(), c.monotonic()) == (3_000, 51.5)
    with pytest.raises(ValueError):
        c.advance(-1)
    assert c.monotonic() == 51.5
