"""A deterministic simulation of the controller (TigerBeetle's VOPR, FoundationDB's simulator):
pure controller cores over the in-memory store, with one seed choosing every step.

    python -m tests.sim --seed N [--steps M]        replay one seed
    python -m tests.sim --seeds 0-9999 [--steps M]  sweep

Each step is one of: a broker dies or (re)registers, a broker asks for a controlled shutdown, a
leader shrinks or expands its ISR (AlterPartition, sometimes with stale epochs: a lost or
delayed message), an operator asks for a preferred or unclean election, a topic is created or
deleted, brokers answer StopReplica (or the answer is lost), the rebalance timer fires, a
topic's unclean election is switched on, a state write is refused, the controller is deposed,
or it crashes after a chosen number of effects and a new one takes over from the store; an
operator reassigns a partition (AlterPartitionReassignments, or a tool writing
/admin/reassign_partitions) or cancels a move - and ISR changes let moves complete; a broker
loses replicas with a log dir and writes a /restart_partitions entry (design.md#jbod), fenced by the
partition epoch it held, or an entry is written again late (the notifier's retry).

After every step the invariants are checked:
    - at most one leader per partition and leader epoch (over every state ever written);
    - the ISR stays within the replicas and is empty only without a leader (a restarted
      partition whose only in-sync replica lost its log);
    - the leader epoch never goes down;
    - no election outside the rules: a new leader is a registered broker, from the ISR
      unless the election was unclean - allowed by the topic, or asked for - and then
      RECOVERING (KIP-704);
    - what the core believes equals the store (what a reload would read), assignments
      included;
    - no state transition is ever refused by the tables (design.md#reassignment: refusals are logged
      and counted in production, and here fail the run);
    - a move in flight keeps AR and RR within RS and apart, and every /admin/reassign_partitions
      entry is a move in flight with that target (finished ones are cleared);
    - once a /restart_partitions entry is consumed, the broker that lost a replica is out of
      its ISR - until AlterPartition adds it back (it re-created and caught up) - and leads
      only through a later election;
    - a late duplicate of a restart entry leaves a broker that AlterPartition re-admitted
      after the loss in its ISR or ELR, when the core that saw the
      re-admission handles it.

A failing seed prints its number and the step; rerunning it replays the same run. The
planted-bug self-test (tests/sim/planted_selectors.py, a monkeypatch of controller.selectors)
proves the checker catches a selector that elects outside the ISR.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from common.errors import ErrorCode
from common.names import TopicPartition
from common.zk_layout import (
    LEADER_RECOVERING,
    NO_LEADER,
    LeaderAndIsr,
    RestartEntry,
    decode_reassignment,
    encode_reassignment,
    encode_restart_entry,
)
from controller import decisions as D
from controller import effects as X
from controller import events as E
from controller.store import WatchedEvent
from tests.sim.driver import Crashed, Driver

BROKERS = (1, 2, 3, 4)


class InvariantViolation(AssertionError):
    pass


@dataclass
class History:
    """Every partition state the store has held, to check epochs across steps."""

    leader_of_epoch: dict[tuple[TopicPartition, int], int] = field(default_factory=dict)
    last: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)


class Simulation:
    def __init__(self, seed: int, steps: int = 30):
        self.seed = seed
        self.steps = steps
        self.rng = random.Random(seed)
        self.d = Driver(rng=random.Random(seed ^ 0x5EED))
        self.h = History()
        self.forced_unclean: set[TopicPartition] = set()
        self.acked = 0
        self.topic_no = 0
        self.log: list[str] = []
        self.refused: list[str] = []
        # (partition, broker) replicas lost with a log dir -> out of the ISR since the loss?
        self.lost: dict[tuple[TopicPartition, int], bool] = {}
        # the restart fence: every restart entry written (data, broker, partitions, epochs),
        # for late duplicates; (partition, broker) -> (partition epoch, core) of its last
        # re-admission by AlterPartition; what a duplicate must leave alone, checked after it
        self.restart_log: list[tuple[bytes, int, tuple[TopicPartition, ...], tuple[int, ...]]] \
            = []
        self.readmitted: dict[tuple[TopicPartition, int], tuple[int, object]] = {}
        # (partition, broker) -> (partition epoch, core): where a core applied a restart
        self.restarted: dict[tuple[TopicPartition, int], tuple[int, object]] = {}
        self.fenced: tuple[int, set[TopicPartition], object] | None = None
        self.step, self.action = -1, "setup"
        self.d.on_effect = self._on_effect

    # ------------------------------------------------------------------ running

    def run(self) -> None:
        d = self.d
        d.elect()
        for b in BROKERS:
            d.register(b)
        self._settle()
        self._create_topic()
        self._create_topic()
        for i in range(self.steps):
            action = self._pick()
            self.step, self.action = i, action.__name__
            self.log.append(action.__name__)
            self.forced_unclean.clear()
            try:
                action()
                self._settle()
            except Crashed:
                self._failover()
            self._check(i, action.__name__)

    def _settle(self) -> None:
        try:
            self.d.run()
        except Crashed:
            self._failover()

    def _failover(self) -> None:
        d = self.d
        if d.core is not None:
            d.crash()
        d.elect()
        d.run()

    def _pick(self):
        actions = [
            (self._kill, 3), (self._start, 3), (self._bounce, 1), (self._shutdown, 2),
            (self._alter, 4), (self._elect_preferred, 1), (self._elect_unclean, 1),
            (self._create_topic, 1), (self._delete_topic, 1), (self._ack_stop_replicas, 2),
            (self._rebalance, 1), (self._enable_unclean, 1), (self._refuse_write, 1),
            (self._depose, 1), (self._crash_soon, 2), (self._reassign, 2),
            (self._cancel, 1), (self._restart, 2), (self._duplicate_restart, 1),
        ]
        total = sum(w for _, w in actions)
        x = self.rng.uniform(0, total)
        for a, w in actions:
            x -= w
            if x <= 0:
                return a
        return actions[-1][0]

    # ------------------------------------------------------------------ actions

    def _live(self) -> list[int]:
        return sorted(self.d.broker_sessions)

    def _kill(self) -> None:
        live = self._live()
        if len(live) > 1:
            self.d.kill(self.rng.choice(live))

    def _start(self) -> None:
        dead = [b for b in BROKERS if b not in self.d.broker_sessions]
        if dead:
            self.d.register(self.rng.choice(dead))

    def _bounce(self) -> None:
        live = self._live()
        if live:
            b = self.rng.choice(live)
            self.d.kill(b)
            self.d.register(b)

    def _shutdown(self) -> None:
        live = self._live()
        if live:
            self.d.request(E.ControlledShutdown(broker_id=self.rng.choice(live)))

    def _partitions(self) -> list[TopicPartition]:
        return sorted(self.d.core.ctx.leadership) if self.d.core else []

    def _alter(self) -> None:
        """The leader changes its ISR; sometimes with an old epoch (a delayed message)."""
        ctx = self.d.core.ctx
        tps = self._partitions()
        if not tps:
            return
        tp = self.rng.choice(tps)
        s = ctx.leadership[tp]
        if s.leader == NO_LEADER:
            return
        replicas = ctx.replicas(tp)
        isr = [r for r in replicas if r == s.leader or self.rng.random() < 0.6]
        stale = self.rng.random() < 0.2
        self.d.request(E.AlterPartition(
            broker_id=s.leader, broker_epoch=ctx.broker_epoch(s.leader) or -1,
            items=(D.AlterPartitionItem(
                tp, s.leader_epoch - (1 if stale else 0),
                tuple((r, ctx.broker_epoch(r) or -1) for r in isr),
                s.partition_epoch - (1 if stale and self.rng.random() < 0.5 else 0),
                s.leader_recovery_state if self.rng.random() < 0.7 else 0),)))

    def _elect_preferred(self) -> None:
        self.d.request(E.ElectLeaders(election_type=D.ElectionType.PREFERRED))

    def _elect_unclean(self) -> None:
        tps = self._partitions()
        if tps:
            tp = self.rng.choice(tps)
            self.forced_unclean.add(tp)
            self.d.request(E.ElectLeaders(election_type=D.ElectionType.UNCLEAN,
                                          partitions=(tp,)))

    def _create_topic(self) -> None:
        self.topic_no += 1
        rf = self.rng.randint(1, 3)
        parts = self.rng.randint(1, 3)
        self.d.request(E.CreateTopics(topics=(
            E.NewTopic(f"t{self.topic_no}", num_partitions=parts, replication_factor=rf),)))

    def _delete_topic(self) -> None:
        if self.d.core and self.d.core.ctx.assignments:
            t = self.rng.choice(sorted(self.d.core.ctx.assignments))
            self.d.request(E.DeleteTopics(topics=(t,)))

    def _ack_stop_replicas(self) -> None:
        d = self.d
        for _i, broker, errors in d.stop_replica_answers(self.acked):
            if self.rng.random() < 0.2:  # a lost answer
                continue
            if self.rng.random() < 0.1:  # the deletion failed on the broker
                errors = dict.fromkeys(errors, ErrorCode.KAFKA_STORAGE_ERROR)
            d.post(E.StopReplicaResponse(broker_id=broker, errors=errors))
        self.acked = len(d.sent)

    def _rebalance(self) -> None:
        self.d.now_ms += 400_000
        self.d.post(E.TimerFired(name="auto_rebalance"))

    def _enable_unclean(self) -> None:
        if self.d.core and self.d.core.ctx.assignments:
            t = self.rng.choice(sorted(self.d.core.ctx.assignments))
            self.d.tree.configs.setdefault(t, {})["unclean.leader.election.enable"] = "true"
            self.d.tree.fire(("config", t), WatchedEvent("CHANGED", t))

    def _refuse_write(self) -> None:
        tps = self._partitions()
        if tps:
            self.d.refuse_next_write(self.rng.sample(tps, min(len(tps), 2)))
        self._kill()

    def _depose(self) -> None:
        self.d.depose()
        self._kill()  # something for the deposed controller to try to write

    def _crash_soon(self) -> None:
        self.d.crash_after(self.rng.randint(0, 12))
        self.rng.choice([self._kill, self._start, self._shutdown, self._delete_topic,
                         self._alter, self._reassign])()

    def _reassign(self) -> None:
        """An operator moves a partition: usually to live brokers, sometimes naming a dead
        one or the replicas it has (rejected whole); by RPC or through the admin path."""
        tps = self._partitions()
        if not tps:
            return
        tp = self.rng.choice(tps)
        target = tuple(self.rng.sample(BROKERS, self.rng.randint(1, 3)))
        if self.rng.random() < 0.5 or self.d.tree.reassign_partitions is not None:
            self.d.request(E.AlterReassignments(items=((tp, target),)))
        else:
            self.d.tree.write_reassign_partitions(encode_reassignment(
                [(tp.topic, tp.partition, list(target))]))

    def _cancel(self) -> None:
        moving = self.d.core.ctx.reassigning_partitions() if self.d.core else []
        if moving:
            self.d.request(E.AlterReassignments(items=((self.rng.choice(moving), None),)))

    def _restart(self) -> None:
        """A broker's log dir fails: it reports some of its replicas lost (design.md#jbod)."""
        ctx = self.d.core.ctx if self.d.core else None
        live = self._live()
        if ctx is None or not live:
            return
        b = self.rng.choice(live)
        mine = [tp for tp in self._partitions() if b in ctx.replicas(tp)]
        if not mine:
            return
        lost = sorted(self.rng.sample(mine, self.rng.randint(1, len(mine))))
        epochs = []
        for tp in lost:
            # already out of the ISR and not leading: the restart has nothing to take away
            st = self.d.tree.states.get(tp)
            self.lost[(tp, b)] = st is not None and b not in st.isr and st.leader != b
            # the fence: the partition epoch the broker held
            epochs.append(st.partition_epoch if st is not None else -1)
        data = encode_restart_entry(RestartEntry(
            b, "/d1", tuple((tp.topic, tp.partition) for tp in lost),
            partition_epochs=tuple(epochs)))
        self.restart_log.append((data, b, tuple(lost), tuple(epochs)))
        self.d.tree.add_restart_entry(data)

    def _duplicate_restart(self) -> None:
        """The notifier's retry of an entry whose write timed out but landed: written again,
        maybe after the broker's re-created replica was re-admitted to the ISR. The core that
        saw that re-admission must leave it in the ISR and ELR; a new core
        has no record and applies it (unfenced: the replica only catches up again)."""
        core = self.d.core
        if not self.restart_log or core is None:
            return
        data, b, lost, epochs = self.rng.choice(self.restart_log)
        keep = set()
        for tp, epoch in zip(lost, epochs, strict=True):
            # kept only if this core restarted the replica after the loss and re-admitted
            # it after that (an expansion in flight at the loss re-admits the lost replica)
            r, st = self.readmitted.get((tp, b)), self.d.tree.states.get(tp)
            rs = self.restarted.get((tp, b))
            if r is not None and r[1] is core and rs is not None and rs[1] is core \
                    and epoch < rs[0] < r[0] and st is not None \
                    and (b in st.isr or b in st.elr):
                keep.add(tp)
        self.fenced = (b, keep, core)
        self.d.tree.add_restart_entry(data)

    def _on_effect(self, eff) -> None:
        if isinstance(eff, X.Emit) and eff.name == "invalid_state_transition":
            self.refused.append(eff.fields["message"])
        elif isinstance(eff, X.Emit) and eff.name == "partitions_restarted":
            for name in eff.fields["partitions"]:
                tp = TopicPartition.parse(name)
                st = self.d.tree.states.get(tp)
                if st is not None:
                    self.restarted[(tp, eff.fields["broker"])] = (st.partition_epoch,
                                                                  self.d.core)
        elif isinstance(eff, X.WritePartitionStates):
            # every state as it is written (a crash right after the write still wrote it)
            for w in eff.writes:
                s = self.d.tree.states.get(w.tp)
                if s is not None and s.partition_epoch == w.new.partition_epoch \
                        and s.leader == w.new.leader:
                    self._observe(w.tp, s, self.step, self.action)

    # ------------------------------------------------------------------ invariants

    def _fail(self, step: int, action: str, what: str) -> None:
        raise InvariantViolation(f"seed {self.seed} step {step} ({action}): {what}")

    def _observe(self, tp: TopicPartition, s: LeaderAndIsr, step: int, action: str) -> None:
        """One partition state, checked against the one before it: called for every state
        a decision writes (so an ISR change and an election in the same step are checked in
        order) and for what the store holds after each step."""
        d, tree = self.d, self.d.tree
        key = (tp, s.leader_epoch)
        seen = self.h.leader_of_epoch.setdefault(key, s.leader)
        if seen != s.leader:
            self._fail(step, action, f"{tp} leader epoch {s.leader_epoch} has leaders "
                                     f"{seen} and {s.leader}")
        old = self.h.last.get(tp)
        if old is not None and s.leader_epoch < old.leader_epoch:
            self._fail(step, action, f"{tp} leader epoch went {old.leader_epoch} -> "
                                     f"{s.leader_epoch}")
        if old is not None and s.leader != old.leader and s.leader != NO_LEADER:
            if s.leader not in tree.brokers:
                self._fail(step, action, f"{tp} elected {s.leader}, not registered")
            if s.leader not in old.isr:
                cfg = tree.configs.get(tp.topic, {})
                allowed = (cfg.get("unclean.leader.election.enable") == "true"
                           or d.config["unclean.leader.election.enable"]
                           or tp in self.forced_unclean)
                if not allowed:
                    self._fail(step, action, f"{tp} elected {s.leader} outside the ISR "
                                             f"{old.isr} without unclean election")
                if s.leader_recovery_state != LEADER_RECOVERING:
                    self._fail(step, action, f"{tp} unclean leader {s.leader} is not "
                                             "RECOVERING")
        for (ltp, b), out in list(self.lost.items()):
            if ltp != tp:
                continue
            if b not in s.isr and s.leader != b:
                self.lost[(ltp, b)] = True  # the loss was applied
            elif out and b in s.isr and (old is None or b not in old.isr):
                del self.lost[(ltp, b)]  # rejoined (AlterPartition) or elected: a new life
        if old is not None and self.action == "_alter" and self.d.core is not None \
                and (s.leader, s.leader_epoch) == (old.leader, old.leader_epoch):
            # an AlterPartition expansion (KIP-497 keeps the leader and its epoch), not an
            # election that a recovery or a timer finished during this step
            for r in set(s.isr) - set(old.isr):
                self.readmitted[(tp, r)] = (s.partition_epoch, self.d.core)
        self.h.last[tp] = s

    def _check(self, step: int, action: str) -> None:
        d = self.d
        tree = d.tree
        if self.fenced is not None:
            b, keep, core = self.fenced
            self.fenced = None
            for tp in sorted(keep) if d.core is core else ():
                s = tree.states.get(tp)
                if s is not None and b not in s.isr and b not in s.elr:
                    self._fail(step, action, f"{tp}: a late duplicate restart entry took "
                                             f"broker {b}, re-admitted since, out: {s}")
        for tp, s in tree.states.items():
            a = tree.topics.get(tp.topic)
            replicas = a.partitions.get(tp.partition, []) if a else []
            if (not s.isr and s.leader != NO_LEADER) or not set(s.isr) <= set(replicas):
                self._fail(step, action, f"{tp} ISR {s.isr} not within replicas {replicas}")
            self._observe(tp, s, step, action)
        for tp in [tp for tp in self.h.last if tp not in tree.states]:
            del self.h.last[tp]  # deleted (epochs restart if the name is reused)
            for key in [k for k in self.h.leader_of_epoch if k[0] == tp]:
                del self.h.leader_of_epoch[key]
        if self.refused:
            self._fail(step, action, f"refused state transitions: {self.refused}")
        for t, a in tree.topics.items():
            for p, replicas in a.partitions.items():
                add, rem = a.adding_replicas.get(p, []), a.removing_replicas.get(p, [])
                if not set(add) <= set(replicas) or not set(rem) <= set(replicas) \
                        or set(add) & set(rem):
                    self._fail(step, action, f"{t}-{p}: RS {replicas} AR {add} RR {rem}")
        if d.core is not None and not d.core.waiting:
            ctx = d.core.ctx
            for tp in ctx.all_partitions():
                if ctx.leadership.get(tp) != tree.states.get(tp):
                    self._fail(step, action, f"{tp}: core believes {ctx.leadership.get(tp)}, "
                                             f"store holds {tree.states.get(tp)}")
            for t in set(ctx.assignments) | set(tree.topics):
                if ctx.assignments.get(t) != tree.topics.get(t):
                    self._fail(step, action, f"topic {t}: core believes "
                                             f"{ctx.assignments.get(t)}, store holds "
                                             f"{tree.topics.get(t)}")
            if not tree.restart_entries:
                for (tp, b), out in list(self.lost.items()):
                    s = tree.states.get(tp)
                    if s is None or not ctx.has_partition(tp) or ctx.is_being_deleted(tp.topic) \
                            or b not in ctx.replicas(tp):
                        del self.lost[(tp, b)]
                    elif not out:
                        self._fail(step, action, f"{tp}: broker {b} lost its replica, the "
                                                 f"restart was consumed, yet {s}")
            if tree.reassign_partitions is not None:
                for t, p, target in decode_reassignment(tree.reassign_partitions):
                    tp = TopicPartition(t, p)
                    if not ctx.has_partition(tp) or ctx.is_being_deleted(t):
                        continue  # cleared by the next controller, or with the deletion
                    ra = D.replica_assignment(ctx, tp)
                    if not ra.being_reassigned or list(ra.target) != target:
                        self._fail(step, action, f"/admin/reassign_partitions lists {tp} -> "
                                                 f"{target}, but its replicas are {ra}")


def run_seed(seed: int, steps: int = 30) -> Simulation:
    sim = Simulation(seed, steps)
    sim.run()
    return sim
