"""Scenario scripts for the broker's replication core (tests/broker/testdata/*.txt), in the
format of tests/controller/script.py (etcd-raft's datadriven tests):

    command arg key=value ...
    ----
    expected output lines

Blocks are separated by blank lines; a block's leading ``#`` lines are the "why" of the step.
REWRITE=1 regenerates the expected output (then review the diff: that review is the test).

Each broker's replica of a partition is a ``broker.replica_core.ReplicaCore`` and a stand-in
log (LEO, HW, log start and the real ``LeaderEpochCache``). The runner is the shell: it builds
the core's events as ``broker.partition`` and the replica manager do, prints every effect in
order and carries it out (an HW into the log, WakeProduce re-checking the acks=all waiters with
``delayed_produce.produce_wait``, a ProposeIsr kept as the one AlterPartition in flight).
Where the core has no event yet, the command drives the pure function the shell calls today
(``partition_state``, ``truncation``, ``fencing``, ``fetch_failures``,
``storage.failure_scope``); each script's header names the core event it will become.

Output lines are ``B: ...`` for broker B's replica of t-0 (``B t-1: ...`` for another
partition); the broker a line is about is the one whose shell carries it out.

Commands (``tp=T-P`` picks the partition, t-0 when absent):
    broker B... [min_isr=N] [dir=D]  replicas on these brokers, empty logs (no output)
    config key=value ...             lag_max_ms, pending_reads_in_sync (true|false: KIP-501's
                                     follower.fetch.pending.reads.insync.enable, which also
                                     gates relinquish), process_time_max_ms, min_isr (every
                                     replica of the partition)
    time MS | advance MS             the clock (advance also expires acks=all waiters)
    broker-epoch B E                 broker B re-registered with broker epoch E
    lai B... leader=L epoch=E isr=B,B [replicas=B,B] [pe=P] [elr=B,B] [recovering] [new]
                                     [defer]   LeaderAndIsr to each broker (pe defaults to E;
                                     `new`: is_new; `defer`: the epoch-start write stays
                                     queued until `epoch-start B`)
    epoch-start B                    the queued epoch-start write lands
    append B N                       the leader appends N records (acks=1, nobody waits)
    produce B N [acks=all|1] [timeout=MS]   a produce: admission, append, acks=all waiter pK
    fetch F [from=L] [offset=O] [last_epoch=E] [current_epoch=E] [broker_epoch=BE]
            [pending=ID] [no-expand] [fail=storage|unexpected|corrupt|transport]
                                     F's fetcher fetches from L (its leader); defaults are
                                     F's LEO, latest epoch and fetch-state epoch; `pending=ID`:
                                     the leader's read is slow (records come at `read-done`);
                                     `fail`: what goes wrong processing the answer on F
    read-done ID                     a pending read (KIP-501) completes now
    expire B                         the isr-expiration round on leader B
    answer B [error=NAME] [isr=B,B] [leader=L] [elr=B,B]   the controller answers B's
                                     AlterPartition in flight
    relinquish B serve_ms=MS         leader B took MS to serve follower fetches (KIP-501)
    stop-replica B [delete] [epoch=E]
    update-metadata B replicas=B,B isr=B,B epoch=E [leader=L]   stray-replica check
    io-error B errno=NAME [dir-file] [probe=fail]   a storage error on B's log dir (JBOD)
    show [B...]                      replica state (all brokers of the partition if none)
"""

from __future__ import annotations

import errno as errno_mod
from dataclasses import dataclass, field
from pathlib import Path

from broker import fencing, partition_state
from broker import isr as isr_rules
from broker import replica_core as core
from broker.delayed_produce import ERROR_CODES, ProduceWait, produce_wait
from broker.fetch_failures import FailedPartitions, Outcome, Problem, classify, fetcher_should_stop
from broker.replica_core import EPOCH_START_PENDING, ReplicaCore
from broker.storage.epoch_cache import LeaderEpochCache
from broker.storage.failure_scope import ProbeResult, Scope, failure_scope
from broker.truncation import (
    OUT_OF_RANGE,
    follower_truncation,
    leader_divergence,
    leader_end_for_epoch,
)
from common.controller_requests import LeaderAndIsrPartitionState
from common.errors import ErrorCode
from common.names import TopicPartition
from tests import datadriven

T0 = TopicPartition("t", 0)
DIRS = ("/d0", "/d1")


