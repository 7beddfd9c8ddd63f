"""The controller's shell: election, the event queue, and applying decisions (Kafka's
KafkaController + ControllerEventManager, ZooKeeper mode).

- Election: ephemeral /controller (with this candidate's gRPC endpoint) created together with
  the /controller_epoch bump in one transaction (zk_store.py). The loser watches /controller.
- One event queue, one processing task: watches, the ZooKeeper connection listener, broker
  responses, timers and RPCs only post events (events.py). Each handler reads ZooKeeper where
  it must, asks decisions.py what to do, and `_execute`s the answer:
      write ZooKeeper (conditional, epoch-checked)  ->  apply to the context  ->  send requests
  - the controller writes ZooKeeper before it tells brokers.
- Losing ZooKeeper: on SUSPENDED or LOST the controller resigns *at once* (in the connection
  callback, before any further event runs): it drops its context and channels, fails pending
  RPCs with NOT_CONTROLLER and restarts the event processor, so nothing half-done continues.
  On CONNECTED it re-runs the election; if its /controller survived (same session) it takes a
  new epoch conditionally on that znode (reclaim). A controller paused past its session
  (SIGSTOP) that wakes up can change nothing: its transactions fail the /controller_epoch
  version check (ControllerMovedError -> resign) and brokers refuse its old controller epoch.
- Topic deletion, AlterPartition, ControlledShutdown, ElectLeaders, CreateTopics as in Kafka's
  ZK controller; see decisions.py for the rules.

Partial: reassignment (AlterPartitionReassignments/ListPartitionReassignments answer
UNIMPLEMENTED; C6), /restart_partitions (C5), ELR and unclean recovery (C7), the
/admin/preferred_replica_election znode (ElectLeaders replaces it), and adding partitions to a
topic. AlterPartition requests are handled one RPC per event (not coalesced).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import grpc
from kazoo.exceptions import KazooException, NodeExistsError

from common.errors import ErrorCode
from common.names import TopicPartition
from common.rpc import replog_pb2 as pb
from common.rpc_status import error_code_of
from common.zk import AsyncZk
from common.zk_layout import ControllerInfo, TopicAssignment
from controller import decisions as D
from controller import events as E
from controller.assignment import BrokerMetadata
from controller.channel import ControllerChannelManager, Delivery
from controller.context import ControllerContext
from controller.metrics import ControllerMetrics
from controller.request_batch import broker_endpoint, build_requests, controller_endpoint
from controller.state_machine import PartitionState
from controller.topics import TopicError, plan_topic
from controller.zk_store import ControllerMovedError, ZkStore

log = logging.getLogger(__name__)

MAX_WAIT_S = 300.0
FAILOVER_RETRY_S = 1.0


class NotControllerError(Exception):
    error_code = ErrorCode.NOT_CONTROLLER


class RequestError(Exception):
    """A whole-request failure: gRPC status + Kafka code (proto convention 1)."""

    def __init__(self, status: grpc.StatusCode, error_code: ErrorCode, message: str):
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message


@dataclass
class _Active:
    ctx: ControllerContext
    channel: ControllerChannelManager
    generation: int
    ready: bool = False


class Controller:
    """One controller candidate. `start()` joins the election; while active it owns a
    ControllerContext. The public coroutines (`create_topics`, `alter_partition`, ...) are
    what the gRPC servicer calls."""

    def __init__(self, *, controller_id: int, zk: AsyncZk, endpoint: ControllerInfo,
                 config: Mapping[str, Any], metrics: ControllerMetrics | None = None,
                 events=None, clock: Callable[[], float] = time.monotonic,
                 wall_ms: Callable[[], float] = lambda: time.time() * 1000,
                 rng: random.Random | None = None,
                 on_active_change: Callable[[bool], None] | None = None):
        self.controller_id = controller_id
        self.zk = zk
        self.store = ZkStore(zk)
        self.info = endpoint
        self.config = config
        self.metrics = metrics or ControllerMetrics()
        self.events = events if events is not None else _NullLog()
        self.clock = clock
        self.wall_ms = wall_ms
        self.rng = rng or random.Random()
        self.on_active_change = on_active_change
        self.cluster_id = ""
        self.active: _Active | None = None
        self.active_controller: ControllerInfo | None = None  # as read from /controller
        self._generation = 0
        self._queue: asyncio.Queue[E.Event] = asyncio.Queue()
        self._processor: asyncio.Task | None = None
        self._current: E.Event | None = None
        self._tasks: list[asyncio.Task] = []
        self._closing: set[asyncio.Task] = set()
        self._deletion_waiters: dict[str, list[asyncio.Future]] = {}
        self._stopping = False
        self._watchers: dict[Any, Callable] = {}

    # ================================================================== lifecycle

    @property
    def is_active(self) -> bool:
        """Active and done with its failover (loaded, brokers told)."""
        return self.active is not None and self.active.ready

    @property
    def epoch(self) -> int:
        return self.active.ctx.epoch if self.active else -1

    @property
    def context(self) -> ControllerContext | None:
        return self.active.ctx if self.active else None

    async def start(self) -> None:
        """The AsyncZk must be started. Creates the persistent paths and joins the election."""
        self.zk.on_state_change(self._on_zk_state)
        await self.store.ensure_paths()
        self._processor = asyncio.get_running_loop().create_task(self._process(),
                                                                 name="controller-events")
        self._tasks.append(asyncio.get_running_loop().create_task(self._timers(),
                                                                  name="controller-timers"))
        self.metrics.refresh(None)
        self._post(E.Elect())

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
            except KazooException:
                pass
        if self._closing:
            await asyncio.gather(*list(self._closing), return_exceptions=True)
        while not self._queue.empty():
            self._queue.get_nowait().fail(NotControllerError("controller stopped"))

    def _post(self, event: E.Event) -> E.Event:
        if not self._stopping:
            self._queue.put_nowait(event)
        else:
            event.fail(NotControllerError("controller stopping"))
        return event

    def _watch(self, key, make_event: Callable[[], E.Event]) -> Callable:
        """One stable watcher callable per znode (kazoo keeps a set per path, so re-arming a
        watch with the same callable never makes it fire twice)."""
        w = self._watchers.get(key)
        if w is None:
            w = self._watchers[key] = self.zk.watcher(lambda _ev: self._post(make_event()))
        return w

    async def _timers(self) -> None:
        interval = float(self.config["leader.imbalance.check.interval.seconds"])
        next_rebalance = self.clock() + interval
        pause = 1.0
        while True:
            await asyncio.sleep(pause)
            t0 = self.clock()
            self.metrics.refresh(self.context, self._queue.qsize())
            # Refreshing walks every partition: keep it under ~5% of the loop's time.
            pause = max(1.0, 20 * (self.clock() - t0))
            if self.clock() >= next_rebalance:
                next_rebalance = self.clock() + interval
                if self.active and self.config["auto.leader.rebalance.enable"]:
                    self._post(E.AutoRebalance())

    # ================================================================== ZooKeeper session

    def _on_zk_state(self, state: str) -> None:
        """Runs on the event loop (AsyncZk posts it). Resign at once on SUSPENDED/LOST."""
        if state in ("SUSPENDED", "LOST"):
            if self.active is not None:
                self._resign(f"ZooKeeper connection {state}")
                self._restart_processor()
        elif state == "CONNECTED" and not self._stopping:
            self._post(E.Elect())

    def _restart_processor(self) -> None:
        if self._current is not None:
            self._current.fail(NotControllerError("controller resigned"))
        if self._processor is not None:
            self._processor.cancel()
        if not self._stopping:
            self._processor = asyncio.get_running_loop().create_task(
                self._process(), name="controller-events")

    def _resign(self, reason: str) -> None:
        """Stop acting as controller now (Kafka's onControllerResignation)."""
        act = self.active
        if act is None:
            return
        self.active = None
        t = asyncio.get_running_loop().create_task(act.channel.close())
        self._closing.add(t)
        t.add_done_callback(self._closing.discard)
        for waiters in self._deletion_waiters.values():
            for f in waiters:
                if not f.done():
                    f.set_exception(NotControllerError("controller resigned"))
        self._deletion_waiters.clear()
        self.metrics.refresh(None, self._queue.qsize())
        self.events.info("controller_resigned", controller_id=self.controller_id,
                         controller_epoch=act.ctx.epoch, reason=reason)
        if self.on_active_change:
            self.on_active_change(False)

    # ================================================================== event processing

    async def _process(self) -> None:
        while True:
            ev = await self._queue.get()
            self._current = ev
            try:
                await self._handle(ev)
            except asyncio.CancelledError:
                ev.fail(NotControllerError("controller resigned"))
                raise
            except ControllerMovedError as e:
                ev.fail(NotControllerError(str(e)))
                self._resign(f"deposed: {e}")
                self._post(E.Elect())
            except NotControllerError as e:
                ev.fail(e)
            except RequestError as e:
                ev.fail(e)
            except KazooException as e:
                # A ZooKeeper failure mid-event: the connection listener resigns if the
                # session is in trouble; the event fails and is not retried.
                log.warning("ZooKeeper error handling %s: %r", ev.name, e)
                ev.fail(RequestError(grpc.StatusCode.UNAVAILABLE,
                                     ErrorCode.UNKNOWN_SERVER_ERROR, f"ZooKeeper: {e!r}"))
            except Exception as e:
                log.exception("controller event %s failed", ev.name)
                ev.fail(RequestError(grpc.StatusCode.INTERNAL, ErrorCode.UNKNOWN_SERVER_ERROR,
                                     f"{type(e).__name__}: {e}"))
            finally:
                self._current = None

    async def _handle(self, ev: E.Event) -> None:
        if isinstance(ev, E.Elect):
            return await self._elect()
        if isinstance(ev, E.ControllerChange):
            return await self._on_controller_change()
        if self.active is None:
            ev.fail(NotControllerError(self._not_controller_message()))
            return
        handler = {
            E.BrokerChange: self._on_broker_change,
            E.BrokerModification: self._on_broker_modification,
            E.TopicChange: self._on_topic_change,
            E.TopicDeletionChange: self._on_topic_deletion_change,
            E.TopicConfigChange: self._on_topic_config_change,
            E.StopReplicaResponse: self._on_stop_replica_response,
            E.AutoRebalance: self._on_auto_rebalance,
            E.CreateTopics: self._on_create_topics,
            E.DeleteTopics: self._on_delete_topics,
            E.AlterPartition: self._on_alter_partition,
            E.ControlledShutdown: self._on_controlled_shutdown,
            E.ElectLeaders: self._on_elect_leaders,
        }[type(ev)]
        result = await handler(ev)
        ev.resolve(result)

    def _not_controller_message(self) -> str:
        c = self.active_controller
        who = f"controller {c.controller_id} at {c.address} is" if c and c.controller_id >= 0 \
            else "no controller is"
        return f"This is not the active controller ({who} active)"

    # ================================================================== election

    async def _elect(self) -> None:
        if self.active is not None or self._stopping or not self.zk.connected:
            return
        w = self._watch("controller", E.ControllerChange)
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
                self._post(E.Elect())
            return
        await self._become_active(*got)

    async def _on_controller_change(self) -> None:
        existing = await self.store.read_controller(watch=self._watch("controller",
                                                                      E.ControllerChange))
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
        """Kafka's onControllerFailover: load everything, tell every broker, elect."""
        started = self.clock()
        self._generation += 1
        ctx = ControllerContext(
            controller_id=self.controller_id, epoch=epoch, epoch_zk_version=epoch_version,
            unclean_leader_election_default=bool(self.config["unclean.leader.election.enable"]),
            relinquish_cooldown_ms=int(self.config["leader.imbalance.check.interval.seconds"])
            * 1000)
        gen = self._generation
        channel = ControllerChannelManager(on_response=lambda *a: self._on_response(gen, *a))
        act = self.active = _Active(ctx, channel, gen)
        self.active_controller = self.info
        self.events.info("controller_elected", controller_id=self.controller_id,
                         controller_epoch=epoch)
        try:
            await self._load(ctx)
            channel.update_brokers(ctx.live_brokers)
            await self._execute(D.on_controller_failover(ctx), started)
        except asyncio.CancelledError:
            self._resign("failover interrupted")
            raise
        except Exception as e:
            # Kafka triggers a controller move here. /controller is still ours, so the retry
            # (after a pause, so a persistent fault does not spin) reclaims it with a new epoch.
            self._resign(f"failover failed: {e!r}")
            if not isinstance(e, ControllerMovedError):
                asyncio.get_running_loop().call_later(FAILOVER_RETRY_S, self._post, E.Elect())
            raise
        act.ready = True
        # The loaded context lives as long as this activation: keep the cyclic GC from
        # re-scanning it on every full collection (CPython's gc.freeze).
        gc.freeze()
        self.metrics.refresh(ctx, self._queue.qsize())
        self.events.info("controller_failover_done", controller_id=self.controller_id,
                         controller_epoch=epoch, brokers=sorted(ctx.live_brokers),
                         topics=len(ctx.assignments), partitions=len(ctx.leadership),
                         duration_ms=round((self.clock() - started) * 1000, 1))
        if self.on_active_change:
            self.on_active_change(True)

    async def _load(self, ctx: ControllerContext) -> None:
        self.cluster_id = await self.store.get_or_create_cluster_id(self.rng)
        regs = await self.store.read_brokers(
            watch=self._watch("brokers", E.BrokerChange), broker_watch=self._broker_watch)
        for reg in regs.values():
            ctx.add_broker(reg)
        names = await self.store.read_topic_names(watch=self._watch("topics", E.TopicChange))
        assignments = await self.store.read_assignments(names)
        configs = await asyncio.gather(*(
            self.store.read_topic_config(t, watch=self._config_watch(t)) for t in assignments))
        for (topic, a), cfg in zip(assignments.items(), configs):
            ctx.add_topic(a, cfg)
        ctx.leadership.update(await self.store.read_partition_states(
            list(ctx.all_partitions())))
        to_delete = await self.store.read_topics_to_delete(
            watch=self._watch("delete_topics", E.TopicDeletionChange))
        ctx.topics_to_delete = {t for t in to_delete if t in ctx.assignments}
        for t in to_delete:
            if t not in ctx.assignments:  # a finished deletion's leftover entry
                await self.store.delete_topic(t, ctx.epoch_zk_version)
        ctx.reset_states()

    def _broker_watch(self, broker_id: int) -> Callable:
        return self._watch(("broker", broker_id),
                           lambda: E.BrokerModification(broker_id=broker_id))

    def _config_watch(self, topic: str) -> Callable:
        return self._watch(("config", topic), lambda: E.TopicConfigChange(topic=topic))

    # ================================================================== applying decisions

    async def _execute(self, d: D.Decision, started: float | None = None,
                       retry_creates: bool = True, retries: int = 3
                       ) -> tuple[set[TopicPartition], list[Delivery]]:
        """Write ZooKeeper, apply to the context, send the requests (in that order)."""
        act = self.active
        if act is None:
            raise NotControllerError("controller resigned")
        ctx = act.ctx
        failed: set[TopicPartition] = set()
        if d.writes:
            failed = await self.store.write_partition_states(list(d.writes.values()),
                                                             ctx.epoch_zk_version)
        if self.active is not act:
            raise NotControllerError("controller resigned")
        D.apply(ctx, d, failed)
        if failed:
            # Someone else changed these znodes: take ZooKeeper's word for them.
            ctx.leadership.update(await self.store.read_partition_states(sorted(failed)))
            log.warning("partition state writes refused (version changed): %s",
                        ", ".join(map(str, sorted(failed))))
        self._record(ctx, d, failed, started)
        batches = build_requests(ctx, d, self.info, failed)
        futures = act.channel.send(batches)
        orphans = [tp for tp in sorted(failed) if ctx.has_partition(tp)
                   and ctx.partition_sm.state(tp) is PartitionState.NonExistentPartition]
        if orphans and retry_creates:
            # A refused create: adopt what ZooKeeper has, or create again (once).
            more_failed, more = await self._execute(D.on_new_partitions(ctx, orphans),
                                                    started, retry_creates=False)
            failed = (failed - set(orphans)) | more_failed
            futures += more
        if failed and retries > 0:
            # A refused election is decided again on the re-read state (bounded: a znode
            # rewritten on every attempt is left to the next event).
            again = D.reelect_after_refused_writes(ctx, sorted(failed))
            if not again.empty:
                more_failed, more = await self._execute(again, started, retry_creates=False,
                                                        retries=retries - 1)
                failed = (failed - set(again.writes)) | more_failed
                futures += more
        return failed, futures

    def _record(self, ctx: ControllerContext, d: D.Decision, failed: set[TopicPartition],
                started: float | None) -> None:
        elections = [e for e in d.elections if e.tp not in failed]
        for e in elections:
            s = ctx.leadership.get(e.tp)
            self.events.info("leader_election", partition=str(e.tp), old_leader=e.old_leader,
                             new_leader=e.new_leader, leader_epoch=e.leader_epoch,
                             unclean=e.unclean, reason=str(e.reason),
                             isr=list(s.isr) if s else [],
                             partition_epoch=s.partition_epoch if s else -1,
                             controller_epoch=ctx.epoch)
            self.metrics.leader_elections.labels(str(e.reason)).inc()
            if e.unclean:
                self.metrics.unclean_elections.inc()
            if e.reason is D.ElectionReason.RELINQUISHED:
                self.metrics.leadership_relinquished.inc()
        if elections and started is not None:
            self.metrics.election_latency_ms.observe((self.clock() - started) * 1000)
        for w in d.isr_changes():
            if w.tp in failed:
                continue
            self.events.info("isr_change", partition=str(w.tp), leader=w.new.leader,
                             leader_epoch=w.new.leader_epoch, old_isr=list(w.old.isr),
                             new_isr=list(w.new.isr), partition_epoch=w.new.partition_epoch,
                             controller_epoch=ctx.epoch)

    def _on_response(self, generation: int, broker_id: int, kind: str, request, response,
                     error) -> None:
        """Broker responses (called on the loop by the channel manager): post what the
        controller must act on."""
        if error is not None:
            code = error_code_of(error) if isinstance(error, grpc.aio.AioRpcError) else None
            log.warning("%s to broker %s refused: %s (code %s)", kind, broker_id, error, code)
            if code == ErrorCode.STALE_CONTROLLER_EPOCH:
                self._post(E.ControllerChange())  # a newer controller exists: check /controller
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
                self._post(E.StopReplicaResponse(generation=generation, broker_id=broker_id,
                                                 errors=errors))
        elif kind == "LeaderAndIsr" and response is not None:
            bad = [f"{r.topic}-{r.partition}:{r.error_code}" for r in response.partition_errors
                   if r.error_code != ErrorCode.NONE]
            if bad:  # KAFKA_STORAGE_ERROR here is C5's signal (seed 003); logged for now
                log.info("LeaderAndIsr errors from broker %s: %s", broker_id, ", ".join(bad))

    # ================================================================== cluster events

    async def _on_broker_change(self, ev: E.Event) -> None:
        act = self.active
        ctx = act.ctx
        regs = await self.store.read_brokers(watch=self._watch("brokers", E.BrokerChange),
                                             broker_watch=self._broker_watch)
        if self.active is not act:
            raise NotControllerError("controller resigned")
        known = dict(ctx.live_brokers)
        dead = sorted(set(known) - set(regs))
        new = sorted(set(regs) - set(known))
        bounced = sorted(b for b in set(regs) & set(known) if regs[b].epoch != known[b].epoch)
        gone = sorted(set(dead) | set(bounced))
        if gone:
            for b in gone:
                ctx.remove_broker(b)
                self.events.info("broker_failed", broker=b, broker_epoch=known[b].epoch,
                                 controller_epoch=ctx.epoch, bounced=b in bounced)
            act.channel.update_brokers(ctx.live_brokers)
            await self._execute(D.on_brokers_failed(ctx, gone), ev.enqueued)
        arrived = sorted(set(new) | set(bounced))
        if arrived:
            for b in arrived:
                ctx.add_broker(regs[b])
                self.events.info("broker_registered", broker=b, broker_epoch=regs[b].epoch,
                                 address=regs[b].address, rack=regs[b].rack,
                                 clean_shutdown=regs[b].clean_shutdown,
                                 controller_epoch=ctx.epoch)
            act.channel.update_brokers(ctx.live_brokers)
            await self._execute(D.on_brokers_started(ctx, arrived), ev.enqueued)

    async def _on_broker_modification(self, ev: E.BrokerModification) -> None:
        """A broker rewrote its registration (endpoint, rack, log dirs): same epoch, new data
        -> new metadata for everyone (Kafka's onBrokerUpdate)."""
        act = self.active
        ctx = act.ctx
        reg = await self.store.read_broker(ev.broker_id, watch=self._broker_watch(ev.broker_id))
        old = ctx.live_brokers.get(ev.broker_id)
        if reg is None or old is None or reg.epoch != old.epoch or reg == old:
            return  # appearance/disappearance is BrokerChange's business
        ctx.live_brokers[ev.broker_id] = reg
        act.channel.update_brokers(ctx.live_brokers)
        d = D.Decision()
        for b in ctx.live_brokers:
            d.update_metadata[b] = set()
        d.leader_and_isr[ev.broker_id] = {tp: False for tp in ctx.partitions_on_brokers(
            [ev.broker_id]) if tp in ctx.leadership} if reg.address != old.address else {}
        await self._execute(d)

    async def _on_topic_change(self, ev: E.Event) -> None:
        """Topics that appeared in ZooKeeper without CreateTopics (written by another tool):
        initialize their partitions. Topics that vanished outside a deletion are forgotten."""
        act = self.active
        ctx = act.ctx
        names = set(await self.store.read_topic_names(watch=self._watch("topics",
                                                                         E.TopicChange)))
        for t in sorted(set(ctx.assignments) - names):
            if not ctx.is_being_deleted(t):
                ctx.remove_topic(t)
        new = sorted(names - set(ctx.assignments))
        if not new:
            return
        assignments = await self.store.read_assignments(new)
        tps: list[TopicPartition] = []
        for t, a in assignments.items():
            ctx.add_topic(a, await self.store.read_topic_config(t, watch=self._config_watch(t)))
            tps += ctx.partitions_of(t)
            self.events.info("topic_created", topic=t, topic_id=a.topic_id,
                             partitions=len(a.partitions), source="zookeeper",
                             controller_epoch=ctx.epoch)
        ctx.leadership.update(await self.store.read_partition_states(tps))
        await self._execute(D.on_new_partitions(ctx, tps), ev.enqueued)

    async def _on_topic_config_change(self, ev: E.TopicConfigChange) -> None:
        act = self.active
        ctx = act.ctx
        cfg = await self.store.read_topic_config(ev.topic, watch=self._config_watch(ev.topic))
        if ev.topic not in ctx.assignments:
            return
        before = ctx.unclean_allowed(ev.topic)
        ctx.topic_configs[ev.topic] = cfg
        if ctx.unclean_allowed(ev.topic) and not before:
            # Kafka: enabling unclean election for a topic elects its offline partitions.
            await self._execute(D.elect_offline_partitions(ctx), ev.enqueued)

    async def _on_auto_rebalance(self, ev: E.Event) -> None:
        ctx = self.active.ctx
        tps = D.imbalanced_partitions(ctx, int(self.config[
            "leader.imbalance.per.broker.percentage"]), self.wall_ms())
        if tps:
            await self._execute(D.elect_leaders(ctx, D.ElectionType.PREFERRED, tps,
                                                self.wall_ms()), ev.enqueued)

    # ================================================================== topic deletion

    async def _on_topic_deletion_change(self, ev: E.Event) -> None:
        ctx = self.active.ctx
        names = await self.store.read_topics_to_delete(
            watch=self._watch("delete_topics", E.TopicDeletionChange))
        new = [t for t in names if t in ctx.assignments and not ctx.is_being_deleted(t)]
        for t in names:
            if t not in ctx.assignments:
                await self.store.delete_topic(t, ctx.epoch_zk_version)
        if new:
            await self._start_deletion(new)

    async def _start_deletion(self, topics: list[str]) -> None:
        ctx = self.active.ctx
        for t in topics:
            ctx.topics_to_delete.add(t)
            self.events.info("topic_deletion_started", topic=t, topic_id=ctx.topic_id(t),
                             controller_epoch=ctx.epoch)
        d = D.start_topic_deletion(ctx, topics)
        await self._execute(d)
        for topic in sorted(d.deletable_topics):  # nothing left to ask any broker
            await self._finish_deletion(topic)

    async def _on_stop_replica_response(self, ev: E.StopReplicaResponse) -> None:
        act = self.active
        if ev.generation != act.generation:
            return
        d = D.on_stop_replica_response(act.ctx, ev.broker_id, ev.errors)
        await self._execute(d)
        for topic in sorted(d.deletable_topics):
            await self._finish_deletion(topic)

    async def _finish_deletion(self, topic: str) -> None:
        ctx = self.active.ctx
        topic_id = ctx.topic_id(topic)
        await self.store.delete_topic(topic, ctx.epoch_zk_version)
        D.apply(ctx, D.finish_topic_deletion(ctx, topic))
        ctx.remove_topic(topic)
        self._watchers.pop(("config", topic), None)
        self.events.info("topic_deleted", topic=topic, topic_id=topic_id,
                         controller_epoch=ctx.epoch)
        for f in self._deletion_waiters.pop(topic, []):
            if not f.done():
                f.set_result(True)

    # ================================================================== RPC events

    async def _on_create_topics(self, ev: E.CreateTopics):
        act = self.active
        ctx = act.ctx
        req = ev.request
        results: list[pb.CreatableTopicResult] = []
        names = [t.name for t in req.topics]
        dups = {n for n in names if names.count(n) > 1}
        live = [BrokerMetadata(b, r.rack) for b, r in sorted(ctx.live_brokers.items())]
        existing = set(ctx.assignments)
        plans = []
        for t in req.topics:
            res = pb.CreatableTopicResult(name=t.name, num_partitions=-1, replication_factor=-1)
            results.append(res)
            if t.name in dups:
                res.error_code = ErrorCode.INVALID_REQUEST
                res.error_message = (f"Create topics request contains multiple entries for "
                                     f"the topic {t.name}")
                continue
            try:
                plan = plan_topic(
                    t.name, t.num_partitions if t.HasField("num_partitions") else None,
                    t.replication_factor if t.HasField("replication_factor") else None,
                    {a.partition: list(a.broker_ids) for a in t.assignments} or None,
                    dict(t.configs), existing=existing, live_brokers=live,
                    default_partitions=int(self.config["num.partitions"]),
                    default_replication_factor=int(self.config["default.replication.factor"]),
                    rng=self.rng)
            except TopicError as e:
                res.error_code = e.error_code
                res.error_message = e.message
                continue
            existing.add(plan.name)
            plans.append((res, plan))
            res.topic_id = plan.topic_id
            res.num_partitions = len(plan.assignment)
            res.replication_factor = plan.replication_factor
            res.configs.update(plan.configs)
        if req.validate_only:
            return pb.CreateTopicsResponse(topics=results), []
        deliveries: list[Delivery] = []
        tps: list[TopicPartition] = []
        for res, plan in plans:
            a = TopicAssignment(plan.name, plan.topic_id, plan.assignment)
            try:
                await self.store.create_topic(a, plan.configs, ctx.epoch_zk_version)
            except NodeExistsError:
                res.error_code = ErrorCode.TOPIC_ALREADY_EXISTS
                res.error_message = f"Topic '{plan.name}' already exists."
                res.topic_id, res.num_partitions, res.replication_factor = "", -1, -1
                res.configs.clear()
                continue
            ctx.add_topic(a, plan.configs)
            tps += ctx.partitions_of(plan.name)
            self.events.info("topic_created", topic=plan.name, topic_id=plan.topic_id,
                             partitions=len(plan.assignment),
                             replication_factor=plan.replication_factor,
                             assignment={str(p): r for p, r in plan.assignment.items()},
                             configs=plan.configs, controller_epoch=ctx.epoch)
        if tps:
            for res, plan in plans:  # arm each new topic's config watch
                if res.error_code == ErrorCode.NONE:
                    await self.store.read_topic_config(plan.name,
                                                       watch=self._config_watch(plan.name))
            _, deliveries = await self._execute(D.on_new_partitions(ctx, tps), ev.enqueued)
        return pb.CreateTopicsResponse(topics=results), _awaited(deliveries)

    async def _on_delete_topics(self, ev: E.DeleteTopics):
        ctx = self.active.ctx
        results = []
        waits: list[tuple[pb.DeletableTopicResult, asyncio.Future]] = []
        start = []
        loop = asyncio.get_running_loop()
        for name in dict.fromkeys(ev.request.topic_names):
            res = pb.DeletableTopicResult(name=name, topic_id=ctx.topic_id(name))
            results.append(res)
            if name not in ctx.assignments:
                res.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                res.error_message = "This server does not host this topic-partition."
                continue
            fut = loop.create_future()
            fut.add_done_callback(_retrieve)
            self._deletion_waiters.setdefault(name, []).append(fut)
            waits.append((res, fut))
            if not ctx.is_being_deleted(name):
                await self.store.mark_topic_for_deletion(name, ctx.epoch_zk_version)
                start.append(name)
        if start:
            await self._start_deletion(start)
        return results, waits

    async def _on_alter_partition(self, ev: E.AlterPartition):
        ctx = self.active.ctx
        req = ev.request
        items = []
        for t in req.topics:
            for p in t.partitions:
                items.append(D.AlterPartitionItem(
                    TopicPartition(t.topic, p.partition), p.leader_epoch,
                    tuple((s.broker_id, s.broker_epoch) for s in p.new_isr_with_epochs),
                    p.partition_epoch, int(p.leader_recovery_state), t.topic_id,
                    p.relinquish_leadership))
        try:
            d = D.alter_partition(ctx, req.broker_id, req.broker_epoch, items, self.wall_ms())
        except D.StaleBrokerEpoch as e:
            raise RequestError(grpc.StatusCode.FAILED_PRECONDITION,
                               ErrorCode.STALE_BROKER_EPOCH, str(e)) from None
        failed, _ = await self._execute(d, ev.enqueued)
        for tp, o in d.outcomes.items():
            if o.error == ErrorCode.NEW_LEADER_ELECTED and tp not in failed:
                s = ctx.leadership[tp]
                self.events.info("leadership_relinquished", partition=str(tp),
                                 broker=req.broker_id, new_leader=s.leader,
                                 leader_epoch=s.leader_epoch, controller_epoch=ctx.epoch)
        resp = pb.AlterPartitionResponse()
        for t in req.topics:
            tr = resp.topics.add(topic=t.topic, topic_id=t.topic_id)
            for p in t.partitions:
                tp = TopicPartition(t.topic, p.partition)
                o = d.outcomes.get(tp, D.Outcome(ErrorCode.UNKNOWN_SERVER_ERROR))
                code = ErrorCode.INVALID_UPDATE_VERSION if tp in failed else o.error
                r = tr.partitions.add(partition=p.partition, error_code=code)
                s = ctx.leadership.get(tp)
                if s is not None:
                    r.leader_id, r.leader_epoch = s.leader, s.leader_epoch
                    r.isr.extend(s.isr)
                    r.leader_recovery_state = s.leader_recovery_state
                    r.partition_epoch = s.partition_epoch
                else:
                    r.leader_id, r.leader_epoch, r.partition_epoch = -1, -1, -1
        return resp

    async def _on_controlled_shutdown(self, ev: E.ControlledShutdown):
        ctx = self.active.ctx
        current = ctx.broker_epoch(ev.broker_id)
        if current is None:
            raise RequestError(grpc.StatusCode.FAILED_PRECONDITION,
                               ErrorCode.BROKER_NOT_AVAILABLE,
                               f"Broker {ev.broker_id} is not registered")
        if ev.broker_epoch != -1 and ev.broker_epoch != current:
            raise RequestError(grpc.StatusCode.FAILED_PRECONDITION,
                               ErrorCode.STALE_BROKER_EPOCH,
                               f"Broker epoch {ev.broker_epoch} of broker {ev.broker_id} is "
                               f"not its current registration's ({current})")
        first = ev.broker_id not in ctx.shutting_down
        ctx.shutting_down.add(ev.broker_id)
        await self._execute(D.controlled_shutdown(ctx, ev.broker_id), ev.enqueued)
        remaining = D.remaining_leaderships(ctx, ev.broker_id)
        self.events.info("controlled_shutdown", broker=ev.broker_id, broker_epoch=current,
                         first_attempt=first, remaining=[str(tp) for tp in remaining],
                         controller_epoch=ctx.epoch)
        return pb.ControlledShutdownResponse(remaining_partitions=[
            pb.TopicPartition(topic=tp.topic, partition=tp.partition) for tp in remaining])

    async def _on_elect_leaders(self, ev: E.ElectLeaders):
        ctx = self.active.ctx
        req = ev.request
        tps = None if req.all_topic_partitions else [
            TopicPartition(t.topic, p) for t in req.topic_partitions for p in t.partitions]
        d = D.elect_leaders(ctx, int(req.election_type), tps, self.wall_ms())
        failed, deliveries = await self._execute(d, ev.enqueued)
        results = []
        for tp, o in sorted(d.outcomes.items()):
            code, msg = o.error, o.message
            if tp in failed:
                code, msg = ErrorCode.UNKNOWN_SERVER_ERROR, "the partition state write failed"
            results.append(pb.PartitionResult(topic=tp.topic, partition=tp.partition,
                                              error_code=code, error_message=msg))
        return pb.ElectLeadersResponse(replica_election_results=results), _awaited(deliveries)

    # ================================================================== public API (servicer)

    async def _submit(self, ev: E.Event):
        if self.active is None:
            raise NotControllerError(self._not_controller_message())
        ev.future = asyncio.get_running_loop().create_future()
        self._post(ev)
        return await ev.future

    async def create_topics(self, request: pb.CreateTopicsRequest) -> pb.CreateTopicsResponse:
        """Responds once the topics and their leaders are in ZooKeeper and every live broker
        has acknowledged its LeaderAndIsr/UpdateMetadata, or when timeout_ms expires -
        whichever is first (see _awaited); with timeout_ms <= 0 it does not wait for brokers."""
        resp, futures = await self._submit(E.CreateTopics(request=request))
        await _wait(futures, request.timeout_ms)
        return resp

    async def delete_topics(self, request: pb.DeleteTopicsRequest) -> pb.DeleteTopicsResponse:
        """Responds once every listed topic is deleted (all replicas acknowledged
        StopReplica(delete) and the znodes are gone), or REQUEST_TIMED_OUT for those still
        in progress at timeout_ms (the deletion continues)."""
        results, waits = await self._submit(E.DeleteTopics(request=request))
        timeout = _timeout_s(request.timeout_ms)
        if waits:
            await asyncio.wait([f for _, f in waits], timeout=timeout)
        for res, fut in waits:
            if not fut.done():
                res.error_code = ErrorCode.REQUEST_TIMED_OUT
                res.error_message = (f"Deletion of topic {res.name} is still in progress "
                                     "(waiting for its replicas to be deleted)")
            elif fut.exception() is not None:
                raise fut.exception()
        return pb.DeleteTopicsResponse(responses=results)

    async def alter_partition(self, request: pb.AlterPartitionRequest
                              ) -> pb.AlterPartitionResponse:
        return await self._submit(E.AlterPartition(request=request))

    async def controlled_shutdown(self, request: pb.ControlledShutdownRequest
                                  ) -> pb.ControlledShutdownResponse:
        return await self._submit(E.ControlledShutdown(broker_id=request.broker_id,
                                                       broker_epoch=request.broker_epoch))

    async def elect_leaders(self, request: pb.ElectLeadersRequest) -> pb.ElectLeadersResponse:
        resp, futures = await self._submit(E.ElectLeaders(request=request))
        await _wait(futures, request.timeout_ms)
        return resp

    def describe_cluster(self) -> pb.DescribeClusterResponse:
        act = self.active
        if act is None or not act.ready:
            raise NotControllerError(self._not_controller_message())
        ctx = act.ctx
        return pb.DescribeClusterResponse(
            cluster_id=self.cluster_id, controller_id=self.controller_id,
            controller_epoch=ctx.epoch,
            brokers=[broker_endpoint(r) for _, r in sorted(ctx.live_brokers.items())],
            controller=controller_endpoint(self.info))


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


def _awaited(deliveries: list[Delivery]) -> list[asyncio.Future]:
    """What CreateTopics/ElectLeaders wait for (up to timeout_ms): every LeaderAndIsr and
    UpdateMetadata of the decision, so that when the answer arrives the leaders act as
    leaders and Metadata from *any* broker shows the change (clients create, then describe
    or produce through another broker). A registered but unreachable broker therefore makes
    the answer wait for the timeout; the result is still NONE - the change is made."""
    return [d.done for d in deliveries if d.kind in ("LeaderAndIsr", "UpdateMetadata")]


async def _wait(futures: list[asyncio.Future], timeout_ms: int) -> None:
    if futures and timeout_ms > 0:
        await asyncio.wait(futures, timeout=_timeout_s(timeout_ms))


class _NullLog:
    def info(self, *_a, **_k) -> None:
        pass

    warning = error = info
