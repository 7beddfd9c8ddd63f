"""The controller's decisions: pure functions from the ControllerContext (and an event) to a
Decision - the partition states to write, the state-machine steps, and the requests to send.

Nothing here awaits, touches ZooKeeper or a socket, or reads a clock (callers pass `now_ms`).
The shell (controller.py) applies a Decision in this order, which is the one rule that binds:

    1. write `writes` to ZooKeeper (conditional on each znode version and the controller
       epoch's version, in batched transactions);
    2. `apply(ctx, decision, failed)` - only the partitions whose write succeeded change in
       memory, and only their state-machine steps are taken;
    3. send the requests (`leader_and_isr`, `update_metadata`, `stop_replica`), dropping the
       failed partitions: the controller writes ZooKeeper before it tells brokers.

Rules, with where they come from:

- Every leader change bumps the leader epoch; so does every ISR change the controller makes
  (Kafka's ZK-mode removeReplicasFromIsr bumps it, fencing the old leader's view). ISR changes
  a leader asks for through AlterPartition keep the leader epoch (KIP-497).
- The partition epoch is the state znode's version: a conditional set bumps it by one, so a
  write's new state carries old.partition_epoch + 1 and a created znode 0.
- The ISR never becomes empty: when every member is gone the last one stays (Kafka keeps the
  last leader in the ISR, so a clean election can later pick it when it returns). With several
  members lost at once replog keeps the last leader if it was a member, else the first member.
- An unclean election (the new leader was not in the ISR) marks the leader RECOVERING
  (KIP-704, as Kafka's ZK controller does since 3.2); the leader sends AlterPartition with
  RECOVERED once it has rebuilt its state.
- AlterPartition validation follows Kafka's ZK controller (processAlterPartition) with KIP-841/
  KIP-903 eligibility: see `alter_partition`.
- Seed 002 (KIP-501 Solution 2): `relinquish_leadership` elects the first other eligible ISR
  member and records the sender; preferred elections (manual and automatic) skip it until
  `ctx.relinquish_cooldown_ms` has passed. The cool-down defaults to
  leader.imbalance.check.interval.seconds: the automatic preferred election runs once per that
  interval, so a relinquishing leader is not handed its leadership back by the very next check,
  and at the latest one interval after the cool-down it is rebalanced normally.

Partial: reassignment (C6), restarted partitions (C5) and ELR (C7) decisions are not written
yet; their selectors are in selectors.py and they will be further functions here returning
the same Decision type.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace

from common.errors import ErrorCode
from common.names import TopicPartition
from common.zk_layout import LEADER_RECOVERED, LEADER_RECOVERING, NO_LEADER, LeaderAndIsr
from controller import selectors
from controller.context import ControllerContext, PartitionReplica
from controller.selectors import ElectionReason
from controller.state_machine import PartitionState, ReplicaState, TransitionPlan

P = PartitionState
R = ReplicaState
ELECTION_PREFERRED = 0   # proto ElectionType
ELECTION_UNCLEAN = 1


# ============================================================================ decision types

@dataclass(frozen=True)
class ElectionRecord:
    """One leader election (event log `leader_election`, metrics)."""

    tp: TopicPartition
    old_leader: int
    new_leader: int
    leader_epoch: int
    unclean: bool
    reason: ElectionReason


@dataclass(frozen=True)
class PartitionWrite:
    """A partition state znode write. `old` None creates the znode (version 0); otherwise a
    set with expected version old.partition_epoch, after which the version is new's."""

    tp: TopicPartition
    old: LeaderAndIsr | None
    new: LeaderAndIsr


@dataclass(frozen=True)
class Outcome:
    error: ErrorCode = ErrorCode.NONE
    message: str = ""


@dataclass
class Decision:
    writes: dict[TopicPartition, PartitionWrite] = field(default_factory=dict)
    elections: list[ElectionRecord] = field(default_factory=list)
    partition_steps: list[tuple[TopicPartition, PartitionState]] = field(default_factory=list)
    replica_steps: list[tuple[PartitionReplica, ReplicaState]] = field(default_factory=list)
    # broker -> partition -> is_new (LeaderAndIsr carries the state the context has after
    # apply, so a partition elected in the same decision is sent with its new leader)
    leader_and_isr: dict[int, dict[TopicPartition, bool]] = field(default_factory=dict)
    # broker -> partitions; an empty set still sends the live brokers and controller
    update_metadata: dict[int, set[TopicPartition]] = field(default_factory=dict)
    # broker -> partition -> delete_partition
    stop_replica: dict[int, dict[TopicPartition, bool]] = field(default_factory=dict)
    # per-partition answers for RPCs (AlterPartition, ElectLeaders)
    outcomes: dict[TopicPartition, Outcome] = field(default_factory=dict)
    relinquished: dict[TopicPartition, tuple[int, float]] = field(default_factory=dict)
    # topics whose replicas are all deleted: the shell removes their znodes next
    deletable_topics: set[str] = field(default_factory=set)

    @property
    def empty(self) -> bool:
        return not (self.writes or self.partition_steps or self.replica_steps
                    or self.leader_and_isr or self.update_metadata or self.stop_replica)

    def isr_changes(self) -> list[PartitionWrite]:
        """Writes that changed the ISR (event log `isr_change`)."""
        return [w for w in self.writes.values()
                if w.old is not None and tuple(w.old.isr) != tuple(w.new.isr)]


