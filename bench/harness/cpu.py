"""CPU seconds of processes between two points, as the benchmarks report CPU per GB."""

from __future__ import annotations

import psutil


def proc_cpu(pid: int | None) -> tuple[float, float]:
    """(user, sys) CPU seconds of a process (its own, not its children's); (0, 0) if it is
    gone."""
    if pid is None:
        return 0.0, 0.0
    try:
        t = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return 0.0, 0.0
    return t.user, t.system


class CpuMeter:
    """CPU of a fixed set of processes between ``start()`` and ``stop()``."""

    def __init__(self, pids: list[int | None]):
        self.pids = [p for p in pids if p]

    def _read(self) -> tuple[float, float]:
        u = s = 0.0
        for pid in self.pids:
            a, b = proc_cpu(pid)
            u, s = u + a, s + b
        return u, s

    def start(self) -> None:
        self._u, self._s = self._read()

    def stop(self) -> tuple[float, float]:
        u, s = self._read()
        return u - self._u, s - self._s
