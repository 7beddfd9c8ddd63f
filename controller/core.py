"""ControllerCore: the active controller as one `step(event) -> effects` state machine
(etcd raft's RawNode, h11's Connection). No awaits, no sockets, no clock, no ZooKeeper.

    core = ControllerCore(info, epoch, epoch_version, config, rng)
    effects = core.step(events.Activate(now_ms=...))
    # carry out effects in order; for the last one, if it needs_result:
    effects = core.step(events.Completed(value=outcome))

Every fact enters here: broker registrations and changes, topic and config changes, RPC
requests, broker responses, store outcomes and timer fires. What the controller does comes out
as effects (effects.py): conditional store reads and writes, broker requests, timers, replies
and event-log records. The rules the shell must keep:

1. Carry out the effects of one step in list order.
2. A `needs_result` effect ends its list. Step its outcome (`Completed`) before any other
   event; nothing else may be stepped while the core waits (`waiting` is true).
3. A store write refused as a whole (the controller epoch moved) or failing with an unknown
   outcome ends this core: throw it away, and let a new one load from the store. In-memory
   state is never trusted past a write whose outcome is unknown - which is what a real
   failover does, and what the scripts' `crash-after N` and the simulation exercise.

Each handler is written as a generator that yields effects and receives the outcomes of the
store ones, so a sequence such as "write the new states, apply, tell the brokers, retry the
refused ones" reads top to bottom; `step` drives it to its next store effect.

Status: complete for topic creation and deletion, adding partitions (CreatePartitions), broker
lifecycle, controlled shutdown, AlterPartition, ElectLeaders, the automatic preferred-leader
check, reassignment (design.md#reassignment's seven steps: `_on_partition_reassignment`,
`_complete_reassignment`) and /restart_partitions (design.md#jbod: `_restart_partitions_change`)
and KIP-966's Unclean Recovery Manager (design.md#kip-966: `_recoveries`, run after every event's
handler - decisions/recovery.py).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Generator, Mapping
from typing import Any

from common.assignment import BrokerMetadata
from common.errors import ErrorCode
from common.names import TopicPartition
from common.zk_layout import ControllerInfo, TopicAssignment
from controller import decisions, effects, emitted, events
from controller.context import ControllerContext
from controller.create_partitions import plan_partitions
from controller.create_topics import TopicError, plan_topic
from controller.elr import ElrConfig
from controller.request_batch import build_requests
from controller.state_machine import PartitionState

Handler = Generator[effects.Effect, Any, Any]

AUTO_REBALANCE = "auto_rebalance"
UNCLEAN_RECOVERY = "unclean_recovery"  # the Unclean Recovery Manager's wake-up timer
REFUSED_WRITE_RETRIES = 3


class CoreMisuse(Exception):
    """The shell broke the stepping rules (a bug in the shell, not in the cluster)."""


class ControllerCore:
    def __init__(self, info: ControllerInfo, epoch: int, epoch_version: int,
                 config: Mapping[str, Any], rng: random.Random | None = None):
        self.info = info
        self.config = config
        self.rng = rng or random.Random()
        self.ctx = ControllerContext(
            controller_id=info.controller_id, epoch=epoch, epoch_zk_version=epoch_version,
            unclean_leader_election_default=bool(config["unclean.leader.election.enable"]),
            relinquish_cooldown_ms=int(config["leader.imbalance.check.interval.seconds"])
            * 1000, elr=ElrConfig.from_config(config))
        self.cluster_id = ""
        self.ready = False  # Activate done: loaded, brokers told
        # KIP-966's Unclean Recovery Manager (decisions/recovery.py): its tasks live as long
        # as this core; a new controller starts them again from ZooKeeper's state.
        self.urm = decisions.UncleanRecoveryManager(self.ctx.elr.recovery_timeout_ms)
        # AlterPartition re-admissions, the fence of /restart_partitions entries
        # (decisions/restarts.py): this core's memory only, like the URM's tasks
        self.isr_rejoins = decisions.IsrRejoins()
        # ElectLeaders(UNCLEAN) answered once their recoveries end: request id -> results
        self._pending_elections: dict[int, dict[TopicPartition, events.ElectionResult | None]] = {}
        self._waiting: Handler | None = None
        self._waiting_for: effects.Effect | None = None
        # Moves whose TRS this event's writes put in the ISR (_moves_at_target)
        self._targets_reached: set[TopicPartition] = set()
        self._handlers: dict[type[events.Event], Callable[[Any], Handler]] = {
            events.Activate: self._activate,
            events.BrokerChange: self._broker_change,
            events.BrokerModification: self._broker_modification,
            events.TopicChange: self._topic_change,
            events.TopicDeletionChange: self._topic_deletion_change,
            events.TopicConfigChange: self._topic_config_change,
            events.BrokerDefaultConfigChange: self._broker_default_config_change,
            events.StopReplicaResponse: self._stop_replica_response,
            events.TimerFired: self._timer_fired,
            events.CreateTopics: self._create_topics,
            events.CreatePartitions: self._create_partitions,
            events.DeleteTopics: self._delete_topics,
            events.AlterPartition: self._alter_partition,
            events.ControlledShutdown: self._controlled_shutdown,
            events.ElectLeaders: self._elect_leaders,
            events.ReassignmentChange: self._reassignment_change,
            events.AlterReassignments: self._alter_reassignments,
            events.ListReassignments: self._list_reassignments,
            events.RestartPartitionsChange: self._restart_partitions_change,
            events.ReplicaLogInfoResponse: self._replica_log_info_response,
            events.LeaderAndIsrResponse: self._leader_and_isr_response,
        }

    # ================================================================== stepping

    @property
    def waiting(self) -> bool:
        """An effect's outcome is due: only `Completed` may be stepped now."""
        return self._waiting is not None

    def step(self, event: events.Event) -> list[effects.Effect]:
        if isinstance(event, events.Completed):
            gen = self._waiting
            if gen is None:
                raise CoreMisuse("an outcome arrived while no effect was waiting for one")
            self._waiting = self._waiting_for = None
            return self._drive(gen, event.value)
        if self._waiting is not None:
            raise CoreMisuse(f"{event.name} stepped while waiting for the outcome of "
                             f"{type(self._waiting_for).__name__}")
        if not self.ready and not isinstance(event, events.Activate):
            raise CoreMisuse(f"{event.name} stepped before Activate finished")
        handler = self._handlers[type(event)](event)
        return self._drive(self._then_recoveries(event.now_ms, handler), None)

    def _then_recoveries(self, now_ms: float, handler: Handler) -> Handler:
        yield from handler
        yield from self._moves_at_target(now_ms)
        yield from self._recoveries(now_ms)
        yield from self._moves_at_target(now_ms)  # a recovery's election too

    def _drive(self, gen: Handler, value: Any) -> list[effects.Effect]:
        out: list[effects.Effect] = []
        while True:
            try:
                eff = gen.send(value)
            except StopIteration:
                return out
            value = None
            out.append(eff)
            if eff.needs_result:
                self._waiting, self._waiting_for = gen, eff
                return out

    def _emit(self, event: emitted.Emitted) -> effects.Emit:
        return effects.Emit(event, self.ctx.epoch)

    # ================================================================== carrying out a decision

    def _execute(self, now_ms: float, d: decisions.Decision, retry_creates: bool = True,
                 retries: int = REFUSED_WRITE_RETRIES) -> Handler:
        """Write the decision's states, apply what was written, tell the brokers - in that
        order. Refused writes (someone changed the znode): adopt ZooKeeper's state, create
        again where a creation was refused, and decide elections again on the re-read state
        (bounded: a znode rewritten on every attempt is left to the next event).
        Returns the refused partitions."""
        ctx = self.ctx
        failed: set[TopicPartition] = set()
        if d.writes:
            outcome: effects.PartitionWritesOutcome = yield effects.WritePartitionStates(
                tuple(d.writes.values()), ctx.epoch_zk_version)
            failed = set(outcome.failed)
            decisions.apply(ctx, d, failed)
            if failed:
                ctx.leadership.update(outcome.current)
                yield self._emit(emitted.PartitionStateWritesRefused(
                    partitions=[str(tp) for tp in sorted(failed)]))
        else:
            decisions.apply(ctx, d)
        self._targets_reached.update(decisions.targets_reached(ctx, d, failed))
        for e in d.refused:  # design.md#c6: refused by the transition tables, never applied
            yield self._emit(emitted.InvalidStateTransition(
                kind=e.kind, key=str(e.what), current=str(e.current), target=str(e.target),
                message=str(e)))
        yield effects.Decided(d, frozenset(failed))
        yield from self._record(d, failed)
        for tp, strategy in sorted(d.recoveries.items()):
            if tp not in failed and self.urm.start(tp, strategy, ctx.replicas(tp),
                                                   now_ms, tp in d.forced_recoveries):
                s = ctx.leadership.get(tp)
                yield self._emit(emitted.UncleanRecoveryStarted(
                    partition=str(tp), strategy=str(strategy), forced=tp in d.forced_recoveries,
                    replicas=list(ctx.replicas(tp)),
                    last_known_elr=list(s.last_known_elr) if s else []))
        batches = build_requests(ctx, d, self.info, failed)
        if batches:
            yield effects.SendRequests(batches)
        orphans = [tp for tp in sorted(failed) if ctx.has_partition(tp)
                   and ctx.partition_sm.state(tp) is PartitionState.NonExistentPartition]
        if orphans and retry_creates:
            more = yield from self._execute(now_ms, decisions.on_new_partitions(ctx, orphans),
                                            retry_creates=False)
            failed = (failed - set(orphans)) | more
        if failed and retries > 0:
            again = decisions.reelect_after_refused_writes(ctx, sorted(failed))
            if not again.empty:
                more = yield from self._execute(now_ms, again, retry_creates=False,
                                                retries=retries - 1)
                failed = (failed - set(again.writes)) | more
        return failed

    def _record(self, d: decisions.Decision, failed: set[TopicPartition]) -> Handler:
        ctx = self.ctx
        for e in d.elections:
            if e.tp in failed:
                continue
            s = ctx.leadership.get(e.tp)
            yield self._emit(emitted.LeaderElection(
                partition=str(e.tp), old_leader=e.old_leader, new_leader=e.new_leader,
                leader_epoch=e.leader_epoch, unclean=e.unclean, reason=str(e.reason),
                isr=list(s.isr) if s else [], partition_epoch=s.partition_epoch if s else -1))
        for w in d.isr_changes():
            if w.tp not in failed:
                assert w.old is not None  # isr_changes() holds changes of existing states
                yield self._emit(emitted.IsrChange(
                    partition=str(w.tp), leader=w.new.leader, leader_epoch=w.new.leader_epoch,
                    old_isr=list(w.old.isr), new_isr=list(w.new.isr),
                    partition_epoch=w.new.partition_epoch))

    # ================================================================== failover

    def _activate(self, ev: events.Activate) -> Handler:
        """Kafka's onControllerFailover: load everything, tell every broker, elect."""
        ctx = self.ctx
        snap: effects.ClusterSnapshot = yield effects.ReadCluster()
        self.cluster_id = snap.cluster_id
        for reg in snap.brokers.values():
            ctx.add_broker(reg)
        for topic, a in snap.assignments.items():
            ctx.add_topic(a, dict(snap.configs.get(topic, {})))
        ctx.leadership.update(snap.states)
        ctx.broker_default_config = yield effects.ReadBrokerDefaultConfig()
        ctx.topics_to_delete = {t for t in snap.topics_to_delete if t in ctx.assignments}
        for t in snap.topics_to_delete:
            if t not in ctx.assignments:  # a finished deletion's leftover entry
                yield effects.DeleteTopic(t, ctx.epoch_zk_version)
        ctx.reset_states()
        yield effects.UpdateBrokers(dict(ctx.live_brokers))
        yield from self._execute(ev.now_ms, decisions.on_controller_failover(ctx))
        yield from self._resume_reassignments(ev.now_ms, snap.admin_reassignments)
        # Entries a previous controller left (it may have applied one and died before
        # deleting it: re-applying is harmless, restarts.py).
        yield from self._apply_restart_entries(ev.now_ms)
        yield from self._arm_rebalance()
        self.ready = True

    def _arm_rebalance(self) -> Handler:
        if self.config["auto.leader.rebalance.enable"]:
            yield effects.SetTimer(AUTO_REBALANCE,
                             float(self.config["leader.imbalance.check.interval.seconds"]))

    # ================================================================== cluster changes

    def _broker_change(self, ev: events.BrokerChange) -> Handler:
        ctx = self.ctx
        regs = yield effects.ReadBrokers()
        known = dict(ctx.live_brokers)
        diff = decisions.diff_brokers(known, regs)
        if diff.gone:
            for b in diff.gone:
                ctx.remove_broker(b)
                self.urm.broker_gone(b)  # its answers no longer count (KIP-966)
                yield self._emit(emitted.BrokerFailed(
                    broker=b, broker_epoch=known[b].epoch, bounced=b in diff.bounced))
            yield effects.UpdateBrokers(dict(ctx.live_brokers))
            yield from self._execute(ev.now_ms, decisions.on_brokers_failed(ctx, diff.gone))
        if diff.arrived:
            for b in diff.arrived:
                ctx.add_broker(regs[b])
                yield self._emit(emitted.BrokerRegistered(
                    broker=b, broker_epoch=regs[b].epoch, address=regs[b].address,
                    rack=regs[b].rack, clean_shutdown=regs[b].clean_shutdown))
            yield effects.UpdateBrokers(dict(ctx.live_brokers))
            yield from self._execute(ev.now_ms, decisions.on_brokers_started(ctx, diff.arrived))

    def _broker_modification(self, ev: events.BrokerModification) -> Handler:
        """A registration rewritten at the same epoch (appearance and disappearance are
        BrokerChange's business)."""
        ctx = self.ctx
        reg = yield effects.ReadBroker(ev.broker_id)
        old = ctx.live_brokers.get(ev.broker_id)
        if reg is None or old is None or reg.epoch != old.epoch or reg == old:
            return
        ctx.live_brokers[ev.broker_id] = reg
        yield effects.UpdateBrokers(dict(ctx.live_brokers))
        yield from self._execute(ev.now_ms, decisions.on_broker_modified(ctx, old, reg))

    def _topic_change(self, ev: events.TopicChange) -> Handler:
        """Topics that appeared in ZooKeeper without CreateTopics (written by another tool):
        initialize their partitions. Topics that vanished outside a deletion are forgotten."""
        ctx = self.ctx
        names = set((yield effects.ReadTopicNames()))
        for t in sorted(set(ctx.assignments) - names):
            if not ctx.is_being_deleted(t):
                ctx.remove_topic(t)
        new = sorted(names - set(ctx.assignments))
        if not new:
            return
        assignments, configs, states = yield effects.ReadTopics(tuple(new))
        tps: list[TopicPartition] = []
        for t, a in assignments.items():
            ctx.add_topic(a, dict(configs.get(t, {})))
            tps += ctx.partitions_of(t)
            yield self._emit(emitted.TopicCreated(
                topic=t, topic_id=a.topic_id, partitions=len(a.partitions), source="zookeeper"))
        ctx.leadership.update(states)
        yield from self._execute(ev.now_ms, decisions.on_new_partitions(ctx, tps))

    def _topic_config_change(self, ev: events.TopicConfigChange) -> Handler:
        ctx = self.ctx
        cfg = yield effects.ReadTopicConfig(ev.topic)
        if ev.topic not in ctx.assignments:
            return
        before = ctx.unclean_allowed(ev.topic)
        strategy_was = ctx.recovery_strategy(ev.topic)
        ctx.topic_configs[ev.topic] = dict(cfg)
        yield from self._execute(ev.now_ms, decisions.on_topic_config_changed(ctx, ev.topic, before,
                                                           strategy_was))

    def _broker_default_config_change(self, ev: events.BrokerDefaultConfigChange) -> Handler:
        """The cluster-wide dynamic broker configs changed: from now on the ELR rules read
        its min.insync.replicas, as every broker's leader does."""
        cfg = yield effects.ReadBrokerDefaultConfig()
        before = self.ctx.broker_default_config
        self.ctx.broker_default_config = dict(cfg)
        if before.get("min.insync.replicas") != cfg.get("min.insync.replicas"):
            yield self._emit(emitted.MinIsrDefaultChanged(
                old=before.get("min.insync.replicas"), new=cfg.get("min.insync.replicas")))
            # KIP-966: ELRs the new value leaves unneeded are cleared (design.md#sim-finding-d)
            yield from self._execute(ev.now_ms, decisions.on_min_isr_changed(self.ctx))

    def _timer_fired(self, ev: events.TimerFired) -> Handler:
        if ev.name != AUTO_REBALANCE:
            return
        ctx = self.ctx
        tps = decisions.imbalanced_partitions(
            ctx, int(self.config["leader.imbalance.per.broker.percentage"]), ev.now_ms)
        if tps:
            yield from self._execute(ev.now_ms, decisions.elect_leaders(
                ctx, decisions.ElectionType.PREFERRED, tps, ev.now_ms))
        yield from self._arm_rebalance()

    # ================================================================== topic deletion

    def _topic_deletion_change(self, ev: events.TopicDeletionChange) -> Handler:
        ctx = self.ctx
        names = yield effects.ReadTopicsToDelete()
        new = [t for t in names if t in ctx.assignments and not ctx.is_being_deleted(t)]
        for t in names:
            if t not in ctx.assignments:
                yield effects.DeleteTopic(t, ctx.epoch_zk_version)
        if new:
            yield from self._start_deletion(ev.now_ms, new)

    def _start_deletion(self, now_ms: float, topics: list[str]) -> Handler:
        ctx = self.ctx
        for t in topics:
            ctx.topics_to_delete.add(t)
            yield self._emit(emitted.TopicDeletionStarted(topic=t, topic_id=ctx.topic_id(t)))
        # Deletion wins over a move in flight, as in KRaft (the ZooKeeper controller deferred
        # the deletion until the move ended, which a stalled move blocked for good): every
        # replica of RS gets StopReplica(delete). The move's admin-path entries go now, or a
        # later controller would resume them on a topic re-created under the same name.
        abandoned = [tp for tp in ctx.admin_reassignments if tp.topic in topics]
        if abandoned:
            for tp in abandoned:
                del ctx.admin_reassignments[tp]
            yield effects.WriteAdminReassignments(dict(ctx.admin_reassignments),
                                            ctx.epoch_zk_version)
        d = decisions.start_topic_deletion(ctx, topics)
        yield from self._execute(now_ms, d)
        for topic in sorted(d.deletable_topics):  # nothing left to ask any broker
            yield from self._finish_deletion(topic)

    def _stop_replica_response(self, ev: events.StopReplicaResponse) -> Handler:
        d = decisions.on_stop_replica_response(self.ctx, ev.broker_id, dict(ev.errors))
        yield from self._execute(ev.now_ms, d)
        for topic in sorted(d.deletable_topics):
            yield from self._finish_deletion(topic)

    def _leader_and_isr_response(self, ev: events.LeaderAndIsrResponse) -> Handler:
        """Partitions a broker refused in LeaderAndIsr. Kafka's ZooKeeper controller answers
        KAFKA_STORAGE_ERROR here with onReplicasBecomeOffline; in design.md#jbod's design the broker
        itself writes a /restart_partitions entry for a replica its failed dir lost (and for
        one it cannot create), and that entry is what re-elects - acting here as well would
        elect twice. Other codes (a stale epoch, an unknown topic) answer a request a newer one
        already superseded. So the core records them for the operator and decides nothing."""
        if ev.errors:
            yield self._emit(emitted.LeaderAndIsrErrors(
                broker=ev.broker_id,
                errors={str(tp): code.name for tp, code in sorted(ev.errors.items())}))

    def _finish_deletion(self, topic: str) -> Handler:
        ctx = self.ctx
        topic_id = ctx.topic_id(topic)
        yield effects.DeleteTopic(topic, ctx.epoch_zk_version)
        decisions.apply(ctx, decisions.finish_topic_deletion(ctx, topic))
        ctx.remove_topic(topic)
        yield self._emit(emitted.TopicDeleted(topic=topic, topic_id=topic_id))
        yield effects.TopicDeleted(topic)

    # ================================================================== RPCs

    def _create_topics(self, ev: events.CreateTopics) -> Handler:
        ctx = self.ctx
        names = [t.name for t in ev.topics]
        dups = {n for n in names if names.count(n) > 1}
        live = [BrokerMetadata(b, r.rack) for b, r in sorted(ctx.live_brokers.items())]
        existing = set(ctx.assignments)
        results: list[events.TopicResult] = []
        plans = []
        for t in ev.topics:
            if t.name in dups:
                results.append(events.TopicResult(
                    t.name, ErrorCode.INVALID_REQUEST,
                    f"Create topics request contains multiple entries for the topic {t.name}"))
                continue
            try:
                plan = plan_topic(
                    t.name, t.num_partitions, t.replication_factor,
                    dict(t.assignments) if t.assignments else None, dict(t.configs),
                    existing=existing, live_brokers=live,
                    default_partitions=int(self.config["num.partitions"]),
                    default_replication_factor=int(self.config["default.replication.factor"]),
                    rng=self.rng)
            except TopicError as e:
                results.append(events.TopicResult(t.name, e.error_code, e.message))
                continue
            existing.add(plan.name)
            plans.append((len(results), plan))
            results.append(events.TopicResult(plan.name, topic_id=plan.topic_id,
                                         num_partitions=len(plan.assignment),
                                         replication_factor=plan.replication_factor,
                                         configs=dict(plan.configs)))
        if ev.validate_only:
            yield effects.Reply(ev.request_id, results)
            return
        tps: list[TopicPartition] = []
        for i, plan in plans:
            a = TopicAssignment(plan.name, plan.topic_id, plan.assignment)
            created = yield effects.CreateTopic(a, dict(plan.configs), ctx.epoch_zk_version)
            if not created:
                results[i] = events.TopicResult(plan.name, ErrorCode.TOPIC_ALREADY_EXISTS,
                                           f"Topic '{plan.name}' already exists.")
                continue
            ctx.add_topic(a, plan.configs)
            tps += ctx.partitions_of(plan.name)
            yield self._emit(emitted.TopicCreated(
                topic=plan.name, topic_id=plan.topic_id, partitions=len(plan.assignment),
                replication_factor=plan.replication_factor,
                assignment={str(p): r for p, r in plan.assignment.items()},
                configs=dict(plan.configs)))
        for i, plan in plans:  # arm each new topic's config watch
            if results[i].error_code == ErrorCode.NONE:
                yield effects.ReadTopicConfig(plan.name)
        if tps:
            yield from self._execute(ev.now_ms, decisions.on_new_partitions(ctx, tps))
        yield effects.Reply(ev.request_id, results, await_deliveries=True)

    def _create_partitions(self, ev: events.CreatePartitions) -> Handler:
        """Kafka's CreatePartitions, as its ZooKeeper mode ran it, in one event: check each
        topic (controller/create_partitions.py), write the grown assignment to
        /brokers/topics/<t>, then create the new partitions exactly as a new topic's
        (onNewPartitionCreation: New -> Online, LeaderAndIsr with is_new, UpdateMetadata).
        Being this controller's own event, the check cannot race a reassignment's znode writes
        (ZkAdminManager's reason for REASSIGNMENT_IN_PROGRESS) or a deletion starting. A
        controller that dies after the znode write leaves partitions without state: the next
        one's failover initializes them (ControllerContext.reset_states makes them New)."""
        ctx = self.ctx
        names = [t.name for t in ev.topics]
        dups = {n for n in names if names.count(n) > 1}
        live = [BrokerMetadata(b, r.rack) for b, r in sorted(ctx.live_brokers.items())]
        results: list[events.PartitionsResult] = []
        plans: list[tuple[str, dict[int, list[int]]]] = []
        for t in ev.topics:
            if t.name in dups:  # KafkaApis: every entry of a duplicated topic is refused
                results.append(events.PartitionsResult(t.name, ErrorCode.INVALID_REQUEST,
                                                  "Duplicate topic in request."))
                continue
            try:
                new = plan_partitions(t.name, t.count, t.assignments,
                                      current=ctx.assignments.get(t.name),
                                      being_deleted=ctx.is_being_deleted(t.name),
                                      live_brokers=live)
            except TopicError as e:
                results.append(events.PartitionsResult(t.name, e.error_code, e.message))
                continue
            plans.append((t.name, new))
            results.append(events.PartitionsResult(t.name))
        if ev.validate_only:
            yield effects.Reply(ev.request_id, results)
            return
        tps: list[TopicPartition] = []
        for name, new in plans:
            a = ctx.assignments[name]
            grown = dataclasses.replace(a, partitions={**a.partitions, **new})
            yield effects.WriteTopicAssignment(grown, ctx.epoch_zk_version)
            ctx.set_topic_assignment(grown)
            tps += [TopicPartition(name, p) for p in sorted(new)]
            yield self._emit(emitted.PartitionsCreated(
                topic=name, topic_id=a.topic_id, old_count=len(a.partitions),
                new_count=len(grown.partitions),
                assignment={str(p): r for p, r in sorted(new.items())}))
        if tps:
            yield from self._execute(ev.now_ms, decisions.on_new_partitions(ctx, tps))
        yield effects.Reply(ev.request_id, results, await_deliveries=True)

    def _delete_topics(self, ev: events.DeleteTopics) -> Handler:
        ctx = self.ctx
        results: list[events.DeletionResult] = []
        waits: list[str] = []
        start: list[str] = []
        for name in dict.fromkeys(ev.topics):
            if name not in ctx.assignments:
                results.append(events.DeletionResult(
                    name, "", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    "This server does not host this topic-partition."))
                continue
            results.append(events.DeletionResult(name, ctx.topic_id(name)))
            waits.append(name)
            if not ctx.is_being_deleted(name):
                yield effects.MarkTopicForDeletion(name, ctx.epoch_zk_version)
                start.append(name)
        # The answer (and who waits for which topic) goes out before the deletion can finish.
        yield effects.Reply(ev.request_id, results, awaited_deletions=tuple(waits))
        if start:
            yield from self._start_deletion(ev.now_ms, start)

    def _alter_partition(self, ev: events.AlterPartition) -> Handler:
        ctx = self.ctx
        try:
            d = decisions.alter_partition(ctx, ev.broker_id, ev.broker_epoch, ev.items, ev.now_ms)
        except decisions.RequestRejected as e:
            yield effects.Reply(ev.request_id, error=effects.Rejection(e.error_code, e.message))
            return
        failed = yield from self._execute(ev.now_ms, d)
        self.isr_rejoins.observe(ctx, d, failed)
        for tp, o in d.outcomes.items():
            if o.error == ErrorCode.NEW_LEADER_ELECTED and tp not in failed:
                new = ctx.leadership[tp]
                yield self._emit(emitted.LeadershipRelinquished(
                    partition=str(tp), broker=ev.broker_id, new_leader=new.leader,
                    leader_epoch=new.leader_epoch))
        moving = [item.tp for item in ev.items if item.tp not in failed
                  and ctx.has_partition(item.tp)
                  and decisions.replica_assignment(ctx, item.tp).being_reassigned]
        answers = []
        for item in ev.items:
            tp = item.tp
            o = d.outcomes.get(tp, decisions.Outcome(ErrorCode.UNKNOWN_SERVER_ERROR))
            # A refused write: the leader's view is stale; it re-reads via LeaderAndIsr.
            code = ErrorCode.INVALID_UPDATE_VERSION if tp in failed else o.error
            s = ctx.leadership.get(tp)
            if s is None:
                answers.append(events.PartitionAnswer(tp, item.topic_id, code))
            else:
                answers.append(events.PartitionAnswer(
                    tp, item.topic_id, code, s.leader, s.leader_epoch, tuple(s.isr),
                    s.leader_recovery_state, s.partition_epoch, tuple(s.elr)))
        yield effects.Reply(ev.request_id, answers)
        # design.md#reassignment-step-3: an ISR change is what a waiting move waits for.
        for tp in moving:
            if decisions.reassignment_complete(ctx, tp):
                yield from self._complete_reassignment(ev.now_ms, tp)

    def _controlled_shutdown(self, ev: events.ControlledShutdown) -> Handler:
        ctx = self.ctx
        try:
            first = decisions.check_controlled_shutdown(ctx, ev.broker_id, ev.broker_epoch)
        except decisions.RequestRejected as e:
            yield effects.Reply(ev.request_id, error=effects.Rejection(e.error_code, e.message))
            return
        ctx.shutting_down.add(ev.broker_id)
        yield from self._execute(ev.now_ms, decisions.controlled_shutdown(ctx, ev.broker_id))
        remaining = decisions.remaining_leaderships(ctx, ev.broker_id)
        yield self._emit(emitted.ControlledShutdown(
            broker=ev.broker_id, broker_epoch=ctx.broker_epoch(ev.broker_id), first_attempt=first,
            remaining=[str(tp) for tp in remaining]))
        yield effects.Reply(ev.request_id, remaining)

    def _elect_leaders(self, ev: events.ElectLeaders) -> Handler:
        d = decisions.elect_leaders(self.ctx, ev.election_type, ev.partitions, ev.now_ms)
        failed = yield from self._execute(ev.now_ms, d)
        results: dict[TopicPartition, events.ElectionResult | None] = {}
        for tp, o in sorted(d.outcomes.items()):
            if tp in failed:
                results[tp] = events.ElectionResult(tp, ErrorCode.UNKNOWN_SERVER_ERROR,
                                               "the partition state write failed")
            elif tp in d.forced_recoveries and tp in self.urm.tasks:
                # KIP-966: the answer waits for the recovery's choice (decisions/recovery.py)
                results[tp] = None
                self.urm.tasks[tp].waiters.append(ev.request_id)
            else:
                results[tp] = events.ElectionResult(tp, o.error, o.message)
        if any(r is None for r in results.values()):
            self._pending_elections[ev.request_id] = results
            return
        yield effects.Reply(ev.request_id, list(results.values()), await_deliveries=True)

    # ======================================================== reassignment (design.md#reassignment)

    def _step(self, tp: TopicPartition, step: int, **fields: Any) -> effects.Emit:
        """Event-log record of a finished step (and the test-only step hook's boundary:
        the shell may kill its own process here, controller.py)."""
        return self._emit(emitted.ReassignmentStep(partition=str(tp), step=step, **fields))

    def _rejected(self, source: str, errors: dict[TopicPartition, decisions.Outcome]
                  ) -> effects.Emit:
        return self._emit(emitted.ReassignmentRejected(
            source=source,
            errors={str(tp): f"{o.error.name}: {o.message}" for tp, o in sorted(errors.items())}))

    def _reassignment_change(self, ev: events.ReassignmentChange) -> Handler:
        """design.md#reassignment's PartitionReassignedListener: /admin/reassign_partitions was
        written. Entries this controller already drives are left alone; new ones are validated as
        one request - any invalid entry rejects every new one (they are removed from the
        znode, nothing starts) - and started."""
        ctx = self.ctx
        admin: effects.AdminReassignments | None = yield effects.ReadAdminReassignments()
        if admin is None:
            ctx.admin_reassignments = {}
            return
        if admin.error is not None:
            yield self._emit(emitted.ReassignmentRejected(reason=admin.error, source="zookeeper"))
            yield effects.WriteAdminReassignments(dict(ctx.admin_reassignments),
                                            ctx.epoch_zk_version)
            return
        new = {tp: r for tp, r in admin.entries.items()
               if ctx.admin_reassignments.get(tp) != r}
        planned, errors = decisions.plan_reassignments(ctx, sorted(new.items()))
        if errors:
            yield self._rejected("zookeeper", errors)
            kept = {tp: r for tp, r in admin.entries.items() if tp not in new}
            ctx.admin_reassignments = kept
            yield effects.WriteAdminReassignments(kept, ctx.epoch_zk_version)
            return
        ctx.admin_reassignments = dict(admin.entries)
        for tp in sorted(planned):
            yield from self._on_partition_reassignment(ev.now_ms, tp, planned[tp], "zookeeper")

    def _alter_reassignments(self, ev: events.AlterReassignments) -> Handler:
        """AlterPartitionReassignments (KIP-455): validated whole (design.md#reassignment), answered
        once every move has started (its step 1 and 2 written); completion is asynchronous."""
        planned, errors = decisions.plan_reassignments(self.ctx, ev.items)
        if errors:
            yield self._rejected("rpc", errors)
            yield effects.Reply(ev.request_id, [events.ReassignmentResult(tp, o.error, o.message)
                                          for tp, o in sorted(errors.items())])
            return
        # The API overrides the admin path (Kafka's maybeRemoveFromZkReassignment): a
        # partition moved or cancelled by RPC leaves /admin/reassign_partitions, whose
        # entry would otherwise name a target no longer being worked towards.
        overridden = [tp for tp in planned if tp in self.ctx.admin_reassignments]
        if overridden:
            for tp in overridden:
                del self.ctx.admin_reassignments[tp]
            yield effects.WriteAdminReassignments(dict(self.ctx.admin_reassignments),
                                            self.ctx.epoch_zk_version)
        for tp in sorted(planned):
            yield from self._on_partition_reassignment(
                ev.now_ms, tp, planned[tp], "rpc",
                cancel=dict(ev.items).get(tp, ()) is None)
        yield effects.Reply(ev.request_id,
                            [events.ReassignmentResult(tp) for tp in sorted(planned)],
                            await_deliveries=True)

    def _list_reassignments(self, ev: events.ListReassignments) -> Handler:
        ctx = self.ctx
        tps = ctx.reassigning_partitions() if ev.partitions is None else [
            tp for tp in ev.partitions if ctx.has_partition(tp)]
        out = []
        for tp in tps:
            ra = decisions.replica_assignment(ctx, tp)
            if ra.being_reassigned:
                out.append(events.OngoingReassignment(tp, ra.replicas, ra.adding, ra.removing))
        yield effects.Reply(ev.request_id, out)

    def _resume_reassignments(self, now_ms: float, admin: effects.AdminReassignments | None
                              ) -> Handler:
        """A new controller resumes every move from what ZooKeeper holds (design.md#reassignment's
        failure cases, decisions/reassignment.py): moves in the topic znodes first (KIP-455), then
        the admin path's entries - clearing those already complete (case 5)."""
        ctx = self.ctx
        moves = {tp: decisions.replica_assignment(ctx, tp) for tp in ctx.reassigning_partitions()
                 if not ctx.is_being_deleted(tp.topic)}  # abandoned: see _start_deletion
        clear: dict[TopicPartition, decisions.Outcome] = {}
        if admin is not None and admin.error is not None:
            yield self._emit(emitted.ReassignmentRejected(reason=admin.error, source="zookeeper"))
            yield effects.WriteAdminReassignments({}, ctx.epoch_zk_version)
        elif admin is not None:
            ctx.admin_reassignments = dict(admin.entries)
            resume, clear = decisions.admin_entries_to_start(ctx, admin.entries)
            moves.update(resume)
        if clear:
            bad = {tp: o for tp, o in clear.items() if o.error != ErrorCode.NONE}
            if bad:
                yield self._rejected("zookeeper", bad)
            for tp, o in sorted(clear.items()):
                ctx.admin_reassignments.pop(tp, None)
                if o.error == ErrorCode.NONE:
                    yield self._step(tp, 7, resumed=True)  # seed case 5
            yield effects.WriteAdminReassignments(dict(ctx.admin_reassignments),
                                            ctx.epoch_zk_version)
        for tp in sorted(moves):
            yield from self._on_partition_reassignment(now_ms, tp, moves[tp], "failover")

    def _on_partition_reassignment(self, now_ms: float, tp: TopicPartition,
                                   ra: decisions.ReplicaAssignment, source: str,
                                   cancel: bool = False) -> Handler:
        """Kafka's onPartitionReassignment: steps 1 and 2, then 4-7 if TRS is in the ISR."""
        ctx = self.ctx
        current = decisions.replica_assignment(ctx, tp)
        if current != ra:
            # A changed target or a cancel: the replicas the move no longer needs leave the
            # ISR (and the leadership) first, while still listed - so the ISR never names a
            # replica the topic znode does not (validation kept an ISR member in RS).
            unneeded = [r for r in current.replicas if r not in ra.replicas]
            if unneeded and (yield from self._partition_step(
                    now_ms, tp,
                    lambda: decisions.remove_replicas(ctx, tp, unneeded, stop=False))) is None:
                yield self._emit(emitted.ReassignmentStalled(
                    partition=str(tp), step=1, reason="state write refused"))
                return
            # Step 1: RS = TRS + ORS, with AR and RR, in the topic znode.
            a = decisions.with_partition(ctx.assignments[tp.topic], tp.partition, ra)
            yield effects.WriteTopicAssignment(a, ctx.epoch_zk_version)
            ctx.set_topic_assignment(a)
            started = emitted.ReassignmentCancelled if cancel else emitted.ReassignmentStarted
            yield self._emit(started(partition=str(tp), source=source,
                                     original=list(current.origin), target=list(ra.target),
                                     adding=list(ra.adding), removing=list(ra.removing)))
            yield self._step(tp, 1, replicas=list(ra.replicas))
            if unneeded:  # StopReplica(delete) to them: their files go
                yield from self._execute(
                    now_ms, decisions.remove_replicas(ctx, tp, unneeded, isr=False))
        yield from self._execute(now_ms, decisions.new_replicas(ctx, tp))
        if decisions.reassignment_complete(ctx, tp):
            yield from self._complete_reassignment(now_ms, tp)
            return
        # Step 2: start the adding replicas; step 3 waits for AlterPartition to add them.
        if (yield from self._partition_step(
                now_ms, tp, lambda: decisions.start_adding_replicas(ctx, tp))) is not None:
            yield self._step(tp, 2, adding=list(ra.adding))
        if decisions.reassignment_complete(ctx, tp):
            yield from self._complete_reassignment(now_ms, tp)

    def _partition_step(self, now_ms: float, tp: TopicPartition,
                        decide: Callable[[], decisions.Decision]) -> Handler:
        """One step's partition-state write; a refused write (another writer moved the
        znode) is decided again on the re-read state, a bounded number of times. Returns
        the decision whose write went through, or None."""
        for _ in range(REFUSED_WRITE_RETRIES):
            d = decide()
            failed = yield from self._execute(now_ms, d, retries=0)
            if tp not in failed:
                return d
        return None

    # ================================================================== reassignment steps 3-7

    def _moves_at_target(self, now_ms: float) -> Handler:
        """Step 3 for ISR changes other than AlterPartition (which checks its own): an
        election or a controller-set ISR that put a move's TRS in the ISR goes on to steps
        4-7 in the same event (decisions.targets_reached)."""
        tps, self._targets_reached = sorted(self._targets_reached), set()
        ctx = self.ctx
        for tp in tps:  # unless finished meanwhile (by AlterPartition's own check)
            if ctx.has_partition(tp) and decisions.replica_assignment(ctx, tp).being_reassigned \
                    and decisions.reassignment_complete(ctx, tp):
                yield from self._complete_reassignment(now_ms, tp)
        self._targets_reached.clear()  # the steps' own writes: their move is done or waits

    def _complete_reassignment(self, now_ms: float, tp: TopicPartition) -> Handler:
        """Steps 4-7 for a partition whose TRS is in the ISR."""
        ctx = self.ctx
        if not ctx.has_partition(tp) or ctx.is_being_deleted(tp.topic):
            return
        ra = decisions.replica_assignment(ctx, tp)
        written = ctx.assignments[tp.topic]
        yield self._step(tp, 3, isr=list(ctx.leadership[tp].isr) if tp in ctx.leadership
                         else [])
        # Kafka's B2: the replicas are TRS in memory from here on, so the LeaderAndIsr of
        # steps 4 and 5 carries them; ZooKeeper learns it at step 6. A refused step puts the
        # in-memory assignment back to what the znode holds: the move stays in flight.
        ctx.set_topic_assignment(decisions.with_partition(written, tp.partition,
                                                  decisions.ReplicaAssignment(ra.target)))
        # Step 4: a leader from TRS (or a new leader epoch for the one in it).
        d = yield from self._partition_step(
            now_ms, tp, lambda: decisions.move_leader_into_target(ctx, tp, ra.target))
        outcome = d.outcomes.get(tp) if d is not None else None
        no_leader = outcome is not None and outcome.error != ErrorCode.NONE
        # A move in flight waits for a target replica that can lead (an ISR change
        # retriggers it). A partition already at its target (a cancel, or a target equal to
        # the original replicas) has nothing to wait for: offline like any other partition
        # whose replicas are down, its move is finished.
        if d is None or (no_leader and ra.being_reassigned):
            ctx.set_topic_assignment(written)
            yield self._emit(emitted.ReassignmentStalled(
                partition=str(tp), step=4,
                reason=outcome.message if outcome else "state write refused"))
            return
        yield self._step(tp, 4, leader=ctx.leadership[tp].leader if tp in ctx.leadership
                         else -1)
        # Step 5: RR out of the ISR; StopReplica(delete) to them.
        if ra.removing and (yield from self._partition_step(
                now_ms, tp, lambda: decisions.remove_replicas(ctx, tp, ra.removing))) is None:
            ctx.set_topic_assignment(written)
            yield self._emit(emitted.ReassignmentStalled(
                partition=str(tp), step=5, reason="state write refused"))
            return
        yield self._step(tp, 5, removed=list(ra.removing))
        # Step 6: AR = TRS in the topic znode (adding/removing cleared).
        final = decisions.with_partition(written, tp.partition,
                                         decisions.ReplicaAssignment(ra.target))
        if final != written:  # a cancel of a move whose step 1 had reverted it already
            yield effects.WriteTopicAssignment(final, ctx.epoch_zk_version)
        ctx.set_topic_assignment(final)
        yield self._step(tp, 6, replicas=list(ra.target))
        # Step 7: the admin path forgets the partition (deleted once empty).
        if tp in ctx.admin_reassignments:
            del ctx.admin_reassignments[tp]
            yield effects.WriteAdminReassignments(dict(ctx.admin_reassignments),
                                            ctx.epoch_zk_version)
        yield self._step(tp, 7)
        yield from self._execute(now_ms, decisions.metadata_for(ctx, [tp]))
        yield self._emit(emitted.ReassignmentCompleted(
            partition=str(tp), replicas=list(ra.target), removed=list(ra.removing),
            added=list(ra.adding)))

    # ================================================================== restarted partitions

    def _restart_partitions_change(self, ev: events.RestartPartitionsChange) -> Handler:
        yield from self._apply_restart_entries(ev.now_ms)

    def _apply_restart_entries(self, now_ms: float) -> Handler:
        """design.md#jbod's /restart_partitions listener, as a queue: each entry in sequence order
        is applied (`decisions.restarts`), then deleted. At least once: a controller that
        dies in between leaves the entry to the next one, which applies it again to the same
        end state. An entry whose writes stay refused is kept for the next change or
        controller; an unreadable one is dropped with a warning."""
        ctx = self.ctx
        listing: effects.RestartEntries = yield effects.ReadRestartEntries()
        for name, entry in listing.entries:
            if isinstance(entry, str):
                yield self._emit(emitted.RestartEntryInvalid(entry=name, error=entry))
                yield effects.DeleteRestartEntry(name, ctx.epoch_zk_version)
                continue
            tps = [TopicPartition(t, p) for t, p in entry.partitions]
            stale = decisions.stale_restarts(ctx, self.isr_rejoins, entry)
            skipped = {str(tp): why for tp in tps
                       if (why := decisions.restartable(ctx, entry.broker, tp) or stale.get(tp))}
            d = decisions.restart_partitions(ctx, entry.broker, tps, stale)
            failed: set[TopicPartition] = set()
            for _ in range(REFUSED_WRITE_RETRIES + 1):
                failed = yield from self._execute(now_ms, d, retries=0)
                if not failed:
                    break
                d = decisions.restart_partitions(ctx, entry.broker, failed)  # on the re-read state
            restarted = (emitted.PartitionsRestartIncomplete if failed
                         else emitted.PartitionsRestarted)
            yield self._emit(restarted(
                entry=name, broker=entry.broker, log_dir=entry.log_dir,
                broker_epoch=entry.broker_epoch,
                partitions=[str(tp) for tp in sorted(tps) if str(tp) not in skipped],
                skipped=skipped, refused=[str(tp) for tp in sorted(failed)]))
            if failed:
                continue
            # the fence's start: where each replica was restarted (decisions/restarts.py)
            self.isr_rejoins.restarted(ctx, entry.broker,
                                       [tp for tp in tps if str(tp) not in skipped])
            yield effects.DeleteRestartEntry(name, ctx.epoch_zk_version)

    # ========================================================= unclean recovery (design.md#kip-966)

    def _replica_log_info_response(self, ev: events.ReplicaLogInfoResponse) -> Handler:
        if ev.answers is None:
            yield self._emit(emitted.ReplicaLogInfoFailed(
                broker=ev.broker_id, broker_epoch=ev.broker_epoch, error=ev.error))
        self.urm.answered(ev.query_id, ev.broker_id, ev.broker_epoch,
                          None if ev.answers is None else dict(ev.answers), ev.now_ms)

    def _recoveries(self, now_ms: float) -> Handler:
        """KIP-966's Unclean Recovery Manager, after every event: drop the tasks whose
        partition no longer needs them, elect the ones that may choose, ask what is still to
        be asked (one GetReplicaLogInfo per broker), and set the timer for the next wait that
        ends. design.md#kip-966: "the controller elects the replica with the highest leader epoch
        and the longest log end offset"."""
        urm, ctx, now = self.urm, self.ctx, now_ms  # the event's time
        if not urm.tasks:
            return
        again: list[TopicPartition] = []
        for tp, task in sorted(urm.tasks.items()):
            why = decisions.obsolete(ctx, task)
            if why is None:
                continue
            reason, elect = why
            urm.drop(tp)
            if elect:
                again.append(tp)
            yield self._finished(now_ms, task, "dropped", reason=reason)
            led = ctx.leadership.get(tp)
            code = ErrorCode.NONE if led is not None and led.leader in ctx.live_brokers \
                else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
            yield from self._answer_waiters(task, code, "" if code == ErrorCode.NONE
                                            else f"Unclean recovery of {tp} ended: {reason}")
        if again:
            yield from self._execute(now_ms, decisions.elect_offline_partitions(ctx))
        choices = urm.choices(ctx, now)
        if choices:
            for c in choices:
                urm.drop(c.task.tp)
            failed = yield from self._execute(now_ms, decisions.elect_recovered(ctx, choices))
            for c in choices:
                tp = c.task.tp
                if tp in failed:
                    yield self._finished(now_ms, c.task, "failed",
                                         reason="the state write was refused")
                    yield from self._answer_waiters(c.task, ErrorCode.UNKNOWN_SERVER_ERROR,
                                                    "the partition state write failed")
                    continue
                yield self._finished(now_ms, c.task, "elected", leader=c.leader,
                                     leader_epoch=ctx.leadership[tp].leader_epoch,
                                     offsets_discarded=c.offsets_discarded)
                yield from self._answer_waiters(c.task, ErrorCode.NONE, "")
        for task in urm.exhausted(ctx.live_ids):
            urm.drop(task.tp)
            yield self._finished(now_ms, task, "failed", reason="no live replica answered usably")
            yield from self._answer_waiters(
                task, ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                f"Unclean recovery of {task.tp} failed: no live replica could report its log")
        eligible = ctx.eligible_ids
        live = {b: reg.epoch for b, reg in ctx.live_brokers.items() if b in eligible}
        for q in urm.queries(live, now):
            yield effects.QueryReplicaLogs(q.query_id, q.broker_id, q.broker_epoch, tuple(
                (tp, ctx.topic_id(tp.topic)) for tp in q.partitions))
        due = urm.next_deadline_ms(now)
        if due is not None:
            yield effects.SetTimer(UNCLEAN_RECOVERY, max(0.0, (due - now) / 1000))

    def _finished(self, now_ms: float, task: decisions.RecoveryTask, outcome: str,
                  **fields: Any) -> effects.Emit:
        """The event that ends a recovery task: the candidates, what each answered, the
        outcome (the shell counts replog_unclean_recoveries_total{strategy,outcome})."""
        answers = {str(b): {"last_written_leader_epoch": i.last_written_leader_epoch,
                            "log_end_offset": i.log_end_offset, "error": i.error.name}
                   for b, i in sorted(task.replies.items())}
        return self._emit(emitted.UncleanRecoveryFinished(
            partition=str(task.tp), strategy=str(task.strategy), forced=task.forced,
            outcome=outcome, candidates=list(task.replicas), answers=answers,
            waited_ms=round(now_ms - task.started_ms), **fields))

    def _answer_waiters(self, task: decisions.RecoveryTask, code: ErrorCode, message: str
                        ) -> Handler:
        """ElectLeaders(UNCLEAN) callers waiting for this task: answered once every
        partition they asked for has its result."""
        for rid in task.waiters:
            results = self._pending_elections.get(rid)
            if results is None:
                continue
            results[task.tp] = events.ElectionResult(task.tp, code, message)
            if all(r is not None for r in results.values()):
                del self._pending_elections[rid]
                yield effects.Reply(rid, list(results.values()), await_deliveries=True)