class StaleBrokerEpoch(Exception):
    """A whole request rejected: the sender is not registered or at another broker epoch."""

    error_code = ErrorCode.STALE_BROKER_EPOCH


class BrokerNotAvailable(Exception):
    error_code = ErrorCode.BROKER_NOT_AVAILABLE


# ============================================================================ builder

class _Builder:
    """Accumulates one Decision; reads through its own pending writes and transitions, so the
    steps of a compound decision (failover: metadata, then elections) see each other."""

    def __init__(self, ctx: ControllerContext):
        self.ctx = ctx
        self.d = Decision()
        self.partitions: TransitionPlan = TransitionPlan(ctx.partition_sm)
        self.replicas: TransitionPlan = TransitionPlan(ctx.replica_sm)

    def leadership(self, tp: TopicPartition) -> LeaderAndIsr | None:
        w = self.d.writes.get(tp)
        return w.new if w is not None else self.ctx.leadership.get(tp)

    def pstate(self, tp: TopicPartition) -> PartitionState:
        return self.partitions.state(tp)

    def rstate(self, pr: PartitionReplica) -> ReplicaState:
        return self.replicas.state(pr)

    def write(self, tp: TopicPartition, new: LeaderAndIsr,
              election: ElectionRecord | None = None) -> None:
        prior = self.d.writes.get(tp)
        if prior is not None:
            # A second change in one decision: one znode write from the original version.
            new = replace(new, partition_epoch=prior.new.partition_epoch)
            self.d.writes[tp] = PartitionWrite(tp, prior.old, new)
        else:
            self.d.writes[tp] = PartitionWrite(tp, self.ctx.leadership.get(tp), new)
        if election is not None:
            self.d.elections.append(election)

    def partition(self, tp: TopicPartition, target: PartitionState) -> None:
        self.partitions.add(tp, target)

    def replica(self, pr: PartitionReplica, target: ReplicaState) -> None:
        self.replicas.add(pr, target)

    def lai(self, brokers: Iterable[int], tp: TopicPartition, is_new: bool = False) -> None:
        for b in brokers:
            if b in self.ctx.live_brokers:
                per = self.d.leader_and_isr.setdefault(b, {})
                per[tp] = per.get(tp, False) or is_new

    def lai_replicas(self, tp: TopicPartition, is_new: bool = False,
                     exclude: Collection[int] = ()) -> None:
        self.lai((r for r in self.ctx.replicas(tp) if r not in exclude), tp, is_new)

    def um_all(self, tps: Iterable[TopicPartition]) -> None:
        tps = set(tps)
        for b in self.ctx.live_brokers:
            self.d.update_metadata.setdefault(b, set()).update(tps)

    def um_brokers(self, brokers: Iterable[int], tps: Iterable[TopicPartition] = ()) -> None:
        tps = set(tps)
        for b in brokers:
            if b in self.ctx.live_brokers:
                self.d.update_metadata.setdefault(b, set()).update(tps)

    def stop(self, broker: int, tp: TopicPartition, delete: bool) -> None:
        if broker in self.ctx.live_brokers:
            per = self.d.stop_replica.setdefault(broker, {})
            per[tp] = per.get(tp, False) or delete

    def outcome(self, tp: TopicPartition, error: ErrorCode, message: str = "") -> None:
        self.d.outcomes[tp] = Outcome(error, message)

    def build(self) -> Decision:
        self.d.partition_steps = list(self.partitions.steps)
        self.d.replica_steps = list(self.replicas.steps)
        return self.d


def _bumped(ctx: ControllerContext, s: LeaderAndIsr, *, leader: int | None = None,
            isr: Sequence[int] | None = None, bump_leader_epoch: bool = True,
            recovery: int | None = None) -> LeaderAndIsr:
    return replace(s,
                   leader=s.leader if leader is None else leader,
                   leader_epoch=s.leader_epoch + (1 if bump_leader_epoch else 0),
                   isr=tuple(s.isr if isr is None else isr),
                   controller_epoch=ctx.epoch,
                   partition_epoch=s.partition_epoch + 1,
                   leader_recovery_state=(s.leader_recovery_state if recovery is None
                                          else recovery))


def shrink_isr(isr: Sequence[int], gone: Collection[int], leader: int) -> tuple[int, ...]:
    """ISR without `gone`, but never empty (see the module docstring)."""
    kept = tuple(r for r in isr if r not in gone)
    if kept or not isr:
        return kept
    return (leader,) if leader in isr else (isr[0],)


