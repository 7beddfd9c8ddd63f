"""Replicated-cluster figures of SPEC "Performance".

Every figure runs against real processes: a ``LocalCluster`` (ZooKeeper, one controller, three
brokers with two log dirs each) started by the benchmark under ``--data-dir`` (default /tmp),
with ``zookeeper.session.timeout.ms`` = 3000 (printed next to the figures that depend on it) and
``auto.leader.rebalance.enable=false`` (the benchmark moves leadership itself, so no periodic
preferred election fires in the middle of a measurement). Nothing is asserted: the figures are
printed as tables (target beside each) plus one JSON line per figure, and saved to
``bench/results/cluster.json``.

(a) Produce throughput, 3 brokers, 1 KiB records, 64 per batch (64 KiB of values; the batch is
    built once with ``build_batch``), 6 partitions with 2 led by each broker. The load generator
    is lean, in this process: one pre-serialized ProduceRequest per leader carrying one batch for
    each partition it leads (as Kafka's producer groups them), sent straight to the leader over
    grpc.aio with a fixed number of requests in flight per broker; only acknowledged bytes
    (error_code 0) count, and only those acknowledged inside the timed window (after a warm-up).
    RF=3 acks=all (min.insync.replicas=2) and RF=1 acks=1 run in the same round, order rotated
    per round; the ratio is the median of the per-round ratios. CPU s/GB = user+sys of the
    broker and controller processes (their own CPU times, before/after) per GB acknowledged by
    the client (MB/GB decimal, counting record values: 1 KiB per record), the load generator's own
    (this process) and ZooKeeper's reported apart. Secondary lines: the same with the real
    ``client.Producer`` (batch_size=65536, linger_ms=5), what users run.
(b) Client-observed unavailability after SIGKILL of a leader: 12 partitions RF=3
    min.insync.replicas=2 (4 led per broker), a prober producing one small record acks=all to
    every partition every 10 ms straight to its leader (one request in flight per partition; on
    NOT_LEADER_OR_FOLLOWER and similar errors or a transport error it refreshes metadata with a
    Metadata RPC, coalesced and at most one per 20 ms), then SIGKILL of the broker leading the
    most partitions. Per partition it led: the gap between its last success before the kill and
    its first success after; p50/p99 over those partitions (pooled over runs) beside the session
    timeout. The same gap for the partitions it only followed (acks=all waits until the
    controller drops it from the ISR) is reported apart, as is the controller's detection time
    (kill -> broker_failed event). Between runs the broker restarts, the ISR fills again and a
    preferred election restores the leaders.
(c) Controlled shutdown of a broker leading N partitions (N = 1k and 10k; fresh cluster per N):
    topic of N partitions RF=3 with replica_assignment {p: [1, 2, 3]}, broker 1 leading all,
    ISR full; SIGTERM to broker 1 and (i) the time to its ``controlled_shutdown_done`` event
    (event timestamps are wall clock, same host) and (ii) to the process exit (waitpid). Two
    clients run meanwhile, until each partition they write served a request sent after the
    exit: a light prober (12 of the partitions, every 50 ms, acks=all, straight to the leader,
    no retries) reports the longest stretch without a success (the client-visible produce gap)
    and its error answers; and the library's ``Producer`` (acks=all, default retries, 240
    records/s over 24 other partitions) reports every record that FAILED to the client, and the
    longest send -> ack of a record sent during the shutdown. The verdict at 10k is what clients
    see: max gap <= 3 s and no record failed to the Producer; the exit time, which
    includes closing 10k logs after leadership has moved, is reported apart.
(d) Leader elections per second after a broker failure, same topic: SIGKILL broker 1 and, from
    the controller's event log, the span from its ``broker_failed`` event to the last
    ``leader_election`` event of those N partitions (events are logged once the ZooKeeper writes
    are done, so the span includes them); elections/s = N / span. Detection (kill ->
    broker_failed) is reported apart, beside the session timeout, and so is the time until the
    new leaders logged ``become_leader`` for the last partition. At 10k the failure run follows
    the controlled shutdown without restoring broker 1 (that takes minutes): it kills broker 2,
    which took over all 10k leaderships in (c) (ISR {2, 3}), so the same N elections happen.

Run: ``python -m bench cluster [--quick] [--runs N] [--data-dir DIR]``. ``--runs`` sets the runs
of (a), (b) and of (c)/(d) at 1k; 10k is measured once in the default run (its setup takes
minutes) and skipped with ``--quick``. ``REPLOG_BENCH_CLUSTER_FIGURES=a,b`` (environment)
restricts the run to some figures. The cluster, the CPU meters, the event-log tails and the
straight-to-broker channels are the shared harness (``bench/harness``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from functools import partial

import grpc
import grpc.aio
from prometheus_client.parser import text_string_to_metric_families

from bench import (
    GB,
    Sample,
    json_line,
    log,
    machine_info,
    median,
    paired_ratio,
    save_results,
    summarize,
)
from bench.harness import (
    CLUSTER_OVERRIDES,
    SESSION_TIMEOUT_MS,
    Brokers,
    CpuMeter,
    EventTail,
    cluster_pids,
    isr_full,
    preferred_leads,
    restore,
    rotating_assignment,
    start_cluster,
    topic_view,
    wait_partitions,
    zk_pid,
)
from client import AdminClient, KafkaError, Producer
from common import records as rec
from common.errors import ErrorCode
from common.rpc import replog_pb2 as pb
from harness.local_cluster import LocalCluster

NAME = "cluster"
RECORD_BYTES = 1024
RECORDS_PER_BATCH = 64
TPUT_PARTITIONS = 6
IN_FLIGHT_PER_BROKER = 4
PROBE_PARTITIONS = 12
PROBE_INTERVAL_S = 0.010
PROBE_VALUE_BYTES = 100
SHUTDOWN_PROBE_PARTITIONS = 12
SHUTDOWN_PROBE_INTERVAL_S = 0.050
SHUTDOWN_PRODUCER_PARTITIONS = 24
SHUTDOWN_PRODUCER_RATE = 240.0  # records/s in all: each partition every 100 ms
METADATA_MIN_INTERVAL_S = 0.020

TARGET_MB_S = 150.0
TARGET_RATIO = 0.5
TARGET_UNAVAIL_MARGIN_S = 0.5
TARGET_UNAVAIL_STRETCH_S = 1.5
TARGET_SHUTDOWN_S = 3.0
TARGET_ELECTIONS_S = 5000.0

_RETRY_CODES = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.FENCED_LEADER_EPOCH,
                ErrorCode.KAFKA_STORAGE_ERROR}


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


# ============================================================================ plumbing


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(-(-q * len(s) // 100)) - 1))
    return s[k]


def make_batch(n: int = RECORDS_PER_BATCH, size: int = RECORD_BYTES) -> bytes:
    return rec.build_batch([rec.ProducerRecord(key=None, value=os.urandom(size))
                            for _ in range(n)])


# ============================================================================ (a) throughput

# (sample name, labels) of the brokers' counters that requests_per_gb reads.
_REQUEST_SAMPLES = {
    "produce": ("kafka_network_requestmetrics_requests_total", {"request": "Produce"}),
    "fetch_follower": ("kafka_network_requestmetrics_requests_total",
                       {"request": "FetchFollower"}),
    "produce_bytes": ("kafka_server_brokertopicmetrics_bytesin_total", {}),
    "fetch_follower_bytes": ("kafka_server_brokertopicmetrics_replicationbytesout_total", {}),
}


def _scrape_requests(c: LocalCluster) -> dict[str, float]:
    """The brokers' request and byte counters, summed (Kafka's RequestMetrics / BytesIn)."""
    total = dict.fromkeys(_REQUEST_SAMPLES, 0.0)
    for h in c.brokers.values():
        with urllib.request.urlopen(h.metrics_url, timeout=10) as resp:
            samples = [s for f in text_string_to_metric_families(resp.read().decode())
                       for s in f.samples]
        for key, (name, labels) in _REQUEST_SAMPLES.items():
            total[key] += sum(s.value for s in samples if s.name == name and s.labels == labels)
    return total


def requests_per_gb(before: dict[str, float], after: dict[str, float], nbytes: int) -> dict:
    """Requests per GB acknowledged, and their mean sizes (what bench transport costs)."""
    d = {k: after[k] - before[k] for k in before}
    gb = nbytes / GB
    return {"produce": round(d["produce"] / gb, 1) if gb else None,
            "fetch_follower": round(d["fetch_follower"] / gb, 1) if gb else None,
            "produce_bytes": round(d["produce_bytes"] / d["produce"]) if d["produce"] else 0,
            "fetch_follower_bytes": round(d["fetch_follower_bytes"] / d["fetch_follower"])
            if d["fetch_follower"] else 0}


async def lean_produce(brokers: Brokers, c: LocalCluster, topic: str, acks: int, batch: bytes,
                       warmup_s: float, seconds: float
                       ) -> tuple[Sample, Sample, float, Counter, dict]:
    """Pre-built batches straight to the leaders; returns (cluster CPU sample, load generator
    CPU sample, ZooKeeper CPU s, error counts, requests per GB)."""
    view = await topic_view(brokers, c, topic)
    parts = next(ps for ps in view.values() if ps)
    addresses = {b: c.broker(b).address for b in c.brokers}
    by_leader: dict[int, list[int]] = {}
    for p in parts:
        by_leader.setdefault(p.leader_id, []).append(p.partition)
    acked = [0]
    errors: Counter = Counter()
    stop = asyncio.Event()

    async def worker(call, payload: bytes) -> None:
        while not stop.is_set():
            try:
                resp = await call(payload, timeout=30.0)
            except grpc.aio.AioRpcError as e:
                errors[e.code().name] += 1
                await asyncio.sleep(0.05)
                continue
            ok = 0
            for tr in resp.responses:
                for pr in tr.partition_responses:
                    if pr.error_code == 0:
                        ok += 1
                    else:
                        errors[ErrorCode(pr.error_code).name] += 1
            acked[0] += ok

    tasks = []
    for leader, ps in sorted(by_leader.items()):
        req = pb.ProduceRequest(acks=acks, timeout_ms=30000, topic_data=[pb.ProduceTopicData(
            topic=topic, partition_data=[pb.ProducePartitionData(partition=p, records=batch)
                                         for p in ps])])
        payload = req.SerializeToString()
        call = brokers.produce(addresses[leader])
        tasks += [asyncio.create_task(worker(call, payload))
                  for _ in range(IN_FLIGHT_PER_BROKER)]
    try:
        await asyncio.sleep(warmup_s)
        meter, me, zk = CpuMeter(cluster_pids(c)), CpuMeter([os.getpid()]), CpuMeter([zk_pid(c)])
        r0 = await asyncio.to_thread(_scrape_requests, c)
        meter.start(), me.start(), zk.start()
        a0, t0 = acked[0], time.perf_counter()
        await asyncio.sleep(seconds)
        a1, t1 = acked[0], time.perf_counter()
        cu, cs = meter.stop()
        mu, ms = me.stop()
        zu, zs = zk.stop()
        r1 = await asyncio.to_thread(_scrape_requests, c)
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
    nrec = (a1 - a0) * RECORDS_PER_BATCH
    nbytes = nrec * RECORD_BYTES
    # The scrapes sit just outside the timed window, so the counts slightly overstate it: a
    # few ms of requests over an 8 s window.
    return (Sample(t1 - t0, cu, cs, nbytes, nrec), Sample(t1 - t0, mu, ms, nbytes, nrec),
            zu + zs, errors, requests_per_gb(r0, r1, nbytes))


async def producer_produce(c: LocalCluster, topic: str, acks: str, warmup_s: float,
                           seconds: float) -> tuple[Sample, Sample, float, Counter, None]:
    """The real client Producer: send() 1 KiB records as fast as it accepts them."""
    value = os.urandom(RECORD_BYTES)
    acked = [0]
    errors: Counter = Counter()

    def done(f: asyncio.Future) -> None:
        if f.cancelled():
            errors["cancelled"] += 1
        elif f.exception() is not None:
            errors[type(f.exception()).__name__] += 1
        else:
            acked[0] += 1

    async with Producer(c.bootstrap_servers, acks=acks, batch_size=65536, linger_ms=5) as prod:
        await prod.partitions_for(topic)
        send = prod.send
        meter, me, zk = CpuMeter(cluster_pids(c)), CpuMeter([os.getpid()]), CpuMeter([zk_pid(c)])
        t_start = time.perf_counter()
        t_measure = t_start + warmup_s
        t_end = t_measure + seconds
        measuring = False
        a0 = t0 = 0
        i = 0
        while True:
            (await send(topic, value)).add_done_callback(done)
            i += 1
            if i & 63 == 0:
                now = time.perf_counter()
                if not measuring and now >= t_measure:
                    meter.start(), me.start(), zk.start()
                    a0, t0, measuring = acked[0], now, True
                elif measuring and now >= t_end:
                    break
        a1, t1 = acked[0], time.perf_counter()
        cu, cs = meter.stop()
        mu, ms = me.stop()
        zu, zs = zk.stop()
    nrec = a1 - a0
    nbytes = nrec * RECORD_BYTES
    return (Sample(t1 - t0, cu, cs, nbytes, nrec), Sample(t1 - t0, mu, ms, nbytes, nrec),
            zu + zs, errors, None)


async def figure_throughput(c: LocalCluster, plan: Plan, runs: int) -> dict:
    batch = make_batch()
    variants = ("lean_rf3", "lean_rf1", "producer_rf3", "producer_rf1")
    cl: dict[str, list[Sample]] = {k: [] for k in variants}
    gen: dict[str, list[Sample]] = {k: [] for k in variants}
    zk: dict[str, list[float]] = {k: [] for k in variants}
    errs: dict[str, Counter] = {k: Counter() for k in variants}
    req: dict[str, list[dict]] = {k: [] for k in variants}
    brokers = Brokers()
    async with AdminClient(c.bootstrap_servers, default_api_timeout_ms=120000) as admin:
        try:
            for r in range(runs):
                t3, t1 = f"tput-rf3-{r}", f"tput-rf1-{r}"
                await admin.create_topic(t3, replica_assignment=rotating_assignment(
                    TPUT_PARTITIONS, 3), configs={"min.insync.replicas": "2"})
                await admin.create_topic(t1, replica_assignment=rotating_assignment(
                    TPUT_PARTITIONS, 1))
                for t in (t3, t1):
                    await wait_partitions(brokers, c, t, TPUT_PARTITIONS, isr_full,
                                          "leaders", 60.0)
                lean = [("lean_rf3", partial(lean_produce, brokers, c, t3, -1, batch,
                                             plan.warmup_s, plan.tput_seconds)),
                        ("lean_rf1", partial(lean_produce, brokers, c, t1, 1, batch,
                                             plan.warmup_s, plan.tput_seconds))]
                real = [("producer_rf3", partial(producer_produce, c, t3, "all", plan.warmup_s,
                                                 plan.producer_seconds)),
                        ("producer_rf1", partial(producer_produce, c, t1, "1", plan.warmup_s,
                                                 plan.producer_seconds))]
                for key, fn in _rotate(lean, r) + _rotate(real, r):
                    s_cl, s_gen, zk_cpu, e, reqs = await fn()
                    if reqs is not None:
                        req[key].append(reqs)
                    cl[key].append(s_cl)
                    gen[key].append(s_gen)
                    zk[key].append(zk_cpu)
                    errs[key].update(e)
                    log(f"[cluster] (a) round {r + 1}/{runs} {key}: {s_cl.mb_s:.1f} MB/s, "
                        f"cluster CPU {s_cl.cpu_s_per_gb:.1f} s/GB, load generator "
                        f"{s_gen.cpu_s_per_gb:.1f} s/GB" + (f", errors {dict(e)}" if e else ""))
                await admin.delete_topics([t3, t1])
        finally:
            await brokers.close()
    out: dict = {"variants": {}}
    for k in variants:
        if not cl[k]:
            continue
        s = summarize(cl[k])
        out["variants"][k] = {
            **s,
            "cluster_cpu_s_per_gb": s["cpu_s_per_gb"],
            "loadgen_cpu_s_per_gb": summarize(gen[k])["cpu_s_per_gb"],
            "zookeeper_cpu_s_per_gb": round(median(z / (x.nbytes / 1e9) for z, x in
                                                   zip(zk[k], cl[k]) if x.nbytes), 3),
            "cluster_cores_busy": round(median(x.cpu / x.wall for x in cl[k]), 2),
            "loadgen_cores_busy": round(median(x.cpu / x.wall for x in gen[k]), 2),
            "errors": dict(errs[k]),
        }
        if req[k]:  # medians over the rounds; bench transport costs them
            out["variants"][k]["requests_per_gb"] = {
                f: median(r[f] for r in req[k]) for f in req[k][0]}
    out["ratio_rf3_rf1_lean"] = round(paired_ratio(cl["lean_rf3"], cl["lean_rf1"]), 3)
    if cl["producer_rf3"] and cl["producer_rf1"]:
        out["ratio_rf3_rf1_producer"] = round(paired_ratio(cl["producer_rf3"],
                                                           cl["producer_rf1"]), 3)
    out["workload"] = {"partitions": TPUT_PARTITIONS, "leaders_per_broker": TPUT_PARTITIONS // 3,
                       "record_bytes": RECORD_BYTES, "records_per_batch": RECORDS_PER_BATCH,
                       "batch_bytes": len(batch), "in_flight_per_broker": IN_FLIGHT_PER_BROKER,
                       "seconds": plan.tput_seconds, "warmup_s": plan.warmup_s,
                       "producer_seconds": plan.producer_seconds, "runs": runs,
                       "min_insync_replicas_rf3": 2}
    return out


def _rotate(items: list, r: int) -> list:
    k = r % len(items)
    return items[k:] + items[:k]


# ============================================================================ prober

async def pace(next_t: float, interval: float) -> float:
    """Sleep until the next tick of an open-loop schedule (event-loop time) and return it; a
    caller already late goes on at once and the schedule restarts from now (no burst)."""
    next_t += interval
    now = asyncio.get_running_loop().time()
    if next_t > now:
        await asyncio.sleep(next_t - now)
        return next_t
    return now


class Prober:
    """One small acks=all Produce per partition every ``interval``, straight to the leader,
    one request in flight per partition; per partition, the (sent, answered) wall-clock times
    of every successful request.
    """

    def __init__(self, brokers: Brokers, c: LocalCluster, topic: str, partitions: list[int],
                 interval: float):
        self.brokers = brokers
        self.topic = topic
        self.partitions = partitions
        self.interval = interval
        self.bootstrap = [h.address for h in c.brokers.values()]
        self.addresses: dict[int, str] = {b: h.address for b, h in c.brokers.items()}
        self.leaders: dict[int, int] = {}
        self.successes: dict[int, list[tuple[float, float]]] = {p: [] for p in partitions}
        self.errors: Counter = Counter()
        self.error_times: dict[int, list[float]] = {p: [] for p in partitions}
        self.refreshes = 0
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._refresh_task: asyncio.Task | None = None
        self._last_refresh = 0.0
        batch = rec.build_batch([rec.ProducerRecord(key=None,
                                                    value=os.urandom(PROBE_VALUE_BYTES))])
        self.payloads = {p: pb.ProduceRequest(acks=-1, timeout_ms=10000, topic_data=[
            pb.ProduceTopicData(topic=topic, partition_data=[
                pb.ProducePartitionData(partition=p, records=batch)])]).SerializeToString()
            for p in partitions}

    async def start(self) -> None:
        await self.refresh()
        self._tasks = [asyncio.create_task(self._probe(p)) for p in self.partitions]

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._refresh_task is not None:
            self._refresh_task.cancel()
            with contextlib.suppress(BaseException):
                await self._refresh_task

    async def refresh(self) -> None:
        if self._refresh_task is None or self._refresh_task.done():
            self._refresh_task = asyncio.create_task(self._do_refresh())
        await asyncio.shield(self._refresh_task)

    async def _do_refresh(self) -> None:
        loop = asyncio.get_running_loop()
        wait = self._last_refresh + METADATA_MIN_INTERVAL_S - loop.time()
        if wait > 0:
            await asyncio.sleep(wait)
        for addr in self.bootstrap:
            try:
                md = await self.brokers.metadata(addr, [self.topic], timeout=1.0)
            except grpc.aio.AioRpcError:
                continue
            self.refreshes += 1
            for b in md.brokers:
                self.addresses[b.broker_id] = f"{b.host}:{b.port}"
            for t in md.topics:
                if t.topic == self.topic:
                    for p in t.partitions:
                        self.leaders[p.partition] = p.leader_id
            # next time start with the broker that answered
            self.bootstrap.remove(addr)
            self.bootstrap.insert(0, addr)
            break
        self._last_refresh = loop.time()

    async def _probe(self, p: int) -> None:
        payload = self.payloads[p]
        next_t = asyncio.get_running_loop().time()
        while not self._stop.is_set():
            leader = self.leaders.get(p, -1)
            addr = self.addresses.get(leader)
            if leader < 0 or addr is None:
                self.errors["no_leader_in_metadata"] += 1
                await self.refresh()
            else:
                sent = time.time()
                try:
                    resp = await self.brokers.produce(addr)(payload, timeout=5.0)
                    code = resp.responses[0].partition_responses[0].error_code
                except grpc.aio.AioRpcError as e:
                    code = None
                    self.errors[e.code().name] += 1
                    self.error_times[p].append(time.time())
                    await self.refresh()
                else:
                    if code == 0:
                        self.successes[p].append((sent, time.time()))
                    else:
                        self.errors[ErrorCode(code).name] += 1
                        self.error_times[p].append(time.time())
                        if code in _RETRY_CODES:
                            await self.refresh()
            next_t = await pace(next_t, self.interval)

    def outage(self, p: int, t_from: float, t_to: float) -> float | None:
        return outage(self.successes[p], t_from, t_to)

    def all_sent_ok_after(self, t: float) -> bool:
        return all_sent_ok_after(self.successes, t)


def outage(successes: list[tuple[float, float]], t_from: float, t_to: float) -> float | None:
    """The longest stretch without a success (between answers) from the last success answered
    at or before ``t_from`` to the first success of a request sent at or after ``t_to``, over
    one partition's (sent, answered) successes: a late answer to a request sent
    before the event does not end the stretch early. None if either end is missing."""
    s = sorted(successes, key=lambda x: x[1])
    lo = max((i for i, (_, done) in enumerate(s) if done <= t_from), default=None)
    hi = min((i for i, (sent, _) in enumerate(s) if sent >= t_to), default=None)
    if lo is None or hi is None or hi <= lo:
        return None
    return max(s[i + 1][1] - s[i][1] for i in range(lo, hi))


def all_sent_ok_after(successes: dict[int, list[tuple[float, float]]], t: float) -> bool:
    """Every partition has a success of a request sent at or after ``t``."""
    return all(any(sent >= t for sent, _ in s) for s in successes.values())


class ProducerLoad:
    """What users run through a controlled shutdown: the library's Producer (acks=all, its
    defaults otherwise: retries until delivery.timeout.ms = 120 s, KIP-951 leader hints,
    metadata refresh on NOT_LEADER_OR_FOLLOWER) sending one small record to each of
    ``partitions`` in turn, ``rate`` records/s in all, open loop. Every record's fate is counted
    once it is settled: acknowledged (with its send and acknowledgement wall-clock times, per
    partition) or FAILED to the client (by error name) - the SPEC's "no produce request failing
    to the client"."""

    def __init__(self, c: LocalCluster, topic: str, partitions: list[int], rate: float):
        self.bootstrap = c.bootstrap_servers
        self.topic = topic
        self.partitions = partitions
        self.interval = 1.0 / rate
        self.value = os.urandom(PROBE_VALUE_BYTES)
        self.sent = 0
        self.successes: dict[int, list[tuple[float, float]]] = {p: [] for p in partitions}
        self.failed: Counter = Counter()
        self._producer: Producer | None = None
        self._task: asyncio.Task | None = None
        self._stop = asyncio.Event()

    async def start(self) -> None:
        self._producer = await Producer(self.bootstrap, acks="all").start()
        await self._producer.partitions_for(self.topic)
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        next_t = asyncio.get_running_loop().time()
        i = 0
        while not self._stop.is_set():
            p = self.partitions[i % len(self.partitions)]
            i += 1
            sent = time.time()
            fut = await self._producer.send(self.topic, self.value, partition=p)
            self.sent += 1
            fut.add_done_callback(partial(self._settled, p, sent))
            next_t = await pace(next_t, self.interval)

    def _settled(self, p: int, sent: float, fut: asyncio.Future) -> None:
        if fut.cancelled():
            self.failed["cancelled"] += 1
        elif (e := fut.exception()) is not None:
            self.failed[e.name if isinstance(e, KafkaError) else type(e).__name__] += 1
        else:
            self.successes[p].append((sent, time.time()))

    async def stop(self) -> None:
        """Stop sending, then wait until every record sent is settled (flush)."""
        self._stop.set()
        if self._task is not None:
            await self._task
        if self._producer is not None:
            await self._producer.flush()
            await self._producer.close()

    def acked(self) -> int:
        return sum(len(s) for s in self.successes.values())

    def max_latency_s(self, t_from: float, t_to: float) -> float | None:
        """The longest send -> acknowledgement of a record sent in [t_from, t_to]."""
        lat = [done - sent for s in self.successes.values() for sent, done in s
               if t_from <= sent <= t_to]
        return round(max(lat), 3) if lat else None


