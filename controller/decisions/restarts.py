"""Restarted partitions (design.md#jbod "Partitions Restart"): a broker lost its replicas with a
log dir and asked, through /restart_partitions, for them to be restarted.

design.md#jbod: the controller "acts as if broker went shutdown but only for specific partitions",
with the RestartedPartitionsLeaderSelector (`selectors.restarted_leader`):

- b led p: new ISR = ISR - b, new leader = the first of AR in the new ISR;
- b followed: new ISR = ISR - b, the leader stays;
- AR is unchanged, so b keeps its replica, and the LeaderAndIsr that follows tells b to
  re-create it (`is_new`, the broker puts it in its healthy log dir with the fewest
  partitions) and to fetch it from the leader from the log start; b rejoins the ISR by the
  normal AlterPartition rules.

Choices where the seed is silent or would be wrong here:

- An empty new ISR (b was the only in-sync replica) is handled like an offline election:
  another live replica leads only if unclean election is allowed; otherwise the partition is
  offline with leader -1. Unlike a dead broker (Kafka's removeReplicasFromIsr keeps the last
  ISR member, whose log will come back with it), b is removed even when it is the last one:
  its log is gone, and an ISR naming it would let the re-created, empty replica be elected
  cleanly - losing every record. The ISR may therefore be empty, as KIP-966 allows.
- With ELR on (design.md#kip-966), a restart that needs a new leader runs design.md#kip-966's
  election order without b (`selectors.elr_leader`): another ISR member, else an unfenced ELR member
  (cleanly), else the Unclean Recovery Manager or a wait as the topic's strategy says - never
  the blind unclean pick. b leaves the ISR, the ELR and the LastKnownELR (its log is gone).
- The seed filters out partitions "being deleted, reassigned etc". Deleted ones are skipped
  (their replicas are going anyway). Partitions being reassigned are restarted too: the
  selector leaves AR, adding and removing replicas alone, and without the restart a
  reassignment whose leader lost its log could never finish (its followers cannot fetch, so
  step 3 never sees the target in the ISR). A partition that no longer names b (a move removed
  it since the report) has nothing to restart.
- Processing is at least once (a controller can die between the state write and deleting the
  entry), so it is idempotent: once b is out of the ISR and does not lead, processing the same
  entry again changes no leader, ISR or ELR (only the epochs move on, below) and repeats the
  LeaderAndIsr that lets b re-create its replica - a request the broker answers the same way
  twice.
- Idempotence ends once the re-created replica has caught up and rejoined the ISR: a late
  duplicate (the notifier's retry after a write that timed out but landed, a second refused
  LeaderAndIsr) would then take a complete replica for an empty one - a sole ISR member goes
  leaderless, an ELR member loses its claim. Entries are therefore fenced
  by the partition epoch b held when it lost the replica (`RestartEntry.partition_epochs`):
  `stale_restart` ignores an entry older than b's last re-admission to the ISR, as Kafka's
  controller refuses a request quoting an epoch older than the state it would change
  (KIP-497's partition epoch). Applying at the same epoch, or at a later one that did not
  re-add b, is still right: b may have stayed in the ISR through other changes (a follower
  hears only of its own LeaderAndIsr, so its epoch often lags), and its log is gone.
  What counts as a re-admission is an AlterPartition expansion - the leader vouching that b
  caught up - recorded by the core as it applies one (`IsrRejoins`); an election that puts b
  back in the ISR (ELR, unclean) vouches for nothing. And only an expansion after this
  controller applied a restart of b's replica vouches for the re-created one: an expansion
  the leader proposed from fetches of the old replica, still in flight when b lost it, lands
  after the loss too (ignoring the entry then would leave b in the ISR with no data). So the
  fence needs the loss, then a restart applied, then a re-admission: `entry_epoch <
  restarted_at < rejoined_at` (tests/controller/test_restart_fence.py::
  test_stale_restart_agrees_with_the_rule_over_every_history_of_up_to_five_changes).
- A restart writes the state even when b neither leads nor is in the ISR (new leader and
  partition epochs, nothing else changes): an AlterPartition the leader proposed from the
  lost replica's fetches, in flight meanwhile, carries the older epoch and is refused
  (KIP-497's partition epoch), and a fetch the lost replica sent before the loss is fenced by
  the leader epoch, instead of putting b back in the ISR just before b re-creates its replica
  empty, also where b's view lagged (the partition had moved past the epoch b lost the
  replica in, through a change b had not heard of, before the expansion was proposed): the
  golden script tests/controller/testdata/restart_fence.txt, run by
  tests/controller/test_scenarios.py::test_scenario. So an entry applied again (a failover
  between its writes and its deletion) moves the epochs on once more; leader, ISR and ELR end
  the same. The record lives in the controller's memory: a new controller has none and
  applies every entry (unfenced: availability may suffer, durability cannot). An ignored
  entry still sends b the current state, without is_new: if b really has no replica (its
  epoch lagged behind the rejoin), it refuses, and its new entry carries the current epoch,
  which no rejoin can fence.
"""

from __future__ import annotations

from collections.abc import Iterable

