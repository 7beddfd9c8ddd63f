"""The Unclean Recovery Manager (design.md#kip-966): for a leaderless partition whose
strategy says to recover, ask the replicas for their logs (GetReplicaLogInfo) and elect the best
one. Everything here is pure: times come in as arguments, answers as values; core.py turns the
manager's wishes into effects (`QueryReplicaLogs`, a timer) and its choices into elections.

The choice (`choose_recovery_leader`). design.md#kip-966: "The one with the highest leader epoch and
the longest log end offset will be the new leader." replog reads that as an order, not two
independent maxima:

1. the highest last written leader epoch - a replica that saw a later leader holds the later
   history, and a longer log from an older epoch may be a divergent suffix that the later
   leader truncated away;
2. then the largest log end offset;
3. ties go to assignment order (the preferred replica first), so the choice is deterministic
   and keeps leadership balanced, like every selector in controller/selectors.py.

Replies with an error, and replies from brokers that are not assigned replicas, never count -
except when every assigned replica answered that it holds no log (UNKNOWN_TOPIC_OR_PARTITION):
then nothing better can come, and the first leads with an empty log (`_none_holds_a_log`).

The tasks (`UncleanRecoveryManager`): one per leaderless partition (design.md#kip-966's URM
workflow).

- A task starts when an offline election answers `NeedsRecovery` (decisions/elections.py) or
  the operator forces one (ElectLeaders UNCLEAN: Manual's way out, and under the other
  strategies a way to skip the wait). It remembers the assignment and strategy it started with.
- `queries` batches what is to be asked per broker: one GetReplicaLogInfo per broker for every
  partition whose task still needs that broker's answer (design.md#kip-966's BrokerRequestSender).
  Each query names the broker epoch asked; an answer from another incarnation never counts.
- When to choose (`ready_to_choose`): Balanced waits for every LastKnownELR member to answer,
  plus the others within unclean.recovery.timeout.ms; Proactive (and a forced recovery) takes
  the answers received within 5 s, or the first usable one after that. Either chooses at once
  when every assigned replica has answered; a replica that is down is waited for like a slow
  one (it may register within the wait, and is then asked).
- A broker that dies mid-query: its answer (received or not) is forgotten - its log cannot lead.
  A broker that registers again is asked again (its new epoch). A query that fails as a whole
  (transport error, deadline, a restarted broker) is asked again after RETRY_BACKOFF_MS, and so
  is a replica that answered KAFKA_STORAGE_ERROR: it was lost with a log dir, and the restart
  its broker asked for re-creates it without a new registration, so a Balanced task never
  waits for ever on that first answer (tests/controller/test_unclean_recovery.py::
  test_a_replica_lost_with_its_log_dir_is_asked_again_and_its_recreated_log_counts).
- A task whose partition no longer needs it - it got a leader, its ISR/ELR member came back, it
  is being deleted or was reassigned, or its strategy now says to wait - is dropped
  (`obsolete`); a reassigned one is elected again on its new replicas, which starts a new task
  if it still needs one. A new controller starts the tasks again from ZooKeeper's state: nothing of a
  task is persisted, because nothing is decided before its election is written.
"""  # noqa: E501

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from common.errors import ErrorCode
from common.names import TopicPartition
from common.zk_layout import LEADER_RECOVERING, NO_LEADER
from controller import selectors
from controller.context import ControllerContext
from controller.decisions.base import Builder, Decision, P
from controller.elr import assigned_only
from controller.selectors import ElectionReason, UncleanRecoveryStrategy

# design.md#kip-966: Proactive takes the replies received within a fixed 5 s (no config for it), or
# the first one after that.
PROACTIVE_WAIT_MS = 5_000
# A GetReplicaLogInfo that failed as a whole is sent again after this long (not at once: a
# broker refusing connections would otherwise be asked in a tight loop).
RETRY_BACKOFF_MS = 500


@dataclass(frozen=True)
class ReplicaLogInfo:
    """One replica's GetReplicaLogInfo answer for one partition."""

    last_written_leader_epoch: int
    log_end_offset: int
    error: ErrorCode = ErrorCode.NONE


