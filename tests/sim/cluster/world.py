"""One seeded world: the real controller core (tests/sim/driver.py), N simulated brokers
(broker_model.py: the real replication rules over real Logs on memfs), an in-memory network,
an injected clock and a fault schedule, all driven by one ``random.Random(seed)``.

    python -m tests.sim cluster --seed N [--steps M]      replay one seed (prints its steps)
    python -m tests.sim cluster --seeds A-B [--steps M]   sweep

A step is one action from the fault schedule - produce with acks 0/1/all, a broker's power
loss, process kill (kill -9: the page cache survives), clean (controlled) shutdown or restart,
a ZooKeeper session loss, a slow replica, a controller crash after a chosen number of effects,
min ISR moved up or down through a topic override or the dynamic broker default
(/config/brokers/<default>), ELR switched on (the controller restarts with it), a
reassignment or its cancel, a preferred or an unclean election, (profile "stale_requests") a
replica moved away and back with its StopReplica(delete) handled late, and (profile "jbod",
brokers with two log dirs) a log dir's failure - followed by one tick: the
clock moves 100 ms, due messages are delivered, the brokers run their fetchers, ISR
expiration, AlterPartition sender, deferred epoch writes and checkpoints, and the controller
handles what arrived. The network delays, reorders, duplicates and drops follower Fetch and
its answer, AlterPartition and its answer, and GetReplicaLogInfo; controller requests keep the
controller channel's order per broker (they are delayed and duplicated, and lost only with
the controller or broker that was to send or receive them).

After the last step the faults heal (every broker restarts, a controller is elected, no more
drops) and the world runs quiet ticks: liveness is checked then. The invariants are in
invariants.py; a failure names the seed and the step, and ``shrink`` finds the shortest step
prefix that still fails.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from broker.delayed_produce import ProduceWait
from broker.restart_notifier import restart_entry
from broker.servicer import leader_and_isr_request, stop_replica_request, update_metadata_request
from broker.storage.log import LogConfig
from common import zk_layout as zl
from common.controller_requests import LeaderAndIsrRequest
from common.errors import ErrorCode, RequestError
from common.names import TopicPartition
from common.zk_layout import NO_LEADER
from controller import decisions as D
from controller import effects as X
from controller import events as E
from controller.request_pb import request_pb
from controller.store import WatchedEvent
from tests.sim.cluster.broker_model import SimBroker, SimFetch
from tests.sim.cluster.invariants import Invariants, InvariantViolation
from tests.sim.driver import Crashed, Driver

TICK_MS = 100
HEAL_TICKS = 150  # liveness bound: quiet ticks after the faults heal
MIN_ISR = "min.insync.replicas"

__all__ = ["InvariantViolation", "World", "run_seed", "shrink"]


@dataclass(order=True)
class _Msg:
    at: int
    seq: int
    what: str = field(compare=False)
    deliver: Callable[[], None] = field(compare=False)


class Network:
    """Messages in flight, delivered by time then by send order (so equal times keep FIFO)."""

    def __init__(self, world: World):
        self.w = world
        self.heap: list[_Msg] = []
        self.seq = 0
        self.channel_at: dict[tuple, int] = {}  # ordered channel -> last delivery time
        self.lossy = True

    def send(self, what: str, deliver: Callable[[], None], *, channel: tuple | None = None,
             lossy: bool = True, slow: bool = False,
             on_loss: Callable[[], None] | None = None) -> None:
        """``on_loss``: what the sender sees when the message or its answer is lost (an RPC
        deadline), delivered after a timeout; None: the sender's own timer notices."""
        w = self.w
        rng = w.rng
        if lossy and self.lossy and rng.random() < 0.05:
            if on_loss is not None:
                self._push(w.now_ms + 1000, f"{what} lost", on_loss)
            return  # dropped
        at = w.now_ms + rng.choice((0, 0, 50, 100, 200, 400))
        if slow:
            at += rng.choice((1000, 2000, 3000))
        if channel is not None:
            at = max(at, self.channel_at.get(channel, 0))
            self.channel_at[channel] = at
        self._push(at, what, deliver)
        if self.lossy and rng.random() < 0.03:  # a retry whose first try got through
            self._push(at + (0 if channel is not None else rng.choice((0, 100, 300))), what,
                       deliver)

    def _push(self, at: int, what: str, deliver: Callable[[], None]) -> None:
        self.seq += 1
        heapq.heappush(self.heap, _Msg(at, self.seq, what, deliver))

    def deliver_due(self) -> None:
        while self.heap and self.heap[0].at <= self.w.now_ms:
            heapq.heappop(self.heap).deliver()