def _failed_election_message(tp: TopicPartition, strategy: str) -> str:
    return f"Failed to elect leader for partition {tp} under strategy {strategy}"


# ============================================================================ applying

def apply(ctx: ControllerContext, decision: Decision,
          failed: Collection[TopicPartition] = ()) -> None:
    """Make a decision true in memory after its ZooKeeper writes; partitions in `failed` (whose
    write was refused) keep their old state and take none of their steps."""
    failed = set(failed)
    for tp, w in decision.writes.items():
        if tp not in failed:
            ctx.leadership[tp] = w.new
    for tp, target in decision.partition_steps:
        if tp not in failed:
            ctx.partition_sm.transition(tp, target)
    for pr, target in decision.replica_steps:
        if pr.tp not in failed:
            ctx.replica_sm.transition(pr, target)
    for tp, entry in decision.relinquished.items():
        if tp not in failed:
            ctx.relinquished[tp] = entry


# ============================================================================ elections

def _initialize_partition(b: _Builder, tp: TopicPartition) -> None:
    """NewPartition -> OnlinePartition: the first live replica leads, the ISR is the live
    replicas, leader epoch 0 (Kafka's initializeLeaderAndIsrForPartitions)."""
    ctx = b.ctx
    replicas = ctx.replicas(tp)
    e = selectors.initial_leader(replicas, ctx.live_ids, ctx.shutting_down)
    if e is None:
        # Stays NewPartition; a broker startup retries it (Kafka logs the same and waits).
        b.outcome(tp, ErrorCode.LEADER_NOT_AVAILABLE,
                  f"No live replica among {replicas} for new partition {tp}")
        return
    new = LeaderAndIsr(e.leader, 0, e.isr, ctx.epoch, 0)
    b.write(tp, new, ElectionRecord(tp, NO_LEADER, e.leader, 0, False,
                                    ElectionReason.NEW_PARTITION))
    b.partition(tp, P.OnlinePartition)
    for r in replicas:
        pr = PartitionReplica(tp, r)
        b.replica(pr, R.OnlineReplica if r in ctx.live_brokers else R.OfflineReplica)
    b.lai_replicas(tp, is_new=True)
    b.um_all([tp])


def _elect_offline(b: _Builder, tps: Iterable[TopicPartition], *, force_unclean: bool = False,
                   reason: ElectionReason = ElectionReason.OFFLINE) -> None:
    """Kafka's triggerOnlinePartitionStateChange for New and Offline partitions."""
    ctx = b.ctx
    for tp in tps:
        if ctx.is_being_deleted(tp.topic):
            continue
        state = b.pstate(tp)
        if state is P.NewPartition and b.leadership(tp) is None:
            _initialize_partition(b, tp)
            continue
        s = b.leadership(tp)
        if s is None:
            continue
        leader_ok = s.leader != NO_LEADER and s.leader in ctx.eligible_ids
        if state is P.OnlinePartition and leader_ok:
            continue
        if state is P.OnlinePartition and s.leader in ctx.live_brokers:
            continue  # led by a broker in controlled shutdown: that path moves it
        unclean_ok = force_unclean or ctx.unclean_allowed(tp.topic)
        e = selectors.offline_leader(ctx.replicas(tp), s.isr, ctx.live_ids, ctx.shutting_down,
                                     unclean_ok)
        if e is None:
            b.outcome(tp, ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, _failed_election_message(
                tp, f"OfflinePartitionLeaderElectionStrategy({str(unclean_ok).lower()})"))
            continue
        unclean = e.unclean or e.leader not in s.isr
        new = _bumped(ctx, s, leader=e.leader, isr=e.isr,
                      recovery=LEADER_RECOVERING if unclean else None)
        b.write(tp, new, ElectionRecord(tp, s.leader, e.leader, new.leader_epoch, unclean,
                                        reason))
        b.partition(tp, P.OnlinePartition)
        b.lai_replicas(tp)
        b.um_all([tp])


def elect_offline_partitions(ctx: ControllerContext) -> Decision:
    """Elect leaders for every New or Offline partition that can now have one."""
    b = _Builder(ctx)
    _elect_offline(b, ctx.partition_sm.in_state(P.NewPartition, P.OfflinePartition))
    return b.build()


def reelect_after_refused_writes(ctx: ControllerContext,
                                 tps: Iterable[TopicPartition]) -> Decision:
    """Partitions whose state write was refused (someone else changed the znode; the
    controller has re-read it) and whose leader is now not eligible: decide their election
    again on the state ZooKeeper holds. Only adopting the re-read state left such a partition
    led by a dead broker - offline until some unrelated event (issue 15)."""
    b = _Builder(ctx)
    _elect_offline(b, [tp for tp in tps if tp in ctx.leadership
                       and ctx.leadership[tp].leader not in ctx.eligible_ids])
    return b.build()


# ============================================================================ failover

