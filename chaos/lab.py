"""``replog lab``: each design's claim measured against the behaviour it replaced, A/B over seeds.

An *experiment* (``EXPERIMENTS``) is a fault scenario and a set of *arms*: cluster configs, one
of them the pre-design behaviour ("baseline"). ``run_lab`` runs every arm on every seed, each
run on a fresh local cluster, through the chaos runner (chaos/runner.py): the same seed gives
every arm the same schedule (the faults, their targets and times, drawn from the seed only) and
the same workload, so arms differ by their config alone. Per run it keeps, under
``OUT/runs/<arm>/seed-<n>/``:

- ``schedule.json``, ``history.jsonl`` and ``verdict.json`` (the chaos runner's files);
- ``states.jsonl``: the workload topic's partition states (leader, ISR, ELR) read from
  ZooKeeper every ``STATE_INTERVAL_S``, the source of the leaderless / under-replicated /
  ISR-shrink figures (the controller's own record: a dead leader is not there to report it);
- ``export/``: ``replog metrics export``'s files for the run (``replog analyze --input``
  reads them);
- ``result.json``: written last, so a run with it is finished (``--resume`` skips it) and a
  run dir without it was interrupted (removed and run again).

Runs go seed by seed (every arm of seed 1, then of seed 2, ...), so a stopped lab still holds
comparable pairs. The analysis (analytics/lab.py, PySpark) then writes ``summary.json``,
``tables/`` and ``report.html``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import shutil
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from chaos import runner
from chaos.nemesis import NEMESIS_CLASSES, Nemesis
from chaos.schedule import Fault, Schedule, Timeouts
from client import reassignment
from common import zk_layout
from common.errors import ReplogError
from harness.local_cluster import LocalCluster

STATE_INTERVAL_S = 0.25
EXPORT_INTERVAL_MS = 500
RESULT = "result.json"
STATES = "states.jsonl"


# ---------------------------------------------------------------------------- nemeses

class _OneProcessFault(Nemesis):
    """Stops one broker at the fault's start and starts that same broker at the fault's end.
    The chaos runner's kill and bounce restart every process they hold at any stop, which
    cannot express "bring back the stale replica first, the last leader later"."""

    clean = False

    def __init__(self, procs, shared):
        super().__init__(procs, shared)
        self.down: dict[int, str] = {}  # fault index -> process name

    def unavailable(self):
        return self.procs.restart_unavailable()

    async def start(self, fault: Fault) -> dict:
        name = self.procs.resolve(fault.target[0])
        h = self.procs.handle(name)
        if self.clean:
            await h.astop()  # SIGTERM: a broker's controlled shutdown
        else:
            await h.akill(signal.SIGKILL)
        self.down[fault.index] = name
        return {"stopped" if self.clean else "killed": name}

    async def stop(self, fault: Fault) -> dict:
        name = self.down.pop(fault.index, None)
        if name is not None and not self.procs.handle(name).is_running():
            await self.procs.handle(name).astart()
        return {"started": name}

    async def heal(self) -> None:
        for index in sorted(self.down):
            name = self.down.pop(index)
            if not self.procs.handle(name).is_running():
                await self.procs.handle(name).astart()


class LabStopNemesis(_OneProcessFault):
    name = "lab-stop"
    clean = True


class LabKillNemesis(_OneProcessFault):
    name = "lab-kill"


class LabPartitionEioNemesis(Nemesis):
    """EIO on writes under one partition's log on one of its followers (the fault-injection
    file's rule names the partition dir, as tests/cluster/test_fetcher_isolation.py does): the
    follower's append fails, which is a partition failure for its fetcher (design.md#kip-461)
    and, the dir passing the availability probe, that one log goes offline (design.md#jbod). The
    fault ends with the rule cleared and a clean bounce of the follower, for every arm alike:
    the pre-KIP-461 fetcher stays stopped until its broker restarts."""

    name = "lab-eio-partition"

    def __init__(self, procs, shared):
        super().__init__(procs, shared)
        self.active: dict[int, int] = {}  # fault index -> broker

    def unavailable(self):
        if any(self.procs.fault_file(b) is None for b in self.procs.cluster.brokers):
            return "the brokers were started without fault.injection.file"
        return self.procs.restart_unavailable()

    def _rules(self, broker: int, rules: list[dict]) -> None:
        path = self.procs.fault_file(broker)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(rules))
        tmp.replace(path)

    async def start(self, fault: Fault) -> dict:
        p = int(fault.target[0].removeprefix("partition-"))
        data, st = await asyncio.to_thread(
            self.procs._zk_read, "get", zk_layout.partition_state_path(self.procs.topic, p))
        state = zk_layout.decode_partition_state(data, st.version)
        # the first in-sync follower in broker id order: the same broker for every arm
        follower = min(b for b in state.isr if b != state.leader)
        h = self.procs.cluster.broker(follower)
        path = next(str(Path(d) / f"{self.procs.topic}-{p}") for d in h.log_dirs
                    if (Path(d) / f"{self.procs.topic}-{p}").is_dir())
        self._rules(follower, [{"path": path, "errno": "EIO", "ops": ["write"]}])
        self.active[fault.index] = follower
        return {"broker": follower, "partition_dir": path}

    async def stop(self, fault: Fault) -> dict:
        b = self.active.pop(fault.index, None)
        if b is not None:
            self._rules(b, [])
            await self.procs.cluster.broker(b).arestart()
        return {"restarted": b}

    async def heal(self) -> None:
        for index in sorted(self.active):
            b = self.active.pop(index)
            self._rules(b, [])
            await self.procs.cluster.broker(b).arestart()


# The reassignment experiment: a fourth broker to move replicas to, a second controller to take
# over, and a bulk topic whose data the move has to copy.
BULK_TOPIC = "lab-bulk"
BULK_ASSIGNMENT = {0: [1, 2, 3], 1: [2, 3, 1]}
WORKLOAD_ASSIGNMENT = {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}
NEW_BROKER = 4
PRELOAD_BYTES = 40_000_000  # per bulk partition, before the workload starts
PRELOAD_RECORD = 250_000
MOVE_TIMEOUT_S = 240.0  # below the runner's OP_TIMEOUT_S
MOVE_POLL_S = 0.1
REASSIGN_BYTES_IN = "kafka_server_brokertopicmetrics_reassignmentbytesin_total"


def reassignment_targets(current: dict[tuple[str, int], list[int]], leaving: int,
                         joining: int = NEW_BROKER) -> dict[tuple[str, int], list[int]]:
    """Each partition's replicas with ``leaving`` replaced by ``joining`` in its place (the
    preferred leader stays first unless it is the one leaving); partitions without
    ``leaving`` are not moved."""
    return {tp: [joining if b == leaving else b for b in r]
            for tp, r in sorted(current.items()) if leaving in r}


async def _bytes_in(url: str) -> float | None:
    """The reassignment bytes a broker has received (its /metrics, read as the exporter reads
    it); None when it does not answer."""
    from analytics.export import http_get, parse_samples
    try:
        text = await http_get(url, timeout=5)
    except (OSError, TimeoutError):
        return None
    return sum(v for name, _, v in parse_samples(text) if name == REASSIGN_BYTES_IN)


def copy_figures(received: list[tuple[float, float]], share: float = 0.95) -> dict:
    """From broker 4's reassignment bytes in, sampled (seconds since the request, bytes)
    through the move: ``bytes_in`` in all, and ``copy_s``, when ``share`` of them had
    arrived - the copy's own duration, which a new replica's entry to the ISR (it waits for
    a controller to accept it, KIP-497) may well outlast - with ``copy_bytes``, that share.
    The rate the throttle let through is copy_bytes / copy_s."""
    if not received or received[-1][1] <= 0:
        return {"bytes_in": None, "copy_s": None, "copy_bytes": None}
    total = received[-1][1]
    at = next(t for t, b in received if b >= share * total)
    return {"bytes_in": int(total), "copy_s": round(at, 3), "copy_bytes": int(share * total)}


class LabReassignNemesis(Nemesis):
    """KAFKA-42 under load: the seed names a workload partition and a broker (1-3); that
    broker's replicas of the partition and of both bulk partitions move to broker 4 through
    ``replog reassign --execute`` (admin/reassign/, Kafka's ReassignPartitionsCommand),
    with ``--throttle RATE`` when the arm has one (KIP-73: the rate on every reassigning
    broker, the moving replicas named in the topics' throttled-replicas lists), without any
    throttle config otherwise. It then polls (every MOVE_POLL_S, through a controller
    failover) until every target replica is in its ISR (``caught_up_s``) and the
    reassignment is complete (none listed, replicas = target: ``move_s``), and clears the
    throttles, as ``--verify`` does once the moves are done. Broker 4's reassignment bytes in,
    sampled as it polls, give the copy's own time and the rate the throttle let through
    (``copy_figures``). Runs in the runner's admin lane: the schedule's faults go on meanwhile."""

    name = "lab-reassign"
    admin = True

    def __init__(self, procs, shared):
        super().__init__(procs, shared)
        self.throttled: dict[tuple[str, int], list[int]] = {}  # throttles still set

    def _admin(self):
        from client.admin_client import AdminClient
        return AdminClient(self.shared["bootstrap"], request_timeout_ms=5000,
                           default_api_timeout_ms=15000)

    def _caught_up(self, targets) -> bool:
        """Every target replica in its partition's ISR, as the leaders wrote it to ZooKeeper
        (the brokers' metadata would show it only once a controller sent it)."""
        for (t, p), r in targets.items():
            data, st = self.procs._zk_read("get", zk_layout.partition_state_path(t, p))
            if not set(r) <= set(zk_layout.decode_partition_state(data, st.version).isr):
                return False
        return True

    @staticmethod
    async def _complete(admin, targets) -> bool:
        """No reassignment of the targets listed, and their replicas the targets; raises while
        the controller is failing over."""
        if await admin.list_partition_reassignments(list(targets)):
            return False
        infos = await admin.describe_topics(sorted({t for t, _ in targets}))
        return all(infos[t].partition(p) is not None
                   and list(infos[t].partition(p).replicas) == r
                   for (t, p), r in targets.items())

    async def start(self, fault):
        p = int(fault.target[0].removeprefix("partition-"))
        leaving = int(fault.target[1].removeprefix("broker-"))
        throttle = self.shared.get("lab_throttle")
        tps = [(BULK_TOPIC, q) for q in sorted(BULK_ASSIGNMENT)] + [(self.shared["topic"], p)]
        async with self._admin() as admin:
            current = await reassignment.current_replicas(admin, tps)
            targets = reassignment_targets(current, leaving)
            url = self.procs.cluster.broker(NEW_BROKER).metrics_url
            before = await _bytes_in(url)
            if throttle:
                self.throttled = targets
            t0 = time.monotonic()
            try:
                # as `replog reassign --execute --throttle` makes it, without its messages
                _, results = await reassignment.execute(admin, targets, throttle)
            finally:
                submitted(self.shared).set()  # the failover's cue, moved or not
            if any(e is not None for e in results.values()):
                self.throttled = {}
                return {"moved": False, "rc": 1}
            caught_up_s = None
            received: list[tuple[float, float]] = []  # (s since the request, bytes in)
            while True:
                got = await _bytes_in(url)
                if got is not None and before is not None:
                    received.append((time.monotonic() - t0, got - before))
                # Errors: ZooKeeper slow, a controller failing over - ask again.
                if caught_up_s is None:
                    with contextlib.suppress(Exception):
                        if await asyncio.to_thread(self._caught_up, targets):
                            caught_up_s = time.monotonic() - t0
                complete = False
                if caught_up_s is not None:
                    with contextlib.suppress(Exception):
                        complete = await self._complete(admin, targets)
                if complete:
                    break
                if time.monotonic() - t0 > MOVE_TIMEOUT_S:
                    raise RuntimeError(f"the reassignment was not complete after "
                                       f"{MOVE_TIMEOUT_S:.0f}s")
                await asyncio.sleep(MOVE_POLL_S)
        move_s = time.monotonic() - t0
        await self.undo()
        return {"moved": {f"{t}-{q}": r for (t, q), r in targets.items()},
                "from": {f"{t}-{q}": r for (t, q), r in current.items()},
                "throttle": throttle, "move_s": round(move_s, 3),
                "caught_up_s": round(caught_up_s if caught_up_s is not None else move_s, 3),
                **copy_figures(received)}

    undone = "throttles_cleared"

    async def undo(self) -> list[str]:
        if not self.throttled:
            return []
        async with self._admin() as admin:
            await reassignment.clear_all_throttles(admin, self.throttled)
        done = sorted(f"{t}-{p}" for t, p in self.throttled)
        self.throttled = {}
        return done


def submitted(shared: dict) -> asyncio.Event:
    """Set once the run's reassignment request has been answered (accepted or not)."""
    return shared.setdefault("lab_move_submitted", asyncio.Event())


class LabFailoverNemesis(LabKillNemesis):
    """The active controller SIGKILLed mid-move: the fault's second target seconds after the
    reassignment request was accepted (a kill at a fixed time would find the unthrottled
    move, well under a second, done); started again (as the standby) at the fault's end.
    The other controller takes over once the killed one's session expires, and resumes the
    reassignment in progress (design.md#reassignment's failover cases). An arm without failover
    keeps the slot, recorded as skipped, so every arm has the same timeline."""

    name = "lab-failover"
    WAIT_S = 60.0

    def unavailable(self):
        if not self.shared.get("lab_failover"):
            return "this arm has no controller failover"
        return super().unavailable()

    async def start(self, fault: Fault) -> dict:
        await asyncio.wait_for(submitted(self.shared).wait(), self.WAIT_S)
        await asyncio.sleep(float(fault.target[1]))
        return {**await super().start(fault), "after_submit_s": float(fault.target[1])}


# The chaos runner builds a schedule's nemeses from NEMESIS_CLASSES by name.
for _cls in (LabStopNemesis, LabKillNemesis, LabPartitionEioNemesis, LabReassignNemesis,
             LabFailoverNemesis):
    NEMESIS_CLASSES.setdefault(_cls.name, _cls)


# ---------------------------------------------------------------------------- experiments

@dataclass(frozen=True)
class Arm:
    name: str
    description: str
    overrides: dict[str, str] = field(default_factory=dict)  # every process's config
    baseline: bool = False  # the pre-design behaviour, for comparison
    options: dict = field(default_factory=dict)  # the nemeses' (a reassignment's throttle)


@dataclass(frozen=True)
class Experiment:
    name: str
    claim: str
    scenario: str
    arms: tuple[Arm, ...]
    schedule: Callable[[int, Timeouts], Schedule] | None  # None: not defined yet
    partitions: int = 3
    log_dirs_per_broker: int = 1
    writers: tuple[str, ...] = ("all", "all", "1")
    settle_s: float = 3.0
    not_ready: str = ""  # why ``run`` refuses it, when schedule is None
    brokers: int = 3
    controllers: int = 1
    assignment: dict[int, list[int]] | None = None  # the workload topic's; None: RF 3
    # Awaited with the bootstrap servers once the workload topic exists (a preload)
    prepare: Callable[[str], Awaitable[None]] | None = None

    def arm(self, name: str) -> Arm:
        for a in self.arms:
            if a.name == name:
                return a
        raise ReplogError(f"experiment {self.name} has no arm {name!r}; its arms: "
                          f"{', '.join(a.name for a in self.arms)}")


_DEFAULT_TIMEOUTS = Timeouts()


def _f(index: int, at: float, nemesis: str, target: str, until: float) -> Fault:
    return Fault(index, round(at, 2), nemesis, (target,), round(until - at, 2))


def last_replica_standing(seed: int, timeouts: Timeouts = _DEFAULT_TIMEOUTS) -> Schedule:
    """KIP-966's "last replica standing", drawn from ``seed``: which broker plays which role
    and the gaps between the steps (the same for every arm).

    1. S (the stale one) shuts down cleanly: the ISR is {A, B}, still at min.insync.replicas 2,
       so acks=all writes go on - records S will never have;
    2. B shuts down cleanly: the ISR is {A}, below min ISR (acks=all refused); with ELR, B
       joins the ELR (it left an ISR already below min ISR holding every committed record);
    3. A, the last leader, is SIGKILLed: leaderless everywhere;
    4. S comes back first (past the session timeout, so A's loss is registered): only an
       unclean election can pick it, and that loses the records of step 1;
    5. B comes back: an ELR member, elected cleanly with ELR on; with ELR off it is out of the
       ISR and cannot lead;
    6. A comes back last: only now does the ZooKeeper-era clean election find an ISR member.

    B returns 1.5-3 s after S. Balanced and Manual wait for a fenced ELR member (design.md#kip-966's
    election order, controller/selectors.py elr_leader), so B leads cleanly. Proactive does
    not: its recovery starts when A's loss is registered and takes the replies of the first
    5 s (controller/decisions/recovery.py PROACTIVE_WAIT_MS), or the first one after; when
    only S has answered by then it elects S and loses what S missed - KIP-966's
    availability-first trade, which this scenario measures rather than avoids."""
    rng = random.Random(seed)
    stale, follower, leader = (f"broker-{b}" for b in rng.sample([1, 2, 3], 3))
    t_s = 3.0 + rng.uniform(0.0, 1.0)
    t_b = t_s + rng.uniform(3.0, 5.0)          # acks=all writes S misses
    t_a = t_b + rng.uniform(1.5, 2.5)
    back_s = t_a + timeouts.session_timeout_s + rng.uniform(1.5, 2.5)
    back_b = back_s + rng.uniform(1.5, 3.0)
    back_a = back_b + rng.uniform(6.0, 9.0)
    faults = (_f(0, t_s, "lab-stop", stale, back_s), _f(1, t_b, "lab-stop", follower, back_b),
              _f(2, t_a, "lab-kill", leader, back_a))
    return Schedule(seed, round(back_a + 1.0, 2), ("lab-stop", "lab-kill"), faults,
                    label=f"kip-966 last replica standing, seed {seed}")


def one_bad_partition(seed: int, timeouts: Timeouts = _DEFAULT_TIMEOUTS) -> Schedule:
    """KIP-461: EIO on writes to one partition's log on one of its followers, for long enough
    (past replica.lag.time.max.ms several times) that a stopped fetcher shows in the ISRs of
    the other partitions it fetched; then the rule is cleared and that follower bounced."""
    rng = random.Random(seed)
    at = 3.0 + rng.uniform(0.0, 1.0)
    until = at + 4 * timeouts.lag_time_max_s + rng.uniform(2.0, 4.0)
    return Schedule(seed, round(until + 1.0, 2), ("lab-eio-partition",),
                    (_f(0, at, "lab-eio-partition", f"partition-{rng.randrange(6)}", until),),
                    label=f"kip-461 one bad partition, seed {seed}")


def one_failed_disk(seed: int, timeouts: Timeouts = _DEFAULT_TIMEOUTS) -> Schedule:
    """design.md#jbod: EIO on every write and fsync of one of a broker's two log dirs (the chaos
    runner's eio nemesis), then the rule cleared and the broker bounced (an offline dir stays
    offline until the broker restarts, as in Kafka)."""
    rng = random.Random(seed)
    at = 3.0 + rng.uniform(0.0, 1.0)
    until = at + 3 * timeouts.lag_time_max_s + rng.uniform(3.0, 5.0)
    target = f"broker-{rng.randint(1, 3)}:logdir-{rng.randrange(2)}"
    return Schedule(seed, round(until + 1.0, 2), ("eio",), (_f(0, at, "eio", target, until),),
                    label=f"jbod one failed disk, seed {seed}")


def slow_leader(seed: int, timeouts: Timeouts = _DEFAULT_TIMEOUTS) -> Schedule:
    """design.md#kip-501: every read of one broker's log dirs takes 1.5 s (the chaos
    runner's slow nemesis, past replica.lag.time.max.ms) for several lag periods: the broker
    leads some partitions, and its followers' fetches wait on its slow reads."""
    rng = random.Random(seed)
    at = 3.0 + rng.uniform(0.0, 1.0)
    until = at + 4 * timeouts.lag_time_max_s + rng.uniform(2.0, 4.0)
    return Schedule(seed, round(until + 1.0, 2), ("slow",),
                    (_f(0, at, "slow", f"broker-{rng.randint(1, 3)}", until),),
                    label=f"kip-501 slow leader, seed {seed}")


def reassignment_under_load(seed: int, timeouts: Timeouts = _DEFAULT_TIMEOUTS) -> Schedule:
    """KAFKA-42 under load, drawn from ``seed``: which workload partition moves with the bulk
    partitions, which broker (1-3) gives its replicas of them up to broker 4, when the move
    starts, and when - 0.3-0.8 s into the move, before even the unthrottled copy is done -
    the active controller is SIGKILLed: 0.1-0.3 s after the reassignment request was
    accepted, while even the unthrottled copy (about half a second here) is under way (the
    failover arms; the others keep the slot, skipped). The killed controller comes back after
    the other one has taken over (its session expired) and the move has had time to finish
    without it."""
    rng = random.Random(seed)
    p = rng.randrange(len(WORKLOAD_ASSIGNMENT))
    leaving = rng.randint(1, 3)
    at = 3.0 + rng.uniform(0.0, 1.0)
    after = rng.uniform(0.1, 0.3)
    back = at + after + timeouts.session_timeout_s + rng.uniform(3.0, 5.0)
    faults = (Fault(0, round(at, 2), "lab-reassign", (f"partition-{p}", f"broker-{leaving}"),
                    0.0),
              Fault(1, round(at, 2), "lab-failover", ("controller", f"{after:.2f}"),
                    round(back - at, 2)))
    return Schedule(seed, round(back + 1.0, 2), ("lab-reassign", "lab-failover"), faults,
                    label=f"reassignment under load, seed {seed}")


async def preload(bootstrap: str, total_bytes: int = PRELOAD_BYTES,
                  record: int = PRELOAD_RECORD) -> None:
    """The bulk topic (BULK_ASSIGNMENT, min.insync.replicas 2) with ``total_bytes`` per
    partition, written acks=all so that every replica holds it before the workload starts:
    what the reassignment copies to broker 4."""
    from client.admin_client import AdminClient
    from client.producer import Producer
    async with AdminClient(bootstrap) as admin:
        await admin.create_topic(BULK_TOPIC, replica_assignment=BULK_ASSIGNMENT,
                                 configs={"min.insync.replicas": "2"})
    value = bytes(range(256)) * (record // 256)
    n = max(1, total_bytes // len(value))
    async with Producer(bootstrap, acks="all", linger_ms=0, batch_size=len(value) + 1024,
                        delivery_timeout_ms=120000, request_timeout_ms=30000) as prod:
        for start in range(0, n, 16):
            futures = [await prod.send(BULK_TOPIC, value, partition=q)
                       for _ in range(start, min(n, start + 16)) for q in BULK_ASSIGNMENT]
            for f in futures:
                await f  # raises on a failed record


def _throttle(rate: int | None, failover: bool) -> dict:
    return {"lab_throttle": rate, "lab_failover": failover}


THROTTLE_LOW = 4_000_000  # bytes/s: the 80 MB to copy take 20 s
THROTTLE_HIGH = 16_000_000  # bytes/s: 5 s


def _reassignment_arms() -> tuple[Arm, ...]:
    arms = []
    for failover in (False, True):
        tail = "-failover" if failover else ""
        kill = ("; the active controller SIGKILLed mid-move, the standby completes it"
                if failover else "")
        arms += [
            Arm(f"unthrottled{tail}", "replog reassign --execute without --throttle: no "
                f"throttle config at all{kill}", options=_throttle(None, failover),
                baseline=True),
            Arm(f"throttle-low{tail}", f"--throttle {THROTTLE_LOW} (KIP-73: "
                f"{THROTTLE_LOW / 1e6:g} MB/s){kill}", options=_throttle(THROTTLE_LOW, failover)),
            Arm(f"throttle-high{tail}", f"--throttle {THROTTLE_HIGH} (KIP-73: "
                f"{THROTTLE_HIGH / 1e6:g} MB/s){kill}",
                options=_throttle(THROTTLE_HIGH, failover))]
    return tuple(arms)


_NO_ELR = {"eligible.leader.replicas.enable": "false"}


def _elr(strategy: str) -> dict[str, str]:
    return {"eligible.leader.replicas.enable": "true", "unclean.recovery.strategy": strategy,
            # Balanced's wait for replies: longer than a run, so no choice comes from it
            "unclean.recovery.timeout.ms": "600000"}


EXPERIMENTS: dict[str, Experiment] = {e.name: e for e in (
    Experiment(
        "kip-966",
        "a last-replica-standing failure need not lose committed data or wait forever",
        "followers S then B shut down cleanly, the leader A is SIGKILLed, then S (stale) comes "
        "back first, B next, A last (RF 3, min.insync.replicas 2)",
        (Arm("unclean-election", "ELR off, unclean.leader.election.enable=true (ZooKeeper-era)",
             {**_NO_ELR, "unclean.leader.election.enable": "true"}, baseline=True),
         Arm("no-unclean-election", "ELR off, unclean.leader.election.enable=false "
             "(ZooKeeper-era default)", {**_NO_ELR, "unclean.leader.election.enable": "false"},
             baseline=True),
         Arm("elr-balanced", "ELR on, unclean.recovery.strategy=Balanced", _elr("Balanced")),
         Arm("elr-proactive", "ELR on, unclean.recovery.strategy=Proactive", _elr("Proactive")),
         Arm("elr-manual", "ELR on, unclean.recovery.strategy=Manual", _elr("Manual"))),
        last_replica_standing),
    Experiment(
        "kip-461", "one bad partition must not stop replication of the others",
        "EIO on writes to one partition's log on one follower (6 partitions, 2 log dirs per "
        "broker, one fetcher per leader), then that follower bounced",
        (Arm("fetcher-stops", "replica.fetcher.isolate.partition.failures=false (Kafka "
             "before KIP-461)", {"replica.fetcher.isolate.partition.failures": "false"},
             baseline=True),
         Arm("isolated", "replica.fetcher.isolate.partition.failures=true (KIP-461, seed 000)",
             {"replica.fetcher.isolate.partition.failures": "true"})),
        one_bad_partition, partitions=6, log_dirs_per_broker=2),
    Experiment(
        "kip-501", "a slow leader must not throw healthy followers out of the ISR",
        "every read of one broker's log dirs slowed to 1.5 s (past replica.lag.time.max.ms) "
        "for about 10-12 s; it leads a third of the 6 partitions",
        (Arm("pending-reads-off", "follower.fetch.pending.reads.insync.enable=false (Kafka "
             "before KIP-501)", {"follower.fetch.pending.reads.insync.enable": "false"},
             baseline=True),
         Arm("pending-reads-on", "follower.fetch.pending.reads.insync.enable=true (seed 002, "
             "KIP-501; a leader slower than follower.fetch.process.time.max.ms relinquishes)",
             {"follower.fetch.pending.reads.insync.enable": "true"})),
        slow_leader, partitions=6),
    Experiment(
        "jbod", "one failed disk must not take the whole broker down",
        "EIO on every write of one of a broker's two log dirs (6 partitions), then the broker "
        "bounced",
        (Arm("halt", "log.dir.failure.policy=halt (Kafka before KIP-112)",
             {"log.dir.failure.policy": "halt"}, baseline=True),
         Arm("seed-003", "log.dir.failure.policy=offline: the dir goes offline, the broker "
             "serves the other (seed 003, KIP-112)", {"log.dir.failure.policy": "offline"})),
        one_failed_disk, partitions=6, log_dirs_per_broker=2),
    Experiment(
        "reassignment", "replicas can move under load with bounded impact",
        "one broker's replicas of a workload partition and of two bulk partitions (40 MB "
        "each) move to a fourth broker under the workload, unthrottled and at 4 and 16 MB/s, "
        "with and without the active controller killed mid-move (4 brokers, 2 controllers)",
        _reassignment_arms(), reassignment_under_load, brokers=4, controllers=2,
        assignment=WORKLOAD_ASSIGNMENT, prepare=preload),
)}


def experiment(name: str) -> Experiment:
    e = EXPERIMENTS.get(name)
    if e is None:
        raise ReplogError(f"no experiment {name!r}; 'replog lab list' shows them: "
                          f"{', '.join(EXPERIMENTS)}")
    return e


def parse_arms(exp: Experiment, text: str | None) -> tuple[Arm, ...]:
    if text is None:
        return exp.arms
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise ReplogError("--arms names no arm")
    return tuple(exp.arm(n) for n in dict.fromkeys(names))


# ---------------------------------------------------------------------------- one run

@dataclass
class LabRun:
    experiment: Experiment
    arm: Arm
    seed: int
    dir: Path
    timeouts: Timeouts = field(default_factory=Timeouts)

    @property
    def run_id(self) -> str:
        return f"{self.arm.name}/seed-{self.seed}"

    def finished(self) -> bool:
        return (self.dir / RESULT).is_file()


def run_dir(out: Path, arm: str, seed: int) -> Path:
    return out / "runs" / arm / f"seed-{seed}"


async def _sample_states(cluster: LocalCluster, topic: str, partitions: int, path: Path,
                         run_id: str, stop: asyncio.Event) -> None:
    """The topic's partition states from ZooKeeper every STATE_INTERVAL_S, one line each:
    {run, wall, partition, leader, isr, elr, replicas, adding} (the last two from the topic's
    znode: its assignment, and the replicas a reassignment is adding); a read that fails
    (ZooKeeper busy) is skipped."""
    client = cluster.zk_client()
    with path.open("a", encoding="utf-8") as f:
        while not stop.is_set():
            wall = time.time()
            lines = []
            try:
                data, _ = await asyncio.to_thread(
                    lambda: client.get_async(zk_layout.topic_path(topic)).get(timeout=2.0))
                assignment = zk_layout.decode_topic(topic, data)
            except Exception:  # noqa: BLE001 - ZooKeeper slow: the states without it
                assignment = None
            for p in range(partitions):
                try:
                    data, st = await asyncio.to_thread(
                        lambda p=p: client.get_async(
                            zk_layout.partition_state_path(topic, p)).get(timeout=2.0))
                except Exception:  # noqa: BLE001, S112 - no state yet, or ZooKeeper slow: skip
                    continue
                s = zk_layout.decode_partition_state(data, st.version)
                line = {"run": run_id, "wall": round(wall, 4), "partition": p,
                        "leader": s.leader, "isr": list(s.isr), "elr": list(s.elr)}
                if assignment is not None and p in assignment.partitions:
                    line["replicas"] = assignment.partitions[p]
                    line["adding"] = assignment.adding_replicas.get(p, [])
                lines.append(json.dumps(line, separators=(",", ":")))
            if lines:
                f.write("\n".join(lines) + "\n")
                f.flush()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), STATE_INTERVAL_S)


def _events(cluster_dir: Path) -> list[dict]:
    out = []
    for path in sorted((cluster_dir / "logs").glob("*.events.jsonl")):
        with path.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                with contextlib.suppress(ValueError):
                    out.append(json.loads(line))
    return out


def event_counts(events: list[dict], topic: str) -> dict:
    """Per run, from the processes' event logs: unclean elections (blind ones and KIP-966
    recoveries) of the workload topic, the offsets recoveries counted as discarded, and the
    offsets followers truncated (a truncation below an acknowledged record is data loss; one of
    an unacknowledged acks=1 tail is not)."""
    mine = [e for e in events if str(e.get("partition", "")).startswith(f"{topic}-")]
    elections = [e for e in mine if e.get("event") == "leader_election"]
    return {
        "unclean_elections": sum(1 for e in elections if e.get("unclean")),
        "leader_elections": sum(1 for e in elections if e.get("new_leader", -1) >= 0),
        "recovery_offsets_discarded": sum(
            int(e.get("offsets_discarded") or 0) for e in mine
            if e.get("event") == "unclean_recovery_finished"),
        "offsets_truncated": sum(
            max(0, int(e.get("from_offset") or 0) - int(e.get("to_offset") or 0))
            for e in mine if e.get("event") == "truncated"),
    }


async def run_one(r: LabRun, log=print) -> dict:
    """One run of one arm on one seed, on a fresh cluster in ``r.dir/cluster``; returns (and
    writes last) its result."""
    from analytics.export import Exporter
    exp = r.experiment
    if r.dir.exists():
        shutil.rmtree(r.dir)  # an interrupted run: its files would mix into the new one
    r.dir.mkdir(parents=True)
    cluster_dir = r.dir / "cluster"
    faults_dir = r.dir / "faults"
    faults_dir.mkdir()
    started = time.monotonic()
    # Started here and handed to the runner (its ``cluster``), not started by the runner: the
    # runner's own cluster has fixed overrides, and an arm is its config.
    cluster = LocalCluster(
        cluster_dir, brokers=exp.brokers, controllers=exp.controllers,
        log_dirs_per_broker=exp.log_dirs_per_broker,
        overrides={**runner.cluster_overrides(r.timeouts), **r.arm.overrides},
        per_broker_overrides={b: {"fault.injection.file": str(faults_dir / f"broker-{b}.json")}
                              for b in range(1, exp.brokers + 1)})
    cfg = runner.RunConfig(seed=r.seed, duration_s=0.0, nemeses=(), data_dir=r.dir,
                           partitions=exp.partitions, timeouts=r.timeouts,
                           fixed_schedule=exp.schedule(r.seed, r.timeouts), writers=exp.writers,
                           topic="lab", settle_s=exp.settle_s, cluster=cluster,
                           replica_assignment=exp.assignment, prepare=exp.prepare,
                           nemesis_options=r.arm.options)
    stop = asyncio.Event()
    tasks: list[asyncio.Task] = []
    try:
        await asyncio.to_thread(cluster.start)
        exporter = Exporter(cluster_dir, r.dir / "export", EXPORT_INTERVAL_MS)
        tasks = [asyncio.create_task(exporter.run(stop)),
                 asyncio.create_task(_sample_states(cluster, cfg.topic, cfg.partitions,
                                                    r.dir / STATES, r.run_id, stop))]
        result = await runner._run(cfg, lambda line: log(f"    {line}"))
    finally:
        stop.set()
        for t in tasks:
            with contextlib.suppress(Exception):
                await t
        await asyncio.to_thread(cluster.stop, False)
    verdict = result.verdict
    lost = next((v.count for v in verdict.violations if v.property == "acked-write-lost"), 0)
    out = {"experiment": exp.name, "arm": r.arm.name, "seed": r.seed, "run": r.run_id,
           "valid": verdict.valid,
           "violations": sorted({v.property for v in verdict.violations}),
           "acked_lost": lost, "acked_all": verdict.stats.get("acked_all", 0),
           "max_unavailable_s": verdict.stats.get("max_unavailable_s", 0.0),
           **event_counts(_events(cluster_dir), cfg.topic),
           "skipped": result.skipped, "wall_s": round(time.monotonic() - started, 1)}
    # The brokers' segment files are what the checker already read; the history keeps it.
    for d in cluster_dir.glob("broker-*"):
        shutil.rmtree(d, ignore_errors=True)
    tmp = r.dir / (RESULT + ".tmp")
    tmp.write_text(json.dumps(out, indent=2) + "\n")
    tmp.replace(r.dir / RESULT)
    return out


# ---------------------------------------------------------------------------- the lab

def plan(exp: Experiment, arms: tuple[Arm, ...], seeds: int, out: Path) -> list[LabRun]:
    """Seed by seed, every arm: a lab stopped half-way still compares arms on the same seeds."""
    return [LabRun(exp, a, s, run_dir(out, a.name, s)) for s in range(1, seeds + 1)
            for a in arms]


def check_out_dir(out: Path, exp: Experiment, resume: bool) -> None:
    manifest = out / "lab.json"
    if manifest.is_file():
        old = json.loads(manifest.read_text())
        if old.get("experiment") != exp.name:
            raise ReplogError(f"{out} holds the lab of experiment {old.get('experiment')}; "
                              f"use another --out")
        if not resume:
            raise ReplogError(f"{out} already holds runs of {exp.name}: --resume to go on "
                              f"with them, or another --out")
    elif out.exists() and any(out.iterdir()):
        raise ReplogError(f"--out {out} is not empty and holds no lab")


def _clock(s: float) -> str:
    s = max(0, int(s))
    return f"{s // 3600:d}:{s // 60 % 60:02d}:{s % 60:02d}"


def progress_line(done: int, total: int, current: LabRun | None, elapsed: float,
                  walls: list[float]) -> str:
    """``[####------] 4/10 elr-balanced seed 2, 0:03:10 elapsed, ~0:04:45 left``: time left
    from the mean wall time of the runs finished in this invocation."""
    width = 20
    filled = width * done // max(1, total)
    bar = "#" * filled + "-" * (width - filled)
    what = f" {current.arm.name} seed {current.seed}," if current is not None else ""
    left = (f"~{_clock(sum(walls) / len(walls) * (total - done))} left" if walls
            else "time left unknown")
    return f"[{bar}] {done}/{total}{what} {_clock(elapsed)} elapsed, {left}"


def run_lab(exp: Experiment, arms: tuple[Arm, ...], seeds: int, out: Path,
            resume: bool = False, log=print) -> list[dict]:
    """Every run not finished yet; returns the results of all finished ones. Ctrl-C ends the
    run in progress (its cluster stopped, its dir left without a result) and raises
    KeyboardInterrupt."""
    check_out_dir(out, exp, resume)
    out.mkdir(parents=True, exist_ok=True)
    (out / "lab.json").write_text(json.dumps(
        {"experiment": exp.name, "claim": exp.claim, "scenario": exp.scenario,
         "arms": {a.name: {"description": a.description, "overrides": a.overrides,
                           "baseline": a.baseline} for a in arms},
         "seeds": seeds}, indent=2) + "\n")
    logging.getLogger("kazoo.client").setLevel(logging.ERROR)
    runs = plan(exp, arms, seeds, out)
    done = sum(1 for r in runs if r.finished())
    if done:
        log(f"Resuming: {done} of {len(runs)} run(s) already finished")
    t0, walls, failed = time.monotonic(), [], 0
    for r in runs:
        if r.finished():
            continue
        log(progress_line(done, len(runs), r, time.monotonic() - t0, walls))
        t = time.monotonic()
        try:
            res = asyncio.run(run_one(r, log=lambda line: None))
        except Exception as e:  # noqa: BLE001 - one broken run (a cluster that did not
            # start on a loaded machine) must not cost the others; --resume runs it again
            failed += 1
            log(f"  {r.run_id}: FAILED, no result ({type(e).__name__}: {e})"[:300])
            continue
        walls.append(time.monotonic() - t)
        done += 1
        log(f"  {r.run_id}: {'VALID' if res['valid'] else 'INVALID'}; "
            f"{res['acked_lost']} acked lost, longest acks=all gap "
            f"{res['max_unavailable_s']:.1f}s, {res['unclean_elections']} unclean "
            f"election(s), {res['wall_s']:.0f}s")
    log(progress_line(done, len(runs), None, time.monotonic() - t0, walls))
    if failed:
        log(f"{failed} run(s) failed without a result: --resume runs them again")
    return [json.loads((r.dir / RESULT).read_text()) for r in runs if r.finished()]


def finished_runs(out: Path) -> list[Path]:
    return sorted(p.parent for p in (out / "runs").glob(f"*/seed-*/{RESULT}"))


def main_run(name: str, seeds: int, arms_text: str | None, out: Path, master: str | None,
             resume: bool) -> int:
    exp = experiment(name)
    if exp.schedule is None:
        raise ReplogError(f"experiment {name} cannot run yet: {exp.not_ready}")
    if seeds < 1:
        raise ReplogError(f"--seeds must be at least 1, got {seeds}")
    arms = parse_arms(exp, arms_text)
    try:
        run_lab(exp, arms, seeds, out, resume, log=lambda line: print(line, flush=True))
    except KeyboardInterrupt:
        print(f"\nStopped. Finished runs are kept in {out}; go on with: replog lab run "
              f"{name} --seeds {seeds} --out {out} --resume", file=sys.stderr, flush=True)
        return 130
    from analytics.lab import analyze
    summary = analyze(out, master)
    print(f"Report: {out / 'report.html'}")
    print(f"Summary: {out / 'summary.json'}")
    for line in summary["table"]:
        print(line)
    return 0