# Fault-schedule profiles: the same faults, weighted towards one window. "default" is the
# sweep's; the others let the planted-bug self-test reach a narrow window in few seeds.
PROFILES: dict[str, dict] = {
    "default": {},
    # defect 5's window (World._lead_after_truncation composes it): a leader's flushed,
    # checkpointed acks=1 suffix is truncated when it comes back as a follower, it leads
    # again, appends across a segment roll (2-3 batches a segment) without reaching
    # flush.messages, and dies before its deferred epoch write and its next checkpoint
    "truncation": {"elr": 0.0, "rf": (2, 3), "flush": (5, 6), "segment_bytes": (160, 240),
                   "checkpoint_ms": (5000, 8000), "deferred_ms": (2000, 4000),
                   "acks": (1, 1, 1, -1),
                   "weights": {"lead_after_truncation": 3, "leader_churn": 1, "bounce": 1,
                               "controlled_shutdown": 1, "restart": 4,
                               "power_loss": 0, "reassign": 0.5, "cancel": 0.2,
                               "topic_min_isr": 0.2, "default_min_isr": 0.2,
                               "flaky_controller": 0.2, "enable_elr": 0}},
    # defect 1's window: ELR on, min ISR 2, RF 3; slow replicas leave the ISR (into the
    # ELR), acks=1 writes go on, one catches up and its expansion is in flight or refused
    "elr_window": {"elr": 1.0, "min_isr": (2,), "rf": (3,), "acks": (1, 1, -1),
                   "weights": {"slow_replica": 5, "power_loss": 0, "topic_min_isr": 0,
                               "default_min_isr": 0, "flaky_controller": 0,
                               "controller_crash": 0.3, "reassign": 0.3, "cancel": 0.1,
                               "leader_churn": 0, "bounce": 0.3}},
    # defect 4's window: moves that remove replicas, with a controller that may die between
    # any two of its effects (between steps 4 and 5)
    "reassignment": {"rf": (2, 3), "flaky_p": 0.3, "flaky_ms": (3000, 8000),
                     "weights": {"reassign": 6, "flaky_controller": 4,
                                               "cancel": 1, "power_loss": 0,
                                               "topic_min_isr": 0, "default_min_isr": 0,
                                               "leader_churn": 0}},
    # KIP-570's window (World._move_away_and_back): a replica moved away and back, the
    # StopReplica(delete) of the move away handled late, after the move back
    "stale_requests": {"rf": (2, 3),
                       "weights": {"move_away_and_back": 4, "reassign": 2, "cancel": 1,
                                   "power_loss": 0, "topic_min_isr": 0,
                                   "default_min_isr": 0, "leader_churn": 0.5}},
    # JBOD (KIP-112, design.md#jbod): two log dirs a broker, partitions placed across them; a dir
    # fails (its replicas go offline, /restart_partitions entries - sometimes written twice -
    # re-create them in the other dir, or the broker halts with its last dir) and comes back
    # at the broker's next start, its lost copies set aside
    "jbod": {"log_dirs": ("/data0", "/data1"), "rf": (2, 3),
             "weights": {"log_dir_failure": 3, "bounce": 1.5, "restart": 5}},
}


