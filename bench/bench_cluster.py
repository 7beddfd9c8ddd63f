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
restricts the run to some figures. The cluster, the CPU meters, the event-log tails, the
straight-to-broker channels and the probing clients are the shared harness (``bench/harness``,
``bench/harness/prober.py``); each figure is a module of ``bench/cluster_figures`` (throughput,
unavailability, shutdown), and this module runs them and prints the tables.
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

from bench import (
    json_line,
    log,
    machine_info,
    save_results,
)
from bench.cluster_figures import (
    FULL,
    QUICK,
    TARGET_ELECTIONS_S,
    TARGET_MB_S,
    TARGET_RATIO,
    TARGET_SHUTDOWN_S,
    TARGET_UNAVAIL_MARGIN_S,
    TARGET_UNAVAIL_STRETCH_S,
    shutdown_verdict,
)
from bench.cluster_figures.shutdown import (
    SHUTDOWN_PRODUCER_PARTITIONS,
    SHUTDOWN_PRODUCER_RATE,
    figure_shutdown_and_elections,
    summarize_cd,
)
from bench.cluster_figures.throughput import figure_throughput
from bench.cluster_figures.unavailability import figure_unavailability
from bench.harness import (
    CLUSTER_OVERRIDES,
    SESSION_TIMEOUT_MS,
    start_cluster,
)

NAME = "cluster"


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
                c_sum, e_sum = summarize_cd(d)
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
