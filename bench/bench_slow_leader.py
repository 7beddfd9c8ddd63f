"""design.md#kip-501: how long produce stalls when a leader's reads turn slow.

A 3-broker LocalCluster with ``follower.fetch.pending.reads.insync.enable=true``; a topic with
one partition (RF=3, min.insync.replicas=2) led by broker 1; an acks=all producer writing
continuously. At t0 broker 1's reads of that partition become slow (each read call delayed,
injected through the broker's file-operation seam — a slow disk cannot be produced on demand).
Figure: t0 -> the first record acknowledged by the new leader, next to
``follower.fetch.process.time.max.ms``; and t0 -> the controller's leadership change.
Median of several runs (each run a fresh cluster).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time

from bench.harness.runner import report, run_each

PROCESS_TIME_MAX_MS = 500
SLOW_READ_MS = 1000


async def one_run(data_dir: str) -> dict:
    from client.admin_client import AdminClient
    from client.errors import KafkaError
    from client.producer import Producer
    from harness.local_cluster import LocalCluster

    faults = os.path.join(data_dir, "faults-1.json")
    c = LocalCluster(data_dir, brokers=3, overrides={
        "replica.lag.time.max.ms": 1500, "replica.fetch.wait.max.ms": 200,
        "replica.fetch.backoff.ms": 200, "zookeeper.session.timeout.ms": 30000,
        "follower.fetch.pending.reads.insync.enable": "true",
        "follower.fetch.process.time.max.ms": PROCESS_TIME_MAX_MS},
        per_broker_overrides={1: {"fault.injection.file": faults}})
    c.start()
    try:
        bs = c.bootstrap_servers
        async with AdminClient(bs) as admin:
            await admin.create_topic("t", replica_assignment={0: [1, 2, 3]},
                                     configs={"min.insync.replicas": "2"})
            for _ in range(100):
                info = (await admin.describe_topics(["t"]))["t"].partition(0)
                if info.leader == 1 and len(info.isr) == 3:
                    break
                await asyncio.sleep(0.1)
        pdir = next(os.path.join(str(d), "t-0") for d in c.broker(1).log_dirs
                    if os.path.isdir(os.path.join(str(d), "t-0")))
        leader_of: dict[int, int] = {}
        async with Producer(bs, acks="all", linger_ms=1, delivery_timeout_ms=3000,
                            request_timeout_ms=2000, retries=0) as p:
            for i in range(20):  # noqa: B007
                await p.send_and_wait("t", b"warm", partition=0)
            t0 = time.monotonic()
            with open(faults, "w") as f:
                json.dump([{"path": pdir, "delay_ms": SLOW_READ_MS, "ops": ["pread"]}], f)
            resumed = None
            async with AdminClient(bs) as admin:
                while time.monotonic() - t0 < 60:
                    try:
                        md = await p.send_and_wait("t", b"x" * 100, partition=0)
                    except KafkaError:
                        await asyncio.sleep(0.05)
                        continue
                    info = (await admin.describe_topics(["t"]))["t"].partition(0)
                    if info.leader != 1:
                        leader_of.setdefault(info.leader, md.offset)
                        resumed = time.monotonic() - t0
                        break
        changed = None
        with open(c.controller(next(iter(c.controllers))).event_log_file) as f:
            for line in f:
                e = json.loads(line)
                if e.get("event") == "leader_election" and e.get("partition") == "t-0" and \
                        e.get("new_leader") != 1:
                    changed = e["timestamp"]
        return {"resume_s": resumed, "new_leader": next(iter(leader_of), None),
                "election_at": changed}
    finally:
        c.stop(graceful=False)


def main(opts) -> dict:
    results = run_each(opts, one_run, lambda i, _, r: (
        f"   run {i + 1}: produce resumed on broker {r['new_leader']} after "
        f"{r['resume_s']:.2f} s" if r["resume_s"] is not None else
        f"   run {i + 1}: produce did not resume within 60 s"))
    runs = len(results)
    ok = [r["resume_s"] for r in results if r["resume_s"] is not None]
    figure = {"resume_s_median": round(statistics.median(ok), 2) if ok else None,
              "resume_s_runs": [round(x, 2) if x is not None else None
                                for x in (r["resume_s"] for r in results)],
              "follower_fetch_process_time_max_ms": PROCESS_TIME_MAX_MS,
              "slow_read_ms_per_call": SLOW_READ_MS, "runs": runs}
    return report("slow_leader", "resume_after_slow_reads", figure, [
        f"== slow leader (KIP-501, flag on): reads slowed by {SLOW_READ_MS} ms per call",
        f"   produce resumes on the new leader after {figure['resume_s_median']} s (median "
        f"of {runs}); follower.fetch.process.time.max.ms = {PROCESS_TIME_MAX_MS} ms"])