class World:
    def __init__(self, seed: int, steps: int = 60, *, profile: str = "default",
                 verbose: bool = False):
        self.seed = seed
        self.steps = steps
        self.rng = rng = random.Random(seed)
        self.verbose = verbose
        self.profile = prof = PROFILES[profile]
        self.now_ms = 0
        self.log_version = 0
        self.lag_max_ms = 1000
        self.fetch_backoff_ms = 200
        self.fetch_timeout_ms = 1500
        self.broker_default_config: dict[str, str] = {}
        self.elr = rng.random() < prof.get("elr", 0.6)
        self.static_min_isr = rng.choice(prof.get("min_isr", (1, 2, 2, 3)))
        config = {MIN_ISR: self.static_min_isr, "eligible.leader.replicas.enable": self.elr,
                  "unclean.recovery.timeout.ms": 3000}
        self.d = Driver(config=config, rng=random.Random(rng.random()))
        self.d.on_effect = self._on_effect
        self.net = Network(self)
        flush = rng.choice(prof.get("flush", (1, 4, (1 << 63) - 1)))
        log_config = LogConfig(segment_bytes=rng.choice(prof.get("segment_bytes",
                                                                 (300, 600, 4096))),
                               flush_interval_messages=flush)
        self.broker_ids = tuple(range(1, rng.choice((3, 4, 4, 5)) + 1))
        dirs = prof.get("log_dirs", ("/data",))
        self.brokers = {b: SimBroker(b, self.static_min_isr, log_config, self, log_dirs=dirs)
                        for b in self.broker_ids}
        # /brokers/lost_replicas/<id>: broker -> log dir -> the copies it lost there
        self.lost_replicas: dict[int, dict[str, set[TopicPartition]]] = {}
        self.incarnation = dict.fromkeys(self.broker_ids, 0)
        self.slow_until = dict.fromkeys(self.broker_ids, 0)
        self.sessionless: dict[int, int] = {}  # broker -> when it re-registers
        self.next_election: int | None = None
        self.flaky_until = 0  # until then each controller effect may be its last
        self.sent_seen = 0
        self.topic_no = 0
        self.produced = 0
        # replica.high.watermark.checkpoint.interval.ms, on the simulation's compressed time
        # scale (replica.lag.time.max.ms is 1 s here against Kafka's 30 s)
        self.checkpoint_ms = rng.choice(prof.get("checkpoint_ms", (300, 1000, 3000)))
        self.next_checkpoint = dict.fromkeys(self.broker_ids, self.checkpoint_ms)
        self.next_shrink = 0
        # _move_away_and_back: (broker, partition) whose StopReplica(delete) is copied, and
        # the copies held back
        self.hold_stop: tuple[int, TopicPartition] | None = None
        self.held_stops: list = []
        self.log: list[str] = []
        self.step_no, self.action = -1, "setup"
        self.inv = Invariants(self)

    # ------------------------------------------------------------------ running

    def say(self, text: str) -> None:
        self.log.append(f"{self.now_ms:>7} {text}")

    def run(self) -> World:
        d = self.d
        d.elect()
        for b in self.broker_ids:
            self._start_broker(b)
        self._settle()
        for _ in range(self.rng.randint(1, 3)):
            self._create_topic()
        for _ in range(5):
            self.tick()
        for i in range(self.steps):
            action = self._pick()
            self.step_no, self.action = i, action.__name__.lstrip("_")
            self.say(f"step {i}: {self.action}")
            action()
            self.tick()
            self.inv.check()
        self.heal()
        return self

    def heal(self) -> None:
        """The last fault heals: every broker back, a controller, no more losses; then
        every partition must have a leader and every replica be back in the ISR within
        HEAL_TICKS ticks."""
        self.step_no, self.action = self.steps, "heal"
        self.net.lossy = False
        self.slow_until = dict.fromkeys(self.broker_ids, 0)
        if self.d.core is None:
            self.next_election = self.now_ms
        for b in self.broker_ids:
            if not self.brokers[b].alive:
                self._start_broker(b)
        for i in range(HEAL_TICKS):
            self.tick()
            self.inv.check()
            if self.inv.healthy():
                return
            if i == HEAL_TICKS // 3:
                self._operator_unclean_elections()
        self.inv.fail(f"liveness: {HEAL_TICKS} ticks after the faults healed, "
                      f"{self.inv.unhealthy()}")

    def _operator_unclean_elections(self) -> None:
        """A partition whose last in-sync copy died with its log dir stays offline (design.md#jbod,
        as Kafka) until an operator accepts the loss: kafka-leader-election
        --election-type unclean, asked once the rest of the cluster has healed."""
        tree = self.d.tree
        for tp in sorted(self.inv.lost_with_dir):
            s = tree.states.get(tp)
            if s is not None and tp.topic not in tree.delete_topics and \
                    s.leader == NO_LEADER and not s.isr and not getattr(s, "elr", ()) and \
                    self.d.core is not None:
                self.say(f"operator: unclean election for {tp}, lost with a log dir")
                self.inv.unclean_asked.add(tp)
                self.d.request(E.ElectLeaders(election_type=D.ElectionType.UNCLEAN,
                                              partitions=(tp,)))
                self._settle()

    def _pick(self) -> Callable[[], None]:
        actions = [
            (self._produce, 14), (self._nothing, 4), (self._power_loss, 1),
            (self._kill9, 1), (self._controlled_shutdown, 1), (self._restart, 4),
            (self._session_loss, 1), (self._slow_replica, 1), (self._controller_crash, 1),
            (self._topic_min_isr, 1), (self._default_min_isr, 1), (self._enable_elr, 0.3),
            (self._flaky_controller, 0.7), (self._bounce, 1), (self._leader_churn, 0.3),
            (self._reassign, 1.5), (self._cancel, 0.5), (self._elect_preferred, 0.5),
            (self._elect_unclean, 0.3), (self._create_topic, 0.3),
            (self._lead_after_truncation, 0), (self._log_dir_failure, 0),
            (self._move_away_and_back, 0),
        ]
        weights = self.profile.get("weights", {})
        actions = [(a, weights.get(a.__name__.lstrip("_"), w)) for a, w in actions]
        actions = [(a, w) for a, w in actions if w > 0]
        total = sum(w for _, w in actions)
        x = self.rng.uniform(0, total)
        for a, w in actions:
            x -= w
            if x <= 0:
                return a
        return actions[-1][0]

    # ------------------------------------------------------------------ the controller

    def _settle(self) -> None:
        """Let the controller handle what is queued; a crash starts a failover."""
        d = self.d
        try:
            d.run()
        except Crashed as e:
            self.say(f"controller crashed: {e}")
            if d.core is not None:
                d.crash()
            self.next_election = self.now_ms + self.rng.choice((0, 100, 500, 1500))
        self._pump_controller()

    def _to_controller(self, make: Callable[[], E.Event | None], epoch: int | None = None
                       ) -> None:
        """Deliver an event to the controller (if it is still the one the answer is for)."""
        d = self.d
        if d.core is None or (epoch is not None and d.core.ctx.epoch != epoch):
            return
        ev = make()
        if ev is not None:
            d.post(ev)
            self._settle()

    def _pump_controller(self) -> None:
        """The controller channel: requests the core sent go out, in order per broker."""
        d = self.d
        while self.sent_seen < len(d.sent):
            s = d.sent[self.sent_seen]
            self.sent_seen += 1
            b = self.brokers[s.broker_id]
            if s.kind == "GetReplicaLogInfo":
                self._send_log_query(s.request, s.controller_epoch)
                continue
            if s.kind == "StopReplica" and self.hold_stop is not None and \
                    s.broker_id == self.hold_stop[0] and any(
                        p.delete_partition and TopicPartition(p.topic, p.partition)
                        == self.hold_stop[1] for p in s.request.partition_states):
                self.held_stops.append(s)  # _move_away_and_back delivers this copy late
            self.net.send(s.kind, lambda s=s, b=b: self._deliver_controller_request(b, s),
                          channel=(s.controller_epoch, s.broker_id), lossy=False)

    def _deliver_controller_request(self, b: SimBroker, s) -> None:
        if not b.alive:
            return
        epoch = s.controller_epoch
        try:
            if s.kind == "LeaderAndIsr":
                req: LeaderAndIsrRequest = leader_and_isr_request(request_pb(s.request))
                errors = {tp: c for tp, c in b.leader_and_isr(req).items()
                          if c != ErrorCode.NONE}
                if errors:
                    self._answer(lambda: E.LeaderAndIsrResponse(broker_id=b.broker_id,
                                                                errors=errors), epoch)
            elif s.kind == "UpdateMetadata":
                b.update_metadata(update_metadata_request(request_pb(s.request)))
            elif s.kind == "StopReplica":
                req = stop_replica_request(request_pb(s.request))
                results = b.apply_stop_replica(req)
                deleted = {p.tp for p in req.partition_states if p.delete_partition}
                if deleted:
                    errors = {tp: results[tp] for tp in deleted}
                    self._answer(lambda: E.StopReplicaResponse(broker_id=b.broker_id,
                                                               errors=errors), epoch)
        except RequestError as e:  # ReplicaManager._check_controller's refusal
            code = e.error_code
            if s.kind == "StopReplica":
                deleted = {TopicPartition(p.topic, p.partition)
                           for p in s.request.partition_states if p.delete_partition}
                if deleted:
                    self._answer(lambda: E.StopReplicaResponse(
                        broker_id=b.broker_id, errors=dict.fromkeys(deleted, code)), epoch)

    def _answer(self, make: Callable[[], E.Event], epoch: int) -> None:
        self.net.send("answer", lambda: self._to_controller(make, epoch), lossy=False)

    def _send_log_query(self, q: X.QueryReplicaLogs, epoch: int) -> None:
        b = self.brokers[q.broker_id]

        def failed(error: str) -> None:
            self._to_controller(lambda: E.ReplicaLogInfoResponse(
                query_id=q.query_id, broker_id=q.broker_id, broker_epoch=q.broker_epoch,
                answers=None, error=error), epoch)

        def at_broker() -> None:
            if not b.alive or not b.registered or b.broker_epoch != q.broker_epoch:
                self.net.send("log-info-error", lambda: failed("unreachable"), lossy=False)
                return
            answers = b.replica_log_info([tp for tp, _ in q.partitions])
            self.net.send("log-info", lambda: self._to_controller(
                lambda: E.ReplicaLogInfoResponse(query_id=q.query_id, broker_id=q.broker_id,
                                                 broker_epoch=q.broker_epoch,
                                                 answers=answers), epoch),
                on_loss=lambda: failed("deadline exceeded"))

        # the controller channel's GetReplicaLogInfo has a deadline: a lost request or answer
        # comes back as a failed RPC (answers None), as controller/channel.py reports it
        self.net.send("GetReplicaLogInfo", at_broker, on_loss=lambda: failed("deadline exceeded"))

    def _on_effect(self, eff) -> None:
        if self.now_ms < self.flaky_until and self.d.core is not None and \
                self.rng.random() < self.profile.get("flaky_p", 0.15):
            self.d.crash_after(0)  # this effect is the controller's last
        if isinstance(eff, X.Emit) and eff.name == "partitions_restarted":
            # a restart that took the last in-sync replica out (its log is gone): the
            # partition is offline until an operator accepts the loss (heal)
            for name in eff.fields["partitions"]:
                tp = TopicPartition.parse(name)
                s = self.d.tree.states.get(tp)
                if s is not None and s.leader == NO_LEADER and not s.isr \
                        and not getattr(s, "elr", ()):
                    self.inv.lost_with_dir.add(tp)
        if isinstance(eff, X.WritePartitionStates):
            for w in eff.writes:
                s = self.d.tree.states.get(w.tp)
                if s is not None and s.partition_epoch == w.new.partition_epoch \
                        and s.leader == w.new.leader:
                    self.inv.observe_state(w.tp, s)

    # ------------------------------------------------------------------ ticking

    def tick(self) -> None:
        self.now_ms += TICK_MS
        d = self.d
        d.now_ms = self.now_ms
        if d.core is None and self.next_election is not None and \
                self.now_ms >= self.next_election:
            self.next_election = None
            self.say("controller elected")
            try:
                d.elect()
            except Crashed:
                self.next_election = self.now_ms + 500
            self._settle()
        for b, at in sorted(self.sessionless.items()):
            if at <= self.now_ms:
                del self.sessionless[b]
                if self.brokers[b].alive:  # LogManager.registration_clean, as BrokerServer
                    self._register(b, clean=self.brokers[b].registration_clean)
        if d.core is not None:
            d.fire_timers()
            self._settle()
        self.net.deliver_due()
        shrink = self.now_ms >= self.next_shrink
        if shrink:
            self.next_shrink = self.now_ms + self.lag_max_ms // 2
        for bid in self.broker_ids:
            b = self.brokers[bid]
            if not b.alive:
                continue
            self._fetch_round(b)
            if shrink:
                b.maybe_shrink_isr()
            self._send_alter_partition(b)
            self._write_restart_entries(b)
            b.write_due_epochs()
            if self.now_ms >= self.next_checkpoint[bid]:
                self.next_checkpoint[bid] = self.now_ms + self.checkpoint_ms
                b.checkpoint()
            for w, state in b.settle_produces():
                if state is ProduceWait.ACKNOWLEDGED:
                    self.inv.acknowledged(b, w.tp, w.offset, w.value)
        self.inv.observe_brokers()

    def _fetch_round(self, b: SimBroker) -> None:
        for tp, s in sorted(b.fetching.items()):  # noqa: B007
            if s.in_flight is not None:
                if self.now_ms - s.sent_at < self.fetch_timeout_ms:
                    continue
                s.in_flight = None  # timed out: the fetcher tries again
                s.back_off()
            if not s.ready(self.now_ms):
                continue
            self.produced_fetch_id = getattr(self, "produced_fetch_id", 0) + 1
            fid = s.in_flight = self.produced_fetch_id
            s.sent_at = self.now_ms
            # the broker epoch the request carries is read when it is built: a fetch sent
            # before a restart reaches the leader with the old epoch (KIP-903)
            req = b.fetch_request(s)
            slow = self.slow_until[b.broker_id] > self.now_ms
            self.net.send("Fetch", lambda b=b, s=s, req=req, fid=fid,
                          inc=self.incarnation[b.broker_id]:
                          self._fetch_at_leader(b, inc, s, req, fid), slow=slow)

    def _fetch_at_leader(self, f: SimBroker, inc: int, s: SimFetch, req, fid: int) -> None:
        leader = self.brokers.get(s.leader_id)
        if leader is None or not leader.alive:
            return  # the follower times out
        answer = leader.serve_fetch(req)

        def back() -> None:
            if not f.alive or self.incarnation[f.broker_id] != inc or s.in_flight != fid:
                return
            s.in_flight = None
            f.process_fetch(s, answer)
        self.net.send("FetchAnswer", back)

    def _send_alter_partition(self, b: SimBroker) -> None:
        if b.alter_in_flight is not None:
            if self.now_ms - b.alter_sent_at < 2000:
                return
            b.requeue_alter_batch(b.alter_in_flight)  # timed out: retried as sent
            b.alter_in_flight = None
        if not b.alter._queue:
            return
        batch = b.take_alter_batch()
        if not batch:
            return
        b.alter_in_flight, b.alter_sent_at = batch, self.now_ms
        inc = self.incarnation[b.broker_id]
        items = tuple(D.AlterPartitionItem(
            tp, p.leader_epoch, tuple(zip(p.new_isr, p.broker_epochs)), p.partition_epoch,
            relinquish_leadership=p.kind == "relinquish") for tp, p in batch.items())
        broker_epoch = b.broker_epoch

        def at_controller() -> None:
            d = self.d
            if d.core is None:
                return  # the sender times out and retries
            rid = d.request(E.AlterPartition(broker_id=b.broker_id, broker_epoch=broker_epoch,
                                             items=items))
            self._settle()
            reply = d.replies.pop(rid, None)
            if reply is None or reply.error is not None:
                return  # a whole-request error: the sender retries (as on a gRPC error)
            self.net.send("AlterPartitionAnswer", lambda: answered(reply.value))

        def answered(answers) -> None:
            if not b.alive or self.incarnation[b.broker_id] != inc or \
                    b.alter_in_flight is not batch:
                return
            b.alter_in_flight = None
            b.apply_alter_answers(batch, answers)
        self.net.send("AlterPartition", at_controller)

    def _write_restart_entries(self, b: SimBroker) -> None:
        """RestartNotifier.run: the oldest queued report is written - its copies added to
        /brokers/lost_replicas/<id> under every dir offline now (record_lost_copies), then
        the sequential /restart_partitions entry - one ZooKeeper round trip later, retried
        while the broker has no session. A write may time out and land anyway: the retry
        then writes the entry a second time (what the entries' partition-epoch fence is
        for)."""
        n = b.restart_notifier
        if b.restart_in_flight or not n._queue or b.broker_id in self.sessionless \
                or not b.registered:
            return
        report = n._queue[0]
        entry = restart_entry(b.broker_id, b.broker_epoch, report.log_dir, report.partitions)
        offline = [d.path for d in b.dirs if not d.online]
        n._writing = b.restart_in_flight = True
        inc = self.incarnation[b.broker_id]
        twice = self.rng.random() < 0.1

        def landed() -> None:
            lost = self.lost_replicas.setdefault(b.broker_id, {})
            for d in offline:
                lost.setdefault(d, set()).update(TopicPartition(t, p) for t, p in entry.partitions)
            name = self.d.tree.add_restart_entry(zl.encode_restart_entry(entry))
            self.say(f"broker {b.broker_id} wrote {name}: {report.log_dir} "
                     f"{sorted(report.partitions.items())}")
            self._settle()
            if self.incarnation[b.broker_id] != inc or not n._queue or n._queue[0] is not report:
                return  # a process gone, or the network's duplicate of a write that landed
            n._writing = b.restart_in_flight = False
            if not twice:
                n._queue.pop(0)  # else: timed out, retried as it is (a second entry)
        self.net.send("RestartEntry", landed, lossy=False)

    def forget_lost_replicas(self, bid: int, log_dirs) -> None:
        """forget_lost_replicas: the dirs a start read drop out of the broker's record."""
        lost = self.lost_replicas.get(bid)
        if lost is not None:
            for d in log_dirs:
                lost.pop(d, None)
            if not lost:
                del self.lost_replicas[bid]

    # ------------------------------------------------------------------ brokers

    def _register(self, bid: int, clean: bool) -> None:
        b = self.brokers[bid]
        b.broker_epoch = self.d.register(bid, clean_shutdown=clean)
        b.registered = True
        self._settle()

    def rewrite_registration(self, bid: int, broker_epoch: int) -> None:
        """A controller handled ``bid``'s unclean start: the broker rewrites /brokers/ids/<id>
        to say clean at the same broker epoch (BrokerServer._rewrite_registration, a698ee5), a
        ZooKeeper set one round trip later, so a failover does not depose it again."""
        def write() -> None:
            tree = self.d.tree
            got = tree.brokers.get(bid)
            if got is None or got[0].epoch != broker_epoch or got[0].clean_shutdown:
                return  # the session it was for is gone: a re-registration says clean anyway
            tree.brokers[bid] = (replace(got[0], clean_shutdown=True), got[1])
            tree.fire(("broker", bid), WatchedEvent("CHANGED", f"/brokers/ids/{bid}"))
            self._settle()
        self.net.send("RegistrationRewrite", write, lossy=False)

    def _start_broker(self, bid: int) -> None:
        self.incarnation[bid] += 1
        b = self.brokers[bid]
        clean = b.start()
        self.say(f"broker {bid} starts ({'clean' if clean else 'unclean'})")
        self.sessionless.pop(bid, None)
        self._register(bid, clean)

    def _stop_broker(self, bid: int, how: str) -> None:
        b = self.brokers[bid]
        if how == "power loss" and not self.elr and b.log_config.flush_interval_messages > 1:
            # ZooKeeper-era Kafka (ELR off) leaves unflushed records to replication and has
            # no rule for a broker that comes back without them (KIP-966's motivation): a
            # power loss is modelled there only when every append is fsynced; otherwise the
            # process dies and the page cache survives.
            how = "kill -9"
        self.say(f"broker {bid} stops: {how}")
        self.sessionless.pop(bid, None)
        self.d.kill(bid)
        if how == "power loss":
            self.inv.before_power_loss(bid)
            b.power_loss()
        elif how in ("kill -9", "halt"):
            b.alive = False
            b._reset_process()
        else:
            b.shutdown()
        self._settle()

    def on_become_leader(self, b: SimBroker, tp: TopicPartition, epoch: int) -> None:
        self.inv.became_leader(b, tp, epoch)

    def on_replica_deleted(self, b: SimBroker, tp: TopicPartition) -> None:
        self.inv.replica_deleted(b, tp)

    # ------------------------------------------------------------------ actions

    def _live(self) -> list[int]:
        return [b for b in self.broker_ids if self.brokers[b].alive]

    def _dead(self) -> list[int]:
        return [b for b in self.broker_ids if not self.brokers[b].alive]

    def _partitions(self) -> list[TopicPartition]:
        return sorted(tp for tp in self.d.tree.states
                      if tp.topic not in self.d.tree.delete_topics)

    def _nothing(self) -> None:
        pass

    def _produce(self, tps: list[TopicPartition] | None = None) -> None:
        tps = tps or self._partitions()
        if not tps:
            return
        for _ in range(self.rng.randint(1, 3)):
            tp = self.rng.choice(tps)
            self._produce_to(tp, self.rng.choice(self.profile.get("acks",
                                                                  (0, 1, 1, -1, -1, -1))))

    def _produce_to(self, tp: TopicPartition, acks: int) -> None:
        """One batch of one record to the leader the controller names for ``tp``."""
        s = self.d.tree.states[tp]
        leader = self.brokers.get(s.leader)
        self.produced += 1
        value = f"{self.seed}.{self.produced}".encode()
        if leader is None or not leader.alive:
            return
        err, offset = leader.produce(tp, value, acks, timeout_ms=3000)
        self.say(f"produce {tp} acks={acks} -> broker {s.leader}: {err.name} {offset}")

    def _power_loss(self) -> None:
        live = self._live()
        if len(live) > 1:
            self._stop_broker(self.rng.choice(live), "power loss")

    def _kill9(self) -> None:
        live = self._live()
        if len(live) > 1:
            self._stop_broker(self.rng.choice(live), "kill -9")

    def _controlled_shutdown(self) -> None:
        live = self._live()
        if len(live) <= 1:
            return
        bid = self.rng.choice(live)
        b = self.brokers[bid]
        if self.d.core is not None and b.registered:
            rid = self.d.request(E.ControlledShutdown(broker_id=bid,
                                                      broker_epoch=b.broker_epoch))
            self._settle()
            self.d.replies.pop(rid, None)
            for _ in range(3):  # the moved leaderships reach the other brokers
                self.tick()
        if b.alive:
            self._stop_broker(bid, "clean shutdown")

    def _restart(self) -> None:
        dead = self._dead()
        if dead:
            self._start_broker(self.rng.choice(dead))

    def _session_loss(self) -> None:
        live = [b for b in self._live() if b not in self.sessionless]
        if live:
            bid = self.rng.choice(live)
            self.say(f"broker {bid} loses its ZooKeeper session")
            self.d.kill(bid)
            self.sessionless[bid] = self.now_ms + self.rng.choice((100, 500, 2000))
            self._settle()

    def _slow_replica(self) -> None:
        bid = self.rng.choice(self.broker_ids)
        self.slow_until[bid] = self.now_ms + self.rng.choice((2000, 5000))
        self.say(f"broker {bid} is slow")

    def _controller_crash(self) -> None:
        d = self.d
        if d.core is None:
            return
        if self.rng.random() < 0.5:
            self.say("controller crashes now")
            d.crash()
            self.next_election = self.now_ms + self.rng.choice((0, 100, 500, 1500))
        else:
            n = self.rng.randint(0, 12)
            self.say(f"controller will crash after {n} effects")
            d.crash_after(n)
            self.rng.choice((self._power_loss, self._restart, self._reassign,
                             self._topic_min_isr, self._controlled_shutdown))()

    def _flaky_controller(self) -> None:
        """For a while every controller effect may be its last: a controller killed between
        any two steps of a decision (a reassignment's steps 4 and 5,
        design.md#reassignment-case-3)."""
        self.flaky_until = self.now_ms + self.rng.choice(
            self.profile.get("flaky_ms", (500, 1500, 3000)))
        self.say("the controller may die at any effect for a while")
        self.rng.choice((self._reassign, self._power_loss, self._controlled_shutdown,
                         self._nothing))()

    def _leader_churn(self) -> None:
        """Correlated failures: leadership moves (a preferred election), then leaders die
        one after another while clients keep writing - the old leader has just truncated its
        unreplicated suffix as a follower when it is elected again."""
        before = dict(self.d.tree.states)
        self._produce(self._partitions())  # suffixes the followers have not fetched yet
        for _ in range(self.rng.choice((0, 1, 2))):
            self.tick()
        self._elect_preferred()
        for _ in range(3):
            for _ in range(self.rng.choice((0, 1, 2, 3))):
                self.tick()
            states = self.d.tree.states
            moved = sorted({s.leader for tp, s in states.items() if s.leader in self._live()
                            and tp in before and before[tp].leader != s.leader})
            leaders = moved or sorted({s.leader for s in states.values()
                                       if s.leader in self._live()})
            if len(self._live()) <= 1 or not leaders:
                return
            before = dict(states)
            self._stop_broker(self.rng.choice(leaders), "kill -9")
            for _ in range(self.rng.choice((0, 1, 2))):
                self.tick()
            states = self.d.tree.states
            self._produce([tp for tp, s in sorted(states.items())
                           if tp in before and before[tp].leader != s.leader])
            if self.rng.random() < 0.5:
                self._restart()

    def _ticks(self, choices: tuple[int, ...]) -> None:
        for _ in range(self.rng.choice(choices)):
            self.tick()

    def _lead_after_truncation(self) -> None:
        """The window of planted defect 5 (truncation_not_checkpointed), composed from
        ordinary faults (no tick of it is forced; each can miss, and the schedule goes on from
        wherever it stopped):
          1. leader L takes acks=1 writes its followers have not fetched, until its
             flush.messages flush syncs them, and the checkpoint job records that recovery
             point R (L.checkpoint is the job the tick runs, fired now);
          2. L dies (kill -9: its page cache survives) before any follower fetched them, and a
             follower F leads; F may take writes of its own;
          3. L comes back, truncates its suffix as F's follower - below R - and rejoins the
             ISR; F dies and the controller elects L again: its new epoch's start is deferred
             (replica_manager._assign_epochs);
          4. L appends a few batches across a segment roll and dies before the deferred write
             and before its next checkpoint, then restarts.
        Recovery re-adds epochs only from the segment holding the checkpointed recovery point
        (Kafka's LogLoader); unless the truncation checkpointed T (Kafka's
        LogManager.truncateTo), the new epoch comes back starting past it and the batches
        between carry an epoch the cache does not place them in."""
        d = self.d
        live = set(self._live())
        tps = [tp for tp in self._partitions() if d.core is not None
               and d.tree.states[tp].leader in live
               and len(set(d.tree.states[tp].isr) & live) >= 2
               and tp in self.brokers[d.tree.states[tp].leader].partitions]
        if not tps:
            return
        tp = self.rng.choice(tps)
        lid = d.tree.states[tp].leader
        leader = self.brokers[lid]
        log = leader.partitions[tp].log
        if log is None:
            return
        self.say(f"{tp}: leader {lid} takes a suffix, is flushed and checkpointed, dies")
        for n in range(12):  # 1: the suffix, until flush.messages syncs it
            self._produce_to(tp, 1)
            if n and log.unflushed_messages == 0:
                break
        if log.unflushed_messages:
            return
        leader.checkpoint()
        self.next_checkpoint[lid] = self.now_ms + self.checkpoint_ms
        self._stop_broker(lid, "kill -9")  # 2
        self._ticks((1, 2, 3))
        for _ in range(self.rng.choice((0, 0, 1))):
            self._produce_to(tp, 1)
        self._ticks((0, 1, 2))
        self._start_broker(lid)  # 3
        for _ in range(40):
            self.tick()
            if lid in d.tree.states[tp].isr or not leader.alive:
                break
        for _ in range(3):
            s = d.tree.states[tp]
            if s.leader == lid or lid not in s.isr or not leader.alive or \
                    s.leader not in self._live() or len(self._live()) <= 1:
                break
            self._stop_broker(s.leader, "kill -9")
            self._ticks((1, 2))
        for _ in range(5):
            p = leader.partitions.get(tp)
            if p is not None and p.is_leader:
                break
            self.tick()
        p = leader.partitions.get(tp)
        if not leader.alive or p is None or not p.is_leader:
            return
        self.say(f"{tp}: broker {lid} leads again at epoch {p.leader_epoch}")
        for _ in range(self.rng.randint(2, 4)):  # 4
            self._produce_to(tp, 1)
            self._ticks((0, 0, 1))
        if leader.alive:
            self._stop_broker(lid, "kill -9")
            self._ticks((0, 1, 2))
            self._start_broker(lid)

    def _move_away_and_back(self) -> None:
        """KIP-570's window, composed from ordinary steps: a follower R of a partition is
        moved away (a reassignment without it: the controller sends R StopReplica(delete) at
        the partition's leader epoch then) and back (R re-created by a LeaderAndIsr at a later
        epoch, catching up into the ISR); then a copy of the first StopReplica reaches R.
        The copy went out on a connection that failed: the controller resent the request on
        a new one and went on, while R still held the first copy (Kafka orders a broker's
        requests per connection only; its answer goes back on the dead connection, to no
        one). StopReplica's leader epoch (KIP-570, fencing.stop_replica_is_stale) is what
        keeps the copy from deleting a replica the ISR names again. Each phase can miss (a
        move that does not finish in time), and the schedule goes on from there. Only the
        StopReplica is copied: a late LeaderAndIsr after the deletion would re-create the
        replica at its old epoch, a gap no epoch fences (docs/simulation.md, Not modelled)."""
        d = self.d
        if d.core is None:
            return
        moving = set(d.core.ctx.reassigning_partitions())
        live = set(self._live())
        cands = []
        for tp in self._partitions():
            s = d.tree.states[tp]
            replicas = d.tree.topics[tp.topic].partitions[tp.partition]
            if tp in moving or s.leader not in live or len(replicas) < 2:
                continue
            cands += [(tp, r) for r in replicas if r != s.leader and r in s.isr and r in live]
        if not cands:
            return
        tp, rid = self.rng.choice(cands)
        replicas = tuple(d.tree.topics[tp.topic].partitions[tp.partition])
        self.say(f"move {tp} away from broker {rid} and back: {list(replicas)}")
        self.hold_stop, self.held_stops = (rid, tp), []
        try:
            self._reassign_to(tp, tuple(r for r in replicas if r != rid))
            if not self._tick_until(lambda: bool(self.held_stops), 20):
                return
        finally:
            self.hold_stop = None
        self._ticks((0, 1, 2))
        if d.core is None:
            return
        self._reassign_to(tp, replicas)
        self._tick_until(lambda: rid in d.tree.states[tp].isr, 40)
        b = self.brokers[rid]
        for s in self.held_stops:
            self.net.send("StopReplica (late copy)",
                          lambda s=s: self._deliver_late_stop(b, s), lossy=False)
        self.held_stops = []

    def _reassign_to(self, tp: TopicPartition, target: tuple[int, ...]) -> None:
        if self.d.core is not None:
            self.say(f"reassign {tp} -> {list(target)}")
            self.d.request(E.AlterReassignments(items=((tp, target),)))
            self._settle()

    def _tick_until(self, done: Callable[[], bool], ticks: int) -> bool:
        for _ in range(ticks):
            if done():
                return True
            self.tick()
        return done()

    def _deliver_late_stop(self, b: SimBroker, s) -> None:
        """A held copy of a StopReplica, handled as it is; its answer is lost with its
        connection."""
        if not b.alive:
            return
        self.say(f"broker {b.broker_id} handles a late copy of a StopReplica")
        try:
            b.apply_stop_replica(stop_replica_request(request_pb(s.request)))
        except RequestError:  # fenced, as ReplicaManager._check_controller refuses it
            pass

    def _log_dir_failure(self) -> None:
        """One log dir of one broker fails (design.md#jbod-step-2): its replicas go offline there
        and are reported for a restart; with no dir left the broker halts. Sometimes the
        broker is then stopped and started again, its dir back."""
        live = [b for b in self._live() if any(d.online for d in self.brokers[b].dirs)]
        if not live:
            return
        bid = self.rng.choice(live)
        b = self.brokers[bid]
        online = [d.path for d in b.dirs if d.online]
        path = self.rng.choice(online)
        if len(online) == 1 and len(self._live()) <= 1:
            return
        self.inv.before_log_dir_failure(b, path)
        lost = b.fail_log_dir(path, "Input/output error (simulated)")
        self.say(f"broker {bid}: log dir {path} fails, replicas offline: "
                 f"{[str(tp) for tp in lost]}")
        if b.halted is not None:
            self._stop_broker(bid, "halt")
            return
        self._ticks((0, 1, 3, 8))
        if self.rng.random() < 0.3 and b.alive:
            how = self.rng.choice(("kill -9", "clean shutdown"))
            self._stop_broker(bid, how)
            self._ticks((0, 1, 3))
            self._start_broker(bid)

    def _bounce(self) -> None:
        """A broker dies and comes straight back (before or after the controller saw it)."""
        live = self._live()
        if len(live) > 1:
            bid = self.rng.choice(live)
            self._stop_broker(bid, "kill -9" if self.rng.random() < 0.7 else "power loss")
            for _ in range(self.rng.choice((0, 1, 3))):
                self.tick()
            if not self.brokers[bid].alive:
                self._start_broker(bid)

    def _config_notice(self, topic: str | None) -> None:
        """A /config/changes notification reaches every live broker (and, for a topic, the
        controller's watch)."""
        for bid in self._live():
            b = self.brokers[bid]
            self.net.send("ConfigChange", lambda b=b: b.config_changed(topic) if b.alive
                          else None, lossy=False)
        if topic is not None:
            self.d.tree.fire(("config", topic), WatchedEvent("CHANGED", topic))
        self._settle()

    def _topic_min_isr(self) -> None:
        topics = sorted(self.d.tree.topics)
        if not topics:
            return
        t = self.rng.choice(topics)
        cfg = self.d.tree.configs.setdefault(t, {})
        if self.rng.random() < 0.25:
            cfg.pop(MIN_ISR, None)
        else:
            cfg[MIN_ISR] = str(self.rng.randint(1, 3))
        self.say(f"topic {t}: {MIN_ISR}={cfg.get(MIN_ISR)}")
        self._config_notice(t)

    def _default_min_isr(self) -> None:
        cfg = self.broker_default_config
        if self.rng.random() < 0.25:
            cfg.pop(MIN_ISR, None)
        else:
            cfg[MIN_ISR] = str(self.rng.randint(1, 3))
        self.say(f"brokers <default>: {MIN_ISR}={cfg.get(MIN_ISR)}")
        write = getattr(self.d.tree, "write_broker_default_config", None)
        if write is not None:  # the controller watches /config/brokers/<default> (defect 2)
            write(cfg)
        self._config_notice(None)

    def _enable_elr(self) -> None:
        if self.elr:
            return
        self.elr = True
        self.d.config["eligible.leader.replicas.enable"] = True
        self.say("ELR on: the controller restarts with it")
        if self.d.core is not None:
            self.d.crash()
        self.next_election = self.now_ms

    def _reassign(self) -> None:
        tps = self._partitions()
        if not tps or self.d.core is None:
            return
        tp = self.rng.choice(tps)
        rf = len(self.d.tree.topics[tp.topic].partitions[tp.partition])
        target = tuple(self.rng.sample(self.broker_ids, min(len(self.broker_ids),
                                                            max(1, rf + self.rng.choice(
                                                                (-1, 0, 0, 1))))))
        self.say(f"reassign {tp} -> {list(target)}")
        self.d.request(E.AlterReassignments(items=((tp, target),)))
        self._settle()

    def _cancel(self) -> None:
        moving = self.d.core.ctx.reassigning_partitions() if self.d.core else []
        if moving:
            tp = self.rng.choice(sorted(moving))
            self.say(f"cancel the move of {tp}")
            self.d.request(E.AlterReassignments(items=((tp, None),)))
            self._settle()

    def _elect_preferred(self) -> None:
        if self.d.core is not None:
            self.d.request(E.ElectLeaders(election_type=D.ElectionType.PREFERRED))
            self._settle()

    def _elect_unclean(self) -> None:
        tps = self._partitions()
        if tps and self.d.core is not None:
            tp = self.rng.choice(tps)
            self.say(f"unclean election asked for {tp}")
            self.inv.unclean_asked.add(tp)
            self.d.request(E.ElectLeaders(election_type=D.ElectionType.UNCLEAN,
                                          partitions=(tp,)))
            self._settle()

    def _create_topic(self) -> None:
        if self.d.core is None:
            return
        self.topic_no += 1
        rf = min(len(self.broker_ids), self.rng.choice(self.profile.get("rf", (1, 2, 3))))
        parts = self.rng.randint(1, 2)
        self.say(f"create t{self.topic_no} partitions={parts} rf={rf}")
        self.d.request(E.CreateTopics(topics=(
            E.NewTopic(f"t{self.topic_no}", num_partitions=parts, replication_factor=rf),)))
        self._settle()


def run_seed(seed: int, steps: int = 60, profile: str = "default") -> World:
    return World(seed, steps, profile=profile).run()


def shrink(seed: int, steps: int, profile: str = "default"
           ) -> tuple[int, InvariantViolation] | None:
    """The shortest step prefix of ``seed`` found to still fail (None: it passes), by
    bisection. The same seed with fewer steps replays the same first steps, then heals."""
    try:
        run_seed(seed, steps, profile)
        return None
    except InvariantViolation as e:
        best = (steps, e)
    lo, hi = 0, best[0]
    while lo < hi:
        mid = (lo + hi) // 2
        try:
            run_seed(seed, mid, profile)
            lo = mid + 1
        except InvariantViolation as e:
            hi, best = mid, (mid, e)
    return best

