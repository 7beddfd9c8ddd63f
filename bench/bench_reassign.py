"""Reassignment (design.md#reassignment, KIP-455): an unthrottled reassignment of ~1 GB across 100
partitions, as MB/s against the raw replication throughput measured in the same run, and the
producer's p99 latency during the move against p99 without a move.

Real processes: a LocalCluster of one controller and three brokers (one log dir each). Topic
``move``: 100 partitions, replicas [1, 2]. One run, on a fresh cluster:

1. Broker 2 stops (controlled shutdown) and SIZE bytes are produced to ``move`` (100 KB
   records, acks=1, spread evenly), so only broker 1 holds them.
2. **Raw replication**: broker 2 restarts and catches up, a follower copying the same bytes of
   the same 100 partitions from the same leader over the fetch path, with no reassignment
   involved. Its rate is the bytes gained (DescribeLogDirs, every 0.1 s) between 10% and 90% of
   SIZE over the time that took, which leaves out the process start-up and the tail.
3. **Reassignment**: AlterPartitionReassignments moves all 100 partitions [1, 2] -> [3, 2]
   (RAR and AR share broker 2; broker 3 copies SIZE from leader 1, then broker 1's replicas are
   deleted). Its copy rate is measured as in 2, on broker 3; the end-to-end time runs from the
   request to ListPartitionReassignments coming back empty (ISR join, leader election from
   RAR, removal of the old replicas, the ZooKeeper writes), and SIZE over it is the end-to-end
   MB/s. The ratios are against the raw rate of the same run.

Latency: throughout, a separate process runs the real ``client.producer.Producer``
(acks=all, linger 1 ms) sending 200-byte records at a fixed 200 records/s to topic ``lat``
(6 partitions, RF 3, min.insync.replicas=2, leaders on all three brokers). Each record's
latency is send() to acknowledgement; records are grouped by the phase their send fell in:
idle (10 s before the raw catch-up, 10 s before the move, 10 s after it, ISR full each time),
the raw catch-up, and the move. p50/p99 per phase (nearest rank), the run's ratio move/idle.
With 2 cores the brokers, ZooKeeper and the load all compete for CPU: the latency during a
copy measures that contention as much as the replication path.

The figures are the median over runs (default 3; 1 with ``--quick``, which also moves 100 MB
instead of 1 GB). ``REPLOG_BENCH_REASSIGN_MB`` (environment) sets the size in MB.
``python -m bench reassign [--quick] [--runs N] [--data-dir DIR]`` (or
``python -m bench.bench_reassign`` with the same options).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import sys
import time

from bench import MB, log, median
from bench.harness.runner import report, run_each
from harness.polling import async_wait_until

PARTITIONS = 100
RECORD = 100_000
FULL_MB = 1000
QUICK_MB = 100
LAT_PARTITIONS = 6
LAT_RATE = 200  # records/s
LAT_VALUE = 200  # bytes
IDLE_S = 10.0
OVERRIDES = {"zookeeper.session.timeout.ms": 6000, "auto.leader.rebalance.enable": "false",
             "replica.lag.time.max.ms": 10000}
MOVE = [("move", p) for p in range(PARTITIONS)]


# ============================================================================ latency prober

def _probe_main(bootstrap: str, conn) -> None:
    asyncio.run(_probe(bootstrap, conn))


async def _probe(bootstrap: str, conn) -> None:
    """Send at LAT_RATE until the parent says stop; then send back (sent, latency or None)
    per record, times from time.monotonic() (CLOCK_MONOTONIC: the parent's clock too)."""
    from client.producer import Producer

    out: list[list] = []
    value = b"x" * LAT_VALUE

    def done(rec: list, f: asyncio.Future) -> None:
        if not f.cancelled() and f.exception() is None:
            rec[1] = time.monotonic() - rec[0]

    async with Producer(bootstrap, acks="all", linger_ms=1, delivery_timeout_ms=30000,
                        request_timeout_ms=10000) as p:
        await p.partitions_for("lat")
        conn.send("ready")
        loop = asyncio.get_running_loop()
        next_t = loop.time()
        i = 0
        while not conn.poll():
            rec = [time.monotonic(), None]
            out.append(rec)
            (await p.send("lat", value, partition=i % LAT_PARTITIONS)).add_done_callback(
                lambda f, rec=rec: done(rec, f))
            i += 1
            next_t += 1 / LAT_RATE
            delay = next_t - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            else:
                next_t = loop.time()  # fell behind: no burst to catch up
        await p.flush()
    conn.send(out)


class Prober:
    def __init__(self, bootstrap: str):
        self.conn, child = multiprocessing.Pipe()
        self.proc = multiprocessing.get_context("spawn").Process(
            target=_probe_main, args=(bootstrap, child), daemon=True)
        self.windows: dict[str, list[tuple[float, float]]] = {}

    def start(self) -> None:
        self.proc.start()
        if not self.conn.poll(60) or self.conn.recv() != "ready":
            raise RuntimeError("the latency prober did not start")

    def mark(self, phase: str, t0: float, t1: float) -> None:
        self.windows.setdefault(phase, []).append((t0, t1))

    async def idle(self, seconds: float = IDLE_S) -> None:
        t0 = time.monotonic()
        await asyncio.sleep(seconds)
        self.mark("idle", t0, time.monotonic())

    def stop(self) -> dict[str, dict]:
        self.conn.send("stop")
        records = self.conn.recv() if self.conn.poll(60) else []
        self.proc.join(10)
        out = {}
        for phase, windows in self.windows.items():
            inside = [lat for sent, lat in records if any(a <= sent < b for a, b in windows)]
            ok = [x for x in inside if x is not None]
            out[phase] = {"records": len(inside), "failed": len(inside) - len(ok),
                          "seconds": round(sum(b - a for a, b in windows), 1),
                          "p50_ms": round(pct(ok, 50) * 1000, 2) if ok else None,
                          "p99_ms": round(pct(ok, 99) * 1000, 2) if ok else None,
                          "p99_ms_per_window": [_p99_ms([lat for sent, lat in records
                                                         if a <= sent < b])
                                                for a, b in windows]}
        return out


def _p99_ms(latencies: list[float | None]) -> float | None:
    ok = [x for x in latencies if x is not None]
    return round(pct(ok, 99) * 1000, 1) if ok else None


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    s = sorted(values)
    return s[max(0, min(len(s) - 1, int(-(-q * len(s) // 100)) - 1))]


# ============================================================================ one run

async def _size(admin, broker: int) -> int:
    from client.errors import KafkaError
    try:
        return sum((await admin.replica_sizes(broker, MOVE)).values())
    except KafkaError:  # a restarted broker not yet in the metadata: nothing copied yet
        return 0


async def _wait(cond, timeout: float, what: str):
    return await async_wait_until(cond, timeout, interval=0.1, timed_out=lambda _: TimeoutError(
        f"timed out after {timeout:g} s waiting for {what}"))


async def _isr_full(admin, topic: str, rf: int) -> bool:
    return all(len(s.isr) == rf and s.leader >= 0
               for s in (await admin.describe_topics([topic]))[topic].partitions)


async def _copy(admin, broker: int, target: int, until) -> dict:
    """Poll ``broker``'s size of the ``move`` replicas every 0.1 s until ``until()`` (and it
    holds ``target`` bytes); the 10%-90% rate and when it got all the bytes."""
    t0 = time.monotonic()
    samples: list[tuple[float, int]] = []
    limit = 600 + target / 5e6
    while time.monotonic() - t0 < limit:
        size = await _size(admin, broker)
        samples.append((time.monotonic() - t0, size))
        if size >= target and await until():
            break
        await asyncio.sleep(0.1)
    else:
        raise TimeoutError(f"broker {broker} never held the {target} bytes")
    full = next(t for t, s in samples if s >= target)
    lo = next((t, s) for t, s in samples if s >= 0.1 * target)
    hi = next((t, s) for t, s in samples if s >= 0.9 * target)
    rate = (hi[1] - lo[1]) / (hi[0] - lo[0]) if hi[0] > lo[0] else None
    return {"rate_Bps": rate, "all_bytes_s": full, "done_s": time.monotonic() - t0}


async def _produce(bs: str, nbytes: int) -> float:
    from client.producer import Producer

    n = nbytes // RECORD
    value = os.urandom(RECORD)
    t0 = time.monotonic()
    async with Producer(bs, acks=1, linger_ms=5, batch_size=1 << 20,
                        buffer_memory=256 << 20) as p:
        futures = [await p.send("move", value, partition=i % PARTITIONS) for i in range(n)]
        for f in futures:
            await f
    return n * RECORD / (time.monotonic() - t0)


async def one_run(data_dir: str, nbytes: int) -> dict:
    from client.admin_client import AdminClient
    from harness.local_cluster import LocalCluster

    c = LocalCluster(data_dir, brokers=3, controllers=1, log_dirs_per_broker=1,
                     overrides=OVERRIDES, startup_timeout_s=180.0)
    c.start()
    prober = None
    try:
        bs = c.bootstrap_servers
        async with AdminClient(bs, default_api_timeout_ms=120000) as admin:
            await admin.create_topic("move", replica_assignment={
                p: [1, 2] for p in range(PARTITIONS)})
            await admin.create_topic("lat", replica_assignment={
                p: [(p + i) % 3 + 1 for i in range(3)] for p in range(LAT_PARTITIONS)},
                configs={"min.insync.replicas": "2"})
            for topic, rf in (("move", 2), ("lat", 3)):
                await _wait(lambda t=topic, r=rf: _isr_full(admin, t, r), 120, f"{topic} ISR")
        prober = Prober(bs)
        prober.start()
        await asyncio.sleep(2.0)  # its first requests (connections, metadata) are not idle
        await prober.idle()

        await c.broker(2).astop()
        produce_Bps = await _produce(bs, nbytes)
        async with AdminClient(bs, default_api_timeout_ms=120000) as admin:
            target = await _size(admin, 1)
        log(f"[reassign] {target / MB:.0f} MB on broker 1 ({produce_Bps / MB:.0f} MB/s "
            f"produced, acks=1); broker 2 catching up")

        # (2) raw replication: broker 2's follower catches up the same bytes
        t0 = time.monotonic()
        await c.broker(2).astart()
        async with AdminClient(bs, default_api_timeout_ms=120000) as admin:  # new address
            raw = await _copy(admin, 2, target, lambda: _isr_full(admin, "move", 2))
            prober.mark("catch-up", t0, time.monotonic())
            await _wait(lambda: _isr_full(admin, "lat", 3), 120, "lat ISR after the restart")
            await prober.idle()

            # (3) the reassignment: [1, 2] -> [3, 2] for all 100 partitions
            # Broker 3 is polled from before the request: the controller starts the 100
            # partitions one after the other, and copying begins before the request returns.
            accepted = asyncio.Event()

            async def finished() -> bool:
                return accepted.is_set() and \
                    not await admin.list_partition_reassignments(timeout_ms=60000)

            t0 = time.monotonic()
            copying = asyncio.create_task(_copy(admin, 3, target, finished))
            errors = await admin.alter_partition_reassignments(
                {tp: [3, 2] for tp in MOVE}, timeout_ms=60000)
            bad = {tp: e for tp, e in errors.items() if e is not None}
            if bad:
                copying.cancel()
                raise RuntimeError(f"reassignment refused: {bad}")
            request_s = time.monotonic() - t0
            accepted.set()
            moved = await copying
            t_move = time.monotonic() - t0
            prober.mark("move", t0, time.monotonic())
            await prober.idle()
        return {"bytes": target, "produce_Bps": produce_Bps, "raw": raw, "move": moved,
                "move_end_to_end_s": t_move, "request_s": request_s, "latency": prober.stop()}
    finally:
        if prober is not None and prober.proc.is_alive():
            prober.proc.kill()
        c.stop(graceful=False)


# ============================================================================ main

def _mbs(x: float | None) -> float | None:
    return round(x / MB, 1) if x else None


def main(opts) -> dict:
    size_mb = int(os.environ.get("REPLOG_BENCH_REASSIGN_MB") or
                  (QUICK_MB if opts.quick else FULL_MB))
    nbytes = size_mb * MB
    results = run_each(opts, lambda d: one_run(d, nbytes), lambda i, n, r: (
        f"[reassign] run {i + 1}/{n}: raw {_mbs(r['raw']['rate_Bps'])} MB/s, move copy "
        f"{_mbs(r['move']['rate_Bps'])} MB/s, end to end {r['move_end_to_end_s']:.1f} s; "
        f"p99 idle {r['latency']['idle']['p99_ms']} ms, move "
        f"{r['latency']['move']['p99_ms']} ms"))
    runs = len(results)

    def med(f):
        xs = [f(r) for r in results]
        xs = [x for x in xs if x is not None]
        return median(xs) if xs else None

    raw = med(lambda r: r["raw"]["rate_Bps"])
    copy = med(lambda r: r["move"]["rate_Bps"])
    e2e_s = med(lambda r: r["move_end_to_end_s"])
    e2e = med(lambda r: r["bytes"] / r["move_end_to_end_s"])
    lat = {ph: {k: med(lambda r, ph=ph, k=k: r["latency"][ph][k])
                for k in ("p50_ms", "p99_ms", "records", "failed")}
           for ph in ("idle", "catch-up", "move")}
    figure = {
        "size_MB": round(med(lambda r: r["bytes"]) / MB, 1), "partitions": PARTITIONS,
        "runs": runs,
        "raw_replication_MBps": _mbs(raw),
        "move_copy_MBps": _mbs(copy),
        "move_end_to_end_s": round(e2e_s, 2),
        "move_end_to_end_MBps": _mbs(e2e),
        # ratios taken per run (the same run's raw rate), then the median
        "ratio_copy_to_raw": round(med(lambda r: r["move"]["rate_Bps"] / r["raw"]["rate_Bps"]
                                       if r["move"]["rate_Bps"] and r["raw"]["rate_Bps"]
                                       else None), 3),
        "ratio_end_to_end_to_raw": round(med(
            lambda r: r["bytes"] / r["move_end_to_end_s"] / r["raw"]["rate_Bps"]
            if r["raw"]["rate_Bps"] else None), 3),
        "alter_request_s": round(med(lambda r: r["request_s"]), 2),
        "move_all_bytes_on_target_s": round(med(lambda r: r["move"]["all_bytes_s"]), 2),
        "raw_all_bytes_s": round(med(lambda r: r["raw"]["all_bytes_s"]), 2),
        "raw_runs_MBps": [_mbs(r["raw"]["rate_Bps"]) for r in results],
        "move_end_to_end_runs_s": [round(r["move_end_to_end_s"], 2) for r in results],
        "latency": lat,
        "p99_ratio_move_to_idle": round(med(
            lambda r: r["latency"]["move"]["p99_ms"] / r["latency"]["idle"]["p99_ms"]
            if r["latency"]["move"]["p99_ms"] and r["latency"]["idle"]["p99_ms"] else None),
            2),
        "latency_load": f"{LAT_RATE} records/s x {LAT_VALUE} B, acks=all, RF 3, "
                        f"{LAT_PARTITIONS} partitions",
        "produce_MBps_acks1": _mbs(med(lambda r: r["produce_Bps"])),
    }
    print(f"== reassignment, unthrottled: {figure['size_MB']} MB across {PARTITIONS} "
          f"partitions, [1,2] -> [3,2] (median of {runs})")
    print("   raw replication = a restarted follower (broker 2) catching up the same bytes of "
          "the same partitions from the same leader, no reassignment; 10%-90% of the bytes")
    print(f"   raw replication       {figure['raw_replication_MBps']:>8} MB/s   "
          f"runs {figure['raw_runs_MBps']}")
    print(f"   move, copy (10%-90%)  {figure['move_copy_MBps']:>8} MB/s   "
          f"ratio to raw {figure['ratio_copy_to_raw']}")
    print(f"   move, end to end      {figure['move_end_to_end_MBps']:>8} MB/s   "
          f"({figure['move_end_to_end_s']} s from the request to ListPartitionReassignments "
          f"empty; runs {figure['move_end_to_end_runs_s']} s); ratio to raw "
          f"{figure['ratio_end_to_end_to_raw']}")
    print(f"   the request took {figure['alter_request_s']} s to answer (the controller "
          f"starts the partitions one by one); broker 3 held all the bytes "
          f"{figure['move_all_bytes_on_target_s']} s after it was sent (the raw follower: "
          f"{figure['raw_all_bytes_s']} s after its restart)")
    print(f"   producer latency ({figure['latency_load']}), real Producer in its own process:")
    for ph in ("idle", "catch-up", "move"):
        x = lat[ph]
        print(f"     {ph:<9} p50 {x['p50_ms']:>8} ms   p99 {x['p99_ms']:>8} ms   "
              f"({x['records']:.0f} records, {x['failed']:.0f} failed)")
    print(f"     idle p99 per window, run 1 (before the catch-up, before the move, after "
          f"it): {results[0]['latency']['idle']['p99_ms_per_window']} ms")
    print(f"   p99 during the move / without a move: {figure['p99_ratio_move_to_idle']}x")
    return report("reassign", "unthrottled_move", figure, (), opts.data_dir, runs=results)


if __name__ == "__main__":  # the same options as ``python -m bench reassign``
    from bench.__main__ import main as run_benchmarks
    sys.exit(run_benchmarks(["reassign", *sys.argv[1:]]))
