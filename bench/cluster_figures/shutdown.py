"""(c) Controlled shutdown of a broker leading N partitions and (d) leader elections per second
after a broker failure, from the controller's and brokers' event logs (bench/bench_cluster.py).
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter

from bench import (
    log,
    median,
)
from bench.cluster_figures import TARGET_ELECTIONS_S, TARGET_SHUTDOWN_S, shutdown_verdict
from bench.harness import (
    SESSION_TIMEOUT_MS,
    Brokers,
    EventTail,
    preferred_leads,
    restore,
    start_cluster,
    topic_view,
    wait_partitions,
)
from bench.harness.prober import Prober, ProducerLoad, all_sent_ok_after, outage
from client import AdminClient
from harness.local_cluster import LocalCluster

SHUTDOWN_PROBE_PARTITIONS = 12
SHUTDOWN_PROBE_INTERVAL_S = 0.050
SHUTDOWN_PRODUCER_PARTITIONS = 24
SHUTDOWN_PRODUCER_RATE = 240.0  # records/s in all: each partition every 100 ms


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


def summarize_cd(d: dict) -> tuple[dict, dict]:
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