def on_controller_failover(ctx: ControllerContext) -> Decision:
    """After loading the cluster (ctx.reset_states() done): full metadata to every live broker,
    LeaderAndIsr for every partition to its live replicas (Kafka's replicaStateMachine.startup),
    elections for New/Offline partitions, deletions resumed."""
    b = _Builder(ctx)
    all_tps = list(ctx.all_partitions())
    b.um_brokers(ctx.live_brokers, all_tps)
    for tp in all_tps:
        # Kafka moves every live replica Online -> Online here to send LeaderAndIsr;
        # reset_states() already put them Online, so only the requests are needed.
        if not ctx.is_being_deleted(tp.topic) and tp in ctx.leadership:
            b.lai_replicas(tp)
    _elect_offline(b, ctx.partition_sm.in_state(P.NewPartition, P.OfflinePartition))
    _resume_deletion(b)
    return b.build()


# ============================================================================ new topics

def on_new_partitions(ctx: ControllerContext, tps: Iterable[TopicPartition]) -> Decision:
    """Kafka's onNewPartitionCreation: NonExistent -> New -> Online with the initial leader;
    replicas NonExistent -> New -> Online (Offline on a dead broker). The assignment must be in
    ctx already. A partition whose state znode exists already (a previous controller wrote it
    before failing) is adopted as it is, and elected for if it has no live leader."""
    b = _Builder(ctx)
    adopted = []
    for tp in tps:
        if b.pstate(tp) is P.NonExistentPartition:
            b.partition(tp, P.NewPartition)
            for r in ctx.replicas(tp):
                b.replica(PartitionReplica(tp, r), R.NewReplica)
        s = b.leadership(tp)
        if s is None:
            _initialize_partition(b, tp)
        elif b.pstate(tp) is P.NewPartition:
            online = s.leader != NO_LEADER and s.leader in ctx.live_brokers
            b.partition(tp, P.OnlinePartition if online else P.OfflinePartition)
            for r in ctx.replicas(tp):
                b.replica(PartitionReplica(tp, r),
                          R.OnlineReplica if r in ctx.live_brokers else R.OfflineReplica)
            b.lai_replicas(tp)
            b.um_all([tp])
            adopted.append(tp)
    _elect_offline(b, adopted)
    return b.build()


# ============================================================================ brokers

def on_brokers_failed(ctx: ControllerContext, dead: Collection[int]) -> Decision:
    """Kafka's onBrokerFailure / onReplicasBecomeOffline. `ctx` no longer lists `dead` as live.

    For each partition with a replica on a dead broker: if its leader died (or it had none),
    elect from the live ISR (unclean if the topic allows it) or write leader -1 with the ISR
    shrunk but never empty; else remove the dead brokers from the ISR. One write per
    partition, leader epoch + 1. LeaderAndIsr to its live replicas, UpdateMetadata to all."""
    dead = set(dead)
    b = _Builder(ctx)
    for tp in ctx.partitions_on_brokers(dead):
        replicas = ctx.replicas(tp)
        if b.pstate(tp) is P.NonExistentPartition:
            continue  # its creation never reached ZooKeeper: nothing to change
        if ctx.is_being_deleted(tp.topic):
            for r in replicas:
                if r in dead:
                    pr = PartitionReplica(tp, r)
                    if b.rstate(pr) in (R.ReplicaDeletionStarted, R.OfflineReplica) or b.replicas.add_if_valid(pr, R.OfflineReplica):
                        b.replica(pr, R.ReplicaDeletionIneligible)
            continue
        for r in replicas:
            if r in dead:
                b.replica(PartitionReplica(tp, r), R.OfflineReplica)
        s = b.leadership(tp)
        if s is None:
            continue  # NewPartition without a state znode: nothing to change
        leader_gone = s.leader == NO_LEADER or s.leader in dead or s.leader not in ctx.live_ids
        if leader_gone:
            unclean_ok = ctx.unclean_allowed(tp.topic)
            e = selectors.offline_leader(replicas, s.isr, ctx.live_ids, ctx.shutting_down,
                                         unclean_ok)
            if e is not None:
                unclean = e.unclean or e.leader not in s.isr
                new = _bumped(ctx, s, leader=e.leader, isr=e.isr,
                              recovery=LEADER_RECOVERING if unclean else None)
                b.write(tp, new, ElectionRecord(tp, s.leader, e.leader, new.leader_epoch,
                                                unclean, ElectionReason.OFFLINE))
                b.partition(tp, P.OnlinePartition)
            else:
                new_isr = shrink_isr(s.isr, dead, s.leader)
                if s.leader != NO_LEADER or new_isr != tuple(s.isr):
                    new = _bumped(ctx, s, leader=NO_LEADER, isr=new_isr)
                    b.write(tp, new, ElectionRecord(tp, s.leader, NO_LEADER, new.leader_epoch,
                                                    False, ElectionReason.OFFLINE)
                            if s.leader != NO_LEADER else None)
                if b.pstate(tp) is not P.OfflinePartition:
                    b.partition(tp, P.OfflinePartition)
                b.outcome(tp, ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, _failed_election_message(
                    tp, f"OfflinePartitionLeaderElectionStrategy({str(unclean_ok).lower()})"))
                if tp not in b.d.writes:
                    continue
        elif dead.intersection(s.isr):
            b.write(tp, _bumped(ctx, s, isr=shrink_isr(s.isr, dead, s.leader)))
        else:
            continue
        b.lai_replicas(tp)
        b.um_all([tp])
    # The live-broker list changed for everyone, even where no partition did.
    b.um_brokers(ctx.live_brokers)
    return b.build()