# ============================================================================ (b) unavailability

async def figure_unavailability(c: LocalCluster, runs: int) -> dict:
    topic = "unavail"
    n = PROBE_PARTITIONS
    brokers = Brokers()
    led_gaps: list[float] = []
    led_after_detection: list[float] = []
    followed_gaps: list[float] = []
    other_gaps: list[float] = []
    per_run = []
    async with AdminClient(c.bootstrap_servers, default_api_timeout_ms=120000) as admin:
        try:
            await admin.create_topic(topic, replica_assignment=rotating_assignment(n, 3),
                                     configs={"min.insync.replicas": "2"})
            await wait_partitions(brokers, c, topic, n, preferred_leads, "leaders", 60.0)
            for r in range(runs):
                view = next(ps for ps in (await topic_view(brokers, c, topic)).values() if ps)
                leads = Counter(p.leader_id for p in view)
                top = max(leads.values())
                tied = sorted(b for b, k in leads.items() if k == top)
                victim = tied[r % len(tied)]
                led = sorted(p.partition for p in view if p.leader_id == victim)
                followed = sorted(p.partition for p in view
                                  if p.leader_id != victim and victim in p.replicas)
                others = sorted(set(range(n)) - set(led) - set(followed))
                ctl = EventTail(c.controllers[min(c.controllers)].event_log_file)
                prober = Prober(brokers, c, topic, list(range(n)), PROBE_INTERVAL_S)
                await prober.start()
                # warm: every partition answered at least once, then one more second
                t_w = time.time()
                while not prober.all_sent_ok_after(t_w):
                    if time.time() - t_w > 30:
                        raise TimeoutError("the prober got no success on some partition")
                    await asyncio.sleep(0.05)
                await asyncio.sleep(1.0)
                t_kill = time.time()
                await asyncio.to_thread(c.broker(victim).kill)
                deadline = t_kill + SESSION_TIMEOUT_MS / 1000 + 30
                while not prober.all_sent_ok_after(t_kill) and time.time() < deadline:
                    await asyncio.sleep(0.05)
                await asyncio.sleep(0.2)
                await prober.stop()
                gaps = {p: prober.outage(p, t_kill, t_kill) for p in range(n)}
                missing = [p for p, g in gaps.items() if g is None]
                ctl.poll()
                failed = [e["_ts"] for e in ctl.events if e.get("event") == "broker_failed"
                          and e.get("broker") == victim]
                elect = [e["_ts"] for e in ctl.events if e.get("event") == "leader_election"
                         and str(e.get("partition", "")).startswith(topic + "-")]
                run = {"victim": victim, "led": led, "followed": followed,
                       "led_gaps_s": [round(gaps[p], 3) for p in led if gaps[p] is not None],
                       "followed_gaps_s": [round(gaps[p], 3) for p in followed
                                           if gaps[p] is not None],
                       "others_gaps_s": [round(gaps[p], 3) for p in others
                                         if gaps[p] is not None],
                       "no_success_after_kill": missing,
                       "detection_s": round(failed[0] - t_kill, 3) if failed else None,
                       "kill_to_last_election_s": round(max(elect) - t_kill, 3)
                       if elect else None,
                       "probe_errors": dict(prober.errors),
                       "metadata_refreshes": prober.refreshes}
                led_gaps += [gaps[p] for p in led if gaps[p] is not None]
                if failed:
                    led_after_detection += [gaps[p] - (failed[0] - t_kill) for p in led
                                            if gaps[p] is not None]
                followed_gaps += [gaps[p] for p in followed if gaps[p] is not None]
                other_gaps += [gaps[p] for p in others if gaps[p] is not None]
                lg = run["led_gaps_s"]
                log(f"[cluster] (b) run {r + 1}/{runs}: killed broker {victim} (led {led}); "
                    f"led-partition gaps {min(lg, default=0):.2f}..{max(lg, default=0):.2f} s, "
                    f"detection {run['detection_s']} s"
                    + (f"; NO success after the kill on {missing}" if missing else ""))
                t = time.perf_counter()
                await asyncio.to_thread(c.broker(victim).start)
                run["restart_s"] = round(time.perf_counter() - t, 2)
                run["restore"] = await restore(brokers, admin, c, topic, n, 120.0)
                per_run.append(run)
        finally:
            await brokers.close()

    def stats(xs: list[float]) -> dict:
        if not xs:
            return {"n": 0}
        return {"n": len(xs), "p50_s": round(pct(xs, 50), 3), "p99_s": round(pct(xs, 99), 3),
                "max_s": round(max(xs), 3), "min_s": round(min(xs), 3)}

    det = [r["detection_s"] for r in per_run if r["detection_s"] is not None]
    return {
        "session_timeout_ms": SESSION_TIMEOUT_MS,
        "partitions": n, "probe_interval_ms": PROBE_INTERVAL_S * 1000, "runs": runs,
        "led": stats(led_gaps), "followed": stats(followed_gaps), "others": stats(other_gaps),
        "led_minus_detection": stats(led_after_detection),
        "detection_s_median": round(median(det), 3) if det else None,
        "target_p99_s": SESSION_TIMEOUT_MS / 1000 + TARGET_UNAVAIL_MARGIN_S,
        "stretch_p99_s": TARGET_UNAVAIL_STRETCH_S,
        "per_run": per_run,
    }


