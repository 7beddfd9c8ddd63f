"""design.md#kip-501: when follower.fetch.process.time.max.ms has passed is the broker's own
clock's answer (the serve time it compares with the limit), not the event loop timer's.

uvloop's timers run on libuv's millisecond loop clock and fire up to ~1 ms early by
time.monotonic: the lab's kip-501 runs (about one in four) woke the slow leader's 500 ms wait at
a serve time of 499.5-499.7 ms, not over the limit, so nothing was given up until the slow read
itself ended, 4.5 s later (serve_ms 4501 in the first slow_follower_fetch, the longest acks=all
gap 7.7 s instead of ~4 s). The event loop was never blocked: no pread ran on its thread.
Here the broker's clock is a fake that stands still while the loop's timer runs, as uvloop's
early wake-up looks from the broker's side.
"""

from __future__ import annotations

import asyncio

from tests.broker.test_idle_follower_fetch import Clock
from tests.broker.test_pending_reads import (
    BUSY,
    IDLE,
    AlterPartitionSpy,
    GatedPool,
    _fetch,
    _leader,
    _one_batch_behind_on_busy,
)


class Monotonic:
    """The broker's monotonic seconds, moved only by the test."""

    def __init__(self) -> None:
        self.s = 1000.0

    def __call__(self) -> float:
        return self.s


async def test_the_limit_is_over_when_the_brokers_clock_says_so(tmp_path):
    monotonic = Monotonic()
    clock, pool, spy = Clock(), GatedPool(), AlterPartitionSpy()
    rm, lm = await _leader(tmp_path, clock, pool, True, process_time_max_ms=20)
    rm.monotonic = monotonic
    rm.alter_partition = spy
    try:
        idle_leo, busy_leo = await _one_batch_behind_on_busy(rm)

        pool.gate.clear()  # the disk turns slow
        fetch = asyncio.ensure_future(_fetch(rm, {IDLE: idle_leo, BUSY: busy_leo}))
        # The loop's 20 ms timer fires (several times over) while the broker's clock says
        # no time has passed: nothing is slow yet.
        await asyncio.sleep(0.1)
        assert spy.relinquished == []
        # Past the limit by the broker's clock, the read still waiting on the disk: both
        # partitions the Fetch holds up are given up now, not when the read ends.
        monotonic.s += 0.021
        for _ in range(200):
            if spy.relinquished:
                break
            await asyncio.sleep(0.01)
        assert not fetch.done()
        assert sorted(spy.relinquished) == [IDLE, BUSY]
        pool.gate.set()
        await fetch
        assert sorted(spy.relinquished) == [IDLE, BUSY]
    finally:
        pool.gate.set()
        pool.shutdown()
        lm.shutdown()