def _none_holds_a_log(assignment: Collection[int],
                      replies: Mapping[int, ReplicaLogInfo]) -> bool:
    """Every assigned replica answered that it holds no log for the partition
    (UNKNOWN_TOPIC_OR_PARTITION: its dir lost it whole, e.g. a power loss before the partition
    dir was fsynced). Nothing better can come, so one of them leads with an empty log, as the
    unclean election would have; while any replica has not answered, or answered with another
    error (a KAFKA_STORAGE_ERROR dir may come back), the task waits (design.md#sim-finding-f)."""
    return bool(assignment) and all(
        r in replies and replies[r].error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        for r in assignment)


def choose_recovery_leader(assignment: Sequence[int],
                           replies: Mapping[int, ReplicaLogInfo]) -> int | None:
    """The replica to elect, or None when no assigned replica answered without an error
    (unless none holds a log at all: the first of them, `_none_holds_a_log`)."""
    if _none_holds_a_log(assignment, replies):
        return assignment[0]
    best: int | None = None
    best_key: tuple[int, int] | None = None
    for r in assignment:  # assignment order: the first of equals is kept
        info = replies.get(r)
        if info is None or info.error != ErrorCode.NONE:
            continue
        key = (info.last_written_leader_epoch, info.log_end_offset)
        if best_key is None or key > best_key:
            best, best_key = r, key
    return best


def offsets_discarded(assignment: Sequence[int], replies: Mapping[int, ReplicaLogInfo],
                      chosen: int) -> int:
    """What an unclean recovery may have lost: the best log end offset among the answers
    minus the chosen replica's (0 is the goal; more means acknowledged records may be gone)."""
    leos = [i.log_end_offset for r, i in replies.items()
            if r in assignment and i.error == ErrorCode.NONE]
    return max(leos) - replies[chosen].log_end_offset if leos else 0


def ready_to_choose(strategy: UncleanRecoveryStrategy, replicas: Collection[int],
                    last_known_elr: Collection[int], replies: Mapping[int, ReplicaLogInfo],
                    elapsed_ms: float, timeout_ms: int) -> bool:
    """Whether the manager may choose now (design.md#kip-966). `replies` are the answers so far (an
    error is an answer that never counts), `replicas` the partition's assigned replicas.

    - Balanced: every LastKnownELR member has answered, plus those that answer within
      `timeout_ms` (unclean.recovery.timeout.ms) - so once the timeout has passed, or once
      every replica has answered;
    - Proactive (and a forced recovery): the answers within 5 s, or the first one after that -
      or earlier, once every replica has answered (nothing more can come).
    A replica that is down is waited for like one that is slow: it may register and answer
    within the wait. Never without at least one usable answer."""
    usable = any(i.error == ErrorCode.NONE for i in replies.values())
    everyone = set(replicas) <= set(replies)
    if not usable:
        return everyone and _none_holds_a_log(replicas, replies)
    if strategy is UncleanRecoveryStrategy.BALANCED:
        return set(last_known_elr) <= set(replies) and (everyone or elapsed_ms >= timeout_ms)
    return everyone or elapsed_ms >= PROACTIVE_WAIT_MS


# ============================================================================ the manager

@dataclass
class RecoveryTask:
    tp: TopicPartition
    strategy: UncleanRecoveryStrategy
    replicas: tuple[int, ...]          # the assignment it started with
    started_ms: float
    forced: bool = False               # ElectLeaders UNCLEAN
    waiters: list[int] = field(default_factory=list)  # ElectLeaders request ids
    asked: dict[int, int] = field(default_factory=dict)  # broker -> epoch asked
    # broker -> the query whose answer counts: a task that replaced a dropped one (the
    # partition was reassigned) asks the same incarnation again, and the earlier query's late
    # answer describes a log the move may have deleted since
    # (tests/controller/test_unclean_recovery.py::
    # test_an_answer_to_a_dropped_tasks_query_never_counts_for_the_next_task)
    query_of: dict[int, int] = field(default_factory=dict)
    replies: dict[int, ReplicaLogInfo] = field(default_factory=dict)
    retry_at: dict[int, float] = field(default_factory=dict)  # broker -> when to ask again

    @property
    def rule(self) -> UncleanRecoveryStrategy:
        """The waiting rule: a forced recovery waits as Proactive does."""
        return UncleanRecoveryStrategy.PROACTIVE if self.forced else self.strategy

    def deadline_ms(self, timeout_ms: int) -> float:
        wait = timeout_ms if self.rule is UncleanRecoveryStrategy.BALANCED \
            else PROACTIVE_WAIT_MS
        return self.started_ms + wait