from common.errors import ErrorCode
from common.names import TopicPartition
from common.zk_layout import LEADER_RECOVERING, NO_LEADER, LeaderAndIsr, RestartEntry
from controller import selectors
from controller.context import ControllerContext, PartitionReplica
from controller.decisions.base import (
    Builder,
    Decision,
    ElectionRecord,
    P,
    R,
    failed_election_message,
    next_state,
)
from controller.decisions.elections import no_elr_leader
from controller.selectors import ElectionReason


def stale_restart(entry_epoch: int, rejoined_at: int | None, current_epoch: int,
                  restarted_at: int | None = None) -> bool:
    """Whether a restart entry for one replica is a late duplicate to ignore: the broker lost
    the replica at partition epoch `entry_epoch` (-1: an entry from before the fence), this
    controller applied a restart of that replica at `restarted_at` (None: not since it
    started), an AlterPartition re-admitted it to the ISR at `rejoined_at` (None: not since
    this controller started), `current_epoch` being the partition's epoch now.

    Stale only if the restart was applied after the loss, the re-admission came after that
    restart (then the replica in the ISR is the re-created one, caught up) and it belongs to
    the current history (a record newer than the state is not trusted). Everything else
    applies: durability first - a wrong application only makes the replica catch up again."""
    if entry_epoch < 0 or rejoined_at is None or restarted_at is None:
        return False
    return entry_epoch < restarted_at < rejoined_at <= current_epoch


class IsrRejoins:
    """Where each replica was last re-admitted to an ISR by AlterPartition, and where a restart
    of it was last applied: (partition, broker) -> (topic id, partition epoch of the write).
    The topic id keeps a record from fencing a re-created topic of the same name, whose
    epochs start again at 0."""

    def __init__(self) -> None:
        self._at: dict[tuple[TopicPartition, int], tuple[str, int]] = {}
        self._restarted: dict[tuple[TopicPartition, int], tuple[str, int]] = {}

    def observe(self, ctx: ControllerContext, d: Decision, failed: Iterable[TopicPartition]
                ) -> None:
        """After `d` (an AlterPartition decision) was applied; `failed`: refused writes."""
        failed = set(failed)
        for w in d.isr_changes():
            if w.tp in failed:
                continue
            assert w.old is not None  # isr_changes() holds changes of existing states
            for r in set(w.new.isr) - set(w.old.isr):
                self._at[(w.tp, r)] = (ctx.topic_id(w.tp.topic), w.new.partition_epoch)

    def restarted(self, ctx: ControllerContext, broker: int,
                  partitions: Iterable[TopicPartition]) -> None:
        """After a restart of `broker`'s replicas of `partitions` was applied (written, or
        with nothing to write; its LeaderAndIsr with is_new sent): at their epochs now."""
        for tp in partitions:
            s = ctx.leadership.get(tp)
            if s is not None:
                self._restarted[(tp, broker)] = (ctx.topic_id(tp.topic), s.partition_epoch)

    def rejoined_at(self, ctx: ControllerContext, tp: TopicPartition, broker: int) -> int | None:
        got = self._at.get((tp, broker))
        return got[1] if got is not None and got[0] == ctx.topic_id(tp.topic) else None

    def restarted_at(self, ctx: ControllerContext, tp: TopicPartition, broker: int
                     ) -> int | None:
        got = self._restarted.get((tp, broker))
        return got[1] if got is not None and got[0] == ctx.topic_id(tp.topic) else None


def stale_restarts(ctx: ControllerContext, rejoins: IsrRejoins, entry: RestartEntry
                   ) -> dict[TopicPartition, str]:
    """The partitions of `entry` that `stale_restart` ignores, with why."""
    out = {}
    for t, p in entry.partitions:
        tp, lost_at = TopicPartition(t, p), entry.partition_epoch(t, p)
        s = ctx.leadership.get(tp)
        rejoined = rejoins.rejoined_at(ctx, tp, entry.broker)
        restarted = rejoins.restarted_at(ctx, tp, entry.broker)
        if s is not None and stale_restart(lost_at, rejoined, s.partition_epoch, restarted):
            out[tp] = (f"stale: lost at partition epoch {lost_at}, restarted at {restarted}, "
                       f"back in the ISR at {rejoined}")
    return out


def restartable(ctx: ControllerContext, broker: int, tp: TopicPartition) -> str | None:
    """Why `tp` on `broker` is not restarted (None: it is)."""
    if not ctx.has_partition(tp):
        return "no such partition"
    if ctx.is_being_deleted(tp.topic):
        return "topic being deleted"
    if broker not in ctx.replicas(tp):
        return "no longer a replica"
    if tp not in ctx.leadership:
        return "no partition state yet"
    return None


