"""The profiles behind the missed SPEC "Performance" targets: py-spy samples of the client,
the leader and a follower while the load a target measures runs, summarised per process as the
top functions by own and by total time (``docs/profiles/<workload>.md``; the analysis is
docs/profiles/README.md).

``python -m bench.profile_produce [--workloads produce,produce-rf1,lean,e2e,shutdown]
[--out docs/profiles] [--raw-dir bench/results/profiles] [--rate 100] [--partitions 10000]``

Workloads, on clusters shaped like the benchmarks' (bench/harness: 3 brokers with 2 log dirs
each, one controller, ZooKeeper):

- ``produce``: ``replog produce`` perf mode, acks=all, batch.size=65536, 1 KiB records, to
  tput-rf3 (60 partitions RF 3, min.insync.replicas=2, all led by broker 1 and followed by 2 and
  3, as in ``bench client`` (b)): targets ">= 60 MB/s" and "RF3/RF1 >= 0.6". Profiled: the CLI
  client, broker 1 (leader), broker 2 (follower).
- ``produce-rf1``: the same with acks=1 to tput-rf1 (RF 1): the ratio's denominator; client and
  broker 1.
- ``lean``: ``bench cluster`` (a)'s lean generator (pre-built 64 x 1 KiB batches straight to the
  leaders) acks=all to 6 partitions RF 3, 2 led per broker: target ">= 150 MB/s". Profiled:
  brokers 1 and 2 (each leads 2 partitions and follows 4).
- ``e2e``: ``replog e2e-latency`` at 20 rec/s, 100 B, acks=all to lat60 (60 partitions RF 3,
  leaders spread): target "p99 <= 10 ms"; client, broker 1, broker 2, with CPU ms per record.
- ``shutdown``: SIGTERM to broker 1 leading every partition of an N-partition RF 3 topic
  (``bench cluster`` (c)): target "<= 3 s"; brokers 2 and 3 (taking the leaderships over) and
  the controller, from SIGTERM until broker 1 exited and the new leaders had logged
  ``become_leader`` for all N.

Each process is sampled by ``py-spy record --nonblocking --format raw`` attached to its pid once
the load is running (the CLI's start-up is left out), and its CPU (user + sys, psutil, or the
child's rusage for the CLI) is read over the same window, so a function's share of the active
samples converts to estimated CPU seconds. Samples whose innermost frame is a wait (selector,
condition, an idle executor thread) count as idle and are left out of the shares. py-spy sees
Python frames only: time in C (gRPC's core, protobuf's upb, the CRC) is charged to the Python
frame that called it. Raw samples stay in ``--raw-dir`` (gitignored) for flame graphs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from bench import MB, RESULTS_DIR, log
from bench.bench_client import RECORD_BYTES, create_topics
from bench.cluster_figures.shutdown import wait_new_leaders
from bench.cluster_figures.throughput import lean_produce, make_batch
from bench.harness import (
    Brokers,
    EventTail,
    preferred_leads,
    proc_cpu,
    rotating_assignment,
    start_cluster,
    wait_partitions,
)
from client import AdminClient
from harness.local_cluster import LocalCluster

REPO = Path(__file__).resolve().parent.parent
WORKLOADS = ("produce", "produce-rf1", "lean", "e2e", "shutdown")
ATTACH_AFTER_S = 2.0  # the CLI's start-up, metadata and first batches are left out
TOP = 20

# Innermost frames that are waits, not work (the process is idle there).
_IDLE = re.compile(
    r"^(\w+\.)?select \(selectors\.py"
    r"|^_worker \(concurrent/futures/thread\.py:81\)"  # an executor thread waiting for work
    r"|^(Condition\.)?wait \(threading\.py"
    r"|^_wait_for_tstate_lock \(threading\.py"
    r"|^(Queue\.)?get \(queue\.py")
_LINE = re.compile(r":\d+\)$")


def py_spy() -> str:
    """py-spy next to this interpreter (the venv's, from the dev extra), else on PATH."""
    here = Path(sys.executable).parent / "py-spy"
    found = str(here) if here.exists() else shutil.which("py-spy")
    if not found:
        raise SystemExit("py-spy not found: pip install py-spy (it is in the dev extra: "
                         "pip install -e '.[dev]')")
    return found


# ============================================================================ sampling

@dataclass
class Spy:
    """py-spy attached to one process, and that process's CPU over the same window."""

    role: str
    pid: int
    raw: Path
    rate: int
    proc: subprocess.Popen | None = None
    cpu0: float = 0.0
    cpu_s: float = 0.0
    wall_s: float = 0.0
    t0: float = 0.0

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [py_spy(), "record", "--pid", str(self.pid), "--rate", str(self.rate),
             "--nonblocking", "--format", "raw", "--output", str(self.raw)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.cpu0 = sum(proc_cpu(self.pid))
        self.t0 = time.perf_counter()

    def read_cpu(self) -> None:
        """Read the window's CPU now (while the process still runs)."""
        self.cpu_s = sum(proc_cpu(self.pid)) - self.cpu0
        self.wall_s = time.perf_counter() - self.t0

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # py-spy writes its output and exits
        try:
            _, err = self.proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        if not self.raw.exists():
            raise RuntimeError(f"py-spy wrote nothing for {self.role} (pid {self.pid}): "
                               f"{err.decode(errors='replace')[-300:]}")


@dataclass
class Profile:
    """One process's samples, summarised."""

    role: str
    pid: int
    cpu_s: float
    wall_s: float
    rate: int
    stacks: Counter = field(default_factory=Counter)  # tuple of frames -> samples

    @classmethod
    def load(cls, spy: Spy) -> Profile:
        p = cls(spy.role, spy.pid, spy.cpu_s, spy.wall_s, spy.rate)
        for line in spy.raw.read_text().splitlines():
            stack, _, n = line.rpartition(" ")
            if stack and n.isdigit():
                p.stacks[tuple(stack.split(";"))] += int(n)
        return p

    @property
    def total(self) -> int:
        return sum(self.stacks.values())

    def active(self) -> Counter:
        return Counter({s: n for s, n in self.stacks.items() if not _IDLE.match(s[-1])})

    @staticmethod
    def func(frame: str) -> str:
        return _LINE.sub(")", frame)

    def own(self) -> Counter:
        c: Counter = Counter()
        for s, n in self.active().items():
            c[self.func(s[-1])] += n
        return c

    def inclusive(self) -> Counter:
        c: Counter = Counter()
        for s, n in self.active().items():
            for f in {self.func(f) for f in s}:
                c[f] += n
        return c

    def by_module(self) -> Counter:
        c: Counter = Counter()
        for s, n in self.active().items():
            m = re.search(r"\(([^:()]+)", s[-1])
            c[m.group(1) if m else s[-1]] += n
        return c

    def by_thread(self) -> Counter:
        c: Counter = Counter()
        for s, n in self.active().items():
            if s[0].startswith("_run_module_as_main"):
                c["main thread (event loop)"] += n
            elif any(f.startswith("_worker (concurrent/futures/thread.py") for f in s):
                c["executor threads (log appends, reads, fsync)"] += n
            else:
                c["other threads (" + self.func(s[-1]) + ")"] += n
        return c


def _table(title: str, counts: Counter, active: int, cpu_s: float, n: int = TOP) -> list[str]:
    out = [f"**{title}**", "", "| % of active | est. CPU s | function (file) |", "|---:|---:|---|"]
    for f, k in counts.most_common(n):
        share = k / active if active else 0.0
        out.append(f"| {100 * share:.1f} | {share * cpu_s:.2f} | `{f}` |")
    return out + [""]


def render(title: str, intro: list[str], profiles: list[Profile]) -> str:
    lines = [f"# Profile: {title}", "", *intro, "",
             ("| process | pid | window s | CPU s (psutil) | cores busy | samples | idle "
             "(left out) | active | active samples as s |"),
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for p in profiles:
        act = sum(p.active().values())
        lines.append(f"| {p.role} | {p.pid} | {p.wall_s:.1f} | {p.cpu_s:.2f} | "
                     f"{p.cpu_s / p.wall_s if p.wall_s else 0:.2f} | {p.total} | "
                     f"{p.total - act} | {act} | {act / p.rate:.1f} |")
    lines += ["", ("Shares are of the active samples; est. CPU s = share x the process's "
              "measured CPU over the window. Own = innermost Python frame (C code called from "
              "it included); total = anywhere on the stack."), ""]
    for p in profiles:
        act = sum(p.active().values())
        lines += [f"## {p.role}", ""]
        lines += _table("By thread", p.by_thread(), act, p.cpu_s, 6)
        lines += _table("Own time, by function", p.own(), act, p.cpu_s)
        lines += _table("Total time, by function", p.inclusive(), act, p.cpu_s)
        lines += _table("Own time, by file", p.by_module(), act, p.cpu_s, 12)
    return "\n".join(lines) + "\n"


# ============================================================================ workloads

class Run:
    """Options and output places shared by the workloads."""

    def __init__(self, opts: argparse.Namespace):
        self.opts = opts
        self.rate = opts.rate
        self.out = Path(opts.out)
        self.raw_dir = Path(opts.raw_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        self.raw_dir.mkdir(parents=True, exist_ok=True)
        self.env = dict(os.environ,
                        PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))

    def spy(self, workload: str, role: str, pid: int) -> Spy:
        slug = re.sub(r"[^a-z0-9]+", "-", role.lower()).strip("-")
        return Spy(role, pid, self.raw_dir / f"{workload}-{slug}.txt", self.rate)

    def header(self, what: str) -> list[str]:
        load = os.getloadavg()
        return [f"{what}", "",
                (f"Recorded {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by "
                f"`python -m bench.profile_produce` (py-spy {self.rate} Hz, --nonblocking), "
                f"{os.cpu_count()} CPUs; load average before: {load[0]:.2f} {load[1]:.2f} "
                f"{load[2]:.2f}. Under the profiler the run is a little slower than the "
                f"benchmark's.")]

    def write(self, workload: str, text: str) -> None:
        path = self.out / f"{workload}.md"
        path.write_text(text)
        log(f"[profile] {workload}: wrote {path}")

    def cli(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "admin.cli", *args], cwd=REPO,
                                env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)

    def profile_cli(self, workload: str, c: LocalCluster, args: list[str],
                    brokers: dict[str, int]) -> tuple[list[Profile], str]:
        """Run ``replog ARGS`` and profile it and ``brokers`` (role -> broker id) once it has
        been running ATTACH_AFTER_S; returns the profiles and the CLI's stdout."""
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        child = self.cli(*args)
        time.sleep(ATTACH_AFTER_S)
        if child.poll() is not None:
            raise RuntimeError(f"replog {args[0]} ended before the profiler attached: "
                               f"{child.stderr.read()[-300:]}")
        spies = [self.spy(workload, "client (replog " + args[0] + ")", child.pid)]
        spies += [self.spy(workload, role, c.broker(b).pid) for role, b in brokers.items()]
        for s in spies:
            s.start()
        out, err = child.communicate()
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)  # only the CLI was reaped
        for s in spies[1:]:
            s.read_cpu()
        client = spies[0]
        client.wall_s = time.perf_counter() - client.t0
        client.cpu_s = (ru1.ru_utime - ru0.ru_utime + ru1.ru_stime - ru0.ru_stime) - client.cpu0
        for s in spies:
            s.stop()
        if child.returncode != 0:
            raise RuntimeError(f"replog {args[0]} failed: {err[-300:]}")
        return [Profile.load(s) for s in spies], out


def produce(run: Run, c: LocalCluster, workload: str) -> None:
    rf3 = workload == "produce"
    topic, acks = ("tput-rf3", "all") if rf3 else ("tput-rf1", "1")
    n = run.opts.records or (500_000 if rf3 else 800_000)
    brokers = {"leader (broker 1)": 1, "follower (broker 2)": 2} if rf3 else \
        {"leader (broker 1)": 1}
    t = time.perf_counter()
    profiles, out = run.profile_cli(
        workload, c, ["produce", "--bootstrap-server", c.bootstrap_servers, "--topic", topic,
                      "--num-records", str(n), "--record-size", str(RECORD_BYTES),
                      "--throughput", "-1", "--producer-props", f"acks={acks}",
                      "batch.size=65536"], brokers)
    wall = time.perf_counter() - t
    summary = out.strip().splitlines()[-1] if out.strip() else "?"
    rf = "RF 3 acks=all (min.insync.replicas=2)" if rf3 else "RF 1 acks=1"
    m = re.search(r"([\d.]+) records/sec", summary)
    rec_s = float(m.group(1)) if m else n / wall
    window_mb = rec_s * profiles[0].wall_s * RECORD_BYTES / MB  # the run's mean rate
    intro = run.header(
        f"`replog produce --num-records {n} --record-size {RECORD_BYTES} --throughput -1 "
        f"--producer-props acks={acks} batch.size=65536` to `{topic}` ({rf}, 60 partitions all "
        f"led by broker 1), on a fresh 3-broker cluster shaped like `bench client`'s.")
    intro += ["", f"The CLI's summary line: `{summary}`", "",
              f"CPU s per GB over the profiled window (about {window_mb:.0f} MB of the "
              f"{n * RECORD_BYTES / MB:.0f} MB, at the run's mean rate): " + ", ".join(
                  f"{p.role} {p.cpu_s / (window_mb / 1000):.1f}" for p in profiles
                  if window_mb) + "."]
    run.write(workload, render(f"{workload}: replog produce, {rf}, 64 KiB batches", intro,
                               profiles))


def lean(run: Run, c: LocalCluster) -> None:
    seconds, warmup = 8.0, 1.5

    async def go() -> tuple[list[Profile], float, float]:
        brokers = Brokers()
        try:
            async with AdminClient(c.bootstrap_servers, default_api_timeout_ms=120000) as a:
                await a.create_topic("lean6", replica_assignment=rotating_assignment(6, 3),
                                     configs={"min.insync.replicas": "2"})
            await wait_partitions(brokers, c, "lean6", 6, preferred_leads, "leaders", 60.0)
            task = asyncio.create_task(lean_produce(brokers, c, "lean6", -1, make_batch(),
                                                    warmup, seconds))
            await asyncio.sleep(warmup)
            spies = [run.spy("lean", f"broker {b} (leads 2 of 6, follows 4)", c.broker(b).pid)
                     for b in (1, 2)]
            for s in spies:
                s.start()
            s_cl, _s_gen, _, errors = await task
            for s in spies:
                s.read_cpu()
                s.stop()
            if errors:
                log(f"[profile] lean: errors {dict(errors)}")
            return [Profile.load(s) for s in spies], s_cl.mb_s, s_cl.cpu_s_per_gb
        finally:
            await brokers.close()

    profiles, mb_s, cl_gb = asyncio.run(go())
    intro = run.header(
        "`bench cluster` (a)'s lean generator (this process; pre-built batches of 64 x 1 KiB "
        "records straight to the leaders, 4 requests in flight per broker), acks=all to `lean6` "
        "(6 partitions RF 3, min.insync.replicas=2, 2 led by each broker).")
    intro += ["", (f"Under the profiler: {mb_s:.1f} MB/s acknowledged; cluster (3 brokers + "
              f"controller) {cl_gb:.1f} CPU s/GB.")]
    run.write("lean", render("lean: the lean generator, RF 3 acks=all, 6 partitions",
                             intro, profiles))


def e2e(run: Run, c: LocalCluster) -> None:
    rate, n = 20.0, run.opts.records or 400
    # What the brokers spend with no load at all (followers' and idle consumers' long polls,
    # timers), to tell it from what each record costs.
    idle_s = 5.0
    before = {b: sum(proc_cpu(c.broker(b).pid)) for b in (1, 2)}
    time.sleep(idle_s)
    idle = {b: (sum(proc_cpu(c.broker(b).pid)) - before[b]) / idle_s for b in (1, 2)}
    profiles, out = run.profile_cli(
        "e2e", c, ["e2e-latency", "--bootstrap-server", c.bootstrap_servers, "--topic", "lat60",
                   "--num-records", str(n), "--record-size", "100", "--producer-acks", "all",
                   "--throughput", str(rate)],
        {"broker 1 (leads 20 of 60, follows 40)": 1, "broker 2 (leads 20, follows 40)": 2})
    lines = [x for x in out.splitlines() if x.startswith(("Avg", "Percentiles", "Max"))]
    records = rate * profiles[0].wall_s
    intro = run.header(
        f"`replog e2e-latency --num-records {n} --record-size 100 --producer-acks all "
        f"--throughput {rate:.0f}` on `lat60` (60 partitions RF 3, min.insync.replicas=2, "
        f"leaders spread over the brokers).")
    intro += ["", "The tool's summary: " + "; ".join(f"`{x}`" for x in lines), "",
              f"CPU ms per record over the profiled window (~{records:.0f} records): " +
              ", ".join(f"{p.role} {1000 * p.cpu_s / records:.2f}" for p in profiles) + ".",
              "", "The same less what the broker spends idle (measured over "
              f"{idle_s:.0f} s with no load just before: " +
              ", ".join(f"broker {b} {1000 * v:.0f} ms/s" for b, v in idle.items()) +
              "): " + ", ".join(
                  f"{p.role} {1000 * (p.cpu_s - idle[b] * p.wall_s) / records:.2f}"
                  for p, b in zip(profiles[1:], (1, 2))) + "."]
    run.write("e2e", render("e2e: replog e2e-latency, 20 rec/s, acks=all RF 3, 60 partitions",
                            intro, profiles))


def shutdown(run: Run, root: str) -> None:
    n = run.opts.partitions
    timeout = 120.0 + n * 0.06
    topic = f"lead1-{n}"
    c = start_cluster(root, f"shutdown-{n}")

    async def go() -> tuple[list[Profile], dict]:
        brokers = Brokers()
        try:
            async with AdminClient(c.bootstrap_servers, default_api_timeout_ms=int(timeout * 1e3),
                                   request_timeout_ms=int(timeout * 1e3)) as a:
                await a.create_topic(topic, replica_assignment={p: [1, 2, 3] for p in range(n)},
                                     timeout_ms=int(timeout * 1000))
            await wait_partitions(brokers, c, topic, n, preferred_leads,
                                  "broker 1 leading, ISR full", timeout, interval=0.5)
            tails = {b: EventTail(c.broker(b).event_log_file) for b in (2, 3)}
            ctl = c.controllers[min(c.controllers)]
            spies = [run.spy("shutdown", f"broker {b} (takes leaderships over)",
                             c.broker(b).pid) for b in (2, 3)]
            spies.append(run.spy("shutdown", "controller", ctl.pid))
            for s in spies:
                s.start()
            t0 = time.time()
            b1 = c.broker(1)
            b1.send_signal(signal.SIGTERM)
            await asyncio.to_thread(b1.proc.wait, timeout)
            t_exit = time.time()
            got, last = await wait_new_leaders(tails, topic, n, time.time() + timeout)
            for s in spies:
                s.read_cpu()
                s.stop()
            return [Profile.load(s) for s in spies], {
                "exit_s": round(t_exit - t0, 2), "new_leaders": got,
                "last_become_leader_s": round(last - t0, 2) if last else None}
        finally:
            await brokers.close()

    try:
        profiles, facts = asyncio.run(go())
    finally:
        c.stop(graceful=False)
    intro = run.header(
        f"Controlled shutdown (SIGTERM) of broker 1 leading all {n} partitions of `{topic}` "
        f"(RF 3, replicas [1, 2, 3], ISR full), as in `bench cluster` (c); sampled from SIGTERM "
        f"until broker 1 exited and brokers 2/3 had logged `become_leader` for every "
        f"partition.")
    intro += ["", (f"SIGTERM -> broker 1's exit {facts['exit_s']} s; -> the last become_leader "
              f"{facts['last_become_leader_s']} s ({facts['new_leaders']} partitions).")]
    run.write("shutdown", render(f"shutdown: controlled shutdown of a broker leading {n} "
                                 f"partitions", intro, profiles))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.profile_produce", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workloads", default=",".join(WORKLOADS),
                   help=f"comma-separated, of {', '.join(WORKLOADS)}")
    p.add_argument("--out", default=str(REPO / "docs" / "profiles"),
                   help="where the summaries go (default docs/profiles)")
    p.add_argument("--raw-dir", default=str(RESULTS_DIR / "profiles"),
                   help="where py-spy's raw samples go (default bench/results/profiles)")
    p.add_argument("--rate", type=int, default=100, help="samples per second (default 100)")
    p.add_argument("--records", type=int, default=None,
                   help="records of the produce/e2e runs (default per workload)")
    p.add_argument("--partitions", type=int, default=10000,
                   help="partitions led by the broker shut down (default 10000)")
    p.add_argument("--data-dir", default="/tmp", help="parent of the clusters' data dirs")
    opts = p.parse_args(argv)
    wanted = [w.strip() for w in opts.workloads.split(",") if w.strip()]
    unknown = set(wanted) - set(WORKLOADS)
    if unknown:
        p.error(f"unknown workloads {sorted(unknown)}; known: {', '.join(WORKLOADS)}")
    py_spy()
    run = Run(opts)
    root = tempfile.mkdtemp(prefix="replog-profile-", dir=opts.data_dir)
    try:
        if set(wanted) - {"shutdown"}:
            c = start_cluster(root, "profile")
            try:
                asyncio.run(create_topics(c))
                for w in wanted:
                    if w in ("produce", "produce-rf1"):
                        produce(run, c, w)
                    elif w == "lean":
                        lean(run, c)
                    elif w == "e2e":
                        e2e(run, c)
            finally:
                c.stop(graceful=False)
        if "shutdown" in wanted:
            shutdown(run, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
