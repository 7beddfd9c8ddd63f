"""Unclean recovery (design.md#kip-966): KIP-966 unclean recovery of ~1k leaderless partitions
spread over 3 brokers. Targets: time past the strategy's wait <= 1 s; GetReplicaLogInfo RPCs
per recovery: one per broker.

Real processes: a LocalCluster of one controller and three brokers with two log dirs each,
``eligible.leader.replicas.enable=true`` and ``unclean.recovery.strategy=Balanced`` (cluster
level). TOPICS topics of PARTITIONS_PER_TOPIC partitions each (1000 in all), RF 3, leaders
rotating over the brokers, min.insync.replicas 2.

Per run:

1. RECORDS records are produced to every partition (acks=all) with all three brokers in sync.
2. Broker 1 is SIGKILLed; once the controller has taken it out of every ISR ({2,3}: still at min
   ISR, no ELR), RECORDS more records go to every partition - broker 1's logs are now the short
   ones, the recovery must not pick them.
3. Broker 2, then broker 3 are SIGKILLed (each once the controller handled the previous): ISR
   {3} with ELR {2}, then ISR {} with ELR {2,3} - every partition leaderless, with only fenced
   ELR members (Balanced waits for them). Nobody shut down cleanly.
4. Restart, in the order that gives every partition a recovery that hears all three replicas:
   broker 1 first (not in any ELR, so nothing happens - checked: no recovery starts), then
   brokers 2 and 3 together. Each registers after an unclean shutdown, so it leaves the ELR
   for LastKnownELR (it cannot be elected cleanly); when the later of 2 and 3 registers, the ELR
   is empty and every LastKnownELR member is unfenced: Balanced starts one recovery task per
   partition, all three replicas live. (Restarting 2 and 3 before 1 would start the recoveries
   without broker 1. Under Proactive the recoveries start when broker 3 dies and wait 5 s for
   every replica; a broker registering after that is elected on its own answer - the stale
   broker 1 if it comes first: availability first. So this bench measures Balanced.)

Figures, from the controller's event log (``broker_registered``, ``unclean_recovery_started``,
``unclean_recovery_finished``) and its /metrics, per run, then the median over runs:

- **ready -> elected**: from the registration that made the recovery possible (the later of 2
  and 3, as the controller logged it) to each partition's election (median, p99, max over the
  partitions). Minus the strategy's wait where it applied: Balanced chooses as soon as every
  replica asked has answered, so the wait (unclean.recovery.timeout.ms) applies only to a task
  that chose on its timeout - reported as such, none is expected;
- **task start -> elected** (the same, from each task's own start), and the spread from the
  first election to the last (one batch of elections, or serialized ones);
- **GetReplicaLogInfo RPCs** (replog_controller_getreplicaloginfo_requests_total, delta over
  the restart) divided by the brokers asked: 1.0 is one RPC per broker for the whole batch;
- **offsets discarded** (replog_unclean_recovery_offsets_discarded_total, delta) and, from the
  answers each finished task records, whether the elected replica holds the longest log and
  whether any stale broker-1 log was elected;
- **RECOVERED**: every partition led again with leader_recovery_state RECOVERED in ZooKeeper
  (KIP-704: the new leader reports it).

``python -m bench unclean_recovery [--quick] [--runs N] [--data-dir DIR]``; the median of 3
runs by default (1 with ``--quick``, which uses 2 topics of 50 partitions).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

from bench import log, median
from bench.harness.events import EventTail
from bench.harness.runner import report, run_each

TOPICS = 4
PARTITIONS_PER_TOPIC = 250
QUICK_TOPICS = 2
QUICK_PARTITIONS_PER_TOPIC = 50
RECORDS = 10  # per partition, before and again after broker 1 dies
STRATEGY = "Balanced"
RECOVERY_TIMEOUT_MS = 300_000  # unclean.recovery.timeout.ms (Balanced's wait; the default)
SESSION_TIMEOUT_MS = 6000
OVERRIDES = {
    "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
    "auto.leader.rebalance.enable": "false",
    "replica.lag.time.max.ms": 10000, "replica.fetch.wait.max.ms": 200,
    "eligible.leader.replicas.enable": "true",
    "unclean.recovery.strategy": STRATEGY,
    "unclean.recovery.timeout.ms": RECOVERY_TIMEOUT_MS,
    "min.insync.replicas": 2,
}
METRICS = {"replog_controller_getreplicaloginfo_requests_total",
           "replog_unclean_recovery_offsets_discarded_total",
           "replog_unclean_recoveries_total"}


def _topics(quick: bool) -> list[tuple[str, int]]:
    n, per = (QUICK_TOPICS, QUICK_PARTITIONS_PER_TOPIC) if quick else \
        (TOPICS, PARTITIONS_PER_TOPIC)
    return [(f"urm-{i}", per) for i in range(n)]


def _pct(values: list[float], q: float) -> float:
    """The q-quantile (nearest rank) of values."""
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * len(s) + 0.5) - 1))]


def scrape(url: str) -> dict[str, float]:
    """The samples of METRICS a process serves, labels folded into the key."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families
    with urllib.request.urlopen(url, timeout=5) as resp:
        text = resp.read().decode()
    return {s.name + ("{" + ",".join(f"{k}={v}" for k, v in sorted(s.labels.items())) + "}"
                      if s.labels else ""): s.value
            for f in text_string_to_metric_families(text) for s in f.samples
            if s.name in METRICS}


