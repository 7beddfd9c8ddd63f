"""The figures of ``python -m bench cluster`` (bench/bench_cluster.py has the whole method), one
module each: ``throughput`` (a), ``unavailability`` (b), ``shutdown`` (c and d). Here: the
targets they are printed against and the run plans (full, ``--quick``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

TARGET_MB_S = 150.0
TARGET_RATIO = 0.5
TARGET_UNAVAIL_MARGIN_S = 0.5
TARGET_UNAVAIL_STRETCH_S = 1.5
TARGET_SHUTDOWN_S = 3.0
TARGET_ELECTIONS_S = 5000.0


@dataclass
class Plan:
    tput_runs: int
    tput_seconds: float
    warmup_s: float
    producer_seconds: float
    unavail_runs: int
    # (partitions, controlled-shutdown runs, election runs)
    shutdown_sizes: list[tuple[int, int, int]] = field(default_factory=list)


FULL = Plan(tput_runs=3, tput_seconds=8.0, warmup_s=1.5, producer_seconds=6.0, unavail_runs=3,
            shutdown_sizes=[(1000, 3, 3), (10000, 1, 1)])
QUICK = Plan(tput_runs=1, tput_seconds=3.0, warmup_s=1.0, producer_seconds=3.0, unavail_runs=1,
             shutdown_sizes=[(1000, 1, 1)])


def shutdown_verdict(s: dict) -> bool | None:
    """The controlled-shutdown target as clients see it: the longest produce gap <= 3 s and no
    record failing to the library's Producer (not the broker's exit time, reported apart)."""
    if s["probe_max_gap_s"] is None:
        return None
    return s["probe_max_gap_s"] <= TARGET_SHUTDOWN_S and s["producer_records_failed"] == 0