def restart_partitions(ctx: ControllerContext, broker: int,
                       partitions: Iterable[TopicPartition],
                       stale: Iterable[TopicPartition] = ()) -> Decision:
    """The decision for one /restart_partitions entry: broker `broker` lost its replicas of
    `partitions`. Partitions `restartable` names a reason for are left out. `stale` ones
    (`stale_restarts`) change nothing: `broker` is only sent their current state, not new,
    which it refuses - reporting again at the current epoch - if it has no replica after all."""
    b = Builder(ctx)
    # KIP-966: the lost replica comes back empty, so it must not join an ELR as it leaves the
    # ISR (an ELR member is elected cleanly), nor the LastKnownELR a recovery waits for.
    b.lost_logs.add(broker)
    stale = set(stale)
    for tp in sorted(set(partitions)):
        if restartable(ctx, broker, tp) is not None:
            continue
        if tp in stale:
            b.lai([broker], tp)
        else:
            _restart_one(b, broker, tp)
    return b.build()


def _restart_one(b: Builder, broker: int, tp: TopicPartition) -> None:
    ctx = b.ctx
    s = b.leadership(tp)
    assert s is not None  # restartable() let only partitions with a state through
    pr = PartitionReplica(tp, broker)
    # The replica was lost and comes back empty: Offline, then Online again once b is told to
    # re-create it (b dead meanwhile: it stays Offline, as for any dead broker).
    if b.rstate(pr) is not R.OfflineReplica:
        b.replica(pr, R.OfflineReplica)
    if broker in ctx.live_brokers:
        b.replica(pr, R.OnlineReplica)
    if ctx.elr.enabled and (s.leader == broker or broker in s.isr or broker in s.elr
                            or broker in s.last_known_elr):
        _restart_with_elr(b, broker, tp, s)
    elif s.leader == broker or broker in s.isr:
        e = selectors.restarted_leader(ctx.replicas(tp), s.isr, s.leader, broker, ctx.live_ids,
                                       ctx.shutting_down, ctx.unclean_allowed(tp.topic))
        new_isr = tuple(r for r in s.isr if r != broker)
        if e is None:
            # Nobody may lead (the offline election's rule): leader -1 if b led; a follower's
            # loss leaves a leader that was not eligible anyway to the broker-failure path.
            leader = NO_LEADER if s.leader == broker else s.leader
            new = next_state(ctx, s, leader=leader, isr=new_isr)
            if leader != s.leader:
                b.write(tp, new, ElectionRecord(tp, s.leader, NO_LEADER, new.leader_epoch,
                                                False, ElectionReason.RESTARTED))
                b.partition(tp, P.OfflinePartition)
                b.outcome(tp, ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, failed_election_message(
                    tp, "RestartedPartitionLeaderElectionStrategy"))
            else:
                b.write(tp, new)
        elif e.leader != s.leader:
            unclean = e.unclean or e.leader not in new_isr
            b.elect(tp, s, e.leader, e.isr, ElectionReason.RESTARTED, unclean=unclean,
                    recovery=LEADER_RECOVERING if unclean else None)
        else:
            b.write(tp, next_state(ctx, s, isr=e.isr))
        b.lai_replicas(tp)
        b.um_all([tp])
    else:
        _bump(b, tp, s)
    _recreate(b, broker, tp)


def _bump(b: Builder, tp: TopicPartition, s: LeaderAndIsr) -> None:
    """b neither leads nor is in the ISR (or ELR): nothing to take away, but the partition
    epoch moves on, fencing an expansion of b proposed from its lost replica's fetches."""
    b.write(tp, next_state(b.ctx, s))
    b.lai_replicas(tp)
    b.um_all([tp])


def _restart_with_elr(b: Builder, broker: int, tp: TopicPartition, s: LeaderAndIsr) -> None:
    """KIP-966 on: b leaves the ISR and the ELR; if the leader must change, design.md#kip-966's
    order picks the next one from what is left (the restarted replica is no candidate)."""
    ctx = b.ctx
    new_isr = tuple(r for r in s.isr if r != broker)
    live = [x for x in ctx.live_ids if x != broker]
    if s.leader != broker and s.leader in new_isr and s.leader in live \
            and s.leader not in ctx.shutting_down:
        b.write(tp, next_state(ctx, s, isr=new_isr))  # a follower's loss: the leader stays
    else:
        strategy = ctx.recovery_strategy(tp.topic)
        r = selectors.elr_leader([x for x in ctx.replicas(tp) if x != broker], new_isr,
                                 [x for x in s.elr if x != broker],
                                 [x for x in s.last_known_elr if x != broker], live,
                                 ctx.shutting_down, strategy)
        if isinstance(r, selectors.LeaderChosen):
            b.elect(tp, s, r.election.leader, r.election.isr, ElectionReason.RESTARTED)
        else:
            new = next_state(ctx, s, leader=NO_LEADER, isr=new_isr,
                             bump_leader_epoch=s.leader != NO_LEADER)
            if s.leader != NO_LEADER:
                b.write(tp, new, ElectionRecord(tp, s.leader, NO_LEADER, new.leader_epoch,
                                                False, ElectionReason.RESTARTED))
            else:
                b.write(tp, new)
            b.partition(tp, P.OfflinePartition)
            no_elr_leader(b, tp, r, strategy)
    b.lai_replicas(tp)
    b.um_all([tp])


def _recreate(b: Builder, broker: int, tp: TopicPartition) -> None:
    # Re-create the replica (KIP-112's isNew: a replica not new is never created while a log
    # dir is offline, since its log may be in that dir).
    b.lai([broker], tp, is_new=True)