def _states(c, topics):
    """Every partition's state znode, straight from ZooKeeper (through the cluster's view)."""
    from harness.cluster_view import ClusterView
    view = ClusterView(c)
    return {(t, p): view.partition_state(t, p) for t, n in topics for p in range(n)}


async def _until(cond, timeout: float, what: str, interval: float = 0.2):
    t0 = time.monotonic()
    while True:
        r = cond()
        if r:
            return r
        if time.monotonic() - t0 > timeout:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(interval)


def _event(tail: EventTail, name: str, **match) -> dict | None:
    tail.poll()
    return next((e for e in tail.events if e.get("event") == name
                 and all(e.get(k) == v for k, v in match.items())), None)


async def _kill(c, tail: EventTail, topics, broker: int, expect) -> None:
    """SIGKILL ``broker``; wait for the controller's broker_failed and for every partition's
    state to satisfy ``expect``."""
    c.broker(broker).kill()
    await _until(lambda: _event(tail, "broker_failed", broker=broker), 60,
                 f"the controller to see broker {broker} die")
    await _until(lambda: all(expect(s) for s in _states(c, topics).values()), 60,
                 f"every partition's state after broker {broker} died", interval=0.5)


async def _produce(bootstrap: str, topics) -> None:
    from client.producer import Producer
    async with Producer(bootstrap, acks="all", linger_ms=5) as prod:
        futs = [await prod.send(t, b"r" * 100, partition=p)
                for t, n in topics for p in range(n) for _ in range(RECORDS)]
        await asyncio.gather(*futs)


