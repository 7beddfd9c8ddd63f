"""A synchronous shell for ControllerCore over the in-memory store: what controller.py does,
without asyncio, so scripts and the simulation can stop the controller between any two effects.

It keeps the core's stepping rules (core.py) exactly as the real shell does: effects in order,
a store effect's outcome stepped straight back, a store error ends the core. Watches are armed
on the MemoryTree as the real shell arms them on ZooKeeper, so a broker registration or a topic
znode fires the same events. Brokers are not modelled here: requests are recorded in `sent`
(the simulation's broker model reads them) and their answers are posted as events.

Faults a script or a seed can inject:
    crash_after(n)          the controller dies after carrying out n more effects: its core
                            and queued events are gone, its ZooKeeper session expires
    refuse_next_write(tps)  the next partition-state write is refused for these partitions
                            (another writer changed the znodes: their version moved)
    depose()                another controller took a newer epoch: the next write fails as a
                            whole (ControllerMovedError) and this core is dropped
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from common.errors import ErrorCode
from common.names import TopicPartition
from common.zk_layout import BrokerRegistration, ControllerInfo
from controller import effects as X
from controller import events as E
from controller import store_effects
from controller.core import ControllerCore
from controller.store import ControllerMovedError, InMemoryStore, MemoryTree

CTL = ControllerInfo(100, "127.0.0.1", 9999)

DEFAULT_CONFIG = {
    "unclean.leader.election.enable": False,
    "leader.imbalance.check.interval.seconds": 300,
    "leader.imbalance.per.broker.percentage": 10,
    "auto.leader.rebalance.enable": False,
    "num.partitions": 1,
    "default.replication.factor": 1,
}


def run_sync(coro) -> Any:
    """Run a coroutine that never suspends (every InMemoryStore method)."""
    try:
        coro.send(None)
    except StopIteration as e:
        return e.value
    coro.close()
    raise RuntimeError("the in-memory store suspended")


class Crashed(Exception):
    """The controller died (crash_after, or deposed): its core is gone."""


@dataclass
class Sent:
    broker_id: int
    kind: str  # LeaderAndIsr | UpdateMetadata | StopReplica | GetReplicaLogInfo (the effect)
    request: Any
    controller_epoch: int


class Driver:
    def __init__(self, config: dict | None = None, tree: MemoryTree | None = None,
                 rng: random.Random | None = None, info: ControllerInfo = CTL):
        self.config = dict(DEFAULT_CONFIG, **(config or {}))
        self.tree = tree if tree is not None else MemoryTree()
        self.rng = rng or random.Random(0)
        self.info = info
        self.core: ControllerCore | None = None
        self.store: InMemoryStore | None = None
        self.queue: deque[E.Event] = deque()
        self.sent: list[Sent] = []
        self.replies: dict[int, X.Reply] = {}
        self.timers: dict[str, float] = {}
        self.now_ms = 0.0
        self.effects_done = 0
        self.on_effect: Callable[[X.Effect], None] | None = None
        self.broker_sessions: dict[int, int] = {}
        self._crash_after: int | None = None
        self._refuse: set[TopicPartition] = set()
        self._ids = iter(range(1, 1 << 62))
        self._watchers: dict[Any, Callable] = {}
        self._watches = store_effects.EventWatches(self._watch)

    # ------------------------------------------------------------------ the controller

    @property
    def alive(self) -> bool:
        return self.core is not None and self.core.ready

    def elect(self) -> list[X.Effect]:
        """A controller candidate wins /controller (a new session) and takes over."""
        assert self.core is None
        self.store = InMemoryStore(self.tree)
        got = run_sync(self.store.try_become_controller(self.info))
        if got is None:
            raise RuntimeError("/controller is held")
        self._watchers.clear()
        self.core = ControllerCore(self.info, got[0], got[1], self.config,
                                   random.Random(self.rng.random()))
        return self.step(E.Activate())

    def crash(self) -> None:
        """The controller process dies: the core and its queue go, its session expires."""
        if self.store is not None:
            self._drop_watches()
            self.tree.expire(self.store.session_id)
        self.core = None
        self.store = None
        self.queue.clear()
        self.timers.clear()
        self._crash_after = None

    def crash_after(self, n: int) -> None:
        self._crash_after = n

    def refuse_next_write(self, tps: Iterable[TopicPartition]) -> None:
        self._refuse = set(tps)

    def depose(self) -> None:
        """Another controller bumped /controller_epoch (it won after our session expired)."""
        self.tree.controller_epoch += 1
        self.tree.controller_epoch_version += 1

    def _drop_watches(self) -> None:
        for key in list(self.tree.watches):
            self.tree.watches[key] = [w for w in self.tree.watches[key]
                                      if w not in self._watchers.values()]
        self._watchers.clear()

    # ------------------------------------------------------------------ stepping

    def post(self, event: E.Event) -> None:
        self.queue.append(event)

    def request(self, event: E.Event) -> int:
        """Post an RPC; returns its request id (its Reply lands in `replies`)."""
        rid = next(self._ids)
        self.post(replace(event, request_id=rid))
        return rid

    def step(self, event: E.Event) -> list[X.Effect]:
        if self.core is None:
            raise Crashed("no controller")
        core = self.core
        done: list[X.Effect] = []
        pending = deque(core.step(replace(event, now_ms=self.now_ms)))
        while pending:
            eff = pending.popleft()
            if self._crash_after is not None:
                if self._crash_after <= 0:
                    self.crash()
                    raise Crashed("crashed before an effect")
                self._crash_after -= 1
            try:
                result = self._perform(eff)
            except ControllerMovedError as e:
                self.crash()
                raise Crashed(f"deposed: {e}") from None
            self.effects_done += 1
            done.append(eff)
            if self.on_effect is not None:
                self.on_effect(eff)
            if eff.needs_result:
                pending.extend(core.step(E.Completed(value=result)))
        return done

    def run(self, limit: int = 10_000) -> None:
        """Step queued events until none is left (a crash empties the queue)."""
        n = 0
        while self.queue and self.core is not None:
            n += 1
            if n > limit:
                raise RuntimeError("the controller does not settle")
            self.step(self.queue.popleft())

    def log_queries(self, start: int = 0):
        """(index, query effect) for each GetReplicaLogInfo sent from `start` on by the
        current controller."""
        for i, s in enumerate(self.sent[start:], start):
            if s.kind == "GetReplicaLogInfo" and self.core is not None \
                    and s.controller_epoch == self.core.ctx.epoch:
                yield i, s.request

    def fire_timers(self) -> None:
        for name, due in sorted(self.timers.items(), key=lambda kv: kv[1]):
            if due <= self.now_ms:
                del self.timers[name]
                self.post(E.TimerFired(name=name))

    # ------------------------------------------------------------------ effects

    def _watch(self, key, make: Callable[[], E.Event]) -> Callable:
        w = self._watchers.get(key)
        if w is None:
            w = self._watchers[key] = lambda _ev: self.post(make())
        return w

    def _move_refused_versions(self, written: set[TopicPartition]) -> None:
        """refuse_next_write: another writer moves these znodes' versions first (only the
        ones this write touches, so the core could not have known of any other change)."""
        refuse = self._refuse & written
        self._refuse -= written
        for tp in refuse:
            cur = self.tree.states.get(tp)
            if cur is not None:
                self.tree.states[tp] = replace(cur, partition_epoch=cur.partition_epoch + 1)

    def stop_replica_answers(self, start: int = 0):
        """(index, broker, errors) for each StopReplica(delete) sent from `start` on by the
        current controller: what brokers that did the deletion would answer."""
        for i, s in enumerate(self.sent[start:], start):
            if s.kind != "StopReplica" or self.core is None \
                    or s.controller_epoch != self.core.ctx.epoch:
                continue
            errors = {TopicPartition(p.topic, p.partition): ErrorCode.NONE
                      for p in s.request.partition_states if p.delete_partition}
            if errors:
                yield i, s.broker_id, errors

    def _perform(self, eff: X.Effect) -> Any:
        if eff.needs_result:
            if isinstance(eff, X.WritePartitionStates):
                self._move_refused_versions({w.tp for w in eff.writes})
            return run_sync(store_effects.perform(self.store, eff, self._watches, self.rng))
        match eff:
            case X.SendRequests(batches=batches):
                for b, bb in batches.items():
                    for kind, reqs in (("LeaderAndIsr", bb.leader_and_isr),
                                       ("UpdateMetadata", bb.update_metadata),
                                       ("StopReplica", bb.stop_replica)):
                        for r in reqs:
                            self.sent.append(Sent(b, kind, r, self.core.ctx.epoch))
            case X.QueryReplicaLogs(broker_id=b):
                self.sent.append(Sent(b, "GetReplicaLogInfo", eff, self.core.ctx.epoch))
            case X.Reply(request_id=rid):
                self.replies[rid] = eff
            case X.SetTimer(name=name, delay_s=d):
                self.timers[name] = self.now_ms + d * 1000
            case X.UpdateBrokers() | X.TopicDeleted() | X.Emit() | X.Decided():
                pass
            case _:
                raise TypeError(f"unknown effect {eff!r}")
        return None

    # ------------------------------------------------------------------ brokers (registrations)

    def register(self, broker_id: int, rack: str | None = None,
                 clean_shutdown: bool = True) -> int:
        """A broker registers (a new session and a new broker epoch, KIP-380), saying whether
        its previous shutdown was clean (KIP-966)."""
        session = self.tree.new_session()
        epoch = self.tree.register_broker(
            BrokerRegistration(broker_id, "127.0.0.1", 9000 + broker_id, rack=rack,
                               clean_shutdown=clean_shutdown), session)
        self.broker_sessions[broker_id] = session
        return epoch

    def kill(self, broker_id: int) -> None:
        """A broker's session ends (kill -9, or a session expiry)."""
        session = self.broker_sessions.pop(broker_id, None)
        if session is not None:
            self.tree.expire(session)