def on_brokers_started(ctx: ControllerContext, new: Collection[int]) -> Decision:
    """Kafka's onBrokerStartup. `ctx` lists `new` as live already.

    Full metadata to the new brokers, the new live-broker list to the others, LeaderAndIsr for
    every partition the new brokers host, elections for partitions they can now lead, and
    topic deletions resumed where they were waiting for these brokers."""
    new = set(new)
    b = _Builder(ctx)
    all_tps = list(ctx.all_partitions())
    b.um_brokers(new, all_tps)
    b.um_brokers(ctx.live_brokers)
    for pr in ctx.replicas_on_brokers(new):
        if ctx.is_being_deleted(pr.tp.topic) or b.rstate(pr) is R.NonExistentReplica:
            continue
        if b.rstate(pr) is R.NewReplica and b.leadership(pr.tp) is None:
            continue  # not yet initialized: _elect_offline below makes it Online
        b.replica(pr, R.OnlineReplica)
        if b.leadership(pr.tp) is not None:
            b.lai([pr.replica], pr.tp)
    _elect_offline(b, ctx.partition_sm.in_state(P.NewPartition, P.OfflinePartition))
    _resume_deletion(b)
    return b.build()


def controlled_shutdown(ctx: ControllerContext, broker_id: int) -> Decision:
    """Kafka's doControlledShutdown; `broker_id` is in ctx.shutting_down already.

    Partitions with more than one replica: where the broker leads, elect with the controlled
    shutdown selector (the broker becomes a follower and leaves the ISR); where it follows,
    StopReplica(delete=false) and remove it from the ISR. The partitions it still leads
    afterwards (`remaining_leaderships`) are the RPC's answer; the broker retries."""
    b = _Builder(ctx)
    for tp in ctx.partitions_on_brokers([broker_id]):
        replicas = ctx.replicas(tp)
        s = b.leadership(tp)
        if (len(replicas) <= 1 or s is None or ctx.is_being_deleted(tp.topic)
                or b.pstate(tp) is P.NonExistentPartition):
            continue
        if s.leader == broker_id:
            e = selectors.controlled_shutdown_leader(replicas, s.isr, ctx.live_ids,
                                                     ctx.shutting_down)
            if e is None:
                continue
            new = _bumped(ctx, s, leader=e.leader, isr=e.isr)
            b.write(tp, new, ElectionRecord(tp, s.leader, e.leader, new.leader_epoch, False,
                                            ElectionReason.CONTROLLED_SHUTDOWN))
            b.partition(tp, P.OnlinePartition)
            b.lai_replicas(tp)
            b.um_all([tp])
        else:
            b.stop(broker_id, tp, delete=False)
            b.replica(PartitionReplica(tp, broker_id), R.OfflineReplica)
            if broker_id in s.isr:
                new_isr = shrink_isr(s.isr, {broker_id}, s.leader)
                if new_isr != tuple(s.isr):
                    b.write(tp, _bumped(ctx, s, isr=new_isr))
                    b.lai_replicas(tp, exclude={broker_id})
                    b.um_all([tp])
    return b.build()


def remaining_leaderships(ctx: ControllerContext, broker_id: int) -> list[TopicPartition]:
    """What ControlledShutdown answers: partitions (with more than one replica) the broker
    still leads (Kafka's partitionLeadersOnBroker)."""
    return sorted(ctx.partitions_led_by(broker_id, min_replicas=2))


# ============================================================================ AlterPartition

@dataclass(frozen=True)
class AlterPartitionItem:
    tp: TopicPartition
    leader_epoch: int
    new_isr: tuple[tuple[int, int], ...]  # (broker, broker epoch or -1)
    partition_epoch: int
    leader_recovery_state: int = LEADER_RECOVERED
    topic_id: str = ""
    relinquish_leadership: bool = False