async def one_run(data_dir: str, topics) -> dict:
    from bench.harness.cluster import rotating_assignment
    from client.admin_client import AdminClient
    from common import zk_layout as zl
    from harness.local_cluster import LocalCluster

    total = sum(n for _, n in topics)
    c = LocalCluster(Path(data_dir) / "cluster", brokers=3, controllers=1,
                     log_dirs_per_broker=2, overrides=OVERRIDES, startup_timeout_s=180.0)
    try:
        c.start()
        ctrl = next(iter(c.controllers.values()))
        async with AdminClient(c.bootstrap_servers, default_api_timeout_ms=180000) as admin:
            for t, n in topics:
                await admin.create_topic(t, replica_assignment=rotating_assignment(n, 3),
                                         configs={"min.insync.replicas": "2"})
        await _until(lambda: all(len(s.isr) == 3 and s.leader >= 0
                                 for s in _states(c, topics).values()), 300,
                     "every partition fully replicated", interval=1.0)
        await _produce(c.bootstrap_servers, topics)
        tail = EventTail(ctrl.event_log_file)

        await _kill(c, tail, topics, 1, lambda s: set(s.isr) == {2, 3} and s.leader in (2, 3)
                    and not s.elr)
        await _produce(",".join(c.broker(b).address for b in (2, 3)), topics)
        await _kill(c, tail, topics, 2, lambda s: s.isr == (3,) and s.elr == (2,))
        await _kill(c, tail, topics, 3, lambda s: s.leader == zl.NO_LEADER and not s.isr
                    and s.elr == (2, 3))
        before = scrape(ctrl.metrics_url)
        log(f"[unclean_recovery] {total} partitions leaderless, ISR [] ELR [2, 3]; "
            f"restarting broker 1, then 2 and 3 together")

        c.broker(1).start(wait=False)
        reg1 = await _until(lambda: _event(tail, "broker_registered", broker=1), 180,
                            "broker 1's registration")
        await asyncio.sleep(1.0)  # time for a wrong recovery to start, if one would
        early = _event(tail, "unclean_recovery_started")
        c.broker(2).start(wait=False)
        c.broker(3).start(wait=False)
        regs = await _until(lambda: [_event(tail, "broker_registered", broker=b)
                                     for b in (2, 3)] if all(
            _event(tail, "broker_registered", broker=b) for b in (2, 3)) else None, 180,
            "brokers 2 and 3 registered")

        def finished():
            tail.poll()
            fin = [e for e in tail.events if e.get("event") == "unclean_recovery_finished"]
            return fin if len({e["partition"] for e in fin}) >= total else None
        fin = await _until(finished, 300, "every recovery finished", interval=0.1)
        t_done = time.time()
        after = scrape(ctrl.metrics_url)
        await asyncio.sleep(0.5)
        tail.poll()

        ready = max(e["_ts"] for e in regs)
        started = {e["partition"]: e for e in tail.events
                   if e.get("event") == "unclean_recovery_started"}
        outcomes = Counter(e["outcome"] for e in fin)
        elected = [e for e in fin if e["outcome"] == "elected"]
        brokers_asked = sorted({int(b) for e in started.values() for b in e["replicas"]}
                               & {int(b) for e in elected for b in e["answers"]})
        wait_ms = RECOVERY_TIMEOUT_MS if STRATEGY == "Balanced" else 5000
        timed_out = sum(1 for e in elected if e["waited_ms"] >= wait_ms)
        from_ready = [(e["_ts"] - ready) * 1000 - (wait_ms if e["waited_ms"] >= wait_ms else 0)
                      for e in elected]
        from_start = [(e["_ts"] - started[e["partition"]]["_ts"]) * 1000 for e in elected
                      if e["partition"] in started]
        not_best = stale = 0
        for e in elected:
            leos = {int(b): a["log_end_offset"] for b, a in e["answers"].items()
                    if a["error"] == "NONE"}
            if leos[e["leader"]] < max(leos.values()):
                not_best += 1
            if e["leader"] == 1:
                stale += 1
        stamps = sorted(e["_ts"] for e in elected)
        written = {e["partition"]: e["_ts"] for e in tail.events
                   if e.get("event") == "leader_election" and e.get("reason") == "unclean_recovery"}
        to_written = [(written[e["partition"]] - started[e["partition"]]["_ts"]) * 1000
                      for e in elected if e["partition"] in written and e["partition"] in started]
        failed_queries = sum(1 for e in tail.events if e.get("event") == "replica_log_info_failed")

        def delta(name):
            return sum(v for k, v in after.items() if k.startswith(name)) - \
                sum(v for k, v in before.items() if k.startswith(name))
        rpcs = delta("replog_controller_getreplicaloginfo_requests_total")

        def recovered():
            ss = _states(c, topics).values()
            return all(s.leader >= 0 and s.leader_recovery_state == zl.LEADER_RECOVERED
                       for s in ss)
        await _until(recovered, 120, "every partition RECOVERED", interval=1.0)
        t_recovered = time.time()
        return {
            "partitions": total, "outcomes": dict(outcomes), "elected": len(elected),
            "recoveries_before_last_registration": 0 if early is None else 1,
            "broker1_registered_s_before_ready": round(ready - reg1["_ts"], 2),
            "registrations_2_3_apart_s": round(abs(regs[0]["_ts"] - regs[1]["_ts"]), 2),
            "ready_to_first_task_ms": round((min(e["_ts"] for e in started.values()) - ready)
                                            * 1000, 1),
            "past_wait_ms": {"median": round(statistics.median(from_ready), 1),
                             "p99": round(_pct(from_ready, 0.99), 1),
                             "max": round(max(from_ready), 1)},
            "start_to_elected_ms": {"median": round(statistics.median(from_start), 1),
                                    "p99": round(_pct(from_start, 0.99), 1),
                                    "max": round(max(from_start), 1)},
            "start_to_written_median_ms": round(statistics.median(to_written), 1),
            "election_spread_ms": round((stamps[-1] - stamps[0]) * 1000, 1),
            "chose_on_timeout": timed_out,
            "rpcs": rpcs, "brokers_asked": brokers_asked,
            "rpcs_per_broker": round(rpcs / max(1, len(brokers_asked)), 2),
            "failed_queries": failed_queries,
            "offsets_discarded": delta("replog_unclean_recovery_offsets_discarded_total"),
            "offsets_discarded_events": sum(e["offsets_discarded"] for e in elected),
            "elected_not_longest": not_best, "elected_stale_broker1": stale,
            "leaders": dict(sorted(Counter(e["leader"] for e in elected).items())),
            "ready_to_all_elected_s": round(t_done - ready, 2),
            "ready_to_recovered_s": round(t_recovered - ready, 2),
        }
    finally:
        c.stop(graceful=False)


