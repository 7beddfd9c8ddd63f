"""The experiment catalogue: each design's scenario, as a schedule drawn from the seed, and
its arms (cluster configs, one of them the pre-design baseline)."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from chaos.lab.nemeses import (
    BULK_ASSIGNMENT,
    BULK_TOPIC,
    PRELOAD_BYTES,
    PRELOAD_RECORD,
    WORKLOAD_ASSIGNMENT,
)
from chaos.schedule import Fault, Schedule, Timeouts
from common.errors import ReplogError


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
         Arm("isolated", "replica.fetcher.isolate.partition.failures=true (KIP-461)",
             {"replica.fetcher.isolate.partition.failures": "true"})),
        one_bad_partition, partitions=6, log_dirs_per_broker=2),
    Experiment(
        "kip-501", "a slow leader must not throw healthy followers out of the ISR",
        "every read of one broker's log dirs slowed to 1.5 s (past replica.lag.time.max.ms) "
        "for about 10-12 s; it leads a third of the 6 partitions",
        (Arm("pending-reads-off", "follower.fetch.pending.reads.insync.enable=false (Kafka "
             "before KIP-501)", {"follower.fetch.pending.reads.insync.enable": "false"},
             baseline=True),
         Arm("pending-reads-on", "follower.fetch.pending.reads.insync.enable=true ("
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
             "serves the other (KIP-112)", {"log.dir.failure.policy": "offline"})),
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
