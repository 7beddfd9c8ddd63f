"""CPU seconds of processes between two points, as the benchmarks report CPU per GB."""

from __future__ import annotations

import resource

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


class PhaseCpu:
    """CPU seconds of one benchmark phase, per named group of processes (``groups``: name ->
    pids) and for the client: the CLI or client child the phase ran (getrusage
    RUSAGE_CHILDREN counts only children already waited for, so never the still-running
    brokers)."""

    def __init__(self, groups: dict[str, list[int | None]]):
        self.meters = {name: CpuMeter(pids) for name, pids in groups.items()}

    def start(self) -> None:
        for m in self.meters.values():
            m.start()
        self._children = resource.getrusage(resource.RUSAGE_CHILDREN)

    def stop(self) -> dict[str, float]:
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = {"client": (ru.ru_utime - self._children.ru_utime)
               + (ru.ru_stime - self._children.ru_stime)}
        for k, m in self.meters.items():
            u, s = m.stop()
            out[k] = u + s
        return out
