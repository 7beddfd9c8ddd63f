"""The controller's shell: election, the event queue, and carrying out what the core decides
(Kafka's KafkaController + ControllerEventManager, ZooKeeper mode).

Decisions live in core.py (`ControllerCore.step(event) -> effects`) and decisions/; this module
only translates and executes:

- Election: ephemeral /controller (with this candidate's gRPC endpoint) created together with
  the /controller_epoch bump in one transaction (zk_store.py). The loser watches /controller.
  The winner builds a fresh ControllerCore and steps `Activate`.
- One event queue, one processing task: watches, broker responses, timers and RPCs only post
  events. Each is stepped into the core, and its effects are carried out in order (core.py
  states the rules): store reads and conditional writes through the MetadataStore, whose
  outcome is stepped straight back; requests through the channel manager; replies to the
  waiting RPC; records to the event log and the metrics derived from them; timers.
- Losing ZooKeeper, as Kafka's KafkaController: a lost *connection* (SUSPENDED: an ensemble
  member died or lost its quorum) changes nothing - kazoo moves the same session to another
  member, reads are retried on it (common/zk_async.py), /controller and the epoch stay, and
  requests that need ZooKeeper are refused while it is unreachable (one clear error, nothing
  written). Only a lost *session* (LOST, Kafka's Expire event) resigns, *at once* (in the
  connection callback, before any further event runs): the core and channels are dropped,
  pending RPCs fail with NOT_CONTROLLER and the event processor restarts, so nothing half-done
  continues; on CONNECTED (the new session) it runs the election again (Kafka's
  RegisterBrokerAndReelect). If /controller is still its own then (an Elect racing the same
  session) it takes a new epoch conditionally on that znode (reclaim). A controller paused past
  its session (SIGSTOP) that wakes up can change nothing: its transactions fail the
  /controller_epoch version check (ControllerMovedError -> resign) and brokers refuse its old
  controller epoch.
- A store operation that fails otherwise (its outcome unknown) also ends the core: the
  controller resigns and reclaims /controller with a new epoch, reloading from the store -
  the core's memory is never trusted past a write that may or may not have happened.

Test-only kill hooks (`KillHooks`, injected; built from the config by default): with
`replog.test.kill.at.reassignment.step` = N the process SIGKILLs itself right after
reassignment step N's effects of some partition are carried out - a real kill at a named step
boundary, so a test can show the next controller resumes from whatever ZooKeeper holds.
`replog.test.kill.after.restart.entry` does the same after a /restart_partitions entry is
applied and before it is deleted (design.md#jbod's at-least-once processing).

Left out: the /admin/preferred_replica_election znode (ElectLeaders replaces it), and Kafka's
partition-modification watch on /brokers/topics/<t> (partitions are added through the
CreatePartitions RPC only). AlterPartition requests are handled one RPC per event (not
coalesced).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import os
import random
import signal
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import grpc

from common.clock import wall_ms
from common.errors import ErrorCode, RequestError
from common.grpc_options import ChannelFactory
from common.names import TopicPartition
from common.rpc_status import error_code_of
from common.zk_async import AsyncZk
from common.zk_layout import ControllerInfo
from controller import effects, emitted, events, store_effects
from controller.channel import ControllerChannelManager, Delivery
from controller.context import ControllerContext
from controller.core import ControllerCore
from controller.metrics import ControllerMetrics
from controller.selectors import ElectionReason
from controller.store import ControllerMovedError, MetadataStore, StoreError
from controller.zk_store import ZkStore

log = logging.getLogger(__name__)

MAX_WAIT_S = 300.0
FAILOVER_RETRY_S = 1.0
KILL_AT_STEP_KEY = "replog.test.kill.at.reassignment.step"
KILL_AFTER_RESTART_KEY = "replog.test.kill.after.restart.entry"


@dataclass(frozen=True)
class KillHooks:
    """Where a test may have the controller SIGKILL itself: after the effects of one
    reassignment step (design.md#reassignment acceptance), or after a /restart_partitions entry is
    applied and before it is deleted (design.md#jbod). Off unless a test sets the replog.test.*
    configs."""

    at_reassignment_step: int | None = None
    after_restart_entry: bool = False

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> KillHooks:
        step = config.get(KILL_AT_STEP_KEY)
        return cls(at_reassignment_step=None if step in (None, "") else int(step),
                   after_restart_entry=bool(config.get(KILL_AFTER_RESTART_KEY)))

    def kill_after(self, event: emitted.Emitted) -> str | None:
        """Why to kill now that ``event``'s effects are out, or None."""
        match event:
            case emitted.ReassignmentStep(step=step, partition=tp) \
                    if step == self.at_reassignment_step:
                return f"after reassignment step {step} of {tp}"
            case emitted.PartitionsRestarted(entry=entry) if self.after_restart_entry \
                    and not isinstance(event, emitted.PartitionsRestartIncomplete):
                # its state writes and requests are out; its deletion is the next effect
                return f"after applying restart entry {entry} and before deleting it"
        return None


class NotControllerError(Exception):
    error_code = ErrorCode.NOT_CONTROLLER


# ---- the shell's own events: the election is not the core's business ----------------------

@dataclass(frozen=True)
class Elect:
    """Start-up, reconnection, or /controller vanished: try to become the controller."""


@dataclass(frozen=True)
class ControllerChange:
    """/controller was created, changed or deleted."""


@dataclass
class _Envelope:
    """An event in the queue, with who waits for its answer."""

    event: Any
    enqueued: float
    future: asyncio.Future | None = None
    generation: int | None = None  # only for this activation (broker responses, timers)

    def resolve(self, value: Any) -> None:
        if self.future is not None and not self.future.done():
            self.future.set_result(value)

    def fail(self, error: BaseException) -> None:
        if self.future is not None and not self.future.done():
            self.future.set_exception(error)


@dataclass
class _Active:
    core: ControllerCore
    channel: ControllerChannelManager
    generation: int
    ready: bool = False
    timers: dict[str, asyncio.TimerHandle] = field(default_factory=dict)


@dataclass
class Answer:
    """What an RPC's caller gets: the core's reply, and what to wait for before answering."""

    value: Any
    deliveries: list[Delivery]
    deletions: dict[str, asyncio.Future]


class Controller:
    """One controller candidate. `start()` joins the election; while active it owns a
    ControllerCore. The public coroutines (`create_topics`, `alter_partition`, ...) are what
    the gRPC servicer calls, with plain values (events.py), not protobuf."""

    def __init__(self, *, controller_id: int, zk: AsyncZk, endpoint: ControllerInfo,
                 config: Mapping[str, Any], metrics: ControllerMetrics | None = None,
                 events=None, clock: Callable[[], float] = time.monotonic,
                 wall_ms: Callable[[], int] = wall_ms,
                 rng: random.Random | None = None,
                 on_active_change: Callable[[bool], None] | None = None,
                 store: MetadataStore | None = None,
                 channel_factory: ChannelFactory | None = None,
                 kill_hooks: KillHooks | None = None):
        self.controller_id = controller_id
        self.zk = zk
        self.store: MetadataStore = store if store is not None else ZkStore(zk)
        self.info = endpoint
        self.config = config
        self.metrics = metrics or ControllerMetrics()
        self.events = events if events is not None else _NullLog()
        self.clock = clock
        self.wall_ms = wall_ms
        self.rng = rng or random.Random()
        self.on_active_change = on_active_change
        self.channel_factory = channel_factory  # the transport to brokers (None: grpc.aio)
        self.kill_hooks = kill_hooks if kill_hooks is not None else KillHooks.from_config(config)
        self.cluster_id = ""
        self.active: _Active | None = None
        self.active_controller: ControllerInfo | None = None  # as read from /controller
        self._generation = 0
        self._request_ids = itertools.count(1)
        self._queue: asyncio.Queue[_Envelope] = asyncio.Queue()
        self._processor: asyncio.Task | None = None
        self._current: _Envelope | None = None
        self._tasks: list[asyncio.Task] = []
        self._closing: set[asyncio.Task] = set()
        self._deletion_waiters: dict[str, list[asyncio.Future]] = {}
        # RPC envelopes by request id: the core may answer one in a later step (ElectLeaders
        # UNCLEAN waits for its unclean recovery's choice, KIP-966)
        self._requests: dict[int, _Envelope] = {}
        self._stopping = False
        self._watchers: dict[Any, Callable] = {}
        self._watches = store_effects.EventWatches(self._watch)

    # ================================================================== lifecycle

    @property
    def is_active(self) -> bool:
        """Active and done with its failover (loaded, brokers told)."""
        return self.active is not None and self.active.ready

    @property
    def epoch(self) -> int:
        return self.active.core.ctx.epoch if self.active else -1

    @property
    def context(self) -> ControllerContext | None:
        """The active core's view (read-only for callers: metrics, tests, DescribeCluster)."""
        return self.active.core.ctx if self.active else None

    async def start(self) -> None:
        """The AsyncZk must be started. Creates the persistent paths and joins the election."""
        self.zk.on_state_change(self._on_zk_state)
        await self.store.ensure_paths()
        self._processor = asyncio.get_running_loop().create_task(self._process(),
                                                                 name="controller-events")
        self._tasks.append(asyncio.get_running_loop().create_task(self._refresh_metrics(),
                                                                  name="controller-metrics"))
        self.metrics.refresh(None)
        self._post(Elect())

    async def stop(self) -> None:
        """Resign (deleting /controller so a standby takes over at once) and stop."""
        self._stopping = True
        for t in self._tasks:
            t.cancel()
        if self._processor is not None:
            self._processor.cancel()
            await asyncio.gather(self._processor, return_exceptions=True)
        await asyncio.gather(*self._tasks, return_exceptions=True)
        was_active = self.active is not None
        self._resign("shutdown")
        if was_active and self.zk.connected:
            try:
                await self.store.resign(self.zk.session_id)
            except StoreError:
                pass
        if self._closing:
            await asyncio.gather(*list(self._closing), return_exceptions=True)
        while not self._queue.empty():
            self._queue.get_nowait().fail(NotControllerError("controller stopped"))

    def _post(self, event: Any, *, future: asyncio.Future | None = None,
              generation: int | None = None) -> _Envelope:
        env = _Envelope(event, self.clock(), future, generation)
        if not self._stopping:
            self._queue.put_nowait(env)
        else:
            env.fail(NotControllerError("controller stopping"))
        return env

    def _watch(self, key, make_event: Callable[[], Any]) -> Callable:
        """One stable watcher callable per znode (kazoo keeps a set per path, so re-arming a
        watch with the same callable never makes it fire twice)."""
        w = self._watchers.get(key)
        if w is None:
            w = self._watchers[key] = self.zk.watcher(lambda _ev: self._post(make_event()))
        return w


    async def _refresh_metrics(self) -> None:
        pause = 1.0
        while True:
            await asyncio.sleep(pause)
            t0 = self.clock()
            self.metrics.refresh(self.context, self._queue.qsize())
            # Refreshing walks every partition: keep it under ~5% of the loop's time.
            pause = max(1.0, 20 * (self.clock() - t0))

    # ================================================================== ZooKeeper session

    def _on_zk_state(self, state: str) -> None:
        """Runs on the event loop (AsyncZk posts it). Resign at once on LOST (the session
        expired: Kafka's Expire event); SUSPENDED keeps the session, so nothing changes
        (Kafka's controller does not act on Disconnected either)."""
        if state == "SUSPENDED":
            self.events.warning("zookeeper_disconnected", controller_id=self.controller_id,
                                active=self.active is not None)
        elif state == "LOST":
            if self.active is not None:
                self._resign("ZooKeeper session expired")
                self._restart_processor()
        elif state == "CONNECTED" and not self._stopping:
            self._post(Elect())

    def _restart_processor(self) -> None:
        if self._current is not None:
            self._current.fail(NotControllerError("controller resigned"))
        if self._processor is not None:
            self._processor.cancel()
        if not self._stopping:
            self._processor = asyncio.get_running_loop().create_task(
                self._process(), name="controller-events")

    def _resign(self, reason: str) -> None:
        """Stop acting as controller now (Kafka's onControllerResignation): the core and
        everything only it knew are dropped."""
        act = self.active
        if act is None:
            return
        self.active = None
        if self.active_controller is not None and \
                self.active_controller.controller_id == self.controller_id:
            # Not us any more, and who is active is unknown until /controller is read again:
            # NOT_CONTROLLER answers named this resigned controller as the active one.
            self.active_controller = None
        for h in act.timers.values():
            h.cancel()
        t = asyncio.get_running_loop().create_task(act.channel.close())
        self._closing.add(t)
        t.add_done_callback(self._closing.discard)
        for waiters in self._deletion_waiters.values():
            for f in waiters:
                if not f.done():
                    f.set_exception(NotControllerError("controller resigned"))
        self._deletion_waiters.clear()
        for env in self._requests.values():
            env.fail(NotControllerError("controller resigned"))
        self._requests.clear()
        self.metrics.refresh(None, self._queue.qsize())
        self.events.info("controller_resigned", controller_id=self.controller_id,
                         controller_epoch=act.core.ctx.epoch, reason=reason)
        if self.on_active_change:
            self.on_active_change(False)

    # ================================================================== event processing

    async def _process(self) -> None:
        while True:
            env = await self._queue.get()
            self._current = env
            try:
                await self._handle(env)
            except asyncio.CancelledError:
                env.fail(NotControllerError("controller resigned"))
                raise
            except ControllerMovedError as e:
                env.fail(NotControllerError(str(e)))
                self._resign(f"deposed: {e}")
                self._post(Elect())
            except NotControllerError as e:
                env.fail(e)
            except StoreError as e:
                # The store operation's outcome is unknown (or the store refused what the core
                # expected to succeed): the core cannot be trusted past it. Resign and reclaim
                # (a new epoch, a fresh load); the caller may retry.
                log.warning("store error handling %s: %s: %s", type(env.event).__name__,
                            type(e).__name__, e)
                env.fail(RequestError(ErrorCode.UNKNOWN_SERVER_ERROR, f"{type(e).__name__}: {e}",
                                      status=grpc.StatusCode.UNAVAILABLE))
                self._abandon(f"store error: {type(e).__name__}: {e}")
            except Exception as e:
                log.exception("controller event %s failed", type(env.event).__name__)
                env.fail(RequestError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                      f"{type(e).__name__}: {e}", status=grpc.StatusCode.INTERNAL))
                self._abandon(f"{type(e).__name__}: {e}")
            finally:
                self._current = None

    def _abandon(self, reason: str) -> None:
        if self.active is not None:
            self._resign(reason)
            asyncio.get_running_loop().call_later(FAILOVER_RETRY_S, self._post, Elect())

    def _check_zookeeper(self, event: Any) -> None:
        """Refuse a request that may write ZooKeeper while the session is not connected (a
        lost quorum, or a move between members): it would wait in kazoo's queue and be
        written whenever the quorum returns - after its caller gave up, a topic nobody is
        told about. Kafka's ZooKeeperClient blocks such a request until then; the answer here
        is immediate and says nothing was written."""
        if not isinstance(event, events.ListReassignments) and not self.zk.connected:
            raise RequestError(
                ErrorCode.REQUEST_TIMED_OUT,
                f"controller {self.controller_id} has no ZooKeeper connection (quorum lost or "
                f"a member down); nothing was written: retry when ZooKeeper is back",
                status=grpc.StatusCode.UNAVAILABLE)

    async def _handle(self, env: _Envelope) -> None:
        ev = env.event
        if isinstance(ev, Elect):
            return await self._elect()
        if isinstance(ev, ControllerChange):
            return await self._on_controller_change()
        act = self.active
        if act is None:
            env.fail(NotControllerError(self._not_controller_message()))
            return
        if env.future is not None:
            if env.future.done():
                return  # its caller gave up (deadline passed) while it waited in the queue
            try:
                self._check_zookeeper(ev)
            except RequestError as e:
                env.fail(e)
                return
        if env.generation is not None and env.generation != act.generation:
            return  # for an earlier activation (a response or timer of a resigned core)
        await self._run(act, ev, env)

    async def _run(self, act: _Active, ev: events.Event, env: _Envelope | None) -> None:
        """Step one event and carry out its effects (core.py's rules)."""
        started = env.enqueued if env is not None else self.clock()
        deliveries: list[Delivery] = []
        pending = deque(act.core.step(dataclasses.replace(ev, now_ms=self.wall_ms())))
        while pending:
            eff = pending.popleft()
            result = await self._perform(act, eff, env, deliveries, started)
            if self.active is not act:
                raise NotControllerError("controller resigned")
            if eff.needs_result:
                pending.extend(act.core.step(events.Completed(value=result)))

    def _not_controller_message(self) -> str:
        c = self.active_controller
        who = f"controller {c.controller_id} at {c.address} is" if c and c.controller_id >= 0 \
            else "no controller is"
        return f"This is not the active controller ({who} active)"

    # ================================================================== effects

    async def _perform(self, act: _Active, eff: effects.Effect, env: _Envelope | None,
                       deliveries: list[Delivery], started: float) -> Any:
        if eff.needs_result:
            result = await store_effects.perform(self.store, eff, self._watches, self.rng)
            if isinstance(result, effects.PartitionWritesOutcome) and result.failed:
                log.warning("partition state writes refused (version changed): %s",
                            ", ".join(map(str, sorted(result.failed))))
            return result
        match eff:
            case effects.UpdateBrokers(live=live):
                act.channel.update_brokers(dict(live))
            case effects.SendRequests(batches=batches):
                deliveries += act.channel.send(dict(batches))
            case effects.QueryReplicaLogs():
                self.metrics.replica_log_info_requests.inc()
                act.channel.get_replica_log_info(
                    eff.broker_id, eff.broker_epoch, eff.partitions,
                    lambda b, epoch, answers, error, q=eff.query_id: self._post(
                        events.ReplicaLogInfoResponse(query_id=q, broker_id=b, broker_epoch=epoch,
                                                 answers=answers, error=error),
                        generation=act.generation))
            case effects.Reply():
                self._reply(eff, deliveries)
            case effects.TopicDeleted(topic=t):
                self._watchers.pop(("config", t), None)
                for f in self._deletion_waiters.pop(t, []):
                    if not f.done():
                        f.set_result(True)
            case effects.Emit():
                self._emit(eff, started)
                why = self.kill_hooks.kill_after(eff.event)
                if why is not None:
                    await self._kill_for_test(why, deliveries)
            case effects.SetTimer(name=name, delay_s=delay):
                old = act.timers.pop(name, None)
                if old is not None:
                    old.cancel()
                act.timers[name] = asyncio.get_running_loop().call_later(
                    delay, lambda: self._post(events.TimerFired(name=name),
                                              generation=act.generation))
            case effects.Decided():
                pass
            case _:
                raise TypeError(f"unknown effect {eff!r}")
        return None

    def _reply(self, eff: effects.Reply, deliveries: list[Delivery]) -> None:
        # the request's envelope, possibly not the event being handled (a deferred answer)
        env = self._requests.pop(eff.request_id, None)
        if env is None:
            return
        if eff.error is not None:
            env.fail(RequestError(eff.error.error_code, eff.error.message,
                                  status=grpc.StatusCode.FAILED_PRECONDITION))
            return
        loop = asyncio.get_running_loop()
        deletions = {}
        for topic in eff.awaited_deletions:
            fut = loop.create_future()
            fut.add_done_callback(_retrieve)
            self._deletion_waiters.setdefault(topic, []).append(fut)
            deletions[topic] = fut
        awaited = [d.done for d in deliveries if d.kind in ("LeaderAndIsr", "UpdateMetadata")] \
            if eff.await_deliveries else []
        env.resolve(Answer(eff.value, awaited, deletions))

    async def _kill_for_test(self, why: str, deliveries: list[Delivery]) -> None:
        """A kill hook fired: SIGKILL once this event's requests have reached their brokers
        (or failed), so the next controller meets exactly what this one left - ZooKeeper's
        state *and* the brokers' (design.md#reassignment-case-3: step 4's UpdateMetadata delivered,
        step 5 not begun). Without the wait the kill raced the channel and the brokers rarely saw
        it."""
        if deliveries:
            await asyncio.wait([d.done for d in deliveries], timeout=10)
        log.warning("test hook: killing this controller %s", why)
        logging.shutdown()
        os.kill(os.getpid(), signal.SIGKILL)

    def _emit(self, eff: effects.Emit, started: float) -> None:
        """Log one event, and count what the metrics count of it."""
        (self.events.warning if eff.level == "warning" else self.events.info)(
            eff.name, **eff.fields)
        m = self.metrics
        match eff.event:
            case emitted.ReassignmentStep(step=step):
                m.reassignment_steps.labels(str(step)).inc()
            case emitted.InvalidStateTransition(kind=kind):
                m.invalid_transitions.labels(kind).inc()
            case emitted.ReassignmentCompleted():
                m.reassignments_completed.inc()
            case emitted.PartitionsRestartIncomplete():
                pass
            case emitted.PartitionsRestarted(partitions=partitions):
                m.restarted_partitions.inc(len(partitions))
            case emitted.UncleanRecoveryFinished(strategy=strategy, outcome=outcome):
                m.unclean_recoveries.labels(strategy, outcome).inc()
                if outcome == "elected":
                    m.unclean_recovery_offsets_discarded.inc(eff.event.offsets_discarded)
            case emitted.LeaderElection(reason=reason, unclean=unclean):
                m.leader_elections.labels(reason).inc()
                if unclean:
                    m.unclean_elections.inc()
                if reason == str(ElectionReason.RELINQUISHED):
                    m.leadership_relinquished.inc()
                m.election_latency_ms.observe((self.clock() - started) * 1000)

    def _on_response(self, generation: int, broker_id: int, kind: str, request, response,
                     error) -> None:
        """Broker responses (called on the loop by the channel manager): translate what the
        core must act on into events."""
        if error is not None:
            code = error_code_of(error) if isinstance(error, grpc.aio.AioRpcError) else None
            log.warning("%s to broker %s refused: %s (code %s)", kind, broker_id, error, code)
            if code == ErrorCode.STALE_CONTROLLER_EPOCH:
                self._post(ControllerChange())  # a newer controller exists: check /controller
        if kind == "StopReplica":
            errors: dict[TopicPartition, ErrorCode] = {}
            for s in request.partition_states:
                if s.delete_partition:
                    errors[TopicPartition(s.topic, s.partition)] = \
                        ErrorCode.NONE if error is None else ErrorCode.UNKNOWN_SERVER_ERROR
            if response is not None:
                for r in response.partition_errors:
                    tp = TopicPartition(r.topic, r.partition)
                    if tp in errors:
                        errors[tp] = _code(r.error_code)
            if errors:
                self._post(events.StopReplicaResponse(broker_id=broker_id, errors=errors),
                           generation=generation)
        elif kind == "LeaderAndIsr" and response is not None:
            refused = {TopicPartition(r.topic, r.partition): _code(r.error_code)
                       for r in response.partition_errors if r.error_code != ErrorCode.NONE}
            if refused:
                self._post(events.LeaderAndIsrResponse(broker_id=broker_id, errors=refused),
                           generation=generation)

    # ================================================================== election

    async def _elect(self) -> None:
        if self.active is not None or self._stopping or not self.zk.connected:
            return
        w = self._watch("controller", ControllerChange)
        existing = await self.store.read_controller(watch=w)
        if existing is not None:
            _info, stat = existing
            if stat.ephemeralOwner == self.zk.session_id:
                got = await self.store.reclaim_controller(stat.version)
                if got is not None:
                    await self._become_active(*got)
                    return
                existing = await self.store.read_controller(watch=w)
            if existing is not None:
                self.active_controller = existing[0]
                return
        got = await self.store.try_become_controller(self.info)
        if got is None:
            existing = await self.store.read_controller(watch=w)
            self.active_controller = existing[0] if existing else None
            if existing is None:
                self._post(Elect())
            return
        await self._become_active(*got)

    async def _on_controller_change(self) -> None:
        existing = await self.store.read_controller(watch=self._watch("controller",
                                                                      ControllerChange))
        if existing is None:
            self.active_controller = None
            self._resign("/controller was deleted")
            await self._elect()
            return
        info, stat = existing
        self.active_controller = info
        if self.active is not None and stat.ephemeralOwner != self.zk.session_id:
            self._resign(f"controller {info.controller_id} holds /controller")

    async def _become_active(self, epoch: int, epoch_version: int) -> None:
        """Kafka's onControllerFailover: a fresh core loads everything, tells every broker,
        elects (core.py `Activate`)."""
        started = self.clock()
        self._generation += 1
        gen = self._generation
        core = ControllerCore(self.info, epoch, epoch_version, self.config, self.rng)
        channel = ControllerChannelManager(
            on_response=lambda *a: self._on_response(gen, *a),
            listener=self.config.get("control.plane.listener.name"),  # KIP-291
            **({"channel_factory": self.channel_factory} if self.channel_factory else {}))
        act = self.active = _Active(core, channel, gen)
        self.active_controller = self.info
        self.events.info("controller_elected", controller_id=self.controller_id,
                         controller_epoch=epoch)
        try:
            await self._run(act, events.Activate(), None)
        except asyncio.CancelledError:
            self._resign("failover interrupted")
            raise
        except Exception as e:
            # Kafka triggers a controller move here. /controller is still ours, so the retry
            # (after a pause, so a persistent fault does not spin) reclaims it with a new epoch.
            self._resign(f"failover failed: {e!r}")
            if not isinstance(e, ControllerMovedError):
                asyncio.get_running_loop().call_later(FAILOVER_RETRY_S, self._post, Elect())
            raise
        self.cluster_id = core.cluster_id
        act.ready = True
        ctx = core.ctx
        self.metrics.refresh(ctx, self._queue.qsize())
        self.events.info("controller_failover_done", controller_id=self.controller_id,
                         controller_epoch=epoch, brokers=sorted(ctx.live_brokers),
                         topics=len(ctx.assignments), partitions=len(ctx.leadership),
                         duration_ms=round((self.clock() - started) * 1000, 1))
        if self.on_active_change:
            self.on_active_change(True)

    # ================================================================== public API (servicer)

    async def _request(self, event: events.Event) -> Answer:
        if self.active is None:
            raise NotControllerError(self._not_controller_message())
        self._check_zookeeper(event)
        fut = asyncio.get_running_loop().create_future()
        rid = next(self._request_ids)
        self._requests[rid] = self._post(dataclasses.replace(event, request_id=rid), future=fut)
        try:
            return await fut
        finally:
            self._requests.pop(rid, None)

    async def create_topics(self, topics: tuple[events.NewTopic, ...], validate_only: bool,
                            timeout_ms: int) -> list[events.TopicResult]:
        """Answers once the topics and their leaders are in ZooKeeper and every live broker
        has acknowledged its LeaderAndIsr/UpdateMetadata, or when timeout_ms expires -
        whichever is first; with timeout_ms <= 0 it does not wait for brokers. (A registered
        but unreachable broker makes the answer wait for the timeout; the result is still
        NONE - the change is made.)"""
        ans = await self._request(events.CreateTopics(topics=topics, validate_only=validate_only))
        await _wait(ans.deliveries, timeout_ms)
        return ans.value

    async def create_partitions(self, topics: tuple[events.NewPartitions, ...], validate_only: bool,
                                timeout_ms: int) -> list[events.PartitionsResult]:
        """Answers as create_topics does: once the grown assignments and the new partitions'
        leaders are in ZooKeeper and the live brokers acknowledged their requests, or at
        timeout_ms (<= 0: without waiting for brokers, as a KRaft controller answers)."""
        ans = await self._request(events.CreatePartitions(topics=topics,
                                                     validate_only=validate_only))
        await _wait(ans.deliveries, timeout_ms)
        return ans.value

    async def delete_topics(self, topics: tuple[str, ...], timeout_ms: int
                            ) -> list[events.DeletionResult]:
        """Answers once every listed topic is deleted (all replicas acknowledged
        StopReplica(delete) and the znodes are gone), or REQUEST_TIMED_OUT for those still
        in progress at timeout_ms (the deletion continues)."""
        ans = await self._request(events.DeleteTopics(topics=topics))
        results = ans.value
        if ans.deletions:
            # every deletion, as Kafka's DeleteTopics waits for all within the request timeout
            await asyncio.wait(list(ans.deletions.values()), timeout=_timeout_s(timeout_ms),
                               return_when=asyncio.ALL_COMPLETED)
        out = []
        for res in results:
            fut = ans.deletions.get(res.name)
            if fut is not None and not fut.done():
                res = dataclasses.replace(
                    res, error_code=ErrorCode.REQUEST_TIMED_OUT,
                    error_message=(f"Deletion of topic {res.name} is still in progress "
                                   "(waiting for its replicas to be deleted)"))
            elif fut is not None and fut.exception() is not None:
                raise fut.exception()
            out.append(res)
        return out

    async def alter_partition(self, broker_id: int, broker_epoch: int,
                              items: tuple) -> list[events.PartitionAnswer]:
        ans = await self._request(events.AlterPartition(broker_id=broker_id,
                                                   broker_epoch=broker_epoch, items=items))
        return ans.value

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int
                                  ) -> list[TopicPartition]:
        ans = await self._request(events.ControlledShutdown(broker_id=broker_id,
                                                       broker_epoch=broker_epoch))
        return ans.value

    async def elect_leaders(self, election_type: int,
                            partitions: tuple[TopicPartition, ...] | None,
                            timeout_ms: int) -> list[events.ElectionResult]:
        ans = await self._request(events.ElectLeaders(election_type=election_type,
                                                 partitions=partitions))
        await _wait(ans.deliveries, timeout_ms)
        return ans.value

    async def alter_partition_reassignments(
            self, items: tuple[tuple[TopicPartition, tuple[int, ...] | None], ...],
            timeout_ms: int) -> list[events.ReassignmentResult]:
        """Answers once every move has started (steps 1-2 written and sent; with timeout_ms
        > 0 also delivered to the live brokers), or with the per-partition errors of a
        request rejected whole."""
        ans = await self._request(events.AlterReassignments(items=items))
        await _wait(ans.deliveries, timeout_ms)
        return ans.value

    async def list_partition_reassignments(
            self, partitions: tuple[TopicPartition, ...] | None
    ) -> list[events.OngoingReassignment]:
        ans = await self._request(events.ListReassignments(partitions=partitions))
        return ans.value

    def cluster_view(self) -> tuple[str, ControllerContext]:
        """DescribeCluster, answered from memory: (cluster id, the active core's context)."""
        act = self.active
        if act is None or not act.ready:
            raise NotControllerError(self._not_controller_message())
        return self.cluster_id, act.core.ctx


def _code(n: int) -> ErrorCode:
    try:
        return ErrorCode(n)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


def _retrieve(fut: asyncio.Future) -> None:
    if not fut.cancelled():
        fut.exception()  # mark it retrieved: waiters may have given up (timeout)


def _timeout_s(timeout_ms: int) -> float:
    return min(max(timeout_ms, 0) / 1000, MAX_WAIT_S)


async def _wait(futures: list[asyncio.Future], timeout_ms: int) -> None:
    if futures and timeout_ms > 0:
        # all of them (the request's timeout bounds the wait, as Kafka's purgatory does)
        await asyncio.wait(futures, timeout=_timeout_s(timeout_ms),
                           return_when=asyncio.ALL_COMPLETED)


class _NullLog:
    def info(self, *_a, **_k) -> None:
        pass

    warning = error = info
