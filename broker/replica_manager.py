"""The replica manager: the broker's partitions and the replication protocol around them.

Kafka's ReplicaManager for ZooKeeper mode: LeaderAndIsr makes this broker leader or follower of
partitions (fenced by controller epoch, broker epoch and leader epoch), StopReplica stops and
maybe deletes them, Produce appends as leader (acks 0/1/all, min.insync.replicas, completion when
the HW passes the batch), Fetch serves followers up to the LEO and consumers up to the HW with
long polling, and the isr-expiration task shrinks the ISR while follower fetches expand it —
both through AlterPartition to the controller.

Ordering rules that bind (write them where they bind, as etcd's raft does):
- The leader updates a follower's fetch state before reading for it, and advances the HW only
  from fetch offsets, i.e. from what followers have already appended (they fetch again only
  after appending), so the HW never exceeds a replica's log.
- A follower truncates (diverging epoch) before it appends anything fetched from a new leader.
- All log mutations for a partition run on its log dir's single executor thread, in order.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from broker import fencing
from broker import isr as isr_rules
from broker.metadata_cache import MetadataCache
from broker.metrics import BrokerMetrics
from broker.partition import Partition
from broker.storage.errors import KafkaStorageError
from broker.storage.log import RecordTooLargeError
from broker.storage.log_manager import LogManager
from broker.truncation import OUT_OF_RANGE, leader_divergence
from common.config import Config
from common.dynamic_config import effective_min_isr
from common.errors import CorruptRecordError, ErrorCode, OffsetOutOfRangeError, ReplogError
from common.names import TopicPartition

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2


def now_ms() -> int:
    return int(time.time() * 1000)


class RequestError(ReplogError):
    """A whole-request failure (stale controller epoch, stale broker epoch...)."""

    def __init__(self, code: ErrorCode, message: str):
        super().__init__(message)
        self.error_code = code


@dataclass
class ProduceResult:
    error: ErrorCode = ErrorCode.NONE
    message: str = ""
    base_offset: int = -1
    log_start_offset: int = -1


@dataclass
class FetchResult:
    error: ErrorCode = ErrorCode.NONE
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes = b""
    diverging: tuple[int, int] | None = None
    leader_id: int = -1
    leader_epoch: int = -1
    message: str = ""


@dataclass
class FetchPartitionRequest:
    tp: TopicPartition
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int | None = None
    last_fetched_epoch: int | None = None
    log_start_offset: int = -1


class ReplicaManager:
    def __init__(self, broker_id: int, config: Config, log_manager: LogManager,
                 metadata: MetadataCache, metrics: BrokerMetrics, events,
                 topic_config_loader: Callable[[str], Awaitable[dict[str, str]]] | None = None,
                 clock: Callable[[], int] = now_ms):
        self.broker_id = broker_id
        self.config = config
        self.log_manager = log_manager
        self.metadata = metadata
        self.metrics = metrics
        self.events = events
        self.clock = clock
        self.partitions: dict[TopicPartition, Partition] = {}
        self.controller_epoch = -1
        self.broker_epoch = -1
        # Topic overrides as last read from /config/topics/<t>. A topic missing here while it
        # has partitions is *unknown* (ZooKeeper could not be read): its min ISR is then the
        # strictest one, never the broker default (issue 15, finding 4).
        self.topic_configs: dict[str, dict[str, str]] = {}
        # This broker's dynamic configs (/config/brokers/<default> under /config/brokers/<id>),
        # None while they cannot be read. Set by broker/config_manager.py.
        self.broker_dynamic_config: dict[str, str] | None = {}
        self._load_topic_config = topic_config_loader
        self._config_tickets: dict[str, int] = {}  # topic -> latest load started
        self._config_applied: dict[str, int] = {}  # topic -> ticket of the config held
        self._config_retries: dict[str, asyncio.Task] = {}
        self.fetcher_manager = None  # set by the server (broker.fetcher.ReplicaFetcherManager)
        self.alter_partition = None  # set by the server (broker.alter_partition)
        self.lag_max_ms = config["replica.lag.time.max.ms"]
        # seed 002 / KIP-501 (C4)
        self.pending_reads_in_sync = config["follower.fetch.pending.reads.insync.enable"]
        self.process_time_max_ms = config["follower.fetch.process.time.max.ms"]
        self._fetch_ids = 0
        self._read_pool = None
        # Controller requests change replica state across awaits: one at a time (Kafka's
        # replicaStateChangeLock), or two LeaderAndIsr requests could interleave.
        self._state_change = asyncio.Lock()
        self._register_gauges()

    # ------------------------------------------------------------------ metrics

    def _register_gauges(self) -> None:
        m = self.metrics
        parts = lambda: list(self.partitions.values())
        m.gauge("kafka_server_replicamanager_partitioncount", "partitions on this broker",
                lambda: len(parts()))
        m.gauge("kafka_server_replicamanager_leadercount", "partitions led by this broker",
                lambda: sum(p.is_leader for p in parts()))
        m.gauge("kafka_server_replicamanager_underreplicatedpartitions",
                "led partitions whose ISR is smaller than their replicas",
                lambda: sum(p.under_replicated for p in parts()))
        m.gauge("kafka_server_replicamanager_underminisrpartitioncount",
                "led partitions whose ISR is smaller than min.insync.replicas",
                lambda: sum(p.under_min_isr for p in parts()))
        m.gauge("kafka_server_replicamanager_offlinereplicacount",
                "replicas in offline log dirs",
                lambda: sum(p.log is None and not p.stopped for p in parts()))
        m.gauge("kafka_log_logmanager_offlinelogdirectorycount", "offline log dirs",
                lambda: len(self.log_manager.offline_dirs))
        m.labelled_gauge("kafka_log_logmanager_logdirectoryoffline",
                         "1 when the log dir is offline, else 0", "logDirectory",
                         lambda: {d.path: float(not d.online) for d in self.log_manager.dirs})
        m.gauge("replog_replicamanager_pendingfollowerfetches",
                "follower fetches being read that keep their follower in sync (seed 002)",
                lambda: sum(len(f.pending_fetches) for p in parts()
                            for f in list(p.followers.values())))

    # ------------------------------------------------------------------ controller requests

    def _check_controller(self, controller_epoch: int, broker_epoch: int) -> None:
        refused = fencing.controller_request_error(controller_epoch, broker_epoch,
                                                   self.controller_epoch, self.broker_epoch)
        if refused is not None:
            raise RequestError(*refused)
        self.controller_epoch = controller_epoch

    # ------------------------------------------------------------------ dynamic topic configs

    async def _topic_config(self, topic: str) -> dict[str, str] | None:
        """The topic's overrides, read from ZooKeeper the first time; None while unreadable
        (never ``{}``: that would silently mean the broker's weaker default)."""
        if topic not in self.topic_configs:
            if self._load_topic_config is None:
                self.topic_configs[topic] = {}
            else:
                await self._load_and_apply_topic_config(topic)
        return self.topic_configs.get(topic)

    async def reload_topic_config(self, topic: str) -> None:
        """A change notification named ``topic`` (broker/config_manager.py, Kafka's
        TopicConfigHandler): re-read it and apply it to the topic's partitions. A topic this
        broker neither holds nor is loading is skipped - it reads the config when it gets one."""
        if self._load_topic_config is None:
            return
        loading = self._config_tickets.get(topic, 0) > self._config_applied.get(topic, 0)
        if topic not in self.topic_configs and not loading and \
                not any(tp.topic == topic for tp in self.partitions):
            return
        await self._load_and_apply_topic_config(topic)

    async def _load_and_apply_topic_config(self, topic: str) -> bool:
        # Loads may overlap (LeaderAndIsr and a notification): one started later read a newer
        # state, so an earlier one finishing after it must not overwrite it.
        ticket = self._config_tickets[topic] = self._config_tickets.get(topic, 0) + 1
        try:
            cfg = await self._load_topic_config(topic)
        except Exception as e:  # noqa: BLE001 - ZooKeeper unreachable or znode unreadable
            if self._config_applied.get(topic, 0) < ticket:
                self.events.error("topic_config_unavailable", topic=topic, error=str(e)[:200],
                                  min_isr="replication factor until read")
                self.apply_topic_config(topic, None)
                self._retry_topic_config(topic)
            return False
        if self._config_applied.get(topic, 0) < ticket:
            self._config_applied[topic] = ticket
            self.apply_topic_config(topic, cfg)
        return True

    def _retry_topic_config(self, topic: str) -> None:
        task = self._config_retries.get(topic)
        if task is None or task.done():
            self._config_retries[topic] = asyncio.ensure_future(self._retry_loop(topic))

    async def _retry_loop(self, topic: str) -> None:
        delay = 0.2
        while topic not in self.topic_configs:
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
            if await self._load_and_apply_topic_config(topic):
                self.events.info("topic_config_recovered", topic=topic,
                                 config=self.topic_configs.get(topic))
                return

    def apply_topic_config(self, topic: str, cfg: dict[str, str] | None) -> None:
        """Hold ``cfg`` (None: unknown) as the topic's overrides and re-derive its partitions'
        min ISR at once: the next acks=all produce is checked against it (Kafka's
        TopicConfigHandler updating the log config in place)."""
        if cfg is None:
            self.topic_configs.pop(topic, None)
        else:
            self.topic_configs[topic] = dict(cfg)
        self._refresh_min_isr(lambda tp: tp.topic == topic)

    def apply_broker_config(self, dynamic: dict[str, str] | None) -> None:
        """This broker's dynamic configs changed (None: unknown); topics without their own
        override follow them."""
        self.broker_dynamic_config = None if dynamic is None else dict(dynamic)
        self._refresh_min_isr(lambda tp: True)

    def _refresh_min_isr(self, which) -> None:
        for tp, p in list(self.partitions.items()):
            if not which(tp):
                continue
            new = self._min_isr(tp.topic, len(p.replicas))
            if new != p.min_isr:
                self.events.info("min_isr_changed", partition=str(tp), old=p.min_isr, new=new)
                p.min_isr = new
                if p.is_leader:
                    p.maybe_advance_hw()  # a lower min ISR may unfreeze the HW

    def _min_isr(self, topic: str, replication_factor: int) -> int:
        return effective_min_isr(self.topic_configs.get(topic), self.broker_dynamic_config,
                                 self.config["min.insync.replicas"], replication_factor)

    async def leader_and_isr(self, req) -> list[tuple[TopicPartition, ErrorCode]]:
        async with self._state_change:
            return await self._leader_and_isr(req)

    async def _leader_and_isr(self, req) -> list[tuple[TopicPartition, ErrorCode]]:
        """Kafka's becomeLeaderOrFollower, in phases so that a request for thousands of
        partitions costs a few executor hand-offs, not two per partition: (1) fence stale
        states and load topic configs, (2) create the missing logs in one job, (3) apply the
        states, (4) write the new leader epochs' start offsets, one job per log dir."""
        self._check_controller(req.controller_epoch, req.broker_epoch)
        results: list[tuple[TopicPartition, ErrorCode]] = []
        loop = asyncio.get_running_loop()
        todo = []
        for s in req.partition_states:
            tp = TopicPartition(s.topic, s.partition)
            if self.broker_id not in s.replicas:
                results.append((tp, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            p = self.partitions.get(tp)
            if p is not None and p.log is not None and not p.stopped:
                change = fencing.partition_state_change(s.leader_epoch, s.partition_epoch,
                                                        p.leader_epoch, p.partition_epoch)
                if change is not fencing.StateChange.NEWER:
                    # older: refused; the same (a new controller resending it): nothing to do
                    results.append((tp, ErrorCode.STALE_CONTROLLER_EPOCH
                                    if change is fencing.StateChange.OLDER else ErrorCode.NONE))
                    continue
            await self._topic_config(s.topic)
            todo.append((tp, s))

        missing = [tp for tp, _ in todo if self.log_manager.get_log(tp) is None]
        created_errors = await loop.run_in_executor(None, self._create_logs, missing) \
            if missing else {}
        for tp, s in todo:
            log = self.log_manager.get_log(tp)
            p = self.partitions.get(tp)
            if log is not None and log.failed is not None and \
                    (p is None or s.leader_epoch != p.leader_epoch):
                # KIP-461: a new leader epoch gives a failed partition another try; a log
                # that failed a write must first be rebuilt from its files.
                try:
                    fresh = await self.log_manager.run(tp, self.log_manager.reload_log, tp)
                    self.events.info("log_reloaded", partition=str(tp), error=log.failed,
                                     leo=fresh.log_end_offset)
                    if p is not None:
                        p.log = fresh
                except KafkaStorageError as e:
                    created_errors[tp] = str(e)

        now = self.clock()
        to_follow: dict[TopicPartition, Partition] = {}
        epoch_starts: dict[object, list] = {}  # log dir -> [(log, epoch, start offset)]
        for tp, s in todo:
            if tp in created_errors:
                self.events.error("replica_creation_failed", partition=str(tp),
                                  error=created_errors[tp])
                results.append((tp, ErrorCode.KAFKA_STORAGE_ERROR))
                continue
            p = self.partitions.get(tp)
            if p is None:
                p = self.partitions[tp] = Partition(tp, self.broker_id)
            if s.topic in req.topic_ids:
                p.topic_id = req.topic_ids[s.topic]
            p.min_isr = self._min_isr(s.topic, len(s.replicas))
            if p.log is None:
                p.log = self.log_manager.get_log(tp)
            was_leader = p.is_leader
            new_epoch = s.leader_epoch != p.leader_epoch
            if new_epoch and self.fetcher_manager is not None:
                # KIP-461: a higher leader epoch clears a failed partition; it fetches again.
                self.fetcher_manager.on_leader_and_isr(tp, s.leader_epoch)
            p.apply_state(leader=s.leader, leader_epoch=s.leader_epoch,
                          partition_epoch=s.partition_epoch, controller_epoch=s.controller_epoch,
                          isr=s.isr, replicas=s.replicas, adding=s.adding_replicas,
                          removing=s.removing_replicas,
                          leader_recovery_state=s.leader_recovery_state)
            if s.leader == self.broker_id:
                if self.fetcher_manager is not None:
                    self.fetcher_manager.remove_partitions([tp])
                if new_epoch:
                    # Kafka writes the new epoch's start offset when becoming leader, so that
                    # OffsetForLeaderEpoch / diverging-epoch answers are right before any
                    # append. The start is the LEO *inside* the log dir's executor job: a
                    # truncation, follower append or old-epoch produce append queued there
                    # runs first, and changes the LEO (Kafka reads it under the partition's
                    # write lock, after removing the fetcher). Reading it here, on the loop,
                    # recorded a stale start and let replicas diverge (issue 15, finding 1).
                    epoch_starts.setdefault(self.log_manager.log_dir_of(tp), []).append(
                        (p, p.log, s.leader_epoch))
                p.become_leader(now, new_epoch or not was_leader)
                p.maybe_advance_hw()
                if p.leader_recovery_state == 1 and self.alter_partition is not None:
                    self.alter_partition.mark_recovered(p)
                if new_epoch or not was_leader:
                    self.events.info("become_leader", partition=str(tp),
                                     leader_epoch=s.leader_epoch, isr=list(s.isr),
                                     partition_epoch=s.partition_epoch,
                                     controller_epoch=req.controller_epoch,
                                     leo=p.log_end_offset, hw=p.high_watermark)
            else:
                if was_leader or new_epoch:
                    p.become_follower()
                    to_follow[tp] = p
                    self.events.info("become_follower", partition=str(tp), leader=s.leader,
                                     leader_epoch=s.leader_epoch,
                                     controller_epoch=req.controller_epoch,
                                     leo=p.log_end_offset)
            results.append((tp, ErrorCode.NONE))
        writes = [self.log_manager.run_in_dir(d, _assign_epochs, items)
                  for d, items in epoch_starts.items() if d is not None]
        if self.fetcher_manager is not None and to_follow:
            self.fetcher_manager.remove_partitions(list(to_follow))
            endpoints = {e.broker_id: e for e in req.live_leaders}
            self.fetcher_manager.add_partitions(
                {tp: p for tp, p in to_follow.items() if p.leader_id >= 0}, endpoints)
        for started, failed in await asyncio.gather(*writes):
            for p, epoch, start in started:
                # Only now is the epoch's start known; until then no follower may join the
                # ISR on the strength of it (become_leader set it to "pending").
                if p.leader_epoch == epoch and p.is_leader:
                    p.leader_epoch_start_offset = start
            for tp, error in failed:
                self.events.error("leader_epoch_checkpoint_failed", partition=str(tp),
                                  error=error)
        return results

    def _create_logs(self, tps: list[TopicPartition]) -> dict[TopicPartition, str]:
        """Executor: create the logs of new replicas; returns the ones that failed."""
        errors = {}
        for tp in tps:
            try:
                self.log_manager.get_or_create_log(tp)
            except KafkaStorageError as e:
                errors[tp] = str(e)
        return errors

    async def stop_replica(self, req) -> list[tuple[TopicPartition, ErrorCode]]:
        async with self._state_change:
            return await self._stop_replica(req)

    async def _stop_replica(self, req) -> list[tuple[TopicPartition, ErrorCode]]:
        self._check_controller(req.controller_epoch, req.broker_epoch)
        results = []
        for s in req.partition_states:
            tp = TopicPartition(s.topic, s.partition)
            p = self.partitions.get(tp)
            # The epoch is checked first: a stale StopReplica must leave the fetcher and the
            # KIP-461 failed-partition state alone (Kafka's stopReplicas order).
            if p is not None and fencing.stop_replica_is_stale(
                    s.leader_epoch if s.HasField("leader_epoch") else None, p.leader_epoch):
                results.append((tp, ErrorCode.FENCED_LEADER_EPOCH))
                continue
            if self.fetcher_manager is not None:
                self.fetcher_manager.remove_partitions([tp])
                self.fetcher_manager.on_stop_replica(tp)
            if s.delete_partition:
                self.partitions.pop(tp, None)
                if self.log_manager.get_log(tp) is not None:
                    try:
                        await self.log_manager.run(tp, self.log_manager.delete_log, tp)
                    except KafkaStorageError as e:
                        results.append((tp, ErrorCode.KAFKA_STORAGE_ERROR))
                        self.events.error("replica_deletion_failed", partition=str(tp),
                                          error=str(e))
                        continue
                self.topic_configs.pop(tp.topic, None)
                self.events.info("replica_deleted", partition=str(tp))
            elif p is not None:
                p.stopped = True
                p.become_follower()
                self.events.info("replica_stopped", partition=str(tp),
                                 leader_epoch=p.leader_epoch)
            results.append((tp, ErrorCode.NONE))
        return results

    def handle_log_dir_failure(self, log_dir: str, reason: str) -> list[TopicPartition]:
        """Take a log dir offline (seed 003): its partitions stop here. Returns them. The
        JBOD issue (C5) adds /restart_partitions and re-creation elsewhere on top."""
        lost = self.log_manager.mark_offline(log_dir, reason)
        if self.fetcher_manager is not None:
            self.fetcher_manager.remove_partitions(lost)
            self.fetcher_manager.on_log_dir_offline(lost)
        for tp in lost:
            p = self.partitions.get(tp)
            if p is not None:
                p.log = None
                p.become_follower()
        if lost or reason:
            self.events.error("log_dir_offline", log_dir=log_dir, reason=reason,
                              partitions=[str(tp) for tp in lost])
        return lost

    def update_metadata(self, req) -> None:
        self._check_controller(req.controller_epoch, req.broker_epoch)
        self.metadata.update(req)
        if self.fetcher_manager is not None:
            self.fetcher_manager.update_endpoints(self.metadata.brokers)

    # ------------------------------------------------------------------ produce

    async def produce(self, acks: int, timeout_ms: int,
                      entries: list[tuple[TopicPartition, bytes]]) -> list[ProduceResult]:
        if acks not in (-1, 0, 1):
            raise RequestError(ErrorCode.INVALID_REQUIRED_ACKS, f"acks must be -1, 0 or 1, "
                               f"got {acks}")
        self.metrics.produce_requests.inc()
        appended = await asyncio.gather(*(self._append(tp, records, acks)
                                          for tp, records in entries))
        if acks != -1:
            return [r for r, _ in appended]
        deadline = time.monotonic() + timeout_ms / 1000
        return list(await asyncio.gather(*(self._await_replication(tp, res, end, deadline)
                                           for (tp, _), (res, end) in zip(entries, appended))))

    async def _append(self, tp: TopicPartition, records: bytes, acks: int
                      ) -> tuple[ProduceResult, tuple[int, int]]:
        p = self.partitions.get(tp)
        if p is None or p.log is None:
            code = ErrorCode.NOT_LEADER_OR_FOLLOWER if tp in self.metadata.partitions else \
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            return ProduceResult(code, f"this broker has no replica of {tp}"
                                 if code == ErrorCode.NOT_LEADER_OR_FOLLOWER else
                                 f"unknown topic or partition {tp}"), (-1, -1)
        refused = fencing.produce_admission_error(acks, p.is_leader, len(p.isr), p.min_isr)
        if refused is ErrorCode.NOT_LEADER_OR_FOLLOWER:
            return ProduceResult(refused, f"broker {self.broker_id} is not the leader of "
                                          f"{tp}"), (-1, -1)
        if refused is not None:
            return ProduceResult(refused, f"the ISR of {tp} {list(p.isr)} is smaller than "
                                          f"min.insync.replicas={p.min_isr}"), (-1, -1)
        epoch = p.leader_epoch
        try:
            info = await self.log_manager.run(tp, p.log.append_as_leader, records, epoch)
        except (CorruptRecordError, RecordTooLargeError) as e:
            return ProduceResult(e.error_code, str(e)), (-1, -1)
        except KafkaStorageError as e:
            self.events.error("append_failed", partition=str(tp), log_dir=e.log_dir,
                              error=str(e))
            return ProduceResult(ErrorCode.KAFKA_STORAGE_ERROR, str(e)), (-1, -1)
        self.metrics.bytes_in.inc(info.valid_bytes)
        p.data.notify()
        p.maybe_advance_hw()
        return (ProduceResult(ErrorCode.NONE, "", info.first_offset, p.log.log_start_offset),
                (epoch, info.last_offset + 1))

    async def _await_replication(self, tp: TopicPartition, res: ProduceResult,
                                 end: tuple[int, int], deadline: float) -> ProduceResult:
        """Kafka's DelayedProduce: done when the HW reaches the batch's end, failed when this
        broker no longer leads, when the batch is no longer in the log as written (a leader
        epoch bump that truncated it), or when the ISR fell below min.insync.replicas. A bump
        that left this broker leading with the batch intact is no failure: the batch is
        committed once the HW passes it, whatever the epoch (issue 15)."""
        if res.error != ErrorCode.NONE:
            return res
        epoch, end_offset = end
        p = self.partitions.get(tp)
        while True:
            if p is None or self.partitions.get(tp) is not p or not p.is_leader:
                return ProduceResult(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                     f"leadership of {tp} changed before the records were "
                                     f"replicated")
            if p.leader_epoch != epoch and not _batch_intact(p, epoch, end_offset):
                return ProduceResult(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                     f"the records of {tp} were truncated by a leader change "
                                     f"before they were replicated")
            waiter = p.hw_moved.future()
            if p.high_watermark >= end_offset:
                return res
            if len(p.isr) < p.min_isr:
                return ProduceResult(ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                                     f"the ISR of {tp} shrank to {list(p.isr)} below "
                                     f"min.insync.replicas={p.min_isr} after the append")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return ProduceResult(ErrorCode.REQUEST_TIMED_OUT,
                                     f"records of {tp} were not replicated to the ISR in time")
            try:
                await asyncio.wait_for(asyncio.shield(waiter), remaining)
            except TimeoutError:
                pass

    # ------------------------------------------------------------------ fetch

    async def fetch(self, replica_id: int, broker_epoch: int, max_wait_ms: int, min_bytes: int,
                    max_bytes: int, parts: list[FetchPartitionRequest]) -> list[FetchResult]:
        """Serve a follower (replica_id >= 0: up to the LEO) or consumer (up to the HW) fetch,
        waiting up to max_wait_ms for min_bytes (Kafka's DelayedFetch)."""
        deadline = time.monotonic() + max_wait_ms / 1000
        while True:
            waiters = []
            for fp in parts:
                p = self.partitions.get(fp.tp)
                if p is not None:
                    waiters.append(p.data.future() if replica_id >= 0 else p.hw_moved.future())
            results = await self._read_all(replica_id, broker_epoch, max_bytes, parts)
            total = sum(len(r.records) for r in results)
            errors = any(r.error != ErrorCode.NONE or r.diverging for r in results)
            remaining = deadline - time.monotonic()
            if total >= min_bytes or errors or remaining <= 0 or not waiters:
                return results
            # Kafka's DelayedFetch is checked whenever *any* of its partitions can add bytes:
            # wake on the first one (the default ALL_COMPLETED parked every multi-partition
            # fetch - each follower fetcher's, each consumer's - until max_wait ran out).
            await asyncio.wait(waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            if time.monotonic() >= deadline:
                # one last read at the deadline, like Kafka's forceComplete
                return await self._read_all(replica_id, broker_epoch, max_bytes, parts)

    async def _read_all(self, replica_id: int, broker_epoch: int, max_bytes: int,
                        parts: list[FetchPartitionRequest]) -> list[FetchResult]:
        budget = max_bytes
        out = []
        for fp in parts:
            r = await self._read_one(replica_id, broker_epoch, fp, min(fp.max_bytes, budget),
                                     first=budget == max_bytes)
            budget = max(0, budget - len(r.records))
            out.append(r)
        return out

    async def _read_one(self, replica_id: int, broker_epoch: int, fp: FetchPartitionRequest,
                        max_bytes: int, first: bool) -> FetchResult:
        tp = fp.tp
        p = self.partitions.get(tp)
        if p is None or p.log is None:
            return FetchResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                               if tp not in self.metadata.partitions
                               else ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if not p.is_leader:
            return FetchResult(ErrorCode.NOT_LEADER_OR_FOLLOWER, leader_id=p.leader_id,
                               leader_epoch=p.leader_epoch)
        fenced = fencing.leader_epoch_error(fp.current_leader_epoch, p.leader_epoch)
        if fenced is ErrorCode.FENCED_LEADER_EPOCH:
            return FetchResult(fenced, leader_id=p.leader_id, leader_epoch=p.leader_epoch)
        if fenced is not None:
            return FetchResult(fenced)
        log = p.log
        pending = None
        if replica_id >= 0:
            div = leader_divergence(fp.last_fetched_epoch, fp.fetch_offset,
                                    log.end_offset_for_epoch(fp.last_fetched_epoch)
                                    if fp.last_fetched_epoch is not None and
                                    fp.last_fetched_epoch >= 0 else (-1, -1),
                                    log.log_start_offset)
            if div is OUT_OF_RANGE:
                return FetchResult(ErrorCode.OFFSET_OUT_OF_RANGE, p.high_watermark,
                                   log.log_start_offset, leader_id=p.leader_id,
                                   leader_epoch=p.leader_epoch,
                                   message=f"fetch offset {fp.fetch_offset} with last fetched "
                                           f"epoch {fp.last_fetched_epoch} is out of range for "
                                           f"{tp} (log start {log.log_start_offset})")
            if div is not None:
                return FetchResult(ErrorCode.NONE, p.high_watermark, log.log_start_offset,
                                   diverging=(div.epoch, div.end_offset))
            f = p.followers.get(replica_id)
            # A fetch from an older incarnation of the follower (KIP-903) is served, but its
            # offsets say nothing about the replica as it is now: they neither move the HW
            # nor let it back into the ISR.
            stale = f is not None and 0 <= broker_epoch < f.broker_epoch
            if not stale and replica_id in p.replicas and fp.fetch_offset <= log.log_end_offset:
                if self.pending_reads_in_sync and f is not None and \
                        isr_rules.pending_fetch_eligible(f, fp.fetch_offset):
                    # Seed 002: recorded before the read, so a slow read keeps it in sync.
                    self._fetch_ids += 1
                    pending = (f, self._fetch_ids)
                    f.pending_fetches[self._fetch_ids] = fp.fetch_offset
                p.record_follower_fetch(replica_id, fp.fetch_offset, fp.log_start_offset,
                                        self.clock(), broker_epoch)
                if p.isr_expansion_candidate(replica_id) and self.alter_partition is not None:
                    self.alter_partition.expand_isr(p, replica_id)
                p.maybe_advance_hw()
            upper = log.log_end_offset
        else:
            upper = p.high_watermark
        if upper <= fp.fetch_offset <= log.log_end_offset and \
                fp.fetch_offset >= log.log_start_offset:
            # Nothing to read yet - the common case for a caught-up follower or consumer, and
            # for most partitions of a multi-partition Fetch: answer without a read-pool
            # hand-off (one per idle partition per round trip otherwise; issue 7).
            if pending is not None:
                isr_rules.complete_pending_fetch(pending[0], pending[1], self.clock())
            return FetchResult(ErrorCode.NONE, p.high_watermark, log.log_start_offset, b"",
                               leader_id=p.leader_id, leader_epoch=p.leader_epoch)
        started = time.monotonic()
        try:
            read = asyncio.get_running_loop().run_in_executor(
                self._read_pool, log.read, fp.fetch_offset, max_bytes, upper, first)
            if replica_id >= 0 and self.pending_reads_in_sync:
                # Seed 002: give up leadership as soon as serving this follower has taken
                # longer than follower.fetch.process.time.max.ms, not when the read ends.
                done, _ = await asyncio.wait([read], timeout=self.process_time_max_ms / 1000)
                if not done:
                    self._maybe_relinquish(p, (time.monotonic() - started) * 1000)
            data = await read
        except OffsetOutOfRangeError as e:
            return FetchResult(ErrorCode.OFFSET_OUT_OF_RANGE, p.high_watermark,
                               log.log_start_offset, leader_id=p.leader_id,
                               leader_epoch=p.leader_epoch, message=str(e))
        except KafkaStorageError as e:
            self.events.error("read_failed", partition=str(tp), log_dir=e.log_dir, error=str(e))
            return FetchResult(ErrorCode.KAFKA_STORAGE_ERROR)
        finally:
            if pending is not None:  # removed when the read completes, also on error
                isr_rules.complete_pending_fetch(pending[0], pending[1], self.clock())
            if replica_id >= 0:
                # Also when the follower gave up waiting (its request was cancelled): a read
                # slower than its fetch timeout is as slow as it gets.
                self._maybe_relinquish(p, (time.monotonic() - started) * 1000)
        return FetchResult(ErrorCode.NONE, p.high_watermark, log.log_start_offset, data,
                           leader_id=p.leader_id, leader_epoch=p.leader_epoch)

    def _maybe_relinquish(self, p: Partition, serve_ms: float) -> None:
        """Seed 002: a leader too slow to serve its followers hands leadership to a healthy
        in-sync replica (once per leader epoch)."""
        if not isr_rules.should_relinquish(serve_ms, self.process_time_max_ms,
                                           self.pending_reads_in_sync):
            return
        if not p.is_leader or p.relinquished_epoch == p.leader_epoch or len(p.isr) < 2 or \
                self.alter_partition is None:
            return
        p.relinquished_epoch = p.leader_epoch
        self.events.warning("slow_follower_fetch", partition=str(p.tp),
                            leader_epoch=p.leader_epoch, serve_ms=round(serve_ms),
                            process_time_max_ms=self.process_time_max_ms, isr=list(p.isr))
        self.alter_partition.relinquish(p)

    # ------------------------------------------------------------------ offsets

    def list_offset(self, tp: TopicPartition, timestamp: int, current_leader_epoch: int | None,
                    replica_id: int) -> tuple[ErrorCode, int, int]:
        """(error, offset, leader epoch) for latest (-1) or earliest (-2); consumers see the HW
        as "latest", replicas the LEO (Kafka's rule)."""
        p = self.partitions.get(tp)
        if p is None or p.log is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1
        if not p.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1
        fenced = fencing.leader_epoch_error(current_leader_epoch, p.leader_epoch)
        if fenced is not None:
            return fenced, -1, -1
        if timestamp == EARLIEST_TIMESTAMP:
            return ErrorCode.NONE, p.log.log_start_offset, p.leader_epoch
        if timestamp == LATEST_TIMESTAMP:
            off = p.log.log_end_offset if replica_id >= 0 else p.high_watermark
            return ErrorCode.NONE, off, p.leader_epoch
        return ErrorCode.OFFSET_NOT_AVAILABLE, -1, -1

    def offset_for_leader_epoch(self, tp: TopicPartition, current_leader_epoch: int | None,
                                leader_epoch: int) -> tuple[ErrorCode, int, int]:
        p = self.partitions.get(tp)
        if p is None or p.log is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1
        if not p.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1
        fenced = fencing.leader_epoch_error(current_leader_epoch, p.leader_epoch)
        if fenced is not None:
            return fenced, -1, -1
        epoch, end = p.log.end_offset_for_epoch(leader_epoch)
        return ErrorCode.NONE, epoch, end

    def replica_log_info(self, tp: TopicPartition) -> tuple[ErrorCode, int, int, int]:
        """KIP-966 GetReplicaLogInfo: (error, last written leader epoch, current leader epoch,
        log end offset)."""
        p = self.partitions.get(tp)
        log = p.log if p is not None else self.log_manager.get_log(tp)
        if log is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1, -1
        return (ErrorCode.NONE, log.latest_epoch,
                p.leader_epoch if p is not None else -1, log.log_end_offset)

    # ------------------------------------------------------------------ background

    async def isr_expiration_loop(self) -> None:
        """Kafka's isr-expiration task, every replica.lag.time.max.ms / 2."""
        interval = max(0.05, self.lag_max_ms / 2000)
        while True:
            await asyncio.sleep(interval)
            self.maybe_shrink_isr()

    def maybe_shrink_isr(self) -> None:
        now = self.clock()
        for p in list(self.partitions.values()):
            out = p.out_of_sync(now, self.lag_max_ms, self.pending_reads_in_sync)
            if out and self.alter_partition is not None:
                self.alter_partition.shrink_isr(p, out, now)

    async def checkpoint_loop(self) -> None:
        interval = self.config["replica.high.watermark.checkpoint.interval.ms"] / 1000
        while True:
            await asyncio.sleep(interval)
            await self.checkpoint()

    async def checkpoint(self) -> None:
        for d in self.log_manager.online_dirs:
            try:
                await self.log_manager.run_in_dir(d, self.log_manager.checkpoint, d)
            except KafkaStorageError as e:
                self.events.error("checkpoint_failed", log_dir=d.path, error=str(e))

    async def retention_loop(self) -> None:
        interval = self.config["log.retention.check.interval.ms"] / 1000
        while True:
            await asyncio.sleep(interval)
            deleted = {}
            for d in self.log_manager.online_dirs:
                try:
                    deleted.update(await self.log_manager.run_in_dir(
                        d, self.log_manager.cleanup, d))
                except KafkaStorageError as e:
                    self.events.error("retention_failed", log_dir=e.log_dir, error=str(e))
            for tp, bases in deleted.items():
                self.events.info("segments_deleted", partition=str(tp), base_offsets=bases)


def _batch_intact(p: Partition, epoch: int, end_offset: int) -> bool:
    """Whether the log still holds, below ``end_offset``, what was written in ``epoch``: the
    LEO is past it and the leader-epoch cache still places its last offset in that epoch."""
    log = p.log
    return log is not None and log.log_end_offset >= end_offset and \
        log.epoch_cache.epoch_for_offset(end_offset - 1) == epoch


def _assign_epochs(items):
    """Log dir executor: record each new leader epoch's start offset (and its checkpoint) at
    the log end offset as it is *now*, after every mutation queued before this job. Returns
    ([(partition, epoch, start offset)], [(tp, error)])."""
    started, failed = [], []
    for p, log, epoch in items:
        if log.closed:
            continue
        start = log.log_end_offset
        # The in-memory cache takes the entry before its checkpoint is written, so the start
        # is known even when that write fails (the failure is reported, not hidden).
        started.append((p, epoch, start))
        try:
            log.epoch_cache.assign(epoch, start)
        except (KafkaStorageError, OSError) as e:
            failed.append((log.tp, str(e)))
    return started, failed
