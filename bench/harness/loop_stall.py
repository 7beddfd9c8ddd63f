"""The longest time an asyncio loop went without running a ready callback: a probe task sleeps
1 ms at a time, and each wake-up later than asked is a stall of that much (what a replication
fetch, a gRPC call or the controller's request waiting on the same loop would have waited)."""

from __future__ import annotations

import asyncio
import time

TICK_S = 0.001


class LoopStallProbe:
    def __init__(self) -> None:
        self.worst_s = 0.0
        self._task: asyncio.Task | None = None

    async def _run(self) -> None:
        while True:
            t = time.perf_counter()
            await asyncio.sleep(TICK_S)
            self.worst_s = max(self.worst_s, time.perf_counter() - t - TICK_S)

    def start(self) -> None:
        self.worst_s = 0.0
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> float:
        """The worst stall in seconds since ``start``."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        return self.worst_s