def alter_partition(ctx: ControllerContext, broker_id: int, broker_epoch: int,
                    items: Sequence[AlterPartitionItem], now_ms: float) -> Decision:
    """A leader's ISR change (KIP-497), recovery completion (KIP-704) or - seed 002 - its
    relinquishment of leadership.

    Whole request: StaleBrokerEpoch unless the sender is registered at `broker_epoch`.
    Per partition, in Kafka's order: UNKNOWN_TOPIC_OR_PARTITION (also while being deleted),
    UNKNOWN_TOPIC_ID; a leader or partition epoch *newer* than ours means we are not the
    controller any more (NOT_CONTROLLER); older leader epoch FENCED_LEADER_EPOCH; a sender that
    is not the leader NOT_LEADER_OR_FOLLOWER; a request equal to the current state succeeds
    without a write even at a stale partition epoch (idempotent retry); older partition epoch
    INVALID_UPDATE_VERSION; KIP-704 misuse and a malformed ISR INVALID_REQUEST; an ISR member
    that is not registered, at another broker epoch (KIP-903), or - when being added - in
    controlled shutdown: INELIGIBLE_REPLICA (KIP-841)."""
    current = ctx.broker_epoch(broker_id)
    if current is None:
        raise StaleBrokerEpoch(f"Broker {broker_id} is not registered")
    if current != broker_epoch:
        raise StaleBrokerEpoch(f"Broker epoch {broker_epoch} of broker {broker_id} is not its "
                               f"current registration's ({current})")
    b = _Builder(ctx)
    for item in items:
        _alter_one(b, broker_id, item, now_ms)
    return b.build()


def _alter_one(b: _Builder, broker_id: int, item: AlterPartitionItem, now_ms: float) -> None:
    ctx, tp = b.ctx, item.tp
    s = b.leadership(tp)
    if s is None or not ctx.has_partition(tp):
        return b.outcome(tp, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                         f"Partition {tp} does not exist")
    if ctx.is_being_deleted(tp.topic):
        return b.outcome(tp, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                         f"Topic {tp.topic} is being deleted")
    if item.topic_id and item.topic_id != ctx.topic_id(tp.topic):
        return b.outcome(tp, ErrorCode.UNKNOWN_TOPIC_ID,
                         f"Topic id {item.topic_id} is not the id of {tp.topic}")
    if item.leader_epoch > s.leader_epoch or item.partition_epoch > s.partition_epoch:
        return b.outcome(tp, ErrorCode.NOT_CONTROLLER,
                         f"Epochs of {tp} are newer than this controller's: it is stale")
    if item.leader_epoch < s.leader_epoch:
        return b.outcome(tp, ErrorCode.FENCED_LEADER_EPOCH,
                         f"Leader epoch {item.leader_epoch} of {tp} is older than the "
                         f"current {s.leader_epoch}")
    if s.leader != broker_id:
        return b.outcome(tp, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                         f"Broker {broker_id} is not the leader of {tp} (leader {s.leader})")
    new_isr = tuple(r for r, _ in item.new_isr)
    if (not item.relinquish_leadership and new_isr == tuple(s.isr)
            and item.leader_recovery_state == s.leader_recovery_state):
        return b.outcome(tp, ErrorCode.NONE)  # already so: idempotent retry
    if item.partition_epoch < s.partition_epoch:
        return b.outcome(tp, ErrorCode.INVALID_UPDATE_VERSION,
                         f"Partition epoch {item.partition_epoch} of {tp} is older than the "
                         f"current {s.partition_epoch}")
    if item.leader_recovery_state not in (LEADER_RECOVERED, LEADER_RECOVERING):
        return b.outcome(tp, ErrorCode.INVALID_REQUEST,
                         f"Unknown leader recovery state {item.leader_recovery_state}")
    if item.leader_recovery_state == LEADER_RECOVERING and len(new_isr) > 1:
        return b.outcome(tp, ErrorCode.INVALID_REQUEST,
                         "A RECOVERING leader must be alone in the ISR (KIP-704)")
    if (s.leader_recovery_state == LEADER_RECOVERED
            and item.leader_recovery_state == LEADER_RECOVERING):
        return b.outcome(tp, ErrorCode.INVALID_REQUEST,
                         "Leader recovery state cannot go from RECOVERED to RECOVERING")
    replicas = ctx.replicas(tp)
    if (not new_isr or len(set(new_isr)) != len(new_isr) or not set(new_isr) <= set(replicas)
            or broker_id not in new_isr):
        return b.outcome(tp, ErrorCode.INVALID_REQUEST,
                         f"Invalid ISR {list(new_isr)} for {tp} with replicas {replicas} and "
                         f"leader {broker_id}")
    ineligible = []
    for r, epoch in item.new_isr:
        current = ctx.broker_epoch(r)
        if current is None:
            ineligible.append(f"{r} (not registered)")
        elif epoch != -1 and epoch != current:
            ineligible.append(f"{r} (broker epoch {epoch} is not {current})")
        elif r in ctx.shutting_down and r not in s.isr:
            ineligible.append(f"{r} (in controlled shutdown)")
    if ineligible:
        return b.outcome(tp, ErrorCode.INELIGIBLE_REPLICA,
                         f"Ineligible replicas in the new ISR of {tp}: {', '.join(ineligible)}")
    if item.relinquish_leadership:
        e = selectors.relinquished_leader(new_isr, broker_id, ctx.live_ids, ctx.shutting_down)
        if e is None:
            return b.outcome(tp, ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                             f"No other eligible ISR member of {tp} to take over from "
                             f"{broker_id}")
        new = _bumped(ctx, s, leader=e.leader, isr=e.isr,
                      recovery=item.leader_recovery_state)
        b.write(tp, new, ElectionRecord(tp, broker_id, e.leader, new.leader_epoch, False,
                                        ElectionReason.RELINQUISHED))
        b.partition(tp, P.OnlinePartition)
        b.d.relinquished[tp] = (broker_id, now_ms + ctx.relinquish_cooldown_ms)
        b.lai_replicas(tp)
        b.um_all([tp])
        return b.outcome(tp, ErrorCode.NEW_LEADER_ELECTED)
    b.write(tp, _bumped(ctx, s, isr=new_isr, bump_leader_epoch=False,
                        recovery=item.leader_recovery_state))
    b.um_all([tp])
    b.outcome(tp, ErrorCode.NONE)