@dataclass(frozen=True)
class Query:
    """One GetReplicaLogInfo to send: this broker (at this epoch), these partitions."""

    query_id: int
    broker_id: int
    broker_epoch: int
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class Choice:
    task: RecoveryTask
    leader: int
    offsets_discarded: int


class UncleanRecoveryManager:
    def __init__(self, timeout_ms: int):
        self.timeout_ms = timeout_ms
        self.tasks: dict[TopicPartition, RecoveryTask] = {}
        self._inflight: dict[int, Query] = {}
        self._next_query = 1

    def start(self, tp: TopicPartition, strategy: UncleanRecoveryStrategy,
              replicas: Sequence[int], now_ms: float, forced: bool = False) -> bool:
        """A task for `tp` (True if new). A forced start upgrades a waiting task: it keeps the
        answers it has and waits from now on as Proactive does; a new strategy for the topic
        replaces the task's (same start, same answers)."""
        task = self.tasks.get(tp)
        if task is None:
            self.tasks[tp] = RecoveryTask(tp, strategy, tuple(replicas), now_ms, forced)
            return True
        if forced and not task.forced:
            task.forced, task.started_ms = True, now_ms
        task.strategy = strategy  # the topic's strategy may have changed: its wait applies
        return False

    def drop(self, tp: TopicPartition) -> RecoveryTask | None:
        return self.tasks.pop(tp, None)

    def broker_gone(self, broker: int) -> None:
        """A broker's registration vanished: what it said no longer counts."""
        for task in self.tasks.values():
            task.asked.pop(broker, None)
            task.query_of.pop(broker, None)
            task.replies.pop(broker, None)
            task.retry_at.pop(broker, None)

    def queries(self, live_epochs: Mapping[int, int], now_ms: float) -> list[Query]:
        """Batch every question still to ask, one query per broker."""
        want: dict[int, list[TopicPartition]] = {}
        for tp, task in sorted(self.tasks.items()):
            for b in task.replicas:
                epoch = live_epochs.get(b)
                if epoch is None or task.asked.get(b) == epoch \
                        or task.retry_at.get(b, 0.0) > now_ms:
                    continue
                task.asked[b] = epoch
                task.replies.pop(b, None)  # an answer from another incarnation
                task.retry_at.pop(b, None)
                want.setdefault(b, []).append(tp)
        out = []
        for b, tps in sorted(want.items()):
            q = Query(self._next_query, b, live_epochs[b], tuple(tps))
            self._next_query += 1
            self._inflight[q.query_id] = q
            for tp in tps:
                self.tasks[tp].query_of[b] = q.query_id
            out.append(q)
        return out

    def answered(self, query_id: int, broker: int, broker_epoch: int,
                 answers: Mapping[TopicPartition, ReplicaLogInfo] | None,
                 now_ms: float) -> None:
        """A query's answers, or None when it failed as a whole (asked again later). Answers
        for partitions it did not ask, for a task that moved on, or from another broker
        incarnation are ignored."""
        q = self._inflight.pop(query_id, None)
        if q is None or q.broker_id != broker:
            return
        for tp in q.partitions:
            task = self.tasks.get(tp)
            if task is None or task.asked.get(broker) != q.broker_epoch \
                    or task.query_of.get(broker) != query_id:
                continue
            if answers is None:
                del task.asked[broker]
                task.retry_at[broker] = now_ms + RETRY_BACKOFF_MS
                continue
            if broker_epoch != q.broker_epoch:
                continue
            info = task.replies[broker] = answers.get(tp, ReplicaLogInfo(
                -1, -1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            if info.error == ErrorCode.KAFKA_STORAGE_ERROR:
                # Lost with a log dir: the broker's /restart_partitions entry has it re-created
                # (design.md#jbod) within the same broker epoch, so it is asked again (a forced task
                # still ends on this answer: exhausted)
                del task.asked[broker]
                task.retry_at[broker] = now_ms + RETRY_BACKOFF_MS

    def choices(self, ctx: ControllerContext, now_ms: float) -> list[Choice]:
        """The tasks that may choose now, with their choice (Balanced waits for the
        partition's LastKnownELR as ZooKeeper holds it now)."""
        out = []
        eligible = ctx.eligible_ids  # a broker in controlled shutdown may not lead
        for tp, task in sorted(self.tasks.items()):
            s = ctx.leadership.get(tp)
            lke = assigned_only(s.last_known_elr, task.replicas) if s is not None else ()
            if not ready_to_choose(task.rule, task.replicas, lke, task.replies,
                                   now_ms - task.started_ms, self.timeout_ms):
                continue
            leader = choose_recovery_leader(
                task.replicas, {b: i for b, i in task.replies.items() if b in eligible})
            if leader is not None:
                out.append(Choice(task, leader,
                                  offsets_discarded(task.replicas, task.replies, leader)))
        return out

    def exhausted(self, live: Collection[int]) -> list[RecoveryTask]:
        """Forced tasks that can never choose: no replica is live, or every live one has
        answered and none usably. The operator's ElectLeaders is answered with a failure. (An
        automatic task waits instead: a broker registering asks again.)"""
        out = []
        for task in self.tasks.values():
            if not task.forced:
                continue
            live_replicas = [b for b in task.replicas if b in live]
            if all(b in task.replies for b in live_replicas) and not any(
                    i.error == ErrorCode.NONE for i in task.replies.values()):
                out.append(task)
        return out

    def next_deadline_ms(self, now_ms: float) -> float | None:
        """When a timer must wake the manager: the earliest wait still to end, or retry."""
        times = [t.deadline_ms(self.timeout_ms) for t in self.tasks.values()]
        times += [r for t in self.tasks.values() for r in t.retry_at.values()]
        later = [t for t in times if t > now_ms]
        return min(later) if later else None


# ============================================================================ decisions

def obsolete(ctx: ControllerContext, task: RecoveryTask) -> tuple[str, bool] | None:
    """Why `task`'s partition no longer needs it, and whether an offline election should run
    for it now (an eligible leader is available), or None while it still needs a recovery."""
    tp = task.tp
    if not ctx.has_partition(tp) or ctx.is_being_deleted(tp.topic):
        return "the partition is being deleted", False
    if tuple(ctx.replicas(tp)) != task.replicas:
        # Its election is decided again on the new replicas, which starts a task for them if
        # it still needs one: nothing else would (design.md#sim-finding-f).
        return "the partition was reassigned", True
    s = ctx.leadership.get(tp)
    if s is None:
        return "the partition has no state", False
    if s.leader != NO_LEADER and s.leader in ctx.live_brokers:
        return f"broker {s.leader} leads it", False
    if not ctx.elr.enabled and not task.forced:
        return "eligible.leader.replicas.enable is off", False
    replicas = ctx.replicas(tp)
    r = selectors.elr_leader(replicas, s.isr, assigned_only(s.elr, replicas),
                             assigned_only(s.last_known_elr, replicas), ctx.live_ids,
                             ctx.shutting_down, task.rule)
    if isinstance(r, selectors.LeaderChosen):
        return f"broker {r.election.leader} can lead it cleanly", True
    if isinstance(r, selectors.Wait):
        return r.reason, False
    return None


def elect_recovered(ctx: ControllerContext, choices: Iterable[Choice]) -> Decision:
    """The recoveries' elections: the chosen replica leads alone in the ISR, RECOVERING
    (KIP-704: it reports RECOVERED once its state is rebuilt), ELR and LastKnownELR cleared
    (an unclean election, elr.py)."""
    b = Builder(ctx)
    for c in choices:
        tp = c.task.tp
        s = b.leadership(tp)
        if s is None:
            continue
        if b.pstate(tp) is P.OnlinePartition:
            b.partition(tp, P.OfflinePartition)
        b.elect(tp, s, c.leader, (c.leader,), ElectionReason.UNCLEAN_RECOVERY, unclean=True,
                recovery=LEADER_RECOVERING)
        b.outcome(tp, ErrorCode.NONE)
    return b.build()
