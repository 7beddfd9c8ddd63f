"""(b) Client-observed unavailability after SIGKILL of a leader, measured by the prober
(bench/harness/prober.py) against the session timeout (bench/bench_cluster.py).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter

from bench import (
    log,
    median,
)
from bench.cluster_figures import TARGET_UNAVAIL_MARGIN_S, TARGET_UNAVAIL_STRETCH_S
from bench.harness import (
    SESSION_TIMEOUT_MS,
    Brokers,
    EventTail,
    preferred_leads,
    restore,
    rotating_assignment,
    topic_view,
    wait_partitions,
)
from bench.harness.prober import Prober
from client import AdminClient
from harness.local_cluster import LocalCluster

PROBE_PARTITIONS = 12
PROBE_INTERVAL_S = 0.010


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(-(-q * len(s) // 100)) - 1))
    return s[k]


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
