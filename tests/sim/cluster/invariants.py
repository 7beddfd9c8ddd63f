"""The cluster simulation's invariants, checked after every step (and every heal tick).

- Durability: every record acknowledged with acks=all, and every record ever exposed below a
  leader's HW, is in the log of every live replica the controller's current state lets
  become leader cleanly (ISR and ELR members), and in the log of every leader of its
  commit's leader epoch or a later one - unless an unclean election or a recovery was logged
  for the partition (then the ledger starts over). A power loss of every in-sync copy is such a recovery (the configuration allowed it).
- Replicas never differ below the smallest HW they both hold, and each replica's leader-epoch
  cache places every batch in the epoch the batch carries.
- A leader's HW never goes backwards within an epoch (one process life); one leader per
  partition epoch, over every broker that believes it leads.
- Controller and brokers agree on the effective min ISR, min(min.insync.replicas, RF), of
  every partition a broker leads at the controller's current partition epoch, once no config
  change notification is in flight.
- A replica the controller's ISR names is never deleted (its data is what the ISR vouches for).
- JBOD (design.md#jbod): a replica lost with its log dir counts as unreadable (as a dead broker's)
  until re-created; losing the last live in-sync copy that way is a recovery (the disk died).
  Once nothing is in flight that would act on a loss (no report queued or being written, no
  /restart_partitions entry, no LeaderAndIsr or refusal on its way), a live broker whose
  replica is offline is neither the controller's leader of it nor in its ISR or ELR: an
  offline replica is never elected, and none is left where a clean election could pick it.
- Liveness (World.heal): after the faults heal, every partition has a live leader and every
  replica is in the ISR within a bounded number of ticks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from common import records as rec
from common.names import TopicPartition
from common.zk_layout import LEADER_RECOVERING, NO_LEADER, LeaderAndIsr

if TYPE_CHECKING:
    from tests.sim.cluster.broker_model import SimBroker
    from tests.sim.cluster.world import World


class InvariantViolation(AssertionError):
    pass


class Invariants:
    def __init__(self, world: World):
        self.w = world
        self.committed: dict[TopicPartition, dict[int, bytes]] = {}
        # the leader epoch each committed offset was first committed in (became_leader)
        self.committed_in: dict[TopicPartition, dict[int, int]] = {}
        self.clean_from: dict[TopicPartition, int] = {}  # leader epoch of the last reset
        self.last_state: dict[TopicPartition, LeaderAndIsr] = {}
        self.leader_hw: dict[tuple, int] = {}
        self.leader_of_epoch: dict[tuple[TopicPartition, int], int] = {}
        self.unclean_asked: set[TopicPartition] = set()
        self.lost_with_dir: set[TopicPartition] = set()  # its last in-sync copy was
        self.pending: list[str] = []
        self._contents: dict[tuple[int, TopicPartition], tuple[int, dict[int, bytes]]] = {}
        self._batch_epochs: dict[tuple[int, TopicPartition], list[tuple[int, int]]] = {}
        self._epochs_checked: dict[tuple[int, TopicPartition], tuple] = {}

    # ------------------------------------------------------------------ helpers

    def fail(self, what: str) -> None:
        w = self.w
        raise InvariantViolation(f"seed {w.seed} step {w.step_no} ({w.action}) "
                                 f"t={w.now_ms}ms: {what}")

    def content(self, b: SimBroker, tp: TopicPartition) -> dict[int, bytes]:
        log = b.logs.get(tp)
        if log is None or log.closed:
            return {}
        version = b.log_versions.get(tp, 0)
        key = (b.broker_id, tp)
        cached = self._contents.get(key)
        if cached is not None and cached[0] == version:
            return cached[1]
        values: dict[int, bytes] = {}
        epochs: list[tuple[int, int]] = []  # (base offset, partition leader epoch) per batch
        offset = log.log_start_offset
        while offset < log.log_end_offset:  # a read stops at its segment's end
            data = log.read(offset, 1 << 30)
            batches = list(rec.iter_batches(data))
            if not batches:
                break
            for batch in batches:
                h = batch.header
                epochs.append((h.base_offset, h.partition_leader_epoch))
                values.update((r.offset, r.value) for r in rec.decode_records(batch.data, h))
            offset = batches[-1].header.next_offset
        self._contents[key] = (version, values)
        self._batch_epochs[key] = epochs
        return values

    def _epoch_cache_agrees(self, b: SimBroker, tp: TopicPartition) -> None:
        """The leader-epoch cache places every batch in the epoch the batch carries: what
        OffsetForLeaderEpoch and the diverging-epoch answers (KIP-101/279/595) rest on. A
        deferred entry lost below the recovery point (a truncation not checkpointed) breaks it."""
        self.content(b, tp)
        cache = b.logs[tp].epoch_cache
        for base, epoch in self._batch_epochs.get((b.broker_id, tp), ()):
            placed = cache.epoch_for_offset(base)
            if placed != epoch:
                self.fail(f"{tp}: broker {b.broker_id}'s leader-epoch cache "
                          f"{cache.entries} places offset {base} in epoch {placed}; its batch "
                          f"carries epoch {epoch}")

    def _reset(self, tp: TopicPartition, epoch: int, why: str) -> None:
        self.w.say(f"{tp}: ledger starts over at leader epoch {epoch} ({why})")
        self.committed[tp] = {}
        self.committed_in[tp] = {}
        self.clean_from[tp] = epoch

    def _commit(self, tp: TopicPartition, epoch: int, offset: int, value: bytes, how: str
                ) -> None:
        if epoch < self.clean_from.get(tp, -1):
            return  # a leader from before an unclean election: its data may be gone
        s = self.w.d.tree.states.get(tp)
        if s is None or s.leader_epoch != epoch:
            # A deposed leader that has not heard yet (a zombie: its session expired, or the
            # LeaderAndIsr is in flight) still answers; with an ISR of itself at min ISR 1
            # it acknowledges and exposes records the new leader never had. Kafka promises
            # nothing for them (acks=all means the ISR the leader knew), so neither does this.
            return
        led = self.committed.setdefault(tp, {})
        old = led.get(offset)
        if old is not None and old != value:
            self.fail(f"{tp} offset {offset}: {how} {value!r}, but {old!r} was committed there")
        led[offset] = value
        self.committed_in.setdefault(tp, {}).setdefault(offset, epoch)

    def _missing(self, b: SimBroker, tp: TopicPartition, epoch: int | None = None
                 ) -> list[int]:
        """Committed offsets of ``tp`` that ``b`` lacks; with ``epoch``, only those committed
        in that leader epoch or an earlier one."""
        led = self.committed.get(tp)
        if not led:
            return []
        have = self.content(b, tp)
        since = self.committed_in.get(tp, {})
        return sorted(o for o, v in led.items() if have.get(o) != v
                      and (epoch is None or since.get(o, -1) <= epoch))

    # ------------------------------------------------------------------ events

    def observe_state(self, tp: TopicPartition, s: LeaderAndIsr) -> None:
        """A partition state the controller wrote."""
        old = self.last_state.get(tp)
        self.last_state[tp] = s
        if s.leader == NO_LEADER or old is None:
            return
        if s.leader_recovery_state == LEADER_RECOVERING and \
                old.leader_recovery_state != LEADER_RECOVERING:
            self._reset(tp, s.leader_epoch, f"unclean election of {s.leader} (RECOVERING)")
        elif s.leader != old.leader and s.leader not in old.isr and \
                s.leader not in getattr(old, "elr", ()):
            self._reset(tp, s.leader_epoch, f"{s.leader} elected outside ISR {list(old.isr)}")

    def acknowledged(self, b: SimBroker, tp: TopicPartition, offset: int, value: bytes) -> None:
        p = b.partitions.get(tp)
        have = self.content(b, tp).get(offset)
        if have != value:
            self.fail(f"broker {b.broker_id} acknowledged {value!r} at {tp} offset {offset} "
                      f"(acks=all) but its log holds {have!r} there")
        self._commit(tp, p.leader_epoch if p else -1, offset, value, "acks=all acknowledged")

    def became_leader(self, b: SimBroker, tp: TopicPartition, epoch: int) -> None:
        if epoch < self.clean_from.get(tp, -1):
            return
        # A LeaderAndIsr that arrives after the controller has moved on (a broker that lost
        # its ZooKeeper session still applies what was in flight with its broker epoch: seed
        # 16713) makes a leader of an older epoch. It owes only what was committed by then:
        # a record committed in a later epoch was never promised to it, and as a zombie it
        # can commit nothing (its AlterPartition is fenced, _commit ignores it).
        missing = self._missing(b, tp, epoch)
        if missing:
            self.pending.append(f"{tp}: broker {b.broker_id} became leader at epoch {epoch} "
                                f"without committed offsets {missing[:8]}")

    def replica_deleted(self, b: SimBroker, tp: TopicPartition) -> None:
        tree = self.w.d.tree
        s = tree.states.get(tp)
        if s is not None and tp.topic not in tree.delete_topics and b.broker_id in s.isr:
            self.pending.append(f"{tp}: broker {b.broker_id} deleted its log while the ISR "
                                f"{list(s.isr)} names it")

    def before_power_loss(self, bid: int) -> None:
        """If no other live ISR/ELR member holds everything committed, the power loss of
        ``bid`` may take committed records with it: Kafka's durability needs one in-sync copy
        to survive. Logged as a recovery."""
        tree = self.w.d.tree
        for tp in sorted(self.committed):
            s = tree.states.get(tp)
            if s is None or not self.committed[tp]:
                continue
            others = (set(s.isr) | set(getattr(s, "elr", ()))) - {bid}
            if not any(self.w.brokers[o].alive and not self._missing(self.w.brokers[o], tp)
                       for o in others):
                self._reset(tp, s.leader_epoch + 1, f"power loss of broker {bid}, the last "
                                                    f"in-sync copy")

    def before_log_dir_failure(self, b: SimBroker, path: str) -> None:
        """``b``'s dir ``path`` is about to fail: as for a power loss, if no other live,
        readable ISR/ELR member holds everything committed of a partition whose copy is lost
        there, the configuration let it be lost (one disk held it). Logged as a recovery."""
        tree = self.w.d.tree
        for tp in sorted(tp for tp, d in b.dir_of.items() if d == path):
            s = tree.states.get(tp)
            if s is None:
                continue
            others = (set(s.isr) | set(getattr(s, "elr", ()))) - {b.broker_id}
            if not others:
                self.lost_with_dir.add(tp)  # offline until an operator accepts the loss
            if not self.committed.get(tp):
                continue
            if not any(self.w.brokers[o].alive and not self._missing(self.w.brokers[o], tp)
                       for o in others):
                self._reset(tp, s.leader_epoch + 1, f"log dir {path} of broker "
                                                    f"{b.broker_id}, the last in-sync copy")

    def _offline_replicas_out(self, live: set[int]) -> None:
        """A replica lost with its log dir is not left where it can be elected cleanly, once
        nothing in flight would still act on its loss."""
        w = self.w
        tree = w.d.tree
        if tree.restart_entries or any(m.what in ("RestartEntry", "LeaderAndIsr", "answer")
                                       for m in w.net.heap):
            return
        for bid in sorted(live):
            b = w.brokers[bid]
            if not b.offline_replicas or b.restart_notifier._queue or bid in w.sessionless:
                continue
            for tp in sorted(b.offline_replicas):
                s = tree.states.get(tp)
                if s is None or tp.topic in tree.delete_topics:
                    continue
                if bid == s.leader or bid in s.isr or bid in getattr(s, "elr", ()):
                    self.fail(f"{tp}: broker {bid}'s replica is offline (lost with "
                              f"{b.offline_replicas[tp]}) yet the controller's state "
                              f"(leader {s.leader} isr={list(s.isr)} "
                              f"elr={list(getattr(s, 'elr', ()))}) names it, and nothing "
                              f"in flight will change that")

    def observe_brokers(self) -> None:
        """After each tick: HW monotonic per leader epoch, one leader per epoch, and what
        each leader exposes below its HW joins the ledger."""
        w = self.w
        for bid in w.broker_ids:
            b = w.brokers[bid]
            if not b.alive:
                continue
            for tp, p in sorted(b.partitions.items()):
                if not p.is_leader or p.log is None:
                    continue
                seen = self.leader_of_epoch.setdefault((tp, p.leader_epoch), bid)
                if seen != bid and w.brokers[seen].alive and \
                        w.brokers[seen].partitions.get(tp) is not None and \
                        w.brokers[seen].partitions[tp].is_leader and \
                        w.brokers[seen].partitions[tp].leader_epoch == p.leader_epoch:
                    self.fail(f"{tp} leader epoch {p.leader_epoch} is led by brokers {seen} "
                              f"and {bid}")
                key = (bid, w.incarnation[bid], tp, p.leader_epoch)
                hw = p.high_watermark
                prev = self.leader_hw.get(key, -1)
                if hw < prev:
                    self.fail(f"{tp}: leader {bid}'s HW went back from {prev} to {hw} in "
                              f"epoch {p.leader_epoch}")
                if hw > prev:
                    self.leader_hw[key] = hw
                    have = self.content(b, tp)
                    for o in range(max(prev, p.log.log_start_offset), hw):
                        if o in have:
                            self._commit(tp, p.leader_epoch, o, have[o],
                                         f"leader {bid} exposed below HW {hw}")

    # ------------------------------------------------------------------ the check

    def check(self) -> None:
        if self.pending:
            self.fail(self.pending[0])
        w = self.w
        d = w.d
        tree = d.tree
        for tp in [tp for tp in self.committed if tp.topic not in tree.topics]:
            del self.committed[tp]
            self.committed_in.pop(tp, None)
        settled = d.core is not None and not d.core.waiting and not d.queue
        live = {b for b in w.broker_ids if w.brokers[b].alive and b in tree.brokers}
        for tp, s in sorted(tree.states.items()):
            if tp.topic in tree.delete_topics:
                continue
            if settled:
                for b in sorted((set(s.isr) | set(getattr(s, "elr", ()))) & live):
                    if tp in w.brokers[b].offline_replicas:
                        continue  # unreadable, as a dead broker's: _offline_replicas_out
                    missing = self._missing(w.brokers[b], tp)
                    if missing:
                        where = "ISR" if b in s.isr else "ELR"
                        self.fail(f"{tp}: broker {b} is in the {where} (isr={list(s.isr)} "
                                  f"elr={list(getattr(s, 'elr', ()))}) but lacks committed "
                                  f"offsets {missing[:8]}")
            self._replicas_agree(tp)
        for bid in w.broker_ids:
            b = w.brokers[bid]
            if not b.alive:
                continue
            for tp, log in sorted(b.logs.items()):
                mark = (b.log_versions.get(tp, 0), tuple(log.epoch_cache.entries))
                if self._epochs_checked.get((bid, tp)) != mark:
                    self._epoch_cache_agrees(b, tp)
                    self._epochs_checked[(bid, tp)] = mark
        # Checked once nothing that changes either side's view is in flight: a config change
        # notification, or a LeaderAndIsr (a failover resends the replicas a cancel wrote to
        # the topic znode at the epochs already held; the leader applies them one network
        # delay later - seed 1688; meanwhile the leader's min ISR is the higher one, safe).
        if settled and not any(m.what in ("ConfigChange", "LeaderAndIsr") for m in w.net.heap):
            self._min_isr_agrees(live)
        if settled:
            self._offline_replicas_out(live)

    def _replicas_agree(self, tp: TopicPartition) -> None:
        w = self.w
        s = w.d.tree.states.get(tp)
        if s is None:
            return
        # Replicas at the controller's current leader epoch: its leader, and followers that
        # have fetched from it without a divergence (until then a follower's HW may be from
        # a lineage an unclean election discarded, and its suffix is truncated at its first
        # fetch). A deposed leader's HW is a zombie's, which Kafka does not protect (_commit).
        holders = []
        for bid in w.broker_ids:
            b = w.brokers[bid]
            p = b.partitions.get(tp)
            if not b.alive or tp not in b.logs or p is None or p.leader_epoch != s.leader_epoch:
                continue
            f = b.fetching.get(tp)
            if p.is_leader or (f is not None and f.synced):
                holders.append(b)
        for i, a in enumerate(holders):
            la = a.logs[tp]
            for b in holders[i + 1:]:
                lb = b.logs[tp]
                hw = min(la.high_watermark, lb.high_watermark)
                start = max(la.log_start_offset, lb.log_start_offset)
                if hw <= start:
                    continue
                ca, cb = self.content(a, tp), self.content(b, tp)
                for o in range(start, hw):
                    if o in ca and o in cb and ca[o] != cb[o]:
                        self.fail(f"{tp} offset {o} below both HWs ({la.high_watermark}, "
                                  f"{lb.high_watermark}): broker {a.broker_id} holds "
                                  f"{ca[o]!r}, broker {b.broker_id} holds {cb[o]!r}")

    def _min_isr_agrees(self, live: set[int]) -> None:
        w = self.w
        ctx = w.d.core.ctx
        tree = w.d.tree
        for bid in sorted(live):
            b = w.brokers[bid]
            for tp, p in sorted(b.partitions.items()):
                s = tree.states.get(tp)
                if not p.is_leader or s is None or tp.topic in tree.delete_topics or \
                        (p.leader_epoch, p.partition_epoch) != (s.leader_epoch,
                                                                s.partition_epoch):
                    continue
                broker = max(1, min(p.min_isr, len(p.replicas) or 1))
                controller = ctx.min_isr(tp)
                if broker != controller:
                    self.fail(f"{tp}: the controller's effective min ISR is {controller}, "
                              f"leader {bid}'s is {broker} (min.insync.replicas {p.min_isr}, "
                              f"RF {len(p.replicas)})")

    # ------------------------------------------------------------------ liveness

    def unhealthy(self) -> list[str]:
        w = self.w
        tree = w.d.tree
        out = []
        if w.d.core is None:
            out.append("no controller")
        for tp, s in sorted(tree.states.items()):
            if tp.topic in tree.delete_topics:
                continue
            a = tree.topics.get(tp.topic)
            replicas = a.partitions.get(tp.partition, []) if a else []
            if s.leader == NO_LEADER or not w.brokers[s.leader].alive:
                out.append(f"{tp} has no live leader ({s})")
            elif set(s.isr) != set(replicas):
                p = w.brokers[s.leader].partitions.get(tp)
                held = (p.leader_epoch, p.partition_epoch) if p is not None else None
                out.append(f"{tp} ISR {list(s.isr)} is not its replicas {list(replicas)} "
                           f"(leader {s.leader} holds epochs {held}, the controller "
                           f"{(s.leader_epoch, s.partition_epoch)})")
        return out

    def healthy(self) -> bool:
        return not self.unhealthy()