def main(opts) -> dict:
    topics = _topics(opts.quick)
    total = sum(n for _, n in topics)
    results = run_each(opts, lambda d: one_run(d, topics), lambda i, n, r: (
        f"[unclean_recovery] run {i + 1}/{n}: {r['elected']}/{total} elected "
        f"{r['outcomes']}, ready -> elected median {r['past_wait_ms']['median']} ms "
        f"p99 {r['past_wait_ms']['p99']} max {r['past_wait_ms']['max']}, "
        f"{r['rpcs']:.0f} GetReplicaLogInfo RPCs to {len(r['brokers_asked'])} brokers, "
        f"{r['offsets_discarded']:.0f} offsets discarded"))
    runs = len(results)

    def med(key, sub=None):
        return round(median([r[key][sub] if sub else r[key] for r in results]), 2)
    figure = {
        "partitions": total, "topics": len(topics), "strategy": STRATEGY, "runs": runs,
        "elected": med("elected"),
        "past_wait_median_ms": med("past_wait_ms", "median"),
        "past_wait_p99_ms": med("past_wait_ms", "p99"),
        "past_wait_max_ms": med("past_wait_ms", "max"),
        "past_wait_max_runs_ms": [r["past_wait_ms"]["max"] for r in results],
        "start_to_elected_median_ms": med("start_to_elected_ms", "median"),
        "start_to_elected_p99_ms": med("start_to_elected_ms", "p99"),
        "start_to_elected_max_ms": med("start_to_elected_ms", "max"),
        "ready_to_first_task_ms": med("ready_to_first_task_ms"),
        "start_to_written_median_ms": med("start_to_written_median_ms"),
        "election_spread_ms": med("election_spread_ms"),
        "chose_on_timeout": max(r["chose_on_timeout"] for r in results),
        "rpcs": med("rpcs"), "brokers_asked": median([len(r["brokers_asked"]) for r in results]),
        "rpcs_per_broker": med("rpcs_per_broker"),
        "rpcs_per_broker_runs": [r["rpcs_per_broker"] for r in results],
        "failed_queries": max(r["failed_queries"] for r in results),
        "offsets_discarded": med("offsets_discarded"),
        "elected_not_longest": max(r["elected_not_longest"] for r in results),
        "elected_stale_broker1": max(r["elected_stale_broker1"] for r in results),
        "recoveries_before_last_registration": max(
            r["recoveries_before_last_registration"] for r in results),
        "ready_to_recovered_s": med("ready_to_recovered_s"),
    }
    print(f"== unclean recovery (KIP-966, {STRATEGY}): {total} leaderless partitions "
          f"({len(topics)} topics, RF 3, min ISR 2, ISR [] ELR [2,3]) over 3 SIGKILLed brokers, "
          f"restarted 1 then 2+3 (median of {runs})")
    print(f"   elected by recovery                 {figure['elected']:>7} of {total}   "
          f"(recoveries started before the last needed registration: "
          f"{figure['recoveries_before_last_registration']})")
    print(f"   ready -> elected, past the wait ms  median {figure['past_wait_median_ms']}  "
          f"p99 {figure['past_wait_p99_ms']}  max {figure['past_wait_max_ms']}   "
          f"(target <= 1000; runs' max {figure['past_wait_max_runs_ms']}; chose on the "
          f"timeout: {figure['chose_on_timeout']})")
    print(f"   task start -> elected ms            median {figure['start_to_elected_median_ms']}"
          f"  p99 {figure['start_to_elected_p99_ms']}  max {figure['start_to_elected_max_ms']}"
          f"   (ready -> first task {figure['ready_to_first_task_ms']} ms; task start -> "
          f"election written to ZooKeeper {figure['start_to_written_median_ms']} ms; first "
          f"-> last election {figure['election_spread_ms']} ms)")
    print(f"   GetReplicaLogInfo RPCs              {figure['rpcs']:>7} to "
          f"{figure['brokers_asked']} brokers = {figure['rpcs_per_broker']} per broker "
          f"(target 1.0; runs {figure['rpcs_per_broker_runs']}; failed queries "
          f"{figure['failed_queries']})")
    print(f"   offsets discarded                   {figure['offsets_discarded']:>7}   "
          f"(elected a shorter log than answered: {figure['elected_not_longest']}; "
          f"elected stale broker 1: {figure['elected_stale_broker1']})")
    print(f"   ready -> every leader RECOVERED     {figure['ready_to_recovered_s']:>7} s")
    return report("unclean_recovery", "recovery_1k", figure, (), opts.data_dir, runs=results)


if __name__ == "__main__":  # the same options as ``python -m bench unclean_recovery``
    from bench.__main__ import main as run_benchmarks
    sys.exit(run_benchmarks(["unclean_recovery", *sys.argv[1:]]))
