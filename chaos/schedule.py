"""The fault schedule: a pure function of the seed (TigerBeetle's VOPR rule: one seed replays
the whole run).

``make_schedule(seed, duration_s, nemeses, topology, timeouts)`` decides which fault, against
which process or log dir, starts at which offset from the start of the run and how long it
lasts. It reads nothing but its arguments and draws only from ``random.Random(seed)``, so the
same arguments give the same schedule on any machine: a nemesis that cannot run here (no root,
no nft) keeps its slot and is reported as skipped by the runner, rather than shifting every
later fault.

Rules the schedule keeps, and why:

- one fault at a time (a fault's window ends, then a recovery gap of 2-4 s): with RF 3 and
  min.insync.replicas=2 a single fault must never cost acks=all availability for long, and a
  violation found under one fault is easier to read than one under three;
- except the admin operations (``MID_FAULT``: ``elect``, a preferred leader election;
  ``reassign``, a partition reassignment; ``shutdown``, a broker's controlled shutdown and
  restart), which happen *mid-fault*: each lands inside the previous fault's window, as
  ducktape's "admin operation during a bounce" cases do (or on its own, when the previous
  fault was one of them);
- pauses and ZooKeeper session cuts last longer than the session timeout (otherwise nothing
  expires and the fault tests nothing), partitions and slow disks longer than
  replica.lag.time.max.ms (otherwise the ISR never shrinks);
- the first fault waits a warm-up, so the workload has written before anything breaks.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, field
from typing import Any

# name -> what it does (printed by `replog chaos --help` and in the schedule).
NEMESES: dict[str, str] = {
    "kill": "kill -9 a broker, the active controller or ZooKeeper, restart it after a while",
    "bounce": "clean bounce: SIGTERM (a broker does a controlled shutdown), then start again",
    "pause": "SIGSTOP a broker or the active controller past the session timeout, then SIGCONT",
    "partition": "cut the network between two processes (nftables on their loopback ports)",
    "expire": "expire a broker's or controller's ZooKeeper session (its ZooKeeper link cut "
              "past the session timeout: the server expires it)",
    "eio": "EIO on every write to one log dir (the broker's fault-injection file seam)",
    "slow": "slow reads on every log dir of one broker (the seam's delay; seed-002)",
    "ext4": "a real ext4 error on a loop-mounted log dir (errors=remount-ro)",
    "enospc": "a loop-mounted log dir filled up until writes fail with ENOSPC",
    "elect": "a preferred leader election through the AdminClient, in the middle of a fault",
    "reassign": "AlterPartitionReassignments of one partition through the AdminClient, in the "
                "middle of a fault: off its preferred replica (RF 3 -> 2), back at the next "
                "reassign of it or at the heal",
    "shutdown": "a broker's controlled shutdown (SIGTERM) and restart, in the middle of a "
                "fault",
    "clock": "move one broker's clock (its fault-injection file's clock rule) forward or back "
             "by 1-3x replica.lag.time.max.ms, then back",
}
# Faults of one host's links, for a cluster on hosts of its own (replog cluster up --hosts,
# chaos/host_nemesis.py). Not in ``all``, which would change every seed's schedule and skip
# them on a loopback cluster: chosen by name, or all of them as ``hosts``.
HOST_NEMESES: dict[str, str] = {
    "host-cut": "one host stops reaching one peer (broker, controller or ZooKeeper) while the "
                "peer still reaches it: an asymmetric, one-direction partition",
    "link-delay": "a latency spike of 100-800 ms on one host's link, both ways",
    "link-loss": "5-30% of one host's packets dropped, both ways",
    "rack-cut": "every host of one rack cut off from the other racks, both ways",
}
# Faults of a ZooKeeper ensemble (replog chaos --zookeeper-nodes 3|5): members SIGKILLed and
# started again on their ports when the fault ends. Not in ``all`` either (every seed's
# schedule would move, and a standalone ZooKeeper has no leader nor minority): chosen by name,
# or all three as ``zookeeper``.
ZOOKEEPER_NEMESES: dict[str, str] = {
    "zk-leader-kill": "kill -9 the ZooKeeper ensemble's leader, start it again after the fault "
                      "(the ensemble elects another; sessions move to the members left)",
    "zk-minority": "kill -9 a minority of the ensemble (1 of 3, 1-2 of 5): the quorum holds",
    "zk-majority": "kill -9 a majority of the ensemble past the session timeout (quorum "
                   "lost: no elections, no ISR changes), then start them again together",
}
# ``--nemesis NAME`` for each group of nemeses that ``all`` leaves out.
GROUPS: dict[str, tuple[str, ...]] = {"hosts": tuple(HOST_NEMESES),
                                      "zookeeper": tuple(ZOOKEEPER_NEMESES)}
MID_FAULT = frozenset({"elect", "reassign", "shutdown"})  # admin operations, duration 0
NEEDS_ROOT = frozenset({"partition", "expire", "ext4", "enospc", *HOST_NEMESES})
WARM_UP_S = 2.0

# The ducktape replication_test matrix ({clean bounce, hard bounce, clean kill, hard kill} x
# {leader, controller}): explicit schedules (matrix_schedule), not drawn from a seed.
FAILURES: dict[str, str] = {
    "clean-bounce": "SIGTERM (a broker's controlled shutdown, a controller's resignation), "
                    "then start again",
    "hard-bounce": "SIGKILL, wait until ZooKeeper registered the loss (the broker's znode "
                   "gone, another controller active), then start again",
    "clean-kill": "SIGTERM, and stay down until the heal",
    "hard-kill": "SIGKILL, and stay down until the heal",
}
MATRIX_TARGETS = ("leader", "controller")


@dataclass(frozen=True)
class Topology:
    """What the schedule may target: broker ids, log dirs per broker, and whether the cluster
    runs its own ZooKeeper (only then may ZooKeeper be killed)."""

    brokers: tuple[int, ...] = (1, 2, 3)
    log_dirs_per_broker: int = 2
    own_zookeeper: bool = True
    partitions: int = 6  # of the workload's topic (``reassign`` targets one)
    racks: int = 1  # of a cluster on hosts (``rack-cut`` targets one)
    zookeeper_nodes: int = 1  # of the cluster's own ensemble (the zk-* nemeses target members)


@dataclass(frozen=True)
class Timeouts:
    """The detection timeouts of the cluster under test, which the fault durations exceed."""

    session_timeout_s: float = 4.0  # zookeeper.session.timeout.ms
    lag_time_max_s: float = 2.0  # replica.lag.time.max.ms


@dataclass(frozen=True)
class Fault:
    """One scheduled fault. ``target`` names processes (``broker-2``; ``controller``, the
    active controller, and ``leader``, the leader of the workload's partition 0, both resolved
    when the fault starts, as in ducktape's {leader, controller} matrix; ``zookeeper``) or a
    log dir (``broker-2:logdir-1``) or a partition of the workload's topic
    (``partition-3``, for ``reassign``); ``partition`` has two targets, ``elect`` targets
    ``all`` partitions."""

    index: int
    at_s: float
    nemesis: str
    target: tuple[str, ...]
    duration_s: float

    @property
    def end_s(self) -> float:
        return self.at_s + self.duration_s

    def describe(self) -> str:
        target = (f"{self.target[0]} {int(self.target[1]):+d} ms" if self.nemesis == "clock"
                  else f"{self.target[0]} -/-> {self.target[1]}" if self.nemesis == "host-cut"
                  else f"{self.target[0]} +{self.target[1]} ms" if self.nemesis == "link-delay"
                  else f"{self.target[0]} {self.target[1]}% loss"
                  if self.nemesis == "link-loss"
                  else ", ".join(self.target) if self.nemesis in ZOOKEEPER_NEMESES
                  else " <-> ".join(self.target))
        return (f"#{self.index:<3} at {self.at_s:7.2f}s  {self.nemesis:<12} "
                f"{target:<28} for {self.duration_s:5.2f}s")

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "target": list(self.target)}


@dataclass(frozen=True)
class Schedule:
    seed: int
    duration_s: float
    nemeses: tuple[str, ...]
    faults: tuple[Fault, ...] = field(default_factory=tuple)
    label: str = ""  # an explicit schedule's name (``matrix hard-kill x leader``); seeded: ""

    def describe(self) -> str:
        what = self.label or f"seed {self.seed}"
        head = (f"{what}, {self.duration_s:g}s, nemeses {','.join(self.nemeses)}: "
                f"{len(self.faults)} fault(s)")
        return "\n".join([head, *("  " + f.describe() for f in self.faults)])

    def targets(self) -> set[str]:
        return {t for f in self.faults for t in f.target}

    def log_dirs_to_mount(self) -> list[tuple[int, int]]:
        """(broker id, log dir index) of every log dir that ext4/enospc faults need on a
        loop-mounted file system, in order of first use."""
        out: list[tuple[int, int]] = []
        for f in self.faults:
            if f.nemesis in ("ext4", "enospc"):
                b, d = parse_log_dir(f.target[0])
                if (b, d) not in out:
                    out.append((b, d))
        return out

    def to_json(self) -> str:
        out = {"seed": self.seed, "duration_s": self.duration_s, "nemeses": list(self.nemeses),
               "faults": [f.to_json() for f in self.faults]}
        if self.label:
            out["label"] = self.label
        return json.dumps(out, sort_keys=True)


def parse_nemeses(text: str) -> tuple[str, ...]:
    """``kill,pause`` -> ("kill", "pause"); ``all`` -> every nemesis but the host and
    ZooKeeper ensemble ones; ``hosts`` -> every host nemesis (HOST_NEMESES), ``zookeeper`` ->
    every ensemble nemesis (ZOOKEEPER_NEMESES). Unknown names raise."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if names == ["all"]:
        return tuple(NEMESES)
    names = [x for n in names for x in GROUPS.get(n, [n])]
    known = {**NEMESES, **HOST_NEMESES, **ZOOKEEPER_NEMESES}
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise ValueError(f"unknown nemesis {','.join(unknown) or '(none)'}; choose from "
                         f"{','.join(known)}, all, {' or '.join(GROUPS)}")
    return tuple(dict.fromkeys(names))  # keep order, drop repeats


def parse_log_dir(target: str) -> tuple[int, int]:
    """``broker-2:logdir-1`` -> (2, 1)."""
    proc, _, d = target.partition(":")
    return int(proc.removeprefix("broker-")), int(d.removeprefix("logdir-"))


def make_schedule(seed: int, duration_s: float, nemeses: tuple[str, ...],
                  topology: Topology = Topology(), timeouts: Timeouts = Timeouts()) -> Schedule:
    """The faults of a run of ``duration_s`` seconds, drawn from ``seed`` only."""
    if not nemeses:
        raise ValueError("no nemesis chosen")
    rng = random.Random(seed)
    brokers = [f"broker-{b}" for b in topology.brokers]
    processes = [*brokers, "controller"]
    faults: list[Fault] = []
    t = WARM_UP_S
    while True:
        nemesis = rng.choice(nemeses)
        if nemesis in MID_FAULT:
            # elect draws nothing more, so adding the other admin operations changed no
            # schedule without them.
            target: tuple[str, ...] = (
                ("all",) if nemesis == "elect"
                else (f"partition-{rng.randrange(topology.partitions)}",)
                if nemesis == "reassign" else (rng.choice([*brokers, "leader"]),))
            if faults and faults[-1].duration_s > 0:
                prev = faults[-1]  # mid-fault: inside the previous window
                at = prev.at_s + prev.duration_s * rng.uniform(0.2, 0.8)
                faults.append(Fault(len(faults), round(at, 2), nemesis, target, 0.0))
                continue
            if t > duration_s:
                break
            faults.append(Fault(len(faults), round(t, 2), nemesis, target, 0.0))
            t += rng.uniform(2.0, 4.0)
            continue
        target, dur = _draw(rng, nemesis, brokers, processes, topology, timeouts)
        if t + dur > duration_s:
            break
        faults.append(Fault(len(faults), round(t, 2), nemesis, target, round(dur, 2)))
        t += dur + rng.uniform(2.0, 4.0)
    return Schedule(seed, duration_s, tuple(nemeses), tuple(faults))


def _draw(rng: random.Random, nemesis: str, brokers: list[str], processes: list[str],
          topology: Topology, timeouts: Timeouts) -> tuple[tuple[str, ...], float]:
    session, lag = timeouts.session_timeout_s, timeouts.lag_time_max_s
    if nemesis == "kill":
        pool = [*processes, "leader"] + (["zookeeper"] if topology.own_zookeeper else [])
        return (rng.choice(pool),), rng.uniform(0.5, 3.0)
    if nemesis == "bounce":
        return (rng.choice([*processes, "leader"]),), rng.uniform(0.5, 2.0)
    if nemesis == "pause":
        return (rng.choice([*processes, "leader"]),), session + rng.uniform(1.0, 3.0)
    if nemesis == "partition":
        a, b = rng.sample([*processes, "zookeeper"], 2)
        return (a, b), max(session, lag) + rng.uniform(1.0, 3.0)
    if nemesis == "expire":
        return (rng.choice(processes),), session + rng.uniform(1.0, 2.0)
    if nemesis == "slow":
        return (rng.choice(brokers),), lag + rng.uniform(1.0, 3.0)
    if nemesis == "clock":
        offset_ms = round(rng.choice((1, -1)) * rng.uniform(lag, 3 * lag) * 1000)
        # "leader" (of partition 0) as often as a broker: only a leader's clock moves an ISR
        return (rng.choice([*brokers, "leader"]), str(offset_ms)), lag + rng.uniform(1.0, 3.0)
    if nemesis == "host-cut":
        a, b = rng.sample([*processes, "zookeeper"], 2)
        return (a, b), max(session, lag) + rng.uniform(1.0, 3.0)
    if nemesis == "rack-cut":
        rack = f"rack-{rng.randrange(max(1, topology.racks)) + 1}"
        return (rack,), max(session, lag) + rng.uniform(1.0, 3.0)
    if nemesis == "link-delay":
        ms = round(rng.uniform(100, 800))
        return (rng.choice([*processes, "leader", "zookeeper"]), str(ms)), \
            lag + rng.uniform(1.0, 3.0)
    if nemesis == "link-loss":
        pct = round(rng.uniform(5, 30), 1)
        return (rng.choice([*processes, "leader", "zookeeper"]), str(pct)), \
            lag + rng.uniform(1.0, 3.0)
    if nemesis in ZOOKEEPER_NEMESES:
        return _draw_zookeeper(rng, nemesis, topology, session)
    if nemesis in ("eio", "ext4", "enospc"):
        d = rng.randrange(topology.log_dirs_per_broker)
        return (f"{rng.choice(brokers)}:logdir-{d}",), rng.uniform(2.0, 5.0)
    raise ValueError(f"unknown nemesis {nemesis!r}")


def _draw_zookeeper(rng: random.Random, nemesis: str, topology: Topology, session: float
                    ) -> tuple[tuple[str, ...], float]:
    """Targets are members by myid (``zookeeper-2``), or ``zookeeper`` (the ensemble's leader
    when the fault starts). Drawn against 3 members when the topology has no ensemble, so the
    schedule is defined anyway; such a run reports these nemeses skipped."""
    n = max(topology.zookeeper_nodes, 3)
    if nemesis == "zk-leader-kill":
        # A leader change costs the ensemble under a second (tickTime 200 ms): the fault lasts
        # a few seconds, below the session timeout, as a crashed host rebooting would.
        return ("zookeeper",), rng.uniform(1.0, 4.0)
    quorum = n // 2 + 1
    if nemesis == "zk-minority":
        k = rng.randint(1, n - quorum)
        dur = rng.uniform(2.0, 6.0)
    else:
        # Past the session timeout: the sessions must outlive a quorum loss longer than their
        # own timeout (the restored ensemble's new leader gives each one a fresh timeout, as
        # ZooKeeper's SessionTrackerImpl does on a leader's start).
        k = rng.randint(quorum, n)
        dur = session + rng.uniform(1.0, 3.0)
    myids = sorted(rng.sample(range(1, n + 1), k))
    return tuple(f"zookeeper-{i}" for i in myids), dur


def matrix_schedule(failure: str, target: str, repeats: int | None = None,
                    warm_up_s: float = WARM_UP_S, gap_s: float = 3.0, down_s: float = 8.0,
                    timeouts: Timeouts = Timeouts()) -> Schedule:
    """One cell of the ducktape matrix as an explicit schedule (no seed).

    - bounces (``clean-bounce``, ``hard-bounce``): ``repeats`` faults (default 2), each a
      stop or kill at its start and a start again at its end (0.5 s later; a hard bounce's
      stop first waits until ZooKeeper registered the loss, which takes up to the session
      timeout, so its faults are spaced by that much more). ``target`` (``leader`` of the
      topic's partition 0, or the active ``controller``) is resolved at each start, so the
      bounces chase a moving target as ducktape's ``broker_node(test, broker_type)`` does;
    - kills (``clean-kill``, ``hard-kill``): one stop or kill, and the process stays down for
      ``down_s`` (the end of the fault changes nothing) until the runner's heal starts it.
      One only: a second kill would leave a 3-broker cluster below min.insync.replicas=2, or
      a 2-controller cluster without a controller, which is another test.
    """
    if failure not in FAILURES:
        raise ValueError(f"unknown failure {failure!r}; choose from {', '.join(FAILURES)}")
    if target not in MATRIX_TARGETS:
        raise ValueError(f"unknown target {target!r}; choose from {', '.join(MATRIX_TARGETS)}")
    bounce = failure.endswith("bounce")
    if repeats is None:
        repeats = 2 if bounce else 1
    if repeats < 1 or (not bounce and repeats != 1):
        raise ValueError(f"{failure} takes {'at least one repeat' if bounce else 'one repeat'}"
                         f", not {repeats}")
    faults: list[Fault] = []
    t = warm_up_s
    duration = 0.5 if bounce else down_s
    spacing = gap_s + (timeouts.session_timeout_s if failure == "hard-bounce" else 0.0)
    for i in range(repeats):
        faults.append(Fault(i, round(t, 2), failure, (target,), duration))
        t += duration + spacing
    end = faults[-1].end_s
    return Schedule(0, round(end, 2), (failure,), tuple(faults),
                    label=f"matrix {failure} x {target}")
