"""replog's benchmarks (SPEC "Performance"): figures printed, never asserted.

``python -m bench`` (``make bench``) runs the ``main(opts)`` of every ``bench/bench_*.py``
module; ``python -m bench storage`` runs only ``bench_storage``; ``--quick`` makes a smoke run
(one run per figure, small sizes). A module's ``main`` receives the parsed options (``quick``,
``runs``, ``data_dir``) and prints a compact table plus one JSON line per figure; it saves its
results with :func:`save_results` under ``bench/results/`` (gitignored).

Conventions shared by the modules (helpers below):

- each figure is the median of several runs (>= 3; 1 with ``--quick``);
- a figure and its baseline are measured in the same run, interleaved, so machine noise hits
  both, and the ratio is taken from the paired samples;
- CPU seconds per GB (user + sys of the whole process, every thread included) sit beside every
  throughput figure. MB and GB are decimal (10^6, 10^9 bytes).
"""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

RESULTS_DIR = Path(__file__).resolve().parent / "results"
MB = 1_000_000
GB = 1_000_000_000


@dataclass
class Sample:
    """One timed run: wall seconds, CPU seconds (user, sys) and the bytes/records it moved."""

    wall: float
    user: float
    sys: float
    nbytes: int
    nrecords: int

    @property
    def cpu(self) -> float:
        return self.user + self.sys

    @property
    def mb_s(self) -> float:
        return self.nbytes / self.wall / MB

    @property
    def records_s(self) -> float:
        return self.nrecords / self.wall

    @property
    def cpu_s_per_gb(self) -> float:
        return self.cpu / (self.nbytes / GB)


class Timer:
    """``with Timer() as t: ...`` then ``t.sample(nbytes, nrecords)``.

    CPU time is ``getrusage(RUSAGE_SELF)``: the whole process, so an executor thread's work
    counts too.
    """

    def __enter__(self) -> Timer:
        self._ru = resource.getrusage(resource.RUSAGE_SELF)
        self._t = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.wall = time.perf_counter() - self._t
        ru = resource.getrusage(resource.RUSAGE_SELF)
        self.user = ru.ru_utime - self._ru.ru_utime
        self.sys = ru.ru_stime - self._ru.ru_stime

    def sample(self, nbytes: int, nrecords: int) -> Sample:
        return Sample(self.wall, self.user, self.sys, nbytes, nrecords)


def median(values) -> float:
    return statistics.median(values)


def summarize(samples: list[Sample]) -> dict:
    """Median figures of a list of samples (plus the spread of the throughput)."""
    mbs = [s.mb_s for s in samples]
    return {
        "mb_s": round(median(mbs), 1),
        "mb_s_min": round(min(mbs), 1),
        "mb_s_max": round(max(mbs), 1),
        "records_s": round(median(s.records_s for s in samples)),
        "cpu_s_per_gb": round(median(s.cpu_s_per_gb for s in samples), 3),
        "user_s_per_gb": round(median(s.user / (s.nbytes / GB) for s in samples), 3),
        "sys_s_per_gb": round(median(s.sys / (s.nbytes / GB) for s in samples), 3),
        "runs": len(samples),
        "bytes_per_run": samples[0].nbytes if samples else 0,
    }


def paired_ratio(a: list[Sample], b: list[Sample]) -> float:
    """Median over runs of a's throughput / b's, each pair measured in the same round."""
    return median(x.mb_s / y.mb_s for x, y in zip(a, b))


def machine_info(data_dir: str | None = None) -> dict:
    info = {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "affinity_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
    }
    # psutil has no API for the CPU's model name (cpu_freq, cpu_count, cpu_stats only), so
    # it is read from the kernel's /proc/cpuinfo, as lscpu does.
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    if data_dir:
        info["data_dir_fs"] = filesystem_of(data_dir)
    return info


def filesystem_of(path: str) -> str:
    """The mount point and type of the filesystem holding ``path``: the longest mount point
    above it in the whole mount table (psutil's, all=True: tmpfs and overlay included)."""
    path = os.path.realpath(path)
    best = ("", "?", "?")
    try:
        mounts = psutil.disk_partitions(all=True)
    except OSError:
        return "?"
    for m in mounts:
        mnt = m.mountpoint
        if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best[0]):
            # psutil reports the kernel's "none" device as ""
            best = (mnt, m.fstype, m.device or "none")
    return f"{best[1]} ({best[2]} on {best[0]})"


def save_results(name: str, results: dict) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    path.write_text(json.dumps(results, indent=2, sort_keys=False) + "\n")
    return path


def measured_rate(samples: list[tuple[float, int]], target: int) -> float | None:
    """Bytes/s of a copy sampled as (seconds, bytes so far): between the first sample at >= 10%
    of ``target`` and the first at >= 90% (leaving out the start-up and the tail)."""
    lo = next(((t, s) for t, s in samples if s >= 0.1 * target), None)
    hi = next(((t, s) for t, s in samples if s >= 0.9 * target), None)
    if lo is None or hi is None or hi[0] <= lo[0]:
        return None
    return (hi[1] - lo[1]) / (hi[0] - lo[0])


def json_line(bench: str, figure: str, data: dict) -> str:
    return json.dumps({"bench": bench, "figure": figure, **data}, separators=(",", ":"))


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


@dataclass
class ABRun:
    """What an A/B benchmark run (two transports or two security modes, alternated per round)
    starts from: its round and record counts, a fresh scratch dir, and the results header."""

    rounds: int
    records: int
    e2e_records: int
    root: str
    started: float
    results: dict


def ab_run(opts, name: str, prefix: str, targets: dict) -> ABRun:
    """The shared opening of bench_replication_transport, bench_produce_stream and bench_tls:
    3 rounds of 60,000 records and 400 e2e records (1 round, 10,000 and 100 with --quick),
    ``--runs`` and ``--data-dir`` as given."""
    import tempfile
    rounds = opts.runs or (1 if opts.quick else 3)
    parent = opts.data_dir or "/tmp"
    os.makedirs(parent, exist_ok=True)
    started = time.time()
    return ABRun(rounds=rounds, records=10000 if opts.quick else 60000,
                 e2e_records=100 if opts.quick else 400,
                 root=tempfile.mkdtemp(prefix=f"replog-bench-{prefix}-", dir=parent),
                 started=started,
                 results={"bench": name, "quick": bool(opts.quick), "rounds": rounds,
                          "when": time.strftime("%Y-%m-%dT%H:%M:%S%z",
                                                time.localtime(started)),
                          "machine": machine_info(parent), "targets": targets})
