"""(a) Produce throughput of a 3-broker cluster, RF=3 acks=all against RF=1 acks=1 in the same
round: the lean in-process load generator and the real ``Producer`` (bench/bench_cluster.py).
"""

from __future__ import annotations

import asyncio
import os
import time
import urllib.request
from collections import Counter
from functools import partial

import grpc
import grpc.aio
from prometheus_client.parser import text_string_to_metric_families

from bench import (
    GB,
    Sample,
    log,
    median,
    paired_ratio,
    summarize,
)
from bench.cluster_figures import Plan
from bench.harness import (
    Brokers,
    CpuMeter,
    cluster_pids,
    isr_full,
    rotating_assignment,
    topic_view,
    wait_partitions,
    zk_pid,
)
from client import AdminClient, Producer
from common import records as rec
from common.errors import ErrorCode
from common.rpc import replog_pb2 as pb
from harness.local_cluster import LocalCluster

RECORD_BYTES = 1024
RECORDS_PER_BATCH = 64
TPUT_PARTITIONS = 6
IN_FLIGHT_PER_BROKER = 4


def make_batch(n: int = RECORDS_PER_BATCH, size: int = RECORD_BYTES) -> bytes:
    return rec.build_batch([rec.ProducerRecord(key=None, value=os.urandom(size))
                            for _ in range(n)])


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