# ============================================================================ ElectLeaders

def elect_leaders(ctx: ControllerContext, election_type: int,
                  tps: Iterable[TopicPartition] | None, now_ms: float) -> Decision:
    """ElectLeaders (KIP-460). `tps` None = every partition. Per-partition outcomes:
    PREFERRED - NONE, ELECTION_NOT_NEEDED (the preferred replica leads already),
    PREFERRED_LEADER_NOT_AVAILABLE (it is dead, shutting down, out of the ISR, or in seed 002's
    relinquish cool-down); UNCLEAN - NONE, ELECTION_NOT_NEEDED (a live leader exists),
    ELIGIBLE_LEADERS_NOT_AVAILABLE (no live replica at all). UNKNOWN_TOPIC_OR_PARTITION for
    partitions that do not exist or are being deleted."""
    b = _Builder(ctx)
    targets = list(ctx.all_partitions()) if tps is None else list(dict.fromkeys(tps))
    for tp in targets:
        s = b.leadership(tp)
        if not ctx.has_partition(tp) or ctx.is_being_deleted(tp.topic):
            b.outcome(tp, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                      f"The partition {tp} does not exist.")
            continue
        if s is None:
            b.outcome(tp, ErrorCode.LEADER_NOT_AVAILABLE, f"Partition {tp} is being created.")
            continue
        replicas = ctx.replicas(tp)
        if election_type == ELECTION_PREFERRED:
            _elect_preferred(b, tp, s, replicas, now_ms)
        elif election_type == ELECTION_UNCLEAN:
            if s.leader != NO_LEADER and s.leader in ctx.live_brokers:
                b.outcome(tp, ErrorCode.ELECTION_NOT_NEEDED,
                          f"Partition {tp} already has a live leader {s.leader}.")
                continue
            _elect_offline(b, [tp], force_unclean=True)
            if tp in b.d.writes:
                b.outcome(tp, ErrorCode.NONE)
        else:
            b.outcome(tp, ErrorCode.INVALID_REQUEST, f"Unknown election type {election_type}")
    return b.build()


def _elect_preferred(b: _Builder, tp: TopicPartition, s: LeaderAndIsr, replicas: list[int],
                     now_ms: float) -> None:
    ctx = b.ctx
    if replicas and s.leader == replicas[0]:
        b.outcome(tp, ErrorCode.ELECTION_NOT_NEEDED,
                  f"Preferred replica {replicas[0]} is already the leader of {tp}.")
        return
    excluded = ctx.relinquish_excluded(tp, now_ms)
    e = selectors.preferred_leader(replicas, s.isr, ctx.live_ids, ctx.shutting_down, excluded)
    if e is None:
        why = (f" (broker {replicas[0]} relinquished its leadership recently, seed 002)"
               if replicas and replicas[0] in excluded else "")
        b.outcome(tp, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, _failed_election_message(
            tp, "PreferredReplicaPartitionLeaderElectionStrategy") + why)
        return
    new = _bumped(ctx, s, leader=e.leader, isr=e.isr)
    b.write(tp, new, ElectionRecord(tp, s.leader, e.leader, new.leader_epoch, False,
                                    ElectionReason.PREFERRED))
    b.partition(tp, P.OnlinePartition)
    b.lai_replicas(tp)
    b.um_all([tp])
    b.outcome(tp, ErrorCode.NONE)


def imbalanced_partitions(ctx: ControllerContext, imbalance_percentage: int,
                          now_ms: float) -> list[TopicPartition]:
    """Kafka's checkAndTriggerAutoLeaderRebalance: for every broker whose share of partitions
    it should lead but does not exceeds `imbalance_percentage`%, the partitions whose preferred
    replica can lead now (live, not shutting down, in the ISR, not in a relinquish cool-down)."""
    by_preferred: dict[int, list[TopicPartition]] = {}
    for tp in ctx.all_partitions():
        if ctx.is_being_deleted(tp.topic) or tp not in ctx.leadership:
            continue
        replicas = ctx.replicas(tp)
        if replicas:
            by_preferred.setdefault(replicas[0], []).append(tp)
    out: list[TopicPartition] = []
    for broker, tps in sorted(by_preferred.items()):
        not_led = [tp for tp in tps if ctx.leadership[tp].leader != broker]
        if not tps or len(not_led) / len(tps) <= imbalance_percentage / 100:
            continue
        for tp in not_led:
            s = ctx.leadership[tp]
            if selectors.preferred_leader(ctx.replicas(tp), s.isr, ctx.live_ids,
                                          ctx.shutting_down,
                                          ctx.relinquish_excluded(tp, now_ms)) is not None:
                out.append(tp)
    return out