# ============================================================================ (c)/(d)

def _topic_events(events: list[dict], name: str, topic: str) -> list[dict]:
    pre = topic + "-"
    return [e for e in events if e.get("event") == name
            and str(e.get("partition", "")).startswith(pre)]


async def wait_new_leaders(tails: dict[int, EventTail], topic: str, n: int, deadline: float
                           ) -> tuple[int, float | None]:
    """Poll the surviving brokers' event logs until ``n`` partitions of ``topic`` logged
    ``become_leader`` (or the deadline); returns (partitions, time of the last one)."""
    while True:
        seen: dict[str, float] = {}
        for t in tails.values():
            t.poll()
            for e in _topic_events(t.events, "become_leader", topic):
                seen[e["partition"]] = max(seen.get(e["partition"], 0.0), e["_ts"])
        if len(seen) >= n or time.time() >= deadline:
            return len(seen), (max(seen.values()) if seen else None)
        await asyncio.sleep(0.1)


async def controlled_shutdown_run(brokers: Brokers, c: LocalCluster, topic: str, n: int,
                                  timeout: float) -> dict:
    b1 = c.broker(1)
    tail_b1 = EventTail(b1.event_log_file)
    tails = {b: EventTail(c.broker(b).event_log_file) for b in (2, 3)}
    ctl = EventTail(c.controllers[min(c.controllers)].event_log_file)
    step = max(1, n // SHUTDOWN_PROBE_PARTITIONS)
    probed = list(range(0, n, step))[:SHUTDOWN_PROBE_PARTITIONS]
    prober = Prober(brokers, c, topic, probed, SHUTDOWN_PROBE_INTERVAL_S)
    step = max(1, n // SHUTDOWN_PRODUCER_PARTITIONS)
    produced = list(range(step // 2, n, step))[:SHUTDOWN_PRODUCER_PARTITIONS]
    load = ProducerLoad(c, topic, produced, SHUTDOWN_PRODUCER_RATE)
    await prober.start()
    await load.start()
    t_w = time.time()
    while not (prober.all_sent_ok_after(t_w) and all_sent_ok_after(load.successes, t_w)) \
            and time.time() - t_w < 30:
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)
    load_before = (load.sent, sum(load.failed.values()))
    errors_before = sum(prober.errors.values())
    t0 = time.time()
    b1.send_signal(signal.SIGTERM)
    try:
        await asyncio.to_thread(b1.proc.wait, timeout)
    except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired: report, then kill
        b1.kill()
    t_exit = time.time()
    # keep probing (and producing) until every probed partition served a request sent after
    # the exit
    while not (prober.all_sent_ok_after(t_exit) and all_sent_ok_after(load.successes, t_exit)) \
            and time.time() - t_exit < 60:
        await asyncio.sleep(0.05)
    t_served = time.time()
    await prober.stop()
    await load.stop()  # every record it sent is now acknowledged or failed to the client
    load_gaps = [g for p in produced if (g := outage(load.successes[p], t0, t_exit)) is not None]
    tail_b1.poll()
    ctl.poll()
    done = [e for e in tail_b1.events if e.get("event") == "controlled_shutdown_done"]
    attempts = [e for e in tail_b1.events if e.get("event") == "controlled_shutdown_response"]
    failed_attempts = [e for e in tail_b1.events
                       if e.get("event") == "controlled_shutdown_failed"]
    moved = _topic_events(ctl.events, "leader_election", topic)
    n_new, last_new = await wait_new_leaders(tails, topic, n, time.time() + timeout)
    gaps = [g for p in probed if (g := prober.outage(p, t0, t_exit)) is not None]
    unserved = [p for p in probed if not any(sent >= t_exit for sent, _ in prober.successes[p])]
    return {
        "to_controlled_shutdown_done_s": round(done[0]["_ts"] - t0, 3) if done else None,
        "succeeded": done[0].get("succeeded") if done else None,
        "to_exit_s": round(t_exit - t0, 3),
        "attempts": len(attempts) + len(failed_attempts),
        "remaining_after_first_attempt": attempts[0].get("remaining_count") if attempts
        else None,
        "leaders_moved_by_controller": len(moved),
        "to_last_election_s": round(max(e["_ts"] for e in moved) - t0, 3) if moved else None,
        "new_leaders_logged": n_new,
        "to_last_become_leader_s": round(last_new - t0, 3) if last_new else None,
        "exit_code": b1.returncode,
        "probe_partitions": len(probed),
        "probe_error_answers": sum(prober.errors.values()) - errors_before,
        "probe_errors": dict(prober.errors),
        "probe_max_gap_s": round(max(gaps), 3) if gaps else None,
        # the steady state the move starts from: an acks=all probe's latency before SIGTERM
        # (at 10k partitions it was 1.3 s before KIP-227 sessions and the leader's short path)
        "probe_steady_median_s": _median_latency(prober, t_w, t0),
        "probe_unserved_60s_after_exit": unserved,
        "probe_all_served_after_exit_s": None if unserved else round(t_served - t_exit, 3),
        "producer_partitions": len(produced),
        "producer_records_sent": load.sent,
        "producer_records_acked": load.acked(),
        # records that failed to the client, of those sent from SIGTERM on (none were failing
        # before: the producer was warm)
        "producer_records_failed": sum(load.failed.values()) - load_before[1],
        "producer_errors": dict(load.failed),
        "producer_max_latency_s": load.max_latency_s(t0, t_exit),
        "producer_max_gap_s": round(max(load_gaps), 3) if load_gaps else None,
    }


def _median_latency(prober: Prober, since: float, until: float) -> float | None:
    lat = sorted(done - sent for p in prober.partitions for sent, done in prober.successes[p]
                 if since <= sent and done < until)
    return round(lat[len(lat) // 2], 3) if lat else None


async def failure_run(c: LocalCluster, topic: str, n: int, timeout: float,
                      victim: int = 1) -> dict:
    ctl = EventTail(c.controllers[min(c.controllers)].event_log_file)
    tails = {b: EventTail(h.event_log_file) for b, h in c.brokers.items()
             if b != victim and h.is_running()}
    t0 = time.time()
    await asyncio.to_thread(c.broker(victim).kill)
    deadline = t0 + timeout
    failed = None
    elected: dict[str, float] = {}
    while time.time() < deadline:
        for e in ctl.poll():
            ev = e.get("event")
            if ev == "broker_failed" and e.get("broker") == victim and failed is None:
                failed = e["_ts"]
            elif ev == "leader_election" and e.get("old_leader") == victim and \
                    str(e.get("partition", "")).startswith(topic + "-"):
                elected[e["partition"]] = e["_ts"]
        if failed is not None and len(elected) >= n:
            break
        await asyncio.sleep(0.05)
    # the new leaders acting on it
    n_new, last_new = await wait_new_leaders(tails, topic, len(elected), deadline)
    out = {"victim": victim, "elected": len(elected), "new_leaders_logged": n_new,
           "detection_s": round(failed - t0, 3) if failed else None}
    if failed is not None and elected:
        last = max(elected.values())
        span = last - failed
        out.update({"first_election_after_failed_s": round(min(elected.values()) - failed, 4),
                    "span_s": round(span, 4),
                    "elections_per_s": round(len(elected) / span) if span > 0 else None,
                    "kill_to_last_election_s": round(last - t0, 3)})
    if last_new is not None:
        out["kill_to_last_become_leader_s"] = round(last_new - t0, 3)
        if failed is not None:
            out["failed_to_last_become_leader_s"] = round(last_new - failed, 3)
    return out


async def figure_shutdown_and_elections(root: str, n: int, cs_runs: int, el_runs: int,
                                        reuse_takeover: bool = False) -> dict:
    """(c) and (d) on a fresh cluster with one topic of ``n`` partitions led by broker 1.

    Between runs broker 1 restarts and gets its leaderships back (ISR full, then a preferred
    election). With ``reuse_takeover``, a failure run right after the last controlled shutdown
    skips that (minutes at 10k partitions) and kills the broker that took over all ``n``
    leaderships in the shutdown instead (broker 2, ISR {2, 3})."""
    timeout = 120.0 + n * 0.06  # generous: 10k partitions take minutes to set up
    topic = f"lead1-{n}"
    c = start_cluster(root, f"cd-{n}")
    brokers = Brokers()
    setup: dict = {}
    cs, el, restores = [], [], []
    try:
        async with AdminClient(c.bootstrap_servers, default_api_timeout_ms=int(timeout * 1000),
                               request_timeout_ms=int(timeout * 1000)) as admin:
            t = time.perf_counter()
            await admin.create_topic(topic, replica_assignment={p: [1, 2, 3] for p in range(n)},
                                     timeout_ms=int(timeout * 1000))
            setup["create_topic_s"] = round(time.perf_counter() - t, 1)
            setup["leaders_and_isr_s"] = round(await wait_partitions(
                brokers, c, topic, n, preferred_leads, "broker 1 leading, ISR full", timeout,
                interval=0.5), 1)
            log(f"[cluster] ({n}) topic {topic} created in {setup['create_topic_s']} s, "
                f"leaders + ISR visible after {setup['leaders_and_isr_s']} s more")
            # interleave: c, d, c, d, ...
            order = [x for pair in zip(["c"] * cs_runs, ["d"] * el_runs) for x in pair] + \
                ["c"] * max(0, cs_runs - el_runs) + ["d"] * max(0, el_runs - cs_runs)
            for i, kind in enumerate(order):
                victim = 1
                if i > 0 and reuse_takeover and kind == "d" and i == len(order) - 1 and \
                        order[i - 1] == "c":
                    view = await topic_view(brokers, c, topic)
                    parts = next((ps for ps in view.values() if ps), [])
                    leaders = Counter(p.leader_id for p in parts)
                    if len(parts) == n and len(leaders) == 1 and min(leaders) > 1:
                        victim = min(leaders)
                        log(f"[cluster] ({n}) no restore: broker {victim} took over all {n} "
                            f"leaderships; it is the one killed")
                if i > 0 and victim == 1:
                    t = time.perf_counter()
                    await asyncio.to_thread(c.broker(1).start, True, timeout)
                    rs = {"restart_s": round(time.perf_counter() - t, 1)}
                    rs.update(await restore(brokers, admin, c, topic, n, timeout))
                    restores.append(rs)
                    log(f"[cluster] ({n}) broker 1 restored: {rs}")
                if kind == "c":
                    r = await controlled_shutdown_run(brokers, c, topic, n, timeout)
                    cs.append(r)
                    log(f"[cluster] (c) {n} partitions: SIGTERM -> controlled_shutdown_done "
                        f"{r['to_controlled_shutdown_done_s']} s, -> exit {r['to_exit_s']} s "
                        f"(succeeded={r['succeeded']}, {r['attempts']} attempt(s), "
                        f"{r['leaders_moved_by_controller']} leaders moved; probe: max gap "
                        f"{r['probe_max_gap_s']} s, errors {r['probe_errors'] or 'none'}, "
                        f"steady-state latency {r['probe_steady_median_s']} s; "
                        f"Producer: {r['producer_records_failed']} of "
                        f"{r['producer_records_sent']} records failed, max latency "
                        f"{r['producer_max_latency_s']} s)")
                else:
                    r = await failure_run(c, topic, n, timeout, victim)
                    el.append(r)
                    log(f"[cluster] (d) {n} partitions: killed broker {victim}: detection "
                        f"{r['detection_s']} s, {r['elected']} elections in {r.get('span_s')} s"
                        f" = {r.get('elections_per_s')}/s")
    finally:
        await brokers.close()
        await asyncio.to_thread(c.stop, False)
    return {"partitions": n, "setup": setup, "restores": restores,
            "controlled_shutdown": cs, "elections": el}


def _summarize_cd(d: dict) -> tuple[dict, dict]:
    cs, el = d["controlled_shutdown"], d["elections"]

    def med(rows, key):
        xs = [r[key] for r in rows if r.get(key) is not None]
        return round(median(xs), 3) if xs else None

    c_sum = {"partitions": d["partitions"], "runs": len(cs),
             "to_controlled_shutdown_done_s": med(cs, "to_controlled_shutdown_done_s"),
             "to_exit_s": med(cs, "to_exit_s"),
             "to_last_become_leader_s": med(cs, "to_last_become_leader_s"),
             "all_succeeded": all(r.get("succeeded") for r in cs) if cs else None,
             "probe_error_answers": sum(r["probe_error_answers"] for r in cs),
             "probe_max_gap_s": max((r["probe_max_gap_s"] for r in cs
                                     if r["probe_max_gap_s"] is not None), default=None),
             "producer_records_sent": sum(r["producer_records_sent"] for r in cs),
             "producer_records_failed": sum(r["producer_records_failed"] for r in cs),
             "producer_errors": dict(sum((Counter(r["producer_errors"]) for r in cs),
                                         Counter())),
             "producer_max_latency_s": max((r["producer_max_latency_s"] for r in cs
                                            if r["producer_max_latency_s"] is not None),
                                           default=None),
             "producer_max_gap_s": max((r["producer_max_gap_s"] for r in cs
                                        if r["producer_max_gap_s"] is not None), default=None),
             "target_s": TARGET_SHUTDOWN_S, "setup": d["setup"]}
    c_sum["target_met"] = shutdown_verdict(c_sum) if cs else None
    e_sum = {"partitions": d["partitions"], "runs": len(el),
             "elections_per_s": med(el, "elections_per_s"), "span_s": med(el, "span_s"),
             "detection_s": med(el, "detection_s"),
             "kill_to_last_election_s": med(el, "kill_to_last_election_s"),
             "failed_to_last_become_leader_s": med(el, "failed_to_last_become_leader_s"),
             "all_elected": all(r["elected"] >= d["partitions"] for r in el) if el else None,
             "session_timeout_ms": SESSION_TIMEOUT_MS, "target_per_s": TARGET_ELECTIONS_S}
    return c_sum, e_sum


# ============================================================================ driver

def _figures_wanted() -> set[str]:
    env = os.environ.get("REPLOG_BENCH_CLUSTER_FIGURES", "")
    return {x.strip() for x in env.split(",") if x.strip()} or {"a", "b", "c", "d"}


def main(opts: argparse.Namespace | None = None) -> dict:
    opts = opts or argparse.Namespace(quick=False, runs=None, data_dir=None)
    plan = QUICK if opts.quick else FULL
    if opts.runs:
        plan.tput_runs = plan.unavail_runs = opts.runs
        plan.shutdown_sizes = [(n, opts.runs if n <= 1000 else cr, opts.runs if n <= 1000
                                else er) for n, cr, er in plan.shutdown_sizes]
    wanted = _figures_wanted()
    parent = opts.data_dir or "/tmp"
    os.makedirs(parent, exist_ok=True)
    root = tempfile.mkdtemp(prefix="replog-bench-cluster-", dir=parent)
    started = time.time()
    results: dict = {
        "bench": NAME,
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "quick": bool(opts.quick),
        "machine": machine_info(parent),
        "cluster": {"brokers": 3, "controllers": 1, "log_dirs_per_broker": 2,
                    "overrides": {k: str(v) for k, v in CLUSTER_OVERRIDES.items()}},
        "targets": {"produce_mb_s": TARGET_MB_S, "ratio_rf3_rf1": TARGET_RATIO,
                    "unavailability_p99_s": SESSION_TIMEOUT_MS / 1000 + TARGET_UNAVAIL_MARGIN_S,
                    "controlled_shutdown_10k_s": TARGET_SHUTDOWN_S,
                    "elections_per_s": TARGET_ELECTIONS_S},
        "figures": {},
    }
    old_term = None
    with contextlib.suppress(ValueError):  # only possible in the main thread
        def _term(*_):
            raise SystemExit(143)
        old_term = signal.signal(signal.SIGTERM, _term)
    try:
        if wanted & {"a", "b"}:
            c = start_cluster(root, "ab")
            try:
                if "a" in wanted:
                    log(f"[cluster] (a) produce throughput: {plan.tput_runs} round(s)")
                    results["figures"]["throughput"] = asyncio.run(
                        figure_throughput(c, plan, plan.tput_runs))
                if "b" in wanted:
                    log(f"[cluster] (b) unavailability after SIGKILL: {plan.unavail_runs} run(s)")
                    results["figures"]["unavailability"] = asyncio.run(
                        figure_unavailability(c, plan.unavail_runs))
            finally:
                c.stop(graceful=False)
        if wanted & {"c", "d"}:
            for n, cr, er in plan.shutdown_sizes:
                cr = cr if "c" in wanted else 0
                er = er if "d" in wanted else 0
                log(f"[cluster] (c)/(d) {n} partitions led by broker 1: {cr} controlled "
                    f"shutdown(s), {er} failure(s)")
                t = time.perf_counter()
                d = asyncio.run(figure_shutdown_and_elections(root, n, cr, er,
                                                              reuse_takeover=n > 1000))
                d["took_s"] = round(time.perf_counter() - t, 1)
                c_sum, e_sum = _summarize_cd(d)
                results["figures"][f"controlled_shutdown_{n}"] = {**c_sum, "per_run":
                                                                  d["controlled_shutdown"],
                                                                  "restores": d["restores"],
                                                                  "took_s": d["took_s"]}
                results["figures"][f"elections_{n}"] = {**e_sum, "per_run": d["elections"]}
    finally:
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)
        shutil.rmtree(root, ignore_errors=True)
    results["took_s"] = round(time.time() - started, 1)
    _print(results)
    path = save_results(NAME, results)
    print(f"# saved {path}")
    return results


def shutdown_verdict(s: dict) -> bool | None:
    """The controlled-shutdown target as clients see it: the longest produce gap <= 3 s and no
    record failing to the library's Producer (not the broker's exit time, reported apart)."""
    if s["probe_max_gap_s"] is None:
        return None
    return s["probe_max_gap_s"] <= TARGET_SHUTDOWN_S and s["producer_records_failed"] == 0


def _ok(good: bool | None) -> str:
    return "?" if good is None else ("ok" if good else "BELOW")


def _fmt(x, spec: str = ".2f", none: str = "-") -> str:
    return none if x is None else format(x, spec)


def _print(results: dict) -> None:
    m = results["machine"]
    f = results["figures"]
    print(f"== cluster: 3 brokers (2 log dirs each) + 1 controller + ZooKeeper, real processes"
          f"{' (QUICK)' if results['quick'] else ''}; zookeeper.session.timeout.ms="
          f"{SESSION_TIMEOUT_MS}")
    print(f"   {m.get('cpus')} CPUs ({m.get('cpu_model', '?')}), Python {m['python']}, data: "
          f"{m.get('data_dir_fs', '?')}; load generator and cluster share the CPUs")
    if "throughput" in f:
        t = f["throughput"]
        w = t["workload"]
        print()
        print(f"(a) produce, {w['partitions']} partitions ({w['leaders_per_broker']} led per "
              f"broker), {w['record_bytes']} B records x {w['records_per_batch']} = "
              f"{w['batch_bytes']} B batches; lean: pre-built batches, {w['in_flight_per_broker']}"
              f" requests in flight per broker; median of {w['runs']} interleaved round(s), "
              f"{w['seconds']:.0f} s each (Producer: {w['producer_seconds']:.0f} s)")
        print("    MB/s = acknowledged record bytes (10^6); CPU s/GB = CPU seconds per GB "
              "acknowledged: cluster = brokers + controller, gen = this process, zk = ZooKeeper")
        hdr = (f"    {'variant':<34}{'MB/s':>7}{'min-max':>13}{'rec/s':>9}{'cluster':>9}"
               f"{'cores':>6}{'gen':>7}{'zk':>6}  target")
        print(hdr)
        print("    " + "-" * (len(hdr) - 4))
        labels = {"lean_rf3": "lean RF=3 acks=all (minISR 2)", "lean_rf1": "lean RF=1 acks=1",
                  "producer_rf3": "Producer RF=3 acks=all (secondary)",
                  "producer_rf1": "Producer RF=1 acks=1 (secondary)"}
        for k, label in labels.items():
            v = t["variants"].get(k)
            if v is None:
                continue
            target = f">= {TARGET_MB_S:.0f} MB/s {_ok(v['mb_s'] >= TARGET_MB_S)}" \
                if k == "lean_rf3" else ""
            print(f"    {label:<34}{v['mb_s']:>7.1f}{v['mb_s_min']:>6.0f}-{v['mb_s_max']:<6.0f}"
                  f"{v['records_s']:>9.0f}{v['cluster_cpu_s_per_gb']:>9.1f}"
                  f"{v['cluster_cores_busy']:>6.2f}{v['loadgen_cpu_s_per_gb']:>7.1f}"
                  f"{v['zookeeper_cpu_s_per_gb']:>6.1f}  {target}")
            if v["errors"]:
                print(f"      errors: {v['errors']}")
        r = t["ratio_rf3_rf1_lean"]
        print(f"    ratio RF3/RF1 (lean, paired per round): {r:.2f}   target >= {TARGET_RATIO}"
              f" {_ok(r >= TARGET_RATIO)}" + (f";  Producer: {t['ratio_rf3_rf1_producer']:.2f}"
                                              if "ratio_rf3_rf1_producer" in t else ""))
    if "unavailability" in f:
        u = f["unavailability"]
        target = u["target_p99_s"]
        print()
        print(f"(b) unavailability after SIGKILL of the broker leading the most partitions: "
              f"{u['partitions']} partitions RF=3 minISR 2, prober every "
              f"{u['probe_interval_ms']:.0f} ms per partition, {u['runs']} run(s); "
              f"session timeout {SESSION_TIMEOUT_MS / 1000:.1f} s")
        print("    gap = last success before the kill -> first success after, per partition "
              "(pooled over runs)")
        print(f"    {'partitions':<38}{'n':>4}{'p50 s':>8}{'p99 s':>8}{'max s':>8}  target")
        for k, label in (("led", "led by the killed broker"),
                         ("followed", "followed by it (acks=all waits on ISR)"),
                         ("others", "not hosted by it")):
            s = u[k]
            if not s["n"]:
                continue
            tgt = (f"p99 <= {target:.1f} s {_ok(s['p99_s'] <= target)} (stretch <= "
                   f"{TARGET_UNAVAIL_STRETCH_S} s {_ok(s['p99_s'] <= TARGET_UNAVAIL_STRETCH_S)})"
                   if k == "led" else "")
            print(f"    {label:<38}{s['n']:>4}{s['p50_s']:>8.2f}{s['p99_s']:>8.2f}"
                  f"{s['max_s']:>8.2f}  {tgt}")
        print(f"    detection (kill -> controller's broker_failed), median: "
              f"{_fmt(u['detection_s_median'])} s vs session timeout "
              f"{SESSION_TIMEOUT_MS / 1000:.1f} s; led gap minus that run's detection: p50 "
              f"{_fmt(u['led_minus_detection'].get('p50_s'))} s, p99 "
              f"{_fmt(u['led_minus_detection'].get('p99_s'))} s (election + propagation + "
              f"client)")
        bad = [r["no_success_after_kill"] for r in u["per_run"] if r["no_success_after_kill"]]
        if bad:
            print(f"    partitions with NO success after the kill (excluded): {bad}")
    cs_keys = sorted((k for k in f if k.startswith("controlled_shutdown_")),
                     key=lambda k: int(k.rsplit("_", 1)[1]))
    if cs_keys and any(f[k]["runs"] for k in cs_keys):
        print()
        print("(c) controlled shutdown (SIGTERM) of broker 1 leading every partition of one "
              "topic RF=3; median over runs")
        print(f"    {'partitions':>10}{'runs':>5}{'->done s':>10}{'->exit s':>10}"
              f"{'->new ldrs':>11}{'probe errs':>11}{'max gap':>9}{'P failed':>10}"
              f"{'P max lat':>10}  target (max gap, P failed)")
        for k in cs_keys:
            s = f[k]
            if not s["runs"]:
                continue
            tgt = (f"<= {TARGET_SHUTDOWN_S:.0f} s, 0 failed: {_ok(shutdown_verdict(s))}"
                   if s["partitions"] >= 10000 else "(1k: info)")
            print(f"    {s['partitions']:>10}{s['runs']:>5}"
                  f"{_fmt(s['to_controlled_shutdown_done_s']):>10}{_fmt(s['to_exit_s']):>10}"
                  f"{_fmt(s['to_last_become_leader_s']):>11}{s['probe_error_answers']:>11}"
                  f"{_fmt(s['probe_max_gap_s']):>9}"
                  f"{s['producer_records_failed']:>5}/{s['producer_records_sent']:<4}"
                  f"{_fmt(s['producer_max_latency_s']):>10}  {tgt}")
        print("    the verdict is what clients see: max gap (the probe's longest stretch without "
              "a success) and P failed; ->exit (process exit) is reported apart;")
        print("    ->done: SIGTERM to the broker's controlled_shutdown_done event; ->exit: to "
              "process exit; ->new ldrs: to the last become_leader on brokers 2/3;")
        print("    probe: 12 of the partitions, acks=all every 50 ms straight to the leader, no "
              "retries, until each served a request sent after the exit; max gap = longest "
              "stretch without a success; error answers counted;")
        print(f"    P: the library's Producer, acks=all, default retries (delivery.timeout.ms "
              f"120 s), {SHUTDOWN_PRODUCER_RATE:.0f} rec/s over {SHUTDOWN_PRODUCER_PARTITIONS} "
              f"of the partitions; P failed = records failed to the client / sent (SPEC: zero "
              f"failed produce); P max lat = longest send -> ack of a record sent between "
              f"SIGTERM and exit")
        for k in cs_keys:
            errs = f[k].get("producer_errors")
            if f[k]["runs"] and errs:
                print(f"    note: {f[k]['partitions']}: the Producer's failed records by error: "
                      f"{errs}")
        for k in cs_keys:
            s = f[k]
            if s["runs"] and s["partitions"] >= 10000 and s["runs"] < 3:
                print(f"    note: {s['partitions']} partitions measured {s['runs']} time(s) "
                      f"only: setting up the topic took {s['setup'].get('create_topic_s')} s")
            if s["runs"] and s["all_succeeded"] is False:
                print(f"    note: {s['partitions']}: controlled shutdown reported "
                      f"succeeded=false in some run")
    el_keys = sorted((k for k in f if k.startswith("elections_")),
                     key=lambda k: int(k.rsplit("_", 1)[1]))
    if el_keys and any(f[k]["runs"] for k in el_keys):
        print()
        print("(d) leader elections after SIGKILL of broker 1 (leading all N); from the "
              "controller's event log; median over runs")
        print(f"    {'partitions':>10}{'runs':>5}{'detect s':>10}{'span s':>9}{'elect/s':>10}"
              f"{'kill->last':>11}{'->new ldrs':>11}  target")
        for k in el_keys:
            s = f[k]
            if not s["runs"]:
                continue
            eps = s["elections_per_s"]
            print(f"    {s['partitions']:>10}{s['runs']:>5}{_fmt(s['detection_s']):>10}"
                  f"{_fmt(s['span_s'], '.3f'):>9}{_fmt(eps, '.0f'):>10}"
                  f"{_fmt(s['kill_to_last_election_s']):>11}"
                  f"{_fmt(s['failed_to_last_become_leader_s']):>11}  >= {TARGET_ELECTIONS_S:.0f}"
                  f"/s {_ok(None if eps is None else eps >= TARGET_ELECTIONS_S)}"
                  + ("" if s["all_elected"] else "  (NOT all elected)"))
        print(f"    detect: kill -> broker_failed (session timeout {SESSION_TIMEOUT_MS / 1000:.1f}"
              f" s); span: broker_failed -> last leader_election (after its ZooKeeper write); "
              f"elect/s = N / span;")
        print("    ->new ldrs: broker_failed -> the last become_leader on the surviving brokers")
        for k in el_keys:
            for r in f[k].get("per_run", []):
                if r.get("victim", 1) != 1:
                    print(f"    note: {f[k]['partitions']}: the failure run killed broker "
                          f"{r['victim']}, which had taken over all leaderships in the "
                          f"controlled shutdown (no restore of broker 1: minutes at this size)")
                    break
    print()
    for k, v in f.items():
        print(json_line(NAME, k, {kk: vv for kk, vv in v.items()
                                  if kk not in ("per_run", "restores")}))


if __name__ == "__main__":
    from bench.__main__ import parse_args
    main(parse_args())