def _tp(text: str) -> TopicPartition:
    t, _, p = text.rpartition("-")
    return TopicPartition(t, int(p))


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x)


def _fmt(xs) -> str:
    return "[" + ",".join(str(x) for x in xs) + "]"


@dataclass
class Log:
    """What the core's events read of a log: LEO, HW, log start and the leader-epoch cache."""

    log_dir: str
    leo: int = 0
    hw: int = 0
    log_start: int = 0
    cache: LeaderEpochCache = field(default_factory=LeaderEpochCache)
    failed: str | None = None  # a write failed (KIP-461: rebuilt on a new leader epoch)

    def append(self, epoch: int, n: int) -> None:
        self.cache.assign(epoch, self.leo)
        self.leo += n

    def truncate_to(self, offset: int) -> None:
        """As broker.storage.log.Log.truncate_to: at or past the LEO only an epoch that
        started there without a record goes (else it is the last fetched epoch forever)."""
        self.cache.truncate_from_end(offset)
        if offset < self.leo:
            self.leo = offset
            self.hw = min(self.hw, offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.cache.end_offset_for(epoch, self.leo)

    def text(self) -> str:
        epochs = ",".join(f"{e}@{s}" for e, s in self.cache.entries)
        return (f"log {self.log_dir} leo={self.leo} hw={self.hw} log_start={self.log_start} "
                f"epochs=[{epochs}]" + (f" failed={self.failed!r}" if self.failed else ""))


@dataclass
class Replica:
    """One broker's replica of one partition: the core, its log and the fetcher's state."""

    core: ReplicaCore
    log: Log | None
    fetch_leader: int | None = None  # the fetcher's state: the leader and epoch it fetches at
    fetch_epoch: int = -1
    delayed: bool = False            # KIP-461 DELAY_PARTITION: backing off
    lost_in: str | None = None       # offline_replicas: lost with this log dir (design.md#jbod)
    epoch_start_queued: int | None = None  # the leader epoch whose start write is queued

    # the views partition_state, fencing and delayed_produce read (broker.partition.Partition)
    @property
    def is_leader(self) -> bool:
        return self.core.is_leader

    @property
    def leader_epoch(self) -> int:
        return self.core.leader_epoch

    @property
    def partition_epoch(self) -> int:
        return self.core.partition_epoch

    @property
    def replicas(self) -> tuple[int, ...]:
        return self.core.replicas

    @property
    def stopped(self) -> bool:
        return self.core.stopped

    @property
    def isr(self) -> tuple[int, ...]:
        return self.core.isr

    @property
    def min_isr(self) -> int:
        return self.core.min_isr

    @property
    def high_watermark(self) -> int:
        return self.log.hw

    @property
    def log_end_offset(self) -> int:
        return self.log.leo


@dataclass
class Waiter:
    name: str
    broker: int
    tp: TopicPartition
    epoch: int
    end_offset: int
    deadline_ms: int


@dataclass
class PendingRead:
    leader: int
    follower: int
    tp: TopicPartition
    offset: int


class Scenario:
    def __init__(self) -> None:
        self.replicas: dict[tuple[int, TopicPartition], Replica] = {}
        self.failed: dict[int, FailedPartitions] = {}
        self.offline_dirs: dict[int, set[str]] = {}
        self.broker_epochs: dict[int, int] = {}
        self.proposals: dict[tuple[int, TopicPartition], core.ProposeIsr] = {}
        self.waiters: list[Waiter] = []
        self.reads: dict[int, PendingRead] = {}
        self.now = 0
        self.lag_max_ms = 30000
        self.pending_reads_in_sync = False
        self.process_time_max_ms = 500
        self.produced = 0
        self.out: list[str] = []

    # ------------------------------------------------------------------ output

    def say(self, b: int, tp: TopicPartition, text: str) -> None:
        self.out.append(f"{b}: {text}" if tp == T0 else f"{b} {tp}: {text}")

    def carry_out(self, b: int, tp: TopicPartition, effects: list[core.Effect]) -> None:
        """The shell: each effect printed and carried out, in list order."""
        r = self.replicas[(b, tp)]
        for e in effects:
            match e:
                case core.AdvanceHighWatermark(hw=hw):
                    self.say(b, tp, f"hw {hw}")
                    r.log.hw = hw
                case core.WakeProduce():
                    self.say(b, tp, "wake-produce")
                    self.check_waiters(b, tp)
                case core.WakeFetch():
                    self.say(b, tp, "wake-fetch")
                case core.ProposeIsr():
                    self.proposals[(b, tp)] = e
                    self.say(b, tp, f"propose {e.kind} isr={_fmt(e.new_isr)} "
                                    f"leader_epoch={e.leader_epoch} "
                                    f"partition_epoch={e.partition_epoch} "
                                    f"broker_epochs={_fmt(e.broker_epochs)}")
                case core.LogEvent():
                    fields = " ".join(f"{k}={_fmt(v) if isinstance(v, list) else v}"
                                      for k, v in e.fields.items())
                    self.say(b, tp, f"event {e.name} {fields}"
                                    + (" (warning)" if e.warning else ""))
                case core.Transitioned(transition=t):
                    flags = [n for n in ("new_epoch", "lead", "reset_followers",
                                         "write_epoch_start", "follow", "fetch",
                                         "report_recovered") if getattr(t, n)]
                    self.say(b, tp, "transition " + (" ".join(flags) or "(none)"))
                case _:
                    raise AssertionError(f"effect the script does not know: {e!r}")

    def check_waiters(self, b: int, tp: TopicPartition) -> None:
        """delayed_produce.produce_wait for every acks=all produce waiting on (b, tp)."""
        for w in list(self.waiters):
            if (w.broker, w.tp) != (b, tp):
                continue
            r = self.replicas[(b, tp)]
            view = r if r.log is not None else None
            state = produce_wait(view, w.epoch, w.end_offset,
                                 r.log.cache.epoch_for_offset if r.log else (lambda o: -1),
                                 (w.deadline_ms - self.now) / 1000)
            if state is not ProduceWait.WAIT:
                self.waiters.remove(w)
                self.say(b, tp, f"produce {w.name} {state.value}: {ERROR_CODES[state].name}")

    # ------------------------------------------------------------------ helpers

    def rep(self, b: int, tp: TopicPartition) -> Replica:
        return self.replicas[(b, tp)]

    def min_isr_of(self, tp: TopicPartition) -> int:
        return next((r.core.min_isr for (_, t), r in self.replicas.items() if t == tp), 1)

    def new_log(self, b: int) -> Log | None:
        online = [d for d in DIRS if d not in self.offline_dirs.setdefault(b, set())]
        return Log(online[0]) if online else None

    def tracked(self, b: int, leader: int) -> int:
        """Partitions B's fetcher for ``leader`` still tracks (KIP-461: failed ones leave)."""
        failed = self.failed.setdefault(b, FailedPartitions())
        return sum(1 for (x, tp), r in self.replicas.items()
                   if x == b and r.fetch_leader == leader and tp not in failed)

    def stop_fetching(self, b: int, tp: TopicPartition, r: Replica) -> None:
        if r.fetch_leader is not None:
            self.say(b, tp, f"stop-fetching leader={r.fetch_leader}")
            r.fetch_leader, r.fetch_epoch = None, -1

    def fetch_outcome(self, f: int, tp: TopicPartition, r: Replica, outcome: Outcome,
                      why: str) -> None:
        """fetch_failures.classify's outcome, carried out as ReplicaFetcherManager does."""
        if outcome is Outcome.FAIL_PARTITION:
            failed = self.failed.setdefault(f, FailedPartitions())
            failed.fail(tp, r.fetch_epoch)
            left = self.tracked(f, r.fetch_leader)
            self.say(f, tp, f"failed-partition ({why}) at leader_epoch={r.fetch_epoch} "
                            f"failed={len(failed)} tracked={left}")
            if fetcher_should_stop(left):
                self.say(f, tp, f"fetcher for leader {r.fetch_leader} stops: "
                                "every partition failed")
        elif outcome is Outcome.DELAY_PARTITION:
            r.delayed = True
            self.say(f, tp, f"delay-partition ({why})")
        elif outcome is Outcome.BACKOFF_FETCHER:
            self.say(f, tp, f"backoff-fetcher ({why}): every partition waits, none fails")

    def deliver(self, leader: int, f: int, tp: TopicPartition, offset: int,
                fail: str | None) -> None:
        """The leader's records from ``offset`` reach F's fetcher, which appends them."""
        lr, r = self.rep(leader, tp), self.rep(f, tp)
        if fail is not None:
            problem = Problem(fail)
            if problem is Problem.STORAGE:
                r.log.failed = "append failed"
            self.fetch_outcome(f, tp, r, classify(problem, ErrorCode.NONE, r.fetch_epoch,
                                                  r.core.leader_epoch), fail)
            return
        start = max(offset, r.log.leo)
        for o in range(start, lr.log.leo):
            r.log.append(lr.log.cache.epoch_for_offset(o), 1)
        r.log.hw = max(r.log.hw, min(lr.log.hw, r.log.leo))
        r.delayed = False
        self.say(f, tp, f"fetched {start}..{lr.log.leo} leo={r.log.leo} hw={r.log.hw}")

    def lose(self, b: int, tp: TopicPartition, log_dir: str) -> None:
        """design.md#jbod-step-2-3: the replica leaves the pool and the fetchers; the
        controller is asked to restart it, fenced by the partition epoch held."""
        r = self.rep(b, tp)
        self.stop_fetching(b, tp, r)
        if self.failed.setdefault(b, FailedPartitions()).on_log_dir_offline([tp]):
            self.say(b, tp, "failed-cleared (its log dir went offline)")
        r.log, r.lost_in = None, log_dir
        self.carry_out(b, tp, r.core.step(core.BecomeFollower()))
        self.say(b, tp, f"lost in {log_dir}: restart-request partition_epoch="
                        f"{r.core.partition_epoch}")
        self.drop(b, tp, r)

    def drop(self, b: int, tp: TopicPartition, r: Replica) -> None:
        """The replica leaves the partition pool (ReplicaManager.partitions): a later
        LeaderAndIsr finds no state held and starts a new core."""
        r.core = ReplicaCore(b, min_isr=r.core.min_isr)
        self.proposals.pop((b, tp), None)

    # ------------------------------------------------------------------ commands

    def run(self, line: str) -> list[str]:
        self.out = []
        words = line.split()
        cmd, args = words[0], words[1:]
        kv = dict(a.split("=", 1) for a in args if "=" in a)
        pos = [a for a in args if "=" not in a]
        tp = _tp(kv.get("tp", "t-0"))
        handler = getattr(self, "cmd_" + cmd.replace("-", "_"), None)
        if handler is None:
            raise ValueError(f"unknown command {cmd!r}")
        handler(pos, kv, tp)
        return self.out

    def cmd_broker(self, pos, kv, tp) -> None:
        for b in map(int, pos):
            self.broker_epochs.setdefault(b, 1)
            log = Log(kv.get("dir", DIRS[0]))
            self.replicas[(b, tp)] = Replica(ReplicaCore(b, min_isr=int(kv.get("min_isr", 1))),
                                             log)

    def cmd_config(self, pos, kv, tp) -> None:
        for k, v in kv.items():
            if k == "lag_max_ms":
                self.lag_max_ms = int(v)
            elif k == "pending_reads_in_sync":
                self.pending_reads_in_sync = v == "true"
            elif k == "process_time_max_ms":
                self.process_time_max_ms = int(v)
            elif k == "min_isr":
                for (_, t), r in self.replicas.items():
                    if t == tp:
                        r.core.min_isr = int(v)
            elif k != "tp":
                raise ValueError(f"unknown config {k!r}")

    def cmd_time(self, pos, kv, tp) -> None:
        self.now = int(pos[0])

    def cmd_advance(self, pos, kv, tp) -> None:
        self.now += int(pos[0])
        for b, t in sorted({(w.broker, w.tp) for w in self.waiters}):
            self.check_waiters(b, t)

    def cmd_broker_epoch(self, pos, kv, tp) -> None:
        self.broker_epochs[int(pos[0])] = int(pos[1])

    def cmd_lai(self, pos, kv, tp) -> None:
        epoch = int(kv["epoch"])
        isr = _ints(kv["isr"])
        replicas = _ints(kv["replicas"]) if "replicas" in kv else isr
        s = LeaderAndIsrPartitionState(
            topic=tp.topic, partition=tp.partition, controller_epoch=1,
            leader=int(kv["leader"]), leader_epoch=epoch, isr=isr,
            partition_epoch=int(kv.get("pe", epoch)), replicas=replicas,
            is_new="new" in pos, leader_recovery_state=partition_state.RECOVERING
            if "recovering" in pos else partition_state.RECOVERED,
            elr=_ints(kv.get("elr", "")))
        for b in (int(x) for x in pos if x.isdigit()):
            self._lai(b, tp, s, "defer" in pos)

    def _lai(self, b: int, tp: TopicPartition, s, defer: bool) -> None:
        r = self.replicas.get((b, tp))
        if r is None:
            r = self.replicas[(b, tp)] = Replica(
                ReplicaCore(b, min_isr=self.min_isr_of(tp)), None)
        answer = partition_state.admit_partition_state(b, s.replicas, s.leader_epoch,
                                                       s.partition_epoch,
                                                       partition_state.held_epochs(r))
        if answer is not None:
            self.say(b, tp, f"answer {answer.name} (nothing applied)")
            return
        if r.log is None:
            action = partition_state.missing_log(s.is_new, r.lost_in is not None,
                                                 bool(self.offline_dirs.get(b)))
            if action is partition_state.MissingLog.REFUSE:
                self.say(b, tp, f"answer KAFKA_STORAGE_ERROR: may be in an offline log dir "
                                f"({r.lost_in or ','.join(sorted(self.offline_dirs[b]))}); "
                                f"restart-request partition_epoch={s.partition_epoch}")
                r.lost_in = r.lost_in or sorted(self.offline_dirs[b])[0]
                return
            r.log = self.new_log(b)
            if r.lost_in is not None:
                if self.failed.setdefault(b, FailedPartitions()).on_log_dir_offline([tp]):
                    self.say(b, tp, "failed-cleared (re-created)")
                self.say(b, tp, f"recreated in {r.log.log_dir} (lost in {r.lost_in})")
                r.lost_in = None
            else:
                self.say(b, tp, f"created in {r.log.log_dir}")
        held = r.core.leader_epoch if r.core.leader_epoch >= 0 else None
        if partition_state.retry_failed_log(r.log.failed is not None, s.leader_epoch, held):
            self.say(b, tp, f"log-reloaded (was failed: {r.log.failed})")
            r.log.failed = None
        was_following = r.fetch_leader
        effects = r.core.step(core.LeaderAndIsr(s, self.now, r.log.leo, r.log.hw))
        self.carry_out(b, tp, effects)
        t = next(e.transition for e in effects if isinstance(e, core.Transitioned))
        if self.failed.setdefault(b, FailedPartitions()).on_leader_and_isr(tp, s.leader_epoch):
            self.say(b, tp, f"failed-cleared (leader epoch {s.leader_epoch} is newer)")
        if t.lead:
            self.stop_fetching(b, tp, r)
        elif t.fetch:
            r.fetch_leader, r.fetch_epoch, r.delayed = s.leader, s.leader_epoch, False
            self.say(b, tp, f"start-fetching leader={s.leader} leader_epoch={s.leader_epoch}")
        elif t.follow and was_following is not None:
            self.stop_fetching(b, tp, r)
        if t.write_epoch_start:
            r.epoch_start_queued = s.leader_epoch
            if defer:
                self.say(b, tp, f"epoch-start {s.leader_epoch} queued")
            else:
                self._epoch_start(b, tp)
        if t.report_recovered:
            self.carry_out(b, tp, r.core.step(core.IsrChangeWanted(r.core.isr, "recovered")))

    def _epoch_start(self, b: int, tp: TopicPartition) -> None:
        r = self.rep(b, tp)
        epoch, r.epoch_start_queued = r.epoch_start_queued, None
        if not partition_state.epoch_start_applies(r.core.is_leader, r.core.leader_epoch,
                                                   epoch):
            self.say(b, tp, f"epoch-start {epoch} written, not applied (leader epoch is now "
                            f"{r.core.leader_epoch})")
            return
        r.log.cache.assign(epoch, r.log.leo)
        self.say(b, tp, f"epoch-start {epoch}@{r.log.leo} written")
        self.carry_out(b, tp, r.core.step(core.EpochStartWritten(r.log.leo)))

    def cmd_epoch_start(self, pos, kv, tp) -> None:
        self._epoch_start(int(pos[0]), tp)

    def cmd_append(self, pos, kv, tp) -> None:
        b, r = int(pos[0]), self.rep(int(pos[0]), tp)
        r.log.append(r.core.leader_epoch, int(pos[1]))
        self.say(b, tp, f"appended leo={r.log.leo}")
        self.carry_out(b, tp, r.core.step(core.Appended(r.log.leo, r.log.hw)))

    def cmd_produce(self, pos, kv, tp) -> None:
        b, r = int(pos[0]), self.rep(int(pos[0]), tp)
        acks = -1 if kv.get("acks", "all") == "all" else int(kv["acks"])
        self.produced += 1
        name = f"p{self.produced}"
        refused = fencing.produce_error(r if r.log is not None else None, True, acks)
        if refused is not None:
            self.say(b, tp, f"produce {name} refused: {refused.name}")
            return
        r.log.append(r.core.leader_epoch, int(pos[1]))
        if acks == -1:
            self.waiters.append(Waiter(name, b, tp, r.core.leader_epoch, r.log.leo,
                                       self.now + int(kv.get("timeout", 30000))))
            self.say(b, tp, f"produce {name} end={r.log.leo} waits for the HW")
        else:
            self.say(b, tp, f"produce {name} end={r.log.leo} acks={acks}: NONE")
        self.carry_out(b, tp, r.core.step(core.Appended(r.log.leo, r.log.hw)))

    def cmd_fetch(self, pos, kv, tp) -> None:
        f = int(pos[0])
        r = self.rep(f, tp)
        if tp in self.failed.setdefault(f, FailedPartitions()):
            self.say(f, tp, "not fetched: a failed partition (KIP-461)")
            return
        leader = int(kv.get("from", r.fetch_leader if r.fetch_leader is not None else -1))
        if leader < 0:
            self.say(f, tp, "not fetched: no fetcher state")
            return
        lr = self.rep(leader, tp)
        offset = int(kv.get("offset", r.log.leo))
        last_epoch = int(kv.get("last_epoch", r.log.cache.latest_epoch()))
        current = int(kv.get("current_epoch", r.fetch_epoch))
        fail = kv.get("fail")
        if fail == "transport":
            self.fetch_outcome(f, tp, r, classify(Problem.TRANSPORT), "transport")
            return
        # the leader side (leader_fetch.py): leader and epoch checks, then the divergence
        err = fencing.leader_request_error(lr if lr.log is not None else None, True, current) \
            or fencing.follower_fetch_error(f, lr.core.replicas, lr.core.leader_id, current)
        if err is not None:
            self.say(leader, tp, f"fetch from {f} offset={offset} current_epoch={current}: "
                                 f"{err.name}")
            self.fetch_outcome(f, tp, r, classify(Problem.NONE, err, r.fetch_epoch,
                                                  r.core.leader_epoch), err.name)
            return
        div = leader_divergence(last_epoch, offset,
                                leader_end_for_epoch(last_epoch, lr.log.end_offset_for_epoch),
                                lr.log.log_start)
        if div is OUT_OF_RANGE:
            self.say(leader, tp, f"fetch from {f} offset={offset} last_epoch={last_epoch}: "
                                 f"OFFSET_OUT_OF_RANGE (log start {lr.log.log_start})")
            return
        if div is not None:
            self.say(leader, tp, f"fetch from {f} offset={offset} last_epoch={last_epoch}: "
                                 f"diverging epoch={div.epoch} end_offset={div.end_offset}")
            own = r.log.end_offset_for_epoch(div.epoch) if div.epoch >= 0 else (-1, -1)
            d = follower_truncation(div, own, r.log.leo, r.log.hw)
            before = r.log.leo
            if fail is not None:  # the truncation itself failed
                self.deliver(leader, f, tp, offset, fail)
                return
            r.log.truncate_to(d.offset)
            self.say(f, tp, f"truncate {before}->{r.log.leo} (own end for epoch {div.epoch}: "
                            f"{own[1]}) complete={d.complete}")
            return
        pending = int(kv["pending"]) if "pending" in kv else None
        self.say(leader, tp, f"fetch from {f} offset={offset} last_epoch={last_epoch}")
        # leader_fetch.py numbers a fetch (so it may be pending) only with KIP-501's flag on
        fetch_id = pending if self.pending_reads_in_sync else None
        self.carry_out(leader, tp, lr.core.step(core.FollowerFetch(
            f, int(kv.get("broker_epoch", self.broker_epochs.get(f, 1))), offset,
            r.log.log_start, self.now, lr.log.leo, lr.log.hw, fetch_id, "no-expand" not in pos)))
        fs = lr.core.followers.get(f)
        if pending is not None:
            if fetch_id is None:
                self.say(leader, tp, f"read {pending} slow, not tracked (pending reads off)")
            elif fs is not None and pending in fs.pending_fetches:
                self.say(leader, tp, f"read {pending} pending (offset {offset})")
            else:
                self.say(leader, tp, f"read {pending} slow, not pending (not eligible)")
            self.reads[pending] = PendingRead(leader, f, tp, offset)
            return
        self.deliver(leader, f, tp, offset, fail)

    def cmd_read_done(self, pos, kv, tp) -> None:
        rid = int(pos[0])
        pr = self.reads.pop(rid)
        lr = self.rep(pr.leader, pr.tp)
        fs = lr.core.followers.get(pr.follower)
        if fs is not None:
            was = rid in fs.pending_fetches
            isr_rules.complete_pending_fetch(fs, rid, self.now)
            self.say(pr.leader, pr.tp, f"read {rid} done" + (
                f": caught up as of {self.now}" if was else ""))
        else:
            self.say(pr.leader, pr.tp, f"read {rid} done: follower state reset meanwhile")
        self.deliver(pr.leader, pr.follower, pr.tp, pr.offset, None)

    def cmd_expire(self, pos, kv, tp) -> None:
        b, r = int(pos[0]), self.rep(int(pos[0]), tp)
        r.core.refused_expansions.clear()  # replica_background: refused ones, once a round
        out = r.core.out_of_sync(r.log.leo, self.now, self.lag_max_ms,
                                 self.pending_reads_in_sync)
        self.say(b, tp, f"out-of-sync {_fmt(sorted(out))}")
        if out:
            new_isr = tuple(x for x in r.core.isr if x not in out)
            self.carry_out(b, tp, r.core.step(core.IsrChangeWanted(new_isr, "shrink")))

    def cmd_answer(self, pos, kv, tp) -> None:
        b, r = int(pos[0]), self.rep(int(pos[0]), tp)
        p = self.proposals.pop((b, tp), None)
        if p is None:
            self.say(b, tp, "no AlterPartition in flight")
            return
        c = r.core
        relinquish = p.kind == "relinquish"
        error = ErrorCode[kv.get("error", "NEW_LEADER_ELECTED" if relinquish else "NONE")]
        isr = _ints(kv["isr"]) if "isr" in kv else p.new_isr
        leader = int(kv.get("leader", p.new_isr[0] if relinquish else b))
        stale = (c.leader_epoch, c.partition_epoch) != (p.leader_epoch, p.partition_epoch)
        self.say(b, tp, f"answer {p.kind} {error.name} isr={_fmt(isr)}"
                        + (" (proposal stale)" if stale else ""))
        self.carry_out(b, tp, c.step(core.AlterPartitionAnswer(
            p.new_isr, p.kind, stale, p.broker_epochs, error, leader,
            p.leader_epoch + (1 if relinquish else 0), isr, p.partition_epoch + 1,
            c.leader_recovery_state if p.kind != "recovered" else partition_state.RECOVERED,
            _ints(kv.get("elr", "")), r.log.leo, r.log.hw)))

    def cmd_relinquish(self, pos, kv, tp) -> None:
        b, r = int(pos[0]), self.rep(int(pos[0]), tp)
        c = r.core
        serve_ms = int(kv["serve_ms"])
        if not isr_rules.should_relinquish(serve_ms, self.process_time_max_ms,
                                           self.pending_reads_in_sync):
            self.say(b, tp, f"serve {serve_ms}ms: keeps leading")
            return
        if not isr_rules.may_relinquish(c.is_leader, c.relinquished_epoch, c.leader_epoch,
                                        len(c.isr)):
            why = ("not the leader" if not c.is_leader
                   else "already relinquished in this epoch"
                   if c.relinquished_epoch == c.leader_epoch
                   else f"no other ISR member, isr={_fmt(c.isr)}")
            self.say(b, tp, f"serve {serve_ms}ms: may not relinquish ({why})")
            return
        c.relinquished_epoch = c.leader_epoch
        self.say(b, tp, f"serve {serve_ms}ms > {self.process_time_max_ms}ms: relinquish")
        self.proposals.pop((b, tp), None)  # AlterPartitionManager unqueues a pending change
        self.carry_out(b, tp, c.step(core.IsrChangeWanted(
            isr_rules.relinquish_isr(c.isr, b), "relinquish")))

    def cmd_stop_replica(self, pos, kv, tp) -> None:
        self._stop_replica(int(pos[0]), tp, "delete" in pos,
                           int(kv["epoch"]) if "epoch" in kv else None)

    def _stop_replica(self, b: int, tp: TopicPartition, delete: bool, epoch: int | None):
        r = self.rep(b, tp)
        if fencing.stop_replica_is_stale(epoch, r.core.leader_epoch):
            self.say(b, tp, f"answer FENCED_LEADER_EPOCH (epoch {epoch} < "
                            f"{r.core.leader_epoch}): nothing stopped")
            return
        self.stop_fetching(b, tp, r)
        if self.failed.setdefault(b, FailedPartitions()).on_stop_replica(tp):
            self.say(b, tp, "failed-cleared (StopReplica)")
        self.carry_out(b, tp, r.core.step(core.StopReplica()))
        if delete:
            r.log = None
            self.say(b, tp, "log deleted")
            self.drop(b, tp, r)

    def cmd_update_metadata(self, pos, kv, tp) -> None:
        b = int(pos[0])
        r = self.replicas.get((b, tp))
        replicas, isr, epoch = _ints(kv["replicas"]), _ints(kv["isr"]), int(kv["epoch"])
        leader = int(kv.get("leader", replicas[0] if replicas else -1))
        stray = leader != -2 and partition_state.is_stray_replica(
            b, replicas, epoch, r is not None and r.log is not None, r, isr)
        if not stray:
            self.say(b, tp, "kept")
            return
        self.say(b, tp, "stray replica: StopReplica(delete)")
        self._stop_replica(b, tp, True, None)

    def cmd_io_error(self, pos, kv, tp) -> None:
        b = int(pos[0])
        r = self.rep(b, tp)
        log_dir = r.log.log_dir
        err = getattr(errno_mod, kv["errno"])
        scope = failure_scope(err, None if "dir-file" in pos else str(tp),
                              ProbeResult(kv.get("probe", "ok") == "ok"))
        self.say(b, tp, f"{kv['errno']} in {log_dir}: scope {scope.value}")
        if scope is Scope.PARTITION:
            self.lose(b, tp, log_dir)
            return
        self.offline_dirs.setdefault(b, set()).add(log_dir)
        for (x, t), other in sorted(self.replicas.items()):
            if x == b and other.log is not None and other.log.log_dir == log_dir:
                self.lose(b, t, log_dir)
        if self.new_log(b) is None:
            self.say(b, tp, "every log dir is offline: the broker halts")

    def cmd_show(self, pos, kv, tp) -> None:
        brokers = [int(x) for x in pos] or sorted(b for b, t in self.replicas if t == tp)
        for b in brokers:
            r = self.rep(b, tp)
            c = r.core
            if r.log is None:
                self.say(b, tp, "no replica" + (f" (lost in {r.lost_in})" if r.lost_in else ""))
                continue
            role = ("leader" if c.is_leader else "stopped" if c.stopped
                    else f"follower of {c.leader_id}")
            start = "pending" if c.leader_epoch_start_offset == EPOCH_START_PENDING \
                else c.leader_epoch_start_offset
            line = (f"{role} leader_epoch={c.leader_epoch} partition_epoch={c.partition_epoch} "
                    f"isr={_fmt(c.isr)} replicas={_fmt(c.replicas)} "
                    f"min_isr={c.min_isr} effective={c.effective_min_isr}")
            if c.is_leader:
                line += f" epoch_start={start}"
            if c.pending_isr is not None:
                line += f" pending_isr={_fmt(c.pending_isr)} maximal_isr={_fmt(c.maximal_isr)}"
            if c.elr:
                line += f" elr={_fmt(c.elr)}"
            if c.refused_expansions:
                line += " refused=" + ",".join(f"{k}@{v}"
                                               for k, v in sorted(c.refused_expansions.items()))
            self.say(b, tp, line)
            if c.followers:
                self.say(b, tp, "  followers " + " ".join(
                    f"{f.broker_id}(leo={f.log_end_offset},caught_up={f.last_caught_up_time_ms}"
                    + (f",pending={_fmt(sorted(f.pending_fetches))}" if f.pending_fetches
                       else "") + ")" for _, f in sorted(c.followers.items())))
            self.say(b, tp, "  " + r.log.text())
            if r.fetch_leader is not None:
                self.say(b, tp, f"  fetching from {r.fetch_leader} at leader_epoch="
                                f"{r.fetch_epoch}" + (" (delayed)" if r.delayed else ""))
            if tp in self.failed.setdefault(b, FailedPartitions()):
                self.say(b, tp, "  failed (KIP-461)")


def run_script(path: Path) -> tuple[str, str]:
    """(expected, actual) text of a script file (tests/datadriven.py's format)."""
    return datadriven.run_script(path, Scenario().run)


rewrite_requested = datadriven.rewrite_requested