# ============================================================================ topic deletion

def start_topic_deletion(ctx: ControllerContext, topics: Iterable[str]) -> Decision:
    """Kafka's TopicDeletionManager.onTopicDeletion; the topics are in ctx.topics_to_delete.
    UpdateMetadata (leader -2, LeaderDuringDelete) to every broker; partitions -> Offline;
    replicas on live brokers -> Offline -> DeletionStarted with StopReplica(delete=true);
    replicas on dead brokers -> DeletionIneligible (retried when the broker returns)."""
    b = _Builder(ctx)
    for topic in topics:
        tps = ctx.partitions_of(topic)
        b.um_all(tps)
        for tp in tps:
            if b.pstate(tp) is not P.OfflinePartition and b.pstate(tp) is not \
                    P.NonExistentPartition:
                b.partition(tp, P.OfflinePartition)
            for r in ctx.replicas(tp):
                _start_replica_deletion(b, PartitionReplica(tp, r))
    _collect_deletable(b, topics)
    return b.build()


def _start_replica_deletion(b: _Builder, pr: PartitionReplica) -> None:
    state = b.rstate(pr)
    if state in (R.ReplicaDeletionStarted, R.ReplicaDeletionSuccessful, R.NonExistentReplica):
        return
    if state is not R.OfflineReplica:
        b.replica(pr, R.OfflineReplica)
    if pr.replica in b.ctx.live_brokers:
        b.replica(pr, R.ReplicaDeletionStarted)
        b.stop(pr.replica, pr.tp, delete=True)
    else:
        b.replica(pr, R.ReplicaDeletionIneligible)


def _resume_deletion(b: _Builder) -> None:
    """Retry deletion of replicas that were ineligible (their broker was down)."""
    ctx = b.ctx
    for topic in sorted(ctx.topics_to_delete):
        for tp in ctx.partitions_of(topic):
            if b.pstate(tp) not in (P.OfflinePartition, P.NonExistentPartition):
                b.partition(tp, P.OfflinePartition)
            for r in ctx.replicas(tp):
                pr = PartitionReplica(tp, r)
                if b.rstate(pr) is R.ReplicaDeletionIneligible and r in ctx.live_brokers:
                    b.replica(pr, R.OfflineReplica)
                    b.replica(pr, R.ReplicaDeletionStarted)
                    b.stop(r, tp, delete=True)


def resume_topic_deletion(ctx: ControllerContext) -> Decision:
    b = _Builder(ctx)
    _resume_deletion(b)
    _collect_deletable(b, ctx.topics_to_delete)
    return b.build()


def on_stop_replica_response(ctx: ControllerContext, broker_id: int,
                             errors: dict[TopicPartition, ErrorCode]) -> Decision:
    """A broker answered StopReplica(delete=true): DeletionStarted -> Successful, or
    Ineligible on error (retried on the broker's next startup or the next deletion request)."""
    b = _Builder(ctx)
    topics = set()
    for tp, error in errors.items():
        pr = PartitionReplica(tp, broker_id)
        if not ctx.is_being_deleted(tp.topic) or b.rstate(pr) is not R.ReplicaDeletionStarted:
            continue
        b.replica(pr, R.ReplicaDeletionSuccessful if error == ErrorCode.NONE
                  else R.ReplicaDeletionIneligible)
        topics.add(tp.topic)
    _collect_deletable(b, topics)
    return b.build()


def _collect_deletable(b: _Builder, topics: Iterable[str]) -> None:
    for topic in topics:
        tps = b.ctx.partitions_of(topic)
        if all(b.rstate(PartitionReplica(tp, r)) is R.ReplicaDeletionSuccessful
               for tp in tps for r in b.ctx.replicas(tp)):
            b.d.deletable_topics.add(topic)


def finish_topic_deletion(ctx: ControllerContext, topic: str) -> Decision:
    """After the topic's znodes are removed: replicas -> NonExistent, partitions ->
    NonExistent. The shell then forgets the topic (ctx.remove_topic)."""
    b = _Builder(ctx)
    for tp in ctx.partitions_of(topic):
        for r in ctx.replicas(tp):
            pr = PartitionReplica(tp, r)
            if b.rstate(pr) is R.ReplicaDeletionSuccessful:
                b.replica(pr, R.NonExistentReplica)
        if b.pstate(tp) is P.OfflinePartition:
            b.partition(tp, P.NonExistentPartition)
    return b.build()
